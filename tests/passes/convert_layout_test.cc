#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pass_test_util.h"

namespace tessel {
namespace {

// The RGB first conv: input channels 3 -> padded to 8 right after the input's edge Transpose,
// weights OIHW [1,3,1,2] -> OHWI [1,1,2,3] -> zero-padded [1,1,2,8]. The Relu follows the
// conv into NHWC; the graph output gets the edge Transpose back.
TEST(ConvertLayout, ConvGetsOhwiWeightsAndAlignedChannels) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,3,4,4]
  const %w : f32[1,3,1,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %b : f32[1] = [0.5]
  %c = Conv(%x, %w, %b) {kernel_shape = [1, 2], pads = [0, 0, 0, 1]} : f32[1,1,4,4] @"conv"
  %y = Relu(%c) : f32[1,1,4,4] @"relu"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,3,4,4]
  const %w : f32[1,1,2,8] = [1.0, 3.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 4.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]
  const %b : f32[1] = [0.5]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,4,4,3] @"t0"
  %xp = Pad(%xt, %pads) : f32[1,4,4,8] @"pad"
  %c = tessel.Conv(%xp, %w, %b) {pads = [0, 0, 0, 1]} : f32[1,4,4,1] @"conv"
  %r = Relu(%c) : f32[1,4,4,1] @"relu"
  %y = Transpose(%r) {perm = [0, 3, 1, 2]} : f32[1,1,4,4] @"t1"
  output %y
})");
}

// auto_pad becomes explicit pads (SAME_UPPER, 4x4 with a 2x2 kernel: 1 at the end); a
// depthwise conv (group = C = 3) keeps its 3 channels: alignment padding is for group 1 only.
TEST(ConvertLayout, ExplicitPadsAndNoAlignmentForDepthwise) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,3,4,4]
  const %w : f32[3,1,2,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
  %y = Conv(%x, %w) {auto_pad = "SAME_UPPER", group = 3} : f32[1,3,4,4] @"dw"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,3,4,4]
  const %w : f32[3,2,2,1] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,4,4,3] @"t0"
  %c = tessel.Conv(%xt, %w) {group = 3, pads = [0, 0, 1, 1]} : f32[1,4,4,3] @"dw"
  %y = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,3,4,4] @"t1"
  output %y
})");
}

// Per-channel constants [1,C,1,1] and [C,1,1] broadcast against NHWC as [C]; the global pool
// takes its NHWC form; Flatten of [N,1,1,C] reads the NHWC data as is (same flat order); the
// dense layer's weight [K,N] (transB = 0) becomes [N,K]. Only the input edge Transpose remains.
TEST(ConvertLayout, ClassifierHeadNeedsNoTranspose) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %s : f32[1,2,1,1] = [2.0, 3.0]
  const %o : f32[2,1,1] = [0.5, -0.5]
  const %fc : f32[2,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %fb : f32[3] = [0.1, 0.2, 0.3]
  %c = Conv(%x, %w) {kernel_shape = [1, 1]} : f32[1,2,2,2] @"conv"
  %m = Mul(%c, %s) : f32[1,2,2,2] @"scale"
  %a = Add(%m, %o) : f32[1,2,2,2] @"shift"
  %p = GlobalAveragePool(%a) : f32[1,2,1,1] @"pool"
  %f = Flatten(%p) {axis = 1} : f32[1,2] @"flatten"
  %y = Gemm(%f, %fc, %fb) : f32[1,3] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %s : f32[2] = [2.0, 3.0]
  const %o : f32[2] = [0.5, -0.5]
  const %fc : f32[3,2] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
  const %fb : f32[3] = [0.1, 0.2, 0.3]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %c = tessel.Conv(%xt, %w) : f32[1,2,2,2] @"conv"
  %m = Mul(%c, %s) : f32[1,2,2,2] @"scale"
  %a = Add(%m, %o) : f32[1,2,2,2] @"shift"
  %p = tessel.GlobalAveragePool(%a) : f32[1,1,1,2] @"pool"
  %f = Flatten(%p) {axis = 1} : f32[1,2] @"flatten"
  %y = tessel.Gemm(%f, %fc, %fb) : f32[1,3] @"fc"
  output %y
})");
}

