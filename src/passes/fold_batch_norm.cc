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
#include <cmath>
#include <vector>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

bool all_constant(const ir::Graph& g, const ir::Node& n, size_t first, size_t last) {
  for (size_t i = first; i <= last; ++i)
    if (i >= n.inputs.size() || n.inputs[i] == ir::kNoValue || !g.value(n.inputs[i]).is_constant())
      return false;
  return true;
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
    if ((conv.op != "Conv" && !transposed) || conv.inputs.size() < 2 ||
        !g.value(conv.inputs[1]).is_constant())
      continue;
    bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != ir::kNoValue;
    if (has_bias && !g.value(conv.inputs[2]).is_constant()) continue;

    const Tensor& w = *g.value(conv.inputs[1]).data;
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
    Tensor new_b(w.dtype(), {co});
    for (int64_t c = 0; c < co; ++c) {
      const double s = gamma.get_f64(c) / std::sqrt(var.get_f64(c) + eps);
      const double b = has_bias ? g.value(conv.inputs[2]).data->get_f64(c) : 0.0;
      new_b.set_f64(c, (b - mean.get_f64(c)) * s + beta.get_f64(c));
      scale[static_cast<size_t>(c)] = s;
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
    ir::ValueId b_id = g.add_constant(g.unique_value_name(conv.name + ".bias.bn"), std::move(new_b));
    ir::Node& c = g.nodes[static_cast<size_t>(p)];  // add_constant does not move nodes
    c.inputs.resize(3);
    c.inputs[1] = w_id;
    c.inputs[2] = b_id;
    // The conv now writes the BN's output value directly.
    ir::ValueId y = bn.outputs[0];
    ir::ValueId conv_out = c.outputs[0];
    g.value(y).type = g.value(conv_out).type;
    c.outputs[0] = y;
    erase[i] = 1;
    changed = true;
  }
  if (!changed) return g;
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
