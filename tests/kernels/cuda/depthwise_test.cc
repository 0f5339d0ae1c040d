// The depthwise convolution kernel (templates/tessel_depthwise.cuh) without a GPU:
//  - its tiling (templates/tessel_depthwise_tile.cuh, the same functions the kernel calls)
//    emulated on the CPU, tile by tile and thread by thread -- staging, accumulation, store --
//    against a naive convolution, with every output written exactly once;
//  - the emitter's choice of tiling, and that the generated source compiles with NVRTC for
//    sm_80 and sm_90a with 16-byte cp.async copies and stores where the channels allow.
// The numbers against the CPU reference run in tests/gpu/op_kernels_gpu_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device/cuda_api.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "kernels/cuda/nvrtc_test_util.h"
#include "kernels/cuda/op_emit.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/cuda/templates/tessel_depthwise_tile.cuh"

namespace tessel::kernels::cuda {
namespace {

using Ints = std::vector<int64_t>;

// ---- The tiling, emulated -----------------------------------------------------------------

struct Conv {
  int n, h, w, c, kh, kw, sh = 1, sw = 1, dh = 1, dw = 1;
  int pt = 0, pl = 0, pb = 0, pr = 0;
  int vec = 8;

  int oh() const { return (h + pt + pb - (kh - 1) * dh - 1) / sh + 1; }
  int ow() const { return (w + pl + pr - (kw - 1) * dw - 1) / sw + 1; }
  DepthwiseTiling problem() const {
    DepthwiseTiling t{};
    t.n = n, t.h = h, t.w = w, t.c = c, t.oh = oh(), t.ow = ow();
    t.kernel_h = kh, t.kernel_w = kw, t.stride_h = sh, t.stride_w = sw;
    t.pad_top = pt, t.pad_left = pl, t.dilation_h = dh, t.dilation_w = dw;
    t.stage_vec = vec;
    return t;
  }
};

// Small integers: every sum below is exact in double, so results compare with ==.
std::vector<double> ramp(size_t count, int salt) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<double>((i * 7 + salt) % 11) - 5;
  return v;
}

// x [n, h, w, c], w [c, kh, kw]: y [n, oh, ow, c].
std::vector<double> naive(const Conv& p, const std::vector<double>& x,
                          const std::vector<double>& w) {
  std::vector<double> y(size_t(p.n) * p.oh() * p.ow() * p.c, 0.0);
  for (int n = 0; n < p.n; ++n)
    for (int oh = 0; oh < p.oh(); ++oh)
      for (int ow = 0; ow < p.ow(); ++ow)
        for (int c = 0; c < p.c; ++c) {
          double acc = 0;
          for (int i = 0; i < p.kh; ++i)
            for (int j = 0; j < p.kw; ++j) {
              const int ih = oh * p.sh - p.pt + i * p.dh, iw = ow * p.sw - p.pl + j * p.dw;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              acc += x[((size_t(n) * p.h + ih) * p.w + iw) * p.c + c] *
                     w[(size_t(c) * p.kh + i) * p.kw + j];
            }
          y[((size_t(n) * p.oh() + oh) * p.ow() + ow) * p.c + c] = acc;
        }
  return y;
}

// What the kernel does, with its index functions, one tile and one thread at a time: stage
// smem x (poisoned with NaN first) and smem w, accumulate span row by span row, store. Counts
// the writes of every output element; fails the test at the first out-of-range smem access.
std::vector<double> emulate(const DepthwiseTiling& t, const std::vector<double>& x,
                            const std::vector<double>& w, std::vector<int>& writes) {
  const int taps = t.kernel_h * t.kernel_w;
  std::vector<double> y(size_t(t.n) * t.oh * t.ow * t.c, NAN);
  writes.assign(y.size(), 0);
  std::vector<double> sx(size_t(t.smem_x_elems())), sw(size_t(taps) * t.slab());
  std::vector<int> staged(sx.size());
  for (long long i = 0; i < t.tiles(); ++i) {
    const DwTile tile = t.tile(i);
    std::fill(sx.begin(), sx.end(), NAN);
    std::fill(staged.begin(), staged.end(), 0);
    for (int q = 0; q < t.chunks(); ++q) {
      const DwChunk ch = t.chunk(q);
      const int ih = t.ih0(tile) + ch.row, iw = t.iw0(tile) + ch.col;
      const int c = tile.c0 + ch.chunk * t.stage_vec;
      const bool valid = ih >= 0 && ih < t.h && iw >= 0 && iw < t.w && c < t.c;
      const int off = t.smem_offset(ch.row, ch.col, ch.chunk * t.stage_vec);
      EXPECT_TRUE(off >= 0 && off + t.stage_vec <= t.smem_x_elems()) << "chunk " << q;
      if (off < 0 || off + t.stage_vec > t.smem_x_elems()) return y;
      for (int v = 0; v < t.stage_vec; ++v) {
        sx[off + v] = valid ? x[((size_t(tile.n) * t.h + ih) * t.w + iw) * t.c + c + v] : 0.0;
        ++staged[off + v];
      }
    }
    for (int e = 0; e < taps * t.slab(); ++e) {
      const int tap = e / t.slab(), c = tile.c0 + e % t.slab();
      sw[e] = c < t.c ? w[size_t(c) * taps + tap] : 0.0;
    }
    for (int s : staged) EXPECT_EQ(s, 1) << "smem x slot staged " << s << " times";
    const int rows = t.rows_per_thread, cols = t.cols_per_thread;
    for (int tid = 0; tid < t.threads(); ++tid) {
      const DwThread th = t.thread(tid);
      std::vector<double> acc(size_t(rows) * cols * t.vec, 0.0);
      for (int j = 0; j < t.span_rows(); ++j) {
        if (!t.span_row_used(j)) continue;
        std::vector<double> xr(size_t(t.span_cols()) * t.vec, NAN);
        for (int u = 0; u < t.span_cols(); ++u) {
          if (!t.span_col_used(u)) continue;
          const int off = t.smem_offset(t.span_row(th, j), t.span_col(th, u), th.frag * t.vec);
          EXPECT_TRUE(off >= 0 && off + t.vec <= t.smem_x_elems())
              << "thread " << tid << " j " << j << " u " << u;
          if (off < 0 || off + t.vec > t.smem_x_elems()) return y;
          for (int v = 0; v < t.vec; ++v) xr[size_t(u) * t.vec + v] = sx[off + v];
        }
        for (int r = 0; r < rows; ++r) {
          const int kh = t.tap_row(j, r);
          if (kh < 0) continue;
          for (int kw = 0; kw < t.kernel_w; ++kw)
            for (int q = 0; q < cols; ++q) {
              const int u = q * t.stride_w + kw * t.dilation_w;
              EXPECT_EQ(t.tap_col(u, q), kw);
              for (int v = 0; v < t.vec; ++v)
                acc[(size_t(r) * cols + q) * t.vec + v] +=
                    xr[size_t(u) * t.vec + v] *
                    sw[(kh * t.kernel_w + kw) * t.slab() + th.frag * t.vec + v];
            }
        }
      }
      const int c = tile.c0 + th.frag * t.vec;
      if (c >= t.c) continue;
      for (int r = 0; r < rows; ++r) {
        const int oh = tile.oh0 + th.row0 + r;
        if (oh >= t.oh) break;
        for (int q = 0; q < cols; ++q) {
          const int ow = tile.ow0 + th.col0 + q;
          if (ow >= t.ow) break;
          for (int v = 0; v < t.vec; ++v) {
            const size_t o = ((size_t(tile.n) * t.oh + oh) * t.ow + ow) * t.c + c + v;
            y[o] = acc[(size_t(r) * cols + q) * t.vec + v];
            ++writes[o];
          }
        }
      }
    }
  }
  return y;
}

void check_tiling(const Conv& p, const DepthwiseTiling& t) {
  SCOPED_TRACE(::testing::Message() << "tiling " << op_detail::depthwise_tiling_name(t));
  const std::vector<double> x = ramp(size_t(p.n) * p.h * p.w * p.c, 1);
  const std::vector<double> w = ramp(size_t(p.c) * p.kh * p.kw, 4);
  std::vector<int> writes;
  const std::vector<double> got = emulate(t, x, w, writes);
  const std::vector<double> want = naive(p, x, w);
  ASSERT_EQ(got.size(), want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (writes[i] != 1 || got[i] != want[i]) first = wrong++ ? first : i;
  EXPECT_EQ(wrong, 0u) << "first at element " << first << ": written " << writes[first]
                       << " times, " << got[first] << " instead of " << want[first];
}

// The emitter's pick and hand-made tilings (odd blocks per thread, fragments narrower than
// the copies, partial slabs and tiles).
void check_tilings(const Conv& p) {
  SCOPED_TRACE(::testing::Message() << "n" << p.n << " " << p.h << "x" << p.w << "x" << p.c << " k"
                                    << p.kh << "x" << p.kw << " s" << p.sh << "," << p.sw << " d"
                                    << p.dh << "," << p.dw << " vec " << p.vec);
  const std::optional<DepthwiseTiling> pick = op_detail::choose_depthwise_tiling(p.problem(), 2);
  ASSERT_TRUE(pick);
  EXPECT_FALSE(op_detail::depthwise_tiling_refusal(*pick, 2));
  check_tiling(p, *pick);
  const int chunks = (p.c + p.vec - 1) / p.vec;
  for (int slab_chunks : {1, 3, 8}) {
    if (slab_chunks > chunks + 2) continue;
    for (int vec : {p.vec, std::max(1, p.vec / 4)})
      for (auto [rows, groups_h, cols, groups_w] :
           {std::tuple{1, 1, 4, 1}, {3, 2, 2, 4}, {2, 3, 5, 1}, {4, 1, 1, 3}}) {
        DepthwiseTiling t = p.problem();
        t.vec = vec, t.slab_vecs = slab_chunks * p.vec / vec;
        t.rows_per_thread = rows, t.row_groups = groups_h;
        t.cols_per_thread = cols, t.col_groups = groups_w;
        t.stages = 1, t.register_weights = true;
        check_tiling(p, t);
      }
  }
}

TEST(DepthwiseTiling, EmulatedKernelMatchesNaiveConvolution) {
  check_tilings(
      {.n = 1, .h = 9, .w = 11, .c = 24, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1});
  check_tilings({.n = 2,
                 .h = 13,
                 .w = 10,
                 .c = 96,
                 .kh = 3,
                 .kw = 3,
                 .sh = 2,
                 .sw = 2,
                 .pt = 1,
                 .pl = 1,
                 .pb = 1,
                 .pr = 1});
  check_tilings(
      {.n = 1, .h = 12, .w = 14, .c = 144, .kh = 5, .kw = 5, .pt = 2, .pl = 2, .pb = 2, .pr = 2});
  check_tilings(
      {.n = 1, .h = 11, .w = 9, .c = 40, .kh = 7, .kw = 7, .pt = 3, .pl = 3, .pb = 3, .pr = 3});
  check_tilings({.n = 1,
                 .h = 10,
                 .w = 10,
                 .c = 32,
                 .kh = 3,
                 .kw = 3,
                 .dh = 2,
                 .dw = 2,
                 .pt = 2,
                 .pl = 2,
                 .pb = 2,
                 .pr = 2});
  check_tilings({.n = 2,
                 .h = 8,
                 .w = 9,
                 .c = 3,
                 .kh = 3,
                 .kw = 3,
                 .pt = 1,
                 .pl = 1,
                 .pb = 1,
                 .pr = 1,
                 .vec = 1});
  check_tilings({.n = 1,
                 .h = 7,
                 .w = 6,
                 .c = 20,
                 .kh = 3,
                 .kw = 3,
                 .sh = 2,
                 .sw = 2,
                 .pt = 1,
                 .pl = 1,
                 .pb = 1,
                 .pr = 1,
                 .vec = 4});
  check_tilings({.n = 1,
                 .h = 5,
                 .w = 5,
                 .c = 1000,
                 .kh = 3,
                 .kw = 3,
                 .sh = 2,
                 .sw = 2,
                 .pt = 1,
                 .pl = 1,
                 .pb = 1,
                 .pr = 1});
  // Asymmetric pads, a rectangular kernel with unequal strides and dilations.
  check_tilings({.n = 1,
                 .h = 8,
                 .w = 12,
                 .c = 16,
                 .kh = 3,
                 .kw = 5,
                 .sh = 2,
                 .sw = 1,
                 .dh = 1,
                 .dw = 2,
                 .pt = 0,
                 .pl = 3,
                 .pb = 1,
                 .pr = 1});
}

// Every tile of a large problem decodes inside the output, the last one at its end; a 1-D
// grid-stride loop over them needs none of the y/z grid extents (65535 at most).
TEST(DepthwiseTiling, LargeImagesTileWithoutOverflow) {
  const Conv p{
      .n = 32, .h = 1080, .w = 1920, .c = 32, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
  const std::optional<DepthwiseTiling> t = op_detail::choose_depthwise_tiling(p.problem(), 2);
  ASSERT_TRUE(t);
  EXPECT_GT(t->tiles(), 65535);
  for (long long i : {0LL, 1LL, t->tiles() / 3, t->tiles() - 1}) {
    const DwTile tile = t->tile(i);
    EXPECT_TRUE(tile.n >= 0 && tile.n < p.n && tile.oh0 >= 0 && tile.oh0 < p.oh() &&
                tile.ow0 >= 0 && tile.ow0 < p.ow() && tile.c0 >= 0 && tile.c0 < p.c)
        << "tile " << i;
  }
  const DwTile last = t->tile(t->tiles() - 1);
  EXPECT_EQ(last.n, p.n - 1);
  EXPECT_GE(last.oh0 + t->tile_rows(), p.oh());
  EXPECT_GE(last.ow0 + t->tile_cols(), p.ow());
  EXPECT_GE(last.c0 + t->slab(), p.c);
}

// The pick: one CTA per tile, 2 channels per thread with weights in registers, blocks of at
// least 2x2 outputs per thread (each staged pixel feeds several), slabs of whole 32-byte
// sectors per pixel; at batch 1 a small image still spreads over many CTAs; a window too
// large to unroll gets nothing (the grouped kernel runs it).
TEST(DepthwiseTiling, ChoiceFitsTheProblem) {
  const Conv b32{
      .n = 32, .h = 56, .w = 56, .c = 192, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
  const std::optional<DepthwiseTiling> big = op_detail::choose_depthwise_tiling(b32.problem(), 2);
  ASSERT_TRUE(big);
  SCOPED_TRACE(op_detail::depthwise_tiling_name(*big));
  EXPECT_TRUE(big->tile_per_cta);
  EXPECT_EQ(big->stages, 1);
  EXPECT_EQ(big->vec, 2);
  EXPECT_TRUE(big->register_weights);
  EXPECT_GE(big->rows_per_thread, 2);
  EXPECT_GE(big->cols_per_thread, 2);
  EXPECT_GE(big->slab() * 2, 64);
  EXPECT_FALSE(op_detail::depthwise_tiling_refusal(*big, 2));
  Conv b1 = b32;
  b1.n = 1, b1.h = b1.w = 7;
  const std::optional<DepthwiseTiling> small = op_detail::choose_depthwise_tiling(b1.problem(), 2);
  ASSERT_TRUE(small);
  EXPECT_GE(small->tiles(), 6);
  // ConvNeXt's 7x7: 98 weights per thread still fit in registers.
  const Conv k7{
      .n = 32, .h = 56, .w = 56, .c = 96, .kh = 7, .kw = 7, .pt = 3, .pl = 3, .pb = 3, .pr = 3};
  const std::optional<DepthwiseTiling> seven = op_detail::choose_depthwise_tiling(k7.problem(), 2);
  ASSERT_TRUE(seven);
  EXPECT_TRUE(seven->register_weights);
  const Conv huge{.n = 1,
                  .h = 64,
                  .w = 64,
                  .c = 64,
                  .kh = 31,
                  .kw = 31,
                  .pt = 15,
                  .pl = 15,
                  .pb = 15,
                  .pr = 15};
  EXPECT_FALSE(op_detail::choose_depthwise_tiling(huge.problem(), 2));
}

// Names round-trip, and what cannot run says why.
TEST(DepthwiseTiling, NamesRoundTripAndRefusalsSayWhy) {
  const Conv p{
      .n = 2, .h = 28, .w = 28, .c = 96, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
  for (const char* name :
       {"dw_v2x16_r4x2_c4x2_s1_wr_t", "dw_v8x4_r2x2_c1x8_s2_ws", "dw_v1x32_r4x1_c4x3_s1_wr"}) {
    const std::optional<DepthwiseTiling> t = op_detail::parse_depthwise_tiling(name, p.problem());
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(op_detail::depthwise_tiling_name(*t), name);
    EXPECT_FALSE(op_detail::depthwise_tiling_refusal(*t, 2)) << name;
  }
  EXPECT_FALSE(op_detail::parse_depthwise_tiling("dw_v2x16_r4x2_c4x2", p.problem()));
  auto refusal = [&](const char* name) {
    return op_detail::depthwise_tiling_refusal(
               *op_detail::parse_depthwise_tiling(name, p.problem()), 2)
        .value_or("");
  };
  EXPECT_NE(refusal("dw_v3x16_r4x2_c4x2_s1_wr").find("do not divide"), std::string::npos);
  EXPECT_NE(refusal("dw_v2x16_r4x2_c4x2_s2_wr_t").find("two stages with one tile per CTA"),
            std::string::npos);
  EXPECT_NE(refusal("dw_v2x15_r4x2_c4x2_s1_wr").find("whole number"), std::string::npos);
  EXPECT_NE(refusal("dw_v8x8_r4x4_c1x16_s2_ws").find("shared memory"), std::string::npos);
}

// ---- The generated kernel -------------------------------------------------------------------

// t: X's and W's dtype; `int8_input`: X i8 instead, with its dequantization scale S (input
// 4, fold-qdq's int8-input form).
ir::Graph depthwise_node(DType t, Shape x, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                         const std::vector<std::string>& epilogue = {}, bool bias = true,
                         bool residual = false, bool int8_input = false) {
  ir::Graph g;
  const int64_t c = x[3];
  std::vector<ir::ValueId> ins = {g.add_value("x", {int8_input ? DType::kI8 : t, x}),
                                  g.add_value("w", {t, {c, k, k, 1}})};
  g.inputs = ins;
  if (bias || residual) {
    ins.push_back(g.add_value("b", {DType::kF32, {c}}));
    g.inputs.push_back(ins.back());
  }
  ir::Attributes attrs{{"group", c},
                       {"strides", Ints{stride, stride}},
                       {"pads", Ints{pad, pad, pad, pad}},
                       {"dilations", Ints{dilation, dilation}}};
  if (!epilogue.empty()) {
    attrs["epilogue"] = epilogue;
    std::vector<double> alpha(epilogue.size(), 0.0), beta(epilogue.size(), 0.0);
    for (size_t i = 0; i < epilogue.size(); ++i) {
      if (epilogue[i] == "clip") beta[i] = 6.0;
      if (epilogue[i] == "leaky_relu") alpha[i] = 0.1;
      if (epilogue[i] == "quantize" || epilogue[i] == "mul" || epilogue[i] == "round") alpha[i] = 0.05;
      // After a round: u8's range less a zero point of 116 (fuse's fake quantization).
      if (epilogue[i] == "clip" && i > 0 && epilogue[i - 1] == "round") alpha[i] = -116.0, beta[i] = 139.0;
    }
    // A last quantize stores int8 (fuse's form of a QDQ model's depthwise conv).
    if (epilogue.back() == "quantize") attrs["out_dtype"] = std::string("i8");
    attrs["epilogue_alpha"] = alpha;
    attrs["epilogue_beta"] = beta;
  }
  if (residual) {
    const int64_t span = dilation * (k - 1) + 1;
    const Shape y{x[0], (x[1] + 2 * pad - span) / stride + 1, (x[2] + 2 * pad - span) / stride + 1,
                  c};
    ins.push_back(g.add_value("r", {t, y}));
    g.inputs.push_back(ins.back());
  }
  if (int8_input) {
    ins.resize(4, ir::kNoValue);
    ins.push_back(g.add_value("s", {DType::kF32, {c}}));
    g.inputs.push_back(ins.back());
  }
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("tessel.Conv", "dw", ins, {y}, std::move(attrs));
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

// Emits, checks the source and launch shape, compiles for sm_80 and sm_90a; returns the PTX
// for sm_90a.
std::string compile_depthwise(const ir::Graph& g) {
  const std::optional<std::string> why = can_emit_op(g, g.nodes[0]);
  EXPECT_FALSE(why) << *why;
  const OpKernelSource ks = emit_op(g, g.nodes[0]);
  EXPECT_NE(ks.source.find("tessel::DepthwiseConv<Problem>::run(p);"), std::string::npos)
      << ks.source;
  // One CTA per tile (a 1-D grid: x may reach 2^31 - 1, y and z stay 1), or a persistent
  // grid under make_source's cap.
  EXPECT_GE(ks.grid[0], 1u);
  EXPECT_LE(ks.grid[0], 0x7fffffffu);
  EXPECT_EQ(ks.grid[1] * ks.grid[2], 1u);
  EXPECT_EQ(ks.block[0] % 32, 0u);
  std::string ptx;
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    const testing::Compiled out = testing::nvrtc_compile(ks, arch);
    EXPECT_TRUE(out.ok) << arch << "\n" << out.log << "\n" << ks.source;
    // Accumulators and weights stay in registers: no local-memory array.
    EXPECT_EQ(out.ptx.find(".local"), std::string::npos) << arch << "\n" << ks.source;
    ptx = out.ptx;
  }
  return ptx;
}

bool has(const std::string& ptx, const std::string& what) {
  return ptx.find(what) != std::string::npos;
}

class DepthwiseKernelTest : public ::testing::Test {
 protected:
  void SetUp() override { device::set_cache_dir(""); }
};

// The shared reads and global stores of a thread's fragment of `vec` f16 channels (one
// instruction each: NVRTC spells a 32-bit shared read of two f16 as ld.shared.v2.u16).
std::string shared_read(int vec) {
  return vec == 8   ? "ld.shared.v4"
         : vec == 4 ? "ld.shared.v2.u32"
         : vec == 2 ? "ld.shared.v2.u16"
                    : "ld.shared.u16";
}
std::string global_store(int vec) {
  return vec == 8   ? "st.global.v4"
         : vec == 4 ? "st.global.v2"
         : vec == 2 ? "st.global.u32"
                    : "st.global.u16";
}

// The channels per thread of the tiling emit_op picks for a node.
int picked_vec(const ir::Graph& g) {
  const std::optional<std::string> name = chosen_depthwise_tiling(g, g.nodes[0]);
  EXPECT_TRUE(name);
  return name ? std::stoi(name->substr(4)) : 0;  // "dw_v<vec>x..."
}

TEST_F(DepthwiseKernelTest, SixteenByteCopiesWhateverTheFragment) {
  struct Case {
    Shape x;
    int64_t k, stride, pad, dilation;
  };
  const std::vector<Case> cases = {
      {{1, 112, 112, 32}, 3, 1, 1, 1},     // MobileNet-v2's first, batch 1
      {{32, 112, 112, 96}, 3, 2, 1, 1},    // stride 2, batch 32
      {{1, 56, 56, 144}, 5, 2, 2, 1},      // EfficientNet's 5x5
      {{32, 14, 14, 384}, 7, 1, 3, 1},     // ConvNeXt's 7x7
      {{1, 28, 28, 24}, 3, 1, 2, 2},       // dilation 2
      {{1, 7, 7, 1000}, 3, 1, 1, 1},       // 125 vectors: a partial last slab
      {{32, 1080, 1920, 32}, 3, 1, 1, 1},  // tiles far beyond any 2-D grid
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << shape_str(c.x) << " k" << c.k << " s" << c.stride << " d" << c.dilation);
    const ir::Graph g =
        depthwise_node(DType::kF16, c.x, c.k, c.stride, c.pad, c.dilation, {"clip"});
    const std::string ptx = compile_depthwise(g);
    EXPECT_TRUE(has(ptx, "cp.async.cg.shared.global")) << ptx.substr(0, 4000);
    EXPECT_TRUE(has(ptx, ", 16, ")) << "16-byte copies";
    const int vec = picked_vec(g);
    EXPECT_TRUE(has(ptx, global_store(vec))) << "fragment-wide stores of " << vec << " channels";
    EXPECT_TRUE(has(ptx, shared_read(vec)))
        << "fragment-wide shared reads of " << vec << " channels";
  }
}

// The PTX of g's depthwise kernel with the tiling dw_v<vec>x<64 / vec>_r2x2_c2x4_s2_wr (fragments
// of `vec` channels, slabs of 64) for sm_90a, which must be legal, compile, and keep every
// array in registers; "" where it is not.
std::string named_tiling_ptx(const ir::Graph& g, int vec) {
  const std::string name = fmt::format("dw_v{}x{}_r2x2_c2x4_s2_wr", vec, 64 / vec);
  if (const std::optional<std::string> why = cannot_tile_depthwise(g, g.nodes[0], name)) {
    ADD_FAILURE() << *why;
    return "";
  }
  const testing::Compiled out =
      testing::nvrtc_compile(emit_depthwise(g, g.nodes[0], name), "sm_90a");
  EXPECT_TRUE(out.ok) << name << "\n" << out.log;
  EXPECT_EQ(out.ptx.find(".local"), std::string::npos) << name;
  return out.ptx;
}

// Each fragment width reads shared memory and stores at its own width from 16-byte copies;
// weights in registers leave no shared reads of 32-bit floats in the inner loop.
TEST_F(DepthwiseKernelTest, NamedTilingsReadAndStoreAtTheirFragmentWidth) {
  const ir::Graph g = depthwise_node(DType::kF16, {32, 28, 28, 192}, 3, 1, 1, 1, {"relu"});
  for (int vec : {8, 4, 2, 1}) {
    SCOPED_TRACE(vec);
    const std::string ptx = named_tiling_ptx(g, vec);
    EXPECT_TRUE(has(ptx, ", 16, ")) << "16-byte copies";
    EXPECT_TRUE(has(ptx, global_store(vec)));
    EXPECT_TRUE(has(ptx, shared_read(vec)));
  }
  EXPECT_TRUE(
      cannot_tile_depthwise(g, g.nodes[0], "dw_v3x8_r2x2_c2x4_s2_wr"));  // 3 does not divide 8
  EXPECT_TRUE(cannot_tile_depthwise(g, g.nodes[0], "dw_v8x8_r2x2_c2x4_s3_wr"));  // 3 stages
  EXPECT_TRUE(cannot_tile_depthwise(g, g.nodes[0], "tc_128x64x32_s3_w32x64_sk1_r8"));
}

TEST_F(DepthwiseKernelTest, NarrowChannelCountsAndOtherDtypes) {
  // 3 channels of f16: 2-byte fragments, plain copies.
  const std::string c3 = compile_depthwise(depthwise_node(DType::kF16, {1, 17, 19, 3}, 3, 2, 1, 1));
  EXPECT_FALSE(has(c3, "cp.async.cg.shared") || has(c3, "cp.async.ca.shared"));
  // 20 channels of f16: 8-byte copies.
  const std::string c20 =
      compile_depthwise(depthwise_node(DType::kF16, {2, 15, 15, 20}, 3, 1, 1, 1));
  EXPECT_TRUE(has(c20, "cp.async.ca.shared.global")) << c20.substr(0, 4000);
  // f32 and bf16 keep 16-byte copies (4 and 8 channels).
  EXPECT_TRUE(
      has(compile_depthwise(depthwise_node(DType::kF32, {1, 20, 20, 24}, 5, 1, 2, 1)), ", 16, "));
  EXPECT_TRUE(
      has(compile_depthwise(depthwise_node(DType::kBF16, {1, 20, 20, 144}, 3, 2, 1, 1)), ", 16, "));
}

TEST_F(DepthwiseKernelTest, EveryEpilogueStepAndTheResidual) {
  const ir::Graph g = depthwise_node(
      DType::kF16, {1, 14, 14, 96}, 3, 1, 1, 1,
      {"add_residual", "relu", "leaky_relu", "clip", "sigmoid", "hardswish", "silu"}, true, true);
  const OpKernelSource ks = emit_op(g, g.nodes[0]);
  EXPECT_NE(ks.source.find("kResidual = true"), std::string::npos) << ks.source;
  EXPECT_NE(ks.source.find("v = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);"), std::string::npos)
      << ks.source;
  EXPECT_NE(ks.source.find("v = silu_f(v);"), std::string::npos) << ks.source;
  compile_depthwise(g);
}

TEST_F(DepthwiseKernelTest, GroupedAndMultiplierConvsKeepTheDirectKernel) {
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF16, {1, 8, 8, 16}});
  const ir::ValueId w = g.add_value("w", {DType::kF16, {32, 3, 3, 1}});
  g.inputs = {x, w};
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("tessel.Conv", "m2", {x, w}, {y},
             {{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}});
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  EXPECT_NE(emit_op(g, g.nodes[0]).source.find("GroupedConv<Problem>"), std::string::npos);
}

// A QUInt8 QDQ model's depthwise conv: fuse gives it the asymmetric QuantizeLinear ->
// DequantizeLinear pair after it as a fake quantization, and it stores its own dtype.
TEST_F(DepthwiseKernelTest, FakeQuantizationRoundsByTheReciprocal) {
  const ir::Graph g = depthwise_node(DType::kF16, {2, 28, 28, 96}, 3, 1, 1, 1, {"round", "clip", "mul"});
  ASSERT_EQ(g.type(g.outputs[0]).dtype, DType::kF16);
  const std::string src = emit_op(g, g.nodes[0]).source;
  EXPECT_NE(src.find("v = rintf(v * 20.0f);"), std::string::npos) << src;
  EXPECT_NE(src.find("v = v < -116.0f ? -116.0f : (v > 139.0f ? 139.0f : v);"), std::string::npos) << src;
  compile_depthwise(g);
}

// A QDQ model's depthwise conv: fuse gives it the QuantizeLinear -> DequantizeLinear -> Clip
// -> QuantizeLinear chain after it, and it stores int8, 8 channels in one 8-byte store, rounded
// by adding 1.5 * 2^23 (no quarter-rate cvt.rni); the direct grouped kernel too. The int8
// residual stays the contraction kernels'.
TEST_F(DepthwiseKernelTest, QuantizedOutputStoresInt8) {
  const ir::Graph g =
      depthwise_node(DType::kF16, {32, 28, 28, 192}, 3, 1, 1, 1, {"quantize", "mul", "clip", "quantize"});
  ASSERT_EQ(g.type(g.outputs[0]).dtype, DType::kI8);
  EXPECT_NE(emit_op(g, g.nodes[0]).source.find("using Out = i8;"), std::string::npos);
  compile_depthwise(g);
  // Fragments of 8, 4, 2 and 1 channels: 8 bytes, 4, and single bytes per store.
  for (int vec : {8, 4, 2, 1}) {
    SCOPED_TRACE(vec);
    const std::string ptx = named_tiling_ptx(g, vec);
    EXPECT_TRUE(has(ptx, vec == 8   ? "st.global.v2.b32"
                         : vec == 4 ? "st.global.u32"
                                    : "st.global.u8"));
    EXPECT_FALSE(has(ptx, "cvt.rni"));
    EXPECT_TRUE(has(ptx, "0f4B400000"));
  }

  ir::Graph grouped;
  const ir::ValueId x = grouped.add_value("x", {DType::kF16, {1, 8, 8, 16}});
  const ir::ValueId w = grouped.add_value("w", {DType::kF16, {32, 3, 3, 2}});
  grouped.inputs = {x, w};
  const ir::ValueId y = grouped.add_value("y", {});
  grouped.add_node("tessel.Conv", "g8", {x, w}, {y},
                   {{"group", int64_t{8}},
                    {"pads", Ints{1, 1, 1, 1}},
                    {"epilogue", std::vector<std::string>{"relu", "quantize"}},
                    {"epilogue_alpha", std::vector<double>{0.0, 0.1}},
                    {"epilogue_beta", std::vector<double>{0.0, 0.0}},
                    {"out_dtype", std::string("i8")}});
  grouped.outputs = {y};
  ir::infer_types(grouped, ir::OpRegistry::global());
  ASSERT_FALSE(can_emit_op(grouped, grouped.nodes[0]));
  const OpKernelSource ks = emit_op(grouped, grouped.nodes[0]);
  EXPECT_NE(ks.source.find("GroupedConv<Problem>"), std::string::npos);
  EXPECT_NE(ks.source.find("using Out = i8;"), std::string::npos);
  const testing::Compiled out = testing::nvrtc_compile(ks, "sm_90a");
  EXPECT_TRUE(out.ok) << out.log << "\n" << ks.source;
}

// An int8 input (fold-qdq's form of a QDQ model's depthwise conv, MobileNet's and
// EfficientNet's layers): 16 channels per 16-byte copy, each fragment read at its own width
// (4 int8: one 32-bit shared read), converted by prmt and a subtract (no quarter-rate
// cvt.rn.f32.s8), and its scale and the bias applied by one fma; the store int8 after a
// quantize, or the weights' f16 with a residual.
TEST_F(DepthwiseKernelTest, Int8InputReadsBytesAndConvertsWithoutCvt) {
  struct Case {
    Shape x;
    int64_t k, stride, pad;
    std::vector<std::string> steps;
  };
  const std::vector<Case> cases = {
      {{32, 56, 56, 144}, 3, 1, 1, {"quantize", "clip"}},  // MobileNet-v2, batch 32
      {{32, 56, 56, 144}, 3, 2, 1, {"quantize", "clip"}},
      {{1, 112, 112, 96}, 3, 2, 1, {"quantize", "mul", "clip", "quantize"}},
      {{1, 30, 30, 240}, 5, 2, 2, {"silu", "quantize"}},  // EfficientNet's 5x5
      {{32, 14, 14, 384}, 7, 1, 3, {"quantize"}},         // ConvNeXt's 7x7
      {{2, 19, 23, 96}, 3, 1, 1, {"add_residual", "relu"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << shape_str(c.x) << " k" << c.k << " s" << c.stride);
    const bool residual = c.steps.front() == "add_residual";
    const ir::Graph g =
        depthwise_node(DType::kF16, c.x, c.k, c.stride, c.pad, 1, c.steps, true, residual, true);
    const OpKernelSource ks = emit_op(g, g.nodes[0]);
    EXPECT_NE(ks.source.find("using X = i8;\n  using T = f16;"), std::string::npos) << ks.source;
    EXPECT_NE(ks.source.find("kScale = true"), std::string::npos);
    EXPECT_NE(ks.source.find("return static_cast<const float*>(p.in[4])[co];"), std::string::npos);
    const std::string ptx = compile_depthwise(g);
    EXPECT_TRUE(has(ptx, "cp.async.cg.shared.global")) << ptx.substr(0, 4000);
    EXPECT_TRUE(has(ptx, ", 16, ")) << "16-byte copies";
    EXPECT_TRUE(has(ptx, "prmt.b32"));
    EXPECT_FALSE(has(ptx, "cvt.rn.f32.s8"));
  }
  const ir::Graph g =
      depthwise_node(DType::kF16, {32, 28, 28, 192}, 3, 1, 1, 1, {"quantize"}, true, false, true);
  for (int vec : {8, 4, 2, 1}) {
    SCOPED_TRACE(vec);
    const std::string ptx = named_tiling_ptx(g, vec);
    EXPECT_TRUE(has(ptx, vec == 8   ? "ld.shared.v2.u32"
                         : vec == 4 ? "ld.shared.u32"
                         : vec == 2 ? "ld.shared.u16"
                                    : "ld.shared.u8"));
    EXPECT_FALSE(has(ptx, "cvt.rn.f32.s8"));
  }
  // f32 weights (the fp32 engine's) likewise.
  compile_depthwise(
      depthwise_node(DType::kF32, {2, 20, 20, 32}, 3, 2, 1, 1, {}, true, false, true));
}

// Channel counts that no 16-byte copy fits: 8-, 4-, 2- and 1-byte copies of 24, 20, 2 and 3
// int8 channels (the last two plain loads); windows larger than the tiled kernel unrolls run
// the direct grouped kernel, which reads int8 too.
TEST_F(DepthwiseKernelTest, Int8InputNarrowChannelCountsAndLargeWindows) {
  auto int8_dw = [](Shape x, int64_t k) {
    return depthwise_node(DType::kF16, std::move(x), k, 1, k / 2, 1, {"quantize"}, true, false,
                          true);
  };
  EXPECT_TRUE(has(compile_depthwise(int8_dw({1, 15, 15, 24}, 3)), ", 8, "));
  EXPECT_TRUE(has(compile_depthwise(int8_dw({1, 15, 15, 20}, 3)), ", 4, "));
  for (const int64_t c : {2, 3}) {
    const std::string ptx = compile_depthwise(int8_dw({2, 17, 19, c}, 3));
    EXPECT_FALSE(has(ptx, "cp.async.cg.shared") || has(ptx, "cp.async.ca.shared")) << c;
  }
  const ir::Graph large = int8_dw({1, 20, 20, 32}, 13);
  ASSERT_FALSE(can_emit_op(large, large.nodes[0]));
  const OpKernelSource ks = emit_op(large, large.nodes[0]);
  EXPECT_NE(ks.source.find("GroupedConv<Problem>"), std::string::npos);
  EXPECT_NE(ks.source.find("using X = i8;"), std::string::npos);
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    const testing::Compiled out = testing::nvrtc_compile(ks, arch);
    EXPECT_TRUE(out.ok) << arch << "\n" << out.log << "\n" << ks.source;
  }
}

TEST(DepthwiseKernel, RefusesTheInt8ResidualAndOtherOutDtypes) {
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF32, {1, 8, 8, 16}});
  const ir::ValueId w = g.add_value("w", {DType::kF32, {16, 3, 3, 1}});
  const ir::ValueId r = g.add_value("r", {DType::kI8, {1, 8, 8, 16}});
  g.inputs = {x, w, r};
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("tessel.Conv", "dw", {x, w, ir::kNoValue, r}, {y},
             {{"group", int64_t{16}},
              {"pads", Ints{1, 1, 1, 1}},
              {"epilogue", std::vector<std::string>{"add_residual_scaled"}},
              {"epilogue_alpha", std::vector<double>{0.5}},
              {"epilogue_beta", std::vector<double>{0.0}}});
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  EXPECT_EQ(can_emit_op(g, g.nodes[0]).value_or(""),
            "tessel.Conv 'dw': tessel.Conv of i8/u8 tensors has no GPU kernel (only QuantizeLinear, "
            "DequantizeLinear, data movement, and a Cast from them take them)");
  ir::Graph f = depthwise_node(DType::kF16, {1, 8, 8, 16}, 3, 1, 1, 1, {"relu"});
  f.nodes[0].attrs["out_dtype"] = std::string("f32");
  ir::infer_types(f, ir::OpRegistry::global());
  const std::string refusal =
      "tessel.Conv 'dw': a grouped convolution with an NCHW store, input_layout, or an out_dtype "
      "other than int8 (a depthwise one's: or uint8) after a last quantize step (only group-1 "
      "convolutions take them)";
  EXPECT_EQ(can_emit_op(f, f.nodes[0]).value_or(""), refusal);
  // uint8 after round, clip(0, 255) (onnxruntime's QUInt8 activations): a depthwise conv
  // stores it, packed four to a word; uint8 without the clip to its range does not.
  ir::Graph u = depthwise_node(DType::kF16, {1, 8, 8, 16}, 3, 1, 1, 1, {"round", "clip"});
  ops::write_epilogue(u.nodes[0], {{ops::EpilogueKind::kRound, 0.05}, {ops::EpilogueKind::kClip, 0.0, 255.0}});
  u.nodes[0].attrs["out_dtype"] = std::string("u8");
  ir::infer_types(u, ir::OpRegistry::global());
  EXPECT_EQ(can_emit_op(u, u.nodes[0]), std::nullopt);
  const OpKernelSource ks = emit_op(u, u.nodes[0]);
  EXPECT_NE(ks.source.find("using Out = u8;"), std::string::npos) << ks.source;
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    const testing::Compiled out = testing::nvrtc_compile(ks, arch);
    EXPECT_TRUE(out.ok) << arch << "\n" << out.log << "\n" << ks.source;
  }
  ops::write_epilogue(u.nodes[0], {{ops::EpilogueKind::kRound, 0.05}});
  EXPECT_EQ(can_emit_op(u, u.nodes[0]).value_or(""), refusal);
}

}  // namespace
}  // namespace tessel::kernels::cuda
