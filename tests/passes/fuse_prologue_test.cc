// fuse-prologue: Before/Expected and same numerics on the CPU executor (the reference of the
// prologue against the unfused Mul / Add / Relu nodes).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// lower-batch-norm's scale and shift and a ReLU before a 3x3 padded conv and a 1x1 conv: both
// readers take the prologue, the chain goes. Padding stays zero (not relu(shift)): the CPU
// numerics check compares the fused conv's padding with the unfused graph's.
TEST(FusePrologue, BatchNormAndReluBeforeConvsBecomeTheirPrologue) {
  testing::expect_pass_result("fuse-prologue", R"(graph @g opset 17 {
  input %x : f32[1,3,3,2]
  const %s : f32[2] = [0.5, -2.0]
  const %t : f32[2] = [0.25, 1.5]
  const %w : f32[2,3,3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0, -7.0, 8.0, -9.0, 1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0]
  const %v : f32[4,1,1,2] = [1.0, 0.5, -1.0, 2.0, 0.25, 0.75, 3.0, -0.5]
  %a = Mul(%x, %s) : f32[1,3,3,2] @"bn.scale"
  %b = Add(%a, %t) : f32[1,3,3,2] @"bn"
  %r = Relu(%b) : f32[1,3,3,2] @"relu"
  %y = tessel.Conv(%r, %w) {pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"conv3x3"
  %z = tessel.Conv(%r, %v) : f32[1,3,3,4] @"conv1x1"
  output %y
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,3,3,2]
  const %w : f32[2,3,3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0, -7.0, 8.0, -9.0, 1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0, 9.0]
  const %v : f32[4,1,1,2] = [1.0, 0.5, -1.0, 2.0, 0.25, 0.75, 3.0, -0.5]
  const %p : f32[2,2] = [0.5, -2.0, 0.25, 1.5]
  %y = tessel.Conv(%x, %w, _, _, _, %p) {pads = [1, 1, 1, 1], prologue = "affine_relu"} : f32[1,3,3,2] @"conv3x3"
  %z = tessel.Conv(%x, %v, _, _, _, %p) {prologue = "affine_relu"} : f32[1,3,3,4] @"conv1x1"
  output %y
  output %z
})");
}

// Dilated and strided padded convs take the prologue as well: the CPU numerics check compares
// their padding (zero, not relu(shift)) and their strided and dilated windows over the
// transformed input with the unfused graph's.
TEST(FusePrologue, DilatedAndStridedConvsTakeThePrologue) {
  testing::expect_pass_result("fuse-prologue", R"(graph @g opset 17 {
  input %x : f32[1,5,5,2]
  const %s : f32[2] = [1.5, -0.5]
  const %t : f32[2] = [-0.25, 0.75]
  const %w : f32[1,3,3,2] = [1.0, -2.0, 3.0, 0.5, -1.5, 2.5, 1.0, 1.0, -1.0, 0.25, 2.0, -0.5, 1.5, -2.5, 0.75, 1.0, -1.0, 2.0]
  %a = Mul(%x, %s) : f32[1,5,5,2] @"bn.scale"
  %b = Add(%a, %t) : f32[1,5,5,2] @"bn"
  %r = Relu(%b) : f32[1,5,5,2] @"relu"
  %y = tessel.Conv(%r, %w) {dilations = [2, 2], pads = [2, 2, 2, 2]} : f32[1,5,5,1] @"dilated"
  %z = tessel.Conv(%r, %w) {pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,1] @"strided"
  output %y
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,5,5,2]
  const %w : f32[1,3,3,2] = [1.0, -2.0, 3.0, 0.5, -1.5, 2.5, 1.0, 1.0, -1.0, 0.25, 2.0, -0.5, 1.5, -2.5, 0.75, 1.0, -1.0, 2.0]
  const %p : f32[2,2] = [1.5, -0.5, -0.25, 0.75]
  %y = tessel.Conv(%x, %w, _, _, _, %p) {dilations = [2, 2], pads = [2, 2, 2, 2], prologue = "affine_relu"} : f32[1,5,5,1] @"dilated"
  %z = tessel.Conv(%x, %w, _, _, _, %p) {pads = [1, 1, 1, 1], prologue = "affine_relu", strides = [2, 2]} : f32[1,3,3,1] @"strided"
  output %y
  output %z
})");
}

