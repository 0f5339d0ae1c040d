// Local clean-ups that make later patterns simpler.
#include <optional>

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
  // A Concat of one tensor (torch.cat of a one-element list: DenseNet's first dense layer).
  if (n.op == "Concat") return n.inputs.size() == 1 && n.inputs[0] != ir::kNoValue;
  return false;
}

// Gather along one axis with constant indices that pick one position, or a run of consecutive
// positions in increasing order: the same values as a Slice (and, for a scalar index, a
// Reshape that drops the axis), ops with GPU kernels and an NHWC form. Returns the nodes that
// replace `n`, or nothing.
std::optional<std::vector<ir::Node>> gather_as_slice(ir::Graph& g, const ir::Node& n) {
  if (n.op != "Gather" || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  const ir::Value& indices = g.value(n.inputs[1]);
  if (!indices.is_constant() || g.value(n.inputs[0]).is_constant()) return std::nullopt;
  const Tensor& idx = *indices.data;
  const Shape& x = g.type(n.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || idx.shape().size() > 1 || idx.numel() < 1) return std::nullopt;
  const int64_t extent = x[static_cast<size_t>(axis)];
  auto at = [&](int64_t i) { return idx.get_i64(i) < 0 ? idx.get_i64(i) + extent : idx.get_i64(i); };
  const int64_t first = at(0);
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (at(i) != first + i || at(i) < 0 || at(i) >= extent) return std::nullopt;
  auto i64s = [&](const std::string& name, std::vector<int64_t> v) {
    const int64_t size = static_cast<int64_t>(v.size());
    return g.add_constant(g.unique_value_name(n.name + "." + name),
                          Tensor::from_vector<int64_t>({size}, v));
  };
  std::vector<ir::Node> out;
  const bool scalar = idx.shape().empty();
  ir::ValueId sliced = n.outputs[0];
  if (scalar) {
    Shape kept = x;
    kept[static_cast<size_t>(axis)] = 1;
    sliced = g.add_value(g.unique_value_name(n.name + ".slice"), {g.type(n.inputs[0]).dtype, kept});
  }
  out.push_back(ir::Node{.op = "Slice", .name = n.name,
                         .inputs = {n.inputs[0], i64s("starts", {first}),
                                    i64s("ends", {first + idx.numel()}), i64s("axes", {axis})},
                         .outputs = {sliced}, .attrs = {}});
  if (scalar) {
    out.push_back(ir::Node{.op = "Reshape", .name = g.unique_node_name(n.name + ".squeeze"),
                           .inputs = {sliced, i64s("shape", g.type(n.outputs[0]).shape)},
                           .outputs = {n.outputs[0]}, .attrs = {}});
  }
  return out;
}

}  // namespace

ir::Graph canonicalize(ir::Graph g) {
  bool changed = false;
  // Gathers that are slices first: they change the node list.
  std::vector<ir::Node> nodes;
  const std::vector<ir::Node> old = g.nodes;
  for (const ir::Node& n : old) {
    if (std::optional<std::vector<ir::Node>> slice = gather_as_slice(g, n)) {
      nodes.insert(nodes.end(), slice->begin(), slice->end());
      changed = true;
    } else {
      nodes.push_back(n);
    }
  }
  if (changed) g.nodes = std::move(nodes);

  std::vector<int> uses = use_counts(g);
  std::vector<char> erase(g.nodes.size(), 0);
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
