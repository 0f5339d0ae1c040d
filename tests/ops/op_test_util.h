// Runs one op through the registry (infer + reference kernel), as the CPU executor does.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::testing {

// Builds a one-node graph and runs it; inputs given as Tensors (an undefined Tensor marks an
// omitted optional input). Returns the outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           ir::Attributes attrs = {}, int num_outputs = 1, int64_t opset = 17);

// Max |a - b| / (atol + rtol * |b|) over elements: <= 1 means close.
bool all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-6);

}  // namespace tessel::testing
