// The int8 benchmark's CPU reference.
#include "bench/int8_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

#include "core/error.h"

namespace tessel::bench {
namespace {

// splitmix64 (Steele, Lea, Flood 2014), as the device fill uses: element i of a tensor is a
// function of (seed, i) alone.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from draw i of `seed`.
float uniform01(uint64_t seed, uint64_t i) {
  return static_cast<float>(splitmix64(splitmix64(seed) + i) >> 40) * (1.0f / 16777216.0f);
}

// The standard deviation of one product of two independent values uniform over the 255
// integers in [-127, 127]: each has variance (255^2 - 1) / 12.
constexpr double kProductSd = (255.0 * 255.0 - 1.0) / 12.0;
// acc * scale lands at about this standard deviation, in output steps.
constexpr double kOutputSd = 40.0;

// Runs body(begin, end) over [0, count) split across the machine's threads.
void parallel_for(int64_t count, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(count, 1));
  if (threads == 1) {
    body(0, count);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (count + threads - 1) / threads;
  for (int64_t begin = 0; begin < count; begin += chunk)
    pool.emplace_back(body, begin, std::min(count, begin + chunk));
  for (std::thread& t : pool) t.join();
}

int32_t dot(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += int32_t{a[i]} * int32_t{b[i]};
  return acc;
}

template <typename T>
double sum_squares(const std::vector<T>& v) {
  double s = 0;
  for (const T x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return s;
}

void finish(Int8Comparison& c, double err2, double ref2) {
  c.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

}  // namespace

float Int8Epilogue::apply(int32_t acc, int64_t channel) const {
  const size_t k = static_cast<size_t>(channel);
  float v = static_cast<float>(acc) * (scale.size() == 1 ? scale[0] : scale[k]);
  if (!bias.empty()) v += bias[k];
  return relu ? std::max(v, 0.0f) : v;
}

int8_t round_to_int8(float v) {
  if (std::isnan(v)) return 0;
  // nearbyint rounds in the current mode, which is round-half-to-even unless changed.
  return static_cast<int8_t>(std::clamp(std::nearbyint(v), -128.0f, 127.0f));
}

void fill_uniform_i8(int8_t* out, size_t count, uint64_t seed) {
  const uint64_t key = splitmix64(seed);
  for (size_t i = 0; i < count; ++i)
    out[i] = static_cast<int8_t>(static_cast<int>((splitmix64(key + i) >> 32) % 255) - 127);
}

Int8Epilogue random_conv_epilogue(const ConvWorkload& c, uint64_t seed) {
  const double reduction = static_cast<double>(c.kh * c.kw * (c.ci / c.groups));
  const double base = kOutputSd / (std::sqrt(reduction) * kProductSd);
  Int8Epilogue e;
  e.relu = true;
  for (int64_t k = 0; k < c.co; ++k) {
    const auto i = static_cast<uint64_t>(k);
    e.scale.push_back(static_cast<float>(base * (0.5 + uniform01(seed, 2 * i))));
    e.bias.push_back(32.0f * uniform01(seed, 2 * i + 1) - 16.0f);
  }
  return e;
}

Int8Epilogue gemm_epilogue(const GemmWorkload& g) {
  Int8Epilogue e;
  e.relu = false;
  e.scale = {static_cast<float>(kOutputSd / (std::sqrt(static_cast<double>(g.k)) * kProductSd))};
  return e;
}

std::vector<int32_t> conv2d_int8_reference(const ConvWorkload& c, const int8_t* x,
                                           const int8_t* w) {
  TESSEL_ICHECK(c.groups >= 1 && c.ci % c.groups == 0 && c.co % c.groups == 0)
      << c.name << ": groups " << c.groups << " do not divide ci " << c.ci << " and co " << c.co;
  const int64_t oh = c.oh(), ow = c.ow(), cig = c.ci / c.groups, cog = c.co / c.groups;
  std::vector<int32_t> y(c.y_elems());
  // One task per output row (n, oh).
  parallel_for(c.n * oh, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / oh, p = row % oh;
      for (int64_t q = 0; q < ow; ++q) {
        int32_t* out = &y[static_cast<size_t>((row * ow + q) * c.co)];
        for (int64_t k = 0; k < c.co; ++k) {
          const int64_t g = k / cog;
          int32_t acc = 0;
          for (int64_t r = 0; r < c.kh; ++r) {
            const int64_t ih = p * c.stride - c.pad + r * c.dilation;
            if (ih < 0 || ih >= c.h) continue;
            for (int64_t s = 0; s < c.kw; ++s) {
              const int64_t iw = q * c.stride - c.pad + s * c.dilation;
              if (iw < 0 || iw >= c.w) continue;
              acc += dot(x + ((n * c.h + ih) * c.w + iw) * c.ci + g * cig,
                         w + ((k * c.kh + r) * c.kw + s) * cig, cig);
            }
          }
          out[k] = acc;
        }
      }
    }
  });
  return y;
}

std::vector<int32_t> gemm_int8_reference(const GemmWorkload& g, const int8_t* a, const int8_t* b) {
  std::vector<int32_t> c(g.c_elems());
  parallel_for(g.m, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      for (int64_t n = 0; n < g.n; ++n)
        c[static_cast<size_t>(m * g.n + n)] = dot(a + m * g.k, b + n * g.k, g.k);
  });
  return c;
}

std::vector<int8_t> apply_int8_epilogue(const std::vector<int32_t>& acc, int64_t channels,
                                        const Int8Epilogue& e) {
  std::vector<int8_t> y(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    y[i] = round_to_int8(e.apply(acc[i], static_cast<int64_t>(i) % channels));
  return y;
}

std::vector<float> apply_float_epilogue(const std::vector<int32_t>& acc, int64_t channels,
                                        const Int8Epilogue& e) {
  std::vector<float> y(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    y[i] = e.apply(acc[i], static_cast<int64_t>(i) % channels);
  return y;
}

Int8Comparison compare_int8(const int8_t* out, const std::vector<int8_t>& ref) {
  Int8Comparison c;
  double err2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const int d = std::abs(int{out[i]} - int{ref[i]});
    c.mismatches += d > 1;
    c.max_abs = std::max(c.max_abs, static_cast<double>(d));
    err2 += static_cast<double>(d) * d;
  }
  finish(c, err2, sum_squares(ref));
  return c;
}

Int8Comparison compare_float(const float* out, const std::vector<float>& ref) {
  Int8Comparison c;
  double err2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++c.nonfinite;
      continue;
    }
    const double d = std::abs(static_cast<double>(out[i]) - ref[i]);
    c.mismatches += d > 1e-3 * std::max(1.0, std::abs(static_cast<double>(ref[i])));
    c.max_abs = std::max(c.max_abs, d);
    err2 += d * d;
  }
  finish(c, err2, sum_squares(ref));
  return c;
}

Int8Comparison compare_int32(const int32_t* out, const std::vector<int32_t>& ref) {
  Int8Comparison c;
  double err2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(static_cast<double>(out[i]) - ref[i]);
    c.mismatches += d != 0;
    c.max_abs = std::max(c.max_abs, d);
    err2 += d * d;
  }
  finish(c, err2, sum_squares(ref));
  return c;
}

}  // namespace tessel::bench
