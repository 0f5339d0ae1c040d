// fold-qdq: a QDQ model's convolutions and dense layers become int8 contractions (TensorRT's semantics:
// symmetric int8, zero points 0, per-tensor activation scales, per-tensor or per-output-channel
// weight scales). After convert-layout a quantized conv reads
//
//   X = DequantizeLinear(Xq, sx)            Xq int8 NHWC, sx a scalar
//   W = DequantizeLinear(Wq, sw, axis=0)    Wq an int8 OHWI constant, sw scalar or [Co]
//   Y = tessel.Conv(X, W, B?)               B f32, or DequantizeLinear of an int32 constant
//
// and becomes the int8 tessel.Conv (ops/tessel_contraction_ops.cc) of the integers,
//
//   Y = tessel.Conv(Xq, Wq, B, -, S)        S[co] = sx * sw[co]
//
// (and likewise a tessel.Gemm of A [M, K] and W [N, K]) whose value is acc * S[co] + B[co] for
// the exact integer accumulator acc: the same sum as
// the dequantized conv's, up to fp32 rounding. fuse then takes the QuantizeLinear after it
// into its epilogue (quantize, out_dtype i8), so int8 flows from conv to conv; the
// DequantizeLinear nodes left without readers go.
//
// onnxruntime's default QUInt8 activations with zero point 0 (every tensor after a ReLU: its
// quantizer drops the ReLU, the uint8 range does it) are X of the int8 contraction too, read as
// uint8 (mma.sync and wgmma take a .u8 A beside the .s8 weights); padding them with zeros pads
// with the real 0, as for int8. Activations with another zero point stay float, and say so.
//
// A max pool between a DequantizeLinear and a QuantizeLinear to the same scale runs on the
// int8 (or uint8, zero point 0) values instead (fold_max_pool); a QuantizeLinear after a max
// pool of a float value moves before it (QuantizePusher: the quantization is monotone).
//
// A QuantizeLinear after a Concat quantizes each of its inputs instead (QuantizePusher):
// per tensor it acts per element, so Q(Concat(x1, x2, ...)) = Concat(Q(x1), Q(x2), ...) exactly.
// In Inception's QDQ form each branch conv's chain then ends at a QuantizeLinear of the
// concat's scale, which fuse takes into its epilogue: the branches store int8 into the
// concat's slices (concat-into-slices), where they stored their dequantized fp16 for a
// QuantizeLinear kernel to read the whole concat back. Only where each input is read by the
// Concat alone: DenseNet's features, read by every later concat of their block, would each be
// quantized once per concat. Those concats (of DequantizeLinear outputs, read by a
// QuantizeLinear) concatenate the integers instead, and requantize them on the depthwise kernel
// (ConcatOfIntegers): one int8 buffer per block, as in the float model.
//
// QuantizeLinear(s) -> DequantizeLinear(s) -> Relu -> QuantizeLinear(s) between float ops (a
// conv's is fuse's, ops::fold_requantize) is Relu -> QuantizeLinear(s) (ReluRequantizeFolder):
// with one symmetric int8 scale, Q(relu(DQ(Q(x)))) = max(Q(x), 0) = Q(relu(x)) exactly. In
// onnxruntime's QDQ DenseNet each pre-activation batch norm's shift and its Relu are quantized
// apart, to one scale: two kernels fewer per norm.
//
// DequantizeLinear(q, s) -> Mul(a[c]) (lower-batch-norm's scale of a norm after a quantized
// tensor, DenseNet's pre-activation again) is one DequantizeLinear(q, s * a[c]) per channel
// (ChannelScaleIntoDequantize): q * (s * a) where the Mul rounded q * s first, one kernel fewer.
//
// A depthwise conv stays float (the int8 kernels take group 1 only) but reads the integers
// (fold_depthwise_input): DequantizeLinear(Xq, sx) -> tessel.Conv(X, W, B), W the dequantized
// weights, becomes tessel.Conv(Xq, W, B, -, S) with S[c] = sx, the int8-input form
// (ops/tessel_contraction_ops.cc): conv(Xq, W) * S + B, the same sum up to fp32 rounding. Its
// kernel is memory-bound, and its input is the largest tensor of a MobileNet block (the
// expansion conv's, 6x the block's channels): read as int8 it moves half the bytes, and its
// producer stores int8 (fuse ends that conv's chain at its QuantizeLinear). sx goes into S, not
// into W: W keeps its own rounding (sx * W in fp16 would lose small weights to subnormals), and
// acc * S + B is one fma where acc + B was one add.
//
// A conv it leaves keeps the dequantized (float) form, and says why in its `int8_refusal`
// attribute, which `tessel explain` prints: a grouped conv (a depthwise one also why it reads
// its input dequantized, where it does), input channels that are not a
// multiple of 8 (the RGB stem, padded by convert-layout: a Pad of the dequantized input), an
// asymmetric tensor (a uint8 weight, an activation with a non-zero zero point). Then every DequantizeLinear of a constant still in the graph
// (the weights of those convs, int32 biases) is folded to its float value, so the float
// kernels see constants as in any other model.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "ops/tessel_epilogue.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

