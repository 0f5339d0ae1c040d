// The integer contractions of the quantized family (opset 10 definitions, unchanged through
// opset 20): ConvInteger and MatMulInteger produce the int32 accumulator; QLinearConv and
// QLinearMatMul requantize it:
//   y = saturate(round_half_even(acc * (x_scale * w_scale / y_scale)) + y_zero_point)
// with the scale ratio formed in f32 as ONNX's reference does and the product in double.
// Rounding happens before the zero point is added, as in QuantizeLinear and onnxruntime
// (ONNX's numpy reference adds it first, which can differ on exact ties only).
#include "core/error.h"
#include "ops/conv_kernels.h"
#include "ops/nn_common.h"
#include "ops/nn_matmul.h"
#include "ops/quant_common.h"

namespace tessel::ops {
namespace {

// ---- ConvInteger and QLinearConv ----------------------------------------------------------

// Operand positions of the two convolution ops.
struct ConvInputs {
  int x, x_zp, w, w_zp;
};
constexpr ConvInputs kConvInteger{0, 2, 1, 3};
constexpr ConvInputs kQLinearConv{0, 2, 3, 5};

// Checks x, w and their zero points; returns the geometry.
ConvGeometry check_int_conv(const ir::InferContext& ctx, ConvInputs in) {
  require_quant_dtype(ctx, in.x, "x");
  require_quant_dtype(ctx, in.w, "w");
  ConvGeometry g = plan_conv(ctx.node(), ctx.shape(in.x), ctx.shape(in.w), "x", "w");
  if (ctx.has_input(in.x_zp)) {
    require_same_dtype(ctx, in.x, in.x_zp, "x", "x_zero_point");
    require_single_value(ctx, in.x_zp, "x_zero_point");
  }
  if (ctx.has_input(in.w_zp)) {
    require_same_dtype(ctx, in.w, in.w_zp, "w", "w_zero_point");
    require_single_or_vector(ctx, in.w_zp, "w_zero_point", g.out_channels, "output channel");
  }
  return g;
}

// The int32 accumulator (N, M, out...) of a quantized convolution, as int64 values already
// wrapped to int32, plus the optional int32 bias.
std::vector<int64_t> int_conv_accumulate(const ir::KernelContext& ctx, ConvInputs in,
                                         const Tensor* bias) {
  const Tensor& x = ctx.input(in.x);
  const Tensor& w = ctx.input(in.w);
  const ConvGeometry g = plan_conv(ctx.node(), x.shape(), w.shape(), "x", "w");
  const Tensor* x_zp = ctx.has_input(in.x_zp) ? &ctx.input(in.x_zp) : nullptr;
  const Tensor* w_zp = ctx.has_input(in.w_zp) ? &ctx.input(in.w_zp) : nullptr;
  const int64_t w_per_channel = g.out_channels == 0 ? 0 : w.numel() / g.out_channels;
  const bool w_per_axis = w_zp && w_zp->numel() > 1;
  std::vector<int64_t> xv = subtract_zero_point(x, x_zp, [](int64_t) { return 0; });
  std::vector<int64_t> wv =
      subtract_zero_point(w, w_zp, [&](int64_t i) { return w_per_axis ? i / w_per_channel : 0; });
  const Shape out = g.out_shape();
  std::vector<int64_t> acc(static_cast<size_t>(numel(out)));
  conv_forward<int64_t>(g, xv.data(), wv.data(), acc.data());
  const int64_t plane = numel(g.out_spatial);
  int64_t* a = acc.data();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t m = 0; m < g.out_channels; ++m) {
      const int64_t b = bias ? bias->get_i64(m) : 0;
      for (int64_t i = 0; i < plane; ++i, ++a) *a = wrap_to_i32(*a + b);
    }
  }
  return acc;
}

void infer_conv_integer(ir::InferContext& ctx) {
  ConvGeometry g = check_int_conv(ctx, kConvInteger);
  ctx.set_output(0, DType::kI32, g.out_shape());
}

void compute_conv_integer(ir::KernelContext& ctx) {
  std::vector<int64_t> acc = int_conv_accumulate(ctx, kConvInteger, nullptr);
  int32_t* y = ctx.output(0).data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(acc[i]);
}

// QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B.
void infer_qlinear_conv(ir::InferContext& ctx) {
  ConvGeometry g = check_int_conv(ctx, kQLinearConv);
  require_f32_scale(ctx, 1, "x_scale");
  require_single_value(ctx, 1, "x_scale");
  require_f32_scale(ctx, 4, "w_scale");
  require_single_or_vector(ctx, 4, "w_scale", g.out_channels, "output channel");
  require_f32_scale(ctx, 6, "y_scale");
  require_single_value(ctx, 6, "y_scale");
  require_quant_dtype(ctx, 7, "y_zero_point");
  require_single_value(ctx, 7, "y_zero_point");
  if (ctx.has_input(8)) {
    TESSEL_USER_CHECK(ctx.dtype(8) == DType::kI32 && ctx.shape(8) == Shape{g.out_channels})
        << ctx.node().label() << ": bias B has type " << ctx.input(8).str() << ", expected i32["
        << g.out_channels << "]";
  }
  ctx.set_output(0, ctx.dtype(7), g.out_shape());
}

void compute_qlinear_conv(ir::KernelContext& ctx) {
  const Tensor* bias = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  std::vector<int64_t> acc = int_conv_accumulate(ctx, kQLinearConv, bias);
  const Tensor& w_scale = ctx.input(4);
  const float x_scale = static_cast<float>(ctx.input(1).get_f64(0));
  const float y_scale = static_cast<float>(ctx.input(6).get_f64(0));
  const int64_t y_zp = ctx.input(7).get_i64(0);
  Tensor& y = ctx.output(0);
  const QuantRange range = quant_range(y.dtype());
  const int64_t batch = y.dim(0), channels = y.dim(1);
  const int64_t plane = batch * channels == 0 ? 0 : y.numel() / (batch * channels);
  int64_t i = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < channels; ++m) {
      const float ws = static_cast<float>(w_scale.get_f64(w_scale.numel() > 1 ? m : 0));
      const float multiplier = x_scale * ws / y_scale;
      for (int64_t end = i + plane; i < end; ++i)
        y.set_i64(i, quantize_value(static_cast<double>(acc[i]) * multiplier, y_zp, range));
    }
  }
}

// ---- MatMulInteger and QLinearMatMul ------------------------------------------------------

struct MatMulInputs {
  int a, a_zp, b, b_zp;
};
constexpr MatMulInputs kMatMulInteger{0, 2, 1, 3};
constexpr MatMulInputs kQLinearMatMul{0, 2, 3, 5};

MatMulPlan check_int_matmul(const ir::InferContext& ctx, MatMulInputs in) {
  require_quant_dtype(ctx, in.a, "a");
  require_quant_dtype(ctx, in.b, "b");
  MatMulPlan p = plan_matmul(ctx.node(), ctx.shape(in.a), ctx.shape(in.b), "a", "b");
  if (ctx.has_input(in.a_zp)) {
    require_same_dtype(ctx, in.a, in.a_zp, "a", "a_zero_point");
    matmul_param_index(ctx.node(), ctx.shape(in.a_zp), p.a_shape, true, "a_zero_point");
  }
  if (ctx.has_input(in.b_zp)) {
    require_same_dtype(ctx, in.b, in.b_zp, "b", "b_zero_point");
    matmul_param_index(ctx.node(), ctx.shape(in.b_zp), p.b_shape, false, "b_zero_point");
  }
  return p;
}

// The int32 accumulator of a quantized matmul (wrapped, held as int64), per the plan.
std::vector<int64_t> int_matmul_accumulate(const ir::KernelContext& ctx, MatMulInputs in,
                                           const MatMulPlan& p) {
  const Tensor& a = ctx.input(in.a);
  const Tensor& b = ctx.input(in.b);
  const Tensor* a_zp = ctx.has_input(in.a_zp) ? &ctx.input(in.a_zp) : nullptr;
  const Tensor* b_zp = ctx.has_input(in.b_zp) ? &ctx.input(in.b_zp) : nullptr;
  std::vector<int64_t> a_slot, b_slot;
  if (a_zp) a_slot = matmul_param_index(ctx.node(), a_zp->shape(), p.a_shape, true, "a_zero_point");
  if (b_zp)
    b_slot = matmul_param_index(ctx.node(), b_zp->shape(), p.b_shape, false, "b_zero_point");
  // a element i is row i / K (over all matrices); b element i is column i % N of matrix
  // i / (K * N).
  std::vector<int64_t> av =
      subtract_zero_point(a, a_zp, [&](int64_t i) { return a_slot[i / p.k]; });
  std::vector<int64_t> bv = subtract_zero_point(
      b, b_zp, [&](int64_t i) { return b_slot[i / (p.k * p.n) * p.n + i % p.n]; });
  std::vector<int64_t> acc(static_cast<size_t>(numel(p.out_shape)));
  run_matmul<int64_t>(p, av.data(), bv.data(), acc.data());
  for (int64_t& v : acc) v = wrap_to_i32(v);
  return acc;
}

