// emit(): writes the translation unit of one contraction kernel. The file includes a kernel
// template (tessel_mma.cuh or tessel_simt.cuh) and defines `struct Problem` with what is
// specific to this problem: compile-time extents and schedule, the operand gathers (from the
// index maps, gather_emitter.cc), the epilogue steps and the store map. Then one extern "C"
// entry point instantiates the template.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "kernels/cuda/contraction_kernel.h"
#include "kernels/contraction/grouped.h"
#include "kernels/cuda/kernel_plan.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/shape.h"
#include "kernels/kernel_rules.h"

namespace tessel::kernels::cuda {

const std::vector<std::pair<std::string, std::string>>& embedded_headers();

namespace {

using contraction::Contraction;
using contraction::Epilogue;
using contraction::EpilogueOpKind;
using contraction::EpilogueStep;
using contraction::StoreMap;

int64_t coeff(const contraction::AffineIndex& ix, int dim) {
  return dim < static_cast<int>(ix.coeffs.size()) ? ix.coeffs[dim] : 0;
}

// A float as a CUDA literal that round-trips exactly; non-finite values by bit pattern.
std::string float_literal(float f) {
  if (!std::isfinite(f)) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return fmt::format("__int_as_float(0x{:08x})", bits);
  }
  std::string s = fmt::format("{:.9g}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

// A dequantizing multiplier m after a quantize, for quantize_mul_s8_f: m rounded to 22
// significant bits, so that -1.5 * 2^23 * m is exact in fp32 (the fma then rounds once, as the
// separate multiply did). The 2^-23 relative change of m is below the rounding of the reciprocal
// the quantize already multiplies by. nullopt where the product would not be a normal float.
struct MagicMultiplier {
  float m, minus_magic_m;
};
constexpr float kRoundingMagic = 12582912.0f;  // 1.5 * 2^23 (tessel_ptx.cuh)

std::optional<MagicMultiplier> magic_multiplier(double m) {
  if (!std::isfinite(m) || m == 0.0) return std::nullopt;
  int e = 0;
  const double f = std::frexp(m, &e);  // m = f * 2^e, 0.5 <= |f| < 1
  const float m22 = static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(f, 22)), e - 22));
  const float c = -kRoundingMagic * m22;
  if (!std::isnormal(c) || static_cast<double>(c) != -double(kRoundingMagic) * static_cast<double>(m22)) return std::nullopt;
  return MagicMultiplier{m22, c};
}

std::string epilogue_step(const EpilogueStep& st) {
  switch (st.kind) {
    case EpilogueOpKind::kScale:
      return fmt::format("v *= load_f32(p.extra[{}], ch);  // scale", st.operand);
    case EpilogueOpKind::kBias:
      return fmt::format("v += load_f32(p.extra[{}], ch);  // bias", st.operand);
    case EpilogueOpKind::kRelu:
      return "v = fmaxf(v, 0.0f);  // relu";
    case EpilogueOpKind::kLeakyRelu:
      return fmt::format("v = v < 0.0f ? v * {} : v;  // leaky relu", float_literal(st.alpha));
    case EpilogueOpKind::kClip:
      return fmt::format("v = clip_f(v, {}, {});  // clip", float_literal(st.alpha), float_literal(st.beta));
    case EpilogueOpKind::kSigmoid:
      return "v = sigmoid_f(v);  // sigmoid";
    case EpilogueOpKind::kHardSwish:
      return "v = hardswish_f(v);  // hardswish";
    case EpilogueOpKind::kSilu:
      return "v = silu_f(v);  // silu";
    case EpilogueOpKind::kSiluQuantizedGate:
      return fmt::format("v = silu_qgate_f(v, {}, {});  // silu, its gate quantized by {}",
                         float_literal(static_cast<float>(1.0 / st.alpha)), float_literal(st.beta),
                         float_literal(st.alpha));
    case EpilogueOpKind::kGelu:
      return "v = gelu_f(v);  // gelu";
    case EpilogueOpKind::kGeluTanh:
      return "v = gelu_tanh_f(v);  // gelu (tanh)";
    case EpilogueOpKind::kTanh:
      return "v = tanhf(v);  // tanh";
    case EpilogueOpKind::kMish:
      return "v = mish_f(v);  // mish";
    case EpilogueOpKind::kHardSigmoid:
      return fmt::format("v = hard_sigmoid_f(v, {}, {});  // hard sigmoid", float_literal(st.alpha),
                         float_literal(st.beta));
    case EpilogueOpKind::kElu:
      return fmt::format("v = elu_f(v, {});  // elu", float_literal(st.alpha));
    case EpilogueOpKind::kResidualAdd:
      return "v += residual;  // residual add";
    case EpilogueOpKind::kMul:
      return fmt::format("v *= {};  // dequantize", float_literal(st.alpha));
    case EpilogueOpKind::kQuantize:
      // By the f32 reciprocal: a multiply, not a division per output element (the reference
      // divides; a quotient within an ulp of a rounding tie may land one int8 step away).
      return fmt::format("v = quantize_s8_f(v, {});  // quantize to int8 by 1 / {}",
                         float_literal(static_cast<float>(1.0 / st.alpha)), float_literal(st.alpha));
    case EpilogueOpKind::kScaledResidualAdd:
      return fmt::format("v += {} * residual;  // int8 residual add, dequantized", float_literal(st.alpha));
    case EpilogueOpKind::kRound:
      // By the reciprocal, as kQuantize (one step off the reference's division within an ulp
      // of a tie); rintf where no integral clamp follows (emit_epilogue takes one into it).
      return fmt::format("v = rintf(v * {});  // round to the grid of {}", float_literal(static_cast<float>(1.0 / st.alpha)),
                         float_literal(st.alpha));
    case EpilogueOpKind::kQuantizeUnit:
      // emit_epilogue saturates in the step before and keeps the magic number where it can.
      return fmt::format("v = quantize_unit_f(v, {}, {});", float_literal(st.alpha), float_literal(st.beta));
  }
  TESSEL_ICHECK(false) << "unknown epilogue step";
  return "";
}

