// integer-readers: Before/Expected, and the integers of the CPU executor within one step (the
// fused ops multiply the integers by s / t in f32 where the graph dequantized, then divided:
// a value near a rounding tie may land one step away).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace tessel {
namespace {

// A quantized squeeze-excite block: the features' mean, quantized for the reduce conv, and the
// features times the gate, quantized for the projection conv; both read the int8 features.
TEST(IntegerReaders, SqueezeExciteMeanAndGateReadTheIntegers) {
  const std::string head = R"(graph @g opset 18 {
  input %x : i8[2,4,4,16]
  input %gate : f32[2,1,1,16]
  const %s : f32[] = [0.05]
  const %z : i8[] = [0]
  const %axes : i64[2] = [1, 2]
  const %t : f32[] = [0.02]
  const %w : i8[] = [0]
  const %u : f32[] = [0.04]
)";
  testing::expect_pass_result("integer-readers", head + R"(  %f = DequantizeLinear(%x, %s, %z) : f32[2,4,4,16] @"dq"
  %m = ReduceMean(%f, %axes) {keepdims = 1} : f32[2,1,1,16] @"se.mean"
  %mq = QuantizeLinear(%m, %t, %w) : i8[2,1,1,16] @"se.mean_q"
  %p = Mul(%gate, %f) : f32[2,4,4,16] @"se.mul"
  %pq = QuantizeLinear(%p, %u) : u8[2,4,4,16] @"se.mul_q"
  output %mq
  output %pq
})",
                              head + R"(  %mq = tessel.QLinearReduceMean(%x, %s, %z, %t, %w) {axes = [1, 2], keepdims = 1} : i8[2,1,1,16] @"se.mean"
  %pq = tessel.MulQuantizeLinear(%x, %gate, %u, _, %s, %z) : u8[2,4,4,16] @"se.mul_q"
  output %mq
  output %pq
})",
                              0.0, 1.0);
}

// A quantized classifier's end: the global pool of the dequantized features quantized after a
// Flatten, then dequantized and requantized to the same grid around a Reshape. The pool reads
// the integers, the shape-only ops move them, and no float tensor is left.
TEST(IntegerReaders, PoolAndReshapesKeepTheIntegers) {
  const std::string head = R"(graph @g opset 18 {
  input %x : u8[2,3,3,8]
  const %s : f32[] = [0.05]
  const %z : u8[] = [3]
  const %t : f32[] = [0.01]
  const %w : u8[] = [128]
  const %shape : i64[3] = [2, 2, 4]
)";
  testing::expect_pass_result("integer-readers", head + R"(  %f = DequantizeLinear(%x, %s, %z) : f32[2,3,3,8] @"dq"
  %p = tessel.GlobalAveragePool(%f) : f32[2,1,1,8] @"pool"
  %r = Flatten(%p) : f32[2,8] @"flatten"
  %q = QuantizeLinear(%r, %t, %w) : u8[2,8] @"pool_q"
  %f2 = DequantizeLinear(%q, %t, %w) : f32[2,8] @"dq2"
  %r2 = Reshape(%f2, %shape) : f32[2,2,4] @"reshape"
  %q2 = QuantizeLinear(%r2, %t, %w) : u8[2,2,4] @"requantize"
  output %q2
})",
                              head + R"(  %p = tessel.QLinearReduceMean(%x, %s, %z, %t, %w) {axes = [1, 2], keepdims = 1} : u8[2,1,1,8] @"pool"
  %r = Flatten(%p) : u8[2,8] @"flatten"
  %q2 = Reshape(%r, %shape) : u8[2,2,4] @"reshape"
  output %q2
})",
                              0.0, 1.0);
}

// A channel shuffle (Reshape, Transpose, Reshape) between a DequantizeLinear and a
// QuantizeLinear on the same grid: the moves move the integers, and both go.
TEST(IntegerReaders, MovesRequantizedToTheirGridMoveTheIntegers) {
  const std::string head = R"(graph @g opset 17 {
  input %x : i8[1,4,4,8]
  const %s : f32[] = [0.05]
  const %z : i8[] = [0]
  const %groups : i64[5] = [1, 4, 4, 2, 4]
  const %channels : i64[4] = [1, 4, 4, 8]
)";
  testing::expect_pass_result("integer-readers", head + R"(  %f = DequantizeLinear(%x, %s, %z) : f32[1,4,4,8] @"dq"
  %r = Reshape(%f, %groups) : f32[1,4,4,2,4] @"shuffle.reshape"
  %t = Transpose(%r) {perm = [0, 1, 2, 4, 3]} : f32[1,4,4,4,2] @"shuffle.transpose"
  %b = Reshape(%t, %channels) : f32[1,4,4,8] @"shuffle.reshape_back"
  %y = QuantizeLinear(%b, %s, %z) : i8[1,4,4,8] @"requantize"
  output %y
})",
                              head + R"(  %r = Reshape(%x, %groups) : i8[1,4,4,2,4] @"shuffle.reshape"
  %t = Transpose(%r) {perm = [0, 1, 2, 4, 3]} : i8[1,4,4,4,2] @"shuffle.transpose"
  %y = Reshape(%t, %channels) : i8[1,4,4,8] @"shuffle.reshape_back"
  output %y
})",
                              0.0, 0.0);
}

