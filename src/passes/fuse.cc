// Fuses the per-element work after each contraction into it, as epilogue data
// (ops/tessel_epilogue.h): a tessel.Conv or tessel.Gemm absorbs the chain of ops that reads its
// output, one op at a time, while each intermediate value has exactly one reader (a
// tessel.InstanceNormalization or tessel.GroupNormalization absorbs the activations alone, the
// GroupNorm + SiLU of diffusion UNets, the InstanceNorm + ReLU of style-transfer nets):
//   Relu, LeakyRelu, Sigmoid, HardSwish       -> relu, leaky_relu(alpha), sigmoid, hardswish
//   PRelu with a one-element constant slope    -> leaky_relu(slope)
//   Tanh, Mish, HardSigmoid, Elu               -> tanh, mish, hard_sigmoid(alpha, beta), elu(alpha)
//   Gelu (approximate none / tanh)             -> gelu, gelu_tanh
//   Clip with constant (or absent) bounds     -> clip(min, max); an absent bound is the fp32
//                                                range, as in the Clip reference kernel
//   Mul(v, Sigmoid(v))                         -> silu (v read by exactly those two)
//   Mul(v, DequantizeLinear(QuantizeLinear(    -> silu_qgate(s, s'): the gate quantized to
//       Sigmoid(v), s), s')), int8, zero point 0  int8 and back, a QDQ model's SiLU
//   Add(v, r), r any tensor of v's type        -> add_residual, r becomes input R (one per node)
//   QuantizeLinear(v, s) to int8, zero point 0 -> quantize(s), out_dtype i8; after it only
//   [DequantizeLinear(q, s')]                     mul(s') (back to f32), then the steps above
//   QuantizeLinear(v, s) to uint8, zero point 0 -> round(s), clip(0, 255), out_dtype u8
//                                                (onnxruntime's activations after a ReLU; where
//                                                ops::stores_uint8); after it as after int8's
//   Add(v, DequantizeLinear(r, s)), r int8     -> add_residual_scaled(s), r becomes input R
//     (or uint8 with zero point 0)
//   QuantizeLinear(v, s, z) -> DequantizeLinear -> round(s), clip(qmin - z, qmax - z), mul(s):
//   (s, z), u8 or asymmetric i8, per tensor      an asymmetric pair as a fake quantization
//                                                (onnxruntime's default QUInt8 activations)
//   (per-tensor scales, zero points 0 or absent: TensorRT's symmetric int8; the int8 residual
//   only where the contraction kernels run: tessel.Gemm, group-1 tessel.Conv. A grouped
//   conv's kernels take the quantize and the DequantizeLinear back to its own dtype: a QDQ
//   model's depthwise conv stores int8 where its QuantizeLinear -> DequantizeLinear -> Clip ->
//   QuantizeLinear chain was four kernels, and ResNeXt's grouped 3x3 convs likewise)
//   tessel.DepthToSpace (tessel.Conv only)     -> store = depth_to_space; after it only the
//                                                per-element activations (it moves the values
//                                                they act on), no residual and no second store
// The conv's bias was already input B (convert-layout); Gemm's likewise. Then the graph edge's
// layout and dtype changes, in either order, where the epilogue reads no residual (R is given
// in the pre-store layout and dtype, the GPU kernel reads it at the stored positions):
//   Transpose(perm [0, 3, 1, 2])               -> store = nchw (or depth_to_space_nchw)
//   Cast to f16, bf16 or f32                   -> out_dtype; dropped if it is the identity
// both for convs of group 1 only (grouped convs run on the window kernel, whose store is NHWC
// in the input's dtype); tessel.Gemm takes the Cast. So the last conv of a network writes the
// NCHW fp32 graph output itself.
//
// The stems, from the other side: X_nchw -> [Cast] -> Transpose(perm [0, 2, 3, 1]) -> [Pad of
// zero channels] -> tessel.Conv becomes a tessel.Conv with input_layout = "nchw" reading X_nchw
// in its own dtype, its weights cut back to the unpadded channels (the padded channels of X
// were zeros, so they added nothing). Only where the halo kernel takes the conv (it stages the
// input tile once, converting it, so that the gather costs nothing): group 1, at most
// kMaxStemChannels input and kMaxStemOutChannels output channels -- a super-resolution net's
// first 3x3 conv over RGB; strided or dilated (ResNet's 7x7 stride-2 stem, the 3x3 stride-2
// stems of MobileNet, EfficientNet and RegNet) only with f16 or bf16 weights (an fp32 engine's
// SIMT conv keeps the NHWC copy) and at least kMinStridedStemPixels output pixels. A Cast, Transpose or Pad that some other node also reads stays. A Cast to its dtype
// before a conv that already reads NCHW goes too (the pipeline run twice), and so does a
// per-tensor int8 DequantizeLinear with zero point 0 (a QDQ model's quantized graph input): the
// conv reads the int8 X and its scale as S (see fold_dequantize). A strided stem whose
// input is NHWC already (a model with an NHWC input: convert-layout's Transposes cancel) loses
// only its channel Pad, where the halo kernel stages its pixels itself: at most 4 channels, an
// even horizontal stride, dilation 1 (tap pairs), and the strided stems' rules above.
//
// Order: the fused node takes the place of the last node it absorbs, not of the contraction.
// Every operand it reads is an operand of some absorbed node or of the contraction, all of
// which come before that last node; every value it writes was written there. So the residual
// r may be computed anywhere before the Add -- even after the conv -- and no node moves
// except the contraction, later, past nodes that do not read its chain. Topological order,
// and the position of every surviving value's producer, are preserved.
//
// First, per-element work behind a channel-keeping Reshape moves before it, and a per-channel
// constant Mul folds into the weights (Sinker, below), so ConvNeXt's Linear -> GELU and
// Linear -> layer scale -> residual fuse as above.
//
// Injective chains that no contraction absorbs (a Relu after a pool, a residual Add of two
// pool outputs, the edge Cast + Transpose + Pad before a stem of many channels) stay ONNX ops in place,
// one op kernel each (no pass fuses such chains into one kernel yet). Run after convert-layout
// (which creates the tessel contractions) and choose-precision.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <optional>

#include "ops/quant_common.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;
using ops::EpilogueKind;
using ops::EpilogueStep;
using StoreKind = ops::StoreMap::Kind;

// Stems with more input channels than this keep their NHWC input: their NCHW gather reads one
// element per tap and channel, which only pays where the channels are few.
constexpr int64_t kMaxStemChannels = 16;
// Nor do stems with more output channels than the halo kernel's widest N tile: no other Tensor
// Core kernel reads an fp32 NCHW input.
constexpr int64_t kMaxStemOutChannels = 128;
// A strided or dilated stem reads NCHW only with this many output pixels or more. Measured on an
// H200 (2026-11-28, the layout nodes kept against folded, whole models): at batch 32 the folded
// stems were faster (ResNet-50 1.265 -> 1.237 ms, MobileNet-v2 0.554 -> 0.525,
// EfficientNet-b0 0.954 -> 0.929); at batch 1 ResNet-50's 7x7/2 stem, 12,544 pixels in 49
// halo tiles that leave most SMs idle while each stages its input and runs its 25 k-steps in
// series, was slower (0.266 -> 0.273 ms; 0.280 with 98 smaller tiles), MobileNet-v2's even.
constexpr int64_t kMinStridedStemPixels = int64_t{1} << 17;