// Batch terms of the output offset: maps.c's batch coefficients with row-major strides of the
// output buffer (innermost extent = the buffer's channel count `ld`).
std::string store_batch_terms(const Contraction& c, int64_t ld, bool channel_only) {
  const auto& out = c.maps.c;
  std::vector<int64_t> stride(out.shape.size(), 1);
  for (int d = static_cast<int>(out.shape.size()) - 2; d >= 0; --d) {
    stride[d] = (d + 1 == static_cast<int>(out.shape.size()) - 1 ? ld : stride[d + 1] * out.shape[d + 1]);
  }
  std::string s;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    const bool inner = d + 1 == out.shape.size();
    if (channel_only && !inner) continue;
    for (int j : c.batch_dims) {
      const int64_t k = coeff(out.index[d], j) * stride[d];
      if (k != 0) s += fmt::format(" + Index({}) * {}", coord_name(c, j), k);
    }
  }
  return s;
}

std::string batch_decomposition(const Contraction& c, const std::string& indent) {
  std::string out;
  int64_t inner = 1;
  std::vector<std::string> lines(c.batch_dims.size());
  for (int p = static_cast<int>(c.batch_dims.size()) - 1; p >= 0; --p) {
    const int j = c.batch_dims[p];
    std::string expr = "batch";
    if (inner != 1) expr = fmt::format("{} / {}", expr, inner);
    if (p != 0) expr = fmt::format("{} % {}", expr, c.maps.dims[j].extent);
    lines[p] = fmt::format("{}const int {} = {};\n", indent, coord_name(c, j), expr);
    inner *= c.maps.dims[j].extent;
  }
  for (const auto& l : lines) out += l;
  return out;
}

// What the epilogue's value is where it ends quantized, for the store (P::kQuantizedOut,
// StoreValue in tessel_epilogue.cuh): kNone a value to convert; kSaturated an integer of the
// byte store's range, unrounded (the store rounds it by the float add); kMagic 1.5 * 2^23 + q,
// q rounded and saturated already (a last quantize_unit: the store takes its bits' low byte).
enum class QuantizedOut { kNone = 0, kSaturated = 1, kMagic = 2 };

// The value's rounding before the store converts it to Out: to C's dtype where that is a
// 16-bit float and Out another dtype (contraction/epilogue.h), else none.
// Not after a last quantize step: its value is an int8 code already (exact in any float).
std::string emit_rounding(const KernelPlan& plan, QuantizedOut quantized) {
  const DType c = plan.c->maps.c.dtype;
  const DType out = plan.e->out_dtype;
  std::string s;
  std::string body = "return v;";
  if (c != out && (c == DType::kF16 || c == DType::kBF16) && quantized == QuantizedOut::kNone) {
    s = fmt::format("  // C is {}, stored as {}: rounded to {} first, as the Cast it replaces\n",
                    dtype_name(c), dtype_name(out), dtype_name(c));
    body = fmt::format("return to_float(from_float<{}>(v));", kernel_element_type(c));
  }
  return s + "  __device__ __forceinline__ static float rounded(float v) { " + body + " }\n";
}

// NCHW offsets: out[img, ch, y, x] of an (out_h * b) x (out_w * b) image, b = 1 for kNchw.
void emit_nchw_offset(const KernelPlan& plan, std::ostringstream& o) {
  const StoreMap& st = plan.e->store;
  const int64_t h = st.out_h, w = st.out_w;
  o << fmt::format("    const int img = m / {}, oh = m / {} % {}, ow = m % {};\n", h * w, w, h, w);
  if (st.kind == StoreMap::Kind::kNchw) {
    o << "    // NCHW: out[img, n, oh, ow]; consecutive m are adjacent within an image row\n";
    o << fmt::format("    return (Index(img) * {} + n) * {} + oh * {} + ow;\n", plan.out_channels, h * w, w);
    return;
  }
  const int64_t b = st.block, ch = plan.out_channels;
  o << fmt::format("    // depth_to_space {} by {}, NCHW: n -> (channel, i, j); out[img, channel, oh*{}+i, ow*{}+j]\n",
                   st.dcr ? "DCR" : "CRD", b, b, b);
  if (st.dcr) {
    o << fmt::format("    const int i = n / {}, j = n / {} % {}, ch = n % {};\n", b * ch, ch, b, ch);
  } else {
    o << fmt::format("    const int ch = n / {}, i = n / {} % {}, j = n % {};\n", b * b, b, b, b);
  }
  o << fmt::format("    return ((Index(img) * {} + ch) * {} + oh * {} + i) * {} + ow * {} + j;\n", ch, h * b, b,
                   w * b, b);
}

