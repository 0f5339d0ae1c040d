// Orders the nodes of an imported graph so that every node comes after the producers of its
// inputs. ONNX requires models to be sorted, but producers do not always comply, and the
// IR's verifier and executor rely on the order.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace tessel::onnx {

// Kahn's algorithm, taking the lowest original index first, so that an already sorted model
// keeps its order and independent nodes keep their relative order. `producer[v]` is the
// index in `nodes` of the node writing value v, or -1 (graph input, constant). A cycle is a
// UserError naming the nodes on it in data-flow order: "the graph has a cycle: Add 'a' ->
// Relu 'b' -> Add 'a'".
std::vector<ir::Node> topological_sort(std::vector<ir::Node> nodes,
                                       const std::vector<int>& producer);

}  // namespace tessel::onnx