bool is_transpose(const ir::Node& n, const std::vector<int64_t>& perm) {
  return n.op == "Transpose" && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         n.get_ints("perm") == perm;
}

bool group_one(const ir::Node& conv) { return conv.get_int("group", 1) == 1; }

// The dtypes the GPU's contraction kernels store (kernels/cuda/plan.cc, check_epilogue).
bool storable(DType t) { return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32; }

// The epilogue step of a per-element activation `n` reading v as its input 0 (its other
// inputs, Clip's bounds, constants), or nothing: what the Fuser absorbs, and what the Sinker
// may move before a Reshape.
std::optional<EpilogueStep> activation_step(const ir::Graph& g, const ir::Node& n, ValueId v) {
  if (n.inputs.empty() || n.inputs[0] != v || n.outputs.size() != 1) return std::nullopt;
  if (n.op == "Relu") return EpilogueStep{EpilogueKind::kRelu};
  if (n.op == "Sigmoid") return EpilogueStep{EpilogueKind::kSigmoid};
  if (n.op == "HardSwish") return EpilogueStep{EpilogueKind::kHardSwish};
  if (n.op == "Tanh") return EpilogueStep{EpilogueKind::kTanh};
  if (n.op == "Mish") return EpilogueStep{EpilogueKind::kMish};
  if (n.op == "HardSigmoid")
    return EpilogueStep{EpilogueKind::kHardSigmoid, n.get_float("alpha", 0.2), n.get_float("beta", 0.5)};
  if (n.op == "Elu") return EpilogueStep{EpilogueKind::kElu, n.get_float("alpha", 1.0)};
  if (n.op == "Gelu") {
    const std::string approximate = n.get_string("approximate", "none");
    if (approximate == "none") return EpilogueStep{EpilogueKind::kGelu};
    if (approximate == "tanh") return EpilogueStep{EpilogueKind::kGeluTanh};
    return std::nullopt;  // the op's own check reports it
  }
  if (n.op == "LeakyRelu")
    return EpilogueStep{EpilogueKind::kLeakyRelu, n.get_float("alpha", 0.01)};
  // PRelu with one slope for every channel (PyTorch's nn.PReLU() default) is a leaky ReLU.
  if (n.op == "PRelu") {
    const Tensor* slope = n.inputs.size() == 2 ? g.value(n.inputs[1]).data.get() : nullptr;
    if (!slope || slope->numel() != 1) return std::nullopt;
    return EpilogueStep{EpilogueKind::kLeakyRelu, slope->get_f64(0)};
  }
  if (n.op != "Clip") return std::nullopt;
  double bound[2] = {n.get_float("min", -FLT_MAX), n.get_float("max", FLT_MAX)};
  for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const Tensor* t = g.value(n.inputs[i]).data.get();
    if (!t) return std::nullopt;  // a run-time bound is no epilogue parameter
    bound[i - 1] = t->get_f64(0);
  }
  return EpilogueStep{EpilogueKind::kClip, bound[0], bound[1]};
}

// The scale of a per-tensor, symmetric Q/DQ node `n` of `op` reading v as its input 0 whose
// integer side is int8 and float side a stored dtype, or nothing.
std::optional<double> int8_scale(const ir::Graph& g, const ir::Node& n, const char* op, ValueId v) {
  if (n.op != op || n.inputs.empty() || n.inputs[0] != v) return std::nullopt;
  const std::optional<SymmetricQdq> q = symmetric_qdq(g, n);
  const ValueId f = std::string_view(op) == "QuantizeLinear" ? n.inputs[0] : n.outputs[0];
  if (!q || !storable(g.type(f).dtype)) return std::nullopt;  // the float side: f32, f16 or bf16
  return q->int8_scale();
}

// A per-tensor QuantizeLinear or DequantizeLinear `n` of `op` reading v as its input 0, to or
// from u8 or i8 with any constant zero point, its scale a positive constant and its float side
// a stored dtype: the parameters of an asymmetric pair (onnxruntime's default QUInt8
// activations), or nothing.
struct AffineQdq {
  double scale;
  int64_t zero_point;
  DType integer;
};
std::optional<AffineQdq> affine_qdq(const ir::Graph& g, const ir::Node& n, const char* op, ValueId v) {
  if (n.op != op || n.inputs.empty() || n.inputs[0] != v) return std::nullopt;
  const std::optional<QdqParams> p = qdq_params(g, n);
  if (!p || !p->per_tensor()) return std::nullopt;
  const std::optional<int64_t> z = p->tensor_zero_point();
  const double scale = p->scale->get_f64(0);
  if (!z || !(scale > 0.0) || !std::isfinite(scale)) return std::nullopt;
  if (p->integer != DType::kU8 && p->integer != DType::kI8) return std::nullopt;
  const bool quantize = std::string_view(op) == "QuantizeLinear";
  if (!storable(g.type(quantize ? n.inputs[0] : n.outputs[0]).dtype)) return std::nullopt;
  return AffineQdq{scale, *z, p->integer};
}

// The scale of a per-tensor QuantizeLinear or DequantizeLinear `n` of `op` reading v, to or
// from uint8 with zero point 0 (onnxruntime's default activations after a ReLU, which its
// quantizer drops: the range [0, 255] does it), or nothing. Such a QuantizeLinear is
// round(s), clip(0, 255) stored as u8 (the int8 contractions read it as their A), such a
// DequantizeLinear mul(s), as int8's.
std::optional<double> uint8_scale(const ir::Graph& g, const ir::Node& n, const char* op, ValueId v) {
  const std::optional<AffineQdq> q = affine_qdq(g, n, op, v);
  if (!q || q->integer != DType::kU8 || q->zero_point != 0) return std::nullopt;
  return q->scale;
}

bool has_residual_step(const std::vector<EpilogueStep>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const EpilogueStep& s) {
    return s.kind == EpilogueKind::kAddResidual || s.kind == EpilogueKind::kAddScaledResidual;
  });
}

class Fuser {
 public:
  explicit Fuser(ir::Graph g)
      : g_(std::move(g)),
        uses_(use_counts(g_)),
        users_(g_.users()),
        producers_(g_.producers()),
        gone_(g_.values.size(), 0),
        absorbed_(g_.nodes.size(), 0),
        placed_(g_.nodes.size()) {}

