#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pass_test_util.h"

namespace tessel {
namespace {

// var + eps = 4 and 0.25 so that s = gamma / sqrt(var + eps) is exact: s = [1.5, 4].
// W' = W * s[co]; b' = (b - mean) * s + beta.
TEST(FoldBatchNorm, FoldsIntoConvWithBias) {
  testing::expect_pass_result("fold-batch-norm", R"(graph @g opset 17 {
  input %x : f32[1,1,3,3]
  const %w : f32[2,1,1,1] = [2.0, -1.0]
  const %b : f32[2] = [1.0, 0.5]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %c = Conv(%x, %w, %b) {kernel_shape = [1, 1]} : f32[1,2,3,3] @"conv"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[1,2,3,3] @"bn"
  output %y
})",
                               R"(graph @g opset 17 {
  input %x : f32[1,1,3,3]
  const %w2 : f32[2,1,1,1] = [3.0, -4.0]
  const %b2 : f32[2] = [1.0, -5.0]
  %y = Conv(%x, %w2, %b2) {kernel_shape = [1, 1]} : f32[1,2,3,3] @"conv"
  output %y
})");
}

TEST(FoldBatchNorm, FoldsIntoConvWithoutBias) {
  testing::expect_pass_result("fold-batch-norm", R"(graph @g opset 17 {
  input %x : f32[1,1,3,3]
  const %w : f32[2,1,1,1] = [2.0, -1.0]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %c = Conv(%x, %w) {kernel_shape = [1, 1]} : f32[1,2,3,3] @"conv"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[1,2,3,3] @"bn"
  output %y
})",
                               R"(graph @g opset 17 {
  input %x : f32[1,1,3,3]
  const %w2 : f32[2,1,1,1] = [3.0, -4.0]
  const %b2 : f32[2] = [-0.5, -7.0]
  %y = Conv(%x, %w2, %b2) {kernel_shape = [1, 1]} : f32[1,2,3,3] @"conv"
  output %y
})");
}

// The conv output is also read by another node: folding would change that reader's input.
TEST(FoldBatchNorm, LeavesSharedConvOutputAlone) {
  const char* graph = R"(graph @g opset 17 {
  input %x : f32[1,1,2,2]
  const %w : f32[2,1,1,1] = [2.0, -1.0]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %c = Conv(%x, %w) {kernel_shape = [1, 1]} : f32[1,2,2,2] @"conv"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[1,2,2,2] @"bn"
  %r = Relu(%c) : f32[1,2,2,2] @"relu"
  output %y
  output %r
})";
  testing::expect_pass_result("fold-batch-norm", graph, graph);
}

// Real epsilon and random-looking statistics: compare numerics only.
TEST(FoldBatchNorm, MatchesReferenceNumerics) {
  const char* before = R"(graph @g opset 17 {
  input %x : f32[1,2,4,4]
  const %w : f32[3,2,3,3] = [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, -0.15, 0.25, -0.35, 0.45, 0.55, -0.65, 0.75, -0.85, 0.95, 0.12, -0.22, 0.32, -0.42, 0.52, 0.62, -0.72, 0.82, 0.92, -0.13, 0.23, 0.33, -0.43, 0.53, -0.63, 0.73, 0.83, -0.93, 0.14, 0.24, -0.34, 0.44, 0.54, -0.64, 0.74, -0.84, 0.94, 0.16, -0.26, 0.36, 0.46, -0.56, 0.66, -0.76, 0.86, 0.96]
  const %b : f32[3] = [0.1, -0.2, 0.3]
  const %gamma : f32[3] = [1.1, 0.9, 1.3]
  const %beta : f32[3] = [0.05, -0.1, 0.2]
  const %mean : f32[3] = [0.3, -0.2, 0.1]
  const %var : f32[3] = [0.8, 1.2, 0.5]
  %c = Conv(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,3,4,4] @"conv"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 1e-05} : f32[1,3,4,4] @"bn"
  output %y
})";
  ir::Graph in = ir::parse_graph(before);
  ir::Graph out = passes::run_passes(in, {"fold-batch-norm"});
  ASSERT_EQ(out.nodes.size(), 1u);
  EXPECT_EQ(out.nodes[0].op, "Conv");
  testing::expect_same_numerics(in, out);
}

