// The phase decomposition of ConvTranspose (ops/conv_transpose_phases.h), per dim by hand from
// ONNX's oh = ih*s - p + kh*d, and the reasons a ConvTranspose keeps its ONNX form. (Numbers:
// tests/passes/convert_layout_conv_transpose_test.cc runs the rewrite against the ONNX op.)
#include "ops/conv_transpose_phases.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ir/parser.h"

namespace tessel::ops {
namespace {

using Ints = std::vector<int64_t>;

// The decomposition of a ConvTranspose over x [1, 2, h, h] with weights [2, 1, k, k].
PhaseConv plan(int64_t h, int64_t k, Ints strides, Ints pads, Ints output_padding = {0, 0},
               Ints dilations = {1, 1}) {
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF32, {1, 2, h, h}});
  const ir::ValueId w = g.add_value("w", {DType::kF32, {2, 1, k, k}});
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("ConvTranspose", "up", {x, w}, {y},
             {{"strides", strides},
              {"pads", pads},
              {"output_padding", output_padding},
              {"dilations", dilations}});
  return plan_phase_conv(plan_conv_transpose(g.nodes[0], g.type(x).shape, g.type(w).shape));
}

// k = s = 2, p = 0: each phase r takes tap r alone, at offset 0: a 1x1 conv.
TEST(PhaseConv, KernelEqualToStrideIsOneByOne) {
  const PhaseAxis a = plan(3, 2, {2, 2}, {0, 0, 0, 0}).h;
  EXPECT_EQ(a.kernel, 1);
  EXPECT_EQ(a.tap, (Ints{0, 1}));
  EXPECT_EQ(a.pad_begin + a.pad_end, 0);
  EXPECT_EQ(a.conv_out, 3);
  EXPECT_FALSE(a.crops());
}

// k = 3, s = 2, p = 1, output_padding 1: oh = 2q takes tap 1 of x[q]; oh = 2q + 1 takes tap 2
// of x[q] and tap 0 of x[q + 1]. A 2-tap window [x[q], x[q + 1]], end pad 1; OH = 2H exactly.
TEST(PhaseConv, DecoderK3S2P1Op1) {
  const PhaseAxis a = plan(4, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}).h;
  EXPECT_EQ(a.kernel, 2);
  EXPECT_EQ(a.tap, (Ints{1, -1, 2, 0}));
  EXPECT_EQ(a.pad_begin, 0);
  EXPECT_EQ(a.pad_end, 1);
  EXPECT_EQ(a.out, 8);
  EXPECT_FALSE(a.crops());
}

// k = 4, s = 2, p = 1: oh = 2q: taps 3, 1 of x[q - 1], x[q]; oh = 2q + 1: taps 2, 0 of x[q],
// x[q + 1]. A 3-tap window with pads 1 and 1.
TEST(PhaseConv, DcganK4S2P1) {
  const PhaseAxis a = plan(4, 4, {2, 2}, {1, 1, 1, 1}).h;
  EXPECT_EQ(a.kernel, 3);
  EXPECT_EQ(a.tap, (Ints{3, 1, -1, -1, 2, 0}));
  EXPECT_EQ(a.pad_begin, 1);
  EXPECT_EQ(a.pad_end, 1);
  EXPECT_FALSE(a.crops());
}

// Without output_padding the output has 2H - 1 rows: the phases make 2H, the last is cropped.
TEST(PhaseConv, OddOutputCropsTheEnd) {
  const PhaseAxis a = plan(4, 3, {2, 2}, {1, 1, 1, 1}).h;
  EXPECT_EQ(a.out, 7);
  EXPECT_EQ(a.conv_out, 4);
  EXPECT_EQ(a.crop, 0);
  EXPECT_TRUE(a.crops());
}

// A pad beyond the kernel's reach ((k - 1)*d = 0 here) crops the beginning: oh = 0 is the
// second row of the phases. The conv itself never cuts its input (pad_begin >= 0).
TEST(PhaseConv, LargePadCropsTheBeginning) {
  const PhaseAxis a = plan(4, 1, {2, 2}, {1, 1, 1, 1}).h;  // OH = 2*3 + 1 - 2 = 5
  EXPECT_EQ(a.out, 5);
  EXPECT_EQ(a.crop, 1);
  EXPECT_EQ(a.pad_begin, 0);
  EXPECT_GE(a.conv_out * a.stride, a.crop + a.out);
  EXPECT_TRUE(a.crops());
}

// Stride 1: the flipped kernel, its dilation kept, full pads (k - 1)*d - p.
TEST(PhaseConv, StrideOneIsTheFlippedConv) {
  const PhaseAxis a = plan(5, 3, {1, 1}, {1, 1, 1, 1}, {0, 0}, {2, 2}).h;
  EXPECT_EQ(a.kernel, 3);
  EXPECT_EQ(a.dilation, 2);
  EXPECT_EQ(a.tap, (Ints{2, 1, 0}));
  EXPECT_EQ(a.pad_begin, 3);
  EXPECT_EQ(a.pad_end, 3);
  EXPECT_FALSE(a.crops());
}

