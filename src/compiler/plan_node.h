// plan_node: the one place that decides how a node of a compiled graph runs on the GPU.
//
// The engine's compiler (node_kernels.h), `tessel explain`, `tessel bench-op` and `tessel
// codegen` all ask this function and none decides on its own, so what explain prints is what
// the engine runs. The decision is a pure function of the node, its graph's types, the options
// and the target GPU: it compiles nothing and needs no GPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/options.h"
#include "device/device_info.h"
#include "ir/graph.h"
#include "kernels/contraction/contraction.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/schedule.h"

namespace tessel::compiler {

enum class NodeRun {
  kNoKernel,     // moves no data: a view, or a Concat whose producers store into its slices
  kContraction,  // the contraction generator: Tensor Cores (mma.sync, wgmma, halo) or SIMT
  kOpKernel,     // an op kernel (kernels/cuda/op_kernels.h): one generated kernel per node
  kUnsupported,  // no GPU path; `why` says why
};

struct NodePlan {
  NodeRun run = NodeRun::kUnsupported;
  // kUnsupported: why there is no GPU path (without the node's label). kNoKernel: why nothing
  // launches. kContraction on SIMT, and a grouped conv's kOpKernel: why not on Tensor Cores.
  // A QDQ conv that fold-qdq left in float: also "float, not int8: <its int8_refusal>", or
  // "float math, int8 input and output: <...>" where it reads and stores int8 (a depthwise
  // conv's int8 input and fused quantize; "int8 input" or "int8 output" where one side is).
  std::string why;

  // kContraction: the matcher's result (its Contraction, remarks and notes), the epilogue with
  // its store map (channel slices included), the node inputs bound to the epilogue's operands
  // (lowering.h, ContractionSpec::extra_inputs) and the schedule.
  contraction::MatchResult match;
  contraction::Epilogue epilogue;
  std::vector<int> extra_inputs;
  kernels::Schedule schedule;
  bool tuned = false;  // the schedule is a tuning database's (Options::tuning)
  // kOpKernel: where a Concat stored in place in an outer Concat writes (its output is a
  // channel slice of that buffer), and where a depthwise conv reads such a Concat.
  kernels::cuda::OpSlices slices;

  bool tensor_cores() const {
    return run == NodeRun::kContraction && schedule.instruction != kernels::Instruction::kSimt;
  }
  // "mma.sync", "wgmma" or "SIMT" for a contraction; "SIMT" for an op kernel; "" otherwise.
  std::string instruction() const;
  // One line: "Tensor Cores (wgmma) wgmma_128x256x64_s4_w64x256_sk1_r8" ("(mma.sync int8)"
  // for int8, " (<why>)" after it where why is set), "SIMT: <why>",
  // "CUDA kernel" (": <why>" for a grouped conv), "no kernel: <why>", "not supported on the
  // GPU: <why>".
  std::string summary() const;
};

// True for the nodes the contraction generator lowers: tessel.Gemm, and tessel.Conv with group
// 1. Grouped convolutions go to the op kernels: the Tensor Core generator declines them (their
// contiguous channel is a batch dim), and the direct grouped kernel beats the SIMT contraction
// for the few channels per group of depthwise layers.
bool lowered_as_contraction(const ir::Node& n);

// How `n` runs on `target`. Contractions: Tensor Cores with the cost model's default schedule
// (kernels/default_schedule.h) where match() and `options` allow, else SIMT; a Tensor Core
// schedule the generator refuses falls back to SIMT. Requires inferred types. Malformed
// attributes are a UserError naming the node.
NodePlan plan_node(const ir::Graph& g, const ir::Node& n, const Options& options,
                   const device::DeviceInfo& target);

}  // namespace tessel::compiler
