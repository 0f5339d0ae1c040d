// Contraction::key() and str(), Epilogue::str().
#include "kernels/contraction/contraction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "kernels/contraction/epilogue.h"
#include "kernels/contraction/ops_maps.h"
#include "workloads.h"

namespace tessel::contraction {
namespace {

Contraction contraction_of(const IndexMaps& maps) {
  MatchResult r = match(maps);
  EXPECT_TRUE(r.contraction);
  return r.contraction.value_or(Contraction{});
}

Conv2dParams conv3x3() {
  Conv2dParams p;
  p.h = p.w = 56;
  p.ci = p.co = 64;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  return p;
}

TEST(ContractionKey, SpellsOutTheWholeProblem) {
  EXPECT_EQ(contraction_of(gemm_maps(512, 64, 512, {})).key(),
            "f16*f16->f16/f32:b1:m512:n64:k512:b()m(512)n(64)k(512)"
            ":A[512,512](m0,k0):B[512,64](k0,n0):C[512,64](m0,n0)");
  // The batch-1 image dim b has extent 1: it is in no group and reads index 0.
  EXPECT_EQ(contraction_of(conv2d_nhwc_maps(conv3x3())).key(),
            "f16*f16->f16/f32:b1:m3136:n64:k576:b()m(56,56)n(64)k(3,3,64)"
            ":A[1,56,56,64](0,m0+k0-1,m1+k1-1,k2):B[64,3,3,64](n0,k0,k1,k2)"
            ":C[1,56,56,64](0,m0,m1,n0)");
}

TEST(ContractionKey, IgnoresDimNamesAndDeclarationOrder) {
  IndexMaps maps = gemm_maps(64, 32, 16, {false, true});
  IndexMaps renamed = maps;
  renamed.dims[0].name = "rows";
  renamed.dims[2].name = "depth";
  // Declare (k, n, m) instead of (m, n, k): reverse every coefficient vector.
  IndexMaps reordered = maps;
  std::reverse(reordered.dims.begin(), reordered.dims.end());
  for (Access* x : {&reordered.a, &reordered.b, &reordered.c})
    for (AffineIndex& idx : x->index) std::reverse(idx.coeffs.begin(), idx.coeffs.end());
  const std::string key = contraction_of(maps).key();
  EXPECT_EQ(contraction_of(renamed).key(), key);
  EXPECT_EQ(contraction_of(reordered).key(), key);
}

TEST(ContractionKey, DistinguishesEveryDifference) {
  Conv2dParams base = conv3x3();
  const std::string key = contraction_of(conv2d_nhwc_maps(base)).key();
  Conv2dParams pad0 = base;
  pad0.pad_top = pad0.pad_left = pad0.pad_bottom = pad0.pad_right = 0;
  pad0.h = pad0.w = 58;  // same 56x56 output, M, N and K: only the gather differs
  Conv2dParams asym = base;
  asym.pad_bottom = 0;
  asym.h = 57;  // again 56x56
  Conv2dParams dil = base;
  dil.dilation_h = dil.dilation_w = 2;
  dil.h = dil.w = 58;  // (58 + 2 - 2*2 - 1) + 1 = 56 again
  std::vector<std::string> keys = {key};
  for (const Conv2dParams& p : {pad0, asym, dil})
    keys.push_back(contraction_of(conv2d_nhwc_maps(p)).key());
  keys.push_back(
      contraction_of(conv2d_nhwc_maps(base, {DType::kBF16, DType::kBF16, DType::kF16})).key());
  keys.push_back(
      contraction_of(conv2d_nhwc_maps(base, {DType::kF16, DType::kF16, DType::kF32})).key());
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << keys[i];
  EXPECT_EQ(contraction_of(conv2d_nhwc_maps(base)).key(), key);  // stable
}

TEST(ContractionKey, EqualExactlyForEqualWorkloads) {
  std::optional<std::string> dir = testing::workloads_dir();
  if (!dir) GTEST_SKIP() << "shared/workloads not found beside " << TESSEL_SOURCE_DIR;
  std::vector<testing::Workload> all = testing::load_workloads(*dir);
  ASSERT_GT(all.size(), 60u);
  std::map<std::string, const testing::Workload*> by_key;
  for (const testing::Workload& w : all) {
    MatchResult r = match(w.maps);
    ASSERT_TRUE(r.contraction) << w.name;
    auto [it, inserted] = by_key.emplace(r.contraction->key(), &w);
    if (!inserted) {
      EXPECT_EQ(it->second->params, w.params) << w.name << " vs " << it->second->name;
    }
  }
}

TEST(ContractionStr, DescribesGroupsOperandsAndLoops) {
  Conv2dParams p = conv3x3();
  p.co = 128;
  p.groups = 2;
  EXPECT_EQ(contraction_of(conv2d_nhwc_maps(p)).str(),
            "contraction f16*f16 -> f16 (acc f32), 0.231211 GFLOP\n"
            "  batch 2 = g(2)\n"
            "  M 3136 = oh(56)*ow(56)\n"
            "  N 64 = co(64)\n"
            "  K 288 = kh(3)*kw(3)*ci(32)\n"
            "  A: K-major, vec 8, gather\n"
            "  B: K-major, vec 8, plain\n"
            "  for g<2, b<1, oh<56, ow<56, co<64; sum kh<3, kw<3, ci<32:\n"
            "    C[b, oh, ow, 64*g + co] += A[b, oh + kh - 1, ow + kw - 1, 32*g + ci] * "
            "B[64*g + co, kh, kw, ci]\n"
            "    A f16[1,56,56,64], B f16[128,3,3,32], C f16[1,56,56,128]");
  EXPECT_NE(contraction_of(matmul_maps({2, 3}, {3})).str().find("operands swapped"),
            std::string::npos);
}

// What the epilogue reads per output element, for the cost model: the residual's element, in
// its own dtype where that is not the output's (an int8 residual of kScaledResidualAdd).
TEST(EpilogueReads, TheResidualElement) {
  Epilogue e;
  e.steps = {{EpilogueOpKind::kBias, 0, 0, 0}, {EpilogueOpKind::kRelu}};
  EXPECT_EQ(read_bytes_per_output(e), 0);
  e.steps.push_back({EpilogueOpKind::kResidualAdd, 0, 0, 1});
  EXPECT_EQ(read_bytes_per_output(e), 2);
  e.out_dtype = DType::kF32;
  EXPECT_EQ(read_bytes_per_output(e), 4);
  e.out_dtype = DType::kI8;
  e.residual_dtype = DType::kI8;
  e.steps.back().kind = EpilogueOpKind::kScaledResidualAdd;
  EXPECT_EQ(read_bytes_per_output(e), 1);
}

TEST(EpilogueStr, StepsThenStore) {
  Epilogue e;
  EXPECT_EQ(e.str(), "store f16 plain(ld=n)");
  e.steps = {{EpilogueOpKind::kScale, 0, 0, 0},
             {EpilogueOpKind::kBias, 0, 0, 1},
             {EpilogueOpKind::kLeakyRelu, 0.1f},
             {EpilogueOpKind::kClip, 0, 6},
             {EpilogueOpKind::kResidualAdd, 0, 0, 2},
             {EpilogueOpKind::kHardSwish},
             {EpilogueOpKind::kSilu},
             {EpilogueOpKind::kSigmoid},
             {EpilogueOpKind::kGelu},
             {EpilogueOpKind::kGeluTanh},
             {EpilogueOpKind::kTanh},
             {EpilogueOpKind::kMish},
             {EpilogueOpKind::kHardSigmoid, 0.2f, 0.5f},
             {EpilogueOpKind::kElu, 1.0f},
             {EpilogueOpKind::kRelu}};
  e.store.kind = StoreMap::Kind::kChannelSlice;
  e.store.channel_offset = 64;
  e.store.ld = 256;
  EXPECT_EQ(e.str(),
            "scale(#0) -> bias(#1) -> leaky_relu(0.1) -> clip(0, 6) -> residual_add(#2) -> "
            "hardswish -> silu -> sigmoid -> gelu -> gelu_tanh -> tanh -> mish -> hard_sigmoid(0.2, 0.5) -> "
            "elu(1) -> relu -> store f16 "
            "channel_slice(offset=64, ld=256)");
  Epilogue d2s;
  d2s.out_dtype = DType::kI8;
  d2s.store = {StoreMap::Kind::kDepthToSpace, 0, 0, 56, 56, 2, true};
  EXPECT_EQ(d2s.str(), "store i8 depth_to_space(block=2, DCR, out=56x56)");
  d2s.store.kind = StoreMap::Kind::kPlain;
  d2s.store.ld = 96;
  EXPECT_EQ(d2s.str(), "store i8 plain(ld=96)");
  // fuse's fake quantization of an asymmetric QDQ pair, as `explain` prints it.
  Epilogue fq;
  fq.steps = {{EpilogueOpKind::kRound, 0.5f}, {EpilogueOpKind::kClip, -116, 139}, {EpilogueOpKind::kMul, 0.5f}};
  EXPECT_EQ(fq.str(), "round(0.5) -> clip(-116, 139) -> mul(0.5) -> store f16 plain(ld=n)");
}

}  // namespace
}  // namespace tessel::contraction
