// Pieces shared by the quantized op family (QuantizeLinear, DequantizeLinear, QLinearConv,
// QLinearMatMul, ConvInteger, MatMulInteger): the checks of scales and zero points, the
// rounding of real values to quantized integers, and the layout of per-row / per-column
// quantization parameters of matrix products.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::ops {

// The integer range of a quantized element type.
struct QuantRange {
  int64_t lo, hi;
};
QuantRange quant_range(DType t);

// The most 8-bit integers (at most 255 from their zero point) whose sum f32 holds exactly:
// tessel.QLinearReduceMean's GPU kernel sums codes in f32 over at most this many, and
// integer-readers makes that op only for means this small.
inline constexpr int64_t kExactInt8SumCount = (int64_t{1} << 24) / 255;

// round(v) with ties to even, plus the zero point, saturated to the range. NaN maps to the
// zero point (the code of real zero).
int64_t quantize_value(double v, int64_t zero_point, QuantRange range);

// UserErrors naming the node and the input (`what`) unless input i ...
// ... has a quantized dtype (u8 or i8);
void require_quant_dtype(const ir::InferContext& ctx, int i, const char* what);
// ... is an f32 scale;
void require_f32_scale(const ir::InferContext& ctx, int i, const char* what);
// ... holds one value (rank 0, or rank 1 of size 1);
void require_single_value(const ir::InferContext& ctx, int i, const char* what);
// ... holds one value or a 1-D tensor of `count` values (one per `per_what`).
void require_single_or_vector(const ir::InferContext& ctx, int i, const char* what, int64_t count,
                              const char* per_what);

// Per-row (for a matmul's A, of promoted shape (..., M, K)) or per-column (for B, of shape
// (..., K, N)) quantization parameters, as QLinearMatMul and MatMulInteger allow: one value,
// a 1-D tensor of M (rows) or N (columns) values shared by all matrices, or an N-D tensor
// broadcastable to (..., M, 1) or (..., 1, N). Returns, for each (matrix, row) of A or
// (matrix, column) of B in row-major order, the flat index of its value in the parameter.
// A parameter of any other shape is a UserError naming the node and `what`.
std::vector<int64_t> matmul_param_index(const ir::Node& node, const Shape& param,
                                        const Shape& operand, bool per_row, const char* what);

// Integer values of x widened to int64 minus their zero point: element i uses
// zero_point[slot(i)]; with no zero point the values are only widened.
template <typename Slot>
std::vector<int64_t> subtract_zero_point(const Tensor& x, const Tensor* zero_point, Slot slot) {
  std::vector<int64_t> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i)
    v[i] = x.get_i64(i) - (zero_point ? zero_point->get_i64(slot(i)) : 0);
  return v;
}

// ONNX's integer ops accumulate in int32 and may wrap; the kernels accumulate exactly in
// int64, and reducing modulo 2^32 gives the int32 result bit for bit.
inline int32_t wrap_to_i32(int64_t v) { return static_cast<int32_t>(v); }

}  // namespace tessel::ops
