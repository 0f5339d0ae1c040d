#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/npy.h"
#include "core/tensor.h"

namespace tessel {
namespace {

TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    float f = half_to_float(bits);
    if (f != f) continue;  // NaN payloads need not round-trip bit-exactly
    EXPECT_EQ(float_to_half(f), bits) << "half bits " << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 2048)), 1.0f);  // tie -> even
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(half_to_float(float_to_half(70000.0f)), INFINITY);
  EXPECT_EQ(half_to_float(float_to_half(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
}

TEST(Tensor, CastAndAccess) {
  Tensor t = Tensor::from_vector<float>({2, 2}, {1.5f, -2.5f, 3.0f, 300.0f});
  Tensor i8 = t.cast(DType::kI8);
  EXPECT_EQ(i8.get_i64(0), 1);
  EXPECT_EQ(i8.get_i64(1), -2);
  EXPECT_EQ(i8.get_i64(3), 127);  // saturates
  EXPECT_THROW(t.data<int32_t>(), InternalError);
}

// relative_l2_error reads 16-bit floats through a table: it equals the plain get_f64 sum, and
// a NaN anywhere makes it NaN (tune refuses a candidate whose check is not <= its tolerance).
TEST(Tensor, RelativeL2Error) {
  const Tensor a = random_uniform(DType::kF16, {3, 1000}, 1);
  const Tensor b = random_uniform(DType::kF16, {3, 1000}, 2);
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num += (a.get_f64(i) - b.get_f64(i)) * (a.get_f64(i) - b.get_f64(i));
    den += b.get_f64(i) * b.get_f64(i);
  }
  EXPECT_NEAR(relative_l2_error(a, b), std::sqrt(num / den), 1e-12);
  EXPECT_NEAR(relative_l2_error(a.cast(DType::kF32), b), std::sqrt(num / den), 1e-12);
  EXPECT_EQ(relative_l2_error(a, a), 0.0);
  Tensor nan = a.clone();
  nan.set_f64(1234, std::nan(""));
  EXPECT_TRUE(std::isnan(relative_l2_error(nan, a)));
  EXPECT_TRUE(std::isnan(relative_l2_error(a, nan)));
}

// random_uniform: floats in [-1, 1) spread over the range, integers in [0, 9]; one seed gives
// one tensor, another seed another.
TEST(Tensor, RandomUniform) {
  const Tensor f = random_uniform(DType::kF16, {100000}, 7);
  double lo = 1, hi = -1, sum = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double v = f.get_f64(i);
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LT(lo, -0.99);
  EXPECT_LE(hi, 1.0);  // 16-bit rounding may reach 1
  EXPECT_GT(hi, 0.99);
  EXPECT_NEAR(sum / f.numel(), 0.0, 0.01);
  EXPECT_TRUE(bitwise_equal(f, random_uniform(DType::kF16, {100000}, 7)));
  EXPECT_FALSE(bitwise_equal(f, random_uniform(DType::kF16, {100000}, 8)));
  const Tensor f32 = random_uniform(DType::kF32, {1000}, 7);
  for (int64_t i = 0; i < f32.numel(); ++i) {
    EXPECT_GE(f32.get_f64(i), -1.0);
    EXPECT_LT(f32.get_f64(i), 1.0);
  }
  const Tensor n = random_uniform(DType::kI64, {1000}, 7);
  std::vector<int> seen(10, 0);
  for (int64_t i = 0; i < n.numel(); ++i) {
    ASSERT_GE(n.get_i64(i), 0);
    ASSERT_LE(n.get_i64(i), 9);
    ++seen[static_cast<size_t>(n.get_i64(i))];
  }
  for (int c : seen) EXPECT_GT(c, 50);
}

TEST(Shape, AbsurdShapesAreUserErrors) {
  EXPECT_THROW(numel({1 << 30, 1 << 30, 1 << 30}), UserError);
  EXPECT_THROW(numel({-1, 3}), UserError);
  EXPECT_EQ(numel({2, 0, 5}), 0);
}

TEST(Npy, RoundTrip) {
  Tensor t = Tensor::from_vector<int64_t>({3}, {1, -2, 3});
  Tensor back = parse_npy(serialize_npy(t), "mem");
  EXPECT_TRUE(bitwise_equal(t, back));
  Tensor f = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(bitwise_equal(f, parse_npy(serialize_npy(f), "mem")));
}

TEST(Npy, MalformedFilesAreUserErrors) {
  EXPECT_THROW(parse_npy("hello", "x.npy"), UserError);
  std::string good = serialize_npy(Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  try {
    parse_npy(good.substr(0, good.size() - 3), "x.npy");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy: truncated .npy data"), std::string::npos);
  }
  EXPECT_THROW(read_npy("/nonexistent/file.npy"), UserError);
}

}  // namespace
}  // namespace tessel
