#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/half.h"

namespace tessel {

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(tessel::numel(shape_)) {
  buf_ = std::make_shared<std::vector<std::byte>>(nbytes());
}

Tensor Tensor::from_doubles(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  TESSEL_ICHECK(static_cast<int64_t>(values.size()) == t.numel())
      << "from_doubles: " << values.size() << " values for " << t.type_str();
  for (size_t i = 0; i < values.size(); ++i) t.set_f64(static_cast<int64_t>(i), values[i]);
  return t;
}

double Tensor::get_f64(int64_t i) const {
  const std::byte* p = raw();
  switch (dtype_) {
    case DType::kF32: return reinterpret_cast<const float*>(p)[i];
    case DType::kF64: return reinterpret_cast<const double*>(p)[i];
    case DType::kF16: return half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return bf16_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kI8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::kBool: return reinterpret_cast<const bool*>(p)[i] ? 1.0 : 0.0;
  }
  TESSEL_ICHECK(false) << "unhandled dtype";
  return 0;
}

int64_t Tensor::get_i64(int64_t i) const {
  const std::byte* p = raw();
  switch (dtype_) {
    case DType::kI8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::kBool: return reinterpret_cast<const bool*>(p)[i] ? 1 : 0;
    default: {
      double v = get_f64(i);
      if (std::isnan(v)) return 0;
      if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(v);
    }
  }
}

namespace {
template <typename I>
I saturate_cast_int(double v) {
  if (std::isnan(v)) return 0;
  double lo = static_cast<double>(std::numeric_limits<I>::min());
  double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}
}  // namespace

void Tensor::set_f64(int64_t i, double v) {
  std::byte* p = raw();
  switch (dtype_) {
    case DType::kF32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::kF64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v));
      return;
    case DType::kBF16:
      reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v));
      return;
    case DType::kI8: reinterpret_cast<int8_t*>(p)[i] = saturate_cast_int<int8_t>(v); return;
    case DType::kU8: reinterpret_cast<uint8_t*>(p)[i] = saturate_cast_int<uint8_t>(v); return;
    case DType::kI32: reinterpret_cast<int32_t*>(p)[i] = saturate_cast_int<int32_t>(v); return;
    case DType::kI64: reinterpret_cast<int64_t*>(p)[i] = saturate_cast_int<int64_t>(v); return;
    case DType::kBool: reinterpret_cast<bool*>(p)[i] = v != 0.0; return;
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  std::byte* p = raw();
  switch (dtype_) {
    case DType::kI8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::kU8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::kI32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::kI64: reinterpret_cast<int64_t*>(p)[i] = v; return;
    case DType::kBool: reinterpret_cast<bool*>(p)[i] = v != 0; return;
    default: set_f64(i, static_cast<double>(v)); return;
  }
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> r(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r[i] = get_i64(i);
  return r;
}

std::vector<float> Tensor::to_f32_vector() const {
  std::vector<float> r(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) r[i] = static_cast<float>(get_f64(i));
  return r;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::cast(DType to) const {
  if (to == dtype_) return clone();
  Tensor t(to, shape_);
  bool int_path = !is_float(dtype_) && !is_float(to);
  for (int64_t i = 0; i < numel_; ++i) {
    if (int_path)
      t.set_i64(i, get_i64(i));
    else
      t.set_f64(i, get_f64(i));
  }
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  TESSEL_ICHECK(tessel::numel(shape) == numel_)
      << "reshape " << shape_str(shape_) << " to " << shape_str(shape);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::string Tensor::type_str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.nbytes() == 0) return true;
  return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

double relative_l2_error(const Tensor& a, const Tensor& b) {
  TESSEL_ICHECK(a.shape() == b.shape())
      << "relative_l2_error of " << a.type_str() << " and " << b.type_str();
  double num = 0, den = 0;
  if (a.dtype() == DType::kF16 && b.dtype() == DType::kF16) {
    static const std::vector<float> table = [] {
      std::vector<float> t(65536);
      for (uint32_t h = 0; h < t.size(); ++h) t[h] = half_to_float(static_cast<uint16_t>(h));
      return t;
    }();
    const uint16_t* pa = a.data_u16();
    const uint16_t* pb = b.data_u16();
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = table[pa[i]], y = table[pb[i]];
      num += (x - y) * (x - y);
      den += y * y;
    }
  } else {
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = a.get_f64(i), y = b.get_f64(i);
      num += (x - y) * (x - y);
      den += y * y;
    }
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

Tensor random_uniform(DType dtype, Shape shape, uint64_t seed) {
  Tensor t(dtype, std::move(shape));
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  // The top 24 bits as a float in [-1, 1): exact in every float type here.
  auto uniform = [&next] { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; };
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::kF16: {
      uint16_t* d = t.data_u16();
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(uniform());
      break;
    }
    case DType::kF32: {
      float* d = t.data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = uniform();
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) {
        if (is_float(dtype))
          t.set_f64(i, uniform());
        else
          t.set_i64(i, static_cast<int64_t>(next() % 10));
      }
  }
  return t;
}

}  // namespace tessel