  ir::Graph run() {
    bool changed = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const std::string& op = g_.nodes[i].op;
      if (!absorbed_[i] && (op == "tessel.Conv" || op == "tessel.Gemm" || is_norm(op))) changed |= fuse_from(i);
    }
    if (!changed) return std::move(g_);
    std::vector<ir::Node> nodes;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (placed_[i]) {
        nodes.push_back(std::move(*placed_[i]));
      } else if (!absorbed_[i]) {
        nodes.push_back(std::move(g_.nodes[i]));
      }
    }
    g_.nodes = std::move(nodes);
    g_.compact();
    return std::move(g_);
  }

 private:
  // The only reader of v (and v is no graph output), or -1.
  int sole_user(ValueId v) const {
    const std::vector<int>& u = users_[static_cast<size_t>(v)];
    return uses_[static_cast<size_t>(v)] == 1 && u.size() == 1 && !absorbed_[u[0]] ? u[0] : -1;
  }

  // Mul(v, Sigmoid(v)) with v read by exactly those two: silu; or with the gate quantized to
  // int8 and back between them, Mul(v, DequantizeLinear(QuantizeLinear(Sigmoid(v), s), s'))
  // (onnxruntime's QDQ EfficientNet and MobileNet-v3, each intermediate read once):
  // silu_qgate(s, s'). The nodes absorbed, the Sigmoid first and the Mul last.
  struct Silu {
    std::vector<int> nodes;
    EpilogueStep step;
  };
  std::optional<Silu> silu(ValueId v) const {
    const std::vector<int>& u = users_[static_cast<size_t>(v)];
    if (uses_[static_cast<size_t>(v)] != 2 || u.size() != 2) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      const int s = u[k], m = u[1 - k];
      const ir::Node& sig = g_.nodes[s];
      const ir::Node& mul = g_.nodes[m];
      if (sig.op != "Sigmoid" || mul.op != "Mul" || absorbed_[s] || absorbed_[m]) continue;
      Silu found{{s}, {EpilogueKind::kSilu}};
      ValueId gate = sig.outputs[0];
      if (const int q = sole_user(gate); q >= 0 && g_.nodes[q].op == "QuantizeLinear") {
        const ir::Node& quantize = g_.nodes[q];
        const int d = sole_user(quantize.outputs[0]);
        const std::optional<double> scale = int8_scale(g_, quantize, "QuantizeLinear", gate);
        const std::optional<double> back =
            d < 0 ? std::nullopt : int8_scale(g_, g_.nodes[d], "DequantizeLinear", quantize.outputs[0]);
        if (!scale || !back) continue;
        found.nodes.insert(found.nodes.end(), {q, d});
        found.step = {EpilogueKind::kSiluQuantizedGate, *scale, *back};
        gate = g_.nodes[d].outputs[0];
      }
      const bool operands = (mul.inputs[0] == v && mul.inputs[1] == gate) ||
                            (mul.inputs[0] == gate && mul.inputs[1] == v);
      if (!operands || sole_user(gate) != m) continue;
      found.nodes.push_back(m);
      return found;
    }
    return std::nullopt;
  }

  // The other operand r of Add(v, r) / Add(r, v) if it can become the residual input R: a
  // non-constant of v's type, and the epilogue has no residual yet.
  ValueId residual(const ir::Node& add, ValueId v, const std::vector<EpilogueStep>& steps) const {
    if (add.op != "Add" || add.inputs.size() != 2) return kNoValue;
    // v has this Add as its only reader, so exactly one operand is v.
    const ValueId r = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    if (g_.value(r).is_constant()) return kNoValue;
    if (!(g_.type(r) == g_.type(v)) || !(g_.type(add.outputs[0]) == g_.type(v))) return kNoValue;
    return has_residual_step(steps) ? kNoValue : r;
  }

  // Add(v, DequantizeLinear(r, s)) with r int8 (or uint8 with zero point 0): r and s, for
  // add_residual_scaled. (A uint8 r of another zero point would add -z * s per output: it
  // stays a DequantizeLinear, its float R an add_residual.)
  std::optional<std::pair<ValueId, double>> int8_residual(const ir::Node& add, ValueId v,
                                                           const std::vector<EpilogueStep>& steps) const {
    const ValueId d = residual(add, v, steps);
    const int p = d == kNoValue ? -1 : producers_[static_cast<size_t>(d)];
    if (p < 0) return std::nullopt;
    const ir::Node& dq = g_.nodes[static_cast<size_t>(p)];
    std::optional<double> s = int8_scale(g_, dq, "DequantizeLinear", dq.inputs[0]);
    if (!s) s = uint8_scale(g_, dq, "DequantizeLinear", dq.inputs[0]);
    // r itself must still exist: not an inner value of a chain fused before.
    if (!s || absorbed_[static_cast<size_t>(p)] || gone_[static_cast<size_t>(dq.inputs[0])]) return std::nullopt;
    return std::make_pair(dq.inputs[0], *s);
  }

  // QuantizeLinear(v, s, z) -> DequantizeLinear(., s', z) with the integer read by that
  // DequantizeLinear alone, where TensorRT's symmetric int8 (int8_scale) does not apply: a
  // fake quantization of v, which the contraction applies itself and stores the dequantized
  // value, instead of two elementwise kernels writing and reading the integers. Q's
  //   clamp(round(v / s) + z, qmin, qmax)  and DQ's  (q - z) * s'
  // are round(s), clip(qmin - z, qmax - z), mul(s'): the same integers, offset by z, and the
  // same product (q - z is exact in every float type). One scale only, up to the
  // DequantizeLinear's rounding to fp16 (choose-precision's scale constants: 2^-11 relative;
  // fold_requantize's bound): a quantizer's activation pair. A pair that rescales (two scales)
  // or moves the zero point is left as written. `back_to`: the dtype the DequantizeLinear must
  // write (a grouped conv's kernels store their own), if any. The DequantizeLinear's index and
  // the steps, or nothing.
  std::optional<std::pair<int, std::vector<EpilogueStep>>> fake_quantize(const ir::Node& q, ValueId v,
                                                                         std::optional<DType> back_to) const {
    const std::optional<AffineQdq> quant = affine_qdq(g_, q, "QuantizeLinear", v);
    if (!quant || int8_scale(g_, q, "QuantizeLinear", v)) return std::nullopt;
    const int d = sole_user(q.outputs[0]);
    if (d < 0) return std::nullopt;
    const ir::Node& dq = g_.nodes[static_cast<size_t>(d)];
    const std::optional<AffineQdq> dequant = affine_qdq(g_, dq, "DequantizeLinear", q.outputs[0]);
    if (!dequant || dequant->zero_point != quant->zero_point || std::abs(dequant->scale / quant->scale - 1.0) > 1.0 / 512)
      return std::nullopt;
    if (back_to && g_.type(dq.outputs[0]).dtype != *back_to) return std::nullopt;
    const ops::QuantRange range = ops::quant_range(quant->integer);
    const double z = static_cast<double>(quant->zero_point);
    std::vector<EpilogueStep> steps = {{EpilogueKind::kRound, quant->scale},
                                       {EpilogueKind::kClip, static_cast<double>(range.lo) - z, static_cast<double>(range.hi) - z},
                                       {EpilogueKind::kMul, dequant->scale}};
    return std::make_pair(d, std::move(steps));
  }

  // A Cast of v between the dtypes the GPU stores.
  bool is_float_cast(const ir::Node& n, ValueId v) const {
    return n.op == "Cast" && n.inputs.size() == 1 && n.inputs[0] == v &&
           storable(g_.type(v).dtype) && storable(g_.type(n.outputs[0]).dtype);
  }

  // R is input 3 (B may be omitted; an int8 contraction's S, input 4, stays).
  static void set_residual(ir::Node& n, ValueId r) {
    if (n.inputs.size() < 4) n.inputs.resize(4, kNoValue);
    n.inputs[3] = r;
  }

  // The normalizations whose kernels finish their outputs with activation steps.
  static bool is_norm(const std::string& op) {
    return op == "tessel.InstanceNormalization" || op == "tessel.GroupNormalization";
  }

  bool fuse_from(size_t i) {
    ir::Node fused = g_.nodes[i];
    const bool conv = fused.op == "tessel.Conv";
    // A normalization takes activations only: no residual, int8 step, store map or edge store.
    const bool norm = is_norm(fused.op);
    std::vector<EpilogueStep> steps = ops::read_epilogue(fused);
    ops::StoreMap store = conv ? ops::read_store(fused) : ops::StoreMap{};
    std::optional<DType> out_dtype = ops::read_out_dtype(fused);
    // What the node stores without an out_dtype: its own dtype (W's; f32 for an int8
    // contraction). An int8 contraction's float out_dtype is choose-precision's storage of
    // that f32 value, not an edge store: the chain goes on through it, and the store converts
    // to the dtype the chain ends in.
    const bool int8 = ops::is_int8_contraction(g_, fused);
    const DType own = int8 ? DType::kF32 : g_.type(fused.outputs[0]).dtype;
    if (int8 && out_dtype && is_float(*out_dtype)) out_dtype.reset();
    ValueId v = fused.outputs[0];
    std::vector<int> chain;
    // The steps end in a QuantizeLinear to uint8 (round(s), clip(0, 255)), which only its
    // DequantizeLinear continues.
    bool uint8_quantized = false;
    // The epilogue proper acts on the NHWC value in the node's dtype: a residual only before
    // any store map (R is read in the pre-store layout); activations, and a per-tensor
    // QuantizeLinear, elementwise too, also after a depth_to_space store (a ConvTranspose's,
    // made by convert-layout, or a pixel shuffle's: a QDQ super-resolution net quantizes after
    // each shuffle, and its upsampling convs then store int8, not f32 for a QuantizeLinear
    // kernel to read).
    while (!store.nchw() && !out_dtype) {
      const bool plain = store.kind == StoreKind::kNhwc;
      if (std::optional<Silu> sm = silu(v)) {
        steps.push_back(sm->step);
        chain.insert(chain.end(), sm->nodes.begin(), sm->nodes.end());
        v = g_.nodes[sm->nodes.back()].outputs[0];
        continue;
      }
      const int u = sole_user(v);
      if (u < 0) break;
      const ir::Node& next = g_.nodes[u];
      if (norm) {
        const std::optional<EpilogueStep> step = activation_step(g_, next, v);
        if (!step) break;
        steps.push_back(*step);
        chain.push_back(u);
        v = next.outputs[0];
        continue;
      }
      if (auto fq = fake_quantize(next, v, conv && !group_one(fused) ? std::optional<DType>(own) : std::nullopt)) {
        steps.insert(steps.end(), fq->second.begin(), fq->second.end());
        chain.push_back(u);
        chain.push_back(fq->first);
        v = g_.nodes[static_cast<size_t>(fq->first)].outputs[0];
        continue;
      }
      const bool quantized = !steps.empty() && steps.back().kind == EpilogueKind::kQuantize;
      if (quantized || uint8_quantized) {  // an integer: only its DequantizeLinear continues the epilogue
        const std::optional<double> s = quantized ? int8_scale(g_, next, "DequantizeLinear", v)
                                                  : uint8_scale(g_, next, "DequantizeLinear", v);
        if (!s) break;
        // A grouped conv's kernels (window, halo, packed groups) store int8 or its own dtype: a
        // DequantizeLinear to another float type (a graph output's f32) stays a kernel of its own.
        const DType back_to = g_.type(next.outputs[0]).dtype;
        if (conv && !group_one(fused) && back_to != own) break;
        steps.push_back({EpilogueKind::kMul, *s});
        uint8_quantized = false;
      } else if (std::optional<double> s = int8_scale(g_, next, "QuantizeLinear", v)) {
        steps.push_back({EpilogueKind::kQuantize, *s});
      } else if (std::optional<double> s = ops::stores_uint8(g_, fused)
                                               ? uint8_scale(g_, next, "QuantizeLinear", v)
                                               : std::nullopt) {
        // Where the node's kernels store uint8 (ops::stores_uint8): zero point 0, as
        // ends_quantized(steps, u8) checks.
        steps.push_back({EpilogueKind::kRound, *s});
        steps.push_back({EpilogueKind::kClip, 0.0, 255.0});
        uint8_quantized = true;
      } else if (auto step = activation_step(g_, next, v)) {
        steps.push_back(*step);
      } else if (auto r = plain && (!conv || group_one(fused)) ? int8_residual(next, v, steps)
                                                                : std::nullopt) {
        steps.push_back({EpilogueKind::kAddScaledResidual, r->second});
        set_residual(fused, r->first);
        // The fused node reads r now, besides r's DequantizeLinear: no chain may swallow r.
        ++uses_[static_cast<size_t>(r->first)];
      } else if (ValueId r = plain ? residual(next, v, steps) : kNoValue; r != kNoValue) {
        steps.push_back({EpilogueKind::kAddResidual});
        set_residual(fused, r);
      } else if (plain && conv && next.op == "tessel.DepthToSpace") {
        store.kind = StoreKind::kDepthToSpace;
        store.block = next.require_int("blocksize");
        store.dcr = next.get_string("mode", "DCR") == "DCR";
      } else {
        break;
      }
      chain.push_back(u);
      v = next.outputs[0];
    }
    if (!steps.empty() && steps.back().kind == EpilogueKind::kQuantize) out_dtype = DType::kI8;
    if (uint8_quantized) out_dtype = DType::kU8;
    const bool edge_stores = !norm && !has_residual_step(steps) && out_dtype != DType::kI8 &&
                             out_dtype != DType::kU8 && (!conv || group_one(fused));
    for (int u; edge_stores && (u = sole_user(v)) >= 0;) {
      const ir::Node& next = g_.nodes[u];
      if (conv && !store.nchw() && is_transpose(next, {0, 3, 1, 2})) {
        store.kind = store.depth_to_space() ? StoreKind::kDepthToSpaceNchw : StoreKind::kNchw;
      } else if (is_float_cast(next, v) && g_.type(next.outputs[0]).dtype == g_.type(v).dtype) {
        // The identity: choose-precision, run again, casts a graph output already stored fp32.
      } else if (!out_dtype && is_float_cast(next, v)) {
        out_dtype = g_.type(next.outputs[0]).dtype;
      } else {
        break;
      }
      chain.push_back(u);
      v = next.outputs[0];
    }
    if (chain.empty()) return false;
    // A chain that ends in another dtype than the contraction's own (through a DequantizeLinear
    // to fp16, or an int8 contraction's fp16 result): the store converts.
    if (!out_dtype && g_.type(v).dtype != own) out_dtype = g_.type(v).dtype;
    fused.outputs[0] = v;
    // A QDQ chain's requantizations to the grid the value is on cost the kernels six
    // instructions per output and change no value: gone (ops::fold_requantize).
    ops::write_epilogue(fused, ops::fold_requantize(steps));
    if (conv) ops::write_store(fused, store);
    if (!norm) ops::write_out_dtype(fused, out_dtype);
    absorbed_[i] = 1;
    for (int c : chain) {
      absorbed_[c] = 1;
      for (ValueId o : g_.nodes[c].outputs) gone_[static_cast<size_t>(o)] = o != v;
    }
    for (ValueId o : g_.nodes[i].outputs) gone_[static_cast<size_t>(o)] = o != v;
    // The SiLU's nodes are pushed Sigmoid first, but the Mul comes after them: take the last
    // index.
    placed_[static_cast<size_t>(*std::max_element(chain.begin(), chain.end()))] = std::move(fused);
    return true;
  }

  ir::Graph g_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> users_;
  std::vector<int> producers_;
  std::vector<char> gone_;  // inner values of the chains fused so far (no longer written)
  std::vector<char> absorbed_;
  std::vector<std::optional<ir::Node>> placed_;  // a fused node, at the index it replaces
};

