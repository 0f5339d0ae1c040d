// widen-narrow-groups: Before/Expected and same numerics on the CPU executor.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// "0.5, 1.0, 1.5, ..." (n values): weights the IR parser reads.
std::string ramp(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += (i > 1 ? ", " : "") + std::to_string(0.5 * i);
  return s;
}

// 2 groups of 2 input and 4 output channels become 1 group of 4 input channels: output
// channels 0-3 read input channels 0-1 (their old group), 4-7 read 2-3, zeros elsewhere.
TEST(WidenNarrowGroups, MergesGroupsWithBlockDiagonalWeights) {
  testing::expect_pass_result("widen-narrow-groups", R"(graph @g opset 17 {
  input %x : f32[1,2,2,4]
  const %w : f32[8,1,1,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]
  const %b : f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %y = tessel.Conv(%x, %w, %b) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], group = 2} : f32[1,2,2,8] @"conv"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,4]
  const %w : f32[8,1,1,4] = [1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0, 9.0, 10.0, 0.0, 0.0, 11.0, 12.0, 0.0, 0.0, 13.0, 14.0, 0.0, 0.0, 15.0, 16.0]
  const %b : f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %y = tessel.Conv(%x, %w, %b) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], group = 1} : f32[1,2,2,8] @"conv"
  output %y
})");
}

// Already 8 output channels per group; depthwise (one input channel per group); 3 groups of 4
// outputs, which no factor of 2 divides: all left as they are.
TEST(WidenNarrowGroups, LeavesWideGroupsDepthwiseAndIndivisibleCountsAlone) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,2,2,16]
  input %z : f32[1,2,2,6]
  const %w8 : f32[16,1,1,8] = [)" + ramp(128) + R"(]
  const %dw : f32[16,1,1,1] = [)" + ramp(16) + R"(]
  const %w3 : f32[12,1,1,2] = [)" + ramp(24) + R"(]
  %a = tessel.Conv(%x, %w8) {group = 2} : f32[1,2,2,16] @"wide"
  %d = tessel.Conv(%x, %dw) {group = 16} : f32[1,2,2,16] @"depthwise"
  %c = tessel.Conv(%z, %w3) {group = 3} : f32[1,2,2,12] @"three"
  output %a
  output %d
  output %c
})";
  testing::expect_pass_result("widen-narrow-groups", unchanged, unchanged);
}

}  // namespace
}  // namespace tessel
