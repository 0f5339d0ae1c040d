// Folds chains of Transposes: a Transpose of a Transpose is one Transpose with the composed
// permutation, and a Transpose whose permutation is the identity is no node at all.
//
//   y = Transpose(x, p1); z = Transpose(y, p2)  ->  z = Transpose(x, p)  with p[i] = p1[p2[i]]
//
// (z[i0, .., in] reads y at the indices permuted by p2, and y reads x permuted by p1.) This is
// what lets NHWC run straight through a model's own permutes: ConvNeXt permutes to channels-last
// around each LayerNorm, which after convert-layout is a Transpose back to NCHW followed by the
// model's Transpose to NHWC, the identity; likewise on the way back. The first Transpose stays
// when something else reads it (dce removes it otherwise). A graph output keeps its name. A
// layout_reason (convert-layout's explanation of a Transpose back to NCHW) goes with its node:
// where that node cancels against the model's own permute, there is nothing left to explain.
// First, a per-element op between two Transposes moves before the first, so that they meet.
#include <algorithm>
#include <numeric>

#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

std::vector<int64_t> perm_of(const ir::Graph& g, const ir::Node& n) {
  const size_t rank = g.type(n.inputs.at(0)).shape.size();
  std::vector<int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), 0);  // ONNX's default: reverse the axes
  return n.get_ints("perm", reversed);
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool plain_transpose(const ir::Node& n) {
  return n.op == "Transpose" && n.inputs.size() == 1 && n.outputs.size() == 1;
}

// A per-element op of one activation (its other inputs one-element constants, like Clip's
// bounds), which commutes with any Transpose.
bool commutes_with_transpose(const ir::Graph& g, const ir::Node& n) {
  const ir::OpFacts& f = ir::OpRegistry::global().facts(n.op);
  if (f.kind != ir::OpKind::kElementwise || f.nhwc != ir::NhwcForm::kAgnostic) return false;
  if (n.inputs.empty() || n.outputs.size() != 1) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const ir::ValueId v = n.inputs[i];
    if (v != ir::kNoValue && (!g.value(v).is_constant() || g.value(v).data->numel() != 1))
      return false;
  }
  return true;
}

bool is_graph_output(const ir::Graph& g, ir::ValueId v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// x -> Transpose T -> t -> U -> y -> (per-element ops) -> Transpose, each value between read
// once: U moves before T (x -> U -> y' -> T -> y), and so, one at a time, do the ops after it,
// until the two Transposes meet and compose. (A video net's ReLU between the channels-first
// result of one lowered 3-D conv and the channels-last input of the next; then the ReLU reads
// the conv's output itself and fuses into its epilogue.)
bool sink_per_element_ops(ir::Graph& g) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    const std::vector<int> producer = g.producers();
    const std::vector<int> uses = use_counts(g);
    const std::vector<std::vector<int>> users = g.users();
    for (size_t u = 0; u < g.nodes.size() && !again; ++u) {
      const ir::Node& un = g.nodes[u];
      if (!commutes_with_transpose(g, un)) continue;
      const ir::ValueId t = un.inputs[0], y = un.outputs[0];
      const int tp = producer[static_cast<size_t>(t)];
      if (tp < 0 || !plain_transpose(g.nodes[static_cast<size_t>(tp)])) continue;
      if (uses[static_cast<size_t>(t)] != 1 || is_graph_output(g, t)) continue;
      // y leads, through per-element ops read once each, to a Transpose.
      bool to_transpose = false;
      for (ir::ValueId v = y;;) {
        if (uses[static_cast<size_t>(v)] != 1 || is_graph_output(g, v)) break;
        const std::vector<int>& readers = users[static_cast<size_t>(v)];
        if (readers.size() != 1) break;
        const ir::Node& r = g.nodes[static_cast<size_t>(readers[0])];
        if (plain_transpose(r)) {
          to_transpose = true;
          break;
        }
        if (!commutes_with_transpose(g, r) || r.inputs[0] != v) break;
        v = r.outputs[0];
      }
      if (!to_transpose) continue;
      // U reads x and writes a new value of x's shape at T's place; T writes y at U's.
      ir::Node transpose = g.nodes[static_cast<size_t>(tp)];
      ir::Node op = un;
      const ir::ValueId x = transpose.inputs[0];
      const ir::ValueId moved =
          g.add_value(g.unique_value_name(g.value(y).name + ".before_transpose"),
                      {g.type(y).dtype, g.type(x).shape});
      op.inputs[0] = x;
      op.outputs[0] = moved;
      transpose.inputs[0] = moved;
      transpose.outputs[0] = y;
      g.nodes[static_cast<size_t>(tp)] = std::move(op);
      g.nodes[u] = std::move(transpose);
      changed = again = true;
    }
  }
  return changed;
}

}  // namespace

ir::Graph fold_transposes(ir::Graph g) {
  bool changed = sink_per_element_ops(g);
  std::vector<int> producer = g.producers();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    if (!plain_transpose(n)) continue;
    const int p = producer[static_cast<size_t>(n.inputs[0])];
    if (p >= 0 && plain_transpose(g.nodes[static_cast<size_t>(p)])) {
      const ir::Node& first = g.nodes[static_cast<size_t>(p)];
      const std::vector<int64_t> p1 = perm_of(g, first), p2 = perm_of(g, n);
      std::vector<int64_t> composed(p2.size());
      for (size_t k = 0; k < p2.size(); ++k) composed[k] = p1[static_cast<size_t>(p2[k])];
      n.inputs[0] = first.inputs[0];
      n.attrs["perm"] = composed;
      changed = true;
    }
  }
  // Identities: the output is the input.
  std::vector<char> erase(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!plain_transpose(n) || !is_identity(perm_of(g, n))) continue;
    if (replace_all_uses(g, n.outputs[0], n.inputs[0])) {
      erase[i] = 1;
      changed = true;
    }
  }
  if (!changed) return g;
  erase_nodes(g, erase);
  return eliminate_dead_code(std::move(g));
}

}  // namespace tessel::passes
