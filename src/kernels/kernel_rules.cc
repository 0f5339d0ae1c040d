#include "kernels/kernel_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/dtype.h"
#include "kernels/contraction/grouped.h"
#include "kernels/contraction/index_map.h"
#include "ops/tessel_epilogue.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;
using contraction::Major;
using Reason = std::optional<std::string>;

constexpr int kMaxThreads = 1024;
constexpr int kMaxLoadsPerThread = 32;  // the gathers keep per-row validity in a u32 mask
constexpr int kHaloMaxAccumulators = 64;  // fp32 accumulators per thread of a halo warp tile

bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

// The loader of one operand tile (TileLoader / SimtLoader): `vec`-element vectors, each
// thread on one column of the tile, rows kRowStep = threads / (columns / vec) apart.
Reason check_operand(const Contraction& c, const Schedule& s, char name) {
  const bool is_a = name == 'A';
  const int vec = is_a ? s.a_vec : s.b_vec;
  const int max_vec = is_a ? c.a_vec : c.b_vec;
  const bool k_major = (is_a ? c.a_major : c.b_major) == Major::kK;
  const int rows_of_block = is_a ? s.block_m : s.block_n;
  // Packed groups: A's tile holds the k-tile of every group of the N tile side by side.
  const int block_k = is_a && s.groups_per_tile > 0 ? s.block_k * s.groups_per_tile : s.block_k;
  const int tile_rows = k_major ? rows_of_block : block_k;
  const int tile_cols = k_major ? block_k : rows_of_block;
  const char v = is_a ? 'a' : 'b';
  const DType dtype = is_a ? c.a_dtype : c.b_dtype;
  const size_t element = dtype_size(dtype);
  if (!is_pow2(vec) || vec > max_vector_elements(dtype))
    return fmt::format("{}_vec={} is not {}", v, vec,
                       element == 1 ? "1, 2, 4, 8 or 16" : "1, 2, 4 or 8");
  if (vec > max_vec) {
    return fmt::format("{}_vec={} exceeds the {} elements {} can be read in", v, vec, max_vec,
                       name);
  }
  if (s.instruction == Instruction::kSimt && vec * element > 16) {
    return fmt::format("{}_vec={} moves more than 16 bytes per load", v, vec);
  }
  if (!k_major && c.k_dims.size() != 1) {
    return fmt::format("{} is MN-major with {} K dims; the loaders walk a single K dim", name,
                       c.k_dims.size());
  }
  if (tile_cols % vec != 0)
    return fmt::format("{} tile columns not a multiple of the vector", name);
  const int vecs_per_row = tile_cols / vec;
  const int threads = s.threads();
  if (threads % vecs_per_row != 0) {
    return fmt::format("{} tile ({}x{}, vec {}): {} vectors per row do not divide {} threads", name,
                       tile_rows, tile_cols, vec, vecs_per_row, threads);
  }
  const int row_step = threads / vecs_per_row;
  if (tile_rows % row_step != 0) {
    return fmt::format("{} tile ({}x{}, vec {}): {} rows per pass do not divide {} rows", name,
                       tile_rows, tile_cols, vec, row_step, tile_rows);
  }
  if (tile_rows / row_step > kMaxLoadsPerThread) {
    return fmt::format("{} tile needs {} loads per thread per k-tile (at most {})", name,
                       tile_rows / row_step, kMaxLoadsPerThread);
  }
  if (s.instruction != Instruction::kSimt) {
    // SwizzledTile: panels of 128-byte rows, or rows of 64 bytes for mma.sync.
    const bool wgmma = s.instruction == Instruction::kWgmma;
    const size_t row_bytes = tile_cols * element;
    if (row_bytes % 128 != 0 && (wgmma || row_bytes != 64)) {
      return fmt::format("{} shared-memory rows of {} elements cannot be swizzled", name,
                         tile_cols);
    }
  }
  return std::nullopt;
}

