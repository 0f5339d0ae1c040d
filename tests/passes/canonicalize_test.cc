#include <gtest/gtest.h>

#include "ir/parser.h"
#include "passes/pass_test_util.h"

namespace tessel {
namespace {

TEST(Canonicalize, BypassesIdentityDropoutAndNoOpCast) {
  testing::expect_pass_result("canonicalize", R"(graph @g opset 17 {
  input %x : f32[2,3]
  %a = Identity(%x) : f32[2,3] @"id"
  %b = Relu(%a) : f32[2,3] @"relu"
  %c = Dropout(%b) : f32[2,3] @"drop"
  %d = Cast(%c) {to = 1} : f32[2,3] @"cast"
  %e = Sigmoid(%d) : f32[2,3] @"sig"
  output %e
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3]
  %b = Relu(%x) : f32[2,3] @"relu"
  %e = Sigmoid(%b) : f32[2,3] @"sig"
  output %e
})");
}

// torch.cat of a one-element list: a Concat of one input copies it.
TEST(Canonicalize, BypassesSingleInputConcat) {
  testing::expect_pass_result("canonicalize", R"(graph @g opset 17 {
  input %x : f32[1,4,2,2]
  %c = Concat(%x) {axis = 1} : f32[1,4,2,2] @"cat"
  %r = Relu(%c) : f32[1,4,2,2] @"relu"
  output %r
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,4,2,2]
  %r = Relu(%x) : f32[1,4,2,2] @"relu"
  output %r
})");
}

// A graph output produced by Identity keeps its name: the producer's value takes it over.
TEST(Canonicalize, KeepsGraphOutputNames) {
  ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[4]
  %r = Relu(%x) : f32[4] @"relu"
  %out = Identity(%r) : f32[4] @"id"
  output %out
})");
  ir::Graph h = passes::run_passes(g, {"canonicalize"});
  ASSERT_EQ(h.nodes.size(), 1u);
  EXPECT_EQ(h.value(h.outputs[0]).name, "out");
}

// Identity from a graph input straight to a graph output cannot be bypassed.
TEST(Canonicalize, KeepsIdentityBetweenInputAndOutput) {
  const char* g = R"(graph @g opset 17 {
  input %x : f32[4]
  %y = Identity(%x) : f32[4] @"id"
  output %y
})";
  testing::expect_pass_result("canonicalize", g, g);
}

TEST(Canonicalize, ClipAttributesBecomeInputs) {
  testing::expect_pass_result("canonicalize", R"(graph @g opset 17 {
  input %x : f32[5]
  %y = Clip(%x) {max = 6.0, min = 0.0} : f32[5] @"relu6"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[5]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %y = Clip(%x, %lo, %hi) : f32[5] @"relu6"
  output %y
})");
}

TEST(Canonicalize, KeepsDropoutWhoseMaskIsUsed) {
  const char* g = R"(graph @g opset 17 {
  input %x : f32[4]
  %y, %m = Dropout(%x) : f32[4], bool[4] @"drop"
  output %y
  output %m
})";
  testing::expect_pass_result("canonicalize", g, g);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// x[:, 1] (a scalar index): Slice of one position along the axis, then a Reshape dropping it.
TEST(Canonicalize, GatherOfOneIndexIsASliceAndReshape) {
  testing::expect_pass_result("canonicalize", R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  const %i : i64[] = [-2]
  %y = Gather(%x, %i) {axis = 1} : f32[2,4] @"pick"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  const %s : i64[1] = [1]
  const %e : i64[1] = [2]
  const %a : i64[1] = [1]
  const %shape : i64[2] = [2, 4]
  %t = Slice(%x, %s, %e, %a) : f32[2,1,4] @"pick"
  %y = Reshape(%t, %shape) : f32[2,4] @"pick.squeeze"
  output %y
})");
}

// A run of consecutive indices is a Slice that keeps the axis; any other index list stays.
TEST(Canonicalize, GatherOfARunIsASliceOthersStay) {
  testing::expect_pass_result("canonicalize", R"(graph @g opset 17 {
  input %x : f32[5,2]
  const %i : i64[3] = [1, 2, 3]
  %y = Gather(%x, %i) : f32[3,2] @"run"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[5,2]
  const %s : i64[1] = [1]
  const %e : i64[1] = [4]
  const %a : i64[1] = [0]
  %y = Slice(%x, %s, %e, %a) : f32[3,2] @"run"
  output %y
})");
  const char* shuffled = R"(graph @g opset 17 {
  input %x : f32[5,2]
  const %i : i64[3] = [3, 1, 2]
  %y = Gather(%x, %i) : f32[3,2] @"perm"
  output %y
})";
  testing::expect_pass_result("canonicalize", shuffled, shuffled);
}

}  // namespace
}  // namespace tessel
