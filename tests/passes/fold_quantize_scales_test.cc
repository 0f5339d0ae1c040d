// fold-quantize-scales: Before/Expected and the same numerics on the CPU executor. The scales
// are powers of two, so that the moved divisions are exact and the values must be identical
// (ops/fold_quantize_scales_test.cc bounds the rounding of other scales).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

using testing::small_ints;

std::string head(const std::string& b, const std::string& s) { return testing::int8_conv_head(b, s); }

// ResNet's residual epilogue: the first quantize's 1/s into S and B, the second's into the
// dequantization and the residual's scale.
TEST(FoldQuantizeScales, IntoTheDequantizationScaleBiasAndResidualScale) {
  testing::expect_pass_result(
      "fold-quantize-scales",
      head("0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25",
           "0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625") +
          R"(  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["quantize", "mul", "add_residual_scaled", "relu", "quantize"], epilogue_alpha = [0.5, 0.5, 0.0625, 0.0, 0.25], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})",
      head("1.0, -0.5, 2.0, -2.0, 0.0, 4.0, -4.0, 0.5",
           "0.015625, 0.03125, 0.015625, 0.03125, 0.015625, 0.03125, 0.015625, 0.03125") +
          R"(  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["quantize", "mul", "add_residual_scaled", "relu", "quantize"], epilogue_alpha = [1.0, 2.0, 0.25, 0.0, 1.0], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})");
}

// A float conv has no S to take the factor, and a float residual no scale: both stay.
TEST(FoldQuantizeScales, LeavesFloatAccumulatorsAndFloatResiduals) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  input %r : f32[1,3,3,8]
  const %w : f32[8,1,1,8] = [)" + small_ints(64) + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  %q = tessel.Conv(%x, %w, %b) {epilogue = ["relu", "quantize"], epilogue_alpha = [0.0, 0.5], epilogue_beta = [0.0, 0.0], out_dtype = "i8"} : i8[1,3,3,8] @"float"
  %o = tessel.Conv(%x, %w, %b, %r) {epilogue = ["add_residual", "quantize"], epilogue_alpha = [0.0, 0.5], epilogue_beta = [0.0, 0.0], out_dtype = "i8"} : i8[1,3,3,8] @"residual"
  output %q
  output %o
})";
  testing::expect_pass_result("fold-quantize-scales", unchanged, unchanged);
}

}  // namespace
}  // namespace tessel
