// tessel.Conv and tessel.Gemm: the contractions of the GPU form, with a fused epilogue and,
// for the conv, a store map (tessel_epilogue.h).
//
//   tessel.Conv(X, W, B?, R?) -> Y
//     W  OHWI [Co, KH, KW, Ci/group]   f32 / f16 / bf16 / f64: the node's dtype
//     X  NHWC [N, H, W, Ci]            W's dtype
//        or, with input_layout = "nchw", NCHW [N, Ci, H, W] in any float dtype, converted to
//        W's dtype as it is read (the graph-edge Cast + Transpose folded into the conv)
//     B  [Co], f32 or W's dtype        (fp32 biases of fp16 convs: added to the fp32 accumulator)
//     R  [N, OH, OW, Co], W's dtype    read by the one "add_residual" step, and only by it
//     Y  the pre-store y [N, OH, OW, Co] through the store map (tessel_epilogue.h): NHWC y, NCHW
//        [N, Co, OH, OW], or depth_to_space's [N, OH*b, OW*b, Co/b^2] in NHWC or NCHW; in
//        out_dtype if given, else W's dtype
//     attributes: strides, pads ([t, l, b, r]), dilations, group as in ONNX's Conv (pads are
//     explicit: convert-layout resolves auto_pad); epilogue, epilogue_alpha, epilogue_beta;
//     store, block, mode; out_dtype; input_layout.
//   tessel.Gemm(A, W, B?, R?) -> Y
//     A [M, K] ([K, M] with trans_a = 1); W [N, K] (trans_b = 1, the default: ONNX Gemm with
//     transB = 1, what convert-layout writes) or [K, N] (trans_b = 0); B [N]; R [M, N];
//     Y [M, N]; epilogue and out_dtype.
//
// Reference kernels: the operands are widened to f64 (exact for every input dtype), the ONNX
// op runs through the registry in NCHW, and bias, epilogue and store are applied in double
// before one rounding to W's dtype -- what the GPU's fp32 epilogue approximates -- and, with
// out_dtype, the conversion to it. So folding a Cast into out_dtype, or a Cast and Transpose
// into input_layout, changes no number.
#include "core/error.h"
#include "ops/nn_common.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "ops/tessel_reference.h"

