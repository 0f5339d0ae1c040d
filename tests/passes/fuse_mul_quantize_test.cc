// fuse-mul-quantize: Before/Expected, and the integers of the CPU executor within one step (the
// fused op multiplies by the scale's reciprocal in f32 where the pair rounded the product to
// f16 and divided: a value near a rounding tie may land one step away).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// A quantized squeeze-excite gate: f16 features times a per-channel gate, quantized to int8
// (zero point 0) and to uint8 without a zero point.
TEST(FuseMulQuantize, SqueezeExciteGateBecomesOneOp) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f16[2,4,4,16]
  input %gate : f16[2,1,1,16]
  const %s : f32[] = [0.0173]
  const %z : i8[] = [0]
  const %s2 : f32[1] = [0.00390625]
)";
  testing::expect_pass_result("fuse-mul-quantize", head + R"(  %p = Mul(%x, %gate) : f16[2,4,4,16] @"se.mul"
  %q = QuantizeLinear(%p, %s, %z) : i8[2,4,4,16] @"se.mul_q"
  %p2 = Mul(%gate, %x) : f16[2,4,4,16] @"mul2"
  %u = QuantizeLinear(%p2, %s2) : u8[2,4,4,16] @"q2"
  output %q
  output %u
})",
                              head + R"(  %q = tessel.MulQuantizeLinear(%x, %gate, %s, %z) : i8[2,4,4,16] @"se.mul_q"
  %u = tessel.MulQuantizeLinear(%gate, %x, %s2) : u8[2,4,4,16] @"q2"
  output %q
  output %u
})",
                              0.0, 1.0);
}

// Left alone: a product something else reads too (a graph output here), a per-channel
// QuantizeLinear (a scale per channel of axis 3), and a Mul of integers.
TEST(FuseMulQuantize, LeavesSharedProductsPerChannelScalesAndIntegerMuls) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f16[1,3,3,8]
  input %gate : f16[1,1,1,8]
  input %i : i32[4]
  const %s : f32[] = [0.02]
  const %sc : f32[8] = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
  const %z : i8[] = [0]
  const %zc : i8[8] = [0, 0, 0, 0, 0, 0, 0, 0]
  %p = Mul(%x, %gate) : f16[1,3,3,8] @"shared"
  %q = QuantizeLinear(%p, %s, %z) : i8[1,3,3,8] @"q"
  %p2 = Mul(%x, %gate) : f16[1,3,3,8] @"per_channel"
  %q2 = QuantizeLinear(%p2, %sc, %zc) {axis = 3} : i8[1,3,3,8] @"qc"
  %m = Mul(%i, %i) : i32[4] @"ints"
  %q3 = QuantizeLinear(%m, %s, %z) : i8[4] @"qi"
  output %p
  output %q
  output %q2
  output %q3
})";
  testing::expect_pass_result("fuse-mul-quantize", unchanged, unchanged, 0.0, 0.0);
}

}  // namespace
}  // namespace tessel