constexpr char kRefusalAttr[] = "int8_refusal";

// Input channels the int8 kernels need per pixel: 8 int8 = one 8-byte load.
constexpr int64_t kInt8ChannelAlignment = 8;

// The QuantizeLinear that alone reads the output of a node of op `op` moves onto each of the
// node's inputs, and the node computes on the integers. A channel Concat: see the top of the
// file; each input read by the Concat alone. A max pool: a per-tensor QuantizeLinear of a
// positive scale is monotone, so Q(MaxPool(x)) = MaxPool(Q(x)) exactly (taps outside the input
// are skipped on both sides; a window of none is the lowest value, whose quantization is the
// integer type's lowest). The conv before the pool then ends its chain at the QuantizeLinear
// and stores int8 (a stem whose pooled output `tessel quantize` quantized: DenseNet's,
// ResNet's), where it stored fp16 and a kernel of its own quantized the pool's output. Only
// where x is a float value the pool alone reads, computed by a node other than a
// DequantizeLinear (fold_max_pool's case), and the pool has no Indices output. Both: a
// symmetric per-tensor QuantizeLinear.
class QuantizePusher : public NodeRewriter {
 public:
  QuantizePusher(ir::Graph g, const std::string& op) : NodeRewriter(std::move(g)) {
    const std::vector<std::vector<int>> users = g_.users();
    const std::vector<int> producers = g_.producers();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& n = g_.nodes[i];
      if (n.op != op || n.outputs.size() != 1) continue;
      bool alone = true;
      for (ValueId x : n.inputs) alone = alone && sole_reader(g_, users, x) == static_cast<int>(i);
      if (!alone) continue;
      if (op == "tessel.MaxPool") {
        const int p = n.inputs.size() == 1 ? producers[static_cast<size_t>(n.inputs[0])] : -1;
        if (p < 0 || g_.nodes[static_cast<size_t>(p)].op == "DequantizeLinear" ||
            g_.type(n.inputs[0]).dtype != DType::kF32)
          continue;
      }
      const int q = sole_reader(g_, users, n.outputs[0]);
      if (q < 0) continue;
      const ir::Node& quantize = g_.nodes[static_cast<size_t>(q)];
      if (quantize.op != "QuantizeLinear" || quantize.inputs[0] != n.outputs[0]) continue;
      const std::optional<SymmetricQdq> s = symmetric_qdq(g_, quantize);
      if (!s || !s->per_tensor() || !(s->scale->get_f64(0) > 0)) continue;
      quantize_of_[n.name] = q;
      dropped_.insert(quantize.name);
    }
  }

 private:
  bool rewrites(const ir::Node& n) const override {
    return quantize_of_.count(n.name) != 0 || dropped_.count(n.name) != 0;
  }
  void rewrite(const ir::Node& n) override {
    if (dropped_.count(n.name)) return;  // the QuantizeLinear moved before the node
    const ir::Node& quantize = g_.nodes[static_cast<size_t>(quantize_of_.at(n.name))];
    std::vector<ValueId> quantized;
    for (ValueId x : n.inputs) {
      std::vector<ValueId> ins = quantize.inputs;
      ins[0] = x;
      quantized.push_back(emit("QuantizeLinear", g_.value(x).name + "_QuantizeLinear", std::move(ins),
                               g_.type(quantize.outputs[0]).dtype, g_.type(x).shape, quantize.attrs));
    }
    emit_as(n, n.op, std::move(quantized), quantize.outputs[0], n.attrs);
  }

  std::map<std::string, int> quantize_of_;  // node name -> its QuantizeLinear's node index
  std::set<std::string> dropped_;           // those QuantizeLinear nodes' names
};

