// lower-batch-norm: a BatchNormalization fold-batch-norm could not fold becomes a per-channel
// scale and shift. Constants chosen so that s = gamma / sqrt(var + eps) is exact.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"

namespace tessel {
namespace {

// After a Concat (DenseNet's pre-activation BN): s = [3/2, 2/0.5] = [1.5, 4],
// t = beta - mean * s = [0.25 - 0.75, -1 - 6] = [-0.5, -7].
TEST(LowerBatchNorm, AfterConcatBecomesScaleAndShift) {
  testing::expect_pass_result("lower-batch-norm", R"(graph @g opset 17 {
  input %a : f32[2,1,3,3]
  input %b : f32[2,1,3,3]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %c = Concat(%a, %b) {axis = 1} : f32[2,2,3,3] @"cat"
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[2,2,3,3] @"bn"
  %r = Relu(%y) : f32[2,2,3,3] @"relu"
  output %r
})",
                               R"(graph @g opset 17 {
  input %a : f32[2,1,3,3]
  input %b : f32[2,1,3,3]
  const %s : f32[2,1,1] = [1.5, 4.0]
  const %t : f32[2,1,1] = [-0.5, -7.0]
  %c = Concat(%a, %b) {axis = 1} : f32[2,2,3,3] @"cat"
  %m = Mul(%c, %s) : f32[2,2,3,3] @"bn.scale"
  %y = Add(%m, %t) : f32[2,2,3,3] @"bn"
  %r = Relu(%y) : f32[2,2,3,3] @"relu"
  output %r
})");
}

// Rank 2 (a BatchNorm1d on a dense layer's output): the constants are [C].
TEST(LowerBatchNorm, RankTwoHasVectorConstants) {
  testing::expect_pass_result("lower-batch-norm", R"(graph @g opset 17 {
  input %x : f32[4,2]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %mean : f32[2] = [0.5, 1.5]
  const %var : f32[2] = [4.0, 0.25]
  %y = BatchNormalization(%x, %gamma, %beta, %mean, %var) {epsilon = 0.0} : f32[4,2] @"bn"
  output %y
})",
                               R"(graph @g opset 17 {
  input %x : f32[4,2]
  const %s : f32[2] = [1.5, 4.0]
  const %t : f32[2] = [-0.5, -7.0]
  %m = Mul(%x, %s) : f32[4,2] @"bn.scale"
  %y = Add(%m, %t) : f32[4,2] @"bn"
  output %y
})");
}

// Non-constant statistics (a graph input) and training mode stay: the GPU then says why.
TEST(LowerBatchNorm, LeavesNonConstantAndTrainingModeAlone) {
  const char* running = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %mean : f32[2]
  const %gamma : f32[2] = [3.0, 2.0]
  const %beta : f32[2] = [0.25, -1.0]
  const %var : f32[2] = [4.0, 0.25]
  %y = BatchNormalization(%x, %gamma, %beta, %mean, %var) : f32[1,2,2,2] @"bn"
  output %y
})";
  testing::expect_pass_result("lower-batch-norm", running, running);
}

// Random statistics and epsilon, a 5-D input (BatchNorm3d): the CPU executor computes the same
// before and after, within rounding.
TEST(LowerBatchNorm, SameNumbersOnRandomStatistics) {
  const ir::Graph before = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[2,3,2,3,4]
  const %gamma : f32[3] = [0.7, -1.3, 2.1]
  const %beta : f32[3] = [0.1, 0.9, -0.4]
  const %mean : f32[3] = [-0.2, 0.35, 1.5]
  const %var : f32[3] = [0.8, 1.7, 0.05]
  %y = BatchNormalization(%x, %gamma, %beta, %mean, %var) {epsilon = 0.001} : f32[2,3,2,3,4] @"bn"
  output %y
})");
  const ir::Graph after = passes::lower_batch_norm(before);
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op, "Mul");
  EXPECT_EQ(after.type(after.nodes[0].inputs[1]).shape, (Shape{3, 1, 1, 1}));
  testing::expect_same_numerics(before, after, 1e-6, 1e-6);
}

}  // namespace
}  // namespace tessel