std::string emit_store(const KernelPlan& plan, QuantizedOut quantized) {
  const Contraction& c = *plan.c;
  const StoreMap& st = plan.e->store;
  const bool along_m = st.kind == StoreMap::Kind::kNchw || st.kind == StoreMap::Kind::kDepthToSpaceNchw;
  std::ostringstream o;
  o << fmt::format("  static constexpr bool kStoreAlongM = {};  // output contiguous along m (NCHW)\n", along_m);
  o << fmt::format("  static constexpr int kStoreVec = {};      // output elements per store\n", plan.store_vec);
  o << fmt::format("  static constexpr int kStoreNStride = {};  // n distance between them\n", plan.store_n_stride);
  o << fmt::format("  static constexpr int kResidual = {};      // epilogue operand of the residual\n",
                   plan.residual_operand);
  o << emit_rounding(plan, quantized);
  const std::string unused_batch = c.batch_dims.empty() ? "int" : "int batch";
  o << "  __device__ __forceinline__ static Index store_offset(" << unused_batch << ", int m, int n) {\n";
  if (along_m) {
    emit_nchw_offset(plan, o);
  } else if (st.kind == StoreMap::Kind::kDepthToSpace) {
    const int64_t b = st.block, h = st.out_h, w = st.out_w, ch = c.n / (b * b);
    o << fmt::format("    // depth_to_space {} by {}: n -> (channel, i, j); out[img, oh*{}+i, ow*{}+j, channel]\n",
                     st.dcr ? "DCR" : "CRD", b, b, b);
    o << fmt::format("    const int img = m / {}, oh = m / {} % {}, ow = m % {};\n", h * w, w, h, w);
    if (st.dcr) {
      o << fmt::format("    const int i = n / {}, j = n / {} % {}, ch = n % {};\n", b * ch, ch, b, ch);
    } else {
      o << fmt::format("    const int ch = n / {}, i = n / {} % {}, j = n % {};\n", b * b, b, b, b);
    }
    o << fmt::format("    return ((Index(img) * {} + oh * {} + i) * {} + ow * {} + j) * {} + {} + ch;\n",
                     h * b, b, w * b, b, plan.out_channels, st.channel_offset);
  } else {
    o << batch_decomposition(c, "    ");
    const int64_t offset = st.kind == StoreMap::Kind::kChannelSlice ? st.channel_offset : 0;
    o << fmt::format("    return Index(m) * {}{} + n{};\n", plan.out_channels,
                     offset != 0 ? fmt::format(" + {}", offset) : "",
                     store_batch_terms(c, plan.out_channels, false));
  }
  o << "  }\n";
  const std::string channel_terms = store_batch_terms(c, plan.out_channels, true);
  o << "  __device__ __forceinline__ static int channel(" << (channel_terms.empty() ? "int" : "int batch")
    << ", int n) {\n";
  if (!channel_terms.empty()) o << batch_decomposition(c, "    ");
  o << "    return int(n" << channel_terms << ");\n  }\n";
  return o.str();
}

// The relu and integral clip steps after steps[i] that narrow [lo, hi] while their intervals
// nest (a quantize's or a fake quantization's saturation takes them: rounding and an integral
// clamp commute); returns the index of the last one taken (i where none).
size_t take_integral_clamps(const std::vector<EpilogueStep>& steps, size_t i, float& lo, float& hi) {
  for (; i + 1 < steps.size(); ++i) {
    const EpilogueStep& next = steps[i + 1];
    const bool relu = next.kind == EpilogueOpKind::kRelu;
    if (!relu && next.kind != EpilogueOpKind::kClip) break;
    const float a = relu ? 0.0f : next.alpha, b = relu ? hi : next.beta;
    if (a != std::nearbyint(a) || b != std::nearbyint(b) || std::max(lo, a) > std::min(hi, b)) break;
    lo = std::max(lo, a);
    hi = std::min(hi, b);
  }
  return i;
}

// The integers a one-byte store holds (int8, or uint8: onnxruntime's activations), which it
// rounds to by the float add of store_s8 / store_u8 (tessel_ptx.cuh).
struct ByteRange {
  float lo, hi;
  const char* name;
  bool holds(float a, float b) const { return lo <= a && b <= hi; }
};
std::optional<ByteRange> byte_range(DType t) {
  if (t == DType::kI8) return ByteRange{-128.0f, 127.0f, "int8"};
  if (t == DType::kU8) return ByteRange{0.0f, 255.0f, "uint8"};
  return std::nullopt;
}