// Dilation 2 with stride 2: every tap lands in phase p mod 2, the other phase has none.
TEST(PhaseConv, DilationEqualToStrideLeavesAPhaseEmpty) {
  const PhaseAxis a = plan(3, 2, {2, 2}, {0, 0, 0, 0}, {0, 0}, {2, 2}).h;
  EXPECT_EQ(a.kernel, 2);
  EXPECT_EQ(a.tap, (Ints{1, 0, -1, -1}));
}

// Phase channels: DCR for group 1, CRD (each group's channels together) otherwise.
TEST(PhaseConv, ChannelOrder) {
  PhaseConv p = plan(3, 2, {2, 2}, {0, 0, 0, 0});
  p.out_channels = 3;
  EXPECT_EQ(p.channel(1, 1, 0), (1 * 2 + 0) * 3 + 1);
  p.dcr = false;
  EXPECT_EQ(p.channel(1, 1, 0), 1 * 4 + 1 * 2 + 0);
}

// The bias once per phase, in the DCR order of the phase channels.
TEST(PhaseConv, BiasRepeatedPerPhase) {
  PhaseConv p = plan(3, 2, {2, 2}, {0, 0, 0, 0});
  p.out_channels = 2;
  const Tensor b = phase_conv_bias(Tensor::from_doubles(DType::kF32, {2}, {0.5, -1.0}), p);
  std::vector<double> v;
  for (int64_t i = 0; i < b.numel(); ++i) v.push_back(b.get_f64(i));
  EXPECT_EQ(v, (std::vector<double>{0.5, -1.0, 0.5, -1.0, 0.5, -1.0, 0.5, -1.0}));
}

// ---- why a ConvTranspose keeps its ONNX form ------------------------------------------------

std::optional<std::string> refusal(const std::string& text) {
  ir::Graph g = ir::parse_graph(text);
  ir::infer_types(g, ir::OpRegistry::global());
  return conv_transpose_refusal(g, g.nodes.back());
}

TEST(ConvTransposeRefusal, RewrittenCasesHaveNone) {
  EXPECT_EQ(refusal(R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  input %b : f32[1]
  const %w : f32[2,1,3,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
  %y = ConvTranspose(%x, %w, %b) : f32[1,1,5,5] @"up"
  output %y
})"),
            std::nullopt);  // a run-time bias is fine at stride 1: it is not repeated
}

TEST(ConvTransposeRefusal, UnequalStrides) {
  EXPECT_EQ(refusal(R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  const %w : f32[2,1,1,1] = [1.0, 2.0]
  %y = ConvTranspose(%x, %w) {strides = [2, 1]} : f32[1,1,5,3] @"up"
  output %y
})"),
            "strides [2, 1] differ, and the depth_to_space store that "
            "interleaves the phases has one block for both dims");
}

TEST(ConvTransposeRefusal, RuntimeWeight) {
  EXPECT_EQ(refusal(R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  input %w : f32[2,1,2,2]
  %y = ConvTranspose(%x, %w) {strides = [2, 2]} : f32[1,1,6,6] @"up"
  output %y
})"),
            "the weight is not a constant (its taps are rearranged into a stride-1 conv's at "
            "compile time)");
}

TEST(ConvTransposeRefusal, RuntimeBiasWithStride) {
  EXPECT_EQ(refusal(R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  input %b : f32[1]
  const %w : f32[2,1,2,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %y = ConvTranspose(%x, %w, %b) {strides = [2, 2]} : f32[1,1,6,6] @"up"
  output %y
})"),
            "the bias is not a constant (it is repeated for each of the 4 "
            "output phases at compile time)");
}

TEST(ConvTransposeRefusal, OneDimensional) {
  EXPECT_EQ(refusal(R"(graph @g opset 17 {
  input %x : f32[1,2,3]
  const %w : f32[2,1,2] = [1.0, 2.0, 3.0, 4.0]
  %y = ConvTranspose(%x, %w) {strides = [2]} : f32[1,1,6] @"up"
  output %y
})"),
            "only 2-D transposed convolutions (a 4-D input) become a tessel.Conv; X is "
            "f32[1,2,3]");
}

// A malformed node is the user's error, as in inference.
TEST(ConvTransposeRefusal, MalformedAttributesAreUserErrors) {
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF32, {1, 2, 3, 3}});
  const ir::ValueId w =
      g.add_constant("w", Tensor::from_doubles(DType::kF32, {2, 1, 1, 1}, {1.0, 2.0}));
  const ir::ValueId y = g.add_value("y", {DType::kF32, {1, 1, 3, 3}});
  g.add_node("ConvTranspose", "up", {x, w}, {y}, {{"strides", Ints{2, 2, 2}}});
  try {
    conv_transpose_refusal(g, g.nodes[0]);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'strides' has 3 values, expected 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::ops