// A warpgroup's wgmma tile (both wgmma kernels): m64nNk16 instructions, accumulators in
// registers.
Reason check_wgmma_tile(const Schedule& s) {
  if (s.warp_m % 64 != 0 || (s.warp_n != 64 && s.warp_n != 128 && s.warp_n != 256)) {
    return fmt::format("warpgroup tile {}x{}: wgmma needs m a multiple of 64 and n 64, 128 or 256",
                       s.warp_m, s.warp_n);
  }
  if (s.warp_m / 64 * s.warp_n / 2 > 128) {
    return fmt::format("warpgroup tile {}x{} needs more than 128 accumulators per thread", s.warp_m,
                       s.warp_n);
  }
  return std::nullopt;
}

Reason check_instruction(const Schedule& s) {
  switch (s.instruction) {
    case Instruction::kWgmma:
      if (auto r = check_wgmma_tile(s)) return r;
      if (s.block_k % 64 != 0)
        return fmt::format("block_k={}: wgmma reads k in 64-element rows", s.block_k);
      if (s.stages < 3 || s.stages > 5)
        return fmt::format("{} stages (3 to 5 for wgmma)", s.stages);
      return std::nullopt;
    case Instruction::kMmaSync:
      if (s.warp_m % 16 != 0 || s.warp_n % 16 != 0) {
        return fmt::format("warp tile {}x{}: mma.sync needs multiples of 16", s.warp_m, s.warp_n);
      }
      if (s.block_k % 32 != 0)
        return fmt::format("block_k={}: mma.sync needs a multiple of 32", s.block_k);
      if (s.stages < 2 || s.stages > 5) return fmt::format("{} stages (2 to 5)", s.stages);
      return std::nullopt;
    case Instruction::kSimt: {
      const bool wide = s.warp_n % 32 == 0;  // lanes 4 x 8, else 8 x 4
      if (s.warp_n % 16 != 0 || s.warp_m % (wide ? 16 : 32) != 0) {
        return fmt::format("SIMT warp tile {}x{}: needs 16x32 or 32x16 multiples", s.warp_m,
                           s.warp_n);
      }
      if (s.split_k != 1) return "the SIMT kernel does not split K";
      return std::nullopt;
    }
  }
  return "unknown instruction";
}

