// Tests of the reductions of ops/reduce_more.cc: ReduceSum (axes an input from opset 13), the
// other Reduce* ops (axes an input from opset 18), ArgMax and ArgMin. Expected values are
// hand-computed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::run1;
using testing::user_error;
using I64s = std::vector<int64_t>;

template <typename T>
Tensor t(Shape shape, const std::vector<T>& v) {
  return Tensor::from_vector<T>(std::move(shape), v);
}
Tensor f32(Shape shape, const std::vector<float>& v) { return t<float>(std::move(shape), v); }
Tensor axes(const I64s& v) { return t<int64_t>({static_cast<int64_t>(v.size())}, v); }
I64s ints_of(const Tensor& x) { return x.to_i64_vector(); }



constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const ir::Attributes kNoKeep = {{"keepdims", int64_t{0}}};

// x (2, 2, 3) = 0..11.
Tensor input() { return f32({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}); }

// ---- axes operand, keepdims, noop ----------------------------------------------------------

TEST(ReduceSum, AxesAttributeBeforeOpset13InputSince) {
  const Tensor x = input();
  EXPECT_TRUE(all_close(run1("ReduceSum", {x}, {{"axes", I64s{1}}}, 11),
                        f32({2, 1, 3}, {3, 5, 7, 15, 17, 19})));
  EXPECT_TRUE(
      all_close(run1("ReduceSum", {x, axes({1})}, {}, 13), f32({2, 1, 3}, {3, 5, 7, 15, 17, 19})));
  // Negative and several axes, without keepdims.
  EXPECT_TRUE(all_close(run1("ReduceSum", {x, axes({0, -1})}, kNoKeep, 13), f32({2}, {24, 42})));
  // No axes: everything; empty axes with noop_with_empty_axes: the identity.
  EXPECT_TRUE(all_close(run1("ReduceSum", {x}, {}, 13), f32({1, 1, 1}, {66})));
  EXPECT_TRUE(all_close(run1("ReduceSum", {x, axes({})}, kNoKeep, 13), f32({}, {66})));
  EXPECT_TRUE(
      all_close(run1("ReduceSum", {x, axes({})}, {{"noop_with_empty_axes", int64_t{1}}}, 13), x));
}

TEST(ReduceOthers, AxesAttributeBeforeOpset18InputSince) {
  const Tensor x = input();
  EXPECT_TRUE(
      all_close(run1("ReduceMax", {x}, {{"axes", I64s{-1}}}, 13), f32({2, 2, 1}, {2, 5, 8, 11})));
  EXPECT_TRUE(all_close(run1("ReduceMax", {x, axes({-1})}, {}, 18), f32({2, 2, 1}, {2, 5, 8, 11})));
  EXPECT_TRUE(all_close(run1("ReduceMin", {x, axes({0, 1})}, kNoKeep, 18), f32({3}, {0, 1, 2})));
}

TEST(ReduceOthers, NoopWithEmptyAxesIsTheIdentityForEveryReduction) {
  // Not x*x or |x|: the spec says the input is returned, and onnxruntime 1.20 does so.
  const Tensor x = f32({2}, {-3, 2});
  for (const char* op : {"ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceProd", "ReduceMin"}) {
    EXPECT_TRUE(all_close(run1(op, {x, axes({})}, {{"noop_with_empty_axes", int64_t{1}}}, 18), x))
        << op;
  }
}

// ---- values ---------------------------------------------------------------------------------

TEST(ReduceOthers, F32Values) {
  // Rows [1, -2, 2] and [3, 0, -4].
  const Tensor x = f32({2, 3}, {1, -2, 2, 3, 0, -4});
  const ir::Attributes rows = {{"axes", I64s{1}}, {"keepdims", int64_t{0}}};
  EXPECT_TRUE(all_close(run1("ReduceProd", {x}, rows, 13), f32({2}, {-4, 0})));
  EXPECT_TRUE(all_close(run1("ReduceL1", {x}, rows, 13), f32({2}, {5, 7})));
  EXPECT_TRUE(all_close(run1("ReduceL2", {x}, rows, 13), f32({2}, {3, 5})));
  EXPECT_TRUE(all_close(run1("ReduceSumSquare", {x}, rows, 13), f32({2}, {9, 25})));
  EXPECT_TRUE(all_close(run1("ReduceMax", {x}, rows, 13), f32({2}, {2, 3})));
  EXPECT_TRUE(all_close(run1("ReduceMin", {x}, rows, 13), f32({2}, {-2, -4})));
  // log(1 + 2 + 5) = log 8; log(e^0 + e^0 + e^log3) = log 5.
  EXPECT_TRUE(all_close(run1("ReduceLogSum", {f32({3}, {1, 2, 5})}, kNoKeep, 13),
                        f32({}, {std::log(8.0f)})));
  EXPECT_TRUE(all_close(run1("ReduceLogSumExp", {f32({3}, {0, 0, std::log(3.0f)})}, kNoKeep, 13),
                        f32({}, {std::log(5.0f)})));
}

