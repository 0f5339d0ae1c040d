// nest-prefix-concats: a Concat whose leading inputs are exactly the inputs of an earlier
// Concat (same axis, same order) reads that Concat's output instead:
//
//   %c1 = Concat(%x, %f0)                  %c1 = Concat(%x, %f0)
//   %c2 = Concat(%x, %f0, %f1)       ->    %c2 = Concat(%c1, %f1)
//   %c3 = Concat(%x, %f0, %f1, %f2)        %c3 = Concat(%c2, %f2)
//
// The same values (concatenation is associative). This is DenseNet's dense block, where layer
// i concatenates the block input and every feature before it: written out, the copies grow
// quadratically with the depth of the block. Nested, concat-into-slices can make each Concat a
// channel prefix of the last one's buffer (its features stored in place by their convs, each
// prefix read where it lies by the 1x1 conv after it): one buffer per block and no copies but
// the block input's. The longest earlier prefix wins; the inputs compared are the Concats'
// original ones, so a chain nests link by link.
#include <algorithm>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {

ir::Graph nest_prefix_concats(ir::Graph g) {
  struct Earlier {
    std::vector<ir::ValueId> inputs;  // as written, before nesting
    int64_t axis;
    ir::ValueId out;
  };
  std::vector<Earlier> earlier;
  for (ir::Node& n : g.nodes) {
    if (n.op != "Concat" || n.outputs.size() != 1 || n.inputs.size() < 2) continue;
    const int64_t rank = static_cast<int64_t>(g.type(n.outputs[0]).shape.size());
    int64_t axis = n.get_int("axis", 0);
    if (axis < 0) axis += rank;
    const std::vector<ir::ValueId> original = n.inputs;
    const Earlier* best = nullptr;
    for (const Earlier& e : earlier) {
      if (e.axis != axis || e.inputs.size() >= original.size() ||
          g.type(e.out).dtype != g.type(n.outputs[0]).dtype)
        continue;
      if (!std::equal(e.inputs.begin(), e.inputs.end(), original.begin())) continue;
      if (!best || e.inputs.size() > best->inputs.size()) best = &e;
    }
    if (best) {
      std::vector<ir::ValueId> nested = {best->out};
      nested.insert(nested.end(), original.begin() + static_cast<int64_t>(best->inputs.size()),
                    original.end());
      n.inputs = std::move(nested);
    }
    earlier.push_back({original, axis, n.outputs[0]});
  }
  return g;
}

}  // namespace tessel::passes