// A rounding by 1 / s (steps[first]: a quantize, or a fake quantization's round) saturated to
// the integral [lo, hi] of the clamps taken with it through steps[last]: followed by a kMul,
// the rounding's second add and that dequantizing multiply as one fma (quantize_mul_s8_f);
// as the last steps, where the one-byte store holds [lo, hi], the saturation alone, which the
// store rounds by the same float add (store_s8 / store_u8: rounding here too would cost two
// more instructions per output), and `saturated`; else quantize_s8_f. `what` names the
// rounding in the source's comments. Returns the index of the last step emitted.
size_t emit_saturated_rounding(std::ostringstream& o, const std::vector<EpilogueStep>& steps, size_t first,
                               size_t last, float lo, float hi, std::optional<ByteRange> store, QuantizedOut& saturated,
                               const std::string& what) {
  const float s = steps[first].alpha;
  const std::string inv = float_literal(static_cast<float>(1.0 / s));
  const bool end = last + 1 == steps.size();
  const std::optional<MagicMultiplier> mul =
      !end && steps[last + 1].kind == EpilogueOpKind::kMul ? magic_multiplier(steps[last + 1].alpha) : std::nullopt;
  saturated = QuantizedOut::kNone;
  if (mul) {
    o << fmt::format("    v = quantize_mul_s8_f(v, {}, {}, {}, {}, {});  // {} by 1 / {}, clamped, times {} (22 bits)\n",
                     inv, float_literal(lo), float_literal(hi), float_literal(mul->m), float_literal(mul->minus_magic_m),
                     what, float_literal(s), float_literal(steps[last + 1].alpha));
    return last + 1;
  }
  if (end && store && store->holds(lo, hi)) {
    o << fmt::format("    v = saturate_s8_f(v, {}, {}, {});  // quantize to {} by 1 / {}: saturated, rounded by the store\n",
                     inv, float_literal(lo), float_literal(hi), store->name, float_literal(s));
    saturated = QuantizedOut::kSaturated;
    return last;
  }
  o << fmt::format("    v = quantize_s8_f(v, {}, {}, {});  // {} by 1 / {}, clamped\n", inv, float_literal(lo),
                   float_literal(hi), what, float_literal(s));
  return last;
}

// An asymmetric fake quantization from steps[i], a kRound by a positive scale: round(s), the
// relu and integral clip steps after it (fuse writes clip(qmin - z, qmax - z)), and a kMul
// back to float. Rounding commutes with an integral clamp, so it is quantize_s8_f's saturation
// to those bounds and its rounding by the float add (exact: the bounds, at most 255 from 0 for
// u8 and i8, lie far inside the 2^22 where it rounds to integers): FMUL, two clamps, FADD,
// FFMA per output with the multiply (emit_saturated_rounding) instead of a quarter-rate rintf
// and a multiply. Without an integral clamp the round is rintf. Returns the last step's index.
size_t emit_fake_quantize(std::ostringstream& o, const std::vector<EpilogueStep>& steps, size_t i,
                          std::optional<ByteRange> store, QuantizedOut& saturated) {
  constexpr float kExactRounding = 4194304.0f;  // 2^22
  float lo = -kExactRounding, hi = kExactRounding;
  const size_t last = take_integral_clamps(steps, i, lo, hi);
  if (last == i || lo == -kExactRounding || hi == kExactRounding) {
    o << "    " << epilogue_step(steps[i]) << "\n";
    saturated = QuantizedOut::kNone;
    return i;
  }
  return emit_saturated_rounding(o, steps, i, last, lo, hi, store, saturated, "fake quantization: round");
}

// A quantize_unit at steps[i] (ops::fold_unit_quantize): v, saturated to [0, 1] by the step
// before where `saturated` (fma_sat: the lead's or a residual's FFMA) or here, rounded to the
// integers of [lo, hi] by one FFMA with the magic number (unit_round_magic). Followed by a mul,
// the magic number's removal and that multiplication as one more FFMA (as quantize_mul_s8_f),
// which saturates in turn (`saturated_next`) where another quantize_unit follows it; as the
// last step, where the one-byte store holds [lo, hi], the magic number stays for the store to
// take the low byte (`out` kMagic). Returns the index of the last step emitted.
size_t emit_unit_rounding(std::ostringstream& o, const std::vector<EpilogueStep>& steps, size_t i, bool saturated,
                          std::optional<ByteRange> store, bool& saturated_next, QuantizedOut& out) {
  const float lo = steps[i].alpha, hi = steps[i].beta;
  const std::string bounds = float_literal(lo) + ", " + float_literal(hi);
  const bool end = i + 1 == steps.size();
  saturated_next = false;
  out = QuantizedOut::kNone;
  if (!saturated) o << "    v = sat_f(v);\n";
  const std::optional<MagicMultiplier> mul =
      !end && steps[i + 1].kind == EpilogueOpKind::kMul ? magic_multiplier(steps[i + 1].alpha) : std::nullopt;
  if (mul) {
    saturated_next = i + 2 < steps.size() && steps[i + 2].kind == EpilogueOpKind::kQuantizeUnit;
    o << fmt::format("    v = {}(unit_round_magic(v, {}), {}, {});  // quantize_unit, times {} (22 bits){}\n",
                     saturated_next ? "fma_sat" : "__fmaf_rn", bounds, float_literal(mul->m),
                     float_literal(mul->minus_magic_m), float_literal(steps[i + 1].alpha),
                     saturated_next ? ", saturated" : "");
    return i + 1;
  }
  if (end && store && store->holds(lo, hi)) {
    o << fmt::format("    v = unit_round_magic(v, {});  // quantize_unit: the store takes the low byte\n", bounds);
    out = QuantizedOut::kMagic;
    return i;
  }
  o << fmt::format("    v = __fsub_rn(unit_round_magic(v, {}), kRoundingMagic);  // quantize_unit\n", bounds);
  return i;
}