// ConvTranspose's W is [C, M/group, k...]: output channel m of group g is column m of the rows
// of g's input channels. Group 2, C = 4, M = 2: rows 0-1 scale by s[0] = 1.5, rows 2-3 by
// s[1] = 4; b' = (0 - mean) * s + beta.
TEST(FoldBatchNorm, FoldsIntoGroupedConvTranspose) {
  testing::expect_pass_result("fold-batch-norm", R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  const %w : f32[4,1,1,1] = [2.0, -1.0, 0.5, 1.0]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %c = ConvTranspose(%x, %w) {group = 2} : f32[1,2,3,3] @"up"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[1,2,3,3] @"bn"
  output %y
})",
                               R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  const %w2 : f32[4,1,1,1] = [3.0, -1.5, 2.0, 4.0]
  const %b2 : f32[2] = [-0.5, -7.0]
  %y = ConvTranspose(%x, %w2, %b2) {group = 2} : f32[1,2,3,3] @"up"
  output %y
})");
}

// A decoder's ConvTranspose (k2 s2, bias, 3 output channels) + BN: numerics only.
TEST(FoldBatchNorm, FoldsIntoConvTransposeNumerics) {
  const char* before = R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  const %w : f32[2,3,2,2] = [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, -0.15, 0.25, -0.35, 0.45, 0.55, -0.65, 0.75, -0.85, 0.95, 0.12, -0.22, 0.32, -0.42, 0.52, 0.62]
  const %b : f32[3] = [0.1, -0.2, 0.3]
  const %gamma : f32[3] = [1.1, 0.9, 1.3]
  const %beta : f32[3] = [0.05, -0.1, 0.2]
  const %mean : f32[3] = [0.3, -0.2, 0.1]
  const %var : f32[3] = [0.8, 1.2, 0.5]
  %c = ConvTranspose(%x, %w, %b) {strides = [2, 2]} : f32[1,3,6,6] @"up"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 1e-05} : f32[1,3,6,6] @"bn"
  output %y
})";
  ir::Graph in = ir::parse_graph(before);
  ir::Graph out = passes::run_passes(in, {"fold-batch-norm"});
  ASSERT_EQ(out.nodes.size(), 1u);
  EXPECT_EQ(out.nodes[0].op, "ConvTranspose");
  testing::expect_same_numerics(in, out);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// A QDQ conv's weight DequantizeLinear(Wq, sw): the batch norm's scale goes into sw per output
// channel (s = gamma / sqrt(var + eps) = [1, 0.5]), the integers stay, the shift into the bias.
TEST(FoldBatchNorm, QuantizedWeightTakesTheScaleIntoItsDequantization) {
  testing::expect_pass_result("fold-batch-norm", R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  const %wq : i8[2,2,1,1] = [1, -2, 3, 4]
  const %sw : f32[] = [0.5]
  const %gamma : f32[2] = [2.0, 0.5]
  const %beta : f32[2] = [1.0, -1.0]
  const %mean : f32[2] = [0.5, 0.25]
  const %var : f32[2] = [3.0, 0.0]
  %wd = DequantizeLinear(%wq, %sw) : f32[2,2,1,1] @"dqw"
  %c = Conv(%x, %wd) : f32[1,2,3,3] @"conv"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 1.0} : f32[1,2,3,3] @"bn"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  const %wq : i8[2,2,1,1] = [1, -2, 3, 4]
  const %s : f32[2] = [0.5, 0.25]
  const %b : f32[2] = [0.5, -1.125]
  %wd = DequantizeLinear(%wq, %s) {axis = 0} : f32[2,2,1,1] @"dqw"
  %y = Conv(%x, %wd, %b) : f32[1,2,3,3] @"conv"
  output %y
})");
}

}  // namespace
}  // namespace tessel
