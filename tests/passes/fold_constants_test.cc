#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace tessel {
namespace {

TEST(FoldConstants, EvaluatesShapeArithmetic) {
  testing::expect_pass_result("fold-constants", R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  const %a : i64[2] = [3, 4]
  const %b : i64[1] = [-1]
  const %scale : f32[3] = [1.0, 2.0, 3.0]
  const %two : f32[] = [2.0]
  %shape = Concat(%b, %a) {axis = 0} : i64[3] @"concat"
  %s2 = Mul(%scale, %two) : f32[3] @"mul"
  %r = Reshape(%x, %shape) : f32[2,3,4] @"reshape"
  output %r
  output %s2
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  const %shape : i64[3] = [-1, 3, 4]
  const %s2 : f32[3] = [2.0, 4.0, 6.0]
  %r = Reshape(%x, %shape) : f32[2,3,4] @"reshape"
  output %r
  output %s2
})");
}

// Shape and Size of an activation are known from its static type: the flatten size of
// PyTorch's dynamic-axes exports (x.view(x.size(0), -1)) folds to a constant.
TEST(FoldConstants, ShapeAndSizeOfActivationsFold) {
  testing::expect_pass_result("fold-constants", R"(graph @g opset 17 {
  input %x : f32[2,3,4,5]
  const %zero : i64[] = [0]
  const %axis : i64[1] = [0]
  const %rest : i64[1] = [-1]
  %hw = Shape(%x) {start = 2} : i64[2] @"hw"
  %size = Size(%x) : i64[] @"size"
  %all = Shape(%x) : i64[4] @"shape"
  %n = Gather(%all, %zero) {axis = 0} : i64[] @"gather"
  %n1 = Unsqueeze(%n, %axis) : i64[1] @"unsqueeze"
  %flat = Concat(%n1, %rest) {axis = 0} : i64[2] @"concat"
  %r = Reshape(%x, %flat) : f32[2,60] @"reshape"
  output %r
  output %hw
  output %size
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3,4,5]
  const %hw : i64[2] = [4, 5]
  const %size : i64[] = [120]
  const %flat : i64[2] = [2, -1]
  %r = Reshape(%x, %flat) : f32[2,60] @"reshape"
  output %r
  output %hw
  output %size
})");
}

TEST(FoldConstants, LeavesNodesWithRuntimeInputs) {
  const char* g = R"(graph @g opset 17 {
  input %x : f32[3]
  const %c : f32[3] = [1.0, 2.0, 3.0]
  %y = Add(%x, %c) : f32[3] @"add"
  output %y
})";
  testing::expect_pass_result("fold-constants", g, g);
}

}  // namespace
}  // namespace tessel
