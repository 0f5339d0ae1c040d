// fuse on int8 contractions (fold-qdq's form): QuantizeLinear into the epilogue with an i8
// store, the DequantizeLinear after it, and an int8 residual read through its scale.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

using testing::small_ints;

const std::string kHead = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %sy : f32[] = [0.5]
  const %z : i8[] = [0]
  const %wq : i8[8,3,3,8] = [)" + small_ints(576) + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  const %s : f32[8] = [0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625]
  %xq = QuantizeLinear(%x, %sx, %z) : i8[1,3,3,8] @"qx"
)";

// conv -> Relu -> Q -> DQ -> Add(., DQ(xq)) -> Relu: one conv, its residual the int8 xq.
TEST(FuseInt8, QuantizeDequantizeAndInt8ResidualJoinTheEpilogue) {
  testing::expect_pass_result("fuse", kHead + R"(  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %r = Relu(%y) : f32[1,3,3,8] @"relu"
  %yq = QuantizeLinear(%r, %sy, %z) : i8[1,3,3,8] @"qy"
  %yd = DequantizeLinear(%yq, %sy, %z) : f32[1,3,3,8] @"dqy"
  %xd = DequantizeLinear(%xq, %sx, %z) : f32[1,3,3,8] @"dqx"
  %a = Add(%yd, %xd) : f32[1,3,3,8] @"add"
  %o = Relu(%a) : f32[1,3,3,8] @"relu2"
  output %o
})",
                              kHead + R"(  %xd = DequantizeLinear(%xq, %sx, %z) : f32[1,3,3,8] @"dqx"
  %o = tessel.Conv(%xq, %wq, %b, %xq, %s) {epilogue = ["relu", "quantize", "mul", "add_residual_scaled", "relu"], epilogue_alpha = [0.0, 0.5, 0.5, 0.0625, 0.0], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  output %o
})");
}

// onnxruntime's placement: both Add inputs quantized and dequantized. The first conv takes the
// Add with the second conv's int8 output as R; the second conv stops at that output, which the
// first now reads (its DequantizeLinear is left for dce).
TEST(FuseInt8, BothAddInputsQuantized) {
  testing::expect_pass_result("fuse", kHead + R"(  const %s2 : f32[] = [0.25]
  %y1 = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv1"
  %q1 = QuantizeLinear(%y1, %sy, %z) : i8[1,3,3,8] @"q1"
  %d1 = DequantizeLinear(%q1, %sy, %z) : f32[1,3,3,8] @"dq1"
  %y2 = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv2"
  %q2 = QuantizeLinear(%y2, %s2, %z) : i8[1,3,3,8] @"q2"
  %d2 = DequantizeLinear(%q2, %s2, %z) : f32[1,3,3,8] @"dq2"
  %a = Add(%d1, %d2) : f32[1,3,3,8] @"add"
  %r = Relu(%a) : f32[1,3,3,8] @"relu"
  %o = QuantizeLinear(%r, %sy, %z) : i8[1,3,3,8] @"q3"
  output %o
})",
                              kHead + R"(  const %s2 : f32[] = [0.25]
  %q2 = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize"], epilogue_alpha = [0.25], epilogue_beta = [0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv2"
  %d2 = DequantizeLinear(%q2, %s2, %z) : f32[1,3,3,8] @"dq2"
  %o = tessel.Conv(%xq, %wq, %b, %q2, %s) {epilogue = ["quantize", "mul", "add_residual_scaled", "relu", "quantize"], epilogue_alpha = [0.5, 0.5, 0.25, 0.0, 0.5], epilogue_beta = [0.0, 0.0, 0.0, 0.0, 0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv1"
  output %o
})");
}