// The epilogue function, and how its value ends quantized (`quantized`: an integer of the
// byte store's range, which the store then only rounds, or one in the magic number's bits).
std::string emit_epilogue(const KernelPlan& plan, QuantizedOut& quantized) {
  std::ostringstream o;
  const std::vector<EpilogueStep>& steps = plan.e->steps;
  // The leading per-channel steps (lowering's dequantization scale, then the bias) are one
  // FFMA by operands of the channel alone: a kernel whose threads keep their channels through
  // the epilogue (tessel_mma.cuh) loads them once per channel (lead_of) and applies them to
  // its accumulators before staging them, instead of loading two operands per output.
  size_t lead = 0;
  int scale_operand = -1, bias_operand = -1;
  if (lead < steps.size() && steps[lead].kind == EpilogueOpKind::kScale) scale_operand = steps[lead++].operand;
  if (lead < steps.size() && steps[lead].kind == EpilogueOpKind::kBias) bias_operand = steps[lead++].operand;
  auto operand = [](int i, const char* none) {
    return i < 0 ? std::string(none) : fmt::format("load_f32(p.extra[{}], ch)", i);
  };
  o << "  // The leading per-channel steps: v * scale + bias.\n";
  o << "  struct Lead { float scale, bias; };\n";
  o << fmt::format("  static constexpr bool kHasLead = {};\n", lead > 0);
  o << "  __device__ __forceinline__ static Lead lead_of(const KernelParams& p, int ch) {\n";
  o << fmt::format("    return Lead{{{}, {}}};\n  }}\n", operand(scale_operand, "1.0f"), operand(bias_operand, "0.0f"));
  // A quantize_unit right after them saturates in their FFMA.
  const bool lead_saturates = lead > 0 && lead < steps.size() && steps[lead].kind == EpilogueOpKind::kQuantizeUnit;
  const char* apply =
      lead_saturates
          ? (scale_operand >= 0 ? (bias_operand >= 0 ? "fma_sat(v, l.scale, l.bias)" : "mul_sat(v, l.scale)")
                                : "add_sat(v, l.bias)")
          : (scale_operand >= 0 ? (bias_operand >= 0 ? "fmaf(v, l.scale, l.bias)" : "v * l.scale")
                                : (bias_operand >= 0 ? "v + l.bias" : "v"));
  o << "  __device__ __forceinline__ static float apply_lead(Lead l, float v) { return " << apply << "; }\n";
  o << "  // v: the accumulator of C[b, m, n] as fp32 after the lead; ch: its output channel;\n"
       "  // residual: the residual tensor at the output position.\n";
  o << "  __device__ __forceinline__ static float after_lead(const KernelParams& p, float v, int ch,\n"
       "                                                     float residual) {\n";
  // A quantize takes the relu and integral clip steps after it into its saturation while
  // their intervals nest: one clamp per output instead of two more per step. A relu right
  // before it, too (a QDQ model's conv -> Relu -> QuantizeLinear): with a positive scale,
  // max(v, 0) / s = max(v / s, 0), and rounding keeps the bound, so its lower bound is 0.
  const std::optional<ByteRange> store = byte_range(plan.e->out_dtype);
  quantized = QuantizedOut::kNone;
  bool relu_before = false;
  bool unit_saturated = lead_saturates;  // v lies in [0, 1] for the quantize_unit next
  for (size_t i = lead; i < steps.size(); ++i) {
    const EpilogueStep& st = steps[i];
    quantized = QuantizedOut::kNone;
    if (st.kind == EpilogueOpKind::kQuantizeUnit) {
      bool saturated_next = false;
      i = emit_unit_rounding(o, steps, i, unit_saturated, store, saturated_next, quantized);
      unit_saturated = saturated_next;
      continue;
    }
    unit_saturated = false;
    // The multiplication before a quantize_unit saturates.
    if (i + 1 < steps.size() && steps[i + 1].kind == EpilogueOpKind::kQuantizeUnit) {
      if (st.kind == EpilogueOpKind::kScaledResidualAdd) {
        o << fmt::format("    v = fma_sat({}, residual, v);  // int8 residual add, dequantized, saturated\n",
                         float_literal(st.alpha));
        unit_saturated = true;
        continue;
      }
      if (st.kind == EpilogueOpKind::kMul) {
        o << fmt::format("    v = mul_sat(v, {});  // dequantize, saturated\n", float_literal(st.alpha));
        unit_saturated = true;
        continue;
      }
    }
    if (st.kind == EpilogueOpKind::kRound && st.alpha > 0) {
      i = emit_fake_quantize(o, steps, i, store, quantized);
      continue;
    }
    if (st.kind != EpilogueOpKind::kQuantize) {
      if (st.kind == EpilogueOpKind::kRelu && i + 1 < steps.size() &&
          steps[i + 1].kind == EpilogueOpKind::kQuantize && steps[i + 1].alpha > 0) {
        relu_before = true;
        continue;
      }
      o << "    " << epilogue_step(st) << "\n";
      continue;
    }
    float lo = relu_before ? 0.0f : -128.0f, hi = 127.0f;
    relu_before = false;
    const size_t last = take_integral_clamps(steps, i, lo, hi);
    i = emit_saturated_rounding(o, steps, i, last, lo, hi, store, quantized, "quantize to int8");
  }
  o << "    return v;\n  }\n";
  o << "  __device__ __forceinline__ static float epilogue(const KernelParams& p, float v, int ch,\n"
       "                                                   float residual) {\n"
       "    return after_lead(p, apply_lead(lead_of(p, ch), v), ch, residual);\n  }\n";
  // The store's rounding is the quantize's only where the store is one byte and its range
  // holds the saturated value (checked where `quantized` is set).
  o << fmt::format("  static constexpr int kQuantizedOut = {};  // {}\n", static_cast<int>(quantized),
                   quantized == QuantizedOut::kNone        ? "v is converted to Out"
                   : quantized == QuantizedOut::kSaturated ? "v is saturated to the stored integers, unrounded"
                                                           : "v is 1.5 * 2^23 + the stored integer");
  return o.str();
}

