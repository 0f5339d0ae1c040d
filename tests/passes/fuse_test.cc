#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

// A 1x1 conv over NHWC [1,2,2,2] with bias; the chains below read its output %c.
std::string conv_then(const std::string& chain, const std::vector<std::string>& outputs = {"%y"},
                      const std::string& constants = "") {
  std::string text = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %b : f32[2] = [0.5, -0.5]
)" + constants + "  %c = tessel.Conv(%x, %w, %b) : f32[1,2,2,2] @\"conv\"\n" +
                     chain;
  for (const std::string& o : outputs) text += "  output " + o + "\n";
  return text + "}";
}

std::string fused(const std::string& attrs, const std::string& rest = "") {
  return R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %b : f32[2] = [0.5, -0.5]
)" + rest +
         "  %y = tessel.Conv(%x, %w, %b" + attrs + " : f32[1,2,2,2] @\"conv\"\n  output %y\n}";
}

TEST(Fuse, ReluBecomesTheEpilogue) {
  testing::expect_pass_result(
      "fuse", conv_then("  %y = Relu(%c) : f32[1,2,2,2] @\"relu\"\n"),
      fused(R"() {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]})"));
}

// Steps keep their order and parameters. Clip's absent max is the fp32 range, as in Clip's
// reference kernel.
TEST(Fuse, ActivationChainInOrder) {
  testing::expect_pass_result(
      "fuse",
      conv_then(R"(  %l = LeakyRelu(%c) {alpha = 0.5} : f32[1,2,2,2] @"leaky"
  %k = Clip(%l, %lo) : f32[1,2,2,2] @"clip"
  %h = HardSwish(%k) : f32[1,2,2,2] @"hswish"
  %y = Sigmoid(%h) : f32[1,2,2,2] @"sigmoid"
)",
                {"%y"}, "  const %lo : f32[] = [-1.0]\n"),
      fused(
          R"() {epilogue = ["leaky_relu", "clip", "hardswish", "sigmoid"], epilogue_alpha = [0.5, -1.0, 0.0, 0.0], epilogue_beta = [0.0, 3.4028234663852886e+38, 0.0, 0.0]})"));
}

// The activations of YOLOv4 (Mish), GAN and style-transfer outputs (Tanh), MobileNet-v3's gates
// (HardSigmoid) and Elu fuse with their parameters; expect_pass_result also runs both graphs on
// the CPU, so the fused steps' reference equals the ops'.
TEST(Fuse, MoreActivationsWithTheirParameters) {
  testing::expect_pass_result(
      "fuse",
      conv_then(R"(  %m = Mish(%c) : f32[1,2,2,2] @"mish"
  %e = Elu(%m) {alpha = 0.5} : f32[1,2,2,2] @"elu"
  %h = HardSigmoid(%e) {alpha = 0.25} : f32[1,2,2,2] @"hsigmoid"
  %y = Tanh(%h) : f32[1,2,2,2] @"tanh"
)"),
      fused(
          R"() {epilogue = ["mish", "elu", "hard_sigmoid", "tanh"], epilogue_alpha = [0.0, 0.5, 0.25, 0.0], epilogue_beta = [0.0, 0.0, 0.5, 0.0]})"));
}

// PRelu with one slope (PyTorch's nn.PReLU() default) is the leaky ReLU of that slope; with a
// slope per channel it stays an op of its own.
TEST(Fuse, PreluWithOneSlopeIsALeakyRelu) {
  testing::expect_pass_result(
      "fuse",
      conv_then("  %y = PRelu(%c, %s) : f32[1,2,2,2] @\"prelu\"\n", {"%y"},
                "  const %s : f32[1] = [0.25]\n"),
      fused(R"() {epilogue = ["leaky_relu"], epilogue_alpha = [0.25], epilogue_beta = [0.0]})"));
  const std::string per_channel = conv_then("  %y = PRelu(%c, %s) : f32[1,2,2,2] @\"prelu\"\n",
                                            {"%y"}, "  const %s : f32[2] = [0.25, 0.5]\n");
  testing::expect_pass_result("fuse", per_channel, per_channel);
}

