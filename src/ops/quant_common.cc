#include "ops/quant_common.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessel::ops {

QuantRange quant_range(DType t) {
  TESSEL_ICHECK(t == DType::kU8 || t == DType::kI8) << "not a quantized dtype: " << dtype_name(t);
  return t == DType::kU8 ? QuantRange{0, 255} : QuantRange{-128, 127};
}

int64_t quantize_value(double v, int64_t zero_point, QuantRange range) {
  if (std::isnan(v)) return zero_point;
  // nearbyint rounds ties to even in the default rounding mode; clamping first keeps the
  // conversion to int64 defined for huge values.
  double r = std::nearbyint(std::clamp(v, -1e18, 1e18));
  return std::clamp(static_cast<int64_t>(r) + zero_point, range.lo, range.hi);
}

void require_quant_dtype(const ir::InferContext& ctx, int i, const char* what) {
  DType t = ctx.dtype(i);
  TESSEL_USER_CHECK(t == DType::kU8 || t == DType::kI8)
      << ctx.node().label() << ": input " << what << " has dtype " << dtype_name(t)
      << ", expected u8 or i8";
}

void require_f32_scale(const ir::InferContext& ctx, int i, const char* what) {
  TESSEL_USER_CHECK(ctx.dtype(i) == DType::kF32)
      << ctx.node().label() << ": scale " << what << " has dtype " << dtype_name(ctx.dtype(i))
      << ", expected f32";
}

void require_single_value(const ir::InferContext& ctx, int i, const char* what) {
  const Shape& s = ctx.shape(i);
  TESSEL_USER_CHECK(s.size() <= 1 && numel(s) == 1)
      << ctx.node().label() << ": input " << what << " has shape " << shape_str(s)
      << ", expected a scalar (per-tensor quantization)";
}

void require_single_or_vector(const ir::InferContext& ctx, int i, const char* what, int64_t count,
                              const char* per_what) {
  const Shape& s = ctx.shape(i);
  TESSEL_USER_CHECK((s.size() <= 1 && numel(s) == 1) || s == Shape{count})
      << ctx.node().label() << ": input " << what << " has shape " << shape_str(s)
      << ", expected a scalar or [" << count << "] (one value per " << per_what << ")";
}

std::vector<int64_t> matmul_param_index(const ir::Node& node, const Shape& param,
                                        const Shape& operand, bool per_row, const char* what) {
  // Per-row values live in (..., M, 1), per-column ones in (..., 1, N).
  Shape target = operand;
  target[target.size() - (per_row ? 1 : 2)] = 1;
  Shape p = param;
  if (per_row && p.size() == 1 && p[0] != 1) p.push_back(1);  // [M] means [M, 1]
  bool ok = p.size() <= target.size();
  for (size_t d = 0; ok && d < p.size(); ++d) {
    int64_t t = target[target.size() - p.size() + d];
    ok = p[d] == t || p[d] == 1;
  }
  TESSEL_USER_CHECK(ok) << node.label() << ": " << what << " has shape " << shape_str(param)
                        << ", expected a scalar or per-" << (per_row ? "row" : "column")
                        << " values broadcastable to " << shape_str(target);
  // Flat index into the parameter for each element of target (row-major).
  const size_t rank = target.size(), lead = rank - p.size();
  const std::vector<int64_t> p_strides = strides_of(p);
  std::vector<int64_t> index(static_cast<size_t>(numel(target)));
  std::vector<int64_t> coord(rank, 0);
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t at = 0;
    for (size_t d = lead; d < rank; ++d)
      if (p[d - lead] != 1) at += coord[d] * p_strides[d - lead];
    index[i] = at;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0 && ++coord[d] == target[d]; --d)
      coord[d] = 0;
  }
  return index;
}

}  // namespace tessel::ops