void infer_matmul_integer(ir::InferContext& ctx) {
  ctx.set_output(0, DType::kI32, check_int_matmul(ctx, kMatMulInteger).out_shape);
}

void compute_matmul_integer(ir::KernelContext& ctx) {
  const MatMulPlan p =
      plan_matmul(ctx.node(), ctx.input(0).shape(), ctx.input(1).shape(), "a", "b");
  std::vector<int64_t> acc = int_matmul_accumulate(ctx, kMatMulInteger, p);
  int32_t* y = ctx.output(0).data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(acc[i]);
}

// QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
// y_zero_point. Scales share the per-row / per-column layout of their zero points.
void infer_qlinear_matmul(ir::InferContext& ctx) {
  MatMulPlan p = check_int_matmul(ctx, kQLinearMatMul);
  require_f32_scale(ctx, 1, "a_scale");
  matmul_param_index(ctx.node(), ctx.shape(1), p.a_shape, true, "a_scale");
  require_f32_scale(ctx, 4, "b_scale");
  matmul_param_index(ctx.node(), ctx.shape(4), p.b_shape, false, "b_scale");
  require_f32_scale(ctx, 6, "y_scale");
  require_single_value(ctx, 6, "y_scale");
  require_quant_dtype(ctx, 7, "y_zero_point");
  require_single_value(ctx, 7, "y_zero_point");
  ctx.set_output(0, ctx.dtype(7), p.out_shape);
}

void compute_qlinear_matmul(ir::KernelContext& ctx) {
  const MatMulPlan p =
      plan_matmul(ctx.node(), ctx.input(0).shape(), ctx.input(3).shape(), "a", "b");
  std::vector<int64_t> acc = int_matmul_accumulate(ctx, kQLinearMatMul, p);
  const Tensor& a_scale = ctx.input(1);
  const Tensor& b_scale = ctx.input(4);
  const std::vector<int64_t> a_slot =
      matmul_param_index(ctx.node(), a_scale.shape(), p.a_shape, true, "a_scale");
  const std::vector<int64_t> b_slot =
      matmul_param_index(ctx.node(), b_scale.shape(), p.b_shape, false, "b_scale");
  const float y_scale = static_cast<float>(ctx.input(6).get_f64(0));
  const int64_t y_zp = ctx.input(7).get_i64(0);
  Tensor& y = ctx.output(0);
  const QuantRange range = quant_range(y.dtype());
  for (size_t batch = 0; batch < p.a_index.size(); ++batch) {
    for (int64_t m = 0; m < p.m; ++m) {
      const float as = static_cast<float>(a_scale.get_f64(a_slot[p.a_index[batch] * p.m + m]));
      for (int64_t n = 0; n < p.n; ++n) {
        const float bs = static_cast<float>(b_scale.get_f64(b_slot[p.b_index[batch] * p.n + n]));
        const float multiplier = as * bs / y_scale;
        const int64_t i = (static_cast<int64_t>(batch) * p.m + m) * p.n + n;
        y.set_i64(i, quantize_value(static_cast<double>(acc[i]) * multiplier, y_zp, range));
      }
    }
  }
}

}  // namespace

void register_quant_contraction_ops(ir::OpRegistry& r) {
  r.add({.name = "ConvInteger",
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_conv_integer,
         .compute = compute_conv_integer});
  r.add({.name = "QLinearConv",
         .min_inputs = 8,
         .max_inputs = 9,
         .infer = infer_qlinear_conv,
         .compute = compute_qlinear_conv});
  r.add({.name = "MatMulInteger",
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_matmul_integer,
         .compute = compute_matmul_integer});
  r.add({.name = "QLinearMatMul",
         .min_inputs = 8,
         .max_inputs = 8,
         .infer = infer_qlinear_matmul,
         .compute = compute_qlinear_matmul});
}

}  // namespace tessel::ops