// A normalization absorbs the activations after it (InstanceNorm + ReLU of style transfer,
// GroupNorm + SiLU of diffusion UNets) but no residual add.
TEST(Fuse, NormalizationsTakeActivationsOnly) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,2,2,4]
  input %r : f32[1,2,2,4]
  const %s : f32[2] = [1.5, 0.5]
  const %b : f32[2] = [0.25, -0.25]
)";
  testing::expect_pass_result(
      "fuse", head + R"(  %n = tessel.GroupNormalization(%x, %s, %b) {num_groups = 2} : f32[1,2,2,4] @"gn"
  %g = Sigmoid(%n) : f32[1,2,2,4] @"sigmoid"
  %m = Mul(%n, %g) : f32[1,2,2,4] @"mul"
  %y = Add(%m, %r) : f32[1,2,2,4] @"add"
  output %y
})",
      head + R"(  %m = tessel.GroupNormalization(%x, %s, %b) {epilogue = ["silu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], num_groups = 2} : f32[1,2,2,4] @"gn"
  %y = Add(%m, %r) : f32[1,2,2,4] @"add"
  output %y
})");
  const std::string in_head = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %s : f32[2] = [1.5, 0.5]
  const %b : f32[2] = [0.25, -0.25]
)";
  testing::expect_pass_result(
      "fuse", in_head + R"(  %n = tessel.InstanceNormalization(%x, %s, %b) : f32[1,2,2,2] @"in"
  %y = Relu(%n) : f32[1,2,2,2] @"relu"
  output %y
})",
      in_head + R"(  %y = tessel.InstanceNormalization(%x, %s, %b) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[1,2,2,2] @"in"
  output %y
})");
}

// A squeeze conv's 6 channels padded to 8 for the expand conv, whose weights are zero there:
// the squeeze conv computes 8 channels (zero weights and bias for the last 2; their SiLU(0) = 0
// meets the expand conv's zero weights) and the Pad goes. A reader with a non-zero weight on
// a padded channel keeps the Pad (the second graph).
TEST(Fuse, ChannelAlignmentPadFoldsIntoItsProducer) {
  const std::string before = R"(graph @g opset 17 {
  input %x : f32[1,1,1,4]
  const %w1 : f32[6,1,1,4] = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5]
  const %b1 : f32[6] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 2]
  const %w2 : f32[2,1,1,8] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, W, 0.0]
  %s = tessel.Conv(%x, %w1, %b1) {epilogue = ["silu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[1,1,1,6] @"squeeze"
  %p = Pad(%s, %pads) : f32[1,1,1,8] @"s.align_channels"
  %y = tessel.Conv(%p, %w2) : f32[1,1,1,2] @"expand"
  output %y
})";
  auto with = [&](const std::string& w) {
    std::string t = before;
    t.replace(t.find(", W,"), 4, ", " + w + ",");
    return t;
  };
  testing::expect_pass_result("fuse", with("0.0"), R"(graph @g opset 17 {
  input %x : f32[1,1,1,4]
  const %w1 : f32[8,1,1,4] = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  const %b1 : f32[8] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.0, 0.0]
  const %w2 : f32[2,1,1,8] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.0, 0.0]
  %p = tessel.Conv(%x, %w1, %b1) {epilogue = ["silu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[1,1,1,8] @"squeeze"
  %y = tessel.Conv(%p, %w2) : f32[1,1,1,2] @"expand"
  output %y
})");
  testing::expect_pass_result("fuse", with("0.25"), with("0.25"));
}

