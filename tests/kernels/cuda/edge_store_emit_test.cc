// The graph-edge forms of the contraction generator without a GPU: NCHW stores (contiguous
// along m: consecutive threads walk the slab's rows), stores in a wider dtype than C's (rounded
// to C's dtype first), and convs reading an NCHW fp32 input on the SIMT kernel. The kernels
// compile with NVRTC for sm_80 (mma.sync, SIMT) and sm_90a (wgmma), with the store vectors the
// output width allows in their PTX; the store arithmetic is in the source; can_implement
// rejects what the store cannot do.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/nvrtc_test_util.h"

namespace tessel::kernels::cuda::testing {
namespace {

using contraction::StoreMap;
using K = contraction::EpilogueOpKind;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The PTX of `ks` for `arch` (NVRTC straight: the runtime wrapper returns only the cubin); the
// test fails with the log if it does not compile.
std::string ptx_of(const KernelSource& ks, const std::string& arch) {
  const Compiled out = nvrtc_compile(ks, arch);
  if (!out.ok) ADD_FAILURE() << arch << ":\n" << out.log << "\n" << ks.source;
  return out.ptx;
}

// `p` stored NCHW (or depth_to_space by 2, CRD, then NCHW), with schedule `s` and `steps`.
TestProblem nchw(TestProblem p, const kernels::Schedule& s, std::vector<contraction::EpilogueStep> steps = {},
                 bool depth_to_space = false) {
  p.s = s;
  p.e.steps = std::move(steps);
  p.e.store.kind = depth_to_space ? StoreMap::Kind::kDepthToSpaceNchw : StoreMap::Kind::kNchw;
  p.e.store.out_h = p.c.maps.c.shape[1];
  p.e.store.out_w = p.c.maps.c.shape[2];
  if (depth_to_space) {
    p.e.store.block = 2;
    p.e.store.dcr = false;
  }
  return p;
}

std::string source(const TestProblem& p) {
  const auto why = can_implement(p.c, p.e, p.s);
  EXPECT_FALSE(why) << *why;
  return why ? "" : emit(p.c, p.e, p.s).source;
}

// The SR net's last conv: fp16, 64 -> 3 channels, stored NCHW fp32. 32 pixels per row: four
// floats per store (16 bytes), rounded to fp16 first, then widened.
TEST(EdgeStoreEmit, NchwF32StoreOnMmaSync) {
  const TestProblem p = nchw(conv_problem(conv_params(1, 16, 32, 64, 3, 3, 1, 1), DType::kF16, DType::kF16),
                             tc_schedule(128, 32, 32, 32, 32, 3), {step(K::kBias)});
  TestProblem f32 = p;
  f32.e.out_dtype = DType::kF32;
  const std::string src = source(f32);
  EXPECT_TRUE(has(src, "static constexpr bool kStoreAlongM = true;")) << src;
  EXPECT_TRUE(has(src, "static constexpr int kStoreVec = 4;"));
  EXPECT_TRUE(has(src, "const int img = m / 512, oh = m / 32 % 16, ow = m % 32;"));
  EXPECT_TRUE(has(src, "return (Index(img) * 3 + n) * 512 + oh * 32 + ow;"));
  EXPECT_TRUE(has(src, "// C is f16, stored as f32: rounded to f16 first, as the Cast it replaces\n"
                       "  __device__ __forceinline__ static float rounded(float v) { "
                       "return to_float(from_float<f16>(v)); }"));
  const std::string ptx = ptx_of(emit(f32.c, f32.e, f32.s), "sm_80");
  EXPECT_TRUE(has(ptx, "mma.sync.aligned.m16n8k16"));
  EXPECT_TRUE(has(ptx, "st.global.v4.f32")) << "16-byte stores down the slab's columns";
  EXPECT_TRUE(has(ptx, "cvt.rn.f16.f32"));
  // Same store in C's own dtype: no rounding step, eight halves per store.
  const std::string f16 = source(p);
  EXPECT_TRUE(has(f16, "static float rounded(float v) { return v; }"));
  EXPECT_TRUE(has(f16, "static constexpr int kStoreVec = 8;"));
}

// wgmma, fp16 NCHW with a residual read at the same offsets.
TEST(EdgeStoreEmit, NchwStoreWithResidualOnWgmma) {
  const TestProblem p = nchw(conv_problem(conv_params(2, 8, 48, 32, 64, 3, 1, 1)),
                             wgmma_schedule(128, 64, 64, 64, 64, 4), {step(K::kResidualAdd)});
  const std::string src = source(p);
  EXPECT_TRUE(has(src, "static constexpr int kStoreVec = 8;")) << src;
  EXPECT_TRUE(has(src, "static constexpr int kResidual = 2;"));
  const std::string ptx = ptx_of(emit(p.c, p.e, p.s), "sm_90a");
  EXPECT_TRUE(has(ptx, "wgmma.mma_async"));
  EXPECT_TRUE(has(ptx, "st.global.v4.u32")) << "8 halves per store";
  EXPECT_TRUE(has(ptx, "ld.global.nc.v4.u32")) << "the residual read as the same vectors, non-coherent";
}

// Rows that 16 does not divide: the largest vector dividing the width, down to scalars (29).
// depth_to_space before NCHW puts consecutive m two elements apart: scalars too.
TEST(EdgeStoreEmit, NarrowerVectorsForOddWidthsAndDepthToSpace) {
  const kernels::Schedule s = tc_schedule(64, 64, 32, 32, 32, 3);
  EXPECT_TRUE(has(source(nchw(conv_problem(conv_params(1, 5, 20, 16, 64, 3, 1, 1)), s)), "kStoreVec = 4;"));
  EXPECT_TRUE(has(source(nchw(conv_problem(conv_params(1, 5, 30, 16, 64, 3, 1, 1)), s)), "kStoreVec = 2;"));
  const TestProblem odd = nchw(conv_problem(conv_params(1, 5, 29, 16, 64, 3, 1, 1)), s);
  EXPECT_TRUE(has(source(odd), "kStoreVec = 1;"));
  const std::string ptx = ptx_of(emit(odd.c, odd.e, odd.s), "sm_80");
  EXPECT_TRUE(has(ptx, "st.global.u16"));
  EXPECT_FALSE(has(ptx, "st.global.v4"));

  const TestProblem d2s = nchw(conv_problem(conv_params(1, 6, 32, 16, 64, 3, 1, 1)), s, {}, true);
  const std::string src = source(d2s);
  EXPECT_TRUE(has(src, "kStoreVec = 1;")) << src;
  EXPECT_TRUE(has(src, "const int ch = n / 4, i = n / 2 % 2, j = n % 2;"));
  EXPECT_TRUE(has(src, "return ((Index(img) * 16 + ch) * 12 + oh * 2 + i) * 64 + ow * 2 + j;"));
  EXPECT_FALSE(ptx_of(emit(d2s.c, d2s.e, d2s.s), "sm_80").empty());
}

// A stem conv reading the NCHW fp32 graph input with fp16 weights: A is K-major along kw with
// scalar loads, and no Tensor Core operand (fp32): the SIMT kernel, storing fp16 NHWC.
TEST(EdgeStoreEmit, NchwF32InputOnSimt) {
  const contraction::Conv2dParams cp = conv_params(1, 20, 36, 3, 64, 3, 1, 1);
  const contraction::MatchResult m =
      contraction::match(contraction::conv2d_nchw_input_maps(cp, {DType::kF32, DType::kF16, DType::kF16}));
  ASSERT_TRUE(m.contraction);
  EXPECT_FALSE(m.tensor_cores);
  EXPECT_EQ(m.contraction->a_major, contraction::Major::kK);
  EXPECT_EQ(m.contraction->a_vec, 1);
  EXPECT_EQ(m.contraction->m, 20 * 36);
  EXPECT_EQ(m.contraction->k, 27);
  TestProblem p;
  p.c = *m.contraction;
  p.e.out_dtype = DType::kF16;
  p.e.steps = {step(K::kBias), step(K::kRelu)};
  p.s = simt_schedule(64, 64, 16, 32, 16, 1, 1);
  const std::string src = source(p);
  EXPECT_TRUE(has(src, "using ElementA = float;")) << src;
  EXPECT_TRUE(has(src, "using ElementB = f16;"));
  const std::string ptx = ptx_of(emit(p.c, p.e, p.s), "sm_80");
  EXPECT_TRUE(has(ptx, "fma.rn.f32"));
  EXPECT_FALSE(has(ptx, "mma.sync"));
  // Both edges on one kernel: NCHW in, NCHW fp32 out.
  TestProblem both = nchw(p, p.s, p.e.steps);
  both.e.out_dtype = DType::kF32;
  EXPECT_TRUE(has(source(both), "return (Index(img) * 64 + n) * 720 + oh * 36 + ow;"));
  EXPECT_FALSE(ptx_of(emit(both.c, both.e, both.s), "sm_80").empty());
}

TEST(EdgeStoreEmit, CanImplementRejectsWhatTheNchwStoreCannotDo) {
  const kernels::Schedule s = tc_schedule(64, 32, 32, 32, 32, 3);
  const TestProblem grouped = nchw(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1, 1, 2)), s);
  const auto batched = can_implement(grouped.c, grouped.e, grouped.s);
  ASSERT_TRUE(batched);
  EXPECT_EQ(*batched, "NCHW store of a batched contraction");
  TestProblem sliced = nchw(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1)), s);
  sliced.e.store.ld = 128;
  const auto ld = can_implement(sliced.c, sliced.e, sliced.s);
  ASSERT_TRUE(ld);
  EXPECT_EQ(*ld, "an NCHW store takes no ld or channel offset");
  TestProblem wrong = nchw(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1)), s);
  wrong.e.store.out_w = 7;
  const auto extent = can_implement(wrong.c, wrong.e, wrong.s);
  ASSERT_TRUE(extent);
  EXPECT_EQ(*extent, "NCHW store: M=64 is not images x 8 x 7");
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
