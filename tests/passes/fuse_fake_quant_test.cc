// fuse on a float contraction followed by an asymmetric QuantizeLinear -> DequantizeLinear pair
// (onnxruntime's default QUInt8 activations): the pair joins the epilogue as a fake
// quantization, round(s) -> clip(qmin - z, qmax - z) -> mul(s'), and the contraction stores the
// dequantized value. expect_pass_result also runs Before and Expected on the CPU reference:
// the same values (the graphs here are f32, whose conv output the quantize reads unrounded
// either way).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

std::string weights(int n) {
  std::string w;
  for (int i = 0; i < n; ++i) w += (i ? ", " : "") + std::to_string((i * 7 % 13 - 6) * 0.0625);
  return w;
}

const std::string kHead = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  input %r : f32[1,3,3,8]
  const %w : f32[8,3,3,8] = [)" + weights(576) + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  const %s : f32[] = [0.03125]
  const %zu : u8[] = [116]
  const %zi : i8[] = [-3]
)";

// conv -> Add(., r) -> Relu -> Q(u8, z 116) -> DQ: one conv, its residual r, the pair its last
// three steps; u8's [0, 255] less the zero point is the clip.
TEST(FuseFakeQuant, Uint8PairAfterResidualAndReluJoinsTheEpilogue) {
  testing::expect_pass_result("fuse", kHead + R"(  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %a = Add(%y, %r) : f32[1,3,3,8] @"add"
  %h = Relu(%a) : f32[1,3,3,8] @"relu"
  %q = QuantizeLinear(%h, %s, %zu) : u8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %s, %zu) : f32[1,3,3,8] @"dq"
  output %d
})",
                              kHead + R"(  %d = tessel.Conv(%x, %w, %b, %r) {epilogue = ["add_residual", "relu", "round", "clip", "mul"], epilogue_alpha = [0.0, 0.0, 0.03125, -116.0, 0.03125], epilogue_beta = [0.0, 0.0, 0.0, 139.0, 0.0], pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  output %d
})");
}

// An int8 pair with a zero point (no TensorRT int8 step: it is not symmetric), the chain going
// on after it; a DequantizeLinear scale rounded to fp16 (choose-precision's constants) is the
// same scale.
TEST(FuseFakeQuant, Int8PairWithZeroPointAndFp16RoundedScale) {
  testing::expect_pass_result("fuse", kHead + R"(  const %sh : f32[] = [0.0312519]
  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %q = QuantizeLinear(%y, %s, %zi) : i8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %sh, %zi) : f32[1,3,3,8] @"dq"
  %o = Sigmoid(%d) : f32[1,3,3,8] @"sigmoid"
  output %o
})",
                              kHead + R"(  const %sh : f32[] = [0.0312519]
  %o = tessel.Conv(%x, %w, %b) {epilogue = ["round", "clip", "mul", "sigmoid"], epilogue_alpha = [0.03125, -125.0, 0.0312519, 0.0], epilogue_beta = [0.0, 130.0, 0.0, 0.0], pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  output %o
})");
}

// A Gemm takes the pair too.
TEST(FuseFakeQuant, GemmTakesThePair) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[4,8]
  const %w : f32[8,8] = [)" + weights(64) + R"(]
  const %s : f32[] = [0.0625]
  const %zu : u8[] = [10]
)";
  testing::expect_pass_result("fuse", head + R"(  %y = tessel.Gemm(%x, %w) : f32[4,8] @"gemm"
  %q = QuantizeLinear(%y, %s, %zu) : u8[4,8] @"q"
  %d = DequantizeLinear(%q, %s, %zu) : f32[4,8] @"dq"
  output %d
})",
                              head + R"(  %d = tessel.Gemm(%x, %w) {epilogue = ["round", "clip", "mul"], epilogue_alpha = [0.0625, -10.0, 0.0625], epilogue_beta = [0.0, 245.0, 0.0]} : f32[4,8] @"gemm"
  output %d
})");
}