// One channel: NHWC [1,2,2,1] has the NCHW flat order, so Flatten reads it directly. (Gemm's
// weight is already [N,K] with transB = 1; its [1,N] bias becomes [N].)
TEST(ConvertLayout, FlattenOfOneChannelNeedsNoTranspose) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %fc : f32[2,4] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  const %fb : f32[1,2] = [0.5, -0.5]
  %c = Conv(%x, %w) : f32[1,1,2,2] @"conv"
  %f = Flatten(%c) : f32[1,4] @"flatten"
  %y = Gemm(%f, %fc, %fb) {transB = 1} : f32[1,2] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %fc : f32[2,4] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  const %fb : f32[2] = [0.5, -0.5]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %c = tessel.Conv(%xt, %w) : f32[1,2,2,1] @"conv"
  %y = Flatten(%c) : f32[1,4] @"flatten"
  %z = tessel.Gemm(%y, %fc, %fb) : f32[1,2] @"fc"
  output %z
})");
}

// VGG's classifier at 224x224 flattens 7x7 maps: channels and pixels mix, so the Flatten reads
// NCHW through a Transpose that says why.
TEST(ConvertLayout, FlattenOfSpatialMapsTransposesBackAndSaysWhy) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  %c = Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %y = Flatten(%c) : f32[1,8] @"flatten"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %ct = tessel.Conv(%xt, %w) : f32[1,2,2,2] @"conv"
  %c = Transpose(%ct) {layout_reason = "Flatten 'flatten' mixes channels with 2x2 spatial dims: it reads NCHW order", perm = [0, 3, 1, 2]} : f32[1,2,2,2] @"t1"
  %y = Flatten(%c) : f32[1,8] @"flatten"
  output %y
})");
}

// Ops whose semantics is per axis stay ONNX ops with remapped axes: NCHW axis 1 (C) is NHWC
// axis 3, 2 (H) is 1, 3 (W) is 2. Pad's [begins, ends] and Resize's scales are permuted; Slice
// gets explicit axes; ReduceMean over H, W without keepdims leaves [N, C] in both layouts.
TEST(ConvertLayout, AxesOfPerAxisOpsAreRemapped) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,4,4]
  const %w : f32[2,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %pads : i64[8] = [0, 0, 1, 0, 0, 0, 0, 1]
  const %starts : i64[1] = [1]
  const %ends : i64[1] = [3]
  const %axes : i64[1] = [1]
  const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]
  %c = Conv(%x, %w) : f32[1,2,4,4] @"conv"
  %r = Relu(%c) : f32[1,2,4,4] @"relu"
  %cat = Concat(%c, %r) {axis = 1} : f32[1,4,4,4] @"cat"
  %sm = Softmax(%cat) {axis = 1} : f32[1,4,4,4] @"sm"
  %mp = MaxPool(%sm) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,4,2,2] @"mp"
  %pd = Pad(%mp, %pads) : f32[1,4,3,3] @"pad"
  %sl = Slice(%pd, %starts, %ends, %axes) : f32[1,2,3,3] @"slice"
  %s1, %s2 = Split(%sl) {axis = 1} : f32[1,1,3,3], f32[1,1,3,3] @"split"
  %ad = Sub(%s1, %s2) : f32[1,1,3,3] @"sub"
  %rs = Resize(%ad, _, %scales) {mode = "nearest"} : f32[1,1,6,6] @"resize"
  %rm = ReduceMean(%rs) {axes = [2, 3], keepdims = 0} : f32[1,1] @"mean"
  output %rm
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,4,4]
  const %w : f32[2,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %pads : i64[8] = [0, 1, 0, 0, 0, 0, 1, 0]
  const %starts : i64[1] = [1]
  const %ends : i64[1] = [3]
  const %axes : i64[1] = [3]
  const %scales : f32[4] = [1.0, 2.0, 2.0, 1.0]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,4,4,8] @"t0"
  %c = tessel.Conv(%xt, %w) : f32[1,4,4,2] @"conv"
  %r = Relu(%c) : f32[1,4,4,2] @"relu"
  %cat = Concat(%c, %r) {axis = 3} : f32[1,4,4,4] @"cat"
  %sm = Softmax(%cat) {axis = 3} : f32[1,4,4,4] @"sm"
  %mp = tessel.MaxPool(%sm) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,2,2,4] @"mp"
  %pd = Pad(%mp, %pads) : f32[1,3,3,4] @"pad"
  %sl = Slice(%pd, %starts, %ends, %axes) : f32[1,3,3,2] @"slice"
  %s1, %s2 = Split(%sl) {axis = 3} : f32[1,3,3,1], f32[1,3,3,1] @"split"
  %ad = Sub(%s1, %s2) : f32[1,3,3,1] @"sub"
  %rs = Resize(%ad, _, %scales) {mode = "nearest"} : f32[1,6,6,1] @"resize"
  %rm = ReduceMean(%rs) {axes = [1, 2], keepdims = 0} : f32[1,1] @"mean"
  output %rm
})");
}

