// The nn op family: Gemm, MatMul and BatchNormalization here; Conv and ConvTranspose in
// conv_ops.cc; the pools in pool_ops.cc; LayerNormalization in layer_norm_ops.cc.
#include <cmath>

#include "core/error.h"
#include "ops/all_ops.h"
#include "ops/nn_common.h"
#include "ops/nn_gemm.h"
#include "ops/nn_matmul.h"

namespace tessel::ops {
namespace {

// ---- Gemm: Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A, B' likewise -------------

struct GemmDims {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

GemmDims gemm_dims(const ir::Node& node, const Shape& a, const Shape& b) {
  TESSEL_USER_CHECK(a.size() == 2 && b.size() == 2)
      << node.label() << ": inputs A " << shape_str(a) << " and B " << shape_str(b)
      << " must both have rank 2";
  GemmDims d;
  d.trans_a = node.get_int("transA", 0) != 0;
  d.trans_b = node.get_int("transB", 0) != 0;
  d.m = d.trans_a ? a[1] : a[0];
  d.k = d.trans_a ? a[0] : a[1];
  d.n = d.trans_b ? b[0] : b[1];
  int64_t kb = d.trans_b ? b[1] : b[0];
  TESSEL_USER_CHECK(kb == d.k) << node.label() << ": A " << shape_str(a)
                               << (d.trans_a ? " (transposed)" : "") << " and B " << shape_str(b)
                               << (d.trans_b ? " (transposed)" : "")
                               << " have different contraction dims (" << d.k << " vs " << kb
                               << ")";
  return d;
}

void infer_gemm(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "A");
  require_same_dtype(ctx, 0, 1, "A", "B");
  GemmDims d = gemm_dims(ctx.node(), ctx.shape(0), ctx.shape(1));
  if (ctx.has_input(2)) {
    require_same_dtype(ctx, 0, 2, "A", "C");
    // C broadcasts unidirectionally to (M, N): right-aligned, each dim equal or 1.
    const Shape& c = ctx.shape(2);
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      int64_t target = i + 1 == c.size() ? d.n : d.m;
      ok = c[i] == 1 || c[i] == target;
    }
    TESSEL_USER_CHECK(ok) << ctx.node().label() << ": C has shape " << shape_str(c)
                          << ", which does not broadcast to the output [" << d.m << "," << d.n
                          << "]";
  }
  ctx.set_output(0, ctx.dtype(0), {d.m, d.n});
}

template <typename T>
Tensor run_gemm(const ir::KernelContext& ctx, const GemmDims& d) {
  Tensor a = to_compute_dtype(ctx.input(0));
  Tensor b = to_compute_dtype(ctx.input(1));
  Tensor y(a.dtype(), {d.m, d.n});
  auto ma = MatrixRef<T>::row_major(a.data<T>(), a.dim(1));
  auto mb = MatrixRef<T>::row_major(b.data<T>(), b.dim(1));
  T* yd = y.data<T>();
  gemm(d.m, d.n, d.k, d.trans_a ? ma.transposed() : ma, d.trans_b ? mb.transposed() : mb, yd, d.n,
       false);
  const T alpha = static_cast<T>(ctx.node().get_float("alpha", 1.0));
  const T beta = static_cast<T>(ctx.node().get_float("beta", 1.0));
  if (alpha != T(1))
    for (int64_t i = 0; i < y.numel(); ++i) yd[i] *= alpha;
  if (ctx.has_input(2) && beta != T(0)) {
    Tensor c = to_compute_dtype(ctx.input(2));
    const T* cd = c.data<T>();
    // Strides of C over (M, N); a broadcast dim (absent or 1) has stride 0.
    const Shape& cs = c.shape();
    const int64_t cols = cs.empty() ? 1 : cs.back();
    const int64_t col_stride = cols == 1 ? 0 : 1;
    const int64_t row_stride = cs.size() == 2 && cs[0] != 1 ? cols : 0;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j)
        yd[i * d.n + j] += beta * cd[i * row_stride + j * col_stride];
  }
  return y;
}

void compute_gemm(ir::KernelContext& ctx) {
  GemmDims d = gemm_dims(ctx.node(), ctx.input(0).shape(), ctx.input(1).shape());
  bool f64 = float_compute_dtype(ctx.input(0).dtype()) == DType::kF64;
  store_output(ctx.output(0), f64 ? run_gemm<double>(ctx, d) : run_gemm<float>(ctx, d));
}

// ---- MatMul ---------------------------------------------------------------------------------

