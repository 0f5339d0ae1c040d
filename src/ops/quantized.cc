// The quantized op family: QuantizeLinear and DequantizeLinear here (per-tensor, and per-axis
// since opset 13), tessel.MulQuantizeLinear, a Mul whose product one QuantizeLinear reads
// (fuse-mul-quantize, integer-readers), and tessel.QLinearReduceMean, a mean of a quantized
// tensor requantized (integer-readers); the integer contractions (QLinearConv, QLinearMatMul,
// ConvInteger, MatMulInteger) in quant_contractions.cc.
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "ops/all_ops.h"
#include "ops/broadcast.h"
#include "ops/nn_common.h"
#include "ops/quant_common.h"
#include "ops/reduce_common.h"

namespace tessel::ops {
namespace {

// Where element i of x finds its scale and zero point: (i / inner) % count, i.e. its index
// along `axis` for per-axis quantization, and always 0 (count = 1) for per-tensor.
struct AxisParams {
  int64_t count = 1;
  int64_t inner = 1;
  int64_t slot(int64_t i) const { return (i / inner) % count; }
};

// Validates scale (input 1) and the optional zero point (input 2) against x (input 0):
// a single value is per-tensor; a 1-D tensor of x.shape[axis] values is per-axis (opset 13+).
AxisParams plan_axis_params(const ir::InferContext& ctx, const char* scale_name,
                            const char* zp_name) {
  const ir::Node& node = ctx.node();
  require_float_input(ctx, 1, scale_name);
  // One value may be spelt [] or [1], and quantizers mix the two (onnxruntime writes a scale
  // of [1] with a zero point of [] for biases at opset 10-12), so single values only need to
  // agree in count; per-axis parameters must agree in shape, as onnxruntime requires.
  if (ctx.has_input(2)) {
    const bool both_single = numel(ctx.shape(1)) == 1 && ctx.shape(1).size() <= 1 &&
                             numel(ctx.shape(2)) == 1 && ctx.shape(2).size() <= 1;
    TESSEL_USER_CHECK(both_single || ctx.shape(2) == ctx.shape(1))
        << node.label() << ": zero point " << zp_name << " has shape " << shape_str(ctx.shape(2))
        << ", expected the shape of " << scale_name << " " << shape_str(ctx.shape(1));
  }
  TESSEL_USER_CHECK(!node.has_attr("block_size") || node.get_int("block_size", 0) == 0)
      << node.label() << ": blocked quantization (block_size, opset 21) is not supported";
  const Shape& x = ctx.shape(0);
  const Shape& s = ctx.shape(1);
  if (s.size() <= 1 && numel(s) == 1) return {};
  TESSEL_USER_CHECK(ctx.opset() >= 13)
      << node.label() << ": " << scale_name << " has shape " << shape_str(s)
      << ", expected a scalar: per-axis quantization needs opset 13 (model has opset "
      << ctx.opset() << ")";
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis_attr = node.get_int("axis", 1);
  TESSEL_USER_CHECK(axis_attr >= -rank && axis_attr < rank)
      << node.label() << ": axis " << axis_attr << " out of range for input of shape "
      << shape_str(x);
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  TESSEL_USER_CHECK(s == Shape{x[axis]})
      << node.label() << ": " << scale_name << " has shape " << shape_str(s)
      << ", expected a scalar or [" << x[axis] << "] (one value per index of axis " << axis
      << " of " << shape_str(x) << ")";
  AxisParams p;
  p.count = x[axis];
  for (int64_t d = axis + 1; d < rank; ++d) p.inner *= x[d];
  return p;
}

// Recomputes the parameter layout at run time from shapes and attributes (they were
// validated by infer()).
AxisParams axis_params_of(const ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  if (s.numel() == 1) return {};
  int64_t axis = ctx.node().get_int("axis", 1);
  if (axis < 0) axis += x.rank();
  AxisParams p;
  p.count = x.dim(axis);
  for (int64_t d = axis + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  return p;
}

// ---- QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point) -------------

void infer_quantize(ir::InferContext& ctx) {
  DType x = ctx.dtype(0);
  TESSEL_USER_CHECK(is_float(x) || x == DType::kI32)
      << ctx.node().label() << ": input x has dtype " << dtype_name(x)
      << ", expected f32, f16, bf16, f64 or i32";
  plan_axis_params(ctx, "y_scale", "y_zero_point");
  DType out = DType::kU8;  // the default without a zero point
  if (ctx.has_input(2)) {
    require_quant_dtype(ctx, 2, "y_zero_point");
    out = ctx.dtype(2);
  }
  ctx.set_output(0, out, ctx.shape(0));
}

// x / scale rounded the way ONNX's reference computes it: in x's own float precision (so a
// quotient that is a tie in f32 stays a tie), in double for i32 and f64.
double quantize_quotient(DType x_dtype, double x, double scale) {
  switch (x_dtype) {
    case DType::kF32:
      return static_cast<float>(x) / static_cast<float>(scale);
    case DType::kF16:
      return half_to_float(float_to_half(static_cast<float>(x) / static_cast<float>(scale)));
    case DType::kBF16:
      return bf16_to_float(float_to_bf16(static_cast<float>(x) / static_cast<float>(scale)));
    default:
      return x / scale;
  }
}

void compute_quantize(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.output(0);
  const AxisParams p = axis_params_of(ctx);
  const QuantRange range = quant_range(y.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t slot = p.slot(i);
    const double q = quantize_quotient(x.dtype(), x.get_f64(i), scale.get_f64(slot));
    y.set_i64(i, quantize_value(q, zp ? zp->get_i64(slot) : 0, range));
  }
}

// ---- DequantizeLinear: y = (x - x_zero_point) * x_scale, in the scale's dtype ---------------

void infer_dequantize(ir::InferContext& ctx) {
  DType x = ctx.dtype(0);
  TESSEL_USER_CHECK(x == DType::kU8 || x == DType::kI8 || x == DType::kI32)
      << ctx.node().label() << ": input x has dtype " << dtype_name(x)
      << ", expected u8, i8 or i32";
  plan_axis_params(ctx, "x_scale", "x_zero_point");
  if (ctx.has_input(2)) require_same_dtype(ctx, 0, 2, "x", "x_zero_point");
  ctx.set_output(0, ctx.dtype(1), ctx.shape(0));
}

void compute_dequantize(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.output(0);
  const AxisParams p = axis_params_of(ctx);
  // ONNX's reference subtracts and multiplies in f32 (x.astype(float32)), then casts to the
  // scale's dtype; f64 scales compute in double.
  const bool f64 = scale.dtype() == DType::kF64;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t slot = p.slot(i);
    const double zero = zp ? static_cast<double>(zp->get_i64(slot)) : 0.0;
    if (f64) {
      y.set_f64(i, (static_cast<double>(x.get_i64(i)) - zero) * scale.get_f64(slot));
    } else {
      const float d = static_cast<float>(x.get_i64(i)) - static_cast<float>(zero);
      y.set_f64(i, d * static_cast<float>(scale.get_f64(slot)));
    }
  }
}

// ---- tessel.MulQuantizeLinear(a, b, y_scale[, y_zero_point[, a_scale[, a_zero_point]]]) ------
// QuantizeLinear(Mul(a, b), y_scale, y_zero_point) as one op, by the reciprocal as the int8
// epilogues quantize (ops::fold_quantize_scales): y = saturate(round_half_even(p * r) + z) with
// p = a * b and r = 1 / y_scale, each rounded to f32. That is the pair's value up to one f32
// rounding (a result within an ulp of a rounding tie may land one step away) and nearer the
// float model than an fp16 engine's pair, which rounded the product to f16 between the two.
// a and b broadcast (a squeeze-excite gate [N,1,1,C] against its features [N,H,W,C]); the
// scale and zero point are per tensor.
//
// With a_scale, a is a quantized tensor (i8 or u8) read as DequantizeLinear(a, a_scale,
// a_zero_point) would give it (integer-readers: the features stay int8 between the conv that
// writes them and the gate): p = f32(a - a_zero_point) * b and r = a_scale / y_scale, each
// rounded to f32.

// A quantized input of a fused op: `data` (input `data`) i8 or u8, dequantized by one float
// value (input `scale`) and an optional zero point of its dtype (input scale + 1).
void require_quantized_input(const ir::InferContext& ctx, int data, const char* data_name, int scale,
                             const char* scale_name, const char* zp_name) {
  require_quant_dtype(ctx, data, data_name);
  require_float_input(ctx, scale, scale_name);
  require_single_value(ctx, scale, scale_name);
  if (!ctx.has_input(scale + 1)) return;
  require_same_dtype(ctx, data, scale + 1, data_name, zp_name);
  require_single_value(ctx, scale + 1, zp_name);
}

// The quantized output of a fused op: its scale (input `scale`) one float value, its zero point
// (input scale + 1, optional) one 8-bit value whose dtype is the output's, u8 without it
// (QuantizeLinear's rule).
DType quantized_output(const ir::InferContext& ctx, int scale, const char* scale_name, const char* zp_name) {
  require_float_input(ctx, scale, scale_name);
  require_single_value(ctx, scale, scale_name);
  if (!ctx.has_input(scale + 1)) return DType::kU8;
  require_quant_dtype(ctx, scale + 1, zp_name);
  require_single_value(ctx, scale + 1, zp_name);
  return ctx.dtype(scale + 1);
}

void infer_mul_quantize(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  const bool quantized_a = ctx.has_input(4);
  if (quantized_a) {
    require_quantized_input(ctx, 0, "a", 4, "a_scale", "a_zero_point");
    require_float_input(ctx, 1, "b");
  } else {
    TESSEL_USER_CHECK(!ctx.has_input(5)) << node.label() << ": a_zero_point given without a_scale";
    require_float_input(ctx, 0, "a");
    require_same_dtype(ctx, 0, 1, "a", "b");
  }
  const DType out = quantized_output(ctx, 2, "y_scale", "y_zero_point");
  ctx.set_output(0, out, broadcast_shapes(ctx.shape(0), ctx.shape(1), node.label()));
}

void compute_mul_quantize(ir::KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool quantized_a = ctx.has_input(4);
  const float y_scale = static_cast<float>(ctx.input(2).get_f64(0));
  const float r = quantized_a ? static_cast<float>(ctx.input(4).get_f64(0)) / y_scale : 1.0f / y_scale;
  const float a_zero = ctx.has_input(5) ? static_cast<float>(ctx.input(5).get_i64(0)) : 0.0f;
  const int64_t zero = ctx.has_input(3) ? ctx.input(3).get_i64(0) : 0;
  Tensor& y = ctx.output(0);
  const QuantRange range = quant_range(y.dtype());
  const BroadcastRuns<2> runs(y.shape(), {&a.shape(), &b.shape()});
  runs.for_each([&](int64_t out, int64_t count, const std::array<int64_t, 2>& in,
                    const std::array<int64_t, 2>& step) {
    for (int64_t i = 0; i < count; ++i) {
      const float av = static_cast<float>(a.get_f64(in[0] + i * step[0])) - a_zero;
      const float p = av * static_cast<float>(b.get_f64(in[1] + i * step[1]));
      y.set_i64(out + i, quantize_value(p * r, zero, range));
    }
  });
}

// ---- tessel.QLinearReduceMean(x, x_scale, x_zero_point, y_scale, y_zero_point) ---------------
// QuantizeLinear(ReduceMean(DequantizeLinear(x, x_scale, x_zero_point)), y_scale, y_zero_point)
// of a quantized x (i8 or u8) over the 'axes' attribute ('keepdims' as ReduceMean's), as
// onnxruntime's QLinearReduceMean and QLinearGlobalAveragePool define it: a squeeze-excite
// block's mean and a classifier's pool read the int8 features (integer-readers). The mean is of
// the integers: y = saturate(round_half_even(m * f) + y_zero_point) with m = f32(sum(x -
// x_zero_point)) / f32(count) and f = x_scale / y_scale, each rounded to f32. The sum is exact
// (an integer), so the result is the dequantized mean's up to the f32 roundings of m and f. The
// zero points are optional; y's dtype is y_zero_point's, u8 without it (QuantizeLinear's rule).

void infer_qlinear_reduce_mean(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  require_quantized_input(ctx, 0, "x", 1, "x_scale", "x_zero_point");
  const DType out = quantized_output(ctx, 3, "y_scale", "y_zero_point");
  TESSEL_USER_CHECK(node.has_attr("axes")) << node.label() << ": the 'axes' attribute is required";
  const ReducePlan plan = plan_reduce(node, ctx.shape(0), node.get_ints("axes"));
  ctx.set_output(0, out, plan.out_shape);
}

void compute_qlinear_reduce_mean(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Node& node = ctx.node();
  const ReducePlan plan = plan_reduce(node, x.shape(), node.get_ints("axes"));
  const int64_t x_zero = ctx.has_input(2) ? ctx.input(2).get_i64(0) : 0;
  const int64_t y_zero = ctx.has_input(4) ? ctx.input(4).get_i64(0) : 0;
  const float f = static_cast<float>(ctx.input(1).get_f64(0)) / static_cast<float>(ctx.input(3).get_f64(0));
  Tensor& y = ctx.output(0);
  std::vector<int64_t> sums(static_cast<size_t>(y.numel()), 0);
  for_each_reduced(x.shape(), plan, [&](int64_t out, int64_t in) { sums[out] += x.get_i64(in) - x_zero; });
  const QuantRange range = quant_range(y.dtype());
  const float count = static_cast<float>(plan.identity ? 1 : plan.count);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float m = static_cast<float>(sums[i]) / count;
    y.set_i64(i, quantize_value(m * f, y_zero, range));
  }
}

}  // namespace

void register_quantized_ops(ir::OpRegistry& r) {
  r.add({.name = "tessel.MulQuantizeLinear",
         .min_inputs = 3,
         .max_inputs = 6,
         .infer = infer_mul_quantize,
         .compute = compute_mul_quantize});
  r.add({.name = "tessel.QLinearReduceMean",
         .min_inputs = 4,
         .max_inputs = 5,
         .infer = infer_qlinear_reduce_mean,
         .compute = compute_qlinear_reduce_mean});
  r.add({.name = "QuantizeLinear",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_quantize,
         .compute = compute_quantize});
  r.add({.name = "DequantizeLinear",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_dequantize,
         .compute = compute_dequantize});
  register_quant_contraction_ops(r);
}

}  // namespace tessel::ops