namespace tessel::ops {
namespace {

constexpr int kBias = 2;
constexpr int kResidual = 3;

// Bias B: one value per output channel, f32 or the node's dtype (W's).
void check_bias(const ir::InferContext& ctx, int64_t out_channels) {
  if (!ctx.has_input(kBias)) return;
  const DType t = ctx.dtype(kBias);
  const DType x = ctx.dtype(1);
  TESSEL_USER_CHECK(t == DType::kF32 || t == x)
      << ctx.node().label() << ": bias B has dtype " << dtype_name(t) << ", expected f32"
      << (x == DType::kF32 ? "" : " or " + std::string(dtype_name(x)) + " (the dtype of W)");
  TESSEL_USER_CHECK(ctx.shape(kBias) == Shape{out_channels})
      << ctx.node().label() << ": bias B has shape " << shape_str(ctx.shape(kBias))
      << ", expected [" << out_channels << "] (one value per output channel)";
}

// R and the add_residual step come together: one step reads the one operand.
void check_residual(const ir::InferContext& ctx, const std::vector<EpilogueStep>& steps,
                    const Shape& pre_store) {
  int residual_steps = 0;
  for (const EpilogueStep& s : steps) residual_steps += s.kind == EpilogueKind::kAddResidual;
  if (!ctx.has_input(kResidual)) {
    TESSEL_USER_CHECK(residual_steps == 0)
        << ctx.node().label() << ": epilogue step 'add_residual' needs the residual input R";
    return;
  }
  TESSEL_USER_CHECK(residual_steps == 1)
      << ctx.node().label() << ": residual input R is given, so the epilogue needs exactly one "
      << "'add_residual' step, it has " << residual_steps;
  TESSEL_USER_CHECK(ctx.dtype(kResidual) == ctx.dtype(1) && ctx.shape(kResidual) == pre_store)
      << ctx.node().label() << ": residual R is " << ctx.input(kResidual).str() << ", expected "
      << dtype_name(ctx.dtype(1)) << shape_str(pre_store) << " (the output before the store)";
}

// out[n, h*b + i, w*b + j, c] = y[n, h, w, co] (tessel_epilogue.h, StoreMap): a transpose of a
// 6-D view of y, with the channel split as (i, j, c) for DCR and (c, i, j) for CRD.
Tensor depth_to_space_nhwc(const Tensor& y, const StoreMap& s) {
  const int64_t n = y.dim(0), h = y.dim(1), w = y.dim(2), b = s.block;
  const int64_t c = y.dim(3) / (b * b);
  Tensor v = s.dcr ? y.reshaped({n, h, w, b, b, c}) : y.reshaped({n, h, w, c, b, b});
  Tensor out = permute(
      v, s.dcr ? std::vector<int64_t>{0, 1, 3, 2, 4, 5} : std::vector<int64_t>{0, 1, 4, 2, 5, 3});
  return out.reshaped({n, h * b, w * b, c});
}

// acc (f64, pre-store, channels last) + bias, epilogue steps, store; one rounding to the node's
// dtype (W's), then the conversion to out_dtype, as a Cast after the node would do it.
void finish(ir::KernelContext& ctx, Tensor acc, const StoreMap& store) {
  const std::vector<EpilogueStep> steps = read_epilogue(ctx.node());
  const int64_t channels = acc.shape().back();
  const Tensor* bias = ctx.has_input(kBias) ? &ctx.input(kBias) : nullptr;
  const Tensor* residual = ctx.has_input(kResidual) ? &ctx.input(kResidual) : nullptr;
  double* a = acc.data<double>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    double v = a[i] + (bias ? bias->get_f64(i % channels) : 0.0);
    const double r = residual ? residual->get_f64(i) : 0.0;
    for (const EpilogueStep& s : steps) v = apply_epilogue_step(s, v, r);
    a[i] = v;
  }
  if (store.depth_to_space()) acc = depth_to_space_nhwc(acc, store);
  if (store.nchw()) acc = permute(acc, kNhwcToNchw);
  store_output(ctx.output(0), acc.cast(ctx.input(1).dtype()));
}

// ---- tessel.Conv ----------------------------------------------------------------------------

// The ONNX Conv computing the same convolution on NCHW / OIHW operands.
ir::Node conv_stand_in(const ir::Node& node) {
  ir::Attributes attrs;
  for (const char* key : {"strides", "pads", "dilations", "group"})
    if (auto it = node.attrs.find(key); it != node.attrs.end()) attrs.emplace(key, it->second);
  return stand_in(node, "Conv", std::move(attrs), 2);
}

void infer_conv(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_attributes(node, {"strides", "pads", "dilations", "group", "epilogue", "epilogue_alpha",
                          "epilogue_beta", "store", "block", "mode", "out_dtype", "input_layout"});
  const bool nchw_input = read_nchw_input(node);
  require_float_input(ctx, 0, "X");
  require_float_input(ctx, 1, "W");
  if (!nchw_input) require_same_dtype(ctx, 0, 1, "X", "W");
  require_rank(ctx, 0, "X", 4, 4);
  require_rank(ctx, 1, "W", 4, 4);
  // OHWI and NHWC permute to ONNX's OIHW and NCHW the same way.
  const Shape x_nchw = nchw_input ? ctx.shape(0) : permute_shape(ctx.shape(0), kNhwcToNchw);
  // Checked here rather than by the ONNX Conv so that the message shows the OHWI shape.
  const int64_t group = node.get_int("group", 1);
  TESSEL_USER_CHECK(group < 1 || ctx.shape(1)[3] * group == x_nchw[1])
      << node.label() << ": weight W " << shape_str(ctx.shape(1)) << " has " << ctx.shape(1)[3]
      << " input channels per group, expected " << x_nchw[1] << " / group " << group;
  const ir::TensorType x{ctx.dtype(1), x_nchw};
  const ir::TensorType w{ctx.dtype(1), permute_shape(ctx.shape(1), kNhwcToNchw)};
  const ir::TensorType y = infer_stand_in(node, conv_stand_in(node), {&x, &w}, ctx.opset())[0];
  const Shape pre_store = permute_shape(y.shape, kNchwToNhwc);
  check_bias(ctx, pre_store[3]);
  check_residual(ctx, read_epilogue(node), pre_store);
  ctx.set_output(0, read_out_dtype(node).value_or(ctx.dtype(1)),
                 stored_shape(node, read_store(node), pre_store));
}

void compute_conv(ir::KernelContext& ctx) {
  // X as the convolution reads it: converted to W's dtype (as the folded Cast did), NCHW.
  const DType t = ctx.input(1).dtype();
  const Tensor& in = ctx.input(0);
  Tensor x = (in.dtype() == t ? in : in.cast(t)).cast(DType::kF64);
  if (!read_nchw_input(ctx.node())) x = permute(x, kNhwcToNchw);
  const Tensor w = permute(ctx.input(1).cast(DType::kF64), kNhwcToNchw);
  const Tensor y = run_stand_in(ctx.node(), conv_stand_in(ctx.node()), {&x, &w}, ctx.opset())[0];
  finish(ctx, permute(y, kNchwToNhwc), read_store(ctx.node()));
}

// ---- tessel.Gemm ----------------------------------------------------------------------------

ir::Node gemm_stand_in(const ir::Node& node) {
  return stand_in(node, "Gemm",
                  {{"transA", node.get_int("trans_a", 0)}, {"transB", node.get_int("trans_b", 1)}},
                  2);
}

void infer_gemm(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_attributes(node,
                   {"epilogue", "epilogue_alpha", "epilogue_beta", "out_dtype", "trans_a", "trans_b"});
  for (const char* key : {"trans_a", "trans_b"}) {
    const int64_t t = node.get_int(key, key[6] == 'a' ? 0 : 1);
    TESSEL_USER_CHECK(t == 0 || t == 1)
        << node.label() << ": attribute '" << key << "' is " << t << ", expected 0 or 1";
  }
  require_float_input(ctx, 0, "A");
  require_same_dtype(ctx, 0, 1, "A", "W");
  const ir::TensorType y =
      infer_stand_in(node, gemm_stand_in(node), {&ctx.input(0), &ctx.input(1)}, ctx.opset())[0];
  check_bias(ctx, y.shape[1]);
  check_residual(ctx, read_epilogue(node), y.shape);
  ctx.set_output(0, read_out_dtype(node).value_or(ctx.dtype(1)), y.shape);
}

void compute_gemm(ir::KernelContext& ctx) {
  const Tensor a = ctx.input(0).cast(DType::kF64);
  const Tensor w = ctx.input(1).cast(DType::kF64);
  finish(ctx, run_stand_in(ctx.node(), gemm_stand_in(ctx.node()), {&a, &w}, ctx.opset())[0],
         StoreMap{});
}

}  // namespace

void register_tessel_contraction_ops(ir::OpRegistry& r) {
  r.add({.name = "tessel.Conv",
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_conv,
         .compute = compute_conv});
  r.add({.name = "tessel.Gemm",
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_gemm,
         .compute = compute_gemm});
}

}  // namespace tessel::ops