std::string describe(const KernelPlan& plan) {
  const Contraction& c = *plan.c;
  const Epilogue& e = *plan.e;
  std::ostringstream o;
  o << fmt::format("// C[b, m, n] = sum_k A(b, m, k) * B(b, n, k): batch {}, M {}, N {}, K {}\n",
                   c.batch, c.m, c.n, c.k);
  o << fmt::format("// A {} {}-major vec {}; B {} {}-major vec {}; accumulate {}; out {}\n",
                   dtype_name(c.a_dtype), plan.a.k_major ? "K" : "M", plan.a.vec,
                   dtype_name(c.b_dtype), plan.b.k_major ? "K" : "N", plan.b.vec,
                   dtype_name(c.acc_dtype), dtype_name(e.out_dtype));
  o << fmt::format("// schedule {}: grid {} x {} threads, {} B shared memory", plan.s.name(),
                   plan.grid_x, plan.threads, plan.smem_bytes);
  if (plan.workspace_bytes) o << fmt::format(", {} B split-K workspace", plan.workspace_bytes);
  o << "\n";
  return o.str();
}

// The convolution window and shared-memory layout of a halo kernel (tessel_halo.cuh's part of
// the Problem contract), from kernels::halo_layout: host and device use the same numbers.
// `c` is the problem's contraction (plan.c is a grouped conv's dense view).
std::string emit_halo_geometry(const Contraction& c, const KernelPlan& plan) {
  const std::optional<kernels::HaloLayout> l = kernels::halo_layout(c, plan.s);
  TESSEL_ICHECK(l) << "emit_halo_geometry without a halo layout";
  const contraction::ConvWindow& w = l->window;
  std::ostringstream o;
  o << fmt::format("  // halo convolution: X {} ({} images, {}x{}, {} channels), {}x{} window, pad top/left {}/{}\n",
                   w.nchw_input ? "NCHW" : "NHWC", w.images, w.in_h, w.in_w, w.channels, w.kernel_h,
                   w.kernel_w, w.pad_top, w.pad_left);
  // kC: X's channels per pixel (a grouped conv's window is one group's; its pixels hold
  // every group's channels).
  o << fmt::format("  static constexpr int kImages = {}, kInH = {}, kInW = {}, kC = {};\n",
                   w.images, w.in_h, w.in_w, w.channel_pitch);
  o << fmt::format("  static constexpr bool kInputNchw = {};\n", w.nchw_input);
  o << fmt::format("  static constexpr int kOutH = {}, kOutW = {}, kR = {}, kS = {}, kPadT = {}, kPadL = {};\n",
                   w.out_h, w.out_w, w.kernel_h, w.kernel_w, w.pad_top, w.pad_left);
  o << fmt::format(
      "  static constexpr int kStrideH = {}, kStrideW = {}, kDilationH = {}, kDilationW = {};\n",
      w.stride_h, w.stride_w, w.dilation_h, w.dilation_w);
  o << fmt::format(
      "  // {} per CTA: groups of kGroupC input and kGroupN output channels, kSlices slices\n"
      "  static constexpr int kGroupsPerTile = {}, kGroupC = {}, kGroupN = {}, kSlices = {};\n",
      plan.s.groups_per_tile > 0 ? "whole groups" : "one group of all channels", l->groups_per_tile,
      l->group_c, l->group_n, l->slices);
  o << fmt::format("  static constexpr int kTileH = {}, kTileW = {};\n", plan.s.tile_h(), plan.s.tile_w);
  o << fmt::format("  static constexpr bool kTapPairs = {};  // 4-channel pixels, K by (row, tap pair)\n",
                   l->tap_pairs);
  o << fmt::format("  static constexpr int kCP = {}, kPixelPitch = {}, kBufferBytes = {}, kBuffers = {};\n",
                   l->channels_padded, l->pixel_pitch, l->buffer_bytes, l->buffers);
  o << fmt::format("  static constexpr int kKP = {}, kWeightPitch = {}, kWeightBytes = {};\n",
                   l->k_padded, l->weight_pitch, l->weight_bytes);
  return o.str();
}

