// fuse-prologue: a per-channel affine map and ReLU before a convolution become the conv's
// A prologue (ops/tessel_epilogue.h 'prologue'), applied by the kernel to the input elements
// it loads, instead of elementwise kernels that read and write the whole tensor first.
//
//   %s = Mul(%x, %scale[C])            tessel.Conv(%x, %w, %b, -, -, %p)
//   %t = Add(%s, %shift[C])      ->      {prologue = "affine_relu"}
//   %r = Relu(%t)                      %p = [[scale], [shift]] : f32[2, C]
//   %y = tessel.Conv(%r, %w, %b)
//
// This is the unfoldable BatchNormalization (lower-batch-norm's Mul + Add) of pre-activation
// networks: DenseNet's BN + ReLU after each Concat, ResNet-v2's before each conv. Such a BN
// cannot fold into the conv's weights: the ReLU between them is not linear, and the conv's
// zero padding would become the shift (the prologue leaves padding zero, as the graph does).
//
// The chain: any run of Mul, Add, Sub and Div with a constant that is a scalar or one value
// per channel (NHWC: the last axis), in any operand order Add/Mul allow and x - c, x / c,
// composed into one scale and shift; then at most one Relu, last. Every intermediate value
// is read once, by the next node of the chain; the chain's value is read only as X by
// tessel.Convs that take a prologue (group 1, NHWC input, float weights, none yet): each of
// them gets the prologue, and the chain is removed. fuse runs first, so that what a
// producer's epilogue can take goes there.
//
// And an int8 requantization read only by depthwise convs over int8 X (a QDQ DenseNet's
// concat, requantized before its norm's depthwise conv: fold-qdq's ConcatOfIntegers) becomes
// their prologue "requantize" (fuse_requantize below):
//
//   %r = tessel.Conv(%q, %ones, _, _, %s) {group = C,          %y = tessel.Conv(%q, %w, %b, _, %s2, %p)
//          epilogue = ["quantize"] (t), out_dtype = "i8"}  ->          {prologue = "requantize", ...}
//   %y = tessel.Conv(%r, %w, %b, _, %s2) {group = C, ...}       %p = [s / t] : f32[1, C]
#include <algorithm>
#include <optional>

#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ops::kPrologueInput;  // tessel.Conv's P

// A tessel.Conv that can read its X through a prologue.
bool takes_prologue(const ir::Graph& g, const ir::Node& n) {
  if (n.op != "tessel.Conv" || n.inputs.size() < 2 || n.get_int("group", 1) != 1) return false;
  if (ops::read_nchw_input(n) || ops::read_prologue(n)) return false;
  if (n.inputs.size() > kPrologueInput) return false;
  const DType w = g.type(n.inputs[1]).dtype;
  return is_float(w) && g.type(n.inputs[0]).dtype == w;
}

// One node of the chain: y = x * scale + shift per channel (constants broadcast along the
// last axis), or a ReLU.
struct Link {
  int node = -1;
  ir::ValueId x = ir::kNoValue;  // the chain value it reads
  std::vector<double> scale, shift;
  bool relu = false;
};

// The per-channel values of constant `v` for `channels` channels: a scalar, or a tensor whose
// only non-1 dim is the last, of extent `channels`, and of rank at most `rank`.
std::optional<std::vector<double>> per_channel(const ir::Graph& g, ir::ValueId v,
                                               int64_t channels, size_t rank) {
  const ir::Value& val = g.value(v);
  if (!val.is_constant() || !is_float(val.data->dtype())) return std::nullopt;
  const Shape& s = val.data->shape();
  if (s.size() > rank) return std::nullopt;
  const int64_t n = val.data->numel();
  if (n != 1) {
    if (s.empty() || s.back() != channels || n != channels) return std::nullopt;
  }
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[c] = val.data->get_f64(n == 1 ? 0 : c);
  return out;
}

