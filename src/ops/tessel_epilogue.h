// Epilogues, store maps and graph-edge layouts of the tessel contractions (tessel.Conv,
// tessel.Gemm) as node attributes. They mirror contraction/epilogue.h, the GPU's
// epilogue-as-data, so that lowering a fused node is a table lookup per step:
//
//   epilogue       = ["add_residual", "relu"]   steps applied in order to acc = conv + bias
//   epilogue_alpha = [0.0, 0.0]                 one per step: leaky_relu's alpha, clip's min
//   epilogue_beta  = [0.0, 0.0]                 one per step: clip's max
//                                               (mul, quantize, add_residual_scaled, round:
//                                               the scale)
//   store = "nhwc" | "nchw" | "depth_to_space" | "depth_to_space_nchw"      (tessel.Conv only)
//   block = 2, mode = "DCR" | "CRD"             the depth_to_space stores' parameters
//   out_dtype = "f32"                           Y's dtype when it is not the node's own
//   input_layout = "nhwc" | "nchw"              X's layout                  (tessel.Conv only)
//   prologue = "affine" | "affine_relu"         X is read as act(X * P[0, c] + P[1, c]), P the
//                                               node's input 5, f32 [2, Ci] (tessel.Conv only)
//
// The last three let the first and last convolution of a network do the layout and dtype
// changes at the graph's edges themselves (fuse.cc), instead of standalone Transpose / Cast /
// Pad kernels. The reference kernels (tessel_contraction_ops.cc), the fuse pass and the GPU
// lowering all go through the read/write functions here, so the spelling lives in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "ir/graph.h"

