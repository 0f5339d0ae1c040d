// fold-transposes: chained Transposes compose, identities vanish.
#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace tessel {
namespace {

// NHWC -> NCHW -> NHWC (the layout's Transpose back, then a model's permute): nothing left.
TEST(FoldTransposes, InversePairVanishes) {
  testing::expect_pass_result("fold-transposes", R"(graph @g opset 17 {
  input %x : f32[1,4,5,3]
  %a = Transpose(%x) {perm = [0, 3, 1, 2]} : f32[1,3,4,5] @"to_nchw"
  %b = Transpose(%a) {perm = [0, 2, 3, 1]} : f32[1,4,5,3] @"permute"
  %y = Relu(%b) : f32[1,4,5,3] @"relu"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,4,5,3]
  %y = Relu(%x) : f32[1,4,5,3] @"relu"
  output %y
})");
}

// Two rotations compose into one Transpose: p[i] = p1[p2[i]] = [0, 3, 1, 2][[0, 3, 1, 2][i]]
// = [0, 2, 3, 1].
TEST(FoldTransposes, ChainComposes) {
  testing::expect_pass_result("fold-transposes", R"(graph @g opset 17 {
  input %x : f32[2,3,4,5]
  %a = Transpose(%x) {perm = [0, 3, 1, 2]} : f32[2,5,3,4] @"t1"
  %y = Transpose(%a) {perm = [0, 3, 1, 2]} : f32[2,4,5,3] @"t2"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3,4,5]
  %y = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[2,4,5,3] @"t2"
  output %y
})");
}

// The default perm (reverse) twice is the identity; a 3-D case.
TEST(FoldTransposes, DefaultPermTwiceVanishes) {
  testing::expect_pass_result("fold-transposes", R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  %a = Transpose(%x) : f32[4,3,2] @"t1"
  %b = Transpose(%a) : f32[2,3,4] @"t2"
  %y = Sigmoid(%b) : f32[2,3,4] @"s"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,3,4]
  %y = Sigmoid(%x) : f32[2,3,4] @"s"
  output %y
})");
}

// The first Transpose is also read elsewhere: it stays, the second reads x directly. A
// layout Transpose (with its layout_reason) cancels against the model's permute like any other.
TEST(FoldTransposes, SharedFirstStaysAndLayoutTransposesCancel) {
  testing::expect_pass_result("fold-transposes", R"(graph @g opset 17 {
  input %x : f32[1,4,5,3]
  %a = Transpose(%x) {perm = [0, 3, 1, 2]} : f32[1,3,4,5] @"to_nchw"
  %b = Transpose(%a) {perm = [0, 2, 3, 1]} : f32[1,4,5,3] @"permute"
  %f = Sigmoid(%b) : f32[1,4,5,3] @"s"
  %c = Relu(%a) : f32[1,3,4,5] @"relu"
  %d = Transpose(%c) {layout_reason = "test", perm = [0, 2, 3, 1]} : f32[1,4,5,3] @"layout"
  %e = Transpose(%d) {perm = [0, 3, 1, 2]} : f32[1,3,4,5] @"model"
  %h = Tanh(%e) : f32[1,3,4,5] @"t"
  output %f
  output %h
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,4,5,3]
  %a = Transpose(%x) {perm = [0, 3, 1, 2]} : f32[1,3,4,5] @"to_nchw"
  %f = Sigmoid(%x) : f32[1,4,5,3] @"s"
  %c = Relu(%a) : f32[1,3,4,5] @"relu"
  %h = Tanh(%c) : f32[1,3,4,5] @"t"
  output %f
  output %h
})");
}

// An identity Transpose between a graph input and a graph output cannot vanish (the output
// keeps its own buffer and name): it stays, as a copy.
TEST(FoldTransposes, InputToOutputIdentityStays) {
  const char* g = R"(graph @g opset 17 {
  input %x : f32[2,3]
  %y = Transpose(%x) {perm = [0, 1]} : f32[2,3] @"t"
  output %y
})";
  testing::expect_pass_result("fold-transposes", g, g);
}

// A per-element op between two Transposes moves before the first, and the two compose: here to
// the identity, so Relu and Clip (its bounds one-element constants) read x itself. Where the
// value between them has another reader, or no Transpose follows, nothing moves.
TEST(FoldTransposes, PerElementOpsMoveOutFromBetweenTransposes) {
  testing::expect_pass_result("fold-transposes", R"(graph @g opset 17 {
  input %x : f32[1,2,3,4,5]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %a = Transpose(%x) {perm = [0, 4, 1, 2, 3]} : f32[1,5,2,3,4] @"first"
  %b = Relu(%a) : f32[1,5,2,3,4] @"relu"
  %c = Clip(%b, %lo, %hi) : f32[1,5,2,3,4] @"clip"
  %y = Transpose(%c) {perm = [0, 2, 3, 4, 1]} : f32[1,2,3,4,5] @"second"
  %z = Sigmoid(%y) : f32[1,2,3,4,5] @"s"
  output %z
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,3,4,5]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %b = Relu(%x) : f32[1,2,3,4,5] @"relu"
  %c = Clip(%b, %lo, %hi) : f32[1,2,3,4,5] @"clip"
  %z = Sigmoid(%c) : f32[1,2,3,4,5] @"s"
  output %z
})");
  const char* shared = R"(graph @g opset 17 {
  input %x : f32[2,3]
  %a = Transpose(%x) {perm = [1, 0]} : f32[3,2] @"first"
  %b = Relu(%a) : f32[3,2] @"relu"
  %y = Transpose(%b) {perm = [1, 0]} : f32[2,3] @"second"
  %z = Add(%y, %x) : f32[2,3] @"add"
  output %z
  output %a
})";
  testing::expect_pass_result("fold-transposes", shared, shared);
}

}  // namespace
}  // namespace tessel
