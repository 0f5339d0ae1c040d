// Static type inference over a whole graph, and the graph verifier.
#pragma once

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::ir {

// Sets the type of every node output from its inputs, in node order. Values of small
// computations whose inputs are all known (Shape -> Gather -> Concat -> Reshape chains) are
// evaluated on the way with the reference kernels, so that ops whose output shape depends on
// an input's value see it. Throws UserError naming the node on any problem.
void infer_types(Graph& g, const OpRegistry& registry);

// The value of Shape node `n` (its start and end attributes, opset 15) over an input of shape
// `input_shape`: shapes in the IR are static, so a Shape is known whatever its input's data.
Tensor shape_value(const Node& n, const Shape& input_shape);

// Checks the structural invariants: ids in range, each value written once, nodes in
// topological order (so no cycles), no value read before it is written or given, graph
// outputs produced, node names unique, every op registered. UserError on violation, naming
// the value or node.
void verify(const Graph& g, const OpRegistry& registry);

}  // namespace tessel::ir