// Pad(x, pads) that appends zero channels to an NHWC x: constant mode, value 0 (or absent),
// pads [0, 0, 0, 0, 0, 0, 0, extra], no axes.
bool zero_channel_pad(const ir::Graph& g, const ir::Node& n) {
  auto constant = [&](ValueId v) { return v == kNoValue ? nullptr : g.value(v).data.get(); };
  if (n.op != "Pad" || n.get_string("mode", "constant") != "constant") return false;
  if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* value = constant(n.inputs[2]);
    if (!value || value->numel() != 1 || value->get_f64(0) != 0.0) return false;
  }
  const Tensor* pads = n.inputs.size() > 1 ? constant(n.inputs[1]) : nullptr;
  if (!pads || pads->dtype() != DType::kI64 || pads->numel() != 8) return false;
  const std::vector<int64_t> p = pads->to_i64_vector();
  return std::all_of(p.begin(), p.end() - 1, [](int64_t e) { return e == 0; }) && p[7] >= 0;
}

// The stem rewrite (see the top of the file): one conv at a time, each removing the Cast,
// Transpose and Pad that only it reads.
class StemFolder {
 public:
  explicit StemFolder(ir::Graph g)
      : g_(std::move(g)),
        uses_(use_counts(g_)),
        producers_(g_.producers()),
        erased_(g_.nodes.size(), 0) {}

