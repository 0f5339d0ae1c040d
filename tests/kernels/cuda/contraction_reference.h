// CPU reference of a generated contraction kernel, written for obviousness: it evaluates the
// index maps as they are defined (affine indices, out-of-range reads zero) in double
// precision, applies the epilogue steps as epilogue.h defines them and places each result by
// the store map. It shares no code with the emitter. Also: random operands rounded to their
// device dtypes, and the relative-L2 comparison the GPU tests apply.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/contraction_problems.h"
#include "core/half.h"
#include "core/shape.h"

namespace tessel::kernels::cuda::testing {

// Host copies of a problem's inputs, as floats already rounded to their device dtypes.
struct HostOperands {
  std::vector<float> a, b;
  std::vector<float> scale, bias;  // per output channel (operands 0 and 1, f32 on the device)
  std::vector<float> residual;     // output-buffer shaped (operand 2, the residual's dtype)
};

// Coordinates of `flat` over `dims` (row-major, outermost first) written into `coord`.
inline void unflatten(int64_t flat, const std::vector<int>& dims,
                      const std::vector<contraction::IterDim>& all, std::vector<int64_t>& coord) {
  for (int p = static_cast<int>(dims.size()) - 1; p >= 0; --p) {
    const int64_t e = all[dims[p]].extent;
    coord[dims[p]] = flat % e;
    flat /= e;
  }
}

// Flat element offset of `acc` at iteration point `coord`, or -1 if an index is out of range.
inline int64_t access_offset(const contraction::Access& acc, const std::vector<int64_t>& coord) {
  int64_t off = 0;
  for (size_t d = 0; d < acc.shape.size(); ++d) {
    int64_t ix = acc.index[d].offset;
    for (size_t j = 0; j < acc.index[d].coeffs.size(); ++j) ix += acc.index[d].coeffs[j] * coord[j];
    if (ix < 0 || ix >= acc.shape[d]) return -1;
    off = off * acc.shape[d] + ix;
  }
  return off;
}

// Number of elements of the buffer the kernel stores into.
inline int64_t output_elements(const TestProblem& p) {
  const auto& st = p.e.store;
  const Shape& cs = p.c.maps.c.shape;
  int64_t rows = numel(cs) / cs.back();
  if (st.kind == contraction::StoreMap::Kind::kDepthToSpace) {
    const int64_t b2 = int64_t{st.block} * st.block;
    const int64_t ld = st.ld ? st.ld : cs.back() / b2;
    return rows * b2 * ld;
  }
  return rows * (st.ld ? st.ld : cs.back());
}

// Output buffer position of C at tensor coordinates `ci` (C's own index), per the store map.
inline int64_t store_position(const TestProblem& p, const std::vector<int64_t>& ci) {
  const auto& st = p.e.store;
  const Shape& cs = p.c.maps.c.shape;
  const int64_t ch = ci.back();
  if (st.kind == contraction::StoreMap::Kind::kDepthToSpace) {
    // C is NHWC [img, oh, ow, ch]; out is [img, oh*b + i, ow*b + j, c].
    const int64_t b = st.block, oh_n = cs[1], ow_n = cs[2];
    const int64_t cout = cs[3] / (b * b);
    const int64_t ld = st.ld ? st.ld : cout;
    int64_t c, i, j;
    if (st.dcr) {
      i = ch / (b * cout);
      j = ch / cout % b;
      c = ch % cout;
    } else {
      c = ch / (b * b);
      i = ch / b % b;
      j = ch % b;
    }
    return ((ci[0] * oh_n * b + ci[1] * b + i) * (ow_n * b) + ci[2] * b + j) * ld + st.channel_offset + c;
  }
  const int64_t ld = st.ld ? st.ld : cs.back();
  int64_t row = 0;
  for (size_t d = 0; d + 1 < cs.size(); ++d) row = row * cs[d] + ci[d];
  if (st.kind == contraction::StoreMap::Kind::kNchw) {
    // Channels first: out[img, ch, oh, ow] with row = (img, oh, ow) flattened.
    const int64_t pixels = st.out_h * st.out_w;
    return (row / pixels * cs.back() + ch) * pixels + row % pixels;
  }
  const int64_t offset = st.kind == contraction::StoreMap::Kind::kChannelSlice ? st.channel_offset : 0;
  return row * ld + offset + ch;
}

// QuantizeLinear's rounding as ONNX runtimes compute it: the quotient in f32, then to nearest
// even. (In double, a clip bound of 1.5 over a scale of 0.2f is 7.4999999 and rounds to 7; the
// f32 quotient, the kernels' and onnxruntime's, is exactly the tie 7.5 and rounds to 8.)
inline double f32_rounded_quotient(double v, float scale) {
  return std::nearbyint(static_cast<double>(static_cast<float>(v) / scale));
}

inline double apply_step(const contraction::EpilogueStep& s, double v, int64_t ch, double residual,
                         const HostOperands& h) {
  using K = contraction::EpilogueOpKind;
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  switch (s.kind) {
    case K::kScale: return v * h.scale[ch];
    case K::kBias: return v + h.bias[ch];
    case K::kRelu: return v > 0 ? v : 0;
    case K::kLeakyRelu: return v < 0 ? s.alpha * v : v;
    case K::kClip: return std::min<double>(std::max<double>(v, s.alpha), s.beta);
    case K::kSigmoid: return sigmoid(v);
    case K::kHardSwish: return v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0);
    case K::kSilu: return v * sigmoid(v);
    case K::kGelu: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case K::kGeluTanh:
      return v / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case K::kResidualAdd: return v + residual;
    case K::kMul:
      return v * s.alpha;
    case K::kQuantize:
      return std::min(std::max(f32_rounded_quotient(v, s.alpha), -128.0), 127.0);
    case K::kScaledResidualAdd:
      return v + double(s.alpha) * residual;
    case K::kTanh: return std::tanh(v);
    case K::kMish: return v * std::tanh(v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
    case K::kHardSigmoid: return std::min(std::max(s.alpha * v + s.beta, 0.0), 1.0);
    case K::kElu: return v < 0 ? s.alpha * std::expm1(v) : v;
    case K::kRound: return f32_rounded_quotient(v, s.alpha);
    case K::kSiluQuantizedGate:
      return v * std::min(f32_rounded_quotient(sigmoid(v), s.alpha), 127.0) * static_cast<double>(s.beta);
    case K::kQuantizeUnit: {  // ops::apply_epilogue_step's: f32(v) saturated, the rest exact
      const double w = static_cast<float>(v);
      return std::isnan(w) ? s.alpha : std::nearbyint(s.alpha + std::min(std::max(w, 0.0), 1.0) * (s.beta - s.alpha));
    }
  }
  return v;
}

// The expected output buffer: NaN where the kernel must not write (outside a channel slice).
inline std::vector<double> reference_output(const TestProblem& p, const HostOperands& h) {
  const contraction::Contraction& c = p.c;
  const auto& dims = c.maps.dims;
  std::vector<double> out(output_elements(p), std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> coord(dims.size(), 0);
  std::vector<int64_t> a_off(c.k), b_off(c.n * c.k);
  std::vector<int64_t> ci(c.maps.c.shape.size());
  for (int64_t bt = 0; bt < c.batch; ++bt) {
    unflatten(bt, c.batch_dims, dims, coord);
    for (int64_t n = 0; n < c.n; ++n) {
      unflatten(n, c.n_dims, dims, coord);
      for (int64_t k = 0; k < c.k; ++k) {
        unflatten(k, c.k_dims, dims, coord);
        b_off[n * c.k + k] = access_offset(c.maps.b, coord);
      }
    }
    for (int64_t m = 0; m < c.m; ++m) {
      unflatten(m, c.m_dims, dims, coord);
      for (int64_t k = 0; k < c.k; ++k) {
        unflatten(k, c.k_dims, dims, coord);
        a_off[k] = access_offset(c.maps.a, coord);
      }
      for (int64_t n = 0; n < c.n; ++n) {
        double acc = 0;
        const int64_t* bo = &b_off[n * c.k];
        for (int64_t k = 0; k < c.k; ++k) {
          if (a_off[k] >= 0 && bo[k] >= 0) acc += double(h.a[a_off[k]]) * h.b[bo[k]];
        }
        unflatten(n, c.n_dims, dims, coord);
        for (size_t d = 0; d < ci.size(); ++d) {
          const auto& ix = c.maps.c.index[d];
          ci[d] = ix.offset;
          for (size_t j = 0; j < ix.coeffs.size(); ++j) ci[d] += ix.coeffs[j] * coord[j];
        }
        const int64_t pos = store_position(p, ci);
        const double residual = h.residual.empty() ? 0.0 : h.residual[pos];
        double v = acc;
        for (const auto& s : p.e.steps) v = apply_step(s, v, ci.back(), residual, h);
        out[pos] = v;
      }
    }
  }
  return out;
}

// ---- Test data and comparison -------------------------------------------------------------
inline uint16_t to_bits(float v, DType t) { return t == DType::kBF16 ? float_to_bf16(v) : float_to_half(v); }
inline float from_bits(uint16_t v, DType t) { return t == DType::kBF16 ? bf16_to_float(v) : half_to_float(v); }

// Random int8 values, never zero (so that a dropped term or an unwritten element shows):
// magnitudes 1..max_abs, either sign. `bytes` receives the device image.
inline std::vector<float> random_int8(std::mt19937& rng, int64_t n, std::vector<char>& bytes,
                                      int max_abs = 127) {
  std::uniform_int_distribution<int> mag(1, max_abs);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  bytes.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int x = neg(rng) ? -mag(rng) : mag(rng);
    bytes[i] = static_cast<char>(static_cast<signed char>(x));
    v[i] = static_cast<float>(x);
  }
  return v;
}

// Random uint8 values (onnxruntime's activations), never zero: 1..max.
inline std::vector<float> random_uint8(std::mt19937& rng, int64_t n, std::vector<char>& bytes, int max = 255) {
  std::uniform_int_distribution<int> value(1, max);
  std::vector<float> v(n);
  bytes.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int x = value(rng);
    bytes[i] = static_cast<char>(static_cast<unsigned char>(x));
    v[i] = static_cast<float>(x);
  }
  return v;
}

