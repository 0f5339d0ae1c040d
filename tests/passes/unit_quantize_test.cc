// unit-quantize: Before/Expected (the scaled S and B are the f32 roundings of S / (hi - lo) and
// (B - lo) / (hi - lo), written here as Python's numpy computes them), and the same numerics
// on the CPU executor up to a step where a value lands within the constants' rounding of a tie
// (ops/fold_unit_quantize_test.cc bounds how often). The scales are not powers of two: on that
// exact grid the pass leaves the roundings alone (the last test).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

using testing::small_ints;

std::string head(const std::string& b, const std::string& s) { return testing::int8_conv_head(b, s); }

const std::string kB = "0.37, -0.21, 1.13, -0.93, 0.05, 1.71, -1.66, 0.29";
const std::string kS = "0.0071, 0.0153, 0.0089, 0.0124, 0.0067, 0.0142, 0.0098, 0.0111";
const std::string kUnitS =
    "2.7843138e-05, 6.0000002e-05, 3.490196e-05, 4.862745e-05, 2.6274509e-05, 5.5686276e-05, 3.843137e-05, "
    "4.352941e-05";

// ResNet's residual epilogue after fold-quantize-scales: the first rounding's [-128, 127]
// into S and B (factor 1/255, offset 128/255), the second's [0, 127] (the relu before it) into
// the dequantization and the residual's scale (127 * 2^-20 and 381 * 2^-22 become 2^-20 and
// 3 * 2^-22).
TEST(UnitQuantize, ResidualEpilogueIntoTheLeadAndTheDequantization) {
  testing::expect_pass_result(
      "unit-quantize",
      head(kB, kS) +
          R"(  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["quantize", "mul", "add_residual_scaled", "relu", "quantize"], epilogue_alpha = [1.0, 0.00012111663818359375, 9.083747863769531e-05, 0.0, 1.0], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})",
      head("0.50341177, 0.50113726, 0.5063922, 0.49831372, 0.50215685, 0.5086667, 0.49545097, 0.503098", kUnitS) +
          R"(  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["quantize_unit", "mul", "add_residual_scaled", "quantize_unit"], epilogue_alpha = [-128.0, 9.5367431640625e-07, 7.152557373046875e-07, 0.0], epilogue_beta = [127.0, 0.0, 0.0, 127.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})",
      0.0, 1.0);
}

// A conv -> Relu -> QuantizeLinear: [0, 127], no offset; a clip after the quantize narrows it.
TEST(UnitQuantize, ReluBeforeAndClipAfterNarrowTheRange) {
  testing::expect_pass_result(
      "unit-quantize",
      head(kB, kS) +
          R"(  %o = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["relu", "quantize"], epilogue_alpha = [0.0, 1.0], epilogue_beta = [0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})",
      head("0.0029133859, -0.0016535432, 0.008897638, -0.007322835, 0.0003937008, 0.013464567, -0.0130708655, "
           "0.0022834644",
           "5.590551e-05, 0.00012047244, 7.0078735e-05, 9.76378e-05, 5.2755902e-05, 0.00011181102, 7.716536e-05, "
           "8.7401575e-05") +
          R"(  %o = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize_unit"], epilogue_alpha = [0.0], epilogue_beta = [127.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})",
      0.0, 1.0);
}

// A conv without B gets one holding the offset alone.
TEST(UnitQuantize, ABiasFreeConvGetsTheOffsetAsItsBias) {
  const std::string before = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %wq : i8[8,3,3,8] = [)" + small_ints(576) + R"(]
  const %s : f32[8] = [)" + kS + R"(]
  %xq = QuantizeLinear(%x, %sx, %z) : i8[1,3,3,8] @"qx"
  %o = tessel.Conv(%xq, %wq, _, _, %s) {epilogue = ["quantize"], epilogue_alpha = [1.0], epilogue_beta = [0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})";
  const std::string expected = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %wq : i8[8,3,3,8] = [)" + small_ints(576) + R"(]
  const %s : f32[8] = [)" + kUnitS + R"(]
  const %b : f32[8] = [0.5019608, 0.5019608, 0.5019608, 0.5019608, 0.5019608, 0.5019608, 0.5019608, 0.5019608]
  %xq = QuantizeLinear(%x, %sx, %z) : i8[1,3,3,8] @"qx"
  %o = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize_unit"], epilogue_alpha = [-128.0], epilogue_beta = [127.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})";
  testing::expect_pass_result("unit-quantize", before, expected, 0.0, 1.0);
}

// What it leaves: a float conv (no S to scale), a rounding after a sigmoid (not homogeneous),
// and one after a plain float residual whose range starts below 0 (an offset cannot pass a
// mul-free walk that ends on no S).
TEST(UnitQuantize, LeavesWhatNoMultiplicationCanScale) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  input %r : f32[1,3,3,8]
  const %w : f32[8,1,1,8] = [)" + small_ints(64) + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  %q = tessel.Conv(%x, %w, %b) {epilogue = ["relu", "quantize"], epilogue_alpha = [0.0, 0.5], epilogue_beta = [0.0, 0.0], out_dtype = "i8"} : i8[1,3,3,8] @"float"
  %t = tessel.Conv(%x, %w, %b) {epilogue = ["sigmoid", "quantize"], epilogue_alpha = [0.0, 0.0078125], epilogue_beta = [0.0, 0.0], out_dtype = "i8"} : i8[1,3,3,8] @"sigmoid"
  %o = tessel.Conv(%x, %w, %b, %r) {epilogue = ["add_residual", "quantize"], epilogue_alpha = [0.0, 0.5], epilogue_beta = [0.0, 0.0], out_dtype = "i8"} : i8[1,3,3,8] @"residual"
  output %q
  output %t
  output %o
})";
  testing::expect_pass_result("unit-quantize", unchanged, unchanged);
}

// Power-of-two scales: S, B, the dequantization's and the residual's scales multiples of
// 2^-16, so every value is exact and its ties real; the reference rounds them to even, which
// the scaled constants' rounding would not. Such roundings stay, and the numbers are the same.
TEST(UnitQuantize, LeavesExactGridsAlone) {
  const std::string unchanged =
      head("0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25",
           "0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625") +
      R"(  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["quantize", "mul", "add_residual_scaled", "relu", "quantize"], epilogue_alpha = [1.0, 2.0, 0.25, 0.0, 1.0], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %o
})";
  testing::expect_pass_result("unit-quantize", unchanged, unchanged, 0.0, 0.0);
}

}  // namespace
}  // namespace tessel
