// Folds inference batch normalization into the preceding convolution or transposed
// convolution.
//
//   y = gamma * (conv(x, W) + b - mean) / sqrt(var + eps) + beta
//     = conv(x, W * s) + (b - mean) * s + beta,     s = gamma / sqrt(var + eps)
//
// with s broadcast over W's output channels: axis 0 of Conv's OIHW [M, C/group, k...]; for
// ConvTranspose's [C, M/group, k...] axis 1, channel (c / (C/group)) * M/group + m, the group
// of input channel c picking the block of outputs. The arithmetic is done in double and rounded
// once to the weights' dtype.
//
// A QDQ model's Conv reads its weight through DequantizeLinear(Wq, sw) (an integer constant
// that fold-constants keeps for fold-qdq): there s goes into the weight's scale instead,
// sw'[m] = sw[m] * s[m] per output channel (axis 0), and the integers stay as they are, as
// TensorRT folds batch norm into a quantized conv.
#include <cmath>
#include <vector>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

// The DequantizeLinear writing a Conv's weight w when w is a symmetric quantized constant
// (rewrite_util.h) that only this Conv reads, its scale per tensor or per output channel.
int quantized_weight(const ir::Graph& g, const std::vector<int>& producer,
                     const std::vector<int>& uses, ir::ValueId w) {
  const int p = producer[static_cast<size_t>(w)];
  if (p < 0 || uses[static_cast<size_t>(w)] != 1) return -1;
  const ir::Node& dq = g.nodes[static_cast<size_t>(p)];
  if (dq.op != "DequantizeLinear") return -1;
  const std::optional<SymmetricQdq> q = symmetric_qdq(g, dq);
  const Tensor* weights = g.value(dq.inputs[0]).data.get();
  if (!q || !weights || weights->shape().size() < 2) return -1;
  if (!q->per_tensor() && (q->scale->numel() != weights->dim(0) || q->axis != 0)) return -1;
  return p;
}

bool all_constant(const ir::Graph& g, const ir::Node& n, size_t first, size_t last) {
  for (size_t i = first; i <= last; ++i)
    if (i >= n.inputs.size() || n.inputs[i] == ir::kNoValue || !g.value(n.inputs[i]).is_constant())
      return false;
  return true;
}

// The conv at p takes the folded bias and writes the BN's output value directly.
void finish_fold(ir::Graph& g, int p, const ir::Node& bn, ir::ValueId bias) {
  ir::Node& c = g.nodes[static_cast<size_t>(p)];
  c.inputs.resize(3);
  c.inputs[2] = bias;
  const ir::ValueId y = bn.outputs[0];
  g.value(y).type = g.value(c.outputs[0]).type;
  c.outputs[0] = y;
}

}  // namespace

ir::Graph fold_batch_norm(ir::Graph g) {
  std::vector<int> producer = g.producers();
  std::vector<int> uses = use_counts(g);
  std::vector<char> erase(g.nodes.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.outputs.size() != 1) continue;
    if (bn.get_int("training_mode", 0) != 0 || !all_constant(g, bn, 1, 4)) continue;
    ir::ValueId x = bn.inputs[0];
    int p = producer[static_cast<size_t>(x)];
    if (p < 0 || erase[p] || uses[static_cast<size_t>(x)] != 1) continue;
    ir::Node& conv = g.nodes[static_cast<size_t>(p)];
    const bool transposed = conv.op == "ConvTranspose";
    if ((conv.op != "Conv" && !transposed) || conv.inputs.size() < 2) continue;
    const int dq = conv.op == "Conv" ? quantized_weight(g, producer, uses, conv.inputs[1]) : -1;
    if (!g.value(conv.inputs[1]).is_constant() && dq < 0) continue;
    bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != ir::kNoValue;
    if (has_bias && !g.value(conv.inputs[2]).is_constant()) continue;

    const Tensor& w = dq >= 0 ? *g.value(g.nodes[static_cast<size_t>(dq)].inputs[0]).data
                              : *g.value(conv.inputs[1]).data;
    const Tensor& gamma = *g.value(bn.inputs[1]).data;
    const Tensor& beta = *g.value(bn.inputs[2]).data;
    const Tensor& mean = *g.value(bn.inputs[3]).data;
    const Tensor& var = *g.value(bn.inputs[4]).data;
    if (w.shape().size() < 2) continue;  // malformed: the op's own check reports it
    const int64_t group = conv.get_int("group", 1);
    const int64_t co = transposed ? w.dim(1) * group : w.dim(0);
    if (group < 1 || w.dim(0) % group != 0) continue;
    if (gamma.numel() != co || beta.numel() != co || mean.numel() != co || var.numel() != co)
      continue;
    const double eps = bn.get_float("epsilon", 1e-5);
    std::vector<double> scale(static_cast<size_t>(co));
    Tensor new_b(dq >= 0 ? g.type(conv.inputs[1]).dtype : w.dtype(), {co});
    for (int64_t c = 0; c < co; ++c) {
      const double s = gamma.get_f64(c) / std::sqrt(var.get_f64(c) + eps);
      const double b = has_bias ? g.value(conv.inputs[2]).data->get_f64(c) : 0.0;
      new_b.set_f64(c, (b - mean.get_f64(c)) * s + beta.get_f64(c));
      scale[static_cast<size_t>(c)] = s;
    }
    ir::ValueId b_id = g.add_constant(g.unique_value_name(conv.name + ".bias.bn"), std::move(new_b));
    if (dq >= 0) {
      ir::Node& d = g.nodes[static_cast<size_t>(dq)];
      const Tensor& sw = *g.value(d.inputs[1]).data;
      Tensor new_scale(DType::kF32, {co});
      for (int64_t c = 0; c < co; ++c)
        new_scale.set_f64(c, sw.get_f64(sw.numel() == 1 ? 0 : c) * scale[static_cast<size_t>(c)]);
      const ir::ValueId s_id =
          g.add_constant(g.unique_value_name(g.value(d.inputs[1]).name + ".bn"), std::move(new_scale));
      ir::Node& d2 = g.nodes[static_cast<size_t>(dq)];  // add_constant does not move nodes
      d2.inputs.resize(2);  // zero point 0: absent
      d2.inputs[1] = s_id;
      d2.attrs["axis"] = int64_t{0};
      finish_fold(g, p, bn, b_id);
      erase[i] = 1;
      changed = true;
      continue;
    }
    // W viewed as [d0, d1, window]: the output channel of each (i0, i1).
    const int64_t d0 = w.dim(0), d1 = w.dim(1);
    const int64_t window = d0 * d1 == 0 ? 0 : w.numel() / (d0 * d1);
    Tensor new_w(w.dtype(), w.shape());
    for (int64_t i0 = 0; i0 < d0; ++i0) {
      for (int64_t i1 = 0; i1 < d1; ++i1) {
        const int64_t c = transposed ? i0 / (d0 / group) * d1 + i1 : i0;
        const double s = scale[static_cast<size_t>(c)];
        for (int64_t j = (i0 * d1 + i1) * window, e = j + window; j < e; ++j)
          new_w.set_f64(j, w.get_f64(j) * s);
      }
    }
    ir::ValueId w_id = g.add_constant(g.unique_value_name(g.value(conv.inputs[1]).name + ".bn"),
                                      std::move(new_w));
    g.nodes[static_cast<size_t>(p)].inputs.resize(3);
    g.nodes[static_cast<size_t>(p)].inputs[1] = w_id;
    finish_fold(g, p, bn, b_id);
    erase[i] = 1;
    changed = true;
  }
  if (!changed) return g;
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