// The same in int8 (a QDQ squeeze-excite block: the squeeze conv's int8 weights, dequantization
// scale S and int8 store; the expand conv's int8 weights zero over the padded channels): the
// squeeze conv computes 8 channels with zero weights, bias and S for the last 2, whose stored
// codes (its sigmoid of 0, quantized: 10) meet the expand conv's zero weights.
TEST(Fuse, ChannelAlignmentPadFoldsIntoAnInt8Producer) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,1,1,8]
  const %xs : f32[] = [0.0625]
  const %z : i8[] = [0]
)";
  const std::string w1 = "1, -2, 3, -4, 5, -6, 7, -8, 2, 2, 2, 2, -2, -2, -2, -2, 0, 1, 0, 1, 0, 1, 0, 1, 3, 0, -3, 0, "
                         "3, 0, -3, 0, 1, 1, 1, 1, 1, 1, 1, 1, -1, 4, -1, 4, -1, 4, -1, 4";
  const std::string tail = R"(  const %w2 : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 0, 0, -1, -2, -3, -4, -5, -6, 0, 0]
  const %s2 : f32[2] = [0.5, 0.25]
  %xq = QuantizeLinear(%x, %xs, %z) : i8[1,1,1,8] @"xq"
)";
  const std::string epilogue =
      R"({epilogue = ["sigmoid", "quantize"], epilogue_alpha = [0.0, 0.05], epilogue_beta = [0.0, 0.0], out_dtype = "i8"})";
  testing::expect_pass_result("fuse", head + "  const %w1 : i8[6,1,1,8] = [" + w1 + R"(]
  const %b1 : f32[6] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
  const %s1 : f32[6] = [0.01, 0.02, 0.03, 0.01, 0.02, 0.03]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 2]
)" + tail + R"(  %s = tessel.Conv(%xq, %w1, %b1, _, %s1) )" + epilogue + R"( : i8[1,1,1,6] @"squeeze"
  %p = Pad(%s, %pads) : i8[1,1,1,8] @"s.align_channels"
  %y = tessel.Conv(%p, %w2, _, _, %s2) : f32[1,1,1,2] @"expand"
  output %y
})",
                              head + tail.substr(0, tail.find("  %xq")) +
                                  "  const %w1.widened : i8[8,1,1,8] = [" + w1 + R"(, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
  const %b1.widened : f32[8] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.0, 0.0]
  const %s1.widened : f32[8] = [0.01, 0.02, 0.03, 0.01, 0.02, 0.03, 0.0, 0.0]
  %xq = QuantizeLinear(%x, %xs, %z) : i8[1,1,1,8] @"xq"
  %p = tessel.Conv(%xq, %w1.widened, %b1.widened, _, %s1.widened) )" + epilogue + R"( : i8[1,1,1,8] @"squeeze"
  %y = tessel.Conv(%p, %w2, _, _, %s2) : f32[1,1,1,2] @"expand"
  output %y
})");
}

// Kept: a squeeze conv storing f16 whose epilogue at 0 (the padded channels' value: sigmoid(0)
// times 2e5) passes f16's 65504; the infinity it stores would make the expand conv's zero
// weights a NaN.
TEST(Fuse, ChannelAlignmentPadStaysWhereThePaddedValueOverflows) {
  const std::string unchanged = R"(graph @g opset 17 {
  input %x : f16[1,1,1,4]
  const %w1 : f16[6,1,1,4] = [0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0, 0.25, 0.25]
  const %b1 : f32[6] = [-20.0, -20.0, -20.0, -20.0, -20.0, -20.0]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 2]
  const %w2 : f16[2,1,1,8] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.0, 0.0]
  %s = tessel.Conv(%x, %w1, %b1) {epilogue = ["sigmoid", "mul"], epilogue_alpha = [0.0, 200000.0], epilogue_beta = [0.0, 0.0]} : f16[1,1,1,6] @"squeeze"
  %p = Pad(%s, %pads) : f16[1,1,1,8] @"s.align_channels"
  %y = tessel.Conv(%p, %w2) : f16[1,1,1,2] @"expand"
  output %y
})";
  testing::expect_pass_result("fuse", unchanged, unchanged, 1e-3, 1e-3);
}