void infer_matmul(ir::InferContext& ctx) {
  DType t = ctx.dtype(0);
  TESSEL_USER_CHECK(is_float(t) || t == DType::kI32 || t == DType::kI64)
      << ctx.node().label() << ": input A has dtype " << dtype_name(t)
      << ", expected f32, f16, bf16, f64, i32 or i64";
  require_same_dtype(ctx, 0, 1, "A", "B");
  ctx.set_output(0, t, plan_matmul(ctx.node(), ctx.shape(0), ctx.shape(1)).out_shape);
}

template <typename T>
Tensor run_matmul_in(const MatMulPlan& p, const Tensor& a, const Tensor& b) {
  Tensor y(a.dtype(), p.out_shape);
  run_matmul(p, a.data<T>(), b.data<T>(), y.data<T>());
  return y;
}

void compute_matmul(ir::KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  MatMulPlan p = plan_matmul(ctx.node(), a.shape(), b.shape());
  Tensor y;
  if (!is_float(a.dtype())) {
    // Integers multiply exactly in int64; the cast back to i32 wraps, as int32 math does.
    y = run_matmul_in<int64_t>(p, a.cast(DType::kI64), b.cast(DType::kI64));
  } else if (float_compute_dtype(a.dtype()) == DType::kF64) {
    y = run_matmul_in<double>(p, a, b);
  } else {
    y = run_matmul_in<float>(p, to_compute_dtype(a), to_compute_dtype(b));
  }
  store_output(ctx.output(0), y);
}

// ---- BatchNormalization (inference) -----------------------------------------------------------

void infer_batch_norm(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  TESSEL_USER_CHECK(node.get_int("training_mode", 0) == 0)
      << node.label() << ": training mode not supported (training_mode=1); tessel runs "
      << "BatchNormalization in inference mode only";
  TESSEL_USER_CHECK(ctx.outputs().size() == 1)
      << node.label() << ": has " << ctx.outputs().size()
      << " outputs; only Y is supported (the running / saved statistics outputs exist only in "
         "training mode)";
  require_float_input(ctx, 0, "X");
  require_rank(ctx, 0, "X", 2);
  const int64_t channels = ctx.shape(0)[1];
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    require_float_input(ctx, i, names[i]);
    TESSEL_USER_CHECK(ctx.shape(i) == Shape{channels})
        << node.label() << ": input " << names[i] << " has shape " << shape_str(ctx.shape(i))
        << ", expected [" << channels << "] (one value per channel of X)";
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

// y = (x - mean) / sqrt(var + epsilon) * scale + B, folded per channel into y = x * a + b.
template <typename T>
Tensor run_batch_norm(const ir::KernelContext& ctx) {
  Tensor x = to_compute_dtype(ctx.input(0));
  const double epsilon = ctx.node().get_float("epsilon", 1e-5);
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t plane = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  Tensor y(x.dtype(), x.shape());
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  for (int64_t c = 0; c < channels; ++c) {
    const double a = ctx.input(1).get_f64(c) / std::sqrt(ctx.input(4).get_f64(c) + epsilon);
    const T scale = static_cast<T>(a);
    const T shift = static_cast<T>(ctx.input(2).get_f64(c) - ctx.input(3).get_f64(c) * a);
    for (int64_t n = 0; n < batch; ++n) {
      const int64_t base = (n * channels + c) * plane;
      for (int64_t i = base; i < base + plane; ++i) yd[i] = xd[i] * scale + shift;
    }
  }
  return y;
}

void compute_batch_norm(ir::KernelContext& ctx) {
  bool f64 = float_compute_dtype(ctx.input(0).dtype()) == DType::kF64;
  store_output(ctx.output(0), f64 ? run_batch_norm<double>(ctx) : run_batch_norm<float>(ctx));
}

}  // namespace

void register_nn_ops(ir::OpRegistry& r) {
  r.add({.name = "Gemm",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_gemm,
         .compute = compute_gemm});
  r.add({.name = "MatMul",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_matmul,
         .compute = compute_matmul});
  // Up to 5 outputs exist in the schema (opsets 9-13: Y, mean, var, saved mean, saved var);
  // infer() rejects all but Y since they are produced only in training mode.
  r.add({.name = "BatchNormalization",
         .min_inputs = 5,
         .max_inputs = 5,
         .max_outputs = 5,
         .infer = infer_batch_norm,
         .compute = compute_batch_norm});
  register_conv_ops(r);
  register_pool_ops(r);
  register_layer_norm_ops(r);
}

}  // namespace tessel::ops
