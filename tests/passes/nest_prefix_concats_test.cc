// nest-prefix-concats: Before/Expected, and the same numbers on the CPU executor.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// DenseNet's pattern: every Concat repeats the previous one's inputs and adds one. Each reads
// the previous Concat instead; a Concat whose inputs are no earlier Concat's prefix (%d: the
// order differs) is left alone.
TEST(NestPrefixConcats, GrowingConcatsBecomeAChain) {
  testing::expect_pass_result("nest-prefix-concats", R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %a : f32[1,2,2,3]
  input %b : f32[1,2,2,1]
  input %c : f32[1,2,2,2]
  %c1 = Concat(%x, %a) {axis = 3} : f32[1,2,2,5] @"cat1"
  %c2 = Concat(%x, %a, %b) {axis = 3} : f32[1,2,2,6] @"cat2"
  %c3 = Concat(%x, %a, %b, %c) {axis = 3} : f32[1,2,2,8] @"cat3"
  %d = Concat(%a, %x, %b) {axis = 3} : f32[1,2,2,6] @"other_order"
  output %c2
  output %c3
  output %d
})",
                              R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  input %a : f32[1,2,2,3]
  input %b : f32[1,2,2,1]
  input %c : f32[1,2,2,2]
  %c1 = Concat(%x, %a) {axis = 3} : f32[1,2,2,5] @"cat1"
  %c2 = Concat(%c1, %b) {axis = 3} : f32[1,2,2,6] @"cat2"
  %c3 = Concat(%c2, %c) {axis = 3} : f32[1,2,2,8] @"cat3"
  %d = Concat(%a, %x, %b) {axis = 3} : f32[1,2,2,6] @"other_order"
  output %c2
  output %c3
  output %d
})");
}

}  // namespace
}  // namespace tessel