// An upsample that writes a graph output stays NCHW: the Transpose back to NCHW moves its input,
// 16x smaller here, and says why. One that something else reads converts as any Resize.
TEST(ConvertLayout, UpsampleIntoAGraphOutputStaysNchw) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %scales : f32[4] = [1.0, 1.0, 4.0, 4.0]
  %c = Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %y = Resize(%c, _, %scales) {mode = "linear"} : f32[1,2,8,8] @"up"
  %u = Resize(%c, _, %scales) {mode = "linear"} : f32[1,2,8,8] @"up2"
  %z = Relu(%u) : f32[1,2,8,8] @"relu"
  output %y
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %scales : f32[4] = [1.0, 1.0, 4.0, 4.0]
  const %scales_nhwc : f32[4] = [1.0, 4.0, 4.0, 1.0]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %ct = tessel.Conv(%xt, %w) : f32[1,2,2,2] @"conv"
  %c = Transpose(%ct) {layout_reason = "Resize 'up' upsamples into a graph output: it runs in NCHW, so that the transpose to NCHW moves its smaller input", perm = [0, 3, 1, 2]} : f32[1,2,2,2] @"t1"
  %y = Resize(%c, _, %scales) {mode = "linear"} : f32[1,2,8,8] @"up"
  %ut = Resize(%ct, _, %scales_nhwc) {mode = "linear"} : f32[1,8,8,2] @"up2"
  %zt = Relu(%ut) : f32[1,8,8,2] @"relu"
  %z = Transpose(%zt) {perm = [0, 3, 1, 2]} : f32[1,2,8,8] @"t2"
  output %y
  output %z
})");
}

// An op without NHWC form gets its input back in NCHW, and the Transpose names it.
TEST(ConvertLayout, OpWithoutNhwcFormGetsAnExplainedTranspose) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %axis : i64[] = [1]
  %c = Conv(%x, %w) : f32[1,1,2,2] @"conv"
  %y = CumSum(%c, %axis) : f32[1,1,2,2] @"cumsum"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %axis : i64[] = [1]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %ct = tessel.Conv(%xt, %w) : f32[1,2,2,1] @"conv"
  %c = Transpose(%ct) {layout_reason = "CumSum 'cumsum' has no NHWC form", perm = [0, 3, 1, 2]} : f32[1,1,2,2] @"t1"
  %y = CumSum(%c, %axis) : f32[1,1,2,2] @"cumsum"
  output %y
})");
}

