// Local clean-ups that make later patterns simpler.
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

// True when node n computes its first output as a copy of its first input.
bool is_copy(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "Identity") return true;
  if (n.op == "Dropout") {
    // Inference dropout is the identity; the optional mask output must be unused (it is
    // checked by the caller through use counts), and training_mode must not be true.
    if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
      const ir::Value& mode = g.value(n.inputs[2]);
      if (!mode.is_constant() || mode.data->get_i64(0) != 0) return false;
    }
    return true;
  }
  if (n.op == "Cast")
    return n.get_int("to", -1) >= 0 && g.type(n.inputs[0]).dtype == g.type(n.outputs[0]).dtype;
  return false;
}

}  // namespace

ir::Graph canonicalize(ir::Graph g) {
  std::vector<int> uses = use_counts(g);
  std::vector<char> erase(g.nodes.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    if (n.op == "Clip" && (n.has_attr("min") || n.has_attr("max"))) {
      // Opset-6 form: bounds as attributes. Make them constant inputs.
      auto bound = [&](const char* key, double def) {
        Tensor t(g.type(n.inputs[0]).dtype, {});
        t.set_f64(0, n.get_float(key, def));
        return g.add_constant(g.unique_value_name(n.name + "." + key), t);
      };
      ir::ValueId lo = n.has_attr("min") ? bound("min", 0) : ir::kNoValue;
      ir::ValueId hi = n.has_attr("max") ? bound("max", 0) : ir::kNoValue;
      n.attrs.erase("min");
      n.attrs.erase("max");
      n.inputs = {n.inputs[0], lo, hi};
      changed = true;
      continue;
    }
    if (!is_copy(g, n) || n.inputs.empty() || n.inputs[0] == ir::kNoValue) continue;
    bool extra_outputs_used = false;
    for (size_t k = 1; k < n.outputs.size(); ++k) extra_outputs_used |= uses[n.outputs[k]] > 0;
    if (extra_outputs_used) continue;
    if (!replace_all_uses(g, n.outputs[0], n.inputs[0])) continue;
    erase[i] = 1;
    changed = true;
  }
  if (!changed) return g;
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
