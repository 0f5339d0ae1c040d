#include <gtest/gtest.h>

#include "ir/equal.h"
#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"

namespace tessel {
namespace {

// fp16 storage: inputs and outputs within 1e-2 of fp32 on inputs in [-1, 1] with O(1) weights.
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

void expect_fp16(const std::string& before, const std::string& expected) {
  testing::expect_pass_result("choose-precision-fp16", before, expected, kRtol, kAtol);
}

// Casts at the edges only; the fp16 weight is converted at compile time; the tessel conv's
// bias stays fp32 (added to the fp32 accumulator).
TEST(ChoosePrecision, Fp16InsideCastsAtTheEdgesFp32Bias) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %b : f32[2] = [0.5, -0.5]
  %c = tessel.Conv(%x, %w, %b) : f32[1,2,2,2] @"conv"
  %y = Relu(%c) : f32[1,2,2,2] @"relu"
  output %y
})",
              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f16[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  const %b : f32[2] = [0.5, -0.5]
  %xh = Cast(%x) {to = 10} : f16[1,2,2,2] @"x.to_f16"
  %c = tessel.Conv(%xh, %w, %b) : f16[1,2,2,2] @"conv"
  %yh = Relu(%c) : f16[1,2,2,2] @"relu"
  %y = Cast(%yh) {to = 1} : f32[1,2,2,2] @"y.to_f32"
  output %y
})");
}

// ONNX's Conv takes its bias in X's dtype, so the bias follows; BatchNormalization's statistics
// and Resize's scales accept any float and stay fp32; Clip's bounds follow its input.
TEST(ChoosePrecision, OperandsThatMustFollowAndOperandsThatStay) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : f32[1,1,2,2]
  const %w : f32[1,1,1,1] = [2.0]
  const %b : f32[1] = [0.5]
  const %gamma : f32[1] = [1.5]
  const %beta : f32[1] = [0.25]
  const %mean : f32[1] = [0.5]
  const %var : f32[1] = [4.0]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]
  %c = Conv(%x, %w, %b) : f32[1,1,2,2] @"conv"
  %n = BatchNormalization(%c, %gamma, %beta, %mean, %var) : f32[1,1,2,2] @"bn"
  %k = Clip(%n, %lo, %hi) : f32[1,1,2,2] @"relu6"
  %u = Resize(%k, _, %scales) {mode = "nearest"} : f32[1,1,4,4] @"up"
  %y = Relu(%u) : f32[1,1,4,4] @"relu"
  output %y
})",
              R"(graph @g opset 17 {
  input %x : f32[1,1,2,2]
  const %w : f16[1,1,1,1] = [2.0]
  const %b : f16[1] = [0.5]
  const %gamma : f32[1] = [1.5]
  const %beta : f32[1] = [0.25]
  const %mean : f32[1] = [0.5]
  const %var : f32[1] = [4.0]
  const %lo : f16[] = [0.0]
  const %hi : f16[] = [6.0]
  const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]
  %xh = Cast(%x) {to = 10} : f16[1,1,2,2] @"x.to_f16"
  %c = Conv(%xh, %w, %b) : f16[1,1,2,2] @"conv"
  %n = BatchNormalization(%c, %gamma, %beta, %mean, %var) : f16[1,1,2,2] @"bn"
  %k = Clip(%n, %lo, %hi) : f16[1,1,2,2] @"relu6"
  %u = Resize(%k, _, %scales) {mode = "nearest"} : f16[1,1,4,4] @"up"
  %yh = Relu(%u) : f16[1,1,4,4] @"relu"
  %y = Cast(%yh) {to = 1} : f32[1,1,4,4] @"y.to_f32"
  output %y
})");
}

// An upsample that writes a graph output (and nothing else reads) gets the Cast to fp32 on its
// input, 4x smaller here, and interpolates in fp32; a downsample keeps the Cast after it.
TEST(ChoosePrecision, UpsampleIntoAnOutputCastsItsInput) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %up : f32[4] = [1.0, 1.0, 2.0, 2.0]
  const %down : f32[4] = [1.0, 1.0, 0.5, 0.5]
  %c = Conv(%x, %w) : f32[1,1,2,2] @"conv"
  %y = Resize(%c, _, %up) {mode = "linear"} : f32[1,1,4,4] @"up"
  %z = Resize(%c, _, %down) {mode = "linear"} : f32[1,1,1,1] @"down"
  output %y
  output %z
})",
              R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f16[1,8,1,1] = [1.0, -1.0, 0.5, 0.25, 2.0, -0.5, 1.5, 0.75]
  const %up : f32[4] = [1.0, 1.0, 2.0, 2.0]
  const %down : f32[4] = [1.0, 1.0, 0.5, 0.5]
  %xh = Cast(%x) {to = 10} : f16[1,8,2,2] @"x.to_f16"
  %c = Conv(%xh, %w) : f16[1,1,2,2] @"conv"
  %cf = Cast(%c) {to = 1} : f32[1,1,2,2] @"c.to_f32"
  %y = Resize(%cf, _, %up) {mode = "linear"} : f32[1,1,4,4] @"up"
  %zh = Resize(%c, _, %down) {mode = "linear"} : f16[1,1,1,1] @"down"
  %z = Cast(%zh) {to = 1} : f32[1,1,1,1] @"z.to_f32"
  output %y
  output %z
})");
}