Reason check_halo(const Contraction& c, const Schedule& s, HaloLayout* out) {
  if (s.instruction != Instruction::kMmaSync) return "the halo kernel runs on mma.sync only";
  const bool grouped = s.groups_per_tile > 0;
  const std::optional<contraction::ConvWindow> w =
      grouped ? contraction::grouped_conv_geometry(c) : contraction::conv_window(c);
  if (!w)
    return grouped ? "the grouped halo kernel needs a grouped NHWC convolution (the group as the "
                     "batch dim, no channel slice)"
                   : "the halo kernel needs a stride-1, dilation-1, group-1 NHWC convolution (or "
                     "a stem of any stride: NCHW, or NHWC of at most 4 channels)";
  if (c.b_dtype != DType::kF16 && c.b_dtype != DType::kBF16)
    return fmt::format("the halo kernel needs f16 or bf16 weights, not {}", dtype_name(c.b_dtype));
  if (w->nchw_input) {
    // A stem reading the graph's NCHW input: f32 or the weights' dtype, converted while it is
    // staged, or int8 under f16 weights (a QDQ model's quantized input, staged by its bits).
    if (c.a_dtype != DType::kF32 && c.a_dtype != c.b_dtype &&
        !(c.a_dtype == DType::kI8 && c.b_dtype == DType::kF16))
      return fmt::format("halo kernel: NCHW input of dtype {}", dtype_name(c.a_dtype));
    if (w->channels > 16)
      return fmt::format("halo kernel: an NCHW input of {} channels (at most 16: a stem's)",
                         w->channels);
  } else {
    if (c.a_dtype != c.b_dtype)
      return fmt::format("halo kernel: operands of two dtypes ({}, {})", dtype_name(c.a_dtype),
                         dtype_name(c.b_dtype));
    // A stem of few channels is staged through registers into 8-byte slots instead (tap pairs).
    if (w->channels % 8 != 0 && !halo_tap_pairs(*w))
      return fmt::format(
          "halo kernel: {} input channels (a multiple of 8 for 16-byte loads; at "
          "most 4 only under an even horizontal stride and dilation 1: tap pairs)",
          w->channels);
  }
  if (s.tile_w <= 0 || s.tile_w % 16 != 0 || s.block_m % s.tile_w != 0)
    return fmt::format("halo tile width {} (a multiple of 16 dividing block_m={})", s.tile_w,
                       s.block_m);
  if (s.warp_m % 16 != 0 || (s.warp_n % 16 != 0 && s.warp_n != 8))
    return fmt::format("warp tile {}x{}: the halo kernel needs m a multiple of 16 and n 8 or a "
                       "multiple of 16", s.warp_m, s.warp_n);
  // The halo kernels run at 128 registers per thread (emit.cc's launch bounds; default_schedule's
  // halo_resident counts CTAs by it), of which a thread's fp32 accumulators may take half: more
  // spill (H200, a 7x7/2 stem of 96 outputs at batch 32: warps of 64x32, 64 accumulators, 92.9
  // us; 64x48, 96, 191.2 us; 64x64, 128, 495.0 us).
  if (s.warp_m * s.warp_n / 32 > kHaloMaxAccumulators)
    return fmt::format("warp tile {}x{}: {} accumulators per thread, more than the {} the halo "
                       "kernel's 128 registers leave room for",
                       s.warp_m, s.warp_n, s.warp_m * s.warp_n / 32, kHaloMaxAccumulators);
  int64_t group_count = 1, group_n = s.block_n;  // a dense conv: one group of block_n
  if (grouped) {
    const std::optional<contraction::GroupedLayout> gl = contraction::grouped_layout(c);
    if (!gl) return "no grouped layout";  // grouped_conv_geometry found one
    group_count = gl->groups;
    group_n = gl->n_per_group;
    if (s.groups_per_tile > group_count)
      return fmt::format("{} groups per tile of {} groups", s.groups_per_tile, group_count);
    if (s.block_n != s.groups_per_tile * group_n)
      return fmt::format("grouped halo block_n={} must be {} groups of {} channels", s.block_n,
                         s.groups_per_tile, group_n);
    if (s.warp_n % group_n != 0 && group_n % s.warp_n != 0)
      return fmt::format("warp tile of {} channels does not nest with groups of {}", s.warp_n,
                         group_n);
  } else if (s.block_n < c.n || s.block_n - c.n >= s.warp_n) {
    return fmt::format("halo block_n={} must cover N={} with less than one warp tile to spare",
                       s.block_n, c.n);
  }
  if (s.split_k != 1) return "the halo kernel does not split K";
  if (s.ctas < 0) return "negative CTA count";

  HaloLayout& l = *out;
  l.window = *w;
  l.tap_pairs = halo_tap_pairs(*w);
  l.groups_per_tile = grouped ? s.groups_per_tile : 1;
  l.group_c = static_cast<int>(l.tap_pairs ? 4 : (w->channels + 7) / 8 * 8);
  l.group_n = static_cast<int>(group_n);
  l.slices = (group_count + l.groups_per_tile - 1) / l.groups_per_tile;
  l.channels_padded = l.groups_per_tile * l.group_c;
  l.halo_h =
      static_cast<int>((s.tile_h() - 1) * w->stride_h + (w->kernel_h - 1) * w->dilation_h + 1);
  // Tap pairs read one column past an odd kernel's last tap (its weights are zero).
  l.halo_w = static_cast<int>((s.tile_w - 1) * w->stride_w +
                              (l.tap_pairs ? (w->kernel_w + 1) / 2 * 2 : (w->kernel_w - 1) * w->dilation_w + 1));
  l.pixel_pitch = l.tap_pairs ? 8 : ((l.channels_padded / 8) | 1) * 16;
  // Each row's columns stored by phase of the horizontal stride (tessel_halo.cuh): the row
  // rounded up to whole phases. Tap pairs keep plain column order (an even width).
  const int row_slots = l.tap_pairs ? l.halo_w
                                    : static_cast<int>((l.halo_w + w->stride_w - 1) / w->stride_w * w->stride_w);
  l.halo_bytes = (l.halo_h * row_slots * l.pixel_pitch + 127) / 128 * 128;
  l.k_padded = halo_k_padded(*w);
  if (s.block_k != l.k_padded)
    return fmt::format("halo block_k={} must be the padded K={}", s.block_k, l.k_padded);
  l.weight_pitch = l.k_padded * 2 + 16;
  l.weight_bytes = (s.block_n * l.weight_pitch + 127) / 128 * 128;
  l.epilogue_bytes = s.warps() * 16 * (s.warp_n + 8) * 4;
  l.buffer_bytes = std::max(l.halo_bytes, (l.epilogue_bytes + 127) / 128 * 128);
  l.tiles = w->images * ((w->out_h + s.tile_h() - 1) / s.tile_h()) *
            ((w->out_w + s.tile_w - 1) / s.tile_w);
  l.ctas_per_slice = s.ctas > 0 ? std::clamp<int64_t>(s.ctas / l.slices, 1, l.tiles) : l.tiles;
  l.buffers = l.ctas_per_slice < l.tiles ? 2 : 1;
  return std::nullopt;
}

