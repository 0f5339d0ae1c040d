// depth-to-space-dcr: Before/Expected and same numerics on the CPU executor.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// Co = 8 = 2 channels x 2x2 block. CRD channel n = c*4 + k goes to DCR channel k*2 + c: new
// order (old indices) 0, 4, 1, 5, 2, 6, 3, 7 for the weight rows [1, 1, 1, 2] and the bias.
TEST(DepthToSpaceDcr, PermutesWeightsAndBiasAndStoresDcr) {
  testing::expect_pass_result("depth-to-space-dcr", R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[8,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0, 0.75, 1.0, -1.5, 0.5, 2.0, 0.125, -0.25, 1.0]
  const %b : f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %d = tessel.Conv(%x, %w, %b) {block = 2, epilogue = ["leaky_relu"], epilogue_alpha = [0.1], epilogue_beta = [0.0], mode = "CRD", store = "depth_to_space"} : f32[1,4,4,2] @"conv"
  output %d
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[8,1,1,2] = [1.0, -1.0, 0.75, 1.0, 0.5, 2.0, -1.5, 0.5, -0.5, 0.25, 2.0, 0.125, 1.5, -2.0, -0.25, 1.0]
  const %b : f32[8] = [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]
  %d = tessel.Conv(%x, %w, %b) {block = 2, epilogue = ["leaky_relu"], epilogue_alpha = [0.1], epilogue_beta = [0.0], mode = "DCR", store = "depth_to_space"} : f32[1,4,4,2] @"conv"
  output %d
})");
}

// A residual is read in the pre-store layout, which the permutation would change; DCR
// stores and plain convs are already what the pass wants.
TEST(DepthToSpaceDcr, LeavesResidualsDcrAndPlainStoresAlone) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %r : f32[1,2,2,8]
  const %w : f32[8,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0, 0.75, 1.0, -1.5, 0.5, 2.0, 0.125, -0.25, 1.0]
  const %b : f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %d = tessel.Conv(%x, %w, %b, %r) {block = 2, epilogue = ["add_residual"], epilogue_alpha = [0.0], epilogue_beta = [0.0], mode = "CRD", store = "depth_to_space"} : f32[1,4,4,2] @"residual"
  %e = tessel.Conv(%x, %w) {block = 2, mode = "DCR", store = "depth_to_space"} : f32[1,4,4,2] @"dcr"
  %f = tessel.Conv(%x, %w) : f32[1,2,2,8] @"plain"
  output %d
  output %e
  output %f
})";
  testing::expect_pass_result("depth-to-space-dcr", unchanged, unchanged);
}

// A grouped conv's output channels belong to their group in CRD order (a grouped
// ConvTranspose's phases, convert-layout): DCR would move them into other groups' ranges.
TEST(DepthToSpaceDcr, LeavesGroupedConvsCrd) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[8,1,1,1] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0]
  const %b : f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
  %d = tessel.Conv(%x, %w, %b) {block = 2, group = 2, mode = "CRD", store = "depth_to_space"} : f32[1,4,4,2] @"grouped"
  output %d
})";
  testing::expect_pass_result("depth-to-space-dcr", unchanged, unchanged);
}

}  // namespace
}  // namespace tessel