TEST(ReduceOthers, LogSumExpIsStableAndHandlesInfinities) {
  // Rows: [1000, 1000] -> 1000 + log 2; all -inf -> -inf; one +inf -> +inf.
  const Tensor x = f32({3, 2}, {1000, 1000, -kInf, -kInf, kInf, 1});
  EXPECT_TRUE(all_close(run1("ReduceLogSumExp", {x}, {{"axes", I64s{1}}}, 13),
                        f32({3, 1}, {1000 + std::log(2.0f), -kInf, kInf})));
}

TEST(ReduceOthers, MaxMinPropagateNaN) {
  const Tensor x = f32({2, 2}, {1, kNaN, 3, 2});
  EXPECT_TRUE(all_close(run1("ReduceMax", {x}, {{"axes", I64s{1}}}, 13), f32({2, 1}, {kNaN, 3})));
  EXPECT_TRUE(all_close(run1("ReduceMin", {x}, {{"axes", I64s{1}}}, 13), f32({2, 1}, {kNaN, 2})));
}

TEST(ReduceOthers, IntegersAreExactWrapOrTruncate) {
  // 2^53 + 1 is not a double: an int64 sum through double would lose the 1.
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(ints_of(run1("ReduceSum", {t<int64_t>({2}, {big, 2})}, kNoKeep, 13)), (I64s{big + 2}));
  // int32 sums wrap like numpy's sum(dtype=int32).
  const int32_t max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(ints_of(run1("ReduceSum", {t<int32_t>({2}, {max, 2})}, kNoKeep, 13)),
            (I64s{std::numeric_limits<int32_t>::min() + 1}));
  const Tensor x = t<int32_t>({2, 2}, {3, -4, 1, 1});
  const ir::Attributes rows = {{"axes", I64s{1}}, {"keepdims", int64_t{0}}};
  // sqrt(9 + 16) = 5 and sqrt(2) truncates to 1.
  EXPECT_EQ(ints_of(run1("ReduceL2", {x}, rows, 13)), (I64s{5, 1}));
  EXPECT_EQ(ints_of(run1("ReduceL1", {x}, rows, 13)), (I64s{7, 2}));
  EXPECT_EQ(ints_of(run1("ReduceProd", {x}, rows, 13)), (I64s{-12, 1}));
  EXPECT_EQ(ints_of(run1("ReduceSumSquare", {x}, rows, 13)), (I64s{25, 2}));
  EXPECT_EQ(ints_of(run1("ReduceMax", {t<uint8_t>({3}, {7, 200, 3})}, kNoKeep, 13)), (I64s{200}));
  EXPECT_EQ(ints_of(run1("ReduceMin", {t<int8_t>({3}, {7, -100, 3})}, kNoKeep, 13)), (I64s{-100}));
}

TEST(ReduceOthers, SixteenBitFloatsKeepTheirDtype) {
  const Tensor h =
      run1("ReduceSumSquare", {Tensor::from_doubles(DType::kF16, {2}, {1.5, 2})}, kNoKeep, 13);
  EXPECT_TRUE(bitwise_equal(h, Tensor::from_doubles(DType::kF16, {}, {6.25})));
  const Tensor b =
      run1("ReduceProd", {Tensor::from_doubles(DType::kBF16, {3}, {0.5, 3, -2})}, kNoKeep, 13);
  EXPECT_TRUE(bitwise_equal(b, Tensor::from_doubles(DType::kBF16, {}, {-3})));
}

TEST(ReduceOthers, EmptyReductionsGiveTheIdentity) {
  // Reducing an axis of extent 0: the fold's identity element (ONNX's reference values).
  const Tensor x(DType::kF32, {2, 0});
  const ir::Attributes rows = {{"axes", I64s{1}}, {"keepdims", int64_t{0}}};
  EXPECT_TRUE(all_close(run1("ReduceProd", {x}, rows, 13), f32({2}, {1, 1})));
  EXPECT_TRUE(all_close(run1("ReduceMax", {x}, rows, 13), f32({2}, {-kInf, -kInf})));
  EXPECT_TRUE(all_close(run1("ReduceMin", {x}, rows, 13), f32({2}, {kInf, kInf})));
  EXPECT_TRUE(all_close(run1("ReduceLogSum", {x}, rows, 13), f32({2}, {-kInf, -kInf})));
  EXPECT_TRUE(all_close(run1("ReduceSum", {x, axes({1})}, kNoKeep, 13), f32({2}, {0, 0})));
}