// Random values in [lo, hi] rounded to `t` (int8: random_int8, uint8: random_uint8); `bytes`
// receives the device image.
inline std::vector<float> random_tensor(std::mt19937& rng, int64_t n, DType t, std::vector<char>& bytes,
                                 float lo = -1.0f, float hi = 1.0f) {
  if (t == DType::kI8) return random_int8(rng, n, bytes);
  if (t == DType::kU8) return random_uint8(rng, n, bytes);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  bytes.resize(n * dtype_size(t));
  for (int64_t i = 0; i < n; ++i) {
    float x = dist(rng);
    if (t == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &x, 4);
    } else {
      const uint16_t h = to_bits(x, t);
      x = from_bits(h, t);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    v[i] = x;
  }
  return v;
}

inline std::vector<double> to_doubles(const std::vector<char>& bytes, DType t) {
  const size_t n = bytes.size() / dtype_size(t);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::kI8) {
      v[i] = static_cast<signed char>(bytes[i]);
    } else if (t == DType::kU8) {
      v[i] = static_cast<unsigned char>(bytes[i]);
    } else if (t == DType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      v[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = from_bits(h, t);
    }
  }
  return v;
}

// Relative L2 error over positions the reference defines; counts NaN outputs there and
// writes to positions it leaves undefined (outside a channel slice, which must stay poison).
struct Comparison {
  double rel_l2 = 0;
  int64_t nan = 0, stray_writes = 0;
};
inline Comparison compare(const std::vector<double>& got, const std::vector<double>& want) {
  Comparison c;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      if (!std::isnan(got[i])) ++c.stray_writes;
      continue;
    }
    if (std::isnan(got[i])) {
      ++c.nan;
      continue;
    }
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  c.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  return c;
}

}  // namespace tessel::kernels::cuda::testing
