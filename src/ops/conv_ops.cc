// Conv and ConvTranspose (opsets 1 and 11: the attributes did not change meaning): schemas,
// shape inference and reference kernels for f32, f16, bf16 and f64.
#include "core/error.h"
#include "ops/conv_kernels.h"
#include "ops/nn_common.h"

namespace tessel::ops {
namespace {

// The optional bias B must be a 1-D tensor of the output channel count and X's dtype.
void check_bias(const ir::InferContext& ctx, int64_t out_channels) {
  if (!ctx.has_input(2)) return;
  require_same_dtype(ctx, 0, 2, "X", "B");
  TESSEL_USER_CHECK(ctx.shape(2) == Shape{out_channels})
      << ctx.node().label() << ": bias B has shape " << shape_str(ctx.shape(2)) << ", expected ["
      << out_channels << "] (one value per output channel)";
}

void check_float_operands(const ir::InferContext& ctx) {
  require_float_input(ctx, 0, "X");
  require_same_dtype(ctx, 0, 1, "X", "W");
}

// y[n, m, ...] += b[m], in the compute dtype T.
template <typename T>
void add_channel_bias(Tensor& y, const Tensor& b) {
  const int64_t batch = y.dim(0), channels = y.dim(1);
  const int64_t plane = channels == 0 || batch == 0 ? 0 : y.numel() / (batch * channels);
  T* yd = y.data<T>();
  const T* bd = b.data<T>();
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < channels; ++m) {
      T* p = yd + (n * channels + m) * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] += bd[m];
    }
}

// Runs `kernel` (conv_forward or conv_transpose_forward) in the compute dtype of X and adds
// the bias; the result is in the compute dtype.
template <typename T, typename Kernel>
Tensor run_in(const ConvGeometry& g, const ir::KernelContext& ctx, Kernel kernel) {
  Tensor x = to_compute_dtype(ctx.input(0));
  Tensor w = to_compute_dtype(ctx.input(1));
  Tensor y(x.dtype(), g.out_shape());
  kernel(g, x.template data<T>(), w.template data<T>(), y.template data<T>());
  if (ctx.has_input(2)) add_channel_bias<T>(y, to_compute_dtype(ctx.input(2)));
  return y;
}

void infer_conv(ir::InferContext& ctx) {
  check_float_operands(ctx);
  ConvGeometry g = plan_conv(ctx.node(), ctx.shape(0), ctx.shape(1));
  check_bias(ctx, g.out_channels);
  ctx.set_output(0, ctx.dtype(0), g.out_shape());
}

void compute_conv(ir::KernelContext& ctx) {
  ConvGeometry g = plan_conv(ctx.node(), ctx.input(0).shape(), ctx.input(1).shape());
  bool f64 = float_compute_dtype(ctx.input(0).dtype()) == DType::kF64;
  store_output(ctx.output(0), f64 ? run_in<double>(g, ctx, conv_forward<double>)
                                  : run_in<float>(g, ctx, conv_forward<float>));
}

void infer_conv_transpose(ir::InferContext& ctx) {
  check_float_operands(ctx);
  ConvGeometry g = plan_conv_transpose(ctx.node(), ctx.shape(0), ctx.shape(1));
  check_bias(ctx, g.out_channels);
  ctx.set_output(0, ctx.dtype(0), g.out_shape());
}

void compute_conv_transpose(ir::KernelContext& ctx) {
  ConvGeometry g = plan_conv_transpose(ctx.node(), ctx.input(0).shape(), ctx.input(1).shape());
  bool f64 = float_compute_dtype(ctx.input(0).dtype()) == DType::kF64;
  store_output(ctx.output(0), f64 ? run_in<double>(g, ctx, conv_transpose_forward<double>)
                                  : run_in<float>(g, ctx, conv_transpose_forward<float>));
}

}  // namespace

void register_conv_ops(ir::OpRegistry& r) {
  r.add({.name = "Conv",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_conv,
         .compute = compute_conv});
  r.add({.name = "ConvTranspose",
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_conv_transpose,
         .compute = compute_conv_transpose});
}

}  // namespace tessel::ops
