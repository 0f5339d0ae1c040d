// The kernel of each node of a compiled graph: which generator lowers it (the contraction
// generator or op_kernels.h), its schedule, and the compiled, loaded result. NVRTC dominates
// compile time, so building runs on a pool of hardware_concurrency threads and identical
// kernels (equal generated source) are built once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/contraction_kernel.h"
#include "ir/graph.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/engine.h"

namespace tessel::runtime::cuda_engine {

struct NodeKernel {
  int node = -1;  // index into the graph's nodes

  // A contraction (tessel.Conv with group 1, tessel.Gemm).
  std::shared_ptr<const codegen::cuda::ContractionKernel> contraction;
  bool operands_swapped = false;  // Contraction::operands_swapped: input 0 binds to b
  std::vector<int> extra_inputs;  // ContractionSpec::extra_inputs
  bool tensor_cores = false;      // scheduled on mma.sync or wgmma

  // Any other node: an op kernel (OpParams ABI, op_kernels.h).
  std::shared_ptr<runtime::cuda::Module> module;
  void* function = nullptr;
  runtime::cuda::LaunchConfig config;
};

// One NodeKernel per node, in node order, built for `device`. A node that cannot be lowered is
// a UserError naming it with the generator's reason; this is found before anything compiles.
std::vector<NodeKernel> build_node_kernels(const ir::Graph& g, const EngineOptions& options,
                                           const runtime::cuda::DeviceInfo& device);

}  // namespace tessel::runtime::cuda_engine