// The walk over K and the convolution window of a TMA kernel (tessel_tma.cuh's part of the
// Problem contract), from kernels::tma_layout: host and device use the same numbers.
std::string emit_tma_geometry(const kernels::TmaLayout& l) {
  const contraction::ConvWindow& w = l.window;
  std::ostringstream o;
  o << fmt::format("  // TMA operands: A {}, B [N, {} taps, {} channels]\n",
                   l.a_row_windows ? "a tiled map over the NHWC input, a box per kernel row"
                   : l.a_im2col    ? "an im2col map over the NHWC input"
                                   : "a tiled (M, K) map",
                   l.taps,
                   l.channels);
  o << fmt::format("  static constexpr bool kAIm2col = {};\n", l.a_im2col);
  o << fmt::format("  static constexpr bool kARowWindows = {};  // one A box per kernel row: {} pixels\n",
                   l.a_row_windows, l.a_box_rows);
  o << fmt::format("  static constexpr int kABoxRows = {};\n", l.a_box_rows);
  o << fmt::format("  static constexpr int kTaps = {}, kChunks = {}, kKernelW = {};\n", l.taps,
                   l.chunks, l.kernel_w);
  o << fmt::format("  static constexpr int kOutH = {}, kOutW = {}, kStrideH = {}, kStrideW = {};\n",
                   w.out_h, w.out_w, w.stride_h, w.stride_w);
  o << fmt::format("  static constexpr int kPadT = {}, kPadL = {}, kDilationH = {}, kDilationW = {};\n",
                   w.pad_top, w.pad_left, w.dilation_h, w.dilation_w);
  return o.str();
}

}  // namespace

LaunchDims launch_dims(const Contraction& c, const Epilogue& e, const kernels::Schedule& s) {
  KernelPlan plan;
  const auto reason = make_plan(c, e, s, &plan);
  TESSEL_ICHECK(!reason) << "launch_dims() called with a schedule that cannot implement the problem: " << *reason;
  return {plan.grid_x, plan.threads, plan.smem_bytes, plan.workspace_bytes};
}

