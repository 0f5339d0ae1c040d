// tessel.Conv and tessel.Gemm: the contractions of the GPU form, with a fused epilogue and,
// for the conv, a store map (tessel_epilogue.h).
//
//   tessel.Conv(X, W, B?, R?) -> Y
//     W  OHWI [Co, KH, KW, Ci/group]   f32 / f16 / bf16 / f64: the node's dtype
//     X  NHWC [N, H, W, Ci]            W's dtype (i8 in the int8 forms below)
//        or, with input_layout = "nchw", NCHW [N, Ci, H, W] in any float dtype, converted to
//        W's dtype as it is read (the graph-edge Cast + Transpose folded into the conv)
//     B  [Co], f32 or W's dtype        (fp32 biases of fp16 convs: added to the fp32 accumulator)
//     R  [N, OH, OW, Co], W's dtype    read by the one "add_residual" step, and only by it
//     Y  the pre-store y [N, OH, OW, Co] through the store map (tessel_epilogue.h): NHWC y, NCHW
//        [N, Co, OH, OW], or depth_to_space's [N, OH*b, OW*b, Co/b^2] in NHWC or NCHW; in
//        out_dtype if given, else W's dtype
//     attributes: strides, pads ([t, l, b, r]), dilations, group as in ONNX's Conv (pads are
//     explicit: convert-layout resolves auto_pad); epilogue, epilogue_alpha, epilogue_beta;
//     store, block, mode; out_dtype; input_layout; int8_refusal (fold-qdq's note on why a QDQ
//     conv stays float: read by `tessel explain`, no effect on the value).
//   int8 (fold-qdq's form of a QDQ conv): X i8 NHWC, W i8 OHWI, and S [Co] f32, the per
//     output channel dequantization scale (x_scale * w_scale[co]): the accumulator is exact
//     (int32 on the GPU) and the value the steps start from is acc * S[co] + B[co]; Y is f32
//     (the node's dtype), out_dtype f16 or bf16 (choose-precision's, in fp16 engines) or, after
//     a last 'quantize' step, out_dtype i8. R is f32, f16 or bf16 for 'add_residual', or i8 for
//     'add_residual_scaled' (dequantized by the step's scale).
//   int8 input (fold-qdq's form of a QDQ depthwise conv: its kernel is memory-bound, so the
//     bytes of X count and its multiply-adds do not): X i8 NHWC, W float OHWI [C, KH, KW, 1]
//     with group = C (one input and one output channel per group, ops::is_depthwise), and S
//     [C] f32, X's dequantization scale: the value the steps start from is
//     conv(X, W)[c] * S[c] + B[c], X's integers read exactly (|x| <= 128 in any float dtype).
//     W, and so the node's dtype, Y and R, stay float; no prologue but "requantize". Or a
//     stem's (fuse's fold of the graph input's DequantizeLinear into a conv reading NCHW X):
//     X i8 NCHW, W float, any group, no prologue, and S [Co] f32 holding X's per-tensor scale.
//   tessel.Conv(X, W, B?, R?, S?) -> Y, S only for int8 (int8 X)
//   prologue (fuse-prologue's fusion of a per-channel scale and shift, and a ReLU, before the
//     conv): tessel.Conv(X, W, B?, R?, -, P) with P f32 [2, Ci]; the convolution reads
//     act(X * P[0, c] + P[1, c]) rounded to W's dtype (float X in NHWC only), and pads with
//     zeros after that, as the unfused nodes before it would. Or, a depthwise conv's int8 X,
//     "requantize" with P f32 [1, Ci]: clamp(round_half_even(f32(X) * P[0, c]), -128, 127).
//   tessel.Gemm(A, W, B?, R?, S?) -> Y
//     A [M, K] ([K, M] with trans_a = 1); W [N, K] (trans_b = 1, the default: ONNX Gemm with
//     transB = 1, what convert-layout writes) or [K, N] (trans_b = 0); B [N]; R [M, N];
//     Y [M, N]; epilogue and out_dtype.
//
// Reference kernels: the operands are widened to f64 (exact for every input dtype), the ONNX
// op runs through the registry in NCHW, and bias, epilogue and store are applied in double
// before one rounding to W's dtype -- what the GPU's fp32 epilogue approximates -- and, with
// out_dtype, the conversion to it. So folding a Cast into out_dtype, or a Cast and Transpose
// into input_layout, changes no number.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/nn_common.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "ops/tessel_reference.h"

