// Splits Concats of more inputs than a GPU op kernel takes into a tree of Concats over runs of
// consecutive inputs: Concat(x1, ..., x20) with a limit of 8 becomes
// Concat(Concat(x1..x8), Concat(x9..x16), x17, .., x20), the same values in the same order.
// Where every input of an inner Concat is stored in place by its producer, concat-into-slices
// makes the inner Concat an alias inside the outer one's buffer; otherwise (DenseNet, whose
// features are read by every later Concat) the inner Concat's copy is copied once more.
#include <algorithm>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {

ir::Graph split_wide_concats(ir::Graph g) {
  bool changed = false;
  UniqueNames values = UniqueNames::of_values(g), names = UniqueNames::of_nodes(g);
  std::vector<ir::Node> nodes;
  std::vector<ir::Node> work(g.nodes.begin(), g.nodes.end());
  for (const ir::Node& original : work) {
    if (original.op != "Concat" || original.inputs.size() <= kMaxConcatInputs) {
      nodes.push_back(original);
      continue;
    }
    changed = true;
    ir::Node n = original;
    const int64_t rank = static_cast<int64_t>(g.type(n.outputs[0]).shape.size());
    int64_t axis = n.get_int("axis", 0);
    if (axis < 0) axis += rank;
    // Runs of kMaxConcatInputs consecutive inputs become inner Concats until the outer fits;
    // each round divides the count by kMaxConcatInputs.
    while (n.inputs.size() > kMaxConcatInputs) {
      std::vector<ir::ValueId> outer;
      for (size_t i = 0; i < n.inputs.size(); i += kMaxConcatInputs) {
        const size_t end = std::min(n.inputs.size(), i + kMaxConcatInputs);
        if (end - i == 1) {
          outer.push_back(n.inputs[i]);
          continue;
        }
        std::vector<ir::ValueId> run(n.inputs.begin() + static_cast<int64_t>(i),
                                     n.inputs.begin() + static_cast<int64_t>(end));
        ir::TensorType type = g.type(run[0]);
        type.shape[static_cast<size_t>(axis)] = 0;
        for (ir::ValueId v : run) type.shape[static_cast<size_t>(axis)] += g.type(v).shape[axis];
        const ir::ValueId part = g.add_value(values.fresh(n.name + ".part"), type);
        nodes.push_back(ir::Node{.op = "Concat", .name = names.fresh(n.name + ".part"),
                                 .inputs = std::move(run), .outputs = {part},
                                 .attrs = {{"axis", axis}}});
        outer.push_back(part);
      }
      n.inputs = std::move(outer);
    }
    nodes.push_back(std::move(n));
  }
  if (!changed) return g;
  g.nodes = std::move(nodes);
  return g;
}

}  // namespace tessel::passes
