// Work estimates per node, for `tessel inspect` and the profiler: multiply-adds count as two
// FLOPs; elementwise ops as one per output element; data movement as zero.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace tessel::ops {

int64_t node_flops(const ir::Graph& g, const ir::Node& n);
// Elements of the constant inputs (weights, biases) a node reads.
int64_t node_parameters(const ir::Graph& g, const ir::Node& n);

}  // namespace tessel::ops
