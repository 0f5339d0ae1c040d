// Tests of the elementwise math, comparison and logic ops (ops/elementwise_math.cc). Expected
// values are hand-computed unless a comment names numpy or onnxruntime 1.20 as their source.
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
Tensor bools(Shape shape, const std::vector<int>& v) {
  Tensor r(DType::kBool, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) r.data<bool>()[i] = v[i] != 0;
  return r;
}
I64s ints_of(const Tensor& x) { return x.to_i64_vector(); }



constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- unary ----------------------------------------------------------------------------------

TEST(UnaryMath, F32Values) {
  const Tensor x = f32({4}, {-4, 0.25f, 1, 4});
  EXPECT_TRUE(all_close(run1("Neg", {x}), f32({4}, {4, -0.25f, -1, -4})));
  EXPECT_TRUE(all_close(run1("Abs", {x}), f32({4}, {4, 0.25f, 1, 4})));
  EXPECT_TRUE(all_close(run1("Reciprocal", {x}), f32({4}, {-0.25f, 4, 1, 0.25f})));
  const Tensor p = f32({3}, {0.25f, 1, 4});
  EXPECT_TRUE(all_close(run1("Sqrt", {p}), f32({3}, {0.5f, 1, 2})));
  EXPECT_TRUE(all_close(run1("Log", {p}), f32({3}, {-std::log(4.0f), 0, std::log(4.0f)})));
  EXPECT_TRUE(all_close(run1("Exp", {f32({2}, {0, 1})}), f32({2}, {1, std::exp(1.0f)})));
  const float half_pi = static_cast<float>(M_PI / 2);
  EXPECT_TRUE(all_close(run1("Sin", {f32({2}, {0, half_pi})}), f32({2}, {0, 1}), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(run1("Cos", {f32({2}, {0, half_pi})}), f32({2}, {1, 0}), 1e-6, 1e-6));
  // erf(0.5), erf(-1), erf(2) from Python's math.erf.
  EXPECT_TRUE(all_close(run1("Erf", {f32({3}, {0.5f, -1, 2})}),
                        f32({3}, {0.5204999f, -0.8427008f, 0.9953223f})));
}

TEST(UnaryMath, RoundingOps) {
  const Tensor x = f32({7}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f});
  // Round: halves to even, as numpy.
  EXPECT_TRUE(all_close(run1("Round", {x}), f32({7}, {-2, -2, 0, 0, 2, 2, 3})));
  EXPECT_TRUE(all_close(run1("Ceil", {x}), f32({7}, {-2, -1, 0, 1, 2, 3, 3})));
  EXPECT_TRUE(all_close(run1("Floor", {x}), f32({7}, {-3, -2, -1, 0, 1, 2, 2})));
}

TEST(UnaryMath, SignPropagatesNaNAndCoversIntegers) {
  EXPECT_TRUE(all_close(run1("Sign", {f32({4}, {-3, 0, 2, kNaN})}), f32({4}, {-1, 0, 1, kNaN})));
  EXPECT_EQ(ints_of(run1("Sign", {t<int8_t>({3}, {-128, 0, 5})})), (I64s{-1, 0, 1}));
  EXPECT_EQ(ints_of(run1("Sign", {t<uint8_t>({2}, {0, 200})})), (I64s{0, 1}));
}

TEST(UnaryMath, IntegerNegAndAbsWrapAtTheMinimum) {
  // numpy: -int8(-128) == abs(int8(-128)) == -128.
  EXPECT_EQ(ints_of(run1("Neg", {t<int8_t>({3}, {-128, -5, 7})})), (I64s{-128, 5, -7}));
  EXPECT_EQ(ints_of(run1("Abs", {t<int8_t>({3}, {-128, -5, 7})})), (I64s{-128, 5, 7}));
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ints_of(run1("Neg", {t<int64_t>({2}, {min64, 3})})), (I64s{min64, -3}));
  EXPECT_EQ(ints_of(run1("Abs", {t<uint8_t>({2}, {0, 255})})), (I64s{0, 255}));
  // Integer Erf truncates erf(x) toward zero: 0, except where erf rounds to +-1 in double
  // (|x| >= 6). ONNX's reference (math.erf, astype) gives the same.
  EXPECT_EQ(ints_of(run1("Erf", {t<int32_t>({4}, {-3, 0, 9, -7})})), (I64s{0, 0, 1, -1}));
}