namespace tessel::ops {
namespace {

constexpr int kBias = kBiasInput, kResidual = kResidualInput, kScale = kScaleInput,
              kPrologue = kPrologueInput;

// The dtype a contraction computes in and stores without out_dtype: W's, or f32 for int8 (of
// an operand's dtype: an int8 contraction's u8 X likewise).
DType node_dtype(DType w) { return w == DType::kI8 || w == DType::kU8 ? DType::kF32 : w; }

// Operands 0 and 1 both float (X in W's dtype unless `any_float_x`) and no S; or X i8 with the
// dequantization scale S [channels] f32, and W i8 (the int8 contraction, which also reads a u8
// X: onnxruntime's uint8 activations with zero point 0) or, where `int8_input_taken` (a
// depthwise tessel.Conv over NHWC X, without a prologue or with "requantize"), float. out_dtype i8 (u8) only after
// a last 'quantize' step (or steps ending in an integer of [0, 255]: ends_quantized).
void check_operands(const ir::InferContext& ctx, const char* x_name, bool any_float_x,
                    bool int8_input_taken, int64_t channels) {
  const ir::Node& node = ctx.node();
  const DType w = ctx.dtype(1);
  if (w == DType::kI8) {
    TESSEL_USER_CHECK((ctx.dtype(0) == DType::kI8 || ctx.dtype(0) == DType::kU8) && !any_float_x)
        << node.label() << ": W is i8, so " << x_name << " must be i8 or u8, it is "
        << dtype_name(ctx.dtype(0)) << (any_float_x ? " (and input_layout nchw takes float weights only)" : "");
  } else if (ctx.dtype(0) == DType::kI8) {
    require_float_input(ctx, 1, "W");
    TESSEL_USER_CHECK(int8_input_taken)
        << node.label() << ": " << x_name << " is i8 and W " << dtype_name(w)
        << ": only a depthwise tessel.Conv (group = channels, W [C, KH, KW, 1]) over an NHWC X "
        << "without an affine prologue, or a conv reading NCHW X without a prologue (a stem), "
        << "reads int8 with float weights";
  } else {
    require_float_input(ctx, 0, x_name);
    require_float_input(ctx, 1, "W");
    if (!any_float_x) require_same_dtype(ctx, 0, 1, x_name, "W");
    TESSEL_USER_CHECK(!ctx.has_input(kScale))
        << node.label() << ": the dequantization scale S (input 4) belongs to int8 contractions "
        << "and int8 inputs, " << x_name << " is " << dtype_name(ctx.dtype(0)) << " and W "
        << dtype_name(w);
  }
  if (ctx.dtype(0) == DType::kI8 || ctx.dtype(0) == DType::kU8) {
    TESSEL_USER_CHECK(ctx.has_input(kScale) && ctx.dtype(kScale) == DType::kF32 &&
                      ctx.shape(kScale) == Shape{channels})
        << node.label() << ": an int8 " << (w == DType::kI8 ? "contraction" : "input")
        << " needs its dequantization scale S f32[" << channels << "] as input 4"
        << (ctx.has_input(kScale) ? ", it is " + ctx.input(kScale).str() : "");
  }
  if (read_out_dtype(node) == DType::kI8) {
    const std::vector<EpilogueStep> steps = read_epilogue(node);
    TESSEL_USER_CHECK(ends_quantized(steps))
        << node.label() << ": out_dtype i8 stores a quantized value: the last epilogue step must "
        << "be 'quantize', or relu and clip steps with integral bounds after it";
  }
  if (read_out_dtype(node) == DType::kU8) {
    TESSEL_USER_CHECK(ends_quantized(read_epilogue(node), DType::kU8))
        << node.label() << ": out_dtype u8 stores an integer of [0, 255]: the epilogue must end "
        << "with 'quantize' or 'round' and then relu and clip steps with integral bounds that keep "
        << "it in that range";
  }
}

// The prologue attribute and its operand P come together: P f32 [2, Ci] on a float NHWC X
// (affine), or P f32 [1, Ci] on a depthwise conv's int8 NHWC X (requantize).
void check_prologue(const ir::InferContext& ctx, bool nchw_input, int64_t in_channels, bool depthwise) {
  const ir::Node& node = ctx.node();
  const std::optional<Prologue> pro = read_prologue(node);
  const bool operand = ctx.has_input(kPrologue);
  TESSEL_USER_CHECK(pro.has_value() == operand)
      << node.label() << ": " << (pro ? "prologue '" + node.get_string("prologue", "") + "' needs"
                                      : std::string("input 5 is given, so the node needs"))
      << (pro ? " its operand P as input 5" : " a 'prologue' attribute");
  if (!pro) return;
  if (pro->requantize) {
    TESSEL_USER_CHECK(!nchw_input && depthwise && ctx.dtype(0) == DType::kI8 && ctx.dtype(1) != DType::kI8)
        << node.label() << ": prologue 'requantize' reads the int8 NHWC X of a depthwise conv";
  } else {
    TESSEL_USER_CHECK(!nchw_input && ctx.dtype(1) != DType::kI8)
        << node.label() << ": a prologue reads a float NHWC X (input_layout nhwc, float W)";
  }
  const int64_t rows = pro->requantize ? 1 : 2;
  TESSEL_USER_CHECK(ctx.dtype(kPrologue) == DType::kF32 &&
                    ctx.shape(kPrologue) == Shape({rows, in_channels}))
      << node.label() << ": prologue operand P is " << ctx.input(kPrologue).str() << ", expected f32["
      << rows << "," << in_channels << "] ("
      << (pro->requantize ? "the factor" : "scale and shift") << " per input channel)";
}

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

// R and the add_residual step come together: one step reads the one operand, in the node's
// dtype ('add_residual') or i8 ('add_residual_scaled').
void check_residual(const ir::InferContext& ctx, const std::vector<EpilogueStep>& steps,
                    const Shape& pre_store) {
  int residual_steps = 0;
  bool scaled = false;
  for (const EpilogueStep& s : steps) {
    residual_steps += s.kind == EpilogueKind::kAddResidual || s.kind == EpilogueKind::kAddScaledResidual;
    scaled |= s.kind == EpilogueKind::kAddScaledResidual;
  }
  if (!ctx.has_input(kResidual)) {
    TESSEL_USER_CHECK(residual_steps == 0)
        << ctx.node().label() << ": epilogue step 'add_residual' needs the residual input R";
    return;
  }
  TESSEL_USER_CHECK(residual_steps == 1)
      << ctx.node().label() << ": residual input R is given, so the epilogue needs exactly one "
      << "'add_residual' step, it has " << residual_steps;
  // An int8 contraction's float residual is read in its own dtype (choose-precision gives it
  // its producer's: f16 in an fp16 engine), as its int8 one.
  // A scaled R is i8 or u8 (onnxruntime's uint8 activations, zero point 0).
  const DType r = scaled ? DType::kI8 : node_dtype(ctx.dtype(1));
  const bool any_float = !scaled && ctx.dtype(1) == DType::kI8 && is_float(ctx.dtype(kResidual)) &&
                         ctx.dtype(kResidual) != DType::kF64;
  const bool u8 = scaled && ctx.dtype(kResidual) == DType::kU8;
  TESSEL_USER_CHECK((ctx.dtype(kResidual) == r || any_float || u8) && ctx.shape(kResidual) == pre_store)
      << ctx.node().label() << ": residual R is " << ctx.input(kResidual).str() << ", expected "
      << (ctx.dtype(1) == DType::kI8 && !scaled ? "f32, f16 or bf16 of shape "
          : scaled                              ? "i8 or u8 of shape "
                                                : dtype_name(r))
      << shape_str(pre_store) << " (the output before the store)";
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

// acc (f64, pre-store, channels last) [* S] + bias, epilogue steps, store; one rounding to the
// node's dtype (W's, f32 for int8), then the conversion to out_dtype, as a Cast after the node
// would do it.
void finish(ir::KernelContext& ctx, Tensor acc, const StoreMap& store) {
  const std::vector<EpilogueStep> steps = read_epilogue(ctx.node());
  const int64_t channels = acc.shape().back();
  const Tensor* bias = ctx.has_input(kBias) ? &ctx.input(kBias) : nullptr;
  const Tensor* residual = ctx.has_input(kResidual) ? &ctx.input(kResidual) : nullptr;
  const Tensor* scale = ctx.has_input(kScale) ? &ctx.input(kScale) : nullptr;
  double* a = acc.data<double>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const double dequantized = scale ? a[i] * scale->get_f64(i % channels) : a[i];
    double v = dequantized + (bias ? bias->get_f64(i % channels) : 0.0);
    const double r = residual ? residual->get_f64(i) : 0.0;
    for (const EpilogueStep& s : steps) v = apply_epilogue_step(s, v, r);
    a[i] = v;
  }
  if (store.depth_to_space()) acc = depth_to_space_nhwc(acc, store);
  if (store.nchw()) acc = permute(acc, kNhwcToNchw);
  store_output(ctx.output(0), acc.cast(node_dtype(ctx.input(1).dtype())));
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
                          "epilogue_beta", "store", "block", "mode", "out_dtype", "input_layout",
                          "int8_refusal", "prologue"});
  const bool nchw_input = read_nchw_input(node);
  require_rank(ctx, 0, "X", 4, 4);
  require_rank(ctx, 1, "W", 4, 4);
  // OHWI and NHWC permute to ONNX's OIHW and NCHW the same way.
  const Shape x_nchw = nchw_input ? ctx.shape(0) : permute_shape(ctx.shape(0), kNhwcToNchw);
  // Checked here rather than by the ONNX Conv so that the message shows the OHWI shape.
  const int64_t group = node.get_int("group", 1);
  TESSEL_USER_CHECK(group < 1 || ctx.shape(1)[3] * group == x_nchw[1])
      << node.label() << ": weight W " << shape_str(ctx.shape(1)) << " has " << ctx.shape(1)[3]
      << " input channels per group, expected " << x_nchw[1] << " / group " << group;
  const ir::TensorType x{node_dtype(ctx.dtype(1)), x_nchw};
  const ir::TensorType w{node_dtype(ctx.dtype(1)), permute_shape(ctx.shape(1), kNhwcToNchw)};
  const ir::TensorType y = infer_stand_in(node, conv_stand_in(node), {&x, &w}, ctx.opset())[0];
  const Shape pre_store = permute_shape(y.shape, kNchwToNhwc);
  const bool depthwise = is_depthwise(ctx.shape(0), ctx.shape(1), group);
  const std::optional<Prologue> pro = read_prologue(node);
  const bool int8_input_taken =
      nchw_input ? !pro : (!pro || pro->requantize) && depthwise;
  check_operands(ctx, "X", nchw_input, int8_input_taken, pre_store[3]);
  check_prologue(ctx, nchw_input, x_nchw[1], depthwise);
  check_bias(ctx, pre_store[3]);
  check_residual(ctx, read_epilogue(node), pre_store);
  ctx.set_output(0, read_out_dtype(node).value_or(node_dtype(ctx.dtype(1))),
                 stored_shape(node, read_store(node), pre_store));
}

