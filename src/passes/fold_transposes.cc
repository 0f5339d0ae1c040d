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
#include <numeric>

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

}  // namespace

ir::Graph fold_transposes(ir::Graph g) {
  bool changed = false;
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
