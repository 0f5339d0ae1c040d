#include <gtest/gtest.h>

#include <cmath>

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