// Ops after a conv that take their NHWC forms, other operands (per-channel vectors) as they
// are: GlobalMaxPool, SpaceToDepth, AlexNet's LRN (its window over channels read as they lie), and a
// style-transfer net's InstanceNormalization.
TEST(ConvertLayout, PoolAndNormalizationOpsTakeTheirNhwcForms) {
  struct Case {
    std::string op, args, attrs, nchw_out, nhwc_out;
  };
  const std::string w = "[1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, 1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]";
  const std::string vectors = "  const %s : f32[2] = [2.0, 0.5]\n  const %b : f32[2] = [0.5, -1.0]\n";
  for (const Case& c : {Case{"GlobalMaxPool", "", "", "f32[1,2,1,1]", "f32[1,1,1,2]"},
                        Case{"SpaceToDepth", "", " {blocksize = 2}", "f32[1,8,1,1]", "f32[1,1,1,8]"},
                        Case{"LRN", "", " {size = 3}", "f32[1,2,2,2]", "f32[1,2,2,2]"},
                        Case{"InstanceNormalization", ", %s, %b", "", "f32[1,2,2,2]", "f32[1,2,2,2]"}}) {
    SCOPED_TRACE(c.op);
    const std::string consts = c.args.empty() ? "" : vectors;
    testing::expect_pass_result(
        "convert-layout",
        "graph @g opset 17 {\n  input %x : f32[1,8,2,2]\n  const %w : f32[2,8,1,1] = " + w + "\n" + consts +
            "  %c = Conv(%x, %w) : f32[1,2,2,2] @\"conv\"\n  %y = " + c.op + "(%c" + c.args + ")" + c.attrs + " : " +
            c.nchw_out + " @\"op\"\n  output %y\n}",
        "graph @g opset 17 {\n  input %x : f32[1,8,2,2]\n  const %w : f32[2,1,1,8] = " + w + "\n" + consts +
            "  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @\"t0\"\n"
            "  %ct = tessel.Conv(%xt, %w) : f32[1,2,2,2] @\"conv\"\n"
            "  %yt = tessel." + c.op + "(%ct" + c.args + ")" + c.attrs + " : " + c.nhwc_out + " @\"op\"\n"
            "  %y = Transpose(%yt) {perm = [0, 3, 1, 2]} : " + c.nchw_out + " @\"t1\"\n  output %y\n}");
  }
}

// A pool whose input no NHWC op made (here the graph input itself) still takes its NHWC form:
// its only GPU kernel is that form's, and the Transpose into NHWC says so. A MaxPool with an
// Indices output has no NHWC form and stays.
TEST(ConvertLayout, PoolOnAChannelsFirstInputTakesItsNhwcForm) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  %y = GlobalMaxPool(%x) : f32[1,8,1,1] @"pool"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  %xt = Transpose(%x) {layout_reason = "GlobalMaxPool 'pool' runs on the GPU in NHWC only", perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %yt = tessel.GlobalMaxPool(%xt) : f32[1,1,1,8] @"pool"
  %y = Transpose(%yt) {perm = [0, 3, 1, 2]} : f32[1,8,1,1] @"t1"
  output %y
})");
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  %y, %i = MaxPool(%x) {kernel_shape = [2, 2]} : f32[1,8,1,1], i64[1,8,1,1] @"pool"
  output %y
  output %i
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  %y, %i = MaxPool(%x) {kernel_shape = [2, 2]} : f32[1,8,1,1], i64[1,8,1,1] @"pool"
  output %y
  output %i
})");
}

// Gemm's alpha scales the constant weights and beta the constant C; transA transposes A first.
// A runtime C with beta != 1 has no bias form: the Gemm stays.
TEST(ConvertLayout, GemmAlphaBetaAndTransA) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %a : f32[3,2]
  const %b : f32[3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %c : f32[2] = [1.0, -1.0]
  %y = Gemm(%a, %b, %c) {alpha = 0.5, beta = 2.0, transA = 1} : f32[2,2] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %a : f32[3,2]
  const %bt : f32[2,3] = [0.5, 1.5, 2.5, 1.0, 2.0, 3.0]
  const %cv : f32[2] = [2.0, -2.0]
  %at = Transpose(%a) {perm = [1, 0]} : f32[2,3] @"t"
  %y = tessel.Gemm(%at, %bt, %cv) : f32[2,2] @"fc"
  output %y
})");
  const char* runtime_c = R"(graph @g opset 17 {
  input %a : f32[2,3]
  input %c : f32[2]
  const %b : f32[3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %y = Gemm(%a, %b, %c) {beta = 2.0} : f32[2,2] @"fc"
  output %y
})";
  testing::expect_pass_result("convert-layout", runtime_c, runtime_c);
}