class ReluRequantizeFolder : public NodeRewriter {
 public:
  explicit ReluRequantizeFolder(ir::Graph g) : NodeRewriter(std::move(g)) {
    const std::vector<std::vector<int>> users = g_.users();
    const std::vector<int> producers = g_.producers();
    // n's op, reading `v` as its input 0, and v's only reader; else null.
    auto sole = [&](ValueId v, const char* op) -> const ir::Node* {
      const int r = sole_reader(g_, users, v);
      const ir::Node* n = r < 0 ? nullptr : &g_.nodes[static_cast<size_t>(r)];
      return n && n->op == op && n->inputs[0] == v ? n : nullptr;
    };
    auto scale = [&](const ir::Node& n) -> std::optional<float> {
      const std::optional<SymmetricQdq> q = symmetric_qdq(g_, n);
      const std::optional<double> s = q ? q->int8_scale() : std::nullopt;
      return s ? std::optional<float>(static_cast<float>(*s)) : std::nullopt;
    };
    for (const ir::Node& relu : g_.nodes) {
      if (relu.op != "Relu" || relu.inputs.empty()) continue;
      const int d = producers[static_cast<size_t>(relu.inputs[0])];
      if (d < 0 || g_.nodes[static_cast<size_t>(d)].op != "DequantizeLinear") continue;
      const ir::Node& dq = g_.nodes[static_cast<size_t>(d)];
      const int q = producers[static_cast<size_t>(dq.inputs[0])];
      if (q < 0 || g_.nodes[static_cast<size_t>(q)].op != "QuantizeLinear") continue;
      const ir::Node& quantize = g_.nodes[static_cast<size_t>(q)];
      const ir::Node* requantize = sole(relu.outputs[0], "QuantizeLinear");
      if (!requantize || sole(quantize.outputs[0], "DequantizeLinear") != &dq || sole(dq.outputs[0], "Relu") != &relu)
        continue;
      // The epilogues' rule decides (ops::fold_requantize): quantize(s), mul(s'), relu,
      // quantize(s) is quantize(s), relu, the same integers.
      const std::optional<float> s = scale(quantize), s_dq = scale(dq), s2 = scale(*requantize);
      if (!s || !s_dq || !s2) continue;
      using K = ops::EpilogueKind;
      const std::vector<ops::EpilogueStep> folded = ops::fold_requantize(
          {{K::kQuantize, *s}, {K::kMul, *s_dq}, {K::kRelu}, {K::kQuantize, *s2}});
      if (folded != std::vector<ops::EpilogueStep>{{K::kQuantize, *s}, {K::kRelu}}) continue;
      input_of_[relu.name] = quantize.inputs[0];
      dropped_.insert(quantize.name);
      dropped_.insert(dq.name);
    }
  }

 private:
  bool rewrites(const ir::Node& n) const override {
    return input_of_.count(n.name) != 0 || dropped_.count(n.name) != 0;
  }
  void rewrite(const ir::Node& n) override {
    if (dropped_.count(n.name)) return;  // the QuantizeLinear and DequantizeLinear before the Relu
    emit_as(n, "Relu", {input_of_.at(n.name)}, n.outputs[0], n.attrs);
  }

  std::map<std::string, ValueId> input_of_;  // Relu name -> the float its QuantizeLinear read
  std::set<std::string> dropped_;
};

// Mul(DequantizeLinear(q, s), a), either way round, with `a` an f32 constant of one value per
// channel (channel_constant's [C] or [1, ..., 1, C]): the DequantizeLinear's output the Mul
// reads, that node, and a.
struct ChannelScaledDequantize {
  ValueId x;
  const ir::Node* dq;
  const Tensor* a;
};
std::optional<ChannelScaledDequantize> channel_scaled_dequantize(const ir::Graph& g, const std::vector<int>& producers,
                                                                 const ir::Node& mul, int64_t channels) {
  if (mul.op != "Mul" || mul.inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = mul.inputs[side];
    const int d = producers[static_cast<size_t>(x)];
    const Tensor* a = channel_constant(g, mul.inputs[1 - side], channels);
    if (d >= 0 && g.nodes[static_cast<size_t>(d)].op == "DequantizeLinear" && a && a->dtype() == DType::kF32)
      return ChannelScaledDequantize{x, &g.nodes[static_cast<size_t>(d)], a};
  }
  return std::nullopt;
}

class ChannelScaleIntoDequantize : public NodeRewriter {
 public:
  explicit ChannelScaleIntoDequantize(ir::Graph g) : NodeRewriter(std::move(g)) {
    const std::vector<std::vector<int>> users = g_.users();
    const std::vector<int> producers = g_.producers();
    for (const ir::Node& mul : g_.nodes) {
      const Shape& shape = mul.outputs.empty() ? Shape{} : g_.type(mul.outputs[0]).shape;
      if (shape.empty()) continue;
      const std::optional<ChannelScaledDequantize> m = channel_scaled_dequantize(g_, producers, mul, shape.back());
      if (!m) continue;
      const std::optional<SymmetricQdq> q = symmetric_qdq(g_, *m->dq);
      if (!q || !q->per_tensor() || m->a->shape().size() > shape.size() || g_.type(m->x).dtype != DType::kF32 ||
          g_.type(m->x).shape != shape || sole_reader(g_, users, m->x) < 0)
        continue;
      const double s = q->scale->get_f64(0);
      Tensor product(DType::kF32, {shape.back()});
      for (int64_t c = 0; c < shape.back(); ++c) product.data<float>()[c] = static_cast<float>(s * m->a->get_f64(c));
      rewritten_[mul.name] = {m->dq->inputs[0], product, static_cast<int64_t>(shape.size()) - 1};
      dropped_.insert(m->dq->name);
    }
  }

