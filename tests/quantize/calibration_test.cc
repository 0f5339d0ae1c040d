// The calibration methods on tensors whose thresholds are known.
#include "quantize/calibration.h"

#include <gtest/gtest.h>

#include <random>

namespace tessel::quantize {
namespace {

Tensor f32(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<float>({n}, v);
}

// n values drawn from `dist`, seeded.
template <typename Dist>
std::vector<float> draw(Dist dist, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

RangeObserver observed(const Tensor& x) {
  RangeObserver o;
  o.observe_range(x);
  o.observe_histogram(x);
  return o;
}

TEST(Calibration, method_names_round_trip) {
  for (Method m : {Method::kMinMax, Method::kPercentile, Method::kEntropy})
    EXPECT_EQ(method_from_name(method_name(m)), m);
  EXPECT_FALSE(method_from_name("mse").has_value());
}

TEST(Calibration, minmax_is_the_largest_magnitude_over_all_samples) {
  RangeObserver o;
  o.observe_range(f32({-3, 1, 2}));
  o.observe_range(f32({0.5f, -2.5f}));
  EXPECT_DOUBLE_EQ(o.threshold(Method::kMinMax, 0), 3.0);
  EXPECT_TRUE(o.finite());
}

TEST(Calibration, non_finite_values_are_flagged_not_counted) {
  RangeObserver o;
  o.observe_range(f32({1, std::numeric_limits<float>::infinity()}));
  EXPECT_FALSE(o.finite());
  EXPECT_DOUBLE_EQ(o.max_abs(), 1.0);
}

TEST(Calibration, percentile_clips_a_rare_outlier) {
  std::vector<float> v(9999, 1.0f);
  v.push_back(100.0f);
  const RangeObserver o = observed(f32(v));
  // 1.0 lies in bin 20 of 2048 over [0, 100]: the threshold is that bin's upper edge.
  const double t = o.threshold(Method::kPercentile, 99.9);
  EXPECT_GT(t, 1.0);
  EXPECT_LT(t, 1.06);
  EXPECT_DOUBLE_EQ(o.threshold(Method::kPercentile, 100.0), 100.0);
}

TEST(Calibration, entropy_ignores_outliers_of_a_gaussian) {
  std::vector<float> v = draw(std::normal_distribution<float>(0, 1), 100000, 1);
  v.push_back(60.0f);
  const double t = observed(f32(v)).threshold(Method::kEntropy, 0);
  EXPECT_GT(t, 2.0);
  EXPECT_LT(t, 8.0);
}

TEST(Calibration, entropy_keeps_the_range_of_a_uniform_distribution) {
  const std::vector<float> v = draw(std::uniform_real_distribution<float>(-1, 1), 100000, 2);
  const double t = observed(f32(v)).threshold(Method::kEntropy, 0);
  EXPECT_GT(t, 0.9);
  EXPECT_LE(t, 1.0 + 1e-9);
}

TEST(Calibration, entropy_is_not_pulled_down_by_the_zeros_of_a_relu) {
  // Half exact zeros (a ReLU's), half uniform in (0, 1]: zeros are exact at any threshold.
  std::vector<float> v = draw(std::uniform_real_distribution<float>(0, 1), 100000, 3);
  for (size_t i = 1; i < v.size(); i += 2) v[i] = 0;
  const RangeObserver o = observed(f32(v));
  EXPECT_GT(o.threshold(Method::kEntropy, 0), 0.9);
  EXPECT_EQ(o.zeros(), 50000);
  // The percentile counts the zeros: the median of |x| is 0 (its bin's upper edge).
  EXPECT_LT(o.threshold(Method::kPercentile, 50.0), 0.001);
}

TEST(Calibration, entropy_clips_at_most_one_percent_of_a_distribution_away_from_zero) {
  // Magnitudes in [1.8, 3.8], as after a max-pool: without the bound KL picks about 0.24.
  const std::vector<float> v = draw(std::uniform_real_distribution<float>(1.8f, 3.8f), 100000, 4);
  EXPECT_GT(observed(f32(v)).threshold(Method::kEntropy, 0), 3.75);
}

TEST(Calibration, an_all_zero_tensor_has_threshold_zero) {
  const RangeObserver o = observed(f32({0, 0, 0}));
  for (Method m : {Method::kMinMax, Method::kPercentile, Method::kEntropy})
    EXPECT_EQ(o.threshold(m, 99.99), 0.0);
}

}  // namespace
}  // namespace tessel::quantize