// Sub and Div by constants, a scalar Mul in front, no ReLU: composed into one affine map
// ((x * 2 - [1, 3]) / [4, 0.5]), prologue "affine".
TEST(FusePrologue, ComposesSubDivAndScalarsWithoutRelu) {
  testing::expect_pass_result("fuse-prologue", R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %two : f32[] = [2.0]
  const %m : f32[1,1,1,2] = [1.0, 3.0]
  const %d : f32[2] = [4.0, 0.5]
  const %w : f32[3,1,1,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %a = Mul(%two, %x) : f32[1,2,2,2] @"times2"
  %b = Sub(%a, %m) : f32[1,2,2,2] @"sub"
  %c = Div(%b, %d) : f32[1,2,2,2] @"div"
  %y = tessel.Conv(%c, %w) : f32[1,2,2,3] @"conv"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[3,1,1,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %p : f32[2,2] = [0.5, 4.0, -0.25, -6.0]
  %y = tessel.Conv(%x, %w, _, _, _, %p) {prologue = "affine"} : f32[1,2,2,3] @"conv"
  output %y
})");
}

// Left alone: a ReLU value that is also a graph output; one read by a grouped conv.
TEST(FusePrologue, LeavesGraphOutputsAndGroupedConvs) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f32[1,2,2,4]
  const %s : f32[4] = [0.5, 1.0, 1.5, 2.0]
  const %w : f32[4,1,1,4] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  const %g : f32[4,1,1,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %a = Mul(%x, %s) : f32[1,2,2,4] @"scale_a"
  %r = Relu(%a) : f32[1,2,2,4] @"relu_a"
  %y = tessel.Conv(%r, %w) : f32[1,2,2,4] @"conv_a"
  %b = Mul(%x, %s) : f32[1,2,2,4] @"scale_b"
  %q = Relu(%b) : f32[1,2,2,4] @"relu_b"
  %z = tessel.Conv(%q, %g) {group = 2} : f32[1,2,2,4] @"grouped"
  output %y
  output %r
  output %z
})";
  testing::expect_pass_result("fuse-prologue", unchanged, unchanged);
}

// A value read twice inside the chain's reach ends it there: the Mul's output is also a graph
// output, so only the ReLU fuses (an identity affine map, then relu).
TEST(FusePrologue, SharedIntermediateEndsTheChain) {
  testing::expect_pass_result("fuse-prologue", R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %s : f32[2] = [0.5, -0.5]
  const %w : f32[2,1,1,2] = [1.0, 2.0, 3.0, 4.0]
  %a = Mul(%x, %s) : f32[1,2,2,2] @"scale"
  %r = Relu(%a) : f32[1,2,2,2] @"relu"
  %y = tessel.Conv(%r, %w) : f32[1,2,2,2] @"conv"
  output %y
  output %a
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %s : f32[2] = [0.5, -0.5]
  const %w : f32[2,1,1,2] = [1.0, 2.0, 3.0, 4.0]
  const %p : f32[2,2] = [1.0, 1.0, 0.0, 0.0]
  %a = Mul(%x, %s) : f32[1,2,2,2] @"scale"
  %y = tessel.Conv(%a, %w, _, _, _, %p) {prologue = "affine_relu"} : f32[1,2,2,2] @"conv"
  output %y
  output %a
})");
}

// A ReLU before the affine map is not affine-then-relu: the Add fuses, the ReLU stays.
TEST(FusePrologue, ReluBeforeTheAffineMapEndsTheChain) {
  testing::expect_pass_result("fuse-prologue", R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %t : f32[2] = [0.5, -0.5]
  const %w : f32[2,1,1,2] = [1.0, 2.0, 3.0, 4.0]
  %r = Relu(%x) : f32[1,2,2,2] @"relu"
  %a = Add(%r, %t) : f32[1,2,2,2] @"shift"
  %y = tessel.Conv(%a, %w) : f32[1,2,2,2] @"conv"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, 2.0, 3.0, 4.0]
  const %p : f32[2,2] = [1.0, 1.0, 0.5, -0.5]
  %r = Relu(%x) : f32[1,2,2,2] @"relu"
  %y = tessel.Conv(%r, %w, _, _, _, %p) {prologue = "affine"} : f32[1,2,2,2] @"conv"
  output %y
})");
}

