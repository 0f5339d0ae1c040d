// lift-1d: 1-D convs and pools become 2-D ones over [N, C, 1, L]; the Squeeze after each lifted
// op moves down through per-element ops (constants gain the axis) and cancels against the next
// lifted op's Unsqueeze. Before/Expected, both run on the CPU by expect_pass_result.
#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace tessel {
namespace {

TEST(Lift1d, ConvScaleReluPoolAddBecomeOne2dChain) {
  testing::expect_pass_result("lift-1d", R"(graph @g opset 17 {
  input %x : f32[1,2,6]
  const %w : f32[3,2,3] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, 1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, 1.0, -1.0]
  const %s : f32[3,1] = [0.5, 2.0, -1.0]
  %c = Conv(%x, %w) {kernel_shape = [3], pads = [1, 1]} : f32[1,3,6] @"conv"
  %m = Mul(%c, %s) : f32[1,3,6] @"scale"
  %r = Relu(%m) : f32[1,3,6] @"relu"
  %p = MaxPool(%r) {kernel_shape = [2], strides = [2]} : f32[1,3,3] @"pool"
  %y = Add(%p, %p) : f32[1,3,3] @"add"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,6]
  const %a0 : i64[1] = [2]
  const %w2 : f32[3,2,1,3] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, 1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, 1.0, -1.0]
  const %s2 : f32[3,1,1] = [0.5, 2.0, -1.0]
  const %a1 : i64[1] = [2]
  %x2 = Unsqueeze(%x, %a0) : f32[1,2,1,6] @"conv.to_2d"
  %c2 = Conv(%x2, %w2) {kernel_shape = [1, 3], pads = [0, 1, 0, 1]} : f32[1,3,1,6] @"conv"
  %m2 = Mul(%c2, %s2) : f32[1,3,1,6] @"scale"
  %r2 = Relu(%m2) : f32[1,3,1,6] @"relu"
  %p2 = MaxPool(%r2) {kernel_shape = [1, 2], strides = [1, 2]} : f32[1,3,1,3] @"pool"
  %y2 = Add(%p2, %p2) : f32[1,3,1,3] @"add"
  %y = Squeeze(%y2, %a1) : f32[1,3,3] @"add.to_1d"
  output %y
})");
}

// auto_pad SAME_UPPER (TensorFlow exports): the lifted conv takes the pads it resolves to, the
// odd total padding's extra element at the end.
TEST(Lift1d, AutoPadBecomesExplicitPads) {
  testing::expect_pass_result("lift-1d", R"(graph @g opset 17 {
  input %x : f32[1,1,5]
  const %w : f32[1,1,4] = [1.0, -1.0, 0.5, 0.25]
  %y = Conv(%x, %w) {auto_pad = "SAME_UPPER", kernel_shape = [4]} : f32[1,1,5] @"conv"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,1,5]
  const %a0 : i64[1] = [2]
  const %w2 : f32[1,1,1,4] = [1.0, -1.0, 0.5, 0.25]
  const %a1 : i64[1] = [2]
  %x2 = Unsqueeze(%x, %a0) : f32[1,1,1,5] @"conv.to_2d"
  %y2 = Conv(%x2, %w2) {kernel_shape = [1, 4], pads = [0, 1, 0, 2]} : f32[1,1,1,5] @"conv"
  %y = Squeeze(%y2, %a1) : f32[1,1,5] @"conv.to_1d"
  output %y
})");
}

// A conv whose weight is computed at run time, and 2-D ones, stay as they are.
TEST(Lift1d, LeavesRuntimeWeightsAnd2dAlone) {
  const char* graph = R"(graph @g opset 17 {
  input %x : f32[1,2,6]
  input %w : f32[3,2,3]
  input %z : f32[1,2,4,4]
  const %v : f32[3,2,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5]
  %c = Conv(%x, %w) {kernel_shape = [3]} : f32[1,3,4] @"conv1d"
  %d = Conv(%z, %v) : f32[1,3,4,4] @"conv2d"
  output %c
  output %d
})";
  testing::expect_pass_result("lift-1d", graph, graph);
}

}  // namespace
}  // namespace tessel
