// What the int8 benchmark computes, as plain CPU code: the int8 operands' random draws, int8
// conv2d and GEMM with exact int32 accumulation, the float epilogue that turns an accumulator
// into an int8 output, and the comparison of a library's or tessel's output with it.
//
// int8 conv2d: x int8 NHWC, w int8 (co, kh, kw, ci/groups), acc int32 NHWC, and per output
// channel k
//   y = saturate_int8(round_half_even(max(acc * scale[k] + bias[k], 0)))
// where scale[k] is the requantization multiplier (x_scale * w_scale[k] / y_scale) and bias[k]
// is in y's units. int8 GEMM: A (m, k) and B (n, k) int8 row-major (both K-contiguous), acc (m,
// n) int32, and C = saturate_int8(round_half_even(alpha * acc)): one scale, no bias, no ReLU.
// The float steps are fp32 multiply, then add, as the libraries' fp32 pointwise math does them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/workloads.h"

namespace tessel::bench {

struct Int8Epilogue {
  std::vector<float> scale;  // one per output channel, or a single one for every output
  std::vector<float> bias;   // one per output channel, or empty for none
  bool relu = true;

  // The epilogue in fp32 for an accumulator of output channel `channel`, before rounding.
  float apply(int32_t acc, int64_t channel) const;
};

// Round half to even, then saturate to [-128, 127]; NaN gives 0.
int8_t round_to_int8(float v);

// `count` int8 values uniform in [-127, 127] (symmetric quantization's range); value i depends
// only on (seed, i).
void fill_uniform_i8(int8_t* out, size_t count, uint64_t seed);

// A conv's epilogue for seeded random weights in [-127, 127]: scale[k] spreads acc * scale to a
// standard deviation of a few tens of steps (times a per-channel factor in [0.5, 1.5)), and
// bias[k] is uniform in [-16, 16), so outputs cover the int8 range with little saturation, and
// ReLU zeroes about half of them.
Int8Epilogue random_conv_epilogue(const ConvWorkload& c, uint64_t seed);
// A GEMM's: a single alpha chosen the same way.
Int8Epilogue gemm_epilogue(const GemmWorkload& g);

// Exact int32 accumulators of an int8 conv2d (NHWC output) and GEMM (row-major (m, n)), over
// the machine's threads.
std::vector<int32_t> conv2d_int8_reference(const ConvWorkload& c, const int8_t* x, const int8_t* w);
std::vector<int32_t> gemm_int8_reference(const GemmWorkload& g, const int8_t* a, const int8_t* b);

// The epilogue over a whole output whose innermost dimension is the channel (`channels` of
// them): rounded to int8, or left in fp32.
std::vector<int8_t> apply_int8_epilogue(const std::vector<int32_t>& acc, int64_t channels,
                                        const Int8Epilogue& e);
std::vector<float> apply_float_epilogue(const std::vector<int32_t>& acc, int64_t channels,
                                        const Int8Epilogue& e);

// An output against its reference. `steps`: int8 outputs may differ by one step (a rounding
// tie broken the other way after the library's own order of fp32 operations); fp32 outputs by
// 1e-3 relative; int32 accumulators not at all.
struct Int8Comparison {
  uint64_t mismatches = 0;  // outputs beyond the tolerance
  uint64_t nonfinite = 0;   // NaN or Inf (fp32 outputs only)
  double max_abs = 0;       // largest |out - ref| over the finite outputs
  double rel_l2 = 0;        // ||out - ref||_2 / ||ref||_2
  bool ok() const { return mismatches == 0 && nonfinite == 0; }
};
Int8Comparison compare_int8(const int8_t* out, const std::vector<int8_t>& ref);
Int8Comparison compare_float(const float* out, const std::vector<float>& ref);
Int8Comparison compare_int32(const int32_t* out, const std::vector<int32_t>& ref);

}  // namespace tessel::bench
