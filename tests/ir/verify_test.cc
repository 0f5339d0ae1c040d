#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/infer.h"
#include "ir/parser.h"

namespace tessel::ir {
namespace {

// A registry with one op, "Same": one input, one output of the input's type.
OpRegistry test_registry() {
  OpRegistry r;
  OpSchema s;
  s.name = "Same";
  s.infer = [](InferContext& ctx) { ctx.set_output(0, ctx.dtype(0), ctx.shape(0)); };
  s.compute = [](KernelContext& ctx) { ctx.output(0) = ctx.input(0).clone(); };
  r.add(s);
  return r;
}

void expect_verify_error(const Graph& g, const std::string& needle) {
  try {
    verify(g, test_registry());
    FAIL() << "verify accepted a broken graph";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Graph chain() {
  return parse_graph(R"(graph @g opset 17 {
  input %x : f32[2]
  %a = Same(%x) : f32[2] @"n0"
  %b = Same(%a) : f32[2] @"n1"
  output %b
})");
}

TEST(Verify, AcceptsWellFormedGraph) { EXPECT_NO_THROW(verify(chain(), test_registry())); }

TEST(Verify, RejectsCycle) {
  Graph g = chain();
  g.nodes[0].inputs[0] = g.nodes[1].outputs[0];  // n0 reads n1's output: a cycle
  expect_verify_error(g, "Same 'n0': input 'b' is produced by a later node (Same 'n1')");
}

TEST(Verify, RejectsDanglingValue) {
  Graph g = chain();
  ValueId ghost = g.add_value("ghost", {DType::kF32, {2}});
  g.nodes[1].inputs[0] = ghost;
  expect_verify_error(g, "input 'ghost' is dangling");
}

TEST(Verify, RejectsUnknownOpListingSupported) {
  Graph g = chain();
  g.nodes[1].op = "Frobnicate";
  expect_verify_error(g, "node 'n1': unsupported op 'Frobnicate' (supported: Same)");
}

TEST(Verify, RejectsDoubleDefinitionAndDuplicateNames) {
  Graph g = chain();
  g.nodes[1].outputs[0] = g.nodes[0].outputs[0];
  expect_verify_error(g, "output 'a' is already defined");
  Graph h = chain();
  h.nodes[1].name = "n0";
  expect_verify_error(h, "node name 'n0' is used by more than one node");
}

TEST(Verify, RejectsUnproducedOutputAndBadIds) {
  Graph g = chain();
  g.outputs.push_back(g.add_value("orphan", {DType::kF32, {1}}));
  expect_verify_error(g, "graph output 'orphan' is not produced");
  Graph h = chain();
  h.nodes[0].inputs[0] = 42;
  expect_verify_error(h, "refers to value id 42");
}

TEST(Infer, PropagatesTypesThroughRegistry) {
  Graph g = chain();
  for (Value& v : g.values)
    if (v.name != "x") v.type = {};
  infer_types(g, test_registry());
  EXPECT_EQ(g.type(g.outputs[0]).str(), "f32[2]");
}

}  // namespace
}  // namespace tessel::ir
