#include "quantize/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace tessel::quantize {

std::optional<Method> method_from_name(std::string_view name) {
  if (name == "minmax") return Method::kMinMax;
  if (name == "percentile") return Method::kPercentile;
  if (name == "entropy") return Method::kEntropy;
  return std::nullopt;
}

std::string_view method_name(Method m) {
  switch (m) {
    case Method::kMinMax:
      return "minmax";
    case Method::kPercentile:
      return "percentile";
    case Method::kEntropy:
      return "entropy";
  }
  return "?";
}

void RangeObserver::observe_range(const Tensor& x) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = std::abs(x.get_f64(i));
    if (!std::isfinite(v))
      finite_ = false;
    else
      max_abs_ = std::max(max_abs_, v);
  }
}

void RangeObserver::observe_histogram(const Tensor& x) {
  if (hist_.empty()) hist_.assign(kHistogramBins, 0.0);
  if (max_abs_ == 0) {
    zeros_ += static_cast<double>(x.numel());
    return;
  }
  const double per_bin = kHistogramBins / max_abs_;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = std::abs(x.get_f64(i));
    if (!std::isfinite(v)) continue;
    if (v == 0) {
      zeros_ += 1;
      continue;
    }
    const int64_t b = std::min<int64_t>(kHistogramBins - 1, static_cast<int64_t>(v * per_bin));
    hist_[b] += 1;
  }
}

double RangeObserver::threshold(Method method, double percentile) const {
  if (method == Method::kMinMax || max_abs_ == 0) return max_abs_;
  TESSEL_ICHECK(!hist_.empty()) << "histogram threshold asked before observe_histogram()";
  const double width = max_abs_ / kHistogramBins;
  if (method == Method::kEntropy) return entropy_threshold(hist_, width);
  std::vector<double> with_zeros = hist_;
  with_zeros[0] += zeros_;
  return percentile_threshold(with_zeros, width, percentile);
}

double percentile_threshold(const std::vector<double>& hist, double bin_width, double percentile) {
  double total = 0;
  for (double h : hist) total += h;
  if (total == 0) return 0;
  const double wanted = total * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double seen = 0;
  for (size_t b = 0; b < hist.size(); ++b) {
    seen += hist[b];
    if (seen >= wanted) return static_cast<double>(b + 1) * bin_width;
  }
  return static_cast<double>(hist.size()) * bin_width;
}

namespace {

// KL(p || q) of two unnormalised distributions of equal length; q is smoothed so that a bin
// where p has mass and q none costs much but not infinitely.
double kl_divergence(const std::vector<double>& p, std::vector<double> q) {
  double p_sum = 0, q_sum = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    p_sum += p[k];
    q_sum += q[k];
  }
  if (p_sum == 0 || q_sum == 0) return std::numeric_limits<double>::infinity();
  constexpr double kEps = 1e-4;
  double kl = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k] == 0) continue;
    const double pk = p[k] / p_sum;
    const double qk = std::max(q[k] / q_sum, kEps / static_cast<double>(p.size()));
    kl += pk * std::log(pk / qk);
  }
  return kl;
}

}  // namespace

double entropy_threshold(const std::vector<double>& hist, double bin_width) {
  constexpr int kLevels = 128;          // magnitudes 0..127 of symmetric int8
  constexpr double kMaxClipped = 0.01;  // the largest fraction of values a threshold may clip
  const int bins = static_cast<int>(hist.size());
  if (bins <= kLevels) return bins * bin_width;
  std::vector<double> suffix(bins + 1, 0.0);  // suffix[i] = sum of hist[i:]
  for (int b = bins - 1; b >= 0; --b) suffix[b] = suffix[b + 1] + hist[b];
  // KL compares shapes only: on a distribution that stays away from zero (a max-pool of
  // positive values) a sliver of the range with everything above it clipped into one bin
  // matches best. So no threshold that clips more than kMaxClipped of the values is tried.
  int first = kLevels;
  while (first < bins && suffix[first] > kMaxClipped * suffix[0]) ++first;
  double best_kl = std::numeric_limits<double>::infinity();
  int best = bins;
  std::vector<double> p, q;
  for (int i = first; i <= bins; ++i) {
    // p: the first i bins, with everything above clipped into the last one.
    p.assign(hist.begin(), hist.begin() + i);
    p[i - 1] += suffix[i];
    // q: the first i bins merged into 128 levels, each level's mass spread back evenly over
    // the bins of it that were not empty (an empty bin stays empty once quantized).
    q.assign(i, 0.0);
    for (int level = 0; level < kLevels; ++level) {
      const int start = static_cast<int>(static_cast<int64_t>(level) * i / kLevels);
      const int end = static_cast<int>(static_cast<int64_t>(level + 1) * i / kLevels);
      double mass = 0;
      int nonzero = 0;
      for (int k = start; k < end; ++k) {
        mass += hist[k];
        nonzero += hist[k] != 0;
      }
      for (int k = start; k < end; ++k)
        if (hist[k] != 0) q[k] = mass / nonzero;
    }
    const double kl = kl_divergence(p, q);
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return best * bin_width;
}

}  // namespace tessel::quantize