TEST(UnaryMath, SixteenBitFloatsRoundOnceAndKeepTheirDtype) {
  // sqrt(2) = 1.41421356 rounds to bf16 1.4140625 and to f16 1.4140625 (0x3DA8).
  const Tensor b = run1("Sqrt", {Tensor::from_doubles(DType::kBF16, {3}, {4, 9, 2})});
  EXPECT_TRUE(bitwise_equal(b, Tensor::from_doubles(DType::kBF16, {3}, {2, 3, 1.4140625})));
  const Tensor h = run1("Sqrt", {Tensor::from_doubles(DType::kF16, {3}, {4, 9, 2})});
  EXPECT_TRUE(bitwise_equal(h, Tensor::from_doubles(DType::kF16, {3}, {2, 3, 1.4140625})));
  const Tensor d = run1("Exp", {Tensor::from_doubles(DType::kF64, {1}, {1})});
  EXPECT_EQ(d.dtype(), DType::kF64);
  EXPECT_EQ(d.get_f64(0), std::exp(1.0));
}

TEST(UnaryMath, NotAndDtypeErrors) {
  EXPECT_EQ(ints_of(run1("Not", {bools({3}, {1, 0, 1})})), (I64s{0, 1, 0}));
  EXPECT_CONTAINS(user_error([] { run1("Sqrt", {t<int32_t>({1}, {4})}); }),
                  "Sqrt 'node': input 0 has dtype i32");
  EXPECT_CONTAINS(user_error([] { run1("Neg", {t<uint8_t>({1}, {4})}); }),
                  "Neg 'node': input 0 has dtype u8");
  EXPECT_CONTAINS(user_error([] { run1("Not", {f32({1}, {1})}); }),
                  "Not 'node': input 0 has dtype f32");
}

// ---- Pow ------------------------------------------------------------------------------------

TEST(Pow, F32Broadcasts) {
  const Tensor y = run1("Pow", {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {2, 0.5f})});
  EXPECT_TRUE(all_close(y, f32({2, 2}, {1, std::sqrt(2.0f), 9, 2})));
  // Scalar exponent.
  EXPECT_TRUE(all_close(run1("Pow", {f32({3}, {1, 2, 3}), f32({}, {3})}), f32({3}, {1, 8, 27})));
}

TEST(Pow, IntegerPowersAreExactAndWrap) {
  // numpy: int64(3) ** 39 == 4052555153018976267 (onnxruntime, going through double, is off by
  // 11); (-2) ** 63 wraps to INT64_MIN.
  const Tensor y = run1("Pow", {t<int64_t>({3}, {3, -2, 10}), t<int64_t>({3}, {39, 63, 18})});
  EXPECT_EQ(ints_of(y),
            (I64s{4052555153018976267, std::numeric_limits<int64_t>::min(), 1000000000000000000}));
  // A negative exponent truncates 1/base^e toward zero: 0 unless |base| == 1.
  const Tensor n =
      run1("Pow", {t<int32_t>({4}, {2, 1, -1, -1}), t<int32_t>({4}, {-1, -5, -3, -2})});
  EXPECT_EQ(n.dtype(), DType::kI32);
  EXPECT_EQ(ints_of(n), (I64s{0, 1, -1, 1}));
  EXPECT_CONTAINS(user_error([] {
                    run1("Pow", {t<int32_t>({1}, {0}), t<int32_t>({1}, {-2})});
                  }),
                  "Pow 'node': integer 0 raised to the negative power -2");
}

TEST(Pow, MixedTypesTakeTheBaseType) {
  // Integer base, float exponent: pow in double, truncated (2^0.5 = 1.41, 3^2.5 = 15.59).
  const Tensor i = run1("Pow", {t<int64_t>({3}, {2, 3, 4}), f32({3}, {0.5f, 2.5f, -1})});
  EXPECT_EQ(i.dtype(), DType::kI64);
  EXPECT_EQ(ints_of(i), (I64s{1, 15, 0}));
  const Tensor f = run1("Pow", {f32({3}, {1.5f, -2, 3}), t<int8_t>({3}, {2, -3, 4})});
  EXPECT_EQ(f.dtype(), DType::kF32);
  EXPECT_TRUE(all_close(f, f32({3}, {2.25f, -0.125f, 81})));
  const Tensor h =
      run1("Pow", {Tensor::from_doubles(DType::kF16, {2}, {3, 0.5}), t<uint8_t>({2}, {2, 3})});
  EXPECT_TRUE(bitwise_equal(h, Tensor::from_doubles(DType::kF16, {2}, {9, 0.125})));
  EXPECT_CONTAINS(user_error([] {
                    run1("Pow", {t<int8_t>({1}, {2}), f32({1}, {2})});
                  }),
                  "Pow 'node': input 0 has dtype i8");
}

// ---- Mod ------------------------------------------------------------------------------------

