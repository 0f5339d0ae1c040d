// The depthwise convolution kernel (templates/tessel_depthwise.cuh) without a GPU:
//  - its tiling (templates/tessel_depthwise_tile.cuh, the same functions the kernel calls)
//    emulated on the CPU, tile by tile and thread by thread -- staging, accumulation, store --
//    against a naive convolution, with every output written exactly once;
//  - the emitter's choice of tiling, and that the generated source compiles with NVRTC for
//    sm_80 and sm_90a with 16-byte cp.async copies and stores where the channels allow.
// The numbers against the CPU reference run in tests/gpu/op_kernels_gpu_test.cc.
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
    t.vec = vec;
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
// smem x (poisoned with NaN first) and smem w, accumulate, store. Counts the writes of every
// output element; fails the test at the first out-of-range smem access.
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
      const int ih = t.ih0(tile) + ch.row, iw = t.iw0(tile) + ch.col, c = tile.c0 + ch.frag * t.vec;
      const bool valid = ih >= 0 && ih < t.h && iw >= 0 && iw < t.w && c < t.c;
      const int off = t.smem_offset(ch.row, ch.col, ch.frag);
      EXPECT_TRUE(off >= 0 && off + t.vec <= t.smem_x_elems()) << "chunk " << q;
      if (off < 0 || off + t.vec > t.smem_x_elems()) return y;
      for (int v = 0; v < t.vec; ++v) {
        sx[off + v] = valid ? x[((size_t(tile.n) * t.h + ih) * t.w + iw) * t.c + c + v] : 0.0;
        ++staged[off + v];
      }
    }
    for (int e = 0; e < taps * t.slab(); ++e) {
      const int tap = e / t.slab(), c = tile.c0 + e % t.slab();
      sw[e] = c < t.c ? w[size_t(c) * taps + tap] : 0.0;
    }
    for (int s : staged) EXPECT_EQ(s, 1) << "smem x slot staged " << s << " times";
    for (int tid = 0; tid < t.threads(); ++tid) {
      const DwThread th = t.thread(tid);
      std::vector<double> acc(size_t(t.rows_per_thread) * t.vec, 0.0);
      for (int kw = 0; kw < t.kernel_w; ++kw)
        for (int j = 0; j < t.span_rows(); ++j) {
          if (!t.span_row_used(j)) continue;
          const int off = t.smem_offset(t.span_row(th, j), t.span_col(th, kw), th.frag);
          EXPECT_TRUE(off >= 0 && off + t.vec <= t.smem_x_elems())
              << "thread " << tid << " kw " << kw << " j " << j;
          if (off < 0 || off + t.vec > t.smem_x_elems()) return y;
          for (int r = 0; r < t.rows_per_thread; ++r) {
            const int kh = t.tap_row(j, r);
            if (kh < 0) continue;
            for (int v = 0; v < t.vec; ++v)
              acc[r * t.vec + v] +=
                  sx[off + v] * sw[(kh * t.kernel_w + kw) * t.slab() + th.frag * t.vec + v];
          }
        }
      const int c = tile.c0 + th.frag * t.vec, ow = tile.ow0 + th.col;
      if (c >= t.c || ow >= t.ow) continue;
      for (int r = 0; r < t.rows_per_thread; ++r) {
        const int oh = tile.oh0 + th.row0 + r;
        if (oh >= t.oh) break;
        for (int v = 0; v < t.vec; ++v) {
          const size_t o = ((size_t(tile.n) * t.oh + oh) * t.ow + ow) * t.c + c + v;
          y[o] = acc[r * t.vec + v];
          ++writes[o];
        }
      }
    }
  }
  return y;
}