  ir::Graph run() {
    bool changed = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i].op == "tessel.Conv") changed |= fold(g_.nodes[i]);
    if (changed) erase_nodes(g_, erased_);  // also drops the values nobody reads any more
    return std::move(g_);
  }

 private:
  // The node writing v when v has no other reader than the one asking (and is no graph
  // output), or -1.
  int sole_producer(ValueId v) const {
    const int p = producers_[static_cast<size_t>(v)];
    const bool sole = p >= 0 && uses_[static_cast<size_t>(v)] == 1;
    return sole && !erased_[static_cast<size_t>(p)] ? p : -1;
  }

  const Tensor* constant(ValueId v) const {
    return v == kNoValue ? nullptr : g_.value(v).data.get();
  }

  bool is_zero_channel_pad(const ir::Node& n) const { return zero_channel_pad(g_, n); }

  bool fold(ir::Node& conv) {
    if (!group_one(conv) || conv.inputs.size() < 2) return false;
    bool changed = false;
    if (!ops::read_nchw_input(conv)) {
      if (!fold_layout(conv)) return fold_nhwc_pad(conv);
      changed = true;
    }
    changed |= fold_cast(conv);
    return fold_dequantize(conv) || changed;
  }

  // Whether a strided or dilated stem `conv` has the halo kernel's tiles to fill the SMs (its
  // output pixels, counted before the store map: the Fuser ran, so Y may be NCHW already), and
  // the weights that kernel takes (f16, bf16).
  bool strided_stem_fits(const ir::Node& conv) const {
    const Shape& y = g_.type(conv.outputs[0]).shape;
    const ops::StoreMap store = ops::read_store(conv);
    int64_t pixels = store.nchw() ? y.at(0) * y.at(2) * y.at(3) : y.at(0) * y.at(1) * y.at(2);
    if (store.depth_to_space()) pixels /= store.block * store.block;
    const DType wt = g_.type(conv.inputs[1]).dtype;
    return pixels >= kMinStridedStemPixels && (wt == DType::kF16 || wt == DType::kBF16);
  }

  // The channel Pad before a strided stem that stays NHWC (a model whose input is NHWC, as
  // tf2onnx writes them: convert-layout's Transposes cancel, and only its alignment Pad is
  // left), where the halo kernel stages the pixels itself (ops::stem_tap_pairs), with no
  // 16-byte loads to align: the Pad goes and the weights are cut back.
  bool fold_nhwc_pad(ir::Node& conv) {
    const int pad = sole_producer(conv.inputs[0]);
    if (pad < 0 || !is_zero_channel_pad(g_.nodes[pad])) return false;
    const ValueId x = g_.nodes[pad].inputs[0];
    const std::vector<int64_t> strides = conv.get_ints("strides", {1, 1});
    const std::vector<int64_t> dilations = conv.get_ints("dilations", {1, 1});
    if (strides.size() != 2 || dilations.size() != 2 ||
        g_.type(conv.inputs[1]).shape.at(0) > kMaxStemOutChannels ||
        !ops::stem_tap_pairs(g_.type(x).shape.at(3), strides[1], dilations[1]) || dilations[0] != 1 ||
        g_.type(x).dtype != g_.type(conv.inputs[1]).dtype || !strided_stem_fits(conv) ||
        !unpad_weights(conv, pad))
      return false;
    conv.inputs[0] = x;
    return true;
  }

  // Cuts conv's weights back to the channels of Pad `pad`'s input, and marks the Pad erased;
  // false (nothing changed) for run-time weights, which cannot be cut back here.
  bool unpad_weights(ir::Node& conv, int pad) {
    const Tensor* weights = constant(conv.inputs[1]);
    if (!weights) return false;
    const int64_t channels = g_.type(g_.nodes[pad].inputs[0]).shape.at(3);
    conv.inputs[1] = g_.add_constant(g_.unique_value_name(g_.value(conv.inputs[1]).name + ".unpadded"),
                                     leading_channels(*weights, channels));
    erased_[static_cast<size_t>(pad)] = 1;
    return true;
  }

  // The Transpose to NHWC and the channel Pad before a stem.
  bool fold_layout(ir::Node& conv) {
    ValueId x = conv.inputs[0];
    const int pad = sole_producer(x);
    const bool padded = pad >= 0 && is_zero_channel_pad(g_.nodes[pad]);
    if (padded) x = g_.nodes[pad].inputs[0];
    const int transpose = sole_producer(x);
    if (transpose < 0 || !is_transpose(g_.nodes[transpose], {0, 2, 3, 1})) return false;
    const int64_t channels = g_.type(x).shape.at(3);
    if (channels > kMaxStemChannels) return false;
    // Unpadded, a 1x1 window over one channel would leave nothing to contract (K = 1).
    const Shape& w_shape = g_.type(conv.inputs[1]).shape;
    if (channels * w_shape.at(1) * w_shape.at(2) == 1) return false;
    if (w_shape.at(0) > kMaxStemOutChannels) return false;
    bool unit = true;
    for (const char* key : {"strides", "dilations"})
      for (int64_t e : conv.get_ints(key, {1, 1})) unit = unit && e == 1;
    if (!unit && !strided_stem_fits(conv)) return false;
    if (padded && !unpad_weights(conv, pad)) return false;
    erased_[static_cast<size_t>(transpose)] = 1;
    conv.inputs[0] = g_.nodes[transpose].inputs[0];
    ops::write_nchw_input(conv, true);
    return true;
  }

  // The Cast to the conv's dtype before an NCHW conv: the conv converts X as it reads it, the
  // same rounding. Kept where the GPU kernels would have to read a dtype they do not (f64, u8).
  bool fold_cast(ir::Node& conv) {
    const int cast = sole_producer(conv.inputs[0]);
    if (cast < 0 || g_.nodes[cast].op != "Cast") return false;
    const ValueId source = g_.nodes[cast].inputs[0];
    if (!storable(g_.type(source).dtype) ||
        g_.type(conv.inputs[0]).dtype != g_.type(conv.inputs[1]).dtype) {
      return false;
    }
    conv.inputs[0] = source;
    erased_[static_cast<size_t>(cast)] = 1;
    return true;
  }

  // The DequantizeLinear before an NCHW conv (a QDQ model's graph input, quantized and
  // dequantized again: QuantizeLinear -> DequantizeLinear -> stem): per tensor, int8, zero point
  // 0, f16 weights (the halo kernel's, which stages int8 into f16 by its bits), no prologue. The
  // conv reads the int8 X itself, its integers exactly, and the scale s multiplies the
  // accumulator as S [Co] = s before the bias:
  // conv(s * q, W) = s * conv(q, W). The stem reads a quarter of an f32 input's bytes, half of
  // an f16 one's, and the DequantizeLinear's kernel goes. The kernels and the reference then
  // multiply by s once, in f32, where the DequantizeLinear rounded s * q to its output dtype.
  bool fold_dequantize(ir::Node& conv) {
    const int dq = sole_producer(conv.inputs[0]);
    if (dq < 0) return false;
    const ir::Node& d = g_.nodes[dq];
    const DType wt = g_.type(conv.inputs[1]).dtype;
    if (d.inputs.empty() || wt != DType::kF16) return false;
    if ((conv.inputs.size() > ops::kScaleInput && conv.inputs[ops::kScaleInput] != kNoValue) ||
        (conv.inputs.size() > ops::kPrologueInput && conv.inputs[ops::kPrologueInput] != kNoValue))
      return false;
    const std::optional<AffineQdq> q = affine_qdq(g_, d, "DequantizeLinear", d.inputs[0]);
    if (!q || q->integer != DType::kI8 || q->zero_point != 0) return false;
    const int64_t channels = g_.type(conv.inputs[1]).shape.at(0);
    Tensor s(DType::kF32, {channels});
    for (int64_t c = 0; c < channels; ++c) s.set_f64(c, static_cast<float>(q->scale));
    if (conv.inputs.size() <= ops::kScaleInput) conv.inputs.resize(ops::kScaleInput + 1, kNoValue);
    conv.inputs[ops::kScaleInput] =
        g_.add_constant(g_.unique_value_name(g_.value(conv.inputs[0]).name + ".dequant_scale"), std::move(s));
    conv.inputs[0] = d.inputs[0];
    erased_[static_cast<size_t>(dq)] = 1;
    return true;
  }

  // w [Co, KH, KW, C'] cut to its first `channels` input channels, bytes copied as they are.
  static Tensor leading_channels(const Tensor& w, int64_t channels) {
    const Shape& s = w.shape();
    Tensor out(w.dtype(), {s[0], s[1], s[2], channels});
    const size_t row = static_cast<size_t>(channels) * dtype_size(w.dtype());
    const size_t pitch = static_cast<size_t>(s[3]) * dtype_size(w.dtype());
    for (int64_t r = 0; r < s[0] * s[1] * s[2]; ++r)
      std::memcpy(out.raw() + r * row, w.raw() + r * pitch, row);
    return out;
  }

  ir::Graph g_;
  std::vector<int> uses_;
  std::vector<int> producers_;
  std::vector<char> erased_;
};