// QuantizeLinear and DequantizeLinear take fp16 on their float side: Q reads x in the dtype it
// comes in (f32 from the graph's input, fp16 from an fp16 op) with its f32 scale, DQ writes
// fp16 with its scale converted; the Relu between them runs fp16.
TEST(ChoosePrecision, QdqFloatSideIsFp16) {
  // The graph input x is read by a QuantizeLinear only: Q reads it in f32 (its x is a free
  // operand), as the model quantizes it, with no Cast kernel before; the DequantizeLinear and
  // what follows go fp16. A QuantizeLinear of an fp16 tensor (the Relu's) reads it in fp16.
  expect_fp16(R"(graph @g opset 17 {
  input %x : f32[4]
  const %s : f32[] = [0.125]
  const %zp : i8[] = [0]
  %q = QuantizeLinear(%x, %s, %zp) : i8[4] @"q"
  %d = DequantizeLinear(%q, %s, %zp) : f32[4] @"dq"
  %y = Relu(%d) : f32[4] @"relu"
  %q2 = QuantizeLinear(%y, %s, %zp) : i8[4] @"q2"
  %d2 = DequantizeLinear(%q2, %s, %zp) : f32[4] @"dq2"
  output %d2
})",
              R"(graph @g opset 17 {
  input %x : f32[4]
  const %s : f32[] = [0.125]
  const %sh : f16[] = [0.125]
  const %zp : i8[] = [0]
  %q = QuantizeLinear(%x, %s, %zp) : i8[4] @"q"
  %d = DequantizeLinear(%q, %sh, %zp) : f16[4] @"dq"
  %y = Relu(%d) : f16[4] @"relu"
  %q2 = QuantizeLinear(%y, %s, %zp) : i8[4] @"q2"
  %d2h = DequantizeLinear(%q2, %sh, %zp) : f16[4] @"dq2"
  %d2 = Cast(%d2h) {to = 1} : f32[4] @"d2.to_f32"
  output %d2
})");
}

// An int8 contraction (fold-qdq's) keeps its S and B fp32; its result takes its readers'
// dtype: fp16 here, stored so by out_dtype (the Relu and the edge Cast after it are fuse's to
// fold back into one fp32 store); an unrelated branch goes fp16 too.
TEST(ChoosePrecision, Int8ContractionResultTakesItsReadersDtype) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  input %z : f32[4]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  %c = tessel.Conv(%x, %w, %b, _, %s) : f32[1,1,1,2] @"conv"
  %y = Relu(%c) : f32[1,1,1,2] @"relu"
  %w2 = Sigmoid(%z) : f32[4] @"sigmoid"
  output %y
  output %w2
})",
              R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  input %z : f32[4]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  %zh = Cast(%z) {to = 10} : f16[4] @"z.to_f16"
  %c = tessel.Conv(%x, %w, %b, _, %s) {out_dtype = "f16"} : f16[1,1,1,2] @"conv"
  %yh = Relu(%c) : f16[1,1,1,2] @"relu"
  %wh = Sigmoid(%zh) : f16[4] @"sigmoid"
  %y = Cast(%yh) {to = 1} : f32[1,1,1,2] @"y.to_f32"
  %w2 = Cast(%wh) {to = 1} : f32[4] @"w2.to_f32"
  output %y
  output %w2
})");
}

// ResNet's downsample as tessel quantize may leave it: the quantizer kept the 1x1 conv float,
// and the int8 conv beside it adds its output. The float conv is an fp16 one (Tensor Cores;
// it used to stay fp32, tied through the Add to the int8 conv's result, and ran as an fp32
// SIMT kernel), the int8 conv stores fp16 for the Add.
TEST(ChoosePrecision, FloatConvBesideAnInt8ConvGoesFp16) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  input %f : f32[1,1,1,8]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  const %wf : f32[2,1,1,8] = [0.5, -0.5, 0.25, 1.0, -1.0, 0.75, 0.125, -0.25, 1.0, 0.5, -0.5, 0.25, -0.125, 0.5, 1.0, -1.0]
  %c = tessel.Conv(%x, %w, %b, _, %s) : f32[1,1,1,2] @"conv"
  %d = tessel.Conv(%f, %wf, %b) : f32[1,1,1,2] @"downsample"
  %a = Add(%c, %d) : f32[1,1,1,2] @"add"
  %y = Relu(%a) : f32[1,1,1,2] @"relu"
  output %y
})",
              R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  input %f : f32[1,1,1,8]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  const %wf : f16[2,1,1,8] = [0.5, -0.5, 0.25, 1.0, -1.0, 0.75, 0.125, -0.25, 1.0, 0.5, -0.5, 0.25, -0.125, 0.5, 1.0, -1.0]
  %fh = Cast(%f) {to = 10} : f16[1,1,1,8] @"f.to_f16"
  %c = tessel.Conv(%x, %w, %b, _, %s) {out_dtype = "f16"} : f16[1,1,1,2] @"conv"
  %d = tessel.Conv(%fh, %wf, %b) : f16[1,1,1,2] @"downsample"
  %a = Add(%c, %d) : f16[1,1,1,2] @"add"
  %yh = Relu(%a) : f16[1,1,1,2] @"relu"
  %y = Cast(%yh) {to = 1} : f32[1,1,1,2] @"y.to_f32"
  output %y
})");
}