Reason tma_operands(const Contraction& c, const Schedule& s, TmaLayout* out) {
  using device::TensorMapSpec;
  const bool int8 = contraction::int8_operands(c);
  if (!int8 && (c.a_dtype != c.b_dtype || (c.a_dtype != DType::kF16 && c.a_dtype != DType::kBF16)))
    return fmt::format("the TMA kernel reads f16 or bf16 operands of one type, or int8 ones (A {}, B {})",
                       dtype_name(c.a_dtype), dtype_name(c.b_dtype));
  if (!c.batch_dims.empty() || c.operands_swapped)
    return "the TMA kernel computes one GEMM (no batch or group dims, operands in order)";
  // wgmma transposes 16-bit operands read from shared memory, not integer ones.
  const bool b_mn = c.b_major == Major::kMN;
  if (c.a_major != Major::kK || (b_mn && (int8 || c.a_gather)))
    return "the TMA kernel reads A K-major, and B K-major or (a 16-bit GEMM's) MN-major";
  if (b_mn && s.block_k * dtype_size(c.a_dtype) != 128)
    return fmt::format("block_k={}: an MN-major B takes k-tiles of one 128-byte row of A", s.block_k);
  const TensorMapSpec::Type type = c.a_dtype == DType::kBF16 ? TensorMapSpec::Type::kBF16
                                   : int8                     ? TensorMapSpec::Type::kU8
                                                              : TensorMapSpec::Type::kF16;
  const int64_t elem = static_cast<int64_t>(dtype_size(c.a_dtype));
  const uint32_t chunk = static_cast<uint32_t>(s.block_k);  // elements of a k-tile row (check_tma)
  TmaLayout l;
  const size_t nd = c.maps.dims.size();
  TensorMapSpec& a = l.a;
  TensorMapSpec& b = l.b;
  a.type = b.type = type;
  a.operand = 0;
  b.operand = 1;
  // The swizzle of the rows (tessel_tma.cuh's descriptors): 128 or 64 bytes.
  a.swizzle = b.swizzle = s.block_k * elem == 64 ? TensorMapSpec::Swizzle::k64B : TensorMapSpec::Swizzle::k128B;
  if (!c.a_gather) {
    // A plain matrix: rows m lda apart, k contiguous.
    const std::vector<int64_t> st = contraction::element_strides(c.maps.a, nd);
    if (c.k_dims.empty() || st[c.k_dims.back()] != 1) return "A is not contiguous along K";
    const int64_t lda = c.m_dims.empty() ? c.k : st[c.m_dims.back()];
    a.mode = TensorMapSpec::Mode::kTiled;
    a.rank = 2;
    a.offset_bytes = contraction::element_offset(c.maps.a) * elem;
    a.dims = {static_cast<uint64_t>(c.k), static_cast<uint64_t>(c.m), 0, 0, 0};
    a.strides = {static_cast<uint64_t>(lda * elem), 0, 0, 0};
    a.box = {chunk, static_cast<uint32_t>(s.block_m), 0, 0, 0};
    l.channels = c.k;
  } else {
    const std::optional<contraction::ConvWindow> w = contraction::conv_geometry(c);
    if (!w) return "A is a gather the TMA kernel cannot map (neither a plain matrix nor an NHWC convolution)";
    l.a_im2col = true;
    l.window = *w;
    l.taps = w->kernel_h * w->kernel_w;
    l.kernel_w = w->kernel_w;
    l.channels = w->channels;
    const int64_t pitch = w->channel_pitch * elem;
    a.mode = TensorMapSpec::Mode::kIm2col;
    a.rank = 4;
    a.offset_bytes = w->channel_offset * elem;
    a.dims = {static_cast<uint64_t>(w->channels), static_cast<uint64_t>(w->in_w),
              static_cast<uint64_t>(w->in_h), static_cast<uint64_t>(w->images), 0};
    a.strides = {static_cast<uint64_t>(pitch), static_cast<uint64_t>(pitch * w->in_w),
                 static_cast<uint64_t>(pitch * w->in_w * w->in_h), 0};
    a.element_strides = {1, static_cast<uint32_t>(w->stride_w), static_cast<uint32_t>(w->stride_h), 1, 1};
    // Window origins from -pad to exactly the last output's: out_w of them along w.
    a.lower = {static_cast<int32_t>(-w->pad_left), static_cast<int32_t>(-w->pad_top), 0};
    a.upper = {static_cast<int32_t>((w->out_w - 1) * w->stride_w - w->pad_left - (w->in_w - 1)),
               static_cast<int32_t>((w->out_h - 1) * w->stride_h - w->pad_top - (w->in_h - 1)), 0};
    a.channels_per_pixel = chunk;
    a.pixels_per_column = static_cast<uint32_t>(s.block_m);
    if (w->kernel_w * w->dilation_w > 65535 || w->kernel_h * w->dilation_h > 65535)
      return "a window wider than the 16-bit im2col offsets";
    if (s.row_windows) {
      // One box of the tile's pixel run and the window's width per kernel row: {chunk, run +
      // (kernel_w - 1) * dilation_w, 1, 1} at (c, ow0 - pad_left, oh * stride_h - pad_top + r *
      // dilation_h, image), zeros outside the image; tap s reads it from row s * dilation_w.
      const int64_t rows = s.block_m + (w->kernel_w - 1) * w->dilation_w;
      if (w->stride_w != 1) return "row windows need a stride of 1 along the width";
      if (w->out_w % s.block_m != 0)
        return fmt::format("row windows: an output width of {} is no whole number of {}-pixel runs", w->out_w,
                           s.block_m);
      if (rows > 256) return fmt::format("row windows: a box of {} pixels (at most 256)", rows);
      if (c.b_major != Major::kK) return "row windows read B K-major";
      l.a_row_windows = true;
      l.a_box_rows = rows;
      a.mode = TensorMapSpec::Mode::kTiled;
      a.element_strides = {1, 1, 1, 1, 1};
      a.lower = a.upper = {0, 0, 0};
      a.channels_per_pixel = a.pixels_per_column = 0;
      a.box = {chunk, static_cast<uint32_t>(rows), 1, 1, 0};
    }
  }
  if (s.row_windows && !l.a_row_windows) return "row windows need a convolution's gathered A";
  // B: a plain matrix either way, through a tiled map.
  if (c.b_gather) return "B is not a plain matrix";
  const std::vector<int64_t> st = contraction::element_strides(c.maps.b, nd);
  b.mode = TensorMapSpec::Mode::kTiled;
  b.offset_bytes = contraction::element_offset(c.maps.b) * elem;
  if (b_mn) {
    // (K, N), n contiguous: boxes of 64 columns (one 128-byte swizzled row) by block_k rows,
    // block_n / 64 of them per k-tile.
    if (c.n_dims.size() != 1 || c.k_dims.size() != 1 || st[c.n_dims[0]] != 1)
      return "B is not a plain MN-major matrix";
    const int64_t ldb = st[c.k_dims[0]];
    if (ldb < c.n) return "B's rows overlap";
    l.b_mn_major = true;
    b.rank = 2;
    b.dims = {static_cast<uint64_t>(c.n), static_cast<uint64_t>(c.k), 0, 0, 0};
    b.strides = {static_cast<uint64_t>(ldb * elem), 0, 0, 0};
    b.box = {64, chunk, 0, 0, 0};
    b.swizzle = TensorMapSpec::Swizzle::k128B;
  } else {
    // [N, taps, channels], K-major and dense along k.
    if (st[c.k_dims.back()] != 1) return "B is not a plain K-major matrix";
    const int64_t ldb = c.n_dims.empty() ? c.k : st[c.n_dims.back()];
    if (ldb < c.k) return "B's rows overlap";
    b.rank = 3;
    b.dims = {static_cast<uint64_t>(l.channels), static_cast<uint64_t>(l.taps),
              static_cast<uint64_t>(c.n), 0, 0};
    b.strides = {static_cast<uint64_t>(l.channels * elem), static_cast<uint64_t>(ldb * elem), 0, 0};
    b.box = {chunk, 1, static_cast<uint32_t>(s.block_n), 0, 0};
  }
  l.chunks = (l.channels + chunk - 1) / chunk;
  for (const TensorMapSpec* m : {&a, &b})
    if (auto r = device::check_tensor_map(*m)) return fmt::format("{}: {}", m == &a ? "A" : "B", *r);
  *out = std::move(l);
  return std::nullopt;
}