TEST(Mod, IntegerSignRules) {
  const std::vector<int32_t> a = {-7, -7, 7, 7, 0, -1}, b = {3, -3, 3, -3, 5, 3};
  // fmod=0: the sign of the divisor (Python's %): numpy.mod gives these.
  EXPECT_EQ(ints_of(run1("Mod", {t<int32_t>({6}, a), t<int32_t>({6}, b)})),
            (I64s{2, -1, 1, -2, 0, 2}));
  // fmod=1: the sign of the dividend (C's fmod).
  EXPECT_EQ(ints_of(run1("Mod", {t<int32_t>({6}, a), t<int32_t>({6}, b)}, {{"fmod", int64_t{1}}})),
            (I64s{-1, -1, 1, 1, 0, -1}));
  // INT_MIN % -1 does not trap.
  EXPECT_EQ(ints_of(run1("Mod", {t<int8_t>({2}, {-128, -128}), t<int8_t>({2}, {-1, 3})})),
            (I64s{0, 1}));
  EXPECT_EQ(ints_of(run1("Mod", {t<uint8_t>({2}, {200, 7}), t<uint8_t>({2}, {7, 200})})),
            (I64s{4, 7}));
}

TEST(Mod, FloatFmodAndBroadcast) {
  const Tensor y = run1("Mod", {f32({2, 2}, {-7.5f, 5.25f, 7.5f, -1}), f32({2}, {2, -2})},
                        {{"fmod", int64_t{1}}});
  EXPECT_TRUE(all_close(y, f32({2, 2}, {-1.5f, 1.25f, 1.5f, -1})));
}

TEST(Mod, Errors) {
  const Tensor f = f32({1}, {1});
  EXPECT_CONTAINS(user_error([&] {
                    run1("Mod", {f, f});
                  }),
                  "Mod 'node': fmod=0 (integer modulus) with f32 inputs");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Mod", {f, f}, {{"fmod", int64_t{2}}});
                  }),
                  "Mod 'node': fmod is 2, expected 0 or 1");
  EXPECT_CONTAINS(user_error([] {
                    run1("Mod", {t<int64_t>({2}, {4, 5}), t<int64_t>({2}, {3, 0})});
                  }),
                  "Mod 'node': integer modulus by zero (element 1 of the divisor)");
}

// ---- variadic -------------------------------------------------------------------------------

TEST(Variadic, ThreeInputsBroadcast) {
  // (2,1) with (3,) with (1,3) -> (2,3).
  const Tensor a = f32({2, 1}, {1, 10}), b = f32({3}, {0, 5, 20}), c = f32({1, 3}, {2, 2, 2});
  EXPECT_TRUE(all_close(run1("Max", {a, b, c}), f32({2, 3}, {2, 5, 20, 10, 10, 20})));
  EXPECT_TRUE(all_close(run1("Min", {a, b, c}), f32({2, 3}, {0, 1, 1, 0, 2, 2})));
  EXPECT_TRUE(all_close(run1("Sum", {a, b, c}), f32({2, 3}, {3, 8, 23, 12, 17, 32})));
  EXPECT_TRUE(all_close(run1("Mean", {a, b, c}),
                        f32({2, 3}, {1, 8.f / 3, 23.f / 3, 4, 17.f / 3, 32.f / 3})));
  // One input is a copy.
  EXPECT_TRUE(all_close(run1("Max", {a}), a));
}

TEST(Variadic, MaxMinPropagateNaNAndCoverIntegers) {
  const Tensor a = f32({3}, {1, kNaN, 3}), b = f32({3}, {kNaN, 2, 1});
  EXPECT_TRUE(all_close(run1("Max", {a, b}), f32({3}, {kNaN, kNaN, 3})));
  EXPECT_TRUE(all_close(run1("Min", {a, b}), f32({3}, {kNaN, kNaN, 1})));
  EXPECT_EQ(ints_of(run1("Max", {t<uint8_t>({2}, {200, 3}), t<uint8_t>({2}, {100, 7})})),
            (I64s{200, 7}));
  EXPECT_EQ(ints_of(run1("Min", {t<int64_t>({2}, {-5, 9}), t<int64_t>({1}, {0})})), (I64s{-5, 0}));
}

TEST(Variadic, MeanOfF16RoundsOnce) {
  const Tensor a = Tensor::from_doubles(DType::kF16, {2}, {1, 2});
  const Tensor b = Tensor::from_doubles(DType::kF16, {2}, {2, 4});
  EXPECT_TRUE(
      bitwise_equal(run1("Mean", {a, b}), Tensor::from_doubles(DType::kF16, {2}, {1.5, 3})));
}