// Before the Fuser (see the top of the file): per-element work that a Reshape keeping the
// channel (last) dim separates from its contraction -- a Linear on a 4-D tensor is
// Reshape(flatten) -> tessel.Gemm -> Reshape(unflatten), so ConvNeXt's GELU, layer scale and
// residual add follow an unflatten -- moves before that Reshape, where it acts on the same
// elements in the same channels:
//   contraction -> Reshape -> Gelu (any activation)  =>  contraction -> Gelu -> Reshape
//   contraction -> Reshape -> Mul(., c[C])           =>  contraction -> Mul(., c[C]) -> Reshape
//   contraction -> Reshape -> Add(., r)              =>  contraction -> Add(., Reshape(r)) -> Reshape
// (the residual's Reshape is a view, no copy). And a Mul by a per-output-channel constant
// right after a contraction with constant weights and nothing fused yet folds into them:
// (x W + b) * c = x (W c) + b c, W's output channel n scaled by c[n] (rounded once to W's
// dtype, as fold-batch-norm does), so the layer scale costs nothing; a dequantization scale S
// (an int8 contraction's, or an int8 input's) takes it instead of the weights. A per-channel
// constant Add there joins the bias.
class Sinker {
 public:
  explicit Sinker(ir::Graph g) : g_(std::move(g)), names_(UniqueNames::of_nodes(g_)) {}

  ir::Graph run() {
    for (bool changed = true; changed;) {
      changed = false;
      uses_ = use_counts(g_);
      users_ = g_.users();
      for (size_t i = 0; i < g_.nodes.size() && !changed; ++i) {
        const std::string& op = g_.nodes[i].op;
        if (op != "tessel.Conv" && op != "tessel.Gemm") continue;
        const int u = sole_user(g_.nodes[i].outputs[0]);
        if (u < 0) continue;
        changed = fold_scale(i, static_cast<size_t>(u)) || sink(static_cast<size_t>(u));
      }
    }
    g_.compact();
    return std::move(g_);
  }

 private:
  int sole_user(ValueId v) const {
    const std::vector<int>& u = users_[static_cast<size_t>(v)];
    return uses_[static_cast<size_t>(v)] == 1 && u.size() == 1 ? u[0] : -1;
  }

  const Tensor* channel_constant(ValueId c, int64_t channels) const {
    return passes::channel_constant(g_, c, channels);
  }

  // The per-channel constant of Mul(v, c) / Mul(c, v), whose output keeps v's type.
  const Tensor* scale_of(const ir::Node& mul, ValueId v) const {
    if (mul.op != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1) return nullptr;
    if (!(g_.type(mul.outputs[0]) == g_.type(v))) return nullptr;
    const ValueId c = mul.inputs[0] == v ? mul.inputs[1] : mul.inputs[0];
    return c == v ? nullptr : channel_constant(c, g_.type(v).shape.back());
  }