Reason check_tma(const Contraction& c, const Schedule& s, TmaLayout* out) {
  if (s.instruction != Instruction::kWgmma) return "the TMA kernel issues wgmma";
  // One swizzled row per k-tile: 128 bytes, or 64 (the 64-byte swizzle: channel counts of half
  // a 128-byte row, as 64 int8 channels, zero-fill no half-empty rows).
  const int64_t row = s.block_k * static_cast<int64_t>(dtype_size(c.a_dtype));
  if (row != 128 && row != 64)
    return fmt::format("block_k={}: the TMA kernel moves k-tiles of one 128- or 64-byte row ({} or {} "
                       "elements)", s.block_k, 128 / dtype_size(c.a_dtype), 64 / dtype_size(c.a_dtype));
  if (s.stages < 2 || s.stages > 8) return fmt::format("{} stages (2 to 8 for the TMA kernel)", s.stages);
  if (s.split_k != 1) return "the TMA kernel does not split K";
  if (s.groups_per_tile != 0) return "the TMA kernel takes no packed groups";
  if ((s.warp_m != s.block_m && 2 * s.warp_m != s.block_m) || s.warp_n != s.block_n)
    return fmt::format("warpgroup tile {}x{} is neither the CTA tile {}x{} (each consumer "
                       "warpgroup computes whole tiles) nor its half along M (cooperative)",
                       s.warp_m, s.warp_n, s.block_m, s.block_n);
  if (auto r = check_wgmma_tile(s)) return r;
  if (s.block_m > 256 || s.block_n > 256)
    return fmt::format("CTA tile {}x{}: TMA boxes of at most 256 rows", s.block_m, s.block_n);
  if (s.ctas < 0) return "negative CTA count";
  return tma_operands(c, s, out);
}