namespace tessel::ops {

enum class EpilogueKind {
  kRelu,         // max(v, 0)
  kLeakyRelu,    // v < 0 ? alpha * v : v
  kClip,         // min(max(v, alpha), beta)
  kSigmoid,      // 1 / (1 + exp(-v))
  kHardSwish,    // v * clip(v / 6 + 0.5, 0, 1)
  kSilu,         // v * sigmoid(v)
  kGelu,         // v * Phi(v) = 0.5 * v * (1 + erf(v / sqrt(2)))      (ONNX Gelu)
  kGeluTanh,     // 0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715 v^3)))  (approximate="tanh")
  kAddResidual,  // v + R[i], R shaped like the pre-store output
  // int8 (QDQ models: symmetric, zero points 0):
  kMul,                 // v * alpha: a DequantizeLinear by the scale alpha
  kQuantize,            // clamp(round_half_even(f32(v) / f32(alpha)), -128, 127): a
                        // QuantizeLinear to int8 by the scale alpha, as its reference divides
  kAddScaledResidual,   // v + alpha * R[i], R an int8 tensor dequantized by its scale alpha
  // More activations (after the int8 steps so that the earlier kinds keep their values):
  kTanh,         // tanh(v)                   (GAN and style-transfer outputs)
  kMish,         // v * tanh(softplus(v))     (YOLOv4)
  kHardSigmoid,  // clip(alpha * v + beta, 0, 1)
  kElu,          // v < 0 ? alpha * (e^v - 1) : v
  // A QuantizeLinear's rounding without its saturation, for an asymmetric (uint8 or int8
  // with a zero point) QuantizeLinear -> DequantizeLinear pair on a float value, fused as a
  // fake quantization (fuse): round(s), clip(qmin - z, qmax - z), mul(s').
  kRound,        // round_half_even(f32(v) / f32(alpha)), NaN to 0: QuantizeLinear's quotient
                 // by the scale alpha, as its reference divides; NaN quantizes to the zero
                 // point, which the DequantizeLinear takes back to 0
  // A SiLU whose gate a QDQ model quantizes: Mul(v, DequantizeLinear(QuantizeLinear(Sigmoid(v),
  // alpha), beta)), int8 of zero point 0 (onnxruntime's QDQ EfficientNet; fuse):
  kSiluQuantizedGate,  // v * (min(round_half_even(f32(sigmoid(v)) / f32(alpha)), 127) * beta)
  // A saturated rounding whose value the multiplication before it scaled into [0, 1]
  // (fold_unit_quantize), so that the kernels saturate in that multiplication's FFMA:
  kQuantizeUnit,  // round_half_even(alpha + clamp(f32(v), 0, 1) * (beta - alpha)), NaN to alpha:
                  // the integers of [alpha, beta] (lo and hi, integral, lo < hi), ties to the
                  // even integer as the quantize it replaces
};

struct EpilogueStep {
  EpilogueKind kind;
  double alpha = 0.0;
  double beta = 0.0;
  bool operator==(const EpilogueStep&) const = default;
};

// "relu", "leaky_relu", "clip", "sigmoid", "hardswish", "silu", "gelu", "gelu_tanh",
// "add_residual", "mul", "quantize", "add_residual_scaled", "tanh", "mish", "hard_sigmoid",
// "elu", "round", "silu_qgate".
std::string_view epilogue_name(EpilogueKind kind);
std::optional<EpilogueKind> epilogue_kind(std::string_view name);

// The steps of a node's 'epilogue' attributes. The alpha/beta lists are optional unless a
// step reads them (leaky_relu, clip); when given they have one entry per step. A malformed
// list is a UserError naming the node.
std::vector<EpilogueStep> read_epilogue(const ir::Node& node);
// Sets the three attributes (removes them for an empty epilogue, so that an unfused
// contraction prints without them). alpha/beta are written for every step: a reader of the IR
// then never has to know which steps use them.
void write_epilogue(ir::Node& node, const std::vector<EpilogueStep>& steps);

// One step on a value of the fp32 accumulator (computed here in double); `residual` is R at
// the same position (read only by kAddResidual).
double apply_epilogue_step(const EpilogueStep& step, double v, double residual);

// Whether the steps end with an integer of `store`'s range (i8: [-128, 127], u8: [0, 255]): a
// 'quantize' step (or a 'round') followed only by relu and clip steps with integral bounds
// that keep the value in that range (what fold_requantize leaves of a QuantizeLinear ->
// DequantizeLinear -> Relu -> QuantizeLinear chain; fuse's QuantizeLinear to uint8 with zero
// point 0, round(s), clip(0, 255)). out_dtype i8 (u8) stores such a value; the kernels then
// store it without saturating it again.
bool ends_quantized(const std::vector<EpilogueStep>& steps, DType store = DType::kI8);

// Requantizations to the grid a value is already on, removed: in
//   quantize(s), mul(s'), [relu | clip(lo, hi)]*, quantize(s)
// the value after the first quantize is an integer q with |q| <= 128, and s' is s up to the
// rounding of a DequantizeLinear's scale (an fp16 engine's scale constants: 2^-11 relative).
// Where 128 * |s' / s - 1| <= 1/4, q * s' / s lies within 1/4 of q, so the second quantize
// gives q back, and each activation acts on q as on q * s': relu stays relu, and clip(lo, hi)
// becomes clip(quantize(lo, s), quantize(hi, s)), an integral clamp. The chain becomes
//   quantize(s), [relu | clip(lo', hi')]*
// with the same values, and the mul and second quantize (six instructions per output in the
// kernels) are gone. TensorRT's QDQ fusions drop such pairs the same way. A mul followed by
// other steps (a residual, another scale) is a real dequantization and stays.
std::vector<EpilogueStep> fold_requantize(std::vector<EpilogueStep> steps);

// The division of each quantize(s) moved into the multiplication before it: from
//   ... mul(a) | S, B ..., [add_residual_scaled(b) | bias-free homogeneous steps]*, quantize(s)
// to the same steps with a / s (or S / s and B / s), b / s, clip bounds / s, and quantize(1).
// relu, leaky_relu and clip commute with a positive factor, an int8 residual's scale and the
// multiplications take it: the kernels then skip one multiply per quantize and output
// (ResNet's residual epilogue `quantize(s1), mul(s1'), add_residual_scaled(r), quantize(s2)`
// becomes an FMUL and an FFMA before the second saturation). The values are the reference's
// up to the rounding of the products: an output within an ulp of a rounding tie may land one
// int8 step away, as the kernels' multiply by 1/s (tessel_ptx.cuh) already allows.
// A walk back from a quantize that meets another quantize, a plain residual or any other step
// first leaves that quantize alone; one that meets no mul reaches the accumulator, whose
// dequantization scale S must exist (`scaled_accumulator`) to take the factor, then returned
// as `lead_factor` for the caller to apply to S and B (graph constants).
struct QuantizeScaleFold {
  std::vector<EpilogueStep> steps;
  double lead_factor = 1.0;  // S and B are to be multiplied by it
};
QuantizeScaleFold fold_quantize_scales(std::vector<EpilogueStep> steps, bool scaled_accumulator);

// Each saturated rounding -- a quantize(s), or a round(s), with the integral clamps after it
// (relu, clip) and a relu or a clip right before it (whose bounds it rounds as the value:
// rounding is monotone): the integers of [lo, hi] -- rewritten as
// quantize_unit(lo, hi) of its value scaled into [0, 1], the multiplication before it taking
// the factor f = 1 / (s * (hi - lo)) and, where lo is not 0, S and B the offset -lo / (hi - lo):
//   S, B, quantize(1)                                    -> S f, B f + 128/255, quantize_unit(-128, 127)
//   mul(m), add_residual_scaled(b), relu, quantize(1)    -> mul(m / 127), add_residual_scaled(b / 127),
//                                                           quantize_unit(0, 127)
// The kernels then saturate in the FFMA that computes the value (fma.rn.sat: clamp to [0, 1])
// and round by one FFMA with the magic number, where the clamp took two FMNMX and the rounding
// a float add (ResNet-50's int8 residual epilogue: 13.5 instructions per output, four of them
// FMNMX). The walk back from the rounding to its multiplication passes add_residual_scaled
// (linear), and where lo is 0 relu, leaky_relu and clip (they commute with a positive factor,
// not with an offset); a mul takes no offset. One that meets any other step, or reaches the
// accumulator without S (`scaled_accumulator`) or after an earlier rounding took S and B,
// stays. The values are the reference's up to the rounding of the scaled constants (2^-24
// relative): an output within that of a rounding tie may land one step away. Where the value
// is exact -- every factor that makes it (S and B, `lead_on_grid`; a mul's or a residual's
// scale; over the rounding's s) a multiple of 2^-16, as power-of-two scales are, times
// integers -- its ties are real and the reference rounds them to even, which the scaled
// constants' rounding would not: such a rounding stays. (Other values are rounded to f32
// before their quantize anyway, so that which of them are ties is the arithmetic's accident.)
struct UnitQuantizeFold {
  std::vector<EpilogueStep> steps;
  double lead_factor = 1.0;  // S and B are to be multiplied by it,
  double lead_offset = 0.0;  // and then B (0 where absent) increased by this
};
inline constexpr int kExactGridBits = 16;
// quantize_unit's bounds: within 2^22, so that the kernels' magic number 1.5 * 2^23 + lo is exact.
inline constexpr double kMaxUnitBound = 4194304.0;
bool on_exact_grid(double v);  // v a multiple of 2^-kExactGridBits
UnitQuantizeFold fold_unit_quantize(std::vector<EpilogueStep> steps, bool scaled_accumulator,
                                    bool lead_on_grid = false);

// Where the pre-store output y [N, OH, OW, Co] goes.
struct StoreMap {
  enum class Kind {
    kNhwc,              // out = y
    kNchw,              // out[n, co, oh, ow] = y[n, oh, ow, co]: Transpose(perm [0, 3, 1, 2])
    kDepthToSpace,      // out[n, oh*block + i, ow*block + j, c] = y[n, oh, ow, co] with
                        // co = (i*block + j)*C' + c (DCR) or c*block^2 + i*block + j (CRD),
                        // C' = Co / block^2
    kDepthToSpaceNchw,  // out[n, c, oh*block + i, ow*block + j] = y[n, oh, ow, co], co as above
  };
  Kind kind = Kind::kNhwc;
  int64_t block = 1;  // the depth_to_space kinds only
  bool dcr = true;