// onnxruntime's conv -> Q -> DQ -> Relu -> Q to the same scale (and to Clip(0, 6)'s): the
// requantization goes (ops::fold_requantize), the activation acts on the integer, and the conv
// still stores i8. expect_pass_result runs both graphs on the CPU reference: the same values.
TEST(FuseInt8, SameScaleRequantizationFolds) {
  const std::string chain = kHead + R"(  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %q1 = QuantizeLinear(%y, %sy, %z) : i8[1,3,3,8] @"q1"
  %d1 = DequantizeLinear(%q1, %sy, %z) : f32[1,3,3,8] @"dq1"
  %r = Relu(%d1) : f32[1,3,3,8] @"relu"
  %q2 = QuantizeLinear(%r, %sy, %z) : i8[1,3,3,8] @"q2"
  %d2 = DequantizeLinear(%q2, %sy, %z) : f32[1,3,3,8] @"dq2"
  %c = Clip(%d2, %lo, %hi) : f32[1,3,3,8] @"clip"
  %q3 = QuantizeLinear(%c, %sy, %z) : i8[1,3,3,8] @"q3"
  output %q3
})";
  testing::expect_pass_result("fuse", chain, kHead + R"(  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %q3 = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize", "relu", "clip"], epilogue_alpha = [0.5, 0.0, 0.0], epilogue_beta = [0.0, 0.0, 12.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  output %q3
})");
}

// A last QuantizeLinear: the conv stores i8. A QuantizeLinear with a non-zero zero point, or
// to uint8, is no int8 epilogue step and stays.
TEST(FuseInt8, LastQuantizeStoresInt8AndAsymmetricOnesStay) {
  testing::expect_pass_result("fuse", kHead + R"(  %y = tessel.Conv(%xq, %wq, %b, _, %s) : f32[1,1,1,8] @"conv"
  %yq = QuantizeLinear(%y, %sy, %z) : i8[1,1,1,8] @"qy"
  output %yq
})",
                              kHead + R"(  %yq = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize"], epilogue_alpha = [0.5], epilogue_beta = [0.0], out_dtype = "i8"} : i8[1,1,1,8] @"conv"
  output %yq
})");
  const std::string asymmetric = kHead + R"(  const %zu : u8[] = [128]
  %y = tessel.Conv(%xq, %wq, %b, _, %s) : f32[1,1,1,8] @"conv"
  %yq = QuantizeLinear(%y, %sy, %zu) : u8[1,1,1,8] @"qy"
  output %yq
})";
  testing::expect_pass_result("fuse", asymmetric, asymmetric);
}

// onnxruntime's default QUInt8 activations on int8 contractions (fold-qdq reads a uint8 X of
// zero point 0). conv1's QuantizeLinear to uint8 with zero point 0 (the ReLU before it dropped
// by the quantizer) is round, clip(0, 255) and a u8 store. conv3's output has zero point 128
// (no ReLU): a fake quantization, then the block's Add of the uint8 input (zero point 0) as a
// scaled residual read as it is, and the last QuantizeLinear to uint8 stores u8.
TEST(FuseInt8, Uint8ActivationsStoreUint8AndAreResiduals) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %sy : f32[] = [0.5]
  const %z0 : u8[] = [0]
  const %z128 : u8[] = [128]
  const %wq : i8[8,3,3,8] = [)" + small_ints(576) + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  const %s : f32[8] = [0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625, 0.0078125, 0.015625]
  %xq = QuantizeLinear(%x, %sx, %z0) : u8[1,3,3,8] @"qx"
)";
  testing::expect_pass_result("fuse", head + R"(  %y1 = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv1"
  %q1 = QuantizeLinear(%y1, %sy, %z0) : u8[1,3,3,8] @"q1"
  %y3 = tessel.Conv(%q1, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv3"
  %q3 = QuantizeLinear(%y3, %sy, %z128) : u8[1,3,3,8] @"q3"
  %d3 = DequantizeLinear(%q3, %sy, %z128) : f32[1,3,3,8] @"dq3"
  %xd = DequantizeLinear(%xq, %sx, %z0) : f32[1,3,3,8] @"dqx"
  %a = Add(%d3, %xd) : f32[1,3,3,8] @"add"
  %o = QuantizeLinear(%a, %sy, %z0) : u8[1,3,3,8] @"qo"
  output %o
})",
                              head + R"(  %q1 = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["round", "clip"], epilogue_alpha = [0.5, 0.0], epilogue_beta = [0.0, 255.0], out_dtype = "u8", pads = [1, 1, 1, 1]} : u8[1,3,3,8] @"conv1"
  %xd = DequantizeLinear(%xq, %sx, %z0) : f32[1,3,3,8] @"dqx"
  %o = tessel.Conv(%q1, %wq, %b, %xq, %s) {epilogue = ["round", "clip", "mul", "add_residual_scaled", "round", "clip"], epilogue_alpha = [0.5, -128.0, 0.5, 0.0625, 0.5, 0.0], epilogue_beta = [0.0, 127.0, 0.0, 0.0, 0.0, 255.0], out_dtype = "u8", pads = [1, 1, 1, 1]} : u8[1,3,3,8] @"conv3"
  output %o
})");
}

