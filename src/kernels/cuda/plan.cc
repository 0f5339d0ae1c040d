// Kernel planning: derives the thread mapping, store vectors, shared memory, grid and
// workspace of a generated contraction kernel, and rejects schedules that cannot implement
// a problem with a reason the tuner and `tessel explain` can print.
#include <algorithm>
#include <numeric>
#include <fmt/format.h>

#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/kernel_plan.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/contraction/grouped.h"
#include "kernels/kernel_rules.h"

namespace tessel::kernels::cuda {
namespace {

using contraction::Access;
using contraction::Contraction;
using contraction::Epilogue;
using contraction::EpilogueOpKind;
using contraction::Major;
using contraction::StoreMap;
using kernels::Instruction;
using kernels::Schedule;

using Reason = std::optional<std::string>;

constexpr int kMaxSmemBytes = 227 * 1024;  // opt-in limit of sm_90 (sm_80: 163 KiB)
constexpr int kMaxIters = 32;              // GatherX keeps per-row validity in a u32 mask
constexpr int64_t kInt32Safe = (int64_t{1} << 31) - (int64_t{1} << 24);

bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

int64_t coeff(const contraction::AffineIndex& ix, int dim) {
  return dim < static_cast<int>(ix.coeffs.size()) ? ix.coeffs[dim] : 0;
}

// The largest vector (16 for 1-byte elements, 8, 4, 2 or 1 elements) in which an operand can be
// read along the innermost dim of `run_dims` (its k dims when K-major, its m/n dims when MN-major):
// the run dim must step the tensor's stride-1 dim by exactly 1 and never need a bounds check there,
// and every other term of the flat offset must be a multiple of the vector so that each vector is
// contiguous and aligned.
int max_vector(const Contraction& c, const Access& acc, const std::vector<int>& run_dims) {
  if (run_dims.empty() || acc.shape.empty()) return 1;
  const int inner = run_dims.back();
  const int last = static_cast<int>(acc.shape.size()) - 1;
  const auto& ix_last = acc.index[last];
  if (coeff(ix_last, inner) != 1) return 1;
  const std::vector<int64_t> strides = strides_of(acc.shape);
  int64_t g = c.maps.dims[inner].extent;  // the run must not cross its dim's end
  // Where the stride-1 dim can leave its range (packed groups past the last group), the
  // gathers check each vector's first element: a vector that divides the extent, like every
  // term below, is then all in or all out.
  int64_t lo = ix_last.offset, hi = ix_last.offset;
  for (size_t j = 0; j < c.maps.dims.size(); ++j) {
    const int64_t span = coeff(ix_last, static_cast<int>(j)) * (c.maps.dims[j].extent - 1);
    (span < 0 ? lo : hi) += span;
  }
  if (lo < 0 || hi >= acc.shape[last]) g = std::gcd(g, acc.shape[last]);
  for (size_t d = 0; d < acc.shape.size(); ++d) {
    g = std::gcd(g, strides[d] * acc.index[d].offset);
    for (size_t j = 0; j < c.maps.dims.size(); ++j) {
      if (static_cast<int>(j) == inner || c.maps.dims[j].extent == 1) continue;  // 1: always 0
      g = std::gcd(g, strides[d] * coeff(acc.index[d], static_cast<int>(j)));
    }
  }
  for (int v : {16, 8, 4, 2}) {
    if (g % v == 0 && v <= kernels::max_vector_elements(acc.dtype)) return v;
  }
  return 1;
}

Reason check_access(const Contraction& c, const Access& acc, char name) {
  const size_t ndims = c.maps.dims.size();
  if (acc.index.size() != acc.shape.size()) {
    return fmt::format("{}: index map has {} entries for a rank-{} tensor", name,
                       acc.index.size(), acc.shape.size());
  }
  for (const auto& ix : acc.index) {
    if (ix.coeffs.size() > ndims) return fmt::format("{}: index has more coefficients than dims", name);
  }
  return std::nullopt;
}

// The output must be C[batch..., m..., n] with n innermost: the store map places (m, n)
// and the batch dims only add a constant offset (batch matmul) or a channel offset
// (grouped conv). Checks that reading of maps.c.
Reason check_output_map(const Contraction& c) {
  const Access& out = c.maps.c;
  if (out.shape.empty() || out.index.size() != out.shape.size()) return "output index map is malformed";
  if (c.n_dims.size() > 1) return fmt::format("N spans {} dims; the store map needs one", c.n_dims.size());
  const int n_dim = c.n_dims.empty() ? -1 : c.n_dims[0];  // none: N = 1, n is always 0
  auto is_batch = [&](int j) {
    return std::find(c.batch_dims.begin(), c.batch_dims.end(), j) != c.batch_dims.end();
  };
  const auto& inner = out.index.back();
  if ((n_dim >= 0 && coeff(inner, n_dim) != 1) || inner.offset != 0) {
    return "output channel index is not n (+ batch offset)";
  }
  for (size_t j = 0; j < c.maps.dims.size(); ++j) {
    const int jj = static_cast<int>(j);
    if (jj != n_dim && coeff(inner, jj) != 0 && !is_batch(jj) && c.maps.dims[j].extent > 1) {
      return "output channel index depends on m or k";
    }
  }
  // Outer dims: each one M or batch dim with coefficient 1, the M dims in m_dims order with
  // matching extents, so that the flat m is the row of a row-major output.
  size_t next_m = 0;
  for (size_t d = 0; d + 1 < out.shape.size(); ++d) {
    int found = -1;
    for (size_t j = 0; j < c.maps.dims.size(); ++j) {
      if (coeff(out.index[d], static_cast<int>(j)) != 0) {
        if (found >= 0) return fmt::format("output dim {} mixes iteration dims", d);
        found = static_cast<int>(j);
      }
    }
    // An output dim of extent 1 indexes nothing (its iteration dim, if any, is not a group
    // member either: the matcher drops extent-1 dims).
    if (out.shape[d] == 1 && out.index[d].offset == 0 &&
        (found < 0 || c.maps.dims[found].extent == 1)) {
      continue;
    }
    if (found < 0 || out.index[d].offset != 0 || coeff(out.index[d], found) != 1) {
      return fmt::format("output dim {} is not a plain iteration dim", d);
    }
    if (is_batch(found)) {
      // Batch dims precede the M dims, so that the flat m addresses whole rows.
      if (next_m != 0) return fmt::format("output dim {} puts a batch dim inside the M dims", d);
      continue;
    }
    if (next_m >= c.m_dims.size() || c.m_dims[next_m] != found ||
        c.maps.dims[found].extent != out.shape[d]) {
      return fmt::format("output dim {} does not follow the M dims in order", d);
    }
    ++next_m;
  }
  if (next_m != c.m_dims.size()) return "output does not cover every M dim";
  return std::nullopt;
}

// Thread mapping of one operand tile onto the CTA (TileLoader / SimtLoader).
Reason plan_operand(const Contraction& c, const Schedule& s, Instruction instr, int threads,
                    char name, int sched_vec, OperandPlan* op) {
  const bool is_a = name == 'A';
  op->access = is_a ? &c.maps.a : &c.maps.b;
  op->name = name;
  op->row_dims = is_a ? c.m_dims : c.n_dims;
  op->rows = is_a ? c.m : c.n;
  op->k_major = (is_a ? c.a_major : c.b_major) == Major::kK;
  op->vec = sched_vec;
  const int block_rows = is_a ? s.block_m : s.block_n;
  op->tile_rows = op->k_major ? block_rows : s.block_k;
  op->tile_cols = op->k_major ? s.block_k : block_rows;

  if (!is_pow2(sched_vec) || sched_vec > kernels::max_vector_elements(op->access->dtype)) {
    return fmt::format("{}_vec={} is not {}", is_a ? 'a' : 'b', sched_vec,
                       dtype_size(op->access->dtype) == 1 ? "1, 2, 4, 8 or 16" : "1, 2, 4 or 8");
  }
  const int legal = max_vector(c, *op->access, op->k_major ? c.k_dims : op->row_dims);
  if (sched_vec > legal) {
    return fmt::format("{}_vec={} exceeds the {} elements {} can be read in (contiguity/alignment)",
                       is_a ? 'a' : 'b', sched_vec, legal, name);
  }
  if (instr == Instruction::kSimt && sched_vec * static_cast<int>(dtype_size(op->access->dtype)) > 16) {
    return fmt::format("{}_vec={} moves more than 16 bytes per load", is_a ? 'a' : 'b', sched_vec);
  }
  if (!op->k_major) {
    // MN-major operands walk k one row at a time: one k dim, and no k term needs a bounds
    // check (a GEMM operand stored (k, m)).
    if (c.k_dims.size() != 1) {
      return fmt::format("{} is MN-major with {} K dims; only a single K dim is supported", name,
                         c.k_dims.size());
    }
    if (auto r = check_gather(c, *op)) return r;
  }
  if (op->tile_cols % sched_vec != 0) return fmt::format("{} tile columns not a multiple of the vector", name);
  const int vecs_per_row = op->tile_cols / sched_vec;
  if (threads % vecs_per_row != 0) {
    return fmt::format("{} tile ({}x{}, vec {}): {} vectors per row do not divide {} threads", name,
                       op->tile_rows, op->tile_cols, sched_vec, vecs_per_row, threads);
  }
  const int row_step = threads / vecs_per_row;
  if (op->tile_rows % row_step != 0) {
    return fmt::format("{} tile ({}x{}, vec {}): {} rows per pass do not divide {} rows", name,
                       op->tile_rows, op->tile_cols, sched_vec, row_step, op->tile_rows);
  }
  op->iters = op->tile_rows / row_step;
  if (op->iters > kMaxIters) {
    return fmt::format("{} tile needs {} loads per thread per k-tile (at most {})", name, op->iters,
                       kMaxIters);
  }
  if (instr != Instruction::kSimt) {
    // SwizzledTile: rows of 64 B or panels of 128 B rows; wgmma reads only the latter (its
    // 128-byte swizzle mode).
    const bool wgmma = instr == Instruction::kWgmma;
    const int element = static_cast<int>(dtype_size(op->access->dtype));
    const int row_bytes = op->tile_cols * element;
    if (row_bytes % 128 != 0 && (wgmma || row_bytes != 64)) {
      const std::string or_64_bytes = wgmma ? "" : fmt::format("{} or ", 64 / element);
      return fmt::format("{} shared-memory rows of {} elements cannot be swizzled (need {}a "
                         "multiple of {})", name, op->tile_cols, or_64_bytes, 128 / element);
    }
  }
  return std::nullopt;
}

// The channels-first stores, contiguous along m within an image row (tessel_epilogue.cuh
// stores them walking m). A vector of v consecutive m stays in one row, aligned, when v divides
// the output width; it tiles the kernels' slabs (16 rows at multiples of 16 for the Tensor Core
// kernels, warp_m rows at multiples of warp_m for SIMT) when v divides warp_m and 16. The
// depth_to_space form puts consecutive m `block` elements apart: scalar stores.
Reason plan_nchw_store(const Contraction& c, const Epilogue& e, const Schedule& s, KernelPlan* p) {
  const StoreMap& st = e.store;
  const bool d2s = st.kind == StoreMap::Kind::kDepthToSpaceNchw;
  const int64_t b2 = d2s ? int64_t{st.block} * st.block : 1;
  if (st.ld != 0 || st.channel_offset != 0) return "an NCHW store takes no ld or channel offset";
  if (c.batch != 1) return "NCHW store of a batched contraction";
  if (st.block < 1 || c.n % b2 != 0) {
    return fmt::format("depth_to_space block {} does not divide N={} into block^2 groups", st.block, c.n);
  }
  if (st.out_h < 1 || st.out_w < 1 || c.m % (st.out_h * st.out_w) != 0) {
    return fmt::format("NCHW store: M={} is not images x {} x {}", c.m, st.out_h, st.out_w);
  }
  p->out_channels = c.n / b2;
  p->store_n_stride = 1;
  int v = d2s ? 1 : 16 / static_cast<int>(dtype_size(e.out_dtype));
  while (v > 1 && (st.out_w % v != 0 || s.warp_m % v != 0 || 16 % v != 0)) v /= 2;
  p->store_vec = v;
  return std::nullopt;
}

Reason plan_store(const Contraction& c, const Epilogue& e, const Schedule& s, KernelPlan* p) {
  const StoreMap& st = e.store;
  const int out_size = static_cast<int>(dtype_size(e.out_dtype));
  int64_t units = c.n;  // channels along which output vectors run
  int64_t ld = st.ld != 0 ? st.ld : c.maps.c.shape.back();
  int64_t offset = 0;
  p->store_n_stride = 1;
  switch (st.kind) {
    case StoreMap::Kind::kPlain:
      break;
    case StoreMap::Kind::kChannelSlice:
      if (st.ld <= 0) return "channel-slice store needs ld (channels of the concat buffer)";
      if (st.channel_offset < 0 || st.channel_offset + c.maps.c.shape.back() > st.ld) {
        return fmt::format("channel slice [{}, {}) exceeds the buffer's {} channels",
                           st.channel_offset, st.channel_offset + c.maps.c.shape.back(), st.ld);
      }
      offset = st.channel_offset;
      break;
    case StoreMap::Kind::kDepthToSpace: {
      const int64_t b2 = int64_t{st.block} * st.block;
      if (st.block < 1 || c.n % b2 != 0) {
        return fmt::format("depth_to_space block {} does not divide N={} into block^2 groups",
                           st.block, c.n);
      }
      if (c.batch != 1) return "depth_to_space store of a batched contraction";
      if (st.out_h < 1 || st.out_w < 1 || c.m % (st.out_h * st.out_w) != 0) {
        return fmt::format("depth_to_space: M={} is not images x {} x {}", c.m, st.out_h, st.out_w);
      }
      units = c.n / b2;
      ld = st.ld != 0 ? st.ld : units;
      offset = st.channel_offset;
      if (offset + units > ld) return "depth_to_space channel slice exceeds ld";
      p->store_n_stride = st.dcr ? 1 : static_cast<int>(b2);
      break;
    }
    case StoreMap::Kind::kNchw:
    case StoreMap::Kind::kDepthToSpaceNchw:
      return plan_nchw_store(c, e, s, p);
  }
  p->out_channels = ld;
  if (s.warp_n % p->store_n_stride != 0) {
    return fmt::format("depth_to_space CRD with block^2={} needs warp_n a multiple of it",
                       p->store_n_stride);
  }
  // Batch dims that move the output channel (grouped conv) must keep vectors aligned too.
  int64_t g = std::gcd(std::gcd(units, ld), offset == 0 ? ld : offset);
  for (int j : c.batch_dims) g = std::gcd(g, coeff(c.maps.c.index.back(), j));
  // 16 bytes per store, but at most 8 elements: each thread reads its vector's fp32 values from
  // the staging slab, and 16 of them (64 B per thread, int8 outputs) make every warp's slab read
  // 8-way bank-conflicted; 8 int8 (8-byte stores) still write whole 256-byte runs per warp.
  int v = std::min(16 / out_size, 8);
  while (v > 1 && (g % v != 0 || s.warp_n % (v * p->store_n_stride) != 0)) v /= 2;
  p->store_vec = v;
  return std::nullopt;
}

// The element types the epilogue loads and stores (tessel_ptx.cuh's storage types).
bool epilogue_dtype(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || contraction::is_int8_operand(t);
}

Reason check_epilogue(const Epilogue& e, KernelPlan* p) {
  if (!epilogue_dtype(e.out_dtype)) {
    return fmt::format("output dtype {} (f16, bf16, f32, i8 or u8 expected)", dtype_name(e.out_dtype));
  }
  if (e.residual_dtype && !epilogue_dtype(*e.residual_dtype)) {
    return fmt::format("residual dtype {} (f16, bf16, f32, i8 or u8 expected)",
                       dtype_name(*e.residual_dtype));
  }
  for (const auto& step : e.steps) {
    const bool residual = step.kind == EpilogueOpKind::kResidualAdd ||
                          step.kind == EpilogueOpKind::kScaledResidualAdd;
    const bool has_operand = step.kind == EpilogueOpKind::kScale ||
                             step.kind == EpilogueOpKind::kBias || residual;
    if (!has_operand) continue;
    if (step.operand < 0 || step.operand >= 4) {
      return fmt::format("epilogue operand index {} outside [0, 4)", step.operand);
    }
    if (residual) {
      if (p->residual_operand >= 0 && p->residual_operand != step.operand) return "two residual adds";
      p->residual_operand = step.operand;
    }
  }
  return std::nullopt;
}

// A prologue (contraction/epilogue.h) is applied by the mma.sync kernel's A loader to the
// vectors each thread copied, once they land in shared memory (tessel_mma.cuh): so that
// kernel only, with A K-major in cp.async vectors of whole channels, 16-bit floats.
Reason check_prologue(const Contraction& c, const Epilogue& e, const Schedule& s,
                      const KernelPlan& p) {
  if (!e.a_prologue) return std::nullopt;
  const contraction::OperandPrologue& pro = *e.a_prologue;
  const bool simt = s.instruction == Instruction::kSimt;
  if ((!simt && s.instruction != Instruction::kMmaSync) || s.mainloop == kernels::Mainloop::kHalo ||
      s.groups_per_tile > 0)
    return "an A prologue runs in the mma.sync and SIMT kernels' loaders only (not wgmma, halo or "
           "packed groups)";
  if (c.a_dtype != DType::kF16 && c.a_dtype != DType::kBF16 && !(simt && c.a_dtype == DType::kF32))
    return fmt::format("an A prologue transforms f16 or bf16 elements (f32 on CUDA cores), not {}",
                       dtype_name(c.a_dtype));
  if (!p.a.k_major || c.operands_swapped)
    return "an A prologue needs A K-major (channels contiguous)";
  if (!simt && p.a.vec * 2 < 4) return "an A prologue needs cp.async vectors of at least 4 bytes";
  if (pro.channels < 1 || c.k % pro.channels != 0 || pro.channels % p.a.vec != 0)
    return fmt::format("an A prologue of {} channels does not tile K = {} in vectors of {}",
                       pro.channels, c.k, p.a.vec);
  if (pro.operand < 0 || pro.operand >= 4)
    return fmt::format("prologue operand index {} outside [0, 4)", pro.operand);
  // The loader remembers which of its vectors were copied (not zero-filled) for each k-tile in
  // flight, in 64 bits.
  if (!simt && p.a.iters * (s.stages - 1) > 64)
    return fmt::format("an A prologue tracks at most 64 vectors in flight per thread ({} x {})",
                       p.a.iters, s.stages - 1);
  return std::nullopt;
}

// Packed groups (contraction/grouped.h): B, C and the epilogue through the dense view (the
// plan's contraction from here on), A through the packed-A view, whose k-tile is every group's.
// A grouped contraction's view (contraction/grouped.h) as a Contraction.
std::shared_ptr<const Contraction> grouped_view(const contraction::IndexMaps& maps) {
  contraction::MatchResult m = contraction::match(maps);
  TESSEL_ICHECK(m.contraction) << "a grouped view is no contraction:\n" << maps.str();
  return std::make_shared<const Contraction>(std::move(*m.contraction));
}

Reason plan_packed_groups(const Contraction& c, const Schedule& s, KernelPlan* p) {
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  TESSEL_ICHECK(l) << "check_schedule accepted packed groups for a contraction without groups";
  const auto dense = grouped_view(contraction::grouped_dense_view(c, *l));
  const auto packed = grouped_view(contraction::grouped_packed_a_view(c, *l, s.groups_per_tile));
  p->views = {dense, packed};
  p->c = dense.get();
  Schedule packed_s = s;
  packed_s.block_k = s.block_k * s.groups_per_tile;
  if (auto r = plan_operand(*packed, packed_s, s.instruction, p->threads, 'A', s.a_vec, &p->a)) return r;
  p->a.view = packed.get();
  p->a.view_block_k = packed_s.block_k;
  if (auto r = plan_operand(*dense, s, s.instruction, p->threads, 'B', s.b_vec, &p->b)) return r;
  p->tiles_m = (dense->m + s.block_m - 1) / s.block_m;
  p->tiles_n = (dense->n + s.block_n - 1) / s.block_n;  // the last may hold fewer groups
  p->k_tiles = p->k_tiles_per_split = static_cast<int>((dense->k + s.block_k - 1) / s.block_k);
  return std::nullopt;
}

// Whether the residual has the output's element type (what the TMA kernel's residual map
// needs: it reads the residual through C's map, box for box).
bool residual_like_output(const KernelPlan& plan) {
  return plan.residual_operand >= 0 && plan.e->residual_dtype.value_or(plan.e->out_dtype) == plan.e->out_dtype;
}

// The C map of a TMA kernel's bulk stores (tessel_tma.cuh, kTmaStore), where the store map
// and the output allow one: plain or channel-slice rows of 16-bit or int8 outputs, the rows
// and the slice's start 16-byte aligned. (16, 64) boxes at (n, m), clipped to (N, M), so a
// slice's neighbours in the buffer are never written; their shared-memory layout below.
// A depth_to_space store (DCR, block b, C' channels, the conv's output W wide) is the 4-D map
// {b*C', W, b, images*H}: out[img, oh*b + i, ow*b + j, c] at ((j*C' + c), ow, i, img*H + oh),
// the (j, c) of a pixel pair contiguous; a chunk of 16 m in one output row (W a multiple of
// 16) and 64 n is the box {64, 16, 1, 1} where b*C' is a multiple of 64, or {32, 16, 2, 1}
// (16-bit, b*C' = 32: two values of i in 64-byte rows). Its own rows only (no slice, no
// residual: those keep the slab's stores).
std::optional<device::TensorMapSpec> tma_store_map(const KernelPlan& plan) {
  const StoreMap& st = plan.e->store;
  const bool d2s = st.kind == StoreMap::Kind::kDepthToSpace;
  if (st.kind != StoreMap::Kind::kPlain && st.kind != StoreMap::Kind::kChannelSlice && !d2s) return std::nullopt;
  const DType out = plan.e->out_dtype;
  const bool int8 = contraction::is_int8_operand(out);
  if (out != DType::kF16 && out != DType::kBF16 && !int8) return std::nullopt;
  if (plan.store_n_stride != 1 || !plan.c->batch_dims.empty()) return std::nullopt;
  const int64_t size = static_cast<int64_t>(dtype_size(out));
  const int64_t ld = plan.out_channels;
  const int64_t offset = st.kind == StoreMap::Kind::kChannelSlice ? st.channel_offset : 0;
  if (ld * size % 16 != 0 || offset * size % 16 != 0) return std::nullopt;
  device::TensorMapSpec m;
  m.mode = device::TensorMapSpec::Mode::kTiled;
  m.type = int8                 ? device::TensorMapSpec::Type::kU8
           : out == DType::kBF16 ? device::TensorMapSpec::Type::kBF16
                                 : device::TensorMapSpec::Type::kF16;
  m.operand = static_cast<uint8_t>(kParamWordC);
  // Outputs without a residual or with one of their own type (read through C's map over it,
  // below): the swizzled staging of the register epilogue (tessel_tma.cuh, kRegisterEpilogue),
  // rows of 64 outputs in 128 bytes (16-bit) or 64 (int8); else the slab path's dense staging.
  using Swizzle = device::TensorMapSpec::Swizzle;
  m.swizzle = plan.residual_operand >= 0 && !residual_like_output(plan) ? Swizzle::kNone
              : size == 2                                                ? Swizzle::k128B
                                                                         : Swizzle::k64B;
  if (d2s) {
    const int64_t b = st.block, pair = b * ld, width = st.out_w;
    const bool lines = pair % 64 == 0 || (pair == 32 && size == 2);
    if (!st.dcr || st.channel_offset != 0 || ld * b * b != plan.c->n ||
        plan.residual_operand >= 0 || !lines || width % 16 != 0 || b < 2)
      return std::nullopt;
    const uint32_t line = static_cast<uint32_t>(std::min<int64_t>(pair, 64));
    if (line * size == 64) m.swizzle = Swizzle::k64B;
    m.rank = 4;
    m.dims = {static_cast<uint64_t>(pair), static_cast<uint64_t>(width), static_cast<uint64_t>(b),
              static_cast<uint64_t>(plan.c->m / width), 0};
    m.strides = {static_cast<uint64_t>(pair * size), static_cast<uint64_t>(width * pair * size),
                 static_cast<uint64_t>(b * width * pair * size), 0};
    m.box = {line, 16, 64 / line, 1, 0};
  } else {
    m.rank = 2;
    m.offset_bytes = offset * size;
    m.dims = {static_cast<uint64_t>(plan.c->n), static_cast<uint64_t>(plan.c->m), 0, 0, 0};
    m.strides = {static_cast<uint64_t>(ld * size), 0, 0, 0};
    m.box = {64, 16, 0, 0, 0};
  }
  if (device::check_tensor_map(m)) return std::nullopt;
  return m;
}

}  // namespace

std::optional<std::string> make_plan(const Contraction& c, const Epilogue& e, const Schedule& s,
                                     KernelPlan* p) {
  p->instruction = s.instruction;
  p->c = &c;
  p->e = &e;
  p->s = s;
  const bool tc = s.instruction != Instruction::kSimt;
  if (c.m < 1 || c.n < 1 || c.k < 1 || c.batch < 1) return "empty contraction";
  if (c.m >= kInt32Safe || c.n >= kInt32Safe || c.k >= kInt32Safe || c.batch >= kInt32Safe) {
    return "an extent of M, N, K or batch does not fit 31 bits";
  }
  // int8 operands accumulate in int32 (mma.sync m16n8k32 .s32), everything else in fp32.
  const bool int8 = contraction::int8_operands(c);
  const DType acc = int8 ? DType::kI32 : DType::kF32;
  if (c.acc_dtype != acc) {
    return fmt::format("accumulator {} ({} expected)", dtype_name(c.acc_dtype), dtype_name(acc));
  }
  if (s.mainloop == kernels::Mainloop::kHalo) {
    // The halo kernel's operand types are check_schedule's (check_halo).
  } else if (tc) {
    if (!int8 && (c.a_dtype != c.b_dtype || (c.a_dtype != DType::kF16 && c.a_dtype != DType::kBF16))) {
      return fmt::format("Tensor Cores need f16 or bf16 operands of one type, or int8 ones (A {}, B {})",
                         dtype_name(c.a_dtype), dtype_name(c.b_dtype));
    }
  } else {
    for (DType t : {c.a_dtype, c.b_dtype}) {
      if (t != DType::kF16 && t != DType::kBF16 && t != DType::kF32) {
        return fmt::format("the SIMT kernel reads f16, bf16 or f32 operands, not {}", dtype_name(t));
      }
    }
  }
  if (c.maps.a.dtype != c.a_dtype || c.maps.b.dtype != c.b_dtype) return "operand dtypes disagree with the index maps";
  if (auto r = check_access(c, c.maps.a, 'A')) return r;
  if (auto r = check_access(c, c.maps.b, 'B')) return r;
  if (auto r = check_output_map(c)) return r;
  if (c.k_dims.empty()) return "contraction without K dims (an outer product)";

  // The schedule's own legality (tiles, warps, instruction rules, loaders, split-K) has one
  // definition, shared with the schedule space and the default pick.
  if (auto r = kernels::check_schedule(c, s)) return r;
  p->threads = s.threads();
  uint64_t tiles = 0;
  if (s.groups_per_tile > 0 && s.mainloop == kernels::Mainloop::kGemm) {
    if (auto r = plan_packed_groups(c, s, p)) return r;
    tiles = static_cast<uint64_t>(p->tiles_m * p->tiles_n);
    p->grid_x = tiles;
  } else if (s.mainloop == kernels::Mainloop::kHalo) {
    // No operand gathers: the halo kernel addresses X and W itself (tessel_halo.cuh). Its
    // tiles are spatial; `ctas` persistent CTAs walk them.
    // A grouped conv's CTAs each keep one channel slice (CTA i: slice i % slices), so that
    // its weights load once; its epilogue stores through the dense view (groups folded into N).
    const std::optional<kernels::HaloLayout> layout = kernels::halo_layout(c, s);
    TESSEL_ICHECK(layout) << "check_schedule accepted a halo schedule without a layout";
    if (s.groups_per_tile > 0) {
      const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
      TESSEL_ICHECK(l) << "a grouped halo layout without groups";
      p->views = {grouped_view(contraction::grouped_dense_view(c, *l))};
      p->c = p->views[0].get();
    }
    const uint64_t slices = static_cast<uint64_t>(layout->slices);
    p->tiles_m = layout->tiles;
    p->tiles_n = layout->slices;
    p->k_tiles = p->k_tiles_per_split = 1;
    tiles = static_cast<uint64_t>(layout->tiles);
    p->grid_x = static_cast<uint64_t>(layout->ctas_per_slice) * slices;
  } else if (s.mainloop == kernels::Mainloop::kTma) {
    // No gathers: the tensor maps address A and B (tessel_tma.cuh), A K-major, B either.
    p->tma = kernels::tma_layout(c, s);
    TESSEL_ICHECK(p->tma) << "check_schedule accepted a TMA schedule without a layout";
    p->a.k_major = true;
    p->b.k_major = !p->tma->b_mn_major;
    p->a.vec = p->b.vec = 8;
    p->tiles_m = (c.m + s.block_m - 1) / s.block_m;
    p->tiles_n = (c.n + s.block_n - 1) / s.block_n;
    p->k_tiles = p->k_tiles_per_split = static_cast<int>(p->tma->taps * p->tma->chunks);
    tiles = static_cast<uint64_t>(p->tiles_m * p->tiles_n);
    // `ctas` persistent CTAs (0: one per tile), never more than the tiles: a CTA's second
    // consumer warpgroup works only where the tiles outnumber the CTAs.
    p->grid_x = s.ctas > 0 ? std::min<uint64_t>(tiles, static_cast<uint64_t>(s.ctas)) : tiles;
  } else {
    if (auto r = plan_operand(c, s, s.instruction, p->threads, 'A', s.a_vec, &p->a)) return r;
    if (auto r = plan_operand(c, s, s.instruction, p->threads, 'B', s.b_vec, &p->b)) return r;

    // K split and grid.
    p->tiles_m = (c.m + s.block_m - 1) / s.block_m;
    p->tiles_n = (c.n + s.block_n - 1) / s.block_n;
    p->k_tiles = (c.k + s.block_k - 1) / s.block_k;
    p->k_tiles_per_split = static_cast<int>((p->k_tiles + s.split_k - 1) / s.split_k);
    tiles = static_cast<uint64_t>(p->tiles_m * p->tiles_n * c.batch);
    p->grid_x = tiles * static_cast<uint64_t>(s.split_k);
  }
  if (p->grid_x > 0x7fffffffull) return fmt::format("{} CTAs exceed the grid limit", p->grid_x);

  if (auto r = check_epilogue(e, p)) return r;
  if (auto r = check_prologue(c, e, s, *p)) return r;
  if (auto r = plan_store(*p->c, e, s, p)) return r;
  if (p->tma) p->tma_store = tma_store_map(*p);
  // The residual has the output's layout (store_offset), so C's map over its address reads it
  // box for box, into the swizzled staging the register epilogue finishes in place.
  if (p->tma_store && residual_like_output(*p)) {
    p->tma_residual = *p->tma_store;
    p->tma_residual->operand = static_cast<uint8_t>(kParamWordExtra + p->residual_operand);
  }

  // Shared memory: kernels::smem_bytes mirrors MmaKernel / SimtKernel::kSmemBytes (the
  // generated code static_asserts the equality).
  const int64_t smem = static_cast<int64_t>(kernels::smem_bytes(c, s));
  if (smem > kMaxSmemBytes) {
    return fmt::format("{} bytes of shared memory (at most {})", smem, kMaxSmemBytes);
  }
  p->smem_bytes = static_cast<unsigned>(smem);
  p->workspace_bytes = 0;
  if (s.split_k > 1) {
    // [tiles][split_k][block_m * block_n] fp32 (int8: int32) partials, then one u32 counter
    // per tile.
    p->workspace_bytes = tiles * s.split_k * static_cast<size_t>(s.block_m) * s.block_n * 4 + tiles * 4;
  }

  // Flat offsets: 32-bit arithmetic unless some tensor is too large for it.
  int64_t biggest = std::max(numel(c.maps.a.shape, "A"), numel(c.maps.b.shape, "B"));
  const bool d2s = e.store.kind == StoreMap::Kind::kDepthToSpace || e.store.kind == StoreMap::Kind::kDepthToSpaceNchw;
  const int64_t b2 = d2s ? int64_t{e.store.block} * e.store.block : 1;
  biggest = std::max(biggest, p->c->batch * c.m * b2 * p->out_channels + c.maps.c.shape.back());
  p->index64 = biggest >= kInt32Safe;
  return std::nullopt;
}

std::optional<std::string> can_implement(const Contraction& c, const Epilogue& e, const Schedule& s) {
  KernelPlan plan;
  return make_plan(c, e, s, &plan);
}

}  // namespace tessel::kernels::cuda
