// The latency predictor (`tessel predict`, and the predicted column of `tessel profile`): for
// each node of a compiled graph, the time of the kernel plan_node gives it on a GPU, without
// running anything, and for the whole engine its sum and its device memory.
//
//   contraction (mma.sync, wgmma, SIMT): kernels::estimate, the cost model the default
//     schedule is ranked by (kernels/estimate.h);
//   halo contraction and op kernels: the larger of their DRAM traffic (every input, constants
//     included, and output once) at the device's bandwidth and their arithmetic at its
//     CUDA-core (op kernels) or Tensor Core (halo) rate, plus one launch;
//   views and in-place Concats: nothing.
// The device is the architecture table's (kernels/arch.h), so a GPU that is not present (an
// A100 from an H100) is predicted the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/options.h"
#include "device/device_info.h"
#include "ir/graph.h"

namespace tessel::compiler {

struct NodePrediction {
  int node = 0;            // index in the graph
  double microseconds = 0;  // 0 for nodes that launch nothing
  int64_t flops = 0;       // ops::node_flops
  int64_t bytes = 0;       // inputs (constants included) and outputs
  std::string model;       // "cost model", "bandwidth", "none"
};

struct ModelPrediction {
  std::vector<NodePrediction> nodes;
  double microseconds = 0;  // the sum: one replay of the engine's CUDA graph
  int64_t arena_bytes = 0;  // activations (the memory plan)
  int64_t constant_bytes = 0;
  int64_t workspace_bytes = 0;  // split-K partials
  int64_t device_bytes() const { return arena_bytes + constant_bytes + workspace_bytes; }
};

// `g` is a graph after the GPU pipeline (passes::gpu_pipeline); every node must have a GPU
// path (a UserError names the first that has none).
ModelPrediction predict(const ir::Graph& g, const Options& options, const device::DeviceInfo& target);

// One node's prediction, given plan_node's decision for it.
NodePrediction predict_node(const ir::Graph& g, int node, const struct NodePlan& plan,
                            const device::DeviceInfo& target);

}  // namespace tessel::compiler