// A QDQ super-resolution net quantizes after each pixel shuffle: a per-tensor quantize acts
// per element on the values the depth_to_space store only moves, so the upsampling conv takes
// it and stores int8 (it stored f32 for a QuantizeLinear kernel to read).
TEST(FuseInt8, QuantizeAfterADepthToSpaceStoreStoresInt8) {
  testing::expect_pass_result("fuse", kHead + R"(  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %d = tessel.DepthToSpace(%y) {blocksize = 2, mode = "DCR"} : f32[1,6,6,2] @"shuffle"
  %q = QuantizeLinear(%d, %sy, %z) : i8[1,6,6,2] @"q"
  output %q
})",
                              kHead + R"(  %q = tessel.Conv(%xq, %wq, %b, _, %s) {block = 2, epilogue = ["quantize"], epilogue_alpha = [0.5], epilogue_beta = [0.0], mode = "DCR", out_dtype = "i8", pads = [1, 1, 1, 1], store = "depth_to_space"} : i8[1,6,6,2] @"conv"
  output %q
})");
}

// A QDQ model's grouped convs (float: fold-qdq leaves them). A depthwise conv: the
// QuantizeLinear -> DequantizeLinear -> Clip -> QuantizeLinear chain after it joins its
// epilogue and it stores int8; in an fp16 graph, a DequantizeLinear to f32 after the int8 value
// stays (the window kernels store int8 or their own dtype). A grouped conv of several channels
// per group (the halo and packed-groups Tensor Core kernels) takes its QuantizeLinear alike.
TEST(FuseInt8, GroupedConvsTakeTheQuantizeChainAndStoreInt8) {
  // n weights of a fixed pattern, as IR text (exact in f16 too).
  auto pattern = [](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string((i * 7 % 13 - 6) * 0.125);
    return text;
  };
  // The same 3x3 depthwise weights in f32 and f16.
  const std::string weights = pattern(72);
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,4,4,8]
  const %w : f32[8,3,3,1] = [)" + weights + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  const %s1 : f32[] = [0.125]
  const %s2 : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
)";
  testing::expect_pass_result("fuse", head + R"(  %y = tessel.Conv(%x, %w, %b) {group = 8, pads = [1, 1, 1, 1]} : f32[1,4,4,8] @"dw"
  %q1 = QuantizeLinear(%y, %s1, %z) : i8[1,4,4,8] @"q1"
  %d1 = DequantizeLinear(%q1, %s1, %z) : f32[1,4,4,8] @"dq1"
  %c = Clip(%d1, %lo, %hi) : f32[1,4,4,8] @"clip"
  %q2 = QuantizeLinear(%c, %s2, %z) : i8[1,4,4,8] @"q2"
  output %q2
})",
                              head + R"(  %q2 = tessel.Conv(%x, %w, %b) {epilogue = ["quantize", "mul", "clip", "quantize"], epilogue_alpha = [0.125, 0.125, 0.0, 0.0625], epilogue_beta = [0.0, 0.0, 6.0, 0.0], group = 8, out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,4,4,8] @"dw"
  output %q2
})");
  const std::string half = R"(graph @g opset 17 {
  input %x : f16[1,4,4,8]
  const %w : f16[8,3,3,1] = [)" + weights + R"(]
  const %s1 : f32[] = [0.125]
  const %z : i8[] = [0]
)";
  testing::expect_pass_result("fuse", half + R"(  %y = tessel.Conv(%x, %w) {group = 8, pads = [1, 1, 1, 1]} : f16[1,4,4,8] @"dw"
  %q1 = QuantizeLinear(%y, %s1, %z) : i8[1,4,4,8] @"q1"
  %d1 = DequantizeLinear(%q1, %s1, %z) : f32[1,4,4,8] @"dq1"
  output %d1
})",
                              half + R"(  %q1 = tessel.Conv(%x, %w) {epilogue = ["quantize"], epilogue_alpha = [0.125], epilogue_beta = [0.0], group = 8, out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,4,4,8] @"dw"
  %d1 = DequantizeLinear(%q1, %s1, %z) : f32[1,4,4,8] @"dq1"
  output %d1
})", 2e-2, 2e-2);
  // 8 groups of 2 input channels: the weights of the depthwise conv's pattern, 144 of them.
  const std::string grouped_weights = pattern(144);
  const std::string grouped = R"(graph @g opset 17 {
  input %x : f32[1,4,4,8]
  const %w : f32[8,3,3,2] = [)" + grouped_weights + R"(]
  const %s1 : f32[] = [0.125]
  const %z : i8[] = [0]
)";
  testing::expect_pass_result("fuse", grouped + R"(  %y = tessel.Conv(%x, %w) {group = 4, pads = [1, 1, 1, 1]} : f32[1,4,4,8] @"g4"
  %q1 = QuantizeLinear(%y, %s1, %z) : i8[1,4,4,8] @"q1"
  output %q1
})",
                              grouped + R"(  %q1 = tessel.Conv(%x, %w) {epilogue = ["quantize"], epilogue_alpha = [0.125], epilogue_beta = [0.0], group = 4, out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,4,4,8] @"g4"
  output %q1
})");
  // onnxruntime's QUInt8 MobileNet: the depthwise conv's ReLU6, then a QuantizeLinear to
  // uint8 of zero point 0: round, clip(0, 255), stored uint8. The grouped conv of several
  // channels per group (whose kernels store no uint8) keeps its QuantizeLinear.
  const std::string uint8 = R"(graph @g opset 17 {
  input %x : f32[1,4,4,8]
  const %w : f32[8,3,3,1] = [)" + weights + R"(]
  const %s1 : f32[] = [0.125]
  const %zu : u8[] = [0]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
)";
  testing::expect_pass_result("fuse", uint8 + R"(  %y = tessel.Conv(%x, %w) {group = 8, pads = [1, 1, 1, 1]} : f32[1,4,4,8] @"dw"
  %c = Clip(%y, %lo, %hi) : f32[1,4,4,8] @"relu6"
  %q1 = QuantizeLinear(%c, %s1, %zu) : u8[1,4,4,8] @"q1"
  output %q1
})",
                              uint8 + R"(  %q1 = tessel.Conv(%x, %w) {epilogue = ["clip", "round", "clip"], epilogue_alpha = [0.0, 0.125, 0.0], epilogue_beta = [6.0, 0.0, 255.0], group = 8, out_dtype = "u8", pads = [1, 1, 1, 1]} : u8[1,4,4,8] @"dw"
  output %q1
})");
  const std::string grouped_uint8 = R"(graph @g opset 17 {
  input %x : f32[1,4,4,8]
  const %w : f32[8,3,3,2] = [)" + grouped_weights + R"(]
  const %s1 : f32[] = [0.125]
  const %zu : u8[] = [0]
  %y = tessel.Conv(%x, %w) {group = 4, pads = [1, 1, 1, 1]} : f32[1,4,4,8] @"g4"
  %q1 = QuantizeLinear(%y, %s1, %zu) : u8[1,4,4,8] @"q1"
  output %q1
})";
  testing::expect_pass_result("fuse", grouped_uint8, grouped_uint8);
}