// Node `i` as a link of a chain over a [..., C] float tensor, or nothing.
std::optional<Link> link_of(const ir::Graph& g, int i) {
  const ir::Node& n = g.nodes[static_cast<size_t>(i)];
  if (n.outputs.size() != 1) return std::nullopt;
  const ir::TensorType& y = g.type(n.outputs[0]);
  if (!is_float(y.dtype) || y.shape.size() != 4) return std::nullopt;
  const int64_t c = y.shape.back();
  Link l;
  l.node = i;
  if (n.op == "Relu" && n.inputs.size() == 1) {
    l.x = n.inputs[0];
    l.relu = true;
    return l;
  }
  if (n.inputs.size() != 2) return std::nullopt;
  const bool add = n.op == "Add", sub = n.op == "Sub", mul = n.op == "Mul", div = n.op == "Div";
  if (!add && !sub && !mul && !div) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    // x op k (side 0: x first); Sub and Div only as x - k, x / k.
    if (side == 1 && (sub || div)) break;
    const ir::ValueId x = n.inputs[side], k = n.inputs[1 - side];
    if (g.value(x).is_constant() || !(g.type(x) == y)) continue;
    const std::optional<std::vector<double>> v = per_channel(g, k, c, y.shape.size());
    if (!v) continue;
    l.x = x;
    l.scale.assign(static_cast<size_t>(c), 1.0);
    l.shift.assign(static_cast<size_t>(c), 0.0);
    for (int64_t j = 0; j < c; ++j) {
      if (add) l.shift[j] = (*v)[j];
      if (sub) l.shift[j] = -(*v)[j];
      if (mul) l.scale[j] = (*v)[j];
      if (div) l.scale[j] = 1.0 / (*v)[j];
    }
    return l;
  }
  return std::nullopt;
}

// Whether node n requantizes int8 values, as fold-qdq's ConcatOfIntegers writes it and fuse
// finishes it: a depthwise tessel.Conv over int8 NHWC X of 1x1 unit weights, stride 1, no
// padding, with S [C] and no bias, residual or prologue, whose epilogue is one quantize(t),
// storing int8 NHWC. Its value is then clamp(rne(x * S[c] / t)); *factor gets S[c] / t.
bool requantizes(const ir::Graph& g, const ir::Node& n, std::vector<double>* factor) {
  if (n.op != "tessel.Conv" || !ops::is_depthwise_conv(g, n) || n.outputs.size() != 1) return false;
  if (g.type(n.inputs[0]).dtype != DType::kI8 || ops::read_prologue(n) || ops::read_nchw_input(n) ||
      ops::read_out_dtype(n) != DType::kI8 || ops::read_store(n).kind != ops::StoreMap::Kind::kNhwc)
    return false;
  auto operand = [&](size_t i) { return n.inputs.size() > i ? n.inputs[i] : ir::kNoValue; };
  if (operand(2) != ir::kNoValue || operand(3) != ir::kNoValue || operand(kPrologueInput) != ir::kNoValue)
    return false;
  const std::vector<int64_t> pads = n.get_ints("pads", {}), strides = n.get_ints("strides", {});
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
      std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s != 1; }))
    return false;
  const int64_t c = g.type(n.inputs[0]).shape.back();
  const Tensor* w = g.value(n.inputs[1]).data.get();
  const Tensor* scale = operand(4) == ir::kNoValue ? nullptr : g.value(operand(4)).data.get();
  if (!w || w->shape() != Shape{c, 1, 1, 1} || !scale || scale->numel() != c) return false;
  for (int64_t j = 0; j < c; ++j)
    if (w->get_f64(j) != 1.0) return false;
  const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
  if (steps.size() != 1 || steps[0].kind != ops::EpilogueKind::kQuantize || !(steps[0].alpha > 0.0))
    return false;
  factor->resize(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) (*factor)[j] = scale->get_f64(j) / steps[0].alpha;
  return true;
}

// A depthwise conv over int8 X that can read it through the prologue "requantize".
bool takes_requantize(const ir::Graph& g, const ir::Node& n, ir::ValueId x) {
  return n.op == "tessel.Conv" && ops::is_depthwise_conv(g, n) && !n.inputs.empty() &&
         n.inputs[0] == x && std::count(n.inputs.begin(), n.inputs.end(), x) == 1 &&
         g.type(x).dtype == DType::kI8 && !ops::read_prologue(n) && !ops::read_nchw_input(n) &&
         n.inputs.size() <= kPrologueInput;
}