TEST(Fuse, SiluPattern) {
  testing::expect_pass_result(
      "fuse", conv_then(R"(  %s = Sigmoid(%c) : f32[1,2,2,2] @"sigmoid"
  %y = Mul(%s, %c) : f32[1,2,2,2] @"mul"
)"),
      fused(R"() {epilogue = ["silu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]})"));
}

// A QDQ model's SiLU (onnxruntime's EfficientNet): the gate quantized to int8 and back between
// the Sigmoid and the Mul, then the product quantized. One epilogue step for the gated product,
// silu_qgate(s, s'), and the conv stores int8; expect_pass_result runs both graphs on the CPU.
// A gate read by something else too, or quantized per channel, stays.
TEST(Fuse, SiluWithAQuantizedGate) {
  auto chain = [](const std::string& dq) {
    return conv_then(R"(  %s = Sigmoid(%c) : f32[1,2,2,2] @"sigmoid"
  %sq = QuantizeLinear(%s, %gs, %z) : i8[1,2,2,2] @"gate_q"
  )" + dq + R"(
  %m = Mul(%c, %sd) : f32[1,2,2,2] @"mul"
  %y = QuantizeLinear(%m, %ys, %z) : i8[1,2,2,2] @"q"
)",
                     {"%y"},
                     "  const %gs : f32[] = [0.007874016]\n  const %ys : f32[] = [0.0625]\n"
                     "  const %z : i8[] = [0]\n  const %gc : f32[2] = [0.007874016, 0.0039370079]\n"
                     "  const %zc : i8[2] = [0, 0]\n");
  };
  const std::string before = chain(R"(%sd = DequantizeLinear(%sq, %gs, %z) : f32[1,2,2,2] @"gate_dq")");
  testing::expect_pass_result("fuse", before, R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %b : f32[2] = [0.5, -0.5]
  const %gs : f32[] = [0.007874016]
  const %ys : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %gc : f32[2] = [0.007874016, 0.0039370079]
  const %zc : i8[2] = [0, 0]
  %y = tessel.Conv(%x, %w, %b) {epilogue = ["silu_qgate", "quantize"], epilogue_alpha = [0.007874016, 0.0625], epilogue_beta = [0.007874016, 0.0], out_dtype = "i8"} : i8[1,2,2,2] @"conv"
  output %y
})");
  const std::string per_channel =
      chain(R"(%sd = DequantizeLinear(%sq, %gc, %zc) {axis = 3} : f32[1,2,2,2] @"gate_dq")");
  const ir::Graph g = passes::run_passes(ir::parse_graph(per_channel), {"fuse"}, {});
  int muls = 0;
  for (const ir::Node& n : g.nodes) muls += n.op == "Mul";
  EXPECT_EQ(muls, 1) << "a per-channel gate: the Sigmoid and the Mul stay";
}

// The residual branch is computed after the conv: the fused conv takes the Add's place, after
// the branch, and reads it as R. Then the ReLU of the ResNet block.
TEST(Fuse, ResidualComputedAfterTheConv) {
  testing::expect_pass_result(
      "fuse", conv_then(R"(  %r = Sigmoid(%x) : f32[1,2,2,2] @"branch"
  %s = Add(%r, %c) : f32[1,2,2,2] @"add"
  %y = Relu(%s) : f32[1,2,2,2] @"relu"
)"),
      fused(
          R"(, %r) {epilogue = ["add_residual", "relu"], epilogue_alpha = [0.0, 0.0], epilogue_beta = [0.0, 0.0]})",
          "  %r = Sigmoid(%x) : f32[1,2,2,2] @\"branch\"\n"));
}

// Each intermediate value must have the chain as its only reader, and a graph output is read by
// the user: nothing fuses here.
TEST(Fuse, SharedOrOutputValuesStop) {
  const std::string shared = conv_then(R"(  %y = Relu(%c) : f32[1,2,2,2] @"relu"
  %z = Sigmoid(%c) : f32[1,2,2,2] @"sigmoid"
  %s = Add(%y, %z) : f32[1,2,2,2] @"add"
)",
                                       {"%s"});
  testing::expect_pass_result("fuse", shared, shared);
  const std::string output = conv_then("  %y = Relu(%c) : f32[1,2,2,2] @\"relu\"\n", {"%y", "%c"});
  testing::expect_pass_result("fuse", output, output);
}