// int8 operands (mma.sync m16n8k32, tessel_mma.cuh): what the kernels take of them.
Reason check_int8(const Contraction& c, const Schedule& s) {
  const bool a8 = contraction::is_int8_operand(c.a_dtype), b8 = contraction::is_int8_operand(c.b_dtype);
  if (!a8 && !b8) return std::nullopt;
  if (s.instruction == Instruction::kSimt)
    return "the SIMT kernel reads f16, bf16 or f32 operands, not i8 or u8";
  if (!contraction::int8_operands(c))
    return fmt::format("int8 Tensor Core contractions need B i8 and A i8 or u8 (A {}, B {})",
                       dtype_name(c.a_dtype), dtype_name(c.b_dtype));
  if (s.instruction == Instruction::kWgmma && s.mainloop != Mainloop::kTma)
    return "int8 on wgmma runs in the TMA kernel only (the cp.async wgmma kernel takes 16-bit operands)";
  if (s.block_k % 64 != 0)
    return fmt::format("block_k={}: int8 mma.sync needs a multiple of 64 (two k32 steps per k-tile)",
                       s.block_k);
  for (const auto& [name, major] : {std::pair{"A", c.a_major}, std::pair{"B", c.b_major}}) {
    if (major != Major::kK)
      return fmt::format("{} is {}-major: int8 operands must be K-major (ldmatrix .trans moves 16-bit "
                         "elements only)", name, name[0] == 'A' ? "M" : "N");
  }
  if (s.groups_per_tile > 0) return "packed groups run f16 or bf16 operands, not i8";
  for (const auto& [v, vec] : {std::pair{'a', s.a_vec}, std::pair{'b', s.b_vec}}) {
    if (vec < 2)
      return fmt::format("{}_vec={}: int8 loads move at least 2 elements (2 to 16 bytes)", v, vec);
  }
  return std::nullopt;
}