TEST(ReduceOthers, Errors) {
  const Tensor x = input();
  EXPECT_CONTAINS(user_error([&] {
                    run1("ReduceSum", {x}, {{"axes", I64s{1}}}, 13);
                  }),
                  "ReduceSum 'node': 'axes' is input 1 since opset 13, not an attribute");
  EXPECT_CONTAINS(user_error([&] {
                    run1("ReduceL2", {x, axes({1})}, {}, 17);
                  }),
                  "ReduceL2 'node': 'axes' is an attribute before opset 18, not an input");
  EXPECT_CONTAINS(user_error([&] {
                    run1("ReduceProd", {x}, {{"axes", I64s{0, -3}}}, 13);
                  }),
                  "ReduceProd 'node': axis -3 is listed twice");
  EXPECT_CONTAINS(user_error([&] {
                    run1("ReduceMin", {x, axes({3})}, {}, 18);
                  }),
                  "ReduceMin 'node': axis 3 out of range for input of shape [2,2,3]");
  EXPECT_CONTAINS(user_error([&] { run1("ReduceL1", {t<uint8_t>({1}, {1})}, {}, 13); }),
                  "ReduceL1 'node': input 0 has dtype u8");
}

// ---- ArgMax / ArgMin ------------------------------------------------------------------------

// Rows [1, 5, 5, 2] and [3, 0, 3, 0]: ties on both extrema.
Tensor ties() { return f32({2, 4}, {1, 5, 5, 2, 3, 0, 3, 0}); }

TEST(ArgMax, FirstOrLastIndexOfTies) {
  const Tensor y = run1("ArgMax", {ties()}, {{"axis", int64_t{1}}});
  EXPECT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  EXPECT_EQ(ints_of(y), (I64s{1, 0}));
  EXPECT_EQ(
      ints_of(run1("ArgMax", {ties()}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}})),
      (I64s{2, 2}));
  EXPECT_EQ(ints_of(run1("ArgMin", {ties()}, {{"axis", int64_t{1}}})), (I64s{0, 1}));
  EXPECT_EQ(
      ints_of(run1("ArgMin", {ties()}, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}})),
      (I64s{0, 3}));
}

TEST(ArgMax, DefaultAxisZeroAndKeepdims) {
  const Tensor y = run1("ArgMax", {ties()}, kNoKeep);
  EXPECT_EQ(y.shape(), (Shape{4}));
  EXPECT_EQ(ints_of(y), (I64s{1, 0, 0, 0}));
  EXPECT_EQ(run1("ArgMin", {ties()}).shape(), (Shape{1, 4}));
  EXPECT_EQ(ints_of(run1("ArgMin", {ties()})), (I64s{0, 1, 1, 1}));
}

TEST(ArgMax, NaNIsTheExtremumAndIntegersAreExact) {
  EXPECT_EQ(ints_of(run1("ArgMax", {f32({4}, {1, kNaN, 3, kNaN})}, kNoKeep)), (I64s{1}));
  EXPECT_EQ(ints_of(run1("ArgMin", {f32({4}, {1, kNaN, 3, kNaN})},
                         {{"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}})),
            (I64s{3}));
  // 2^53 and 2^53 + 1 are equal as doubles.
  const int64_t big = int64_t{1} << 53;
  EXPECT_EQ(ints_of(run1("ArgMax", {t<int64_t>({2}, {big + 1, big})}, kNoKeep)), (I64s{0}));
  EXPECT_EQ(ints_of(run1("ArgMin", {t<int64_t>({2}, {big + 1, big})}, kNoKeep)), (I64s{1}));
  EXPECT_EQ(ints_of(run1("ArgMax", {t<uint8_t>({3}, {7, 200, 3})}, kNoKeep)), (I64s{1}));
}

TEST(ArgMax, Errors) {
  EXPECT_CONTAINS(user_error([] {
                    run1("ArgMax", {ties()}, {{"axis", int64_t{2}}});
                  }),
                  "ArgMax 'node': axis 2 is out of range for rank 2");
  EXPECT_CONTAINS(user_error([] {
                    run1("ArgMin", {Tensor(DType::kF32, {2, 0})}, {{"axis", int64_t{1}}});
                  }),
                  "ArgMin 'node': axis 1 of the input [2,0] is empty");
  Tensor b(DType::kBool, {2});
  EXPECT_CONTAINS(user_error([&] { run1("ArgMax", {b}); }),
                  "ArgMax 'node': input 0 has dtype bool");
}

}  // namespace
}  // namespace tessel