// A bound known only at run time is no epilogue parameter; a constant residual is a bias, not
// a residual (and is left to the lowering).
TEST(Fuse, RuntimeClipBoundAndConstantAddStay) {
  const std::string clip = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %hi : f32[]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  %c = tessel.Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %y = Clip(%c, _, %hi) : f32[1,2,2,2] @"clip"
  output %y
})";
  testing::expect_pass_result("fuse", clip, clip);
  const std::string add = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %k : f32[1,2,2,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %c = tessel.Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %y = Add(%c, %k) : f32[1,2,2,2] @"add"
  output %y
})";
  testing::expect_pass_result("fuse", add, add);
}

// The subpixel layer: LeakyRelu, then DepthToSpace as the conv's store. The ReLU after the
// store acts per element on the values the store only moves: it is an epilogue step too.
TEST(Fuse, DepthToSpaceBecomesTheStore) {
  const char* head = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[8,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0, 0.75, 1.0, -1.5, 0.5, 2.0, 0.125, -0.25, 1.0]
)";
  testing::expect_pass_result(
      "fuse", std::string(head) + R"(  %c = tessel.Conv(%x, %w) : f32[1,2,2,8] @"conv"
  %l = LeakyRelu(%c) {alpha = 0.1} : f32[1,2,2,8] @"leaky"
  %d = tessel.DepthToSpace(%l) {blocksize = 2, mode = "CRD"} : f32[1,4,4,2] @"d2s"
  %y = Relu(%d) : f32[1,4,4,2] @"relu"
  output %y
})",
      std::string(head) +
          R"(  %y = tessel.Conv(%x, %w) {block = 2, epilogue = ["leaky_relu", "relu"], epilogue_alpha = [0.1, 0.0], epilogue_beta = [0.0, 0.0], mode = "CRD", store = "depth_to_space"} : f32[1,4,4,2] @"conv"
  output %y
})");
}

// A ConvTranspose's conv (convert-layout) carries its depth_to_space store from the start: the
// activation after it is fused, the residual Add after that is not (R would have to be read in
// the pre-store layout), and the chain stops there.
TEST(Fuse, ActivationAfterADepthToSpaceStoreButNoResidual) {
  const char* head = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %r : f32[1,4,4,2]
  const %w : f32[8,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0, 0.75, 1.0, -1.5, 0.5, 2.0, 0.125, -0.25, 1.0]
)";
  testing::expect_pass_result(
      "fuse", std::string(head) + R"(  %c = tessel.Conv(%x, %w) {block = 2, mode = "DCR", store = "depth_to_space"} : f32[1,4,4,2] @"up"
  %l = Relu(%c) : f32[1,4,4,2] @"relu"
  %y = Add(%l, %r) : f32[1,4,4,2] @"add"
  output %y
})",
      std::string(head) +
          R"(  %l = tessel.Conv(%x, %w) {block = 2, epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], mode = "DCR", store = "depth_to_space"} : f32[1,4,4,2] @"up"
  %y = Add(%l, %r) : f32[1,4,4,2] @"add"
  output %y
})");
}

TEST(Fuse, GemmTakesAnEpilogue) {
  testing::expect_pass_result("fuse", R"(graph @g opset 17 {
  input %a : f32[2,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
  %c = tessel.Gemm(%a, %w, %b) : f32[2,2] @"fc"
  %y = Relu(%c) : f32[2,2] @"relu"
  output %y
})",
                              R"(graph @g opset 17 {
  input %a : f32[2,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Gemm(%a, %w, %b) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[2,2] @"fc"
  output %y
})");
}