// The packed-groups mainloop (contraction/grouped.h, MmaKernel with kGroupsPerTile > 0).
Reason check_groups(const Contraction& c, const Schedule& s) {
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  if (!l) return "packed groups need a grouped contraction (one batch dim offsetting the channels)";
  if (s.instruction != Instruction::kMmaSync) return "packed groups run on mma.sync only";
  if (s.split_k != 1) return "packed groups do not split K";
  const int64_t cog = l->n_per_group, cig = l->ci_per_group, cip = l->ci_padded;
  const int64_t gt = s.groups_per_tile;
  if (cog % 8 != 0)
    return fmt::format("{} output channels per group: each mma n8 fragment must hold one group's "
                       "(a multiple of 8)", cog);
  if (s.block_n != gt * cog)
    return fmt::format("block_n={} is not {} groups of {} channels", s.block_n, gt, cog);
  if (s.warp_n % cog != 0 && cog % s.warp_n != 0)
    return fmt::format("warp_n={} and {} channels per group: neither divides the other", s.warp_n,
                       cog);
  if (s.block_k % cip != 0)
    return fmt::format("block_k={} is no whole number of taps of {} channels per group{}",
                       s.block_k, cip, cip != cig ? fmt::format(" ({} padded)", cig) : "");
  if (s.a_vec > cig) return fmt::format("a_vec={} crosses groups of {} channels", s.a_vec, cig);
  return std::nullopt;
}

}  // namespace

int max_vector_elements(DType t) { return dtype_size(t) == 1 ? 16 : 8; }

bool halo_tap_pairs(const contraction::ConvWindow& w) {
  // Whole pixels of the stem's image (a grouped window's pixels hold every group's channels).
  const bool whole_pixels = w.channel_offset == 0 && w.channel_pitch == w.channels;
  return whole_pixels && ops::stem_tap_pairs(w.channels, w.stride_w, w.dilation_w);
}

int halo_k_padded(const contraction::ConvWindow& w) {
  const int64_t k = halo_tap_pairs(w) ? w.kernel_h * ((w.kernel_w + 1) / 2) * 8
                                      : w.kernel_h * w.kernel_w * ((w.channels + 7) / 8 * 8);
  return static_cast<int>((k + 15) / 16 * 16);
}

std::optional<HaloLayout> halo_layout(const Contraction& c, const Schedule& s, std::string* why) {
  HaloLayout l;
  Reason r = s.mainloop == Mainloop::kHalo ? check_halo(c, s, &l) : Reason("not a halo schedule");
  if (r) {
    if (why) *why = *r;
    return std::nullopt;
  }
  return l;
}

std::optional<TmaLayout> tma_layout(const Contraction& c, const Schedule& s, std::string* why) {
  TmaLayout l;
  Reason r = s.mainloop == Mainloop::kTma ? check_tma(c, s, &l) : Reason("not a TMA schedule");
  if (r) {
    if (why) *why = *r;
    return std::nullopt;
  }
  return l;
}