  // The per-channel constant of Add(v, c) / Add(c, v), whose output keeps v's type.
  const Tensor* shift_of(const ir::Node& add, ValueId v) const {
    if (add.op != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return nullptr;
    if (!(g_.type(add.outputs[0]) == g_.type(v))) return nullptr;
    const ValueId c = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    return c == v ? nullptr : channel_constant(c, g_.type(v).shape.back());
  }

  // contraction -> Mul(., c[C]): c folded into the weights (or the dequantization scale S
  // where there is one: acc * S + B, the weights stay) and bias. contraction -> Add(., c[C]): c
  // added to the bias (a batch norm's shift that fold-batch-norm could not fold).
  bool fold_scale(size_t i, size_t m) {
    ir::Node& p = g_.nodes[i];
    const ValueId v = p.outputs[0];
    const Tensor* c = scale_of(g_.nodes[m], v);
    const Tensor* shift = c ? nullptr : shift_of(g_.nodes[m], v);
    const bool dequantized = p.inputs.size() > 4 && p.inputs[4] != kNoValue;
    const int w_input = dequantized ? 4 : 1;
    if ((!c && !shift) || !ops::read_epilogue(p).empty() || ops::read_out_dtype(p) ||
        p.inputs.size() < 2 || !g_.value(p.inputs[w_input]).is_constant())
      return false;
    const bool conv = p.op == "tessel.Conv";
    if (conv && ops::read_store(p).kind != StoreKind::kNhwc) return false;
    const bool has_bias = p.inputs.size() > 2 && p.inputs[2] != kNoValue;
    if (has_bias && !g_.value(p.inputs[2]).is_constant()) return false;
    if (shift) return fold_shift(i, m, *shift);
    const int64_t channels = c->numel();
    // Weights: OHWI (conv) or [N, K] (Gemm, trans_b) with the channel outermost, or [K, N]; S.
    const Tensor& w = *g_.value(p.inputs[w_input]).data;
    const bool channel_inner = !dequantized && !conv && p.get_int("trans_b", 1) == 0;
    const int64_t per_channel = w.numel() / channels;
    if (w.numel() % channels != 0) return false;
    Tensor scaled(w.dtype(), w.shape());
    for (int64_t e = 0; e < w.numel(); ++e) {
      const int64_t n = channel_inner ? e % channels : e / per_channel;
      scaled.set_f64(e, w.get_f64(e) * c->get_f64(n));
    }
    p.inputs[w_input] = g_.add_constant(
        g_.unique_value_name(g_.value(p.inputs[w_input]).name + ".scaled"), std::move(scaled));
    if (has_bias) {
      const Tensor& b = *g_.value(p.inputs[2]).data;
      Tensor sb(b.dtype(), b.shape());
      for (int64_t n = 0; n < b.numel(); ++n) sb.set_f64(n, b.get_f64(n) * c->get_f64(n));
      p.inputs[2] = g_.add_constant(g_.unique_value_name(g_.value(p.inputs[2]).name + ".scaled"),
                                    std::move(sb));
    }
    // The contraction writes the Mul's output (same type) in its place; the Mul goes.
    p.outputs[0] = g_.nodes[m].outputs[0];
    g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(m));
    return true;
  }

  // B' = B + c (B f32 or the node's dtype, as it was; f32 when there was none).
  bool fold_shift(size_t i, size_t m, const Tensor& c) {
    ir::Node& p = g_.nodes[i];
    const bool has_bias = p.inputs.size() > 2 && p.inputs[2] != kNoValue;
    Tensor b(has_bias ? g_.type(p.inputs[2]).dtype : DType::kF32, {c.numel()});
    for (int64_t n = 0; n < c.numel(); ++n)
      b.set_f64(n, (has_bias ? g_.value(p.inputs[2]).data->get_f64(n) : 0.0) + c.get_f64(n));
    const std::string name = has_bias ? g_.value(p.inputs[2]).name + ".shifted" : p.name + ".bias";
    const ValueId b_id = g_.add_constant(g_.unique_value_name(name), std::move(b));
    ir::Node& q = g_.nodes[i];
    if (q.inputs.size() < 3) q.inputs.resize(3, kNoValue);
    q.inputs[2] = b_id;
    q.outputs[0] = g_.nodes[m].outputs[0];
    g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(m));
    return true;
  }

  // A Reshape of v that keeps its last dim.
  bool keeps_channels(const ir::Node& r, ValueId v) const {
    if (r.op != "Reshape" || r.inputs.empty() || r.inputs[0] != v || r.outputs.size() != 1)
      return false;
    const Shape &in = g_.type(v).shape, &out = g_.type(r.outputs[0]).shape;
    return !in.empty() && !out.empty() && in.back() == out.back();
  }

  // Whether e, reading u = Reshape(v), can act on v instead: a per-element activation (other
  // inputs constant), a per-channel constant Mul, or an Add of a non-constant of u's type.
  bool movable(const ir::Node& e, ValueId u) const {
    if (e.outputs.size() != 1 || e.inputs.empty()) return false;
    if (activation_step(g_, e, u)) return true;
    if (scale_of(e, u)) return true;
    if (e.op != "Add" || e.inputs.size() != 2 || e.inputs[0] == e.inputs[1]) return false;
    const ValueId r = e.inputs[0] == u ? e.inputs[1] : e.inputs[0];
    return !g_.value(r).is_constant() && g_.type(r) == g_.type(u) &&
           g_.type(e.outputs[0]) == g_.type(u);
  }

  // contraction -> Reshape (node `ri`) -> e: e moves before the Reshape.
  bool sink(size_t ri) {
    const ir::Node r = g_.nodes[ri];
    const ValueId v = r.inputs.empty() ? kNoValue : r.inputs[0];
    if (v == kNoValue || !keeps_channels(r, v)) return false;
    const ValueId u = r.outputs[0];
    const int ei = sole_user(u);
    if (ei < 0 || !movable(g_.nodes[ei], u)) return false;
    ir::Node e = g_.nodes[ei];
    const Shape shape = g_.type(v).shape;  // a copy: adding values may move g_.values
    std::vector<ir::Node> inserted;
    for (ValueId& in : e.inputs) {
      if (in == u) {
        in = v;
      } else if (in != kNoValue && g_.value(in).is_constant() && e.op == "Mul") {
        // The per-channel constant, as [C] (it broadcasts over v's rows).
        Tensor flat = *g_.value(in).data;
        flat = flat.reshaped({shape.back()});
        in = g_.add_constant(g_.unique_value_name(g_.value(in).name + ".channels"), std::move(flat));
      } else if (in != kNoValue && !g_.value(in).is_constant() && e.op == "Add") {
        // The residual, viewed in v's shape.
        std::vector<int64_t> dims(shape.begin(), shape.end());
        const ValueId target = g_.add_constant(g_.unique_value_name(g_.value(in).name + ".shape"),
                                               Tensor::from_vector<int64_t>({int64_t(dims.size())}, dims));
        const ValueId viewed = g_.add_value(g_.unique_value_name(g_.value(in).name + ".rows"),
                                            {g_.type(in).dtype, shape});
        ir::Node view;
        view.op = "Reshape";
        view.name = names_.fresh(e.name + ".residual_rows");
        view.inputs = {in, target};
        view.outputs = {viewed};
        inserted.push_back(std::move(view));
        in = viewed;
      }
    }
    const ValueId out = e.outputs[0];
    const ValueId moved = g_.add_value(g_.unique_value_name(g_.value(out).name + ".rows"),
                                       {g_.type(out).dtype, shape});
    e.outputs[0] = moved;
    ir::Node reshape = r;  // keeps its name: the old Reshape goes
    reshape.inputs[0] = moved;
    reshape.outputs[0] = out;
    inserted.push_back(std::move(e));
    inserted.push_back(std::move(reshape));
    // At e's place (every operand exists by then); the old Reshape goes.
    std::vector<ir::Node> nodes;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (k == ri) continue;
      if (k == static_cast<size_t>(ei)) {
        for (ir::Node& n : inserted) nodes.push_back(std::move(n));
      } else {
        nodes.push_back(std::move(g_.nodes[k]));
      }
    }
    g_.nodes = std::move(nodes);
    return true;
  }

  ir::Graph g_;
  UniqueNames names_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> users_;
};