// A depthwise conv reading its int8 input (fold-qdq's int8-input form): the int8 conv that
// writes that input stores it, its chain ending at the quantize (nothing dequantizes the
// integers any more), and the depthwise conv takes its own QuantizeLinear.
TEST(FuseInt8, ProducerOfADepthwiseConvsInt8InputStoresIt) {
  std::string weights;
  for (int i = 0; i < 72; ++i) weights += (i ? ", " : "") + std::to_string((i * 7 % 13 - 6) * 0.125);
  const std::string head = kHead + R"(  const %wd : f32[8,3,3,1] = [)" + weights + R"(]
  const %sd : f32[8] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
  const %s2 : f32[] = [0.25]
)";
  testing::expect_pass_result("fuse", head + R"(  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv"
  %yq = QuantizeLinear(%y, %sy, %z) : i8[1,3,3,8] @"qy"
  %d = tessel.Conv(%yq, %wd, %b, _, %sd) {group = 8, pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"dw"
  %dq = QuantizeLinear(%d, %s2, %z) : i8[1,3,3,8] @"qd"
  output %dq
})",
                              head + R"(  %yq = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["quantize"], epilogue_alpha = [0.5], epilogue_beta = [0.0], out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"conv"
  %dq = tessel.Conv(%yq, %wd, %b, _, %sd) {epilogue = ["quantize"], epilogue_alpha = [0.25], epilogue_beta = [0.0], group = 8, out_dtype = "i8", pads = [1, 1, 1, 1]} : i8[1,3,3,8] @"dw"
  output %dq
})");
}