std::optional<std::string> check_schedule(const Contraction& c, const Schedule& s) {
  if (s.mainloop == Mainloop::kTma) {
    if (s.block_m < 1 || s.block_n < 1 || s.warp_m < 1 || s.warp_n < 1) return "non-positive tile";
    if (s.raster < 1) return "raster group must be >= 1";
    TmaLayout l;
    return check_tma(c, s, &l);
  }
  if (s.mainloop == Mainloop::kHalo) {
    if (s.block_m < 1 || s.block_n < 1 || s.warp_m < 1 || s.warp_n < 1) return "non-positive tile";
    if (s.block_m % s.warp_m != 0 || s.block_n % s.warp_n != 0) {
      return fmt::format("warp tile {}x{} does not divide block tile {}x{}", s.warp_m, s.warp_n,
                         s.block_m, s.block_n);
    }
    if (s.threads() > kMaxThreads)
      return fmt::format("{} threads per CTA (at most {})", s.threads(), kMaxThreads);
    HaloLayout l;
    return check_halo(c, s, &l);
  }
  if (s.block_m < 1 || s.block_n < 1 || s.block_k < 1 || s.warp_m < 1 || s.warp_n < 1) {
    return "non-positive tile";
  }
  if (s.block_m % s.warp_m != 0 || s.block_n % s.warp_n != 0) {
    return fmt::format("warp tile {}x{} does not divide block tile {}x{}", s.warp_m, s.warp_n,
                       s.block_m, s.block_n);
  }
  if (s.threads() > kMaxThreads)
    return fmt::format("{} threads per CTA (at most {})", s.threads(), kMaxThreads);
  if (s.raster < 1) return "raster group must be >= 1";
  if (auto r = check_instruction(s)) return r;
  if (auto r = check_int8(c, s)) return r;
  if (s.groups_per_tile < 0) return "negative groups per tile";
  if (s.groups_per_tile > 0)
    if (auto r = check_groups(c, s)) return r;
  if (auto r = check_operand(c, s, 'A')) return r;
  if (auto r = check_operand(c, s, 'B')) return r;
  const int64_t k_tiles = (c.k + s.block_k - 1) / s.block_k;
  if (s.split_k < 1 || s.split_k > k_tiles)
    return fmt::format("split_k={} with {} k-tiles", s.split_k, k_tiles);
  const int64_t per_split = (k_tiles + s.split_k - 1) / s.split_k;
  if ((k_tiles + per_split - 1) / per_split != s.split_k) {
    return fmt::format("split_k={} over {} k-tiles leaves a split empty", s.split_k, k_tiles);
  }
  return std::nullopt;
}

size_t smem_bytes(const Contraction& c, const Schedule& s) {
  if (s.mainloop == Mainloop::kHalo) {
    const std::optional<HaloLayout> l = halo_layout(c, s);
    return l ? l->smem_bytes() : 0;
  }
  if (s.mainloop == Mainloop::kTma) {
    // TmaWgmmaKernel::kSmemBytes: the stages, the 8 consumer warps' (16, 64) fp32 slabs and
    // 16-bit staging tiles, the barriers (full and empty per stage, two turns), the
    // swizzle-atom alignment.
    const size_t row = size_t(s.block_k) * dtype_size(c.a_dtype);  // 128 or 64 bytes
    // Row windows: A's box of the run and the window's width in whole swizzle atoms, B per tap.
    size_t a_rows = s.block_m, b_rows = s.block_n;
    if (s.row_windows)
      if (const std::optional<TmaLayout> l = tma_layout(c, s)) {
        const size_t atom = 1024 / row;  // rows of a swizzle atom
        a_rows = (size_t(l->a_box_rows) + atom - 1) / atom * atom;
        b_rows = size_t(s.block_n) * l->kernel_w;
      }
    const size_t pipeline = size_t(s.stages) * (a_rows + b_rows) * row;
    const size_t staging = size_t(8) * (16 * (64 + 8) * 4 + 16 * 64 * 2);  // slab + store staging
    return pipeline + staging + (2 * s.stages + 2) * 8 + 1024;
  }
  const size_t bm = s.block_m, bn = s.block_n, bk = s.block_k;
  const size_t warps = s.warps();
  if (s.instruction == Instruction::kSimt) {
    const size_t pipeline = bk * ((bm + 4) + (bn + 4)) * 4;
    const size_t staging = warps * s.warp_m * (s.warp_n + 4) * 4;
    return std::max(pipeline, staging);
  }
  const size_t a_cols = bk * std::max(1, s.groups_per_tile);  // packed groups: every group's k
  const size_t pipeline =
      s.stages * (bm * a_cols * dtype_size(c.a_dtype) + bn * bk * dtype_size(c.b_dtype));
  const size_t staging = warps * 16 * (s.warp_n + 8) * 4;
  const size_t align = s.instruction == Instruction::kWgmma ? 1024 : 0;
  const size_t flag = s.split_k > 1 ? 16 : 0;
  return std::max(pipeline, staging) + align + flag;
}

}  // namespace tessel::kernels
