#include "compiler/predict.h"

#include <algorithm>

#include "compiler/plan_node.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "kernels/arch.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/estimate.h"
#include "ops/flops.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

int64_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  const ir::TensorType& t = g.type(v);
  return numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
}

// DRAM traffic against arithmetic, the slower wins; one launch on top.
double roofline_us(int64_t bytes, int64_t flops, double flops_per_clk,
                   const device::DeviceInfo& target) {
  const kernels::ArchFacts& f = kernels::arch_facts(target);
  const double sms = target.sm_count;
  const double dram = static_cast<double>(bytes) / (f.dram_bytes_per_clk * sms);
  const double math = flops_per_clk > 0 ? static_cast<double>(flops) / (flops_per_clk * sms) : 0;
  return (kernels::launch_cycles(target) + std::max(dram, math)) / f.clock_mhz;
}

}  // namespace

NodePrediction predict_node(const ir::Graph& g, int node, const NodePlan& plan,
                            const device::DeviceInfo& target, const TuningDb* tuning) {
  const ir::Node& n = g.nodes.at(static_cast<size_t>(node));
  NodePrediction p;
  p.node = node;
  p.flops = ops::node_flops(g, n);
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue) p.bytes += value_bytes(g, v);
  for (ir::ValueId v : n.outputs) p.bytes += value_bytes(g, v);
  const kernels::ArchFacts& f = kernels::arch_facts(target);
  switch (plan.run) {
    case NodeRun::kUnsupported:
      TESSEL_USER_ERROR() << n.label() << ": " << plan.why;
    case NodeRun::kNoKernel:
      p.model = "none";
      p.bytes = 0;
      return p;
    case NodeRun::kOpKernel:
      p.model = "bandwidth";
      p.microseconds = roofline_us(p.bytes, p.flops, f.fma_flops_per_clk, target);
      return p;
    case NodeRun::kContraction:
      break;
  }
  if (plan.schedule.mainloop == kernels::Mainloop::kHalo) {
    p.model = "bandwidth";
    p.microseconds = roofline_us(p.bytes, p.flops, f.mma_flops_per_clk, target);
    return p;
  }
  p.model = "cost model";
  p.microseconds = kernels::estimate(*plan.match.contraction, plan.schedule, target,
                                     contraction::read_bytes_per_output(plan.epilogue))
                       .microseconds;
  // A contraction the tuning database measured on this GPU, with the schedule it runs: the
  // measurement is the prediction, and it calibrates the cost model for the others.
  if (const TuningRecord* r = plan.tuned && tuning
                                  ? tuning->find(tuning_key(*plan.match.contraction, plan.epilogue),
                                                 TuningDb::device_key(target))
                                  : nullptr;
      r && p.microseconds > 0) {
    p.estimated_us = p.microseconds;
    p.microseconds = r->microseconds;
    p.model = "measured";
  }
  return p;
}

void calibrate(ModelPrediction& m) {
  std::vector<double> ratios;
  for (const NodePrediction& p : m.nodes)
    if (p.model == "measured") ratios.push_back(p.microseconds / p.estimated_us);
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    m.calibration = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0;
    m.calibrated_from = static_cast<int>(n);
    for (NodePrediction& p : m.nodes) {
      if (p.model != "cost model") continue;
      p.microseconds *= m.calibration;
      p.model = "cost model, calibrated";
    }
  }
  m.microseconds = 0;
  for (const NodePrediction& p : m.nodes) m.microseconds += p.microseconds;
}

ModelPrediction predict(const ir::Graph& g, const Options& options, const device::DeviceInfo& target) {
  ModelPrediction m;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodePlan plan = plan_node(g, g.nodes[i], options, target);
    m.nodes.push_back(predict_node(g, static_cast<int>(i), plan, target, options.tuning.get()));
    if (plan.run == NodeRun::kContraction && plan.schedule.split_k > 1)
      m.workspace_bytes += static_cast<int64_t>(
          kernels::cuda::emit(*plan.match.contraction, plan.epilogue, plan.schedule).workspace_bytes);
  }
  calibrate(m);
  m.arena_bytes = passes::plan_memory(g).arena_bytes;
  for (const ir::Value& v : g.values)
    if (v.is_constant()) m.constant_bytes += static_cast<int64_t>(v.data->nbytes());
  return m;
}

}  // namespace tessel::compiler