// A pool's auto_pad (TensorFlow's SAME) becomes the explicit pads the NHWC kernels take. A
// 3x3 window of stride 2 (SAME_UPPER) over 5 x 4: 3 x 2 out, pads 1 + 1 high and 0 + 1 wide
// (the odd pad last); then 2x2 of stride 2 (SAME_LOWER) over 3 x 2: 2 x 1 out, the odd pad
// first.
TEST(ConvertLayout, PoolAutoPadBecomesExplicitPads) {
  // An identity 1x1 conv over 8 channels (the same values in OIHW and OHWI).
  std::string identity = "[";
  for (int i = 0; i < 64; ++i) identity += (i ? ", " : "") + std::string(i % 9 == 0 ? "1.0" : "0.0");
  identity += "]";
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,5,4]
  const %w : f32[8,8,1,1] = )" + identity + R"(
  %c = Conv(%x, %w) : f32[1,8,5,4] @"conv"
  %y = MaxPool(%c) {auto_pad = "SAME_UPPER", kernel_shape = [3, 3], strides = [2, 2]} : f32[1,8,3,2] @"max"
  %z = AveragePool(%y) {auto_pad = "SAME_LOWER", kernel_shape = [2, 2], strides = [2, 2]} : f32[1,8,2,1] @"avg"
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,5,4]
  const %w : f32[8,1,1,8] = )" + identity + R"(
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,5,4,8] @"t0"
  %ct = tessel.Conv(%xt, %w) : f32[1,5,4,8] @"conv"
  %yt = tessel.MaxPool(%ct) {kernel_shape = [3, 3], pads = [1, 0, 1, 1], strides = [2, 2]} : f32[1,3,2,8] @"max"
  %zt = tessel.AveragePool(%yt) {kernel_shape = [2, 2], pads = [1, 0, 0, 0], strides = [2, 2]} : f32[1,2,1,8] @"avg"
  %z = Transpose(%zt) {perm = [0, 3, 1, 2]} : f32[1,8,2,1] @"t1"
  output %z
})");
}

// A conv whose weight is computed at run time has no tessel form; nothing around it becomes
// NHWC, so no Transpose appears at all.
TEST(ConvertLayout, LeavesConvWithRuntimeWeightAlone) {
  const char* graph = R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  input %w : f32[2,2,1,1]
  %c = Conv(%x, %w) : f32[1,2,3,3] @"conv"
  %y = Relu(%c) : f32[1,2,3,3] @"relu"
  output %y
})";
  testing::expect_pass_result("convert-layout", graph, graph);
}

// QDQ models: QuantizeLinear / DequantizeLinear follow like elementwise ops; a per-channel
// axis (1, C) is remapped to 3. A scalar Gemm bias becomes one value per output.
TEST(ConvertLayout, QdqFollowsAndPerChannelAxisIsRemapped) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %s : f32[] = [0.125]
  const %zp : u8[] = [128]
  const %cs : f32[2] = [0.25, 0.5]
  const %czp : u8[2] = [128, 128]
  %c = Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %q = QuantizeLinear(%c, %s, %zp) : u8[1,2,2,2] @"q"
  %d = DequantizeLinear(%q, %cs, %czp) {axis = 1} : f32[1,2,2,2] @"dq"
  output %d
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[2,1,1,8] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  const %s : f32[] = [0.125]
  const %zp : u8[] = [128]
  const %cs : f32[2] = [0.25, 0.5]
  const %czp : u8[2] = [128, 128]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %c = tessel.Conv(%xt, %w) : f32[1,2,2,2] @"conv"
  %q = QuantizeLinear(%c, %s, %zp) : u8[1,2,2,2] @"q"
  %dt = DequantizeLinear(%q, %cs, %czp) {axis = 3} : f32[1,2,2,2] @"dq"
  %d = Transpose(%dt) {perm = [0, 3, 1, 2]} : f32[1,2,2,2] @"t1"
  output %d
})");
}

TEST(ConvertLayout, ScalarGemmBiasBecomesAVector) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %a : f32[2,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %c : f32[] = [0.5]
  %y = Gemm(%a, %w, %c) {transB = 1} : f32[2,2] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %a : f32[2,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %c : f32[2] = [0.5, 0.5]
  %y = tessel.Gemm(%a, %w, %c) : f32[2,2] @"fc"
  output %y
})");
}

