#include "ops/nn_common.h"

#include "core/error.h"

namespace tessel::ops {

DType float_compute_dtype(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

Tensor to_compute_dtype(const Tensor& t) {
  DType c = float_compute_dtype(t.dtype());
  return t.dtype() == c ? t : t.cast(c);
}

void store_output(Tensor& out, const Tensor& result) {
  TESSEL_ICHECK(out.shape() == result.shape())
      << "result " << result.type_str() << " stored into output " << out.type_str();
  out = result.dtype() == out.dtype() ? result : result.cast(out.dtype());
}

void require_float_input(const ir::InferContext& ctx, int i, const char* what) {
  DType t = ctx.dtype(i);
  TESSEL_USER_CHECK(is_float(t)) << ctx.node().label() << ": input " << what << " has dtype "
                                 << dtype_name(t) << ", expected f32, f16, bf16 or f64";
}

void require_same_dtype(const ir::InferContext& ctx, int i, int j, const char* what_i,
                        const char* what_j) {
  TESSEL_USER_CHECK(ctx.dtype(i) == ctx.dtype(j))
      << ctx.node().label() << ": input " << what_j << " has dtype " << dtype_name(ctx.dtype(j))
      << ", expected the dtype of " << what_i << " (" << dtype_name(ctx.dtype(i)) << ")";
}

void require_rank(const ir::InferContext& ctx, int i, const char* what, int64_t min_rank,
                  int64_t max_rank) {
  int64_t r = ctx.rank(i);
  bool ok = r >= min_rank && (max_rank < 0 || r <= max_rank);
  if (ok) return;
  std::string expected = max_rank < 0 ? "at least " + std::to_string(min_rank)
                         : max_rank == min_rank
                             ? std::to_string(min_rank)
                             : std::to_string(min_rank) + " to " + std::to_string(max_rank);
  TESSEL_USER_ERROR() << ctx.node().label() << ": input " << what << " has rank " << r << " "
                      << shape_str(ctx.shape(i)) << ", expected rank " << expected;
}

}  // namespace tessel::ops
