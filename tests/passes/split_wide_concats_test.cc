// split-wide-concats: a Concat of more inputs than a GPU op kernel takes becomes a tree.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"

namespace tessel {
namespace {

// A Concat of n inputs [1,1,2,2] along the channels, as textual IR.
std::string wide_concat(int n) {
  std::string s = "graph @g opset 17 {\n";
  for (int i = 0; i < n; ++i) s += "  input %x" + std::to_string(i) + " : f32[1,1,2,2]\n";
  s += "  %y = Concat(";
  for (int i = 0; i < n; ++i) s += (i ? ", %x" : "%x") + std::to_string(i);
  s += ") {axis = 1} : f32[1," + std::to_string(n) + ",2,2] @\"cat\"\n  output %y\n}\n";
  return s;
}

// 10 inputs: runs of 8 and 2.
TEST(SplitWideConcats, TenInputsBecomeTwoRuns) {
  testing::expect_pass_result("split-wide-concats", wide_concat(10), R"(graph @g opset 17 {
  input %x0 : f32[1,1,2,2]
  input %x1 : f32[1,1,2,2]
  input %x2 : f32[1,1,2,2]
  input %x3 : f32[1,1,2,2]
  input %x4 : f32[1,1,2,2]
  input %x5 : f32[1,1,2,2]
  input %x6 : f32[1,1,2,2]
  input %x7 : f32[1,1,2,2]
  input %x8 : f32[1,1,2,2]
  input %x9 : f32[1,1,2,2]
  %a = Concat(%x0, %x1, %x2, %x3, %x4, %x5, %x6, %x7) {axis = 1} : f32[1,8,2,2] @"cat.part"
  %b = Concat(%x8, %x9) {axis = 1} : f32[1,2,2,2] @"cat.part_1"
  %y = Concat(%a, %b) {axis = 1} : f32[1,10,2,2] @"cat"
  output %y
})");
}

// 70 inputs (DenseNet-201's widest is 49): two rounds, every Concat within the limit, the same
// numbers; 8 inputs are left alone.
TEST(SplitWideConcats, SeventyInputsTakeTwoRoundsAndEightStay) {
  const ir::Graph before = ir::parse_graph(wide_concat(70));
  const ir::Graph after = passes::split_wide_concats(before);
  for (const ir::Node& n : after.nodes)
    EXPECT_LE(n.inputs.size(), static_cast<size_t>(passes::kMaxConcatInputs)) << n.label();
  // 9 runs of <= 8 inputs; then one Concat over the first 8 runs, the ninth passed as it is;
  // the root over those two.
  EXPECT_EQ(after.nodes.size(), 9u + 1u + 1u);
  testing::expect_same_numerics(before, after);
  testing::expect_pass_result("split-wide-concats", wide_concat(8), wide_concat(8));
}

}  // namespace
}  // namespace tessel
