// lower-conv-transpose (passes/lower_conv_transpose.cc): ConvTransposes of unequal strides as a
// stride-1 Conv over the zero-inserted input, with the same numbers on the CPU reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/ir_writer.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

ir::Graph lowered(const ir::Graph& in) {
  ir::Graph g = passes::run_passes(in, {"lift-1d", "lower-conv-transpose"});
  for (const ir::Node& n : g.nodes) EXPECT_NE(n.op, "ConvTranspose") << n.label();
  testing::expect_same_numerics(in, g, 1e-5, 1e-5);
  return g;
}

// Strides (2, 3) with pads, output_padding, dilation and bias; groups; output_shape; pads past
// the kernel's reach, which crop the zero-inserted input.
TEST(LowerConvTranspose, UnequalStridesBecomeAConvOverInsertedZeros) {
  testing::IrWriter w(9);
  w.input("x", "f32[2,4,5,6]");
  w.constant("w", {4, 3, 3, 3}, -0.5, 0.5);
  w.constant("wg", {4, 2, 3, 2}, -0.5, 0.5);
  w.constant("b", {3}, -0.5, 0.5);
  w.node("%a = ConvTranspose(%x, %w, %b) {strides = [2, 3], pads = [1, 0, 0, 1], output_padding = [1, 2]} : f32[2,3,10,19] @\"a\"");
  w.node("%g = ConvTranspose(%x, %wg) {group = 2, strides = [1, 2], dilations = [2, 1]} : f32[2,4,9,12] @\"grouped\"");
  w.node("%s = ConvTranspose(%x, %w) {strides = [3, 2], output_shape = [15, 12]} : f32[2,3,15,12] @\"shaped\"");
  w.node("%c = ConvTranspose(%x, %w) {strides = [2, 1], pads = [3, 3, 3, 3]} : f32[2,3,5,2] @\"cropped\"");
  const ir::Graph g = lowered(w.graph(std::vector<std::string>{"a", "g", "s", "c"}));
  int convs = 0;
  for (const ir::Node& n : g.nodes) convs += n.op == "Conv";
  EXPECT_EQ(convs, 4);
}

// A 1-D transposed conv (an audio decoder's upsampling) is lifted to [N, C, 1, L] with strides
// [1, s], then lowered the same way.
TEST(LowerConvTranspose, OneDimensionalTransposedConvs) {
  testing::IrWriter w(11);
  w.input("x", "f32[2,8,20]");
  w.constant("w", {8, 4, 8}, -0.3, 0.3);
  w.constant("b", {4}, -0.5, 0.5);
  w.node("%y = ConvTranspose(%x, %w, %b) {strides = [4], pads = [2, 2]} : f32[2,4,80] @\"up\"");
  w.node("%z = Relu(%y) : f32[2,4,80] @\"relu\"");
  lowered(w.graph("z"));
}

// A 3-D UNet's upsampling (kernel 2, stride 2) and a 3-D one with pads and unequal strides:
// 3-D convs over the zero-inserted input, which lower-3d then makes 2-D.
TEST(LowerConvTranspose, ThreeDimensionalTransposedConvs) {
  testing::IrWriter w(13);
  w.input("x", "f32[1,4,3,4,5]");
  w.constant("w2", {4, 3, 2, 2, 2}, -0.5, 0.5);
  w.constant("w3", {4, 2, 3, 3, 3}, -0.5, 0.5);
  w.constant("b", {3}, -0.5, 0.5);
  w.node("%u = ConvTranspose(%x, %w2, %b) {strides = [2, 2, 2]} : f32[1,3,6,8,10] @\"up\"");
  w.node("%v = ConvTranspose(%x, %w3) {strides = [1, 2, 3], pads = [1, 1, 0, 1, 0, 2]} : f32[1,2,3,6,11] @\"odd\"");
  const ir::Graph in = w.graph(std::vector<std::string>{"u", "v"});
  lowered(in);
  ir::Graph g = passes::run_passes(in, {"lower-conv-transpose", "lower-3d"});
  for (const ir::Node& n : g.nodes) {
    if (n.op != "Conv") continue;
    EXPECT_EQ(g.type(n.inputs[0]).shape.size(), 4u) << n.label();
  }
  testing::expect_same_numerics(in, g, 1e-5, 1e-5);
}

// Equal strides stay for convert-layout's phase decomposition.
TEST(LowerConvTranspose, EqualStridesAreLeftToThePhases) {
  const std::string g = R"(graph @g opset 17 {
  input %x : f32[1,2,3,3]
  const %w : f32[2,2,2,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  %y = ConvTranspose(%x, %w) {strides = [2, 2]} : f32[1,2,6,6] @"up"
  output %y
})";
  testing::expect_pass_result("lower-conv-transpose", g, g);
}

}  // namespace
}  // namespace tessel
