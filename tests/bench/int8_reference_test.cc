// The int8 benchmark's CPU reference: draws, exact accumulation against direct loops written
// here, the epilogue's rounding and saturation, and the comparisons' tolerances.
#include "bench/int8_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::bench {
namespace {

ConvWorkload conv(int64_t n, int64_t h, int64_t w, int64_t ci, int64_t co, int64_t k,
                  int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  ConvWorkload c;
  c.name = "test";
  c.n = n, c.h = h, c.w = w, c.ci = ci, c.co = co, c.kh = k, c.kw = k;
  c.stride = stride, c.pad = pad, c.dilation = dilation, c.groups = groups;
  return c;
}

std::vector<int8_t> draw(size_t n, uint64_t seed) {
  std::vector<int8_t> v(n);
  fill_uniform_i8(v.data(), n, seed);
  return v;
}

// Direct conv2d in int64, NHWC / (co,kh,kw,ci/g), indexing written out independently.
std::vector<int64_t> direct_conv(const ConvWorkload& c, const std::vector<int8_t>& x,
                                 const std::vector<int8_t>& w) {
  const int64_t cig = c.ci / c.groups, cog = c.co / c.groups;
  std::vector<int64_t> y(c.y_elems(), 0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t p = 0; p < c.oh(); ++p)
      for (int64_t q = 0; q < c.ow(); ++q)
        for (int64_t k = 0; k < c.co; ++k) {
          int64_t acc = 0;
          for (int64_t r = 0; r < c.kh; ++r)
            for (int64_t s = 0; s < c.kw; ++s)
              for (int64_t ch = 0; ch < cig; ++ch) {
                const int64_t ih = p * c.stride - c.pad + r * c.dilation;
                const int64_t iw = q * c.stride - c.pad + s * c.dilation;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                acc += int64_t{x[((n * c.h + ih) * c.w + iw) * c.ci + (k / cog) * cig + ch]} *
                       w[((k * c.kh + r) * c.kw + s) * cig + ch];
              }
          y[((n * c.oh() + p) * c.ow() + q) * c.co + k] = acc;
        }
  return y;
}

TEST(Int8Fill, SeededSymmetricAndRarelyZero) {
  const std::vector<int8_t> a = draw(1 << 16, 1), b = draw(1 << 16, 1), c = draw(1 << 16, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0;
  int zeros = 0;
  for (const int8_t v : a) {
    ASSERT_GE(v, -127);  // never -128: symmetric quantization's range
    sum += v;
    zeros += v == 0;
  }
  EXPECT_EQ(*std::max_element(a.begin(), a.end()), 127);
  EXPECT_EQ(*std::min_element(a.begin(), a.end()), -127);
  EXPECT_NEAR(sum / a.size(), 0.0, 1.5);  // sd of the mean: 73.6 / 256 = 0.29
  EXPECT_LT(zeros, 2 * (1 << 16) / 255);  // about 1 in 255
}

TEST(Int8Reference, ConvMatchesDirectLoops) {
  for (const ConvWorkload& c : {
           conv(2, 7, 6, 8, 12, 3, 2, 1, 2, 2),    // groups, dilation, stride
           conv(1, 9, 9, 16, 4, 3, 1, 1, 1, 1),    // padding
           conv(3, 5, 5, 12, 12, 1, 1, 0, 1, 12),  // depthwise 1x1
           conv(1, 11, 13, 4, 8, 7, 2, 3, 1, 1),   // a stem's 7x7 stride 2
       }) {
    const std::vector<int8_t> x = draw(c.x_elems(), 3), w = draw(c.w_elems(), 4);
    const std::vector<int32_t> got = conv2d_int8_reference(c, x.data(), w.data());
    const std::vector<int64_t> want = direct_conv(c, x, w);
    ASSERT_EQ(got.size(), want.size()) << c.shape();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << c.shape() << " " << i;
  }
}

TEST(Int8Reference, AccumulationIsExactAtTheExtremes) {
  // 3x3x512 taps of 127 * 127 (and of -127 * 127): 74,322,432, far beyond fp32's 2^24.
  const ConvWorkload c = conv(1, 3, 3, 512, 4, 3, 1, 0, 1, 1);
  std::vector<int8_t> x(c.x_elems(), 127), w(c.w_elems(), 127);
  std::fill(w.begin() + static_cast<long>(c.w_elems() / 4),
            w.begin() + static_cast<long>(c.w_elems() / 2), -127);
  const std::vector<int32_t> y = conv2d_int8_reference(c, x.data(), w.data());
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[0], 4608 * 16129);
  EXPECT_EQ(y[1], -4608 * 16129);
  EXPECT_EQ(y[2], 4608 * 16129);
}

TEST(Int8Reference, GemmReadsBothOperandsKContiguous) {
  GemmWorkload g;
  g.m = 2, g.n = 3, g.k = 2;
  g.layout = GemmLayout::kNN;                  // the int8 GEMM ignores it: A (m,k), B (n,k) always
  const std::vector<int8_t> a = {1, 2, 3, 4};  // A = [[1 2] [3 4]]
  const std::vector<int8_t> b = {1, 0, 0, 1, -1, 1};  // B rows: (1,0) (0,1) (-1,1)
  EXPECT_EQ(gemm_int8_reference(g, a.data(), b.data()),
            (std::vector<int32_t>{1, 2, 1, 3, 4, 1}));  // C = A B^T
}

TEST(Int8Epilogue, RoundsHalfToEvenAndSaturates) {
  EXPECT_EQ(round_to_int8(0.5f), 0);
  EXPECT_EQ(round_to_int8(1.5f), 2);
  EXPECT_EQ(round_to_int8(2.5f), 2);
  EXPECT_EQ(round_to_int8(-0.5f), 0);
  EXPECT_EQ(round_to_int8(-2.5f), -2);
  EXPECT_EQ(round_to_int8(2.51f), 3);
  EXPECT_EQ(round_to_int8(126.6f), 127);
  EXPECT_EQ(round_to_int8(127.5f), 127);
  EXPECT_EQ(round_to_int8(1e9f), 127);
  EXPECT_EQ(round_to_int8(-128.4f), -128);
  EXPECT_EQ(round_to_int8(-1e9f), -128);
  EXPECT_EQ(round_to_int8(std::nanf("")), 0);
}

TEST(Int8Epilogue, ScaleThenBiasThenReluPerChannel) {
  Int8Epilogue e;
  e.scale = {0.5f, 2.0f};
  e.bias = {1.0f, -3.0f};
  e.relu = true;
  EXPECT_FLOAT_EQ(e.apply(10, 0), 6.0f);   // 10 * 0.5 + 1
  EXPECT_FLOAT_EQ(e.apply(10, 1), 17.0f);  // 10 * 2 - 3
  EXPECT_FLOAT_EQ(e.apply(1, 1), 0.0f);    // 2 - 3 < 0
  // Channel is the innermost dimension: index i is channel i % 2.
  EXPECT_EQ(apply_int8_epilogue({10, 10, 1, 1, 100, 100}, 2, e),
            (std::vector<int8_t>{6, 17, 2, 0, 51, 127}));  // 1.5 -> 2; 197 saturates
  e.relu = false;
  EXPECT_EQ(apply_float_epilogue({1}, 2, e), (std::vector<float>{1.5f}));
  EXPECT_EQ(apply_int8_epilogue({1, 1}, 2, e), (std::vector<int8_t>{2, -1}));

  Int8Epilogue alpha;  // a GEMM's: one scale for every output, no bias, no ReLU
  alpha.scale = {0.25f};
  alpha.relu = false;
  EXPECT_EQ(apply_int8_epilogue({-10, 6, 1000}, 3, alpha), (std::vector<int8_t>{-2, 2, 127}));
}

TEST(Int8Epilogue, RandomOnesSpreadOutputsOverTheInt8Range) {
  const ConvWorkload c = conv(2, 8, 8, 64, 32, 3, 1, 1, 1, 1);
  const Int8Epilogue e = random_conv_epilogue(c, 5);
  ASSERT_EQ(e.scale.size(), 32u);
  ASSERT_EQ(e.bias.size(), 32u);
  EXPECT_TRUE(e.relu);
  for (size_t k = 0; k < 32; ++k) {
    EXPECT_GT(e.scale[k], 0.0f);
    EXPECT_GE(e.bias[k], -16.0f);
    EXPECT_LT(e.bias[k], 16.0f);
  }
  const std::vector<int8_t> x = draw(c.x_elems(), 6), w = draw(c.w_elems(), 7);
  const std::vector<int8_t> y =
      apply_int8_epilogue(conv2d_int8_reference(c, x.data(), w.data()), c.co, e);
  size_t zeros = 0, saturated = 0, large = 0;
  for (const int8_t v : y) {
    zeros += v == 0;
    saturated += v == 127;
    large += v >= 32;
  }
  // About half the outputs are cut by ReLU; few saturate; many use the upper bits.
  EXPECT_GT(zeros, y.size() / 4);
  EXPECT_LT(zeros, 3 * y.size() / 4);
  EXPECT_LT(saturated, y.size() / 50);
  EXPECT_GT(large, y.size() / 10);

  GemmWorkload g;
  g.m = 4, g.n = 4, g.k = 1024;
  const Int8Epilogue ge = gemm_epilogue(g);
  ASSERT_EQ(ge.scale.size(), 1u);
  EXPECT_TRUE(ge.bias.empty());
  EXPECT_FALSE(ge.relu);
}

TEST(Int8Compare, OneStepIsAllowedTwoAreNot) {
  const std::vector<int8_t> ref = {0, 10, 20, 127};
  const std::vector<int8_t> near = {1, 9, 20, 126};
  Int8Comparison c = compare_int8(near.data(), ref);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.max_abs, 1.0);
  const std::vector<int8_t> off = {0, 12, 20, 127};
  c = compare_int8(off.data(), ref);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_EQ(c.max_abs, 2.0);
  // An output left poisoned (-128) is far from anything ReLU leaves.
  const std::vector<int8_t> poisoned = {-128, 10, 20, 127};
  EXPECT_EQ(compare_int8(poisoned.data(), ref).mismatches, 1u);
}

TEST(Int8Compare, Int32IsExactAndFloatRelative) {
  const std::vector<int32_t> acc = {5, -7, 100000};
  const std::vector<int32_t> same = acc, off = {5, -6, 100000};
  EXPECT_TRUE(compare_int32(same.data(), acc).ok());
  EXPECT_EQ(compare_int32(off.data(), acc).mismatches, 1u);

  const std::vector<float> ref = {0.0f, 50.0f, 100.0f};
  const std::vector<float> close = {0.0005f, 50.04f, 99.95f}, far = {0.0f, 50.2f, 100.0f};
  EXPECT_TRUE(compare_float(close.data(), ref).ok());
  EXPECT_EQ(compare_float(far.data(), ref).mismatches, 1u);
  const std::vector<float> nan = {std::nanf(""), 50.0f, 100.0f};
  const Int8Comparison c = compare_float(nan.data(), ref);
  EXPECT_EQ(c.nonfinite, 1u);
  EXPECT_FALSE(c.ok());
}

}  // namespace
}  // namespace tessel::bench
