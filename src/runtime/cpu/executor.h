// The CPU reference executor: runs an ir::Graph node by node with the reference kernels of
// ops/. It is the correctness oracle for every GPU result and the fallback without a GPU.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::runtime::cpu {

struct RunOptions {
  // Called after each node with its index and output tensors (tracing, per-node timing).
  std::function<void(size_t node_index, const std::vector<Tensor>& outputs)> on_node;
};

// Runs `g` on `inputs` (one per graph input, in order) and returns the graph outputs in
// order. Each input must match its graph input's dtype and shape exactly: a mismatch is a
// UserError naming the input, the expected and the given type. Intermediate tensors are
// released after their last use.
std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<Tensor>& inputs,
                              const RunOptions& options = {},
                              const ir::OpRegistry& registry = ir::OpRegistry::global());

}  // namespace tessel::runtime::cpu