// UNet's upsampling, ConvTranspose k = 2, s = 2, p = 0 (ops/conv_transpose_phases.h): a 1x1
// conv to s*s*M = 8 channels whose depth_to_space store interleaves the phases, no crop.
// Phase weights OHWI [8, 1, 1, 8], row (rh*2 + rw)*2 + m, column c: W[c, m, rh, rw], here
// c + (4m + 2rh + rw)/8; the bias once per phase.
TEST(ConvertLayout, ConvTransposeK2S2IsOneConvWithDepthToSpaceStore) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,3,3]
  const %w : f32[8,2,2,2] = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.125, 2.25, 2.375, 2.5, 2.625, 2.75, 2.875, 3.0, 3.125, 3.25, 3.375, 3.5, 3.625, 3.75, 3.875, 4.0, 4.125, 4.25, 4.375, 4.5, 4.625, 4.75, 4.875, 5.0, 5.125, 5.25, 5.375, 5.5, 5.625, 5.75, 5.875, 6.0, 6.125, 6.25, 6.375, 6.5, 6.625, 6.75, 6.875, 7.0, 7.125, 7.25, 7.375, 7.5, 7.625, 7.75, 7.875]
  const %b : f32[2] = [0.5, -0.5]
  %y = ConvTranspose(%x, %w, %b) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,2,6,6] @"up"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,3,3]
  const %w : f32[8,1,1,8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 0.125, 1.125, 2.125, 3.125, 4.125, 5.125, 6.125, 7.125, 0.625, 1.625, 2.625, 3.625, 4.625, 5.625, 6.625, 7.625, 0.25, 1.25, 2.25, 3.25, 4.25, 5.25, 6.25, 7.25, 0.75, 1.75, 2.75, 3.75, 4.75, 5.75, 6.75, 7.75, 0.375, 1.375, 2.375, 3.375, 4.375, 5.375, 6.375, 7.375, 0.875, 1.875, 2.875, 3.875, 4.875, 5.875, 6.875, 7.875]
  const %b : f32[8] = [0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,3,3,8] @"t0"
  %c = tessel.Conv(%xt, %w, %b) {block = 2, mode = "DCR", store = "depth_to_space"} : f32[1,6,6,2] @"up"
  %y = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,2,6,6] @"t1"
  output %y
})",
                              1e-5, 1e-4);
}

// k = 3, s = 2, p = 1 without output_padding: 5x5 from 3x3, an odd extent. Rows: phase 0 takes
// tap 1 at offset 0, phase 1 taps 2 and 0 at offsets 0 and 1: a 2x2 conv with pads [0, 0, 1, 1]
// makes 3x3 pixels of 2x2 phases, 6x6, of which the Slice keeps rows and columns [0, 5).
// Phase weights [4, 2, 2, 8]: W[c, 0, kh, kw] = (9c + 3kh + kw)/8, zeros where a phase has
// fewer taps (phase (0, 0) has only the centre).
TEST(ConvertLayout, ConvTransposeWithOddOutputIsCropped) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,3,3]
  const %w : f32[8,1,3,3] = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.125, 2.25, 2.375, 2.5, 2.625, 2.75, 2.875, 3.0, 3.125, 3.25, 3.375, 3.5, 3.625, 3.75, 3.875, 4.0, 4.125, 4.25, 4.375, 4.5, 4.625, 4.75, 4.875, 5.0, 5.125, 5.25, 5.375, 5.5, 5.625, 5.75, 5.875, 6.0, 6.125, 6.25, 6.375, 6.5, 6.625, 6.75, 6.875, 7.0, 7.125, 7.25, 7.375, 7.5, 7.625, 7.75, 7.875, 8.0, 8.125, 8.25, 8.375, 8.5, 8.625, 8.75, 8.875]
  %y = ConvTranspose(%x, %w) {pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,1,5,5] @"up"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,3,3]
  const %w : f32[4,2,2,8] = [0.5, 1.625, 2.75, 3.875, 5.0, 6.125, 7.25, 8.375, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.625, 1.75, 2.875, 4.0, 5.125, 6.25, 7.375, 8.5, 0.375, 1.5, 2.625, 3.75, 4.875, 6.0, 7.125, 8.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.875, 2.0, 3.125, 4.25, 5.375, 6.5, 7.625, 8.75, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.125, 1.25, 2.375, 3.5, 4.625, 5.75, 6.875, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.125, 3.25, 4.375, 5.5, 6.625, 7.75, 8.875, 0.75, 1.875, 3.0, 4.125, 5.25, 6.375, 7.5, 8.625, 0.25, 1.375, 2.5, 3.625, 4.75, 5.875, 7.0, 8.125, 0.0, 1.125, 2.25, 3.375, 4.5, 5.625, 6.75, 7.875]
  const %starts : i64[2] = [0, 0]
  const %ends : i64[2] = [5, 5]
  const %axes : i64[2] = [1, 2]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,3,3,8] @"t0"
  %u = tessel.Conv(%xt, %w) {block = 2, mode = "DCR", pads = [0, 0, 1, 1], store = "depth_to_space"} : f32[1,6,6,1] @"up"
  %c = Slice(%u, %starts, %ends, %axes) : f32[1,5,5,1] @"crop"
  %y = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,1,5,5] @"t1"
  output %y
})",
                              1e-5, 1e-4);
}