 private:
  struct Folded {
    ValueId q;
    Tensor scale;
    int64_t axis;
  };
  bool rewrites(const ir::Node& n) const override {
    return rewritten_.count(n.name) != 0 || dropped_.count(n.name) != 0;
  }
  void rewrite(const ir::Node& n) override {
    if (dropped_.count(n.name)) return;  // the per-tensor DequantizeLinear the Mul read
    const Folded& f = rewritten_.at(n.name);
    const ValueId scale = constant(n.name + ".dequant_scale", f.scale);
    ir::Attributes attrs;
    attrs["axis"] = f.axis;
    emit_as(n, "DequantizeLinear", {f.q, scale}, n.outputs[0], std::move(attrs));
  }

  std::map<std::string, Folded> rewritten_;  // Mul name -> its DequantizeLinear
  std::set<std::string> dropped_;
};

// The rewriters below dequantize int8 values, per channel, on the depthwise kernel: a 1x1 conv of
// unit weights in the int8-input form (QdqFolder's, at the top of the file), whose value is
// q * S[c] + B[c] in f32, the arithmetic of DequantizeLinear(q, S) (+ B) itself. Its kernel
// reads one byte per element, and fuse takes a QuantizeLinear after it into its epilogue.
class UnitDepthwiseRewriter : public NodeRewriter {
 protected:
  using NodeRewriter::NodeRewriter;
  // tessel.Conv(q, ones, B, -, S) {group = C} writing `out`: in the place of node `as` and
  // under its name where given, else a node of its own named after `name`. B is absent where
  // `shift` is null. `why` is its int8_refusal: what explain says of a float-math conv.
  void emit_unit_depthwise(const ir::Node* as, const std::string& name, ValueId q, const Tensor& scale,
                           const Tensor* shift, ValueId out, const char* why) {
    const int64_t channels = scale.numel();
    Tensor ones(DType::kF32, {channels, 1, 1, 1});
    for (int64_t c = 0; c < channels; ++c) ones.data<float>()[c] = 1.0f;
    const ValueId w = constant(name + ".unit_weights", std::move(ones));
    const ValueId b = shift ? constant(name + ".shift", *shift) : kNoValue;
    const ValueId s = constant(name + ".dequant_scale", scale);
    ir::Attributes attrs;
    attrs["group"] = channels;
    attrs[kRefusalAttr] = std::string(why);
    if (as)
      emit_as(*as, "tessel.Conv", {q, w, b, kNoValue, s}, out, std::move(attrs));
    else
      emit("tessel.Conv", name, {q, w, b, kNoValue, s}, out, std::move(attrs));
  }
};