// A Linear on a 4-D tensor (flatten -> Gemm -> unflatten): the GELU after the unflatten
// moves before it and fuses; the unflatten now reads the fused Gemm.
TEST(Fuse, GeluBehindAnUnflattenFuses) {
  testing::expect_pass_result("fuse", R"(graph @g opset 20 {
  input %f : f32[4,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
  const %shape : i64[4] = [1, 2, 2, 2]
  %c = tessel.Gemm(%f, %w, %b) : f32[4,2] @"fc"
  %u = Reshape(%c, %shape) : f32[1,2,2,2] @"fc.unflatten"
  %y = Gelu(%u) : f32[1,2,2,2] @"gelu"
  output %y
})",
                              R"(graph @g opset 20 {
  input %f : f32[4,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
  const %shape : i64[4] = [1, 2, 2, 2]
  %c = tessel.Gemm(%f, %w, %b) {epilogue = ["gelu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[4,2] @"fc"
  %y = Reshape(%c, %shape) : f32[1,2,2,2] @"fc.unflatten"
  output %y
})");
}

// ConvNeXt's tail: layer scale gamma [1, 1, 1, C] folds into the weights' output channels and
// the bias (W row n and b[n] times gamma[n]); the residual add, read through a view of r in
// the Gemm's rows, becomes its epilogue.
TEST(Fuse, LayerScaleFoldsAndResidualFusesBehindAnUnflatten) {
  testing::expect_pass_result("fuse", R"(graph @g opset 20 {
  input %f : f32[4,3]
  input %r : f32[1,2,2,2]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
  const %shape : i64[4] = [1, 2, 2, 2]
  const %gamma : f32[1,1,1,2] = [0.5, 2.0]
  %c = tessel.Gemm(%f, %w, %b) : f32[4,2] @"fc"
  %u = Reshape(%c, %shape) : f32[1,2,2,2] @"fc.unflatten"
  %s = Mul(%u, %gamma) : f32[1,2,2,2] @"layer_scale"
  %y = Add(%s, %r) : f32[1,2,2,2] @"residual"
  output %y
})",
                              R"(graph @g opset 20 {
  input %f : f32[4,3]
  input %r : f32[1,2,2,2]
  const %w : f32[2,3] = [0.5, -0.5, 0.25, 4.0, -1.0, 0.5]
  const %b : f32[2] = [0.25, -1.0]
  const %shape : i64[4] = [1, 2, 2, 2]
  const %rows : i64[2] = [4, 2]
  %v = Reshape(%r, %rows) : f32[4,2] @"residual.residual_rows"
  %c = tessel.Gemm(%f, %w, %b, %v) {epilogue = ["add_residual"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[4,2] @"fc"
  %y = Reshape(%c, %shape) : f32[1,2,2,2] @"fc.unflatten"
  output %y
})");
}

// Left alone: a Reshape that changes the channel dim, and a Mul by a constant that is not per
// channel (it varies along a row dim).
TEST(Fuse, ReshapesThatMoveChannelsAndNonChannelScalesStay) {
  const std::string unchanged = R"(graph @g opset 20 {
  input %f : f32[4,2]
  const %w : f32[2,2] = [1.0, -1.0, 0.5, 2.0]
  const %w2 : f32[2,2] = [0.5, 1.0, -1.0, 0.25]
  const %to8 : i64[2] = [1, 8]
  const %to22 : i64[4] = [1, 2, 2, 2]
  const %k : f32[1,1,2,1] = [0.5, 2.0]
  %c = tessel.Gemm(%f, %w) : f32[4,2] @"fc"
  %u = Reshape(%c, %to8) : f32[1,8] @"flat"
  %y = Relu(%u) : f32[1,8] @"relu"
  %d = tessel.Gemm(%f, %w2) : f32[4,2] @"fc2"
  %v = Reshape(%d, %to22) : f32[1,2,2,2] @"unflatten"
  %z = Mul(%v, %k) : f32[1,2,2,2] @"row_scale"
  output %y
  output %z
})";
  testing::expect_pass_result("fuse", unchanged, unchanged);
}

}  // namespace
}  // namespace tessel
