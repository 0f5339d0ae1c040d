// The kernel of each node of a compiled graph: which generator lowers it (the contraction
// generator or op_kernels.h), its schedule, and the cubin NVRTC built for the target. Nothing
// here needs a GPU: loading the cubins is Engine::load's business. NVRTC dominates compile
// time, so building runs on a pool of hardware_concurrency threads and identical kernels
// (equal generated source) are built once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda/contraction_kernel.h"
#include "codegen/cuda/op_kernels.h"
#include "contraction/contraction.h"
#include "ir/graph.h"
#include "runtime/cuda_engine/engine.h"
#include "tune/device_model.h"
#include "tune/schedule.h"

namespace tessel::runtime::cuda_engine {

// An op kernel compiled for the target.
struct CompiledOpKernel {
  codegen::cuda::OpKernelSource source;
  std::string cubin;
};

struct NodeKernel {
  int node = -1;  // index into the graph's nodes

  // A contraction (tessel.Conv with group 1, tessel.Gemm). Nodes sharing a kernel share the
  // pointer.
  std::shared_ptr<const codegen::cuda::CompiledContraction> contraction;
  bool operands_swapped = false;  // Contraction::operands_swapped: input 0 binds to b
  std::vector<int> extra_inputs;  // ContractionSpec::extra_inputs
  tune::Schedule schedule;        // the contraction's schedule

  // Any other node: an op kernel (OpParams ABI, op_kernels.h).
  std::shared_ptr<const CompiledOpKernel> op;

  // A node with neither (one that needs no launch) is skipped by the engine.
  bool launches() const { return contraction || op; }
};

// The choice of generator and schedule that build_node_kernels makes, exposed so that
// `tessel explain` reports the engine's own decisions without a GPU or a compiler.

// True for the nodes lowered by the contraction generator: tessel.Gemm and tessel.Conv with
// group 1 (grouped convolutions go to the op kernels, can_emit_op).
bool lowered_as_contraction(const ir::Node& n);

// A contraction node's plan, computed without compiling anything.
struct ContractionPlan {
  contraction::MatchResult match;   // match() on the node's maps: remarks and notes
  contraction::Epilogue epilogue;   // ContractionSpec::epilogue
  std::vector<int> extra_inputs;    // ContractionSpec::extra_inputs
  tune::Schedule schedule;          // the schedule built; meaningless when `error` is set
  std::string simt_reason;          // why SIMT, when the schedule is SIMT
  std::optional<std::string> error; // why the node cannot be lowered at all (no node label)
};

// Tensor Cores (the cost model's default schedule for `device`) where match() and `options`
// allow, else SIMT; a Tensor Core schedule the generator refuses falls back to SIMT. Requires
// lowered_as_contraction(n).
ContractionPlan plan_contraction(const ir::Graph& g, const ir::Node& n,
                                 const EngineOptions& options, const tune::DeviceInfoLite& device);

// One NodeKernel per node, in node order, compiled for `target` (no GPU needed). A node that
// cannot be lowered is a UserError naming it with the generator's reason; this is found
// before anything compiles. Reports "compiling kernels" progress through options.progress.
std::vector<NodeKernel> build_node_kernels(const ir::Graph& g, const EngineOptions& options,
                                           const TargetInfo& target);

}  // namespace tessel::runtime::cuda_engine