  bool depth_to_space() const {
    return kind == Kind::kDepthToSpace || kind == Kind::kDepthToSpaceNchw;
  }
  bool nchw() const { return kind == Kind::kNchw || kind == Kind::kDepthToSpaceNchw; }
};

// The store attributes of a tessel.Conv; a bad kind, block or mode is a UserError.
StoreMap read_store(const ir::Node& node);
void write_store(ir::Node& node, const StoreMap& store);

// The stored output shape for a pre-store NHWC shape [N, OH, OW, Co]; UserError naming the
// node when Co is not divisible by block^2.
Shape stored_shape(const ir::Node& node, const StoreMap& store, const Shape& pre_store);

// 'out_dtype': the dtype Y is stored in, or nullopt when absent (Y then has the node's own
// dtype, W's). The value is computed as without the attribute -- rounded to W's dtype -- and
// then converted, exactly as a Cast after the node would: the fold of that Cast changes no
// number. "i8" stores the result of a last 'quantize' step (a fused QuantizeLinear), "u8" an
// integer of [0, 255] (a fused QuantizeLinear to uint8: ends_quantized). A name that is
// neither a float dtype, i8 nor u8 is a UserError naming the node.
std::optional<DType> read_out_dtype(const ir::Node& node);
void write_out_dtype(ir::Node& node, std::optional<DType> dtype);

// 'input_layout' of a tessel.Conv: false for "nhwc" (the default, X [N, H, W, C] in W's
// dtype), true for "nchw" (X [N, C, H, W] in any float dtype, converted to W's dtype as it is
// read, as a Cast and a Transpose before the node would). Anything else is a UserError.
bool read_nchw_input(const ir::Node& node);
void write_nchw_input(ir::Node& node, bool nchw);

// One input and one output channel per group: OHWI W [group, kh, kw, 1] over an NHWC X of
// `group` channels, group > 1. is_depthwise_conv: a tessel.Conv of that shape, the depthwise
// kernel's convs (kernels/cuda/op_window.cc), the only ones that read an int8 X with float
// weights (tessel_contraction_ops.cc).
bool is_depthwise(const Shape& x_nhwc, const Shape& w_ohwi, int64_t group);
bool is_depthwise_conv(const ir::Graph& g, const ir::Node& conv);

// Whether contraction `n`'s kernels store uint8 (out_dtype u8 after steps that end in an
// integer of [0, 255]): a tessel.Gemm, a group-1 tessel.Conv (the contraction generator's
// store_u8) and a depthwise one (the depthwise kernels' byte packing). Other grouped convs'
// kernels (direct grouped, halo, packed groups) store int8 only. The one rule fuse (which
// gives a conv its QuantizeLinear to uint8), fold-qdq (which leaves float a conv whose uint8
// X would then need a QuantizeLinear kernel) and the op kernels' checks read.
bool stores_uint8(const ir::Graph& g, const ir::Node& n);

// fold-qdq's int8 contraction: a tessel.Conv or tessel.Gemm with int8 weights (and X int8 or
// uint8), whose value starts from the exact integer sum times its dequantization scale S.
bool is_int8_contraction(const ir::Graph& g, const ir::Node& n);

// A stem whose pixels the halo kernel stages itself as "tap pairs" (kernels::HaloLayout::
// tap_pairs): 1 to kStemSlotChannels channels per pixel (grayscale to RGBA), NCHW or NHWC, each
// pixel one 4-channel slot, an even horizontal stride and dilation 1. One rule for the kernels
// (halo_tap_pairs) and for fuse, which drops an NHWC stem's channel-alignment Pad only where
// the halo kernel will stage its pixels.
inline constexpr int64_t kStemSlotChannels = 4;
inline bool stem_tap_pairs(int64_t channels, int64_t stride_w, int64_t dilation_w) {
  return channels >= 1 && channels <= kStemSlotChannels && stride_w % 2 == 0 && dilation_w == 1;
}

// 'prologue' of a tessel.Conv: a per-input-channel map of X applied to every element of X the
// convolution reads (never to its zero padding), before the contraction, fused into the
// conv's operand loads (fuse-prologue). Its operand is the node's input 5, P f32.
//  - "affine", "affine_relu": X * P[0, c] + P[1, c], then an optional ReLU, P [2, Ci]: an
//    unfoldable BatchNormalization (+ ReLU) before the conv.
//  - "requantize": an int8 X read as clamp(round_half_even(X * P[0, c]), -128, 127), P [1, Ci]:
//    the integers on another grid, as a depthwise conv of unit weights storing int8 would
//    give them (fold-qdq's requantization of a concat, before a norm's depthwise conv). Only
//    a depthwise conv's int8 X; 0 stays 0, so the padding is the same either way.
struct Prologue {
  bool relu = false;
  bool requantize = false;
  bool operator==(const Prologue&) const = default;
};
// nullopt without the attribute; an unknown name is a UserError naming the node.
std::optional<Prologue> read_prologue(const ir::Node& node);
void write_prologue(ir::Node& node, std::optional<Prologue> prologue);

}  // namespace tessel::ops