// A per-channel shift of dequantized int8 values (a norm the quantizer left float between a
// DequantizeLinear and its activation: DenseNet's pre-activation norms after each concat, once
// ChannelScaleIntoDequantize has joined their scale):
//
//   %d = DequantizeLinear(%q, %s) {axis = 3}          %y = tessel.Conv(%q, %ones, %b, _, %s)
//   %y = Add(%d, %b)                            ->          {group = C}
//
// a 1x1 depthwise conv of unit weights in the int8-input form (QdqFolder's, at the top of the
// file): float math, S = s, B = b, on the kernel that reads one byte per element. fuse then takes
// the Relu and QuantizeLinear after it into its epilogue, as after any depthwise conv: one
// kernel from int8 to int8 where the DequantizeLinear, Add, Relu and QuantizeLinear were four
// over 16-bit values. The same arithmetic (q * s[c] + b[c] in f32). Only for NHWC int8 (the
// depthwise int8-input form reads int8) of zero point 0, a DequantizeLinear the Add alone reads;
// or a per-tensor one other nodes read too, times a per-channel Mul the Add alone reads (a
// dense block's input, which its concat reads as well): then S = s * a[c], one rounding less.
class ChannelShiftOfIntegers : public UnitDepthwiseRewriter {
 public:
  explicit ChannelShiftOfIntegers(ir::Graph g) : UnitDepthwiseRewriter(std::move(g)) {
    const std::vector<std::vector<int>> users = g_.users();
    const std::vector<int> producers = g_.producers();
    for (const ir::Node& add : g_.nodes) {
      if (add.op != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
      for (int side = 0; side < 2; ++side) {
        const ValueId x = add.inputs[side], b = add.inputs[1 - side];
        const Shape& shape = g_.type(x).shape;
        const int p = producers[static_cast<size_t>(x)];
        if (p < 0 || shape.size() != 4 || g_.type(x).dtype != DType::kF32 ||
            g_.type(add.outputs[0]).shape != shape || sole_reader(g_, users, x) < 0)
          continue;
        const int64_t channels = shape.back();
        const Tensor* shift = channel_constant(g_, b, channels);
        if (!shift || shift->dtype() != DType::kF32) continue;
        // x = DequantizeLinear(q, s), or Mul(DequantizeLinear(q, s), a) where the
        // DequantizeLinear has other readers (else ChannelScaleIntoDequantize joined them):
        // a block's input, read by its concat too. The scale is s[c], or s * a[c].
        const ir::Node& px = g_.nodes[static_cast<size_t>(p)];
        const ir::Node* dq = px.op == "DequantizeLinear" ? &px : nullptr;
        const Tensor* a = nullptr;
        if (const std::optional<ChannelScaledDequantize> m = channel_scaled_dequantize(g_, producers, px, channels)) {
          dq = m->dq;
          a = m->a;
        }
        if (!dq) continue;
        const std::optional<SymmetricQdq> q = symmetric_qdq(g_, *dq);
        if (!q || q->integer != DType::kI8 ||
            !(q->per_tensor() || (!a && q->axis == 3 && q->scale->numel() == channels)))
          continue;
        Folded f{dq->inputs[0], Tensor(DType::kF32, {channels}), Tensor(DType::kF32, {channels})};
        for (int64_t c = 0; c < channels; ++c) {
          const double sc = q->scale->get_f64(q->per_tensor() ? 0 : c);
          f.scale.data<float>()[c] = static_cast<float>(a ? sc * a->get_f64(c) : sc);  // channel_constant: C values
          f.shift.data<float>()[c] = static_cast<float>(shift->get_f64(c));
        }
        rewritten_.emplace(add.name, std::move(f));
        dropped_.insert(px.name);  // the DequantizeLinear the Add read, or the Mul
        break;
      }
    }
  }

 private:
  struct Folded {
    ValueId q;
    Tensor scale, shift;
  };
  bool rewrites(const ir::Node& n) const override {
    return rewritten_.count(n.name) != 0 || dropped_.count(n.name) != 0;
  }
  void rewrite(const ir::Node& n) override {
    if (dropped_.count(n.name)) return;  // the DequantizeLinear or Mul the Add read
    const Folded& f = rewritten_.at(n.name);
    emit_unit_depthwise(&n, n.name, f.q, f.scale, &f.shift, n.outputs[0],
                        "a per-channel shift of int8 values (a norm after a DequantizeLinear): a "
                        "1x1 depthwise conv that reads the integers");
  }

  std::map<std::string, Folded> rewritten_;  // Add name -> its integers, scale and shift
  std::set<std::string> dropped_;
};

// A channel Concat of dequantized int8 tensors, each of its own scale, that a QuantizeLinear
// alone reads (onnxruntime's QDQ DenseNet: each dense layer concatenates the block's input and
// every earlier layer's output, each quantized once to its own scale, and quantizes the concat
// to another):
//
//   %d_i = DequantizeLinear(%q_i, %s_i)               %c = Concat(%q_1, ..., %q_n)     (int8)
//   %y = Concat(%d_1, ..., %d_n) {axis = 3}     ->    %y = tessel.Conv(%c, %ones, _, _, %s)
//   %z = QuantizeLinear(%y, %t)                              {group = C}
//                                                     %z = QuantizeLinear(%y, %t)
//
// s[c] = s_i over input i's channels: the concatenated integers, dequantized per channel by a
// 1x1 depthwise conv of unit weights (q * s in f32, DequantizeLinear's arithmetic), whose
// epilogue fuse gives the QuantizeLinear: one requantization from int8 to int8. The Concat
// now holds int8: the convs that write the q_i store them into its slices (concat-into-slices),
// nest-prefix-concats makes a block's concats one buffer, and each depthwise conv reads its
// prefix where it lies (plan_memory.h reads_channel_slice). The float Concat was copied whole
// at each layer and quantized by a kernel of its own. Only for rank-4 NHWC tensors concatenated
// along the channels, every input a symmetric int8 DequantizeLinear per tensor, read by a
// symmetric int8 QuantizeLinear per tensor; the q_i keep their other readers.
class ConcatOfIntegers : public UnitDepthwiseRewriter {
 public:
  explicit ConcatOfIntegers(ir::Graph g) : UnitDepthwiseRewriter(std::move(g)) {
    const std::vector<std::vector<int>> users = g_.users();
    const std::vector<int> producers = g_.producers();
    for (const ir::Node& concat : g_.nodes) {
      if (concat.op != "Concat" || concat.outputs.size() != 1 || concat.inputs.size() < 2) continue;
      const ValueId y = concat.outputs[0];
      const Shape& shape = g_.type(y).shape;
      if (shape.size() != 4 || normalize_axis(concat.get_int("axis", 0), 4, concat.label()) != 3) continue;
      const int r = sole_reader(g_, users, y);
      if (r < 0 || g_.nodes[static_cast<size_t>(r)].op != "QuantizeLinear") continue;
      const std::optional<SymmetricQdq> requant = symmetric_qdq(g_, g_.nodes[static_cast<size_t>(r)]);
      if (!requant || !requant->int8_scale()) continue;
      Folded f{{}, Tensor(DType::kF32, {shape[3]})};
      int64_t c = 0;
      for (ValueId x : concat.inputs) {
        const int p = x == kNoValue ? -1 : producers[static_cast<size_t>(x)];
        const ir::Node* dq = p < 0 ? nullptr : &g_.nodes[static_cast<size_t>(p)];
        const std::optional<SymmetricQdq> q = dq && dq->op == "DequantizeLinear" ? symmetric_qdq(g_, *dq) : std::nullopt;
        if (!q || !q->int8_scale() || g_.value(dq->inputs[0]).is_constant()) break;
        f.integers.push_back(dq->inputs[0]);
        for (int64_t k = 0; k < g_.type(x).shape.back(); ++k) f.scale.data<float>()[c++] = static_cast<float>(*q->int8_scale());
      }
      if (f.integers.size() == concat.inputs.size()) rewritten_.emplace(concat.name, std::move(f));
    }
  }