// The channel-alignment Pads that convert-layout puts before a contraction whose input channels
// are no multiple of 8 (a squeeze-excite block's 4..28 squeezed channels), folded into the
// contraction that produces them: it computes the extra output channels from zero weights and
// a zero bias (and a zero dequantization scale S where it is int8), and its readers multiply
// them by their zero weights, so the values there (its epilogue's value at 0, finite for every
// step: an activation's, or an int8 code such as quantize_unit's low end) never count. One
// kernel less per such Pad (EfficientNet has one per block, fp16 or int8). Taken only where
// every reader of the Pad is a contraction whose weights are zero over the padded channels, and
// the producer a contraction that only the Pad reads, with a plain store and no residual.
class PadWidener {
 public:
  explicit PadWidener(ir::Graph g) : g_(std::move(g)), uses_(use_counts(g_)), users_(g_.users()), producers_(g_.producers()) {}

  ir::Graph run() {
    std::vector<char> erase(g_.nodes.size(), 0);
    bool changed = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (zero_channel_pad(g_, g_.nodes[i]) && widen(i)) erase[i] = changed = true;
    if (changed) erase_nodes(g_, erase);
    return std::move(g_);
  }

 private:
  static bool is_dense(const ir::Node& n) {
    return n.op == "tessel.Gemm" || (n.op == "tessel.Conv" && group_one(n));
  }

  // The constant weight of contraction n as [rows, cols] with the given dim the channels of
  // its input (reader) or output (producer): OHWI conv [Co, kh*kw*Ci]; Gemm [N, K] or [K, N].
  const Tensor* weight(const ir::Node& n) const {
    const ValueId w = n.inputs.size() > 1 ? n.inputs[1] : kNoValue;
    return w == kNoValue ? nullptr : g_.value(w).data.get();
  }

  // Reader r's weights (float or int8) are zero over input channels [from, to).
  bool zero_input_channels(const ir::Node& r, int64_t from, int64_t to) const {
    const Tensor* w = weight(r);
    if (!w) return false;
    const Shape& s = w->shape();
    const bool gemm_nk = r.op == "tessel.Gemm" && r.get_int("trans_b", 1) == 1;
    const bool gemm_kn = r.op == "tessel.Gemm" && !gemm_nk;
    const int64_t inner = gemm_kn ? s[1] : s.back();            // elements per step of the channel
    const int64_t channels = gemm_kn ? s[0] : s.back();         // the input-channel extent
    if (channels != to) return false;
    for (int64_t i = 0; i < w->numel(); ++i) {
      const int64_t c = gemm_kn ? i / inner : i % inner;
      if (c >= from && w->get_f64(i) != 0.0) return false;
    }
    return true;
  }

  // t [rows, ...] grown to `rows` along dim 0 (kind 0) or dim 1 of a 2-D tensor, zeros after.
  static Tensor grow(const Tensor& t, int dim, int64_t extent) {
    Shape s = t.shape();
    const int64_t old = s[static_cast<size_t>(dim)];
    s[static_cast<size_t>(dim)] = extent;
    Tensor r(t.dtype(), s);
    const size_t esize = dtype_size(t.dtype());
    if (dim == 0) {
      std::memcpy(r.raw(), t.raw(), static_cast<size_t>(t.numel()) * esize);
    } else {
      for (int64_t row = 0; row < s[0]; ++row)
        std::memcpy(r.raw() + static_cast<size_t>(row * extent) * esize, t.raw() + static_cast<size_t>(row * old) * esize,
                    static_cast<size_t>(old) * esize);
    }
    return r;
  }

  bool widen(size_t i) {
    const ir::Node& pad = g_.nodes[i];
    const ValueId x = pad.inputs[0], y = pad.outputs[0];
    const int p = producers_[static_cast<size_t>(x)];
    if (p < 0 || uses_[static_cast<size_t>(x)] != 1 || std::count(g_.outputs.begin(), g_.outputs.end(), y)) return false;
    ir::Node& q = g_.nodes[static_cast<size_t>(p)];
    const int64_t from = g_.type(x).shape.back(), to = g_.type(y).shape.back();
    // The producer: a contraction with a constant weight and bias (and an int8 one's constant
    // S, one per output channel), a plain NHWC store, no residual.
    auto constant_input = [&](size_t k, int64_t numel) {
      return q.inputs.size() <= k || q.inputs[k] == kNoValue ||
             (g_.value(q.inputs[k]).is_constant() && g_.value(q.inputs[k]).data->numel() == numel);
    };
    if (!is_dense(q) || q.outputs.size() != 1 || !weight(q)) return false;
    if (q.inputs.size() > 3 && q.inputs[3] != kNoValue) return false;
    if (!constant_input(2, from) || !constant_input(4, from)) return false;
    if (q.op == "tessel.Conv" && ops::read_store(q).kind != StoreKind::kNhwc) return false;
    // The padded channels hold the epilogue's value at 0, which the readers' zero weights
    // cancel only where it is finite in the stored dtype (f16: at most 65504 in magnitude).
    double at_zero = 0.0;
    for (const EpilogueStep& s : ops::read_epilogue(q)) {
      if (s.kind == EpilogueKind::kAddResidual || s.kind == EpilogueKind::kAddScaledResidual) return false;
      at_zero = ops::apply_epilogue_step(s, at_zero, 0.0);
    }
    const DType stored = g_.type(x).dtype;
    if (!std::isfinite(at_zero) || (stored == DType::kF16 && std::abs(at_zero) > 65504.0)) return false;
    // Its readers: contractions reading y as A, with zero weights over the padded channels.
    for (int r : users_[static_cast<size_t>(y)]) {
      const ir::Node& reader = g_.nodes[static_cast<size_t>(r)];
      if (!is_dense(reader) || reader.inputs[0] != y || std::count(reader.inputs.begin() + 1, reader.inputs.end(), y) ||
          !zero_input_channels(reader, from, to))
        return false;
    }
    // Widen: weight rows (conv OHWI dim 0; Gemm [N, K] dim 0 or [K, N] dim 1) and bias.
    const bool gemm_kn = q.op == "tessel.Gemm" && q.get_int("trans_b", 1) == 0;
    UniqueNames names = UniqueNames::of_values(g_);
    q.inputs[1] = g_.add_constant(names.fresh(g_.value(q.inputs[1]).name + ".widened"),
                                  grow(*weight(q), gemm_kn ? 1 : 0, to));
    for (size_t k : {size_t{2}, size_t{4}})  // the bias, S
      if (q.inputs.size() > k && q.inputs[k] != kNoValue)
        q.inputs[k] = g_.add_constant(names.fresh(g_.value(q.inputs[k]).name + ".widened"),
                                      grow(*g_.value(q.inputs[k]).data, 0, to));
    q.outputs[0] = y;
    return true;
  }

  ir::Graph g_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> users_;
  std::vector<int> producers_;
};

}  // namespace

ir::Graph fuse(ir::Graph g) {
  return PadWidener(StemFolder(Fuser(Sinker(std::move(g)).run()).run()).run()).run();
}

}  // namespace tessel::passes