TEST(Variadic, Errors) {
  EXPECT_CONTAINS(user_error([] {
                    run1("Max", {f32({2}, {1, 2}), f32({3}, {1, 2, 3})});
                  }),
                  "Max 'node': shapes [2] and [3] do not broadcast");
  EXPECT_CONTAINS(user_error([] {
                    run1("Sum", {f32({1}, {1}), t<int32_t>({1}, {1})});
                  }),
                  "Sum 'node': inputs 0 and 1 must have the same dtype");
  EXPECT_CONTAINS(user_error([] { run1("Mean", {t<int32_t>({1}, {1})}); }),
                  "Mean 'node': input 0 has dtype i32");
}

// ---- comparisons and logic ------------------------------------------------------------------

TEST(Compare, BroadcastToBool) {
  const Tensor a = f32({2, 3}, {1, 2, 3, 3, 2, 1}), b = f32({3}, {2, 2, 2});
  const Tensor gt = run1("Greater", {a, b});
  EXPECT_EQ(gt.dtype(), DType::kBool);
  EXPECT_EQ(gt.shape(), (Shape{2, 3}));
  EXPECT_EQ(ints_of(gt), (I64s{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(ints_of(run1("Less", {a, b})), (I64s{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(ints_of(run1("GreaterOrEqual", {a, b})), (I64s{0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(ints_of(run1("LessOrEqual", {a, b})), (I64s{1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(ints_of(run1("Equal", {a, b})), (I64s{0, 1, 0, 0, 1, 0}));
}

TEST(Compare, OtherDtypes) {
  // NaN compares unequal to everything, itself included.
  EXPECT_EQ(ints_of(run1("Equal", {f32({2}, {kNaN, 1}), f32({2}, {kNaN, 1})})), (I64s{0, 1}));
  EXPECT_EQ(ints_of(run1("Equal", {bools({2}, {1, 0}), bools({1}, {0})})), (I64s{0, 1}));
  EXPECT_EQ(ints_of(run1("Greater", {t<uint8_t>({2}, {200, 3}), t<uint8_t>({1}, {100})})),
            (I64s{1, 0}));
  const Tensor h = Tensor::from_doubles(DType::kBF16, {2}, {1.5, -2});
  EXPECT_EQ(ints_of(run1("Less", {h, Tensor::from_doubles(DType::kBF16, {}, {0})})), (I64s{0, 1}));
  EXPECT_CONTAINS(user_error([] {
                    run1("Greater", {bools({1}, {1}), bools({1}, {0})});
                  }),
                  "Greater 'node': input 0 has dtype bool");
}

TEST(Logic, AndOrXorNotBroadcast) {
  const Tensor a = bools({2, 2}, {0, 0, 1, 1}), b = bools({2}, {0, 1});
  EXPECT_EQ(ints_of(run1("And", {a, b})), (I64s{0, 0, 0, 1}));
  EXPECT_EQ(ints_of(run1("Or", {a, b})), (I64s{0, 1, 1, 1}));
  EXPECT_EQ(ints_of(run1("Xor", {a, b})), (I64s{0, 1, 1, 0}));
  EXPECT_CONTAINS(user_error([] {
                    run1("And", {t<int32_t>({1}, {1}), t<int32_t>({1}, {1})});
                  }),
                  "And 'node': input 0 has dtype i32");
}

// ---- Where ----------------------------------------------------------------------------------

TEST(Where, ThreeWayBroadcast) {
  // condition (2,1), x (3,), y (2,3) -> (2,3).
  const Tensor c = bools({2, 1}, {1, 0});
  const Tensor y =
      run1("Where", {c, t<int64_t>({3}, {1, 2, 3}), t<int64_t>({2, 3}, {-1, -2, -3, -4, -5, -6})});
  EXPECT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(ints_of(y), (I64s{1, 2, 3, -4, -5, -6}));
  const Tensor h = run1("Where", {bools({2}, {0, 1}), Tensor::from_doubles(DType::kF16, {}, {7}),
                                  Tensor::from_doubles(DType::kF16, {2}, {0.5, 0.25})});
  EXPECT_TRUE(bitwise_equal(h, Tensor::from_doubles(DType::kF16, {2}, {0.5, 7})));
  EXPECT_EQ(ints_of(run1("Where", {bools({2}, {0, 1}), bools({2}, {1, 1}), bools({2}, {0, 0})})),
            (I64s{0, 1}));
}

TEST(Where, Errors) {
  const Tensor x = f32({2}, {1, 2});
  EXPECT_CONTAINS(user_error([&] {
                    run1("Where", {x, x, x});
                  }),
                  "Where 'node': input 0 has dtype f32, expected one of bool");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Where", {bools({2}, {1, 0}), x, t<int32_t>({1}, {1})});
                  }),
                  "Where 'node': inputs 1 and 2 must have the same dtype");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Where", {bools({3}, {1, 0, 1}), x, x});
                  }),
                  "Where 'node': shapes [3] and [2] do not broadcast");
}

}  // namespace
}  // namespace tessel
