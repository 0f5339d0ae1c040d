// Helpers shared by the reference kernels of the elementwise and tensor op families
// (ops/elementwise*.cc, ops/tensor*.cc, ops/resize*.cc): dtype checks, reading shape-like
// inputs ("shape", "axes", "pads", ...) and axis normalisation. Every error they raise is a
// UserError whose message starts with the node's label.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::ops {

inline constexpr DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
// Every dtype arithmetic is defined on: all but bool.
inline constexpr DType kNumericTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                          DType::kI8,  DType::kU8,  DType::kI32,  DType::kI64};
inline constexpr DType kIndexTypes[] = {DType::kI32, DType::kI64};

// Calls f(T{}) with T the C++ element type of `t`, which must be one of Ts (dtype_of<T>()).
// Kernels templated on the element type are instantiated only for the types they support:
//   visit_dtype<float, double>(x.dtype(), [&](auto tag) { using T = decltype(tag); ... });
template <typename... Ts, typename F>
void visit_dtype(DType t, F&& f) {
  const bool done = ((t == dtype_of<Ts>() ? (f(Ts{}), true) : false) || ...);
  TESSEL_ICHECK(done) << "no kernel instantiated for dtype " << dtype_name(t);
}

// UserError naming the node unless input `i` has one of the `allowed` dtypes.
void check_dtype(const ir::InferContext& ctx, int i, std::span<const DType> allowed);
// UserError naming the node unless inputs `i` and `j` have the same dtype.
void check_same_dtype(const ir::InferContext& ctx, int i, int j);

// The elements of `t`, an integer list such as Reshape's "shape" input. `t` must be i32 or
// i64 and of rank 0 or 1; `what` names the input in errors.
std::vector<int64_t> read_int_list(const ir::Node& node, const Tensor& t, const char* what);
// read_int_list of input i's value, which must be known (constant, folded or at run time).
std::vector<int64_t> require_int_list(const ir::InferContext& ctx, int i, const char* what);
// The elements of a float list input (Resize's "scales", "roi"), any float dtype, rank <= 1.
std::vector<double> read_float_list(const ir::Node& node, const Tensor& t, const char* what);

// `axis` in [-rank, rank) mapped to [0, rank); `what` names the attribute or input.
int64_t normalize_axis(const ir::Node& node, int64_t axis, int64_t rank, const char* what);
// Each axis normalised as above; a repeated axis is a UserError.
std::vector<int64_t> normalize_axes(const ir::Node& node, const std::vector<int64_t>& axes,
                                    int64_t rank, const char* what);

// Copies the bytes of `in` into `out` (same element count and dtype): Identity, Reshape and
// the other ops that only change the shape.
void copy_data(const Tensor& in, Tensor& out);

}  // namespace tessel::ops