void compute_conv(ir::KernelContext& ctx) {
  // X as the convolution reads it: converted to W's dtype (as the folded Cast did; an int8
  // X's integers exactly), NCHW.
  const DType t = ctx.input(1).dtype();
  const Tensor& in = ctx.input(0);
  // int8 (and a u8 X of an int8 W): the integers, exactly.
  Tensor x = (in.dtype() == t || is_integer(in.dtype()) ? in : in.cast(t)).cast(DType::kF64);
  if (const std::optional<Prologue> pro = read_prologue(ctx.node())) {
    const Tensor& pv = ctx.input(kPrologue);
    const int64_t c = x.shape().back();
    double* v = x.data<double>();
    if (pro->requantize) {
      // The integers x * P[0, c] in f32 (as the kernels multiply), rounded half to even and
      // saturated: integers again, exact in any float dtype.
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float y = static_cast<float>(v[i]) * static_cast<float>(pv.get_f64(i % c));
        v[i] = std::clamp(static_cast<double>(std::nearbyint(y)), -128.0, 127.0);
      }
    } else {
      // act(x * scale + shift) per channel (NHWC: the last axis), one rounding to W's dtype.
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double y = v[i] * pv.get_f64(i % c) + pv.get_f64(c + i % c);
        v[i] = pro->relu ? std::max(y, 0.0) : y;
      }
      x = x.cast(t).cast(DType::kF64);
    }
  }
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
                   {"epilogue", "epilogue_alpha", "epilogue_beta", "out_dtype", "trans_a", "trans_b",
                    "int8_refusal"});
  for (const char* key : {"trans_a", "trans_b"}) {
    const int64_t t = node.get_int(key, key[6] == 'a' ? 0 : 1);
    TESSEL_USER_CHECK(t == 0 || t == 1)
        << node.label() << ": attribute '" << key << "' is " << t << ", expected 0 or 1";
  }
  const ir::TensorType a{node_dtype(ctx.dtype(0)), ctx.shape(0)};
  const ir::TensorType w{node_dtype(ctx.dtype(1)), ctx.shape(1)};
  const ir::TensorType y = infer_stand_in(node, gemm_stand_in(node), {&a, &w}, ctx.opset())[0];
  check_operands(ctx, "A", false, false, y.shape[1]);
  check_bias(ctx, y.shape[1]);
  check_residual(ctx, read_epilogue(node), y.shape);
  ctx.set_output(0, read_out_dtype(node).value_or(node_dtype(ctx.dtype(1))), y.shape);
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
         .max_inputs = 6,
         .infer = infer_conv,
         .compute = compute_conv});
  r.add({.name = "tessel.Gemm",
         .min_inputs = 2,
         .max_inputs = 5,
         .infer = infer_gemm,
         .compute = compute_gemm});
}

}  // namespace tessel::ops