// What stays a pair of kernels: the integers read by another node too (a graph output here),
// a per-channel QuantizeLinear, two scales (a rescale, not one activation's quantization), two
// zero points. The conv then stops before the QuantizeLinear.
TEST(FuseFakeQuant, PairsThatAreNoFakeQuantizationStay) {
  const std::string conv = R"(  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
)";
  const std::string other_reader = kHead + conv + R"(  %q = QuantizeLinear(%y, %s, %zu) : u8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %s, %zu) : f32[1,3,3,8] @"dq"
  output %d
  output %q
})";
  testing::expect_pass_result("fuse", other_reader, other_reader);
  const std::string per_channel = kHead + R"(  const %sc : f32[8] = [0.03125, 0.0625, 0.03125, 0.0625, 0.03125, 0.0625, 0.03125, 0.0625]
  const %zc : u8[8] = [116, 116, 116, 116, 116, 116, 116, 116]
)" + conv + R"(  %q = QuantizeLinear(%y, %sc, %zc) {axis = 3} : u8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %sc, %zc) {axis = 3} : f32[1,3,3,8] @"dq"
  output %d
})";
  testing::expect_pass_result("fuse", per_channel, per_channel);
  const std::string two_scales = kHead + R"(  const %s2 : f32[] = [0.0625]
)" + conv + R"(  %q = QuantizeLinear(%y, %s, %zu) : u8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %s2, %zu) : f32[1,3,3,8] @"dq"
  output %d
})";
  testing::expect_pass_result("fuse", two_scales, two_scales);
  const std::string two_zero_points = kHead + R"(  const %z2 : u8[] = [128]
)" + conv + R"(  %q = QuantizeLinear(%y, %s, %zu) : u8[1,3,3,8] @"q"
  %d = DequantizeLinear(%q, %s, %z2) : f32[1,3,3,8] @"dq"
  output %d
})";
  testing::expect_pass_result("fuse", two_zero_points, two_zero_points);
}

// A depthwise conv in fp16 (the window kernels store their own dtype): the pair back to f16
// joins; one whose DequantizeLinear writes f32 (a graph output's) stays. The unfused graph
// rounds the conv output (and the QuantizeLinear its quotient) to fp16 first, the fused one
// does not: an output near a rounding tie may land one step (0.125) away.
TEST(FuseFakeQuant, GroupedConvTakesThePairBackToItsOwnDtypeOnly) {
  std::string w16;
  for (int i = 0; i < 72; ++i) w16 += (i ? ", " : "") + std::to_string((i * 7 % 13 - 6) * 0.125);
  const std::string head = R"(graph @g opset 17 {
  input %x : f16[1,4,4,8]
  const %w : f16[8,3,3,1] = [)" + w16 + R"(]
  const %s : f32[] = [0.125]
  const %sh : f16[] = [0.125]
  const %zu : u8[] = [128]
)";
  const std::string dw = R"(  %y = tessel.Conv(%x, %w) {group = 8, pads = [1, 1, 1, 1]} : f16[1,4,4,8] @"dw"
  %q = QuantizeLinear(%y, %s, %zu) : u8[1,4,4,8] @"q"
)";
  testing::expect_pass_result("fuse", head + dw + R"(  %d = DequantizeLinear(%q, %sh, %zu) : f16[1,4,4,8] @"dq"
  output %d
})",
                              head + R"(  %d = tessel.Conv(%x, %w) {epilogue = ["round", "clip", "mul"], epilogue_alpha = [0.125, -128.0, 0.125], epilogue_beta = [0.0, 127.0, 0.0], group = 8, pads = [1, 1, 1, 1]} : f16[1,4,4,8] @"dw"
  output %d
})",
                              0.0, 0.126);
  const std::string to_f32 = head + dw + R"(  %d = DequantizeLinear(%q, %s, %zu) : f32[1,4,4,8] @"dq"
  output %d
})";
  testing::expect_pass_result("fuse", to_f32, to_f32);
}

}  // namespace
}  // namespace tessel
