// A benchmark workload (conv2d or GEMM) as the node the engine would compile for it, and
// plan_node's decision for that node: `tessel bench-op` and `tessel codegen` ask the compiler
// exactly as the engine does (compiler/plan_node.h), so they run what a model would run.
#pragma once

#include <string>
#include <vector>

#include "bench/workloads.h"
#include "cli/commands.h"
#include "compiler/plan_node.h"
#include "device/device_info.h"
#include "ir/graph.h"

namespace tessel::cli {

// fp16 operands laid out as the workload says, X and W (A and W) as graph inputs, one
// tessel.Conv (NHWC, OHWI weights, any groups) or tessel.Gemm (trans_a / trans_b from the
// layout) with types inferred. A malformed workload is a UserError naming it.
ir::Graph workload_graph(const bench::ConvWorkload& w);
ir::Graph workload_graph(const bench::GemmWorkload& w);

// The int8 form of a workload as bench-op --int8 measures it (bench/int8_reference.h): x (a) and
// w int8 as graph inputs, then per output channel y = int8(round(max(acc * scale + bias, 0)))
// for a conv (scale and bias f32 graph inputs), y = int8(round(alpha * acc)) for a GEMM (scale
// the alpha per output column). The int8 tessel.Conv / tessel.Gemm fold-qdq writes, with the
// epilogue [relu,] quantize(1), out_dtype i8. A grouped or transposed workload is a UserError.
ir::Graph int8_workload_graph(const bench::ConvWorkload& w);
ir::Graph int8_workload_graph(const bench::GemmWorkload& w);

// plan_node on the workload graph's one node.
compiler::NodePlan plan_workload(const ir::Graph& g, const compiler::Options& options,
                                 const device::DeviceInfo& target);

// A model after the GPU pass pipeline, and the compiler options it is planned with: the
// precision and, with --db, the tuning database. What explain, predict and tune plan node by
// node (the engine's compiler runs the same pipeline through the api).
struct PlannedModel {
  ir::Graph graph;
  compiler::Options options;
};
PlannedModel lower_for_planning(const ModelOptions& model, const std::string& precision);

// The model's Tensor Core contractions, one per tuning key (compiler::tuning_key), in graph
// order: the first node with the key, its plan, and how many of the model's nodes share the
// key. What tune measures and tune --replay looks up.
struct UniqueContraction {
  int node = 0;
  compiler::NodePlan plan;
  std::string key;
  int nodes = 0;
};
std::vector<UniqueContraction> unique_contractions(const PlannedModel& model,
                                                   const device::DeviceInfo& target);

// The GPU to plan for: a known device named by `requested` (UserError for an unknown one),
// else the GPU present, else an H100 (sm_90a), so that explain and codegen work without a GPU.
device::DeviceInfo planning_target(const std::string& requested = "");

}  // namespace tessel::cli