// A per-channel Mul after it folds into its dequantization scale S and its bias, as into an
// int8 contraction's: acc * (S c) + B c. Its float weights stay.
TEST(FuseInt8, ChannelScaleAfterAnInt8InputFoldsIntoItsScale) {
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,3,3,2]
  const %sx : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %w : f32[2,3,3,1] = [0.5, -1.0, 0.25, 1.0, 0.5, -0.5, 2.0, 0.125, -0.25, 1.0, 0.5, 0.25, -1.0, 0.75, 0.5, -0.5, 1.5, 0.25]
)";
  const std::string quantize = R"(  %xq = QuantizeLinear(%x, %sx, %z) : i8[1,3,3,2] @"qx"
)";
  testing::expect_pass_result("fuse", head + R"(  const %b : f32[2] = [0.5, -0.25]
  const %s : f32[2] = [0.0625, 0.0625]
  const %c : f32[2] = [2.0, 0.5]
)" + quantize + R"(  %d = tessel.Conv(%xq, %w, %b, _, %s) {group = 2, pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"dw"
  %m = Mul(%d, %c) : f32[1,3,3,2] @"scale"
  output %m
})",
                              head + R"(  const %b : f32[2] = [1.0, -0.125]
  const %s : f32[2] = [0.125, 0.03125]
)" + quantize + R"(  %m = tessel.Conv(%xq, %w, %b, _, %s) {group = 2, pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"dw"
  output %m
})");
}

// choose-precision's fp16 store of an int8 contraction's result is no edge store: the chain
// after it fuses as if the conv stored f32 -- the float residual (an fp16 conv's output, read
// in its own dtype) and the ReLU -- and the store converts to the dtype the chain ends in: f16
// for the next fp16 op, or f32 where the edge Cast of a graph output follows.
TEST(FuseInt8, ChoosePrecisionsFp16StoreIsNoEdge) {
  const std::string head = kHead + R"(  input %f : f16[1,3,3,8]
  const %wf : f16[8,1,1,8] = [)" + small_ints(64) + R"(]
)";
  const std::string downsample = R"(  %d = tessel.Conv(%f, %wf, %b) : f16[1,3,3,8] @"downsample"
)";
  testing::expect_pass_result("fuse", head + R"(  %y = tessel.Conv(%xq, %wq, %b, _, %s) {out_dtype = "f16", pads = [1, 1, 1, 1]} : f16[1,3,3,8] @"conv"
)" + downsample + R"(  %a = Add(%y, %d) : f16[1,3,3,8] @"add"
  %r = Relu(%a) : f16[1,3,3,8] @"relu"
  %p = tessel.MaxPool(%r) {kernel_shape = [2, 2]} : f16[1,2,2,8] @"pool"
  %o = Cast(%p) {to = 1} : f32[1,2,2,8] @"to_f32"
  %y2 = tessel.Conv(%xq, %wq, %b, _, %s) {out_dtype = "f16", pads = [1, 1, 1, 1]} : f16[1,3,3,8] @"conv2"
  %r2 = Relu(%y2) : f16[1,3,3,8] @"relu2"
  %o2 = Cast(%r2) {to = 1} : f32[1,3,3,8] @"to_f32_2"
  output %o
  output %o2
})",
                              head + downsample + R"(  %r = tessel.Conv(%xq, %wq, %b, %d, %s) {epilogue = ["add_residual", "relu"], epilogue_alpha = [0.0, 0.0], epilogue_beta = [0.0, 0.0], out_dtype = "f16", pads = [1, 1, 1, 1]} : f16[1,3,3,8] @"conv"
  %p = tessel.MaxPool(%r) {kernel_shape = [2, 2]} : f16[1,2,2,8] @"pool"
  %o = Cast(%p) {to = 1} : f32[1,2,2,8] @"to_f32"
  %o2 = tessel.Conv(%xq, %wq, %b, _, %s) {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], out_dtype = "f32", pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"conv2"
  output %o
  output %o2
})");
}

}  // namespace
}  // namespace tessel