// An int8 requantization (a 1x1 depthwise conv of unit weights storing int8 after one quantize:
// fold-qdq's requantization of a concat, after fuse) read only by a depthwise conv over int8
// X: the reader loads the requantizer's X through the prologue "requantize", P = S / t, and
// the requantizer goes. Padded reader: 0 requantizes to 0. Kept where the requantized integers
// are read elsewhere (a graph output), or the requantizer does more (a bias, a ReLU).
TEST(FusePrologue, RequantizationBeforeADepthwiseConvBecomesItsPrologue) {
  auto model = [](const std::string& requantizer, const std::string& extra) {
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %ones : f32[4,1,1,1] = [1.0, 1.0, 1.0, 1.0]
  const %sv : f32[4] = [0.03125, 0.0625, 0.09375, 0.125]
  const %w : f32[4,3,3,1] = [1.0, 2.0, -1.0, 0.5, 0.25, -0.5, 1.5, 2.0, 1.0, -1.0, 0.5, 0.75, 1.0, -2.0, 0.5, 1.0, 0.25, 1.0, 2.0, 1.0, -1.0, 0.5, 0.25, -0.5, 1.5, 2.0, 1.0, -1.0, 0.5, 0.75, 1.0, -2.0, 0.5, 1.0, 0.25, 1.0]
  const %b : f32[4] = [0.5, -0.25, 1.0, -1.0]
  const %s2 : f32[4] = [0.05, 0.1, 0.15, 0.2]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  )" + requantizer + R"( : i8[1,3,3,4] @"requantize"
  %y = tessel.Conv(%r, %w, %b, _, %s2) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], group = 4, pads = [1, 1, 1, 1]} : f32[1,3,3,4] @"norm"
  output %y
)" + extra + "}";
  };
  const std::string requantizer =
      R"(%r = tessel.Conv(%q, %ones, _, _, %sv) {epilogue = ["quantize"], epilogue_alpha = [0.07], epilogue_beta = [0.0], group = 4, out_dtype = "i8"})";
  testing::expect_pass_result("fuse-prologue", model(requantizer, ""), R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %w : f32[4,3,3,1] = [1.0, 2.0, -1.0, 0.5, 0.25, -0.5, 1.5, 2.0, 1.0, -1.0, 0.5, 0.75, 1.0, -2.0, 0.5, 1.0, 0.25, 1.0, 2.0, 1.0, -1.0, 0.5, 0.25, -0.5, 1.5, 2.0, 1.0, -1.0, 0.5, 0.75, 1.0, -2.0, 0.5, 1.0, 0.25, 1.0]
  const %b : f32[4] = [0.5, -0.25, 1.0, -1.0]
  const %s2 : f32[4] = [0.05, 0.1, 0.15, 0.2]
  const %requantize.requantize : f32[1,4] = [0.44642857, 0.89285713, 1.3392857, 1.7857143]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %y = tessel.Conv(%q, %w, %b, _, %s2, %requantize.requantize) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], group = 4, pads = [1, 1, 1, 1], prologue = "requantize"} : f32[1,3,3,4] @"norm"
  output %y
})");
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string r = requantizer;
    return r.replace(r.find(from), from.size(), to);
  };
  const std::string biased = replaced("%ones, _", "%ones, %b");
  const std::string relu = replaced(R"(["quantize"], epilogue_alpha = [0.07], epilogue_beta = [0.0])",
                                    R"(["quantize", "relu"], epilogue_alpha = [0.07, 0.0], epilogue_beta = [0.0, 0.0])");
  for (const std::string& kept : {model(requantizer, "  output %r\n"), model(biased, ""), model(relu, "")}) {
    SCOPED_TRACE(kept);
    testing::expect_pass_result("fuse-prologue", kept, kept);
  }
}

}  // namespace
}  // namespace tessel
