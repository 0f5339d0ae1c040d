// Host tensors: a dtype, a static shape and a contiguous row-major buffer.
// Copies share the buffer (constants in a Graph are cheap to copy); clone() copies the data.
// Reference kernels read and write elements through the typed data<T>() pointers or, when
// they are generic over dtypes, through get<double>/set with conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace tessel {

// C++ type of each storage dtype; f16/bf16 are stored as their raw uint16_t bits.
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }
template <> constexpr DType dtype_of<int8_t>() { return DType::kI8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kU8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kI64; }
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised tensor. Throws UserError if the shape is absurd.
  Tensor(DType dtype, Shape shape);

  template <typename T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values) {
    Tensor t(dtype_of<T>(), std::move(shape));
    TESSEL_ICHECK(static_cast<int64_t>(values.size()) == t.numel())
        << "from_vector: " << values.size() << " values for shape " << shape_str(t.shape());
    T* d = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
    return t;
  }
  // Any dtype, values given as doubles and converted (rounded) to the dtype.
  static Tensor from_doubles(DType dtype, Shape shape, const std::vector<double>& values);
  static Tensor scalar_i64(int64_t v) { return from_vector<int64_t>({}, {v}); }

  bool defined() const { return buf_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  std::byte* raw() { return buf_ ? buf_->data() : nullptr; }
  const std::byte* raw() const { return buf_ ? buf_->data() : nullptr; }

  template <typename T>
  T* data() {
    check_type<T>();
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_type<T>();
    return reinterpret_cast<const T*>(raw());
  }
  uint16_t* data_u16() {
    TESSEL_ICHECK(dtype_ == DType::kF16 || dtype_ == DType::kBF16) << "not a 16-bit float";
    return reinterpret_cast<uint16_t*>(raw());
  }
  const uint16_t* data_u16() const {
    TESSEL_ICHECK(dtype_ == DType::kF16 || dtype_ == DType::kBF16) << "not a 16-bit float";
    return reinterpret_cast<const uint16_t*>(raw());
  }

  // Element i (flat, row-major) converted to double / int64, for dtype-generic kernels.
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  // Stores v converted to this tensor's dtype (round to nearest for floats, truncation
  // toward zero for integers, v != 0 for bool).
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);

  std::vector<int64_t> to_i64_vector() const;
  std::vector<float> to_f32_vector() const;

  Tensor clone() const;
  Tensor cast(DType to) const;
  // Same data, new shape with equal element count (shares the buffer).
  Tensor reshaped(Shape shape) const;

  std::string type_str() const;  // "f32[1,3,224,224]"

 private:
  template <typename T>
  void check_type() const {
    TESSEL_ICHECK(dtype_ == dtype_of<T>())
        << "tensor of " << dtype_name(dtype_) << " accessed as " << dtype_name(dtype_of<T>());
  }

  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::vector<std::byte>> buf_;
};

// True if same dtype, shape and bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b);

// ||a - b||_2 / ||b||_2 over all elements of two tensors of one shape (any dtypes); NaN where
// either holds a NaN. 16-bit floats are read through a table of all 65,536 values: `tessel
// tune` checks every candidate's output with it, and through get_f64 a 25.7M-element output
// took 0.4-0.7 s.
double relative_l2_error(const Tensor& a, const Tensor& b);

// Uniform values from `seed` (splitmix64): floats in [-1, 1), integers in [0, 9] (a bool is
// that integer != 0). About 2 ns per element: random inputs for tens of millions of
// elements per call (std::uniform_real_distribution over mt19937_64 takes about 25 ns).
Tensor random_uniform(DType dtype, Shape shape, uint64_t seed);

}  // namespace tessel