// Strides that differ have no single depth_to_space block: the ConvTranspose stays, and the
// Transpose back to NCHW in front of it says why.
TEST(ConvertLayout, ConvTransposeWithUnequalStridesStaysAndSaysWhy) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[8,8,1,1] = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.125, 2.25, 2.375, 2.5, 2.625, 2.75, 2.875, 3.0, 3.125, 3.25, 3.375, 3.5, 3.625, 3.75, 3.875, 4.0, 4.125, 4.25, 4.375, 4.5, 4.625, 4.75, 4.875, 5.0, 5.125, 5.25, 5.375, 5.5, 5.625, 5.75, 5.875, 6.0, 6.125, 6.25, 6.375, 6.5, 6.625, 6.75, 6.875, 7.0, 7.125, 7.25, 7.375, 7.5, 7.625, 7.75, 7.875]
  const %wt : f32[8,1,2,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  %c = Conv(%x, %w) : f32[1,8,2,2] @"conv"
  %y = ConvTranspose(%c, %wt) {strides = [2, 1]} : f32[1,1,4,2] @"up"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[8,1,1,8] = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.125, 2.25, 2.375, 2.5, 2.625, 2.75, 2.875, 3.0, 3.125, 3.25, 3.375, 3.5, 3.625, 3.75, 3.875, 4.0, 4.125, 4.25, 4.375, 4.5, 4.625, 4.75, 4.875, 5.0, 5.125, 5.25, 5.375, 5.5, 5.625, 5.75, 5.875, 6.0, 6.125, 6.25, 6.375, 6.5, 6.625, 6.75, 6.875, 7.0, 7.125, 7.25, 7.375, 7.5, 7.625, 7.75, 7.875]
  const %wt : f32[8,1,2,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75, -1.0, 0.5, 1.0, -0.25, 0.125, 1.0, -2.0, 0.5]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"t0"
  %ct = tessel.Conv(%xt, %w) : f32[1,2,2,8] @"conv"
  %c = Transpose(%ct) {layout_reason = "ConvTranspose 'up': strides [2, 1] differ, and the depth_to_space store that interleaves the phases has one block for both dims", perm = [0, 3, 1, 2]} : f32[1,8,2,2] @"t1"
  %y = ConvTranspose(%c, %wt) {strides = [2, 1]} : f32[1,1,4,2] @"up"
  output %y
})");
}

// A Linear layer on a channels-last 4-D tensor (ConvNeXt's MLP): MatMul with [K, N] weights
// and the bias Add after it become one tessel.Gemm on the [M, K] view, weights [N, K].
TEST(ConvertLayout, MatMulOnRankFourBecomesGemmWithBias) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,2,2,3]
  const %w : f32[3,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -2.0]
  %m = MatMul(%x, %w) : f32[1,2,2,2] @"fc"
  %y = Add(%m, %b) : f32[1,2,2,2] @"bias"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,3]
  const %wt : f32[2,3] = [1.0, 0.5, -0.5, -1.0, 2.0, 0.25]
  const %b : f32[2] = [0.5, -2.0]
  const %mk : i64[2] = [4, 3]
  const %shape : i64[4] = [1, 2, 2, 2]
  %f = Reshape(%x, %mk) : f32[4,3] @"fc.flatten"
  %g = tessel.Gemm(%f, %wt, %b) : f32[4,2] @"fc"
  %y = Reshape(%g, %shape) : f32[1,2,2,2] @"fc.unflatten"
  output %y
})");
}