// A move into a contraction's input (the NHWC Transpose convert-layout puts after a shuffle)
// moves the integers, the DequantizeLinear after it, where fold-qdq finds it. At the model's
// input edge (a DequantizeLinear of the graph input's QuantizeLinear) it stays: fuse folds
// that Transpose into the stem.
TEST(IntegerReaders, MovesIntoAContractionMoveTheIntegers) {
  const std::string head = R"(graph @g opset 17 {
  input %a : f32[1,8,4,4]
  const %s : f32[] = [0.05]
  const %z : i8[] = [0]
  const %w : f32[8,1,1,8] = [)" + testing::small_ints(64) + R"(]
)";
  testing::expect_pass_result("integer-readers", head + R"(  %h = Relu(%a) : f32[1,8,4,4] @"relu"
  %x = QuantizeLinear(%h, %s, %z) : i8[1,8,4,4] @"q"
  %f = DequantizeLinear(%x, %s, %z) : f32[1,8,4,4] @"dq"
  %t = Transpose(%f) {perm = [0, 2, 3, 1]} : f32[1,4,4,8] @"to_nhwc"
  %c = tessel.Conv(%t, %w) : f32[1,4,4,8] @"conv"
  output %c
})",
                              head + R"(  %h = Relu(%a) : f32[1,8,4,4] @"relu"
  %x = QuantizeLinear(%h, %s, %z) : i8[1,8,4,4] @"q"
  %t.int8 = Transpose(%x) {perm = [0, 2, 3, 1]} : i8[1,4,4,8] @"to_nhwc"
  %t = DequantizeLinear(%t.int8, %s, %z) : f32[1,4,4,8] @"t_DequantizeLinear"
  %c = tessel.Conv(%t, %w) : f32[1,4,4,8] @"conv"
  output %c
})",
                              0.0, 0.0);
  const std::string edge = head + R"(  %x = QuantizeLinear(%a, %s, %z) : i8[1,8,4,4] @"input_q"
  %f = DequantizeLinear(%x, %s, %z) : f32[1,8,4,4] @"input_dq"
  %t = Transpose(%f) {perm = [0, 2, 3, 1]} : f32[1,4,4,8] @"to_nhwc"
  %c = tessel.Conv(%t, %w) : f32[1,4,4,8] @"stem"
  output %c
})";
  testing::expect_pass_result("integer-readers", edge, edge, 0.0, 0.0);
}

// Left alone: a SiLU, whose Sigmoid reads the dequantized features (fuse folds it into the
// conv's epilogue); a SiLU whose quantizer gave each reader its own DequantizeLinear (the Mul's
// operands: x and the quantized Sigmoid of x); a Mul by a constant; a mean read by more than
// its QuantizeLinear; a per-channel DequantizeLinear; a requantization to another grid; and a
// dequantized tensor that is a graph output.
TEST(IntegerReaders, LeavesReadersThatNeedTheFloats) {
  const std::string unchanged = R"(graph @g opset 18 {
  input %x : i8[1,3,3,8]
  input %gate : f32[1,1,1,8]
  const %s : f32[] = [0.05]
  const %sc : f32[8] = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
  const %z : i8[] = [0]
  const %zc : i8[8] = [0, 0, 0, 0, 0, 0, 0, 0]
  const %axes : i64[2] = [1, 2]
  const %t : f32[] = [0.02]
  const %half : f32[8] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
  %f = DequantizeLinear(%x, %s, %z) : f32[1,3,3,8] @"silu.dq"
  %g = Sigmoid(%f) : f32[1,3,3,8] @"silu.sigmoid"
  %a = Mul(%f, %g) : f32[1,3,3,8] @"silu"
  %aq = QuantizeLinear(%a, %t, %z) : i8[1,3,3,8] @"silu_q"
  %f1 = DequantizeLinear(%aq, %t, %z) : f32[1,3,3,8] @"silu2.dq"
  %f1b = DequantizeLinear(%aq, %t, %z) : f32[1,3,3,8] @"silu2.dq_b"
  %g1 = Sigmoid(%f1b) : f32[1,3,3,8] @"silu2.sigmoid"
  %g1q = QuantizeLinear(%g1, %t, %z) : i8[1,3,3,8] @"silu2.sigmoid_q"
  %g1d = DequantizeLinear(%g1q, %t, %z) : f32[1,3,3,8] @"silu2.sigmoid_dq"
  %a1 = Mul(%f1, %g1d) : f32[1,3,3,8] @"silu2"
  %a1q = QuantizeLinear(%a1, %t, %z) : i8[1,3,3,8] @"silu2_q"
  %f2 = DequantizeLinear(%a1q, %t, %z) : f32[1,3,3,8] @"scaled.dq"
  %c = Mul(%f2, %half) : f32[1,3,3,8] @"scaled"
  %cq = QuantizeLinear(%c, %t, %z) : i8[1,3,3,8] @"scaled_q"
  %f3 = DequantizeLinear(%cq, %t, %z) : f32[1,3,3,8] @"mean.dq"
  %m = ReduceMean(%f3, %axes) {keepdims = 1} : f32[1,1,1,8] @"mean"
  %mq = QuantizeLinear(%m, %t, %z) : i8[1,1,1,8] @"mean_q"
  %f4 = DequantizeLinear(%cq, %sc, %zc) {axis = 3} : f32[1,3,3,8] @"per_channel.dq"
  %p4 = Mul(%f4, %gate) : f32[1,3,3,8] @"per_channel"
  %p4q = QuantizeLinear(%p4, %t, %z) : i8[1,3,3,8] @"per_channel_q"
  %f5 = DequantizeLinear(%p4q, %t, %z) : f32[1,3,3,8] @"regrid.dq"
  %r5 = Flatten(%f5) : f32[1,72] @"regrid.flatten"
  %r5q = QuantizeLinear(%r5, %s, %z) : i8[1,72] @"regrid_q"
  %f6 = DequantizeLinear(%p4q, %s, %z) : f32[1,3,3,8] @"out.dq"
  output %m
  output %mq
  output %r5q
  output %f6
})";
  testing::expect_pass_result("integer-readers", unchanged, unchanged, 0.0, 0.0);
}

}  // namespace
}  // namespace tessel