// Where nothing reads the int8 contraction's result but the graph's output, it stays as the
// model writes it (no fp16 store and Cast back); a grouped int8 conv's kernels store int8 or
// f32, so its result and what is tied to it stay fp32.
TEST(ChoosePrecision, Int8ResultsThatStayFp32) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %wg : i8[8,1,1,1] = [1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  const %sg : f32[8] = [0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5]
  %c = tessel.Conv(%x, %w, %b, _, %s) : f32[1,1,1,2] @"conv"
  %g = tessel.Conv(%x, %wg, _, _, %sg) {group = 8} : f32[1,1,1,8] @"grouped"
  %r = Relu(%g) : f32[1,1,1,8] @"relu"
  output %c
  output %r
})",
              R"(graph @g opset 17 {
  input %x : i8[1,1,1,8]
  const %w : i8[2,1,1,8] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]
  const %wg : i8[8,1,1,1] = [1, 2, 3, 4, 5, 6, 7, 8]
  const %b : f32[2] = [0.5, 1.0]
  const %s : f32[2] = [0.25, 0.5]
  const %sg : f32[8] = [0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5]
  %c = tessel.Conv(%x, %w, %b, _, %s) : f32[1,1,1,2] @"conv"
  %g = tessel.Conv(%x, %wg, _, _, %sg) {group = 8} : f32[1,1,1,8] @"grouped"
  %r = Relu(%g) : f32[1,1,1,8] @"relu"
  output %c
  output %r
})");
}

// A Cast into an fp16 region casts to fp16; an output that other nodes also read is cast once
// at the end while the readers take the fp16 value.
TEST(ChoosePrecision, InteriorCastAndOutputWithReaders) {
  expect_fp16(R"(graph @g opset 17 {
  input %i : i64[4]
  input %x : f32[4]
  %c = Cast(%i) {to = 1} : f32[4] @"cast"
  %y = Add(%c, %x) : f32[4] @"add"
  %s = Sigmoid(%y) : f32[4] @"sigmoid"
  output %y
  output %s
})",
              R"(graph @g opset 17 {
  input %i : i64[4]
  input %x : f32[4]
  %xh = Cast(%x) {to = 10} : f16[4] @"x.to_f16"
  %c = Cast(%i) {to = 10} : f16[4] @"cast"
  %yh = Add(%c, %xh) : f16[4] @"add"
  %sh = Sigmoid(%yh) : f16[4] @"sigmoid"
  %y = Cast(%yh) {to = 1} : f32[4] @"y.to_f32"
  %s = Cast(%sh) {to = 1} : f32[4] @"s.to_f32"
  output %y
  output %s
})");
}

// An op without an fp16 kernel (Sin, Cos) is an fp32 island: Casts at its edges, the convs
// around it stay fp16 (pinning its neighbours once made them fp32 SIMT kernels). Between two
// islands nothing converts.
TEST(ChoosePrecision, Fp32OnlyOpsAreIslands) {
  expect_fp16(R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  %c = tessel.Conv(%x, %w) : f32[1,2,2,2] @"conv"
  %s = Sin(%c) : f32[1,2,2,2] @"sin"
  %t = Cos(%s) : f32[1,2,2,2] @"cos"
  %d = tessel.Conv(%t, %w) : f32[1,2,2,2] @"conv2"
  output %d
})",
              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  const %w : f16[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  %xh = Cast(%x) {to = 10} : f16[1,2,2,2] @"x.to_f16"
  %c = tessel.Conv(%xh, %w) : f16[1,2,2,2] @"conv"
  %c32 = Cast(%c) {to = 1} : f32[1,2,2,2] @"c.to_f32"
  %s = Sin(%c32) : f32[1,2,2,2] @"sin"
  %t = Cos(%s) : f32[1,2,2,2] @"cos"
  %th = Cast(%t) {to = 10} : f16[1,2,2,2] @"t.from_f32"
  %dh = tessel.Conv(%th, %w) : f16[1,2,2,2] @"conv2"
  %d = Cast(%dh) {to = 1} : f32[1,2,2,2] @"d.to_f32"
  output %d
})");
}

TEST(ChoosePrecision, Fp32IsTheModelAsGiven) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[4]
  %y = Relu(%x) : f32[4] @"relu"
  output %y
})");
  EXPECT_EQ(ir::structural_diff(passes::choose_precision(g, Precision::kFp32), g), "");
}

}  // namespace
}  // namespace tessel
