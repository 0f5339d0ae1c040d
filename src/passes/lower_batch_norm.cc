// Lowers the inference BatchNormalizations that fold-batch-norm could not fold (one after a
// Concat, a pooling, an activation: DenseNet's pre-activation blocks) to a per-channel scale and
// shift:
//
//   y = gamma * (x - mean) / sqrt(var + eps) + beta = x * s + t,
//   s = gamma / sqrt(var + eps),  t = beta - mean * s,
//
// two broadcasting ops with constants of shape [C, 1, ..., 1] (channel axis 1 of x), which
// every later pass knows: convert-layout makes them NHWC [C] broadcasts, choose-precision fp16,
// and the GPU runs them as elementwise kernels. s and t are computed in double and rounded once
// to x's dtype. BatchNormalizations in training mode, with non-constant parameters or with
// more than one output stay as they are (the GPU then reports them unsupported, with why).
#include <cmath>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

bool constant_input(const ir::Graph& g, const ir::Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] != ir::kNoValue && g.value(n.inputs[i]).is_constant();
}

}  // namespace

ir::Graph lower_batch_norm(ir::Graph g) {
  std::vector<ir::Node> nodes;
  UniqueNames values = UniqueNames::of_values(g), names = UniqueNames::of_nodes(g);
  bool changed = false;
  const std::vector<ir::Node> old = g.nodes;
  for (const ir::Node& bn : old) {
    const bool lowerable = bn.op == "BatchNormalization" && bn.outputs.size() == 1 &&
                           bn.get_int("training_mode", 0) == 0 && constant_input(g, bn, 1) &&
                           constant_input(g, bn, 2) && constant_input(g, bn, 3) &&
                           constant_input(g, bn, 4);
    const ir::TensorType x = lowerable ? g.type(bn.inputs[0]) : ir::TensorType{};
    if (!lowerable || x.shape.size() < 2 || !is_float(x.dtype)) {
      nodes.push_back(bn);
      continue;
    }
    const int64_t c = x.shape[1];
    const Tensor& gamma = *g.value(bn.inputs[1]).data;
    const Tensor& beta = *g.value(bn.inputs[2]).data;
    const Tensor& mean = *g.value(bn.inputs[3]).data;
    const Tensor& var = *g.value(bn.inputs[4]).data;
    if (gamma.numel() != c || beta.numel() != c || mean.numel() != c || var.numel() != c) {
      nodes.push_back(bn);
      continue;
    }
    // [C] followed by a 1 for every axis after the channel axis: broadcasts against x.
    Shape per_channel(x.shape.size() - 1, 1);
    per_channel[0] = c;
    Tensor scale(x.dtype, per_channel), shift(x.dtype, per_channel);
    const double eps = bn.get_float("epsilon", 1e-5);
    for (int64_t i = 0; i < c; ++i) {
      const double s = gamma.get_f64(i) / std::sqrt(var.get_f64(i) + eps);
      scale.set_f64(i, s);
      shift.set_f64(i, beta.get_f64(i) - mean.get_f64(i) * s);
    }
    const ir::ValueId s = g.add_constant(values.fresh(bn.name + ".scale"), std::move(scale));
    const ir::ValueId t = g.add_constant(values.fresh(bn.name + ".shift"), std::move(shift));
    const ir::ValueId scaled = g.add_value(values.fresh(bn.name + ".scaled"), x);
    nodes.push_back(ir::Node{.op = "Mul", .name = names.fresh(bn.name + ".scale"),
                             .inputs = {bn.inputs[0], s}, .outputs = {scaled}, .attrs = {}});
    nodes.push_back(ir::Node{.op = "Add", .name = bn.name, .inputs = {scaled, t},
                             .outputs = {bn.outputs[0]}, .attrs = {}});
    changed = true;
  }
  if (!changed) return g;
  g.nodes = std::move(nodes);
  return g;
}

}  // namespace tessel::passes