void check_tiling(const Conv& p, const DepthwiseTiling& t) {
  SCOPED_TRACE(::testing::Message()
               << "tiling slab_vecs " << t.slab_vecs << ", tile_cols " << t.tile_cols
               << ", row_groups " << t.row_groups << ", rows_per_thread " << t.rows_per_thread);
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

// The emitter's pick and hand-made tilings (odd rows per thread, partial slabs and tiles).
void check_tilings(const Conv& p) {
  SCOPED_TRACE(::testing::Message() << "n" << p.n << " " << p.h << "x" << p.w << "x" << p.c << " k"
                                    << p.kh << "x" << p.kw << " s" << p.sh << "," << p.sw << " d"
                                    << p.dh << "," << p.dw << " vec " << p.vec);
  const std::optional<DepthwiseTiling> pick = op_detail::choose_depthwise_tiling(p.problem(), 2);
  ASSERT_TRUE(pick);
  check_tiling(p, *pick);
  const int frags = p.c / p.vec;
  for (int slab_vecs : {1, 3, 8}) {
    if (slab_vecs > frags + 2) continue;
    for (auto [cols, groups, rows] : {std::tuple{4, 1, 1}, {8, 2, 3}, {5, 3, 2}}) {
      DepthwiseTiling t = p.problem();
      t.slab_vecs = slab_vecs, t.tile_cols = cols, t.row_groups = groups, t.rows_per_thread = rows;
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
  EXPECT_GE(last.ow0 + t->tile_cols, p.ow());
  EXPECT_GE(last.c0 + t->slab(), p.c);
}

// The pick: full 64-channel slabs for wide f16 layers, small tiles where a batch-1 layer would
// otherwise leave SMs idle, large ones (less halo per output) at batch 32, and nothing for a
// window too large to stage (the grouped kernel runs it).
TEST(DepthwiseTiling, ChoiceFitsTheProblem) {
  const Conv b32{
      .n = 32, .h = 56, .w = 56, .c = 192, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
  const std::optional<DepthwiseTiling> big = op_detail::choose_depthwise_tiling(b32.problem(), 2);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->slab(), 64);
  EXPECT_GE(big->tile_rows() * big->tile_cols, 64);
  EXPECT_LE(big->smem_bytes(2), 32 * 1024);
  Conv b1 = b32;
  b1.n = 1, b1.h = b1.w = 7;
  const std::optional<DepthwiseTiling> small = op_detail::choose_depthwise_tiling(b1.problem(), 2);
  ASSERT_TRUE(small);
  EXPECT_GE(small->tiles(), 12);
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

// ---- The generated kernel -------------------------------------------------------------------

ir::Graph depthwise_node(DType t, Shape x, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                         const std::vector<std::string>& epilogue = {}, bool bias = true,
                         bool residual = false) {
  ir::Graph g;
  const int64_t c = x[3];
  std::vector<ir::ValueId> ins = {g.add_value("x", {t, x}), g.add_value("w", {t, {c, k, k, 1}})};
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
    }
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
  EXPECT_GE(ks.grid[0], 1u);
  EXPECT_LE(ks.grid[0], op_detail::kMaxBlocks);
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

TEST_F(DepthwiseKernelTest, SixteenByteCopiesAndStoresForWholeChannelVectors) {
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
    const std::string ptx = compile_depthwise(
        depthwise_node(DType::kF16, c.x, c.k, c.stride, c.pad, c.dilation, {"clip"}));
    EXPECT_TRUE(has(ptx, "cp.async.cg.shared.global")) << ptx.substr(0, 4000);
    EXPECT_TRUE(has(ptx, ", 16, ")) << "16-byte copies";
    EXPECT_TRUE(has(ptx, "st.global.v4")) << "16-byte stores";
    EXPECT_TRUE(has(ptx, "ld.shared.v4")) << "16-byte shared reads";
  }
}

TEST_F(DepthwiseKernelTest, NarrowChannelCountsAndOtherDtypes) {
  // 3 channels of f16: 2-byte fragments, plain copies.
  const std::string c3 = compile_depthwise(depthwise_node(DType::kF16, {1, 17, 19, 3}, 3, 2, 1, 1));
  EXPECT_FALSE(has(c3, "cp.async.cg.shared") || has(c3, "cp.async.ca.shared"));
  // 20 channels of f16: 8-byte fragments.
  const std::string c20 =
      compile_depthwise(depthwise_node(DType::kF16, {2, 15, 15, 20}, 3, 1, 1, 1));
  EXPECT_TRUE(has(c20, "cp.async.ca.shared.global")) << c20.substr(0, 4000);
  // f32 and bf16 keep 16-byte fragments (4 and 8 channels).
  EXPECT_TRUE(has(compile_depthwise(depthwise_node(DType::kF32, {1, 20, 20, 24}, 5, 1, 2, 1)),
                  "st.global.v4"));
  EXPECT_TRUE(has(compile_depthwise(depthwise_node(DType::kBF16, {1, 20, 20, 144}, 3, 2, 1, 1)),
                  "st.global.v4"));
}

TEST_F(DepthwiseKernelTest, EveryEpilogueStepAndTheResidual) {
  const ir::Graph g = depthwise_node(
      DType::kF16, {1, 14, 14, 96}, 3, 1, 1, 1,
      {"add_residual", "relu", "leaky_relu", "clip", "sigmoid", "hardswish", "silu"}, true, true);
  const OpKernelSource ks = emit_op(g, g.nodes[0]);
  EXPECT_NE(ks.source.find("kResidual = true"), std::string::npos) << ks.source;
  EXPECT_NE(ks.source.find("v = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);"), std::string::npos)
      << ks.source;
  EXPECT_NE(ks.source.find("v = v / (1.f + expf(-v));"), std::string::npos) << ks.source;
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

// The int8 epilogue steps belong to the contraction kernels: fuse never gives them to a grouped
// conv, and a graph that does is refused with the step's name.
TEST(DepthwiseKernel, RefusesInt8EpilogueSteps) {
  ir::Graph g = depthwise_node(DType::kF32, {1, 8, 8, 16}, 3, 1, 1, 1, {"mul"});
  EXPECT_EQ(can_emit_op(g, g.nodes[0]).value_or(""),
            "tessel.Conv 'dw': the int8 epilogue step 'mul' on a grouped convolution (only the "
            "contraction kernels take int8 steps)");
}

}  // namespace
}  // namespace tessel::kernels::cuda
