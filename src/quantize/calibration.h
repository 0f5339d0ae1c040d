// Calibration of activation ranges for symmetric int8: an observer per tensor collects the
// largest magnitude and then a histogram of magnitudes, and a method turns them into the
// threshold T that maps to 127 (scale = T / 127):
//   minmax      T = max |x| over the calibration set;
//   percentile  T = the p-th percentile of |x| (read off the histogram);
//   entropy     TensorRT's method: the T that minimises the KL divergence between the
//               histogram of |x| (values above T clipped into the last kept bin) and its
//               128-level quantization. Exact zeros are left out of this histogram: every
//               T represents them exactly, and after a ReLU their spike in the first bin
//               would outweigh everything else and pull T down to a sliver of the range.
//               Nor may T clip more than 1% of the values: KL sees only the shape, and a
//               distribution that stays away from zero matches best when cut to a sliver.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace tessel::quantize {

enum class Method { kMinMax, kPercentile, kEntropy };
std::optional<Method> method_from_name(std::string_view name);
std::string_view method_name(Method m);

// Bins of the magnitude histogram, as TensorRT uses.
constexpr int kHistogramBins = 2048;

// Observes one tensor over the calibration set in two passes: observe_range() on every sample
// first, then (percentile and entropy only) observe_histogram() on every sample again.
class RangeObserver {
 public:
  void observe_range(const Tensor& x);
  void observe_histogram(const Tensor& x);
  double max_abs() const { return max_abs_; }
  bool finite() const { return finite_; }
  // Nonzero magnitudes; exact zeros are counted apart.
  const std::vector<double>& histogram() const { return hist_; }
  double zeros() const { return zeros_; }
  // The threshold by `method`; percentile in percent (99.99).
  double threshold(Method method, double percentile) const;

 private:
  double max_abs_ = 0;
  bool finite_ = true;
  double zeros_ = 0;
  std::vector<double> hist_;  // kHistogramBins bins of nonzero |x| over [0, max_abs_]
};

// The methods on a histogram of magnitudes whose bins each span `bin_width`.
double percentile_threshold(const std::vector<double>& hist, double bin_width, double percentile);
double entropy_threshold(const std::vector<double>& hist, double bin_width);

}  // namespace tessel::quantize