 private:
  struct Folded {
    std::vector<ValueId> integers;  // the q_i
    Tensor scale;                   // s[c]
  };
  bool rewrites(const ir::Node& n) const override { return rewritten_.count(n.name) != 0; }
  void rewrite(const ir::Node& n) override {
    const Folded& f = rewritten_.at(n.name);
    const ValueId y = n.outputs[0];
    const ValueId c = value(g_.value(y).name + ".integers", DType::kI8, g_.type(y).shape);
    emit_as(n, "Concat", f.integers, c, n.attrs);
    emit_unit_depthwise(nullptr, n.name + "_dequantize", c, f.scale, nullptr, y,
                        "a concat of int8 tensors of different scales, dequantized per channel "
                        "(before its QuantizeLinear): a 1x1 depthwise conv that reads the integers");
  }

  std::map<std::string, Folded> rewritten_;  // Concat name -> its integers and their scales
};

class QdqFolder {
 public:
  explicit QdqFolder(ir::Graph g)
      : g_(std::move(g)), producers_(g_.producers()), names_(UniqueNames::of_values(g_)) {}

  ir::Graph run() {
    std::vector<char> requantizes(g_.nodes.size(), 0);
    // The readers of each value before any fold: fold_max_pool reads those of values no fold
    // rewires, fold_depthwise_input those of a DequantizeLinear's output (a conv it rewires
    // still counts as a reader, so of two convs reading one DequantizeLinear neither reads Xq).
    const std::vector<std::vector<int>> users = g_.users();
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i].op == "tessel.MaxPool") fold_max_pool(i, users, requantizes);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (g_.nodes[i].op != "tessel.Conv" && g_.nodes[i].op != "tessel.Gemm") continue;
      std::string why;
      if (!fold(i, users, why) && !why.empty()) g_.nodes[i].attrs[kRefusalAttr] = why;
    }
    erase_nodes(g_, requantizes);
    // Folding the weights left behind needs no marker: fold-constants folds every
    // DequantizeLinear of a constant once no ONNX Conv reads it (fold_constants.cc).
    return eliminate_dead_code(fold_constants(std::move(g_)));
  }

 private:
  const ir::Node* producer(ValueId v, const char* op) const {
    const int p = v == kNoValue ? -1 : producers_[static_cast<size_t>(v)];
    return p >= 0 && g_.nodes[static_cast<size_t>(p)].op == op ? &g_.nodes[static_cast<size_t>(p)] : nullptr;
  }
  const Tensor* constant(ValueId v) const {
    return v == kNoValue ? nullptr : g_.value(v).data.get();
  }

  // The scale of DequantizeLinear `dq` when it is symmetric int8 (rewrite_util.h), or with
  // `uint8` also symmetric uint8 (onnxruntime's default activations after a ReLU: zero point 0),
  // with `count` values or one (per tensor); else why not.
  std::optional<const Tensor*> int8_scale(const ir::Node& dq, int64_t count, std::string& why,
                                          const char* what, bool uint8 = false) const {
    const std::optional<SymmetricQdq> q = symmetric_qdq(g_, dq, &why);
    if (!q) {
      why = what + why;
      const std::optional<QdqParams> p = qdq_params(g_, dq);
      const std::optional<int64_t> z = p ? p->tensor_zero_point() : std::nullopt;
      if (uint8 && z) {
        // onnxruntime's activations without a ReLU before them (ResNet's conv3 and downsample
        // outputs before the Add): the int8 kernels zero-pad, and add no z * sum(w) to the sums.
        why = std::string(what) + " has zero point " + std::to_string(*z) +
              ": the int8 kernels read activations of zero point 0 (whose padding is the real 0)";
      }
      return std::nullopt;
    }
    if (q->integer != DType::kI8 && !(uint8 && q->integer == DType::kU8)) {
      why = std::string(what) + " is " + std::string(dtype_name(q->integer)) + ", not int8" +
            (uint8 ? " or uint8" : "");
      return std::nullopt;
    }
    if (!q->per_tensor() && q->scale->numel() != count) {
      why = std::string(what) + "'s scale has " + std::to_string(q->scale->numel()) +
            " values, neither one nor one per output channel";
      return std::nullopt;
    }
    return q->scale;
  }

  // DequantizeLinear(q, s) -> max pool -> QuantizeLinear(s), onnxruntime's QDQ around a max
  // pool (ResNet's after the stem): the max of dequantized values is the dequantized max (s >
  // 0), and quantizing that to the same scale gives the integer back. So the pool takes q and
  // writes int8 in the QuantizeLinear's place (marked in `requantizes`, erased after the
  // convolutions are folded: node indices stay put until then). Half the bytes through the
  // pool, one kernel less, and q's producer (the stem) stores int8.
  void fold_max_pool(size_t i, const std::vector<std::vector<int>>& users, std::vector<char>& requantizes) {
    const ir::Node& pool = g_.nodes[i];
    const ir::Node* dq = producer(pool.inputs[0], "DequantizeLinear");
    if (!dq || pool.outputs.size() != 1) return;
    const int reader = sole_reader(g_, users, pool.outputs[0]);
    if (reader < 0 || g_.nodes[static_cast<size_t>(reader)].op != "QuantizeLinear" ||
        g_.nodes[static_cast<size_t>(reader)].inputs[0] != pool.outputs[0])
      return;
    const ir::Node& q = g_.nodes[static_cast<size_t>(reader)];
    // int8, or uint8 with zero point 0 (onnxruntime's activations after a ReLU) on both sides.
    const std::optional<SymmetricQdq> from = symmetric_qdq(g_, *dq), to = symmetric_qdq(g_, q);
    if (!from || !to || !from->per_tensor() || !to->per_tensor() || from->integer != to->integer ||
        (from->integer != DType::kI8 && from->integer != DType::kU8))
      return;
    const float s = static_cast<float>(from->scale->get_f64(0));
    if (!(s > 0.0f) || static_cast<float>(to->scale->get_f64(0)) != s) return;
    const ValueId out = pool.outputs[0], requantized = q.outputs[0];
    if (!replace_all_uses(g_, requantized, out)) return;
    g_.nodes[i].inputs[0] = dq->inputs[0];
    g_.value(out).type.dtype = from->integer;
    requantizes[static_cast<size_t>(reader)] = 1;
  }

  // B as an f32 constant: as given, or the value of DequantizeLinear(int32 constant).
  std::optional<ValueId> float_bias(ValueId b, std::string& why) {
    if (b == kNoValue) return kNoValue;
    if (const Tensor* t = constant(b); t && t->dtype() == DType::kF32) return b;
    why = "the bias is not a constant";
    return std::nullopt;
  }

  bool fold(size_t i, const std::vector<std::vector<int>>& users, std::string& why) {
    const ir::Node& n = g_.nodes[i];
    const ir::Node* dqx = producer(n.inputs[0], "DequantizeLinear");
    const ir::Node* dqw = n.inputs.size() > 1 ? producer(n.inputs[1], "DequantizeLinear") : nullptr;
    if (!dqw) return false;  // a float conv: nothing to say
    const bool conv = n.op == "tessel.Conv";
    const Shape& w_shape = g_.type(dqw->inputs[0]).shape;  // OHWI, or [N, K]
    const int64_t co = w_shape.at(0), ci = w_shape.back();
    if (!dqx) {
      // convert-layout pads a stem's few channels (RGB) to 8 after the DequantizeLinear (and
      // the edge Transpose).
      const ir::Node* pad = producer(n.inputs[0], "Pad");
      const ir::Node* t = pad ? producer(pad->inputs[0], "Transpose") : nullptr;
      const ValueId before = t ? t->inputs[0] : pad ? pad->inputs[0] : kNoValue;
      if (pad && producer(before, "DequantizeLinear")) {
        why = std::to_string(g_.type(pad->inputs[0]).shape.back()) +
              " input channels, padded to a multiple of 8 in float: the conv stays fp16 (an "
              "int8 conv over so few channels would be slower than the fp16 one)";
      } else {
        why = "its input is not a DequantizeLinear output (a float producer)";
      }
      return false;
    }
    if (n.inputs.size() > 3 || ops_attr(n)) {
      why = "it already has a fused epilogue";
      return false;
    }
    if (n.get_int("group", 1) != 1) {
      why = "grouped convolution: the int8 kernels take group 1 only";
      if (std::string float_input;
          ops::is_depthwise_conv(g_, n) && !fold_depthwise_input(i, *dqx, users, float_input))
        why += "; its input stays float: " + float_input;
      return false;
    }
    // One output (a mask or attention head, a dense layer to one value): the contraction has
    // no N dim, which only the float kernels (halo, SIMT) take.
    if (co == 1) {
      why = "one output channel: the int8 kernels store rows of output channels (N), which one "
            "channel does not make; the float kernels take it";
      return false;
    }
    if (!conv && (n.get_int("trans_a", 0) != 0 || n.get_int("trans_b", 1) != 1)) {
      why = "a transposed operand: the int8 kernels read A [M, K] and W [N, K]";
      return false;
    }
    if (ci % kInt8ChannelAlignment != 0) {
      why = std::to_string(ci) + (conv ? " input channels" : " inputs (K)") +
            ": int8 needs a multiple of " + std::to_string(kInt8ChannelAlignment);
      return false;
    }
    const std::optional<const Tensor*> sx = int8_scale(*dqx, 1, why, "the input", true);
    if (!sx) return false;
    if (std::optional<std::string> no = uint8_from_grouped_conv(*dqx)) {
      why = *no;
      return false;
    }
    const std::optional<const Tensor*> sw = int8_scale(*dqw, co, why, "the weight");
    if (!sw) return false;
    if (!constant(dqw->inputs[0])) {
      why = "the weight is not a constant";
      return false;
    }
    if ((*sw)->numel() > 1 && symmetric_qdq(g_, *dqw)->axis != 0) {
      why = "the weight scale is not per output channel";
      return false;
    }
    const std::optional<ValueId> b = float_bias(n.inputs.size() > 2 ? n.inputs[2] : kNoValue, why);
    if (!b) return false;

    Tensor s(DType::kF32, {co});
    const double x_scale = (*sx)->get_f64(0);
    for (int64_t c = 0; c < co; ++c)
      s.data<float>()[c] = static_cast<float>(x_scale * (*sw)->get_f64((*sw)->numel() == 1 ? 0 : c));
    const ValueId scale = g_.add_constant(names_.fresh(g_.value(n.outputs[0]).name + ".dequant_scale"), std::move(s));
    ir::Node& node = g_.nodes[i];  // add_constant does not move nodes, but take it afresh
    node.inputs = {dqx->inputs[0], dqw->inputs[0], *b, kNoValue, scale};
    node.attrs.erase(kRefusalAttr);
    return true;
  }

  // Why X = DequantizeLinear(QuantizeLinear(y)) in uint8 is better left float: y comes from a
  // grouped conv that is not depthwise, whose kernels store no uint8. The QuantizeLinear would
  // then be a kernel of its own, a pass over y that costs more than the int8 conv saves (as it
  // did MobileNet-v2's QUInt8 project convs, H200, batch 32: 0.511 -> 0.584 ms, until the
  // depthwise kernels stored uint8); as a float conv it reads y and the pair is the epilogue's
  // fake quantization (fuse).
  std::optional<std::string> uint8_from_grouped_conv(const ir::Node& dqx) const {
    const ir::Node* q = producer(dqx.inputs[0], "QuantizeLinear");
    if (!q || g_.value(dqx.inputs[0]).type.dtype != DType::kU8) return std::nullopt;
    const ir::Node* y = producer(q->inputs[0], "tessel.Conv");
    if (!y || ops::stores_uint8(g_, *y)) return std::nullopt;
    return "the input is uint8 from a grouped conv, whose kernels store no uint8: a "
           "QuantizeLinear kernel of its own would cost more than the int8 conv saves";
  }

  // Depthwise conv i reading DequantizeLinear `dqx` reads its integers instead (the form at
  // the top of the file), or says why not: X not symmetric int8 per tensor, or `dqx` read by
  // other nodes too (they would keep it, and Xq's producer would then store int8 for this conv
  // and leave a DequantizeLinear kernel to write the float copy the others read: more bytes,
  // not fewer). The conv's own weights are checked by fold, its kernels take any depthwise
  // window and channel count (the tiled kernel's copies narrow to single bytes).
  bool fold_depthwise_input(size_t i, const ir::Node& dqx,
                            const std::vector<std::vector<int>>& users, std::string& why) {
    const ValueId xd = g_.nodes[i].inputs[0], xq = dqx.inputs[0];
    if (sole_reader(g_, users, xd) < 0) {
      why = "its DequantizeLinear has other readers";
      return false;
    }
    const std::optional<const Tensor*> sx = int8_scale(dqx, 1, why, "the input");
    if (!sx) return false;
    const int64_t channels = g_.type(xd).shape.back();
    Tensor s(DType::kF32, {channels});
    for (int64_t c = 0; c < channels; ++c)
      s.data<float>()[c] = static_cast<float>((*sx)->get_f64(0));
    const ValueId scale =
        g_.add_constant(names_.fresh(g_.value(xd).name + ".dequant_scale"), std::move(s));
    ir::Node& node = g_.nodes[i];  // add_constant does not move nodes, but take it afresh
    if (node.inputs.size() < 5) node.inputs.resize(5, kNoValue);
    node.inputs[0] = xq;
    node.inputs[4] = scale;
    return true;
  }

  static bool ops_attr(const ir::Node& n) {
    return n.has_attr("epilogue") || n.has_attr("out_dtype") || n.has_attr("input_layout");
  }

  ir::Graph g_;
  std::vector<int> producers_;
  UniqueNames names_;
};

}  // namespace

ir::Graph fold_qdq(ir::Graph g) {
  g = QuantizePusher(std::move(g), "Concat").run();
  g = QuantizePusher(std::move(g), "tessel.MaxPool").run();
  g = ConcatOfIntegers(std::move(g)).run();
  g = ReluRequantizeFolder(std::move(g)).run();
  g = ChannelScaleIntoDequantize(std::move(g)).run();
  return ChannelShiftOfIntegers(QdqFolder(std::move(g)).run()).run();
}

}  // namespace tessel::passes
