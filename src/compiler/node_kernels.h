// The kernel of each node of a compiled graph, as plan_node (plan_node.h) decides it: the
// contraction generator or op_kernels.h, its schedule, and the cubin NVRTC built for the target. Nothing
// here needs a GPU: loading the cubins is Engine::load's business. NVRTC dominates compile
// time, so building runs on a pool of hardware_concurrency threads and identical kernels
// (equal generated source) are built once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/contraction/contraction.h"
#include "ir/graph.h"
#include "compiler/options.h"
#include "compiler/predict.h"
#include "device/device_info.h"
#include "kernels/schedule.h"

namespace tessel::compiler {

// An op kernel compiled for the target.
struct CompiledOpKernel {
  kernels::cuda::OpKernelSource source;
  std::string cubin;
};

struct NodeKernel {
  int node = -1;  // index into the graph's nodes

  // A contraction (tessel.Conv with group 1, tessel.Gemm). Nodes sharing a kernel share the
  // pointer.
  std::shared_ptr<const kernels::cuda::CompiledContraction> contraction;
  bool operands_swapped = false;  // Contraction::operands_swapped: input 0 binds to b
  std::vector<int> extra_inputs;  // ContractionSpec::extra_inputs
  NodePrediction prediction;      // predict_node for it (before calibrate())
  kernels::Schedule schedule;        // the contraction's schedule
  std::string epilogue;              // contraction::Epilogue::str() of its epilogue, for tools

  // Any other node: an op kernel (OpParams ABI, op_kernels.h).
  std::shared_ptr<const CompiledOpKernel> op;

  // A node with neither (one that needs no launch) is skipped by the engine.
  bool launches() const { return contraction || op; }
};

// One NodeKernel per node, in node order, built as plan_node decides, compiled for `target`
// (no GPU needed). A node plan_node finds unsupported is a UserError naming it with the reason;
// this is found before anything compiles. Reports "compiling kernels" progress through
// options.progress.
std::vector<NodeKernel> build_node_kernels(const ir::Graph& g, const Options& options,
                                           const device::DeviceInfo& target);

}  // namespace tessel::compiler