// A requantizer (above) whose output only depthwise convs read, as their int8 X: each reads
// the requantizer's X through the prologue "requantize" with R[c] = S[c] / t, and the
// requantizer goes: in a QDQ DenseNet, the requantization of each concat joins the
// pre-activation norm's depthwise conv after it, one kernel and one int8 tensor fewer per
// layer. The same integers as the requantizer after fold-quantize-scales, which would have
// folded t into S the same way (0 stays 0, so the readers' padding is unchanged).
ir::Graph fuse_requantize(ir::Graph g) {
  const std::vector<int> uses = use_counts(g);
  const std::vector<std::vector<int>> readers = g.users();
  UniqueNames names = UniqueNames::of_values(g);
  std::vector<char> erase(g.nodes.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& rq = g.nodes[i];
    std::vector<double> factor;
    if (!requantizes(g, rq, &factor)) continue;
    const ir::ValueId v = rq.outputs[0];
    bool all = !readers[v].empty() && uses[v] == static_cast<int>(readers[v].size());
    for (int r : readers[v]) all &= takes_requantize(g, g.nodes[static_cast<size_t>(r)], v);
    if (!all) continue;
    const int64_t c = static_cast<int64_t>(factor.size());
    Tensor p(DType::kF32, {1, c});
    for (int64_t j = 0; j < c; ++j) p.set_f64(j, factor[static_cast<size_t>(j)]);
    const ir::ValueId pv = g.add_constant(names.fresh(rq.name + ".requantize"), std::move(p));
    const ir::ValueId x = rq.inputs[0];
    for (int r : readers[v]) {
      ir::Node& rn = g.nodes[static_cast<size_t>(r)];
      rn.inputs[0] = x;
      rn.inputs.resize(kPrologueInput + 1, ir::kNoValue);
      rn.inputs[kPrologueInput] = pv;
      ops::write_prologue(rn, ops::Prologue{.requantize = true});
    }
    erase[i] = 1;
    changed = true;
  }
  if (changed) erase_nodes(g, erase);
  return g;
}

}  // namespace

ir::Graph fuse_prologue(ir::Graph g) {
  const std::vector<int> producers = g.producers();
  const std::vector<int> uses = use_counts(g);
  const std::vector<std::vector<int>> readers = g.users();
  UniqueNames names = UniqueNames::of_values(g);
  std::vector<char> erase(g.nodes.size(), 0);
  bool changed = false;

  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const ir::Node& conv = g.nodes[ci];
    if (erase[ci] || !takes_prologue(g, conv)) continue;
    const ir::ValueId v = conv.inputs[0];
    // Every reader of v: a prologue-taking conv reading it as X only.
    bool all_convs = uses[v] == static_cast<int>(readers[v].size());
    for (int r : readers[v]) {
      const ir::Node& rn = g.nodes[static_cast<size_t>(r)];
      int reads = 0;
      for (ir::ValueId in : rn.inputs) reads += in == v;
      all_convs &= takes_prologue(g, rn) && rn.inputs[0] == v && reads == 1;
    }
    if (!all_convs) continue;
    // Walk back from v: at most one Relu, last; affine links before it.
    std::vector<Link> chain;  // from v backwards
    ir::ValueId x = v;
    while (producers[x] >= 0) {
      const std::optional<Link> l = link_of(g, producers[x]);
      if (!l || (l->relu && !chain.empty())) break;
      if (x != v && uses[x] != 1) break;  // an intermediate value read elsewhere too
      chain.push_back(*l);
      x = l->x;
    }
    if (chain.empty()) continue;
    const bool relu = chain.front().relu;
    const int64_t c = g.type(v).shape.back();
    // Compose the affine links in graph order: y = (x * s1 + t1) * s2 + t2 ...
    std::vector<double> scale(static_cast<size_t>(c), 1.0), shift(static_cast<size_t>(c), 0.0);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (it->relu) continue;
      for (int64_t j = 0; j < c; ++j) {
        scale[j] *= it->scale[j];
        shift[j] = shift[j] * it->scale[j] + it->shift[j];
      }
    }
    Tensor p(DType::kF32, {2, c});
    for (int64_t j = 0; j < c; ++j) {
      p.set_f64(j, scale[j]);
      p.set_f64(c + j, shift[j]);
    }
    const ir::Node& last = g.nodes[static_cast<size_t>(chain.front().node)];
    const ir::ValueId pv = g.add_constant(names.fresh(last.name + ".prologue"), std::move(p));
    for (int r : readers[v]) {
      ir::Node& rn = g.nodes[static_cast<size_t>(r)];
      rn.inputs[0] = x;
      rn.inputs.resize(kPrologueInput + 1, ir::kNoValue);
      rn.inputs[kPrologueInput] = pv;
      ops::write_prologue(rn, ops::Prologue{.relu = relu});
    }
    for (const Link& l : chain) erase[static_cast<size_t>(l.node)] = 1;
    changed = true;
  }
  if (changed) erase_nodes(g, erase);
  return fuse_requantize(std::move(g));
}

}  // namespace tessel::passes
