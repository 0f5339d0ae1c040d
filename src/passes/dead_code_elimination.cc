// Removes nodes none of whose outputs reach a graph output, then unused values.
#include "passes/passes.h"

namespace tessel::passes {

ir::Graph eliminate_dead_code(ir::Graph g) {
  std::vector<char> live(g.values.size(), 0);
  for (ir::ValueId v : g.outputs) live[static_cast<size_t>(v)] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  bool removed = false;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    for (ir::ValueId v : n.outputs)
      if (live[static_cast<size_t>(v)]) keep[i] = 1;
    if (!keep[i]) {
      removed = true;
      continue;
    }
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) live[static_cast<size_t>(v)] = 1;
  }
  if (!removed) return g;
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(nodes);
  g.compact();
  return g;
}

}  // namespace tessel::passes
