// lower-3d (passes/lower_3d.cc): 3-D convs and pools become 2-D ones over frames with the same
// numbers, checked on the CPU reference; the structure each lowering leaves.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ir/ir_writer.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

std::map<std::string, int> ops_of(const ir::Graph& g) {
  std::map<std::string, int> ops;
  for (const ir::Node& n : g.nodes) ++ops[n.op];
  return ops;
}

// No op of the lowered graph is over 5-D data but the Pad, Slices, Concat, Transposes,
// Reshapes and per-element ops around the 2-D ones.
void expect_2d_work(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (n.op == "Conv" || n.op == "MaxPool" || n.op == "AveragePool" ||
        n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
      EXPECT_EQ(g.type(n.inputs[0]).shape.size(), 4u) << n.label();
    }
  }
}

ir::Graph lowered(const ir::Graph& in) {
  ir::Graph g = passes::run_passes(in, {"lower-3d"});
  expect_2d_work(g);
  testing::expect_same_numerics(in, g, 1e-5, 1e-5);
  return g;
}

// An R3D-style 3x3x3 conv with bias: depth pads 1, depth stride 2, H/W stride 1; and with
// dilation 2 in depth and asymmetric pads. One 2-D conv over the 3 stacked taps each.
TEST(Lower3d, ConvStacksTheDepthTapsAsChannels) {
  testing::IrWriter w(3);
  w.input("x", "f32[2,3,7,6,5]");
  w.constant("w", {4, 3, 3, 3, 3}, -0.5, 0.5);
  w.constant("b", {4}, -0.5, 0.5);
  w.node("%y = Conv(%x, %w, %b) {pads = [1, 1, 1, 1, 1, 1], strides = [2, 1, 1]} : f32[2,4,4,6,5] @\"conv\"");
  w.node("%z = Conv(%x, %w) {pads = [2, 0, 1, 1, 0, 0], dilations = [2, 1, 1], strides = [1, 2, 1]} : f32[2,4,4,2,3] @\"dilated\"");
  const ir::Graph g = lowered(w.graph(std::vector<std::string>{"y", "z"}));
  const std::map<std::string, int> ops = ops_of(g);
  EXPECT_EQ(ops.at("Conv"), 2);
  EXPECT_EQ(ops.at("Concat"), 2);
  EXPECT_EQ(ops.at("Slice"), 6);
  EXPECT_EQ(ops.at("Pad"), 2);
  for (const ir::Node& n : g.nodes) {
    if (n.op != "Conv") continue;
    EXPECT_EQ(g.type(n.inputs[1]).shape, (Shape{4, 9, 3, 3})) << n.label();
  }
}

// (2+1)D: a 1x3x3 spatial conv reads the frames as they are (no Pad, Slice or Concat), a 3x1x1
// temporal one stacks its taps; a depthwise 3x3x3 (grouped) runs one 2-D conv per tap, summed.
TEST(Lower3d, SpatialTemporalAndGroupedConvs) {
  testing::IrWriter w(5);
  w.input("x", "f32[1,4,5,6,6]");
  w.constant("ws", {8, 4, 1, 3, 3}, -0.5, 0.5);
  w.constant("wt", {8, 8, 3, 1, 1}, -0.5, 0.5);
  w.constant("wd", {8, 1, 3, 3, 3}, -0.5, 0.5);
  w.node("%s = Conv(%x, %ws) {pads = [0, 1, 1, 0, 1, 1]} : f32[1,8,5,6,6] @\"spatial\"");
  w.node("%t = Conv(%s, %wt) {pads = [1, 0, 0, 1, 0, 0]} : f32[1,8,5,6,6] @\"temporal\"");
  w.node("%y = Conv(%t, %wd) {group = 8, pads = [1, 1, 1, 1, 1, 1]} : f32[1,8,5,6,6] @\"depthwise\"");
  const ir::Graph g = lowered(w.graph("y"));
  const std::map<std::string, int> ops = ops_of(g);
  EXPECT_EQ(ops.at("Conv"), 1 + 1 + 3);
  EXPECT_EQ(ops.at("Add"), 2);
  EXPECT_EQ(ops.at("Concat"), 1);
  for (const ir::Node& n : g.nodes) {
    if (n.name != "spatial") continue;
    EXPECT_EQ(g.type(n.inputs[1]).shape, (Shape{8, 4, 3, 3}));
  }
}

// Pools are separable over a box: max, average with and without the pads counted, ceil_mode;
// the global pools over [N, C, D*H, W].
TEST(Lower3d, PoolsAndGlobalPools) {
  testing::IrWriter w(7);
  w.input("x", "f32[2,3,5,7,6]");
  w.node("%m = MaxPool(%x) {kernel_shape = [3, 3, 3], pads = [1, 1, 1, 1, 1, 1], strides = [2, 2, 2]} : f32[2,3,3,4,3] @\"max\"");
  w.node("%a = AveragePool(%x) {kernel_shape = [2, 3, 3], pads = [0, 1, 1, 1, 1, 1], strides = [1, 2, 2]} : f32[2,3,5,4,3] @\"avg\"");
  w.node("%c = AveragePool(%x) {count_include_pad = 1, kernel_shape = [3, 2, 2], pads = [1, 0, 0, 1, 0, 0], strides = [2, 2, 2], ceil_mode = 1} : f32[2,3,3,4,3] @\"avg_pads\"");
  w.node("%g = GlobalAveragePool(%x) : f32[2,3,1,1,1] @\"gap\"");
  w.node("%h = GlobalMaxPool(%x) : f32[2,3,1,1,1] @\"gmp\"");
  lowered(w.graph(std::vector<std::string>{"m", "a", "c", "g", "h"}));
}

// Not lowered: 4-D ops, a 3-D conv with run-time weights, a pool with auto_pad.
TEST(Lower3d, LeavesWhatItDoesNotLower) {
  const std::string g = R"(graph @g opset 17 {
  input %x : f32[1,2,3,4,4]
  input %w : f32[2,2,1,1,1]
  %y = Conv(%x, %w) : f32[1,2,3,4,4] @"conv"
  %z = MaxPool(%y) {auto_pad = "SAME_UPPER", kernel_shape = [1, 2, 2]} : f32[1,2,3,4,4] @"pool"
  output %z
})";
  testing::expect_pass_result("lower-3d", g, g);
}

}  // namespace
}  // namespace tessel
