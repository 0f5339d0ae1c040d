// The compiler's driver: an imported graph in, an engine plan (runtime/engine_plan.h) out.
//
//   CompiledPlan c = compile_plan(graph, {}, device::known_device("sm_90a"));  // no GPU needed
//   runtime::write_engine_file(c.plan, "model.tsl");
//   runtime::Engine e = runtime::Engine::load(std::move(c.plan));             // on the GPU
#pragma once

#include "compiler/options.h"
#include "device/device_info.h"
#include "ir/graph.h"
#include "runtime/engine_plan.h"

namespace tessel::compiler {

// A plan and what it was compiled from.
struct CompiledPlan {
  runtime::EnginePlan plan;
  ir::Graph graph;  // the compiled graph (after the pass pipeline)
  double compile_ms = 0;
};

// The pass pipeline, the memory plan, plan_node for every node, and every kernel compiled by
// NVRTC for `target`: needs no GPU. A UserError naming the node for any node that cannot be
// lowered, with plan_node's reason.
CompiledPlan compile_plan(const ir::Graph& imported, const Options& options,
                          const device::DeviceInfo& target);

// The same for a graph that already is in the GPU form (what the pass pipeline produces, e.g.
// one tessel.Conv on NHWC operands): no passes run. `tessel bench-op` compiles its workloads so.
CompiledPlan compile_lowered(ir::Graph lowered, const Options& options,
                             const device::DeviceInfo& target);

}  // namespace tessel::compiler