KernelSource emit(const Contraction& c, const Epilogue& e, const kernels::Schedule& s) {
  KernelPlan plan;
  const auto reason = make_plan(c, e, s, &plan);
  TESSEL_ICHECK(!reason) << "emit() called with a schedule that cannot implement the problem: " << *reason;
  const bool tc = s.instruction != kernels::Instruction::kSimt;
  const bool wgmma = s.instruction == kernels::Instruction::kWgmma;
  const bool halo = s.mainloop == kernels::Mainloop::kHalo;
  const bool tma = s.mainloop == kernels::Mainloop::kTma;
  const char* kernel = halo    ? "HaloConvKernel"
                       : tma   ? "TmaWgmmaKernel"
                       : wgmma ? "WgmmaKernel"
                       : tc    ? "MmaKernel"
                               : "SimtKernel";
  const char* header = halo    ? "tessel_halo.cuh"
                       : tma   ? "tessel_tma.cuh"
                       : wgmma ? "tessel_wgmma.cuh"
                       : tc    ? "tessel_mma.cuh"
                               : "tessel_simt.cuh";

  std::ostringstream body;
  body << "struct Problem {\n";
  if (halo) body << emit_halo_geometry(c, plan);
  if (tma) {
    body << emit_tma_geometry(*plan.tma);
    body << fmt::format("  static constexpr bool kTmaStore = {};  // bulk tensor stores of C (third map)\n",
                        plan.tma_store.has_value());
    // A depth_to_space store's 4-D map {b*C', W, b, images*H} (plan.cc, tma_store_map).
    const bool d2s_map = plan.tma_store && plan.tma_store->rank == 4;
    body << fmt::format("  static constexpr int kTmaStoreD2s = {}, kTmaStoreD2sWidth = {};  // depth_to_space: b*C', W\n",
                        d2s_map ? plan.tma_store->dims[0] : 0, d2s_map ? plan.tma_store->dims[1] : 1);
    body << fmt::format("  static constexpr bool kTmaResidual = {};  // bulk loads of the residual (fourth map)\n",
                        plan.tma_residual.has_value());
    body << fmt::format("  static constexpr bool kProducerWarpgroup = {};  // setmaxnreg: 232 registers per consumer\n",
                        s.tma_producer_warpgroup());
  }
  body << fmt::format("  using Index = {};\n", plan.index64 ? "long long" : "int");
  if (halo) {
    body << fmt::format("  using Element = {};   // the mma operands\n", kernel_element_type(c.b_dtype));
    body << fmt::format("  using ElementA = {};  // X as stored, converted while staged\n",
                        kernel_element_type(c.a_dtype));
  } else if (tc) {
    body << fmt::format("  using Element = {};{}\n", kernel_element_type(c.a_dtype),
                        c.a_dtype != c.b_dtype ? "  // A's element; B is s8 (int8 weights)" : "");
  }
  else {
    body << fmt::format("  using ElementA = {};\n", kernel_element_type(c.a_dtype));
    body << fmt::format("  using ElementB = {};\n", kernel_element_type(c.b_dtype));
  }
  body << fmt::format("  using Out = {};\n", kernel_element_type(e.out_dtype));
  body << fmt::format("  using Residual = {};  // the residual's elements, where there is one\n",
                      kernel_element_type(e.residual_dtype.value_or(e.out_dtype)));
  const Contraction& kc = *plan.c;  // c, or for packed groups its dense view
  body << fmt::format("  static constexpr int kBatch = {}, kM = {}, kN = {}, kK = {};\n", kc.batch, kc.m, kc.n,
                      kc.k);
  body << fmt::format("  static constexpr int kBlockM = {}, kBlockN = {}, kBlockK = {};\n", s.block_m,
                      s.block_n, s.block_k);
  body << fmt::format("  static constexpr int kWarpM = {}, kWarpN = {};\n", s.warp_m, s.warp_n);
  if (tc) {
    body << fmt::format("  static constexpr int kStages = {}, kSplitK = {}, kKTilesPerSplit = {}, kRaster = {};\n",
                        s.stages, s.split_k, plan.k_tiles_per_split, s.raster);
  } else {
    body << fmt::format("  static constexpr int kSplitK = 1, kRaster = {};\n", s.raster);
  }
  if (tc && !wgmma && !halo) {
    int64_t group_n = 0, group_ci = 0;
    if (s.groups_per_tile > 0) {
      const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
      TESSEL_ICHECK(l) << "packed groups without a grouped contraction";
      group_n = l->n_per_group;
      group_ci = l->ci_padded;  // shared memory's channels per group and tap
    }
    body << fmt::format("  // packed groups: whole groups per N tile, channels per group of C and of A\n"
                        "  static constexpr int kGroupsPerTile = {}, kGroupN = {}, kGroupCi = {};\n",
                        s.groups_per_tile, group_n, group_ci);  }
  if (!wgmma && !halo) {
    const std::optional<contraction::OperandPrologue>& pro = e.a_prologue;
    body << fmt::format("  // A prologue: 0 none, 1 A * P[0, c] + P[1, c], 2 the same then relu; c = k % channels\n"
                        "  static constexpr int kPrologue = {}, kPrologueOperand = {}, kPrologueChannels = {};\n",
                        pro ? (pro->relu ? 2 : 1) : 0, pro ? pro->operand : 0, pro ? pro->channels : 1);
  }
  body << fmt::format("  static constexpr bool kAKMajor = {}, kBKMajor = {};\n", plan.a.k_major, plan.b.k_major);
  body << fmt::format("  static constexpr int kAVec = {}, kBVec = {};\n\n", plan.a.vec, plan.b.vec);
  for (const OperandPlan* op : {&plan.a, &plan.b}) {
    if (halo || tma) break;  // the halo kernel addresses X and W itself, the TMA kernel's maps do
    std::istringstream g(emit_gather(plan, *op));
    for (std::string line; std::getline(g, line);) {
      body << (line.empty() || line[0] == '#' ? "" : "  ") << line << "\n";
    }
    body << "\n";
  }
  QuantizedOut quantized = QuantizedOut::kNone;
  body << emit_epilogue(plan, quantized) << "\n";
  body << emit_store(plan, quantized);
  body << "};\n";

  KernelSource ks;
  ks.name = fmt::format("tessel_{}_{:016x}", s.name(), fnv1a64(body.str()));
  std::ostringstream src;
  src << "// Generated by tessel (kernels/cuda/emit.cc): one contraction kernel.\n";
  src << describe(plan);
  src << fmt::format("#include \"{}\"\n\n", header);
  src << "namespace {\nusing namespace tessel;\n\n" << body.str() << "\n";
  src << fmt::format("static_assert({}<Problem>::kSmemBytes == {}, \"host and device agree on shared memory\");\n",
                     kernel, plan.smem_bytes);
  src << fmt::format("static_assert({}<Problem>::kThreads == {}, \"host and device agree on threads\");\n",
                     kernel, plan.threads);
  src << "}  // namespace\n\n";
  if (tma) {
    src << fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) {}(const tessel::KernelParams p,\n"
                       "    const __grid_constant__ tessel::TensorMaps maps) {{\n",
                       plan.threads, ks.name);
    src << fmt::format("  tessel::grid_dependency_wait();\n  tessel::{}<Problem>::run(p, maps);\n}}\n",
                       kernel);
  } else {
    // The halo schedules' persistent CTAs assume 128 registers per thread (default_schedule.cc,
    // halo_resident): the launch bounds hold the compiler to that, or a schedule of two CTAs
    // per SM runs one and a second wave (ResNet's 7x7 stem took 200 registers).
    const std::string min_blocks =
        halo ? fmt::format(", {}", std::max(1, 65536 / (plan.threads * 128))) : std::string();
    src << fmt::format("extern \"C\" __global__ void __launch_bounds__({}{}) {}(const tessel::KernelParams p) {{\n",
                       plan.threads, min_blocks, ks.name);
    src << fmt::format("  tessel::grid_dependency_wait();\n  tessel::{}<Problem>::run(p);\n}}\n", kernel);
  }
  ks.source = src.str();
  ks.grid_dependent = true;
  ks.headers = embedded_headers();
  ks.grid[0] = static_cast<unsigned>(plan.grid_x);
  ks.block[0] = static_cast<unsigned>(plan.threads);
  ks.smem_bytes = plan.smem_bytes;
  ks.workspace_bytes = plan.workspace_bytes;
  if (plan.tma) ks.tensor_maps = {plan.tma->a, plan.tma->b};
  if (plan.tma_store) ks.tensor_maps.push_back(*plan.tma_store);
  if (plan.tma_residual) ks.tensor_maps.push_back(*plan.tma_residual);
  return ks;
}

}  // namespace tessel::kernels::cuda