// Rank 2 with no bias; a MatMul whose second operand is an activation stays a MatMul.
TEST(ConvertLayout, MatMulRankTwoAndActivationWeights) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[2,3]
  input %v : f32[3,4]
  const %w : f32[3,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  %y = MatMul(%x, %w) : f32[2,2] @"fc"
  %z = MatMul(%x, %v) : f32[2,4] @"mm"
  output %y
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3]
  input %v : f32[3,4]
  const %wt : f32[2,3] = [1.0, 0.5, -0.5, -1.0, 2.0, 0.25]
  %y = tessel.Gemm(%x, %wt) : f32[2,2] @"fc"
  %z = MatMul(%x, %v) : f32[2,4] @"mm"
  output %y
  output %z
})");
}

// A model's own permute back to channels-first (ConvNeXt's, after its channels-last Linear)
// is its output's NHWC twin: no Transpose runs for it, the Relu reading it runs NHWC, and the
// NCHW value is made once, for the graph output.
TEST(ConvertLayout, PermuteToChannelsFirstAliasesItsInputAsTheNhwcTwin) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %a : f32[1,2,2,4]
  %q = Transpose(%a) {perm = [0, 3, 1, 2]} : f32[1,4,2,2] @"permute_back"
  %r = Relu(%q) : f32[1,4,2,2] @"relu"
  output %r
})",
                              R"(graph @g opset 17 {
  input %a : f32[1,2,2,4]
  %n = Relu(%a) : f32[1,2,2,4] @"relu"
  %r = Transpose(%n) {perm = [0, 3, 1, 2]} : f32[1,4,2,2] @"r.to_nchw"
  output %r
})");
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// A QDQ conv's weight DequantizeLinear(Wq OIHW, sw, axis 0) becomes DequantizeLinear(Wq OHWI),
// still axis 0, for fold-qdq; a Gemm's [K, N] one (transB = 0, axis 1) becomes [N, K], axis 0.
TEST(ConvertLayout, QuantizedWeightsKeepTheirDequantizeLinear) {
  testing::expect_pass_result("convert-layout", R"(graph @g opset 17 {
  input %x : f32[1,8,1,1]
  const %wq : i8[2,8,1,1] = [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8]
  const %sw : f32[2] = [0.5, 0.25]
  const %vq : i8[2,3] = [1, 2, 3, -1, -2, -3]
  const %sv : f32[3] = [0.5, 0.25, 2.0]
  %wd = DequantizeLinear(%wq, %sw) {axis = 0} : f32[2,8,1,1] @"dqw"
  %vd = DequantizeLinear(%vq, %sv) {axis = 1} : f32[2,3] @"dqv"
  %c = Conv(%x, %wd) : f32[1,2,1,1] @"conv"
  %f = Flatten(%c) {axis = 1} : f32[1,2] @"flatten"
  %y = Gemm(%f, %vd) : f32[1,3] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,8,1,1]
  const %wq : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8]
  const %sw : f32[2] = [0.5, 0.25]
  const %vq : i8[3,2] = [1, -1, 2, -2, 3, -3]
  const %sv : f32[3] = [0.5, 0.25, 2.0]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,1,1,8] @"t0"
  %wd = DequantizeLinear(%wq, %sw) {axis = 0} : f32[2,1,1,8] @"dqw"
  %c = tessel.Conv(%xt, %wd) : f32[1,1,1,2] @"conv"
  %f = Flatten(%c) {axis = 1} : f32[1,2] @"flatten"
  %vd = DequantizeLinear(%vq, %sv) {axis = 0} : f32[3,2] @"dqv"
  %y = tessel.Gemm(%f, %vd) : f32[1,3] @"fc"
  output %y
})");
}

}  // namespace
}  // namespace tessel
