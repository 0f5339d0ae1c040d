#include "kernels/contraction/ops_maps.h"

#include <gtest/gtest.h>

#include "kernels/contraction/contraction.h"
#include "core/error.h"
#include "eval_util.h"

namespace tessel::contraction {
namespace {

TEST(OpsMaps, ConvOutputSizeMatchesOnnxShapeInference) {
  // onnx.shape_inference on Conv with these (input, kernel, stride, pads, dilation).
  EXPECT_EQ(conv_output_size(224, 7, 2, 3, 3, 1), 112);
  EXPECT_EQ(conv_output_size(56, 3, 2, 1, 1, 1), 28);
  EXPECT_EQ(conv_output_size(56, 1, 2, 0, 0, 1), 28);
  EXPECT_EQ(conv_output_size(7, 3, 2, 1, 2, 1), 4);
  EXPECT_EQ(conv_output_size(6, 2, 1, 0, 1, 2), 5);
  EXPECT_EQ(conv_output_size(5, 3, 1, 0, 0, 2), 1);
  EXPECT_EQ(conv_output_size(10, 4, 3, 2, 1, 1), 4);
  // The dilated kernel (span 5) does not fit 2 pixels: no output.
  EXPECT_EQ(conv_output_size(2, 5, 1, 0, 0, 1), 0);
  EXPECT_THROW(conv_output_size(8, 3, 0, 0, 0, 1), InternalError);
}

TEST(OpsMaps, Conv2dShapes) {
  Conv2dParams p;
  p.n = 2;
  p.h = 9;
  p.w = 7;
  p.ci = 6;
  p.co = 4;
  p.kh = 3;
  p.kw = 1;
  p.stride_h = 2;
  p.pad_top = 1;
  p.groups = 2;
  EXPECT_EQ(p.out_h(), 4);
  EXPECT_EQ(p.out_w(), 7);
  IndexMaps maps = conv2d_nhwc_maps(p);
  EXPECT_EQ(maps.a.shape, (Shape{2, 9, 7, 6}));
  EXPECT_EQ(maps.b.shape, (Shape{4, 3, 1, 3}));
  EXPECT_EQ(maps.c.shape, (Shape{2, 4, 7, 4}));
  EXPECT_EQ(maps.str(),
            "for g<2, b<2, oh<4, ow<7, co<2; sum kh<3, kw<1, ci<3:\n"
            "  C[b, oh, ow, 2*g + co] += A[b, 2*oh + kh - 1, ow + kw, 3*g + ci] * "
            "B[2*g + co, kh, kw, ci]\n"
            "  A f16[2,9,7,6], B f16[4,3,1,3], C f16[2,4,7,4]");
}

TEST(OpsMaps, Conv2dPreconditionsAreInternalErrors) {
  Conv2dParams p;
  p.ci = 6;
  p.co = 4;
  p.groups = 4;  // does not divide ci
  EXPECT_THROW(conv2d_nhwc_maps(p), InternalError);
  p.groups = 1;
  p.kh = 3;  // a 3-row window on a 1-row input
  EXPECT_THROW(conv2d_nhwc_maps(p), InternalError);
}

TEST(OpsMaps, GemmLayoutNames) {
  for (const char* name : {"NN", "NT", "TN", "TT"}) {
    std::optional<GemmLayout> layout = parse_gemm_layout(name);
    ASSERT_TRUE(layout) << name;
    EXPECT_EQ(gemm_layout_name(*layout), name);
  }
  EXPECT_TRUE(parse_gemm_layout("TN")->trans_a);
  EXPECT_FALSE(parse_gemm_layout("TN")->trans_b);
  for (const char* bad : {"", "N", "nn", "NNN", "XN"}) EXPECT_FALSE(parse_gemm_layout(bad)) << bad;
}

TEST(OpsMaps, GemmStoresTransposedOperands) {
  IndexMaps tn = gemm_maps(3, 5, 7, {true, false}, {DType::kBF16, DType::kBF16, DType::kF32});
  EXPECT_EQ(tn.a.shape, (Shape{7, 3}));
  EXPECT_EQ(tn.b.shape, (Shape{7, 5}));
  EXPECT_EQ(tn.c.shape, (Shape{3, 5}));
  EXPECT_EQ(tn.a.dtype, DType::kBF16);
  EXPECT_EQ(tn.c.dtype, DType::kF32);
  EXPECT_EQ(gemm_maps(3, 5, 7, {false, true}).b.shape, (Shape{5, 7}));
}

TEST(OpsMaps, MatMulShapes) {
  EXPECT_EQ(matmul_maps({2, 1, 3, 4}, {3, 4, 2}).c.shape, (Shape{2, 3, 3, 2}));
  EXPECT_EQ(matmul_maps({4}, {7, 4, 5}).c.shape, (Shape{7, 5}));
  EXPECT_EQ(matmul_maps({6, 4}, {4}).c.shape, (Shape{6}));
  EXPECT_THROW(matmul_maps({2, 3}, {4, 5}), InternalError);        // K differs
  EXPECT_THROW(matmul_maps({2, 3, 4}, {5, 4, 2}), InternalError);  // batch 2 vs 5
}

TEST(OpsMaps, DotProductIsASingleElementContraction) {
  IndexMaps maps = matmul_maps({4}, {4});
  EXPECT_TRUE(maps.c.shape.empty());
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction);
  EXPECT_EQ(r.contraction->m, 1);
  EXPECT_EQ(r.contraction->n, 1);
  EXPECT_EQ(r.contraction->k, 4);
  // numpy: np.dot([5, 3, 1, -1], [3, 1, -1, -3]) = 20
  std::vector<double> a = testing::test_data({4}, 1), b = testing::test_data({4}, 2);
  EXPECT_EQ(testing::evaluate_maps(maps, a, b), std::vector<double>{20});
  EXPECT_EQ(testing::evaluate_gemm_view(*r.contraction, a, b), std::vector<double>{20});
}

}  // namespace
}  // namespace tessel::contraction
