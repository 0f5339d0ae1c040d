#include "cli/op_kernels.h"

#include <map>

#include "passes/pipeline.h"
#include "compiler/tuning_db.h"

#include "passes/group_widening.h"

#include "core/error.h"
#include "device/cuda_api.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/tessel_epilogue.h"

namespace tessel::cli {
namespace {

ir::Graph one_node(const std::string& op, const std::string& name, const ir::TensorType& x,
                   const ir::TensorType& w, ir::Attributes attrs) {
  ir::Graph g;
  const ir::ValueId xv = g.add_value("x", x);
  const ir::ValueId wv = g.add_value("w", w);
  g.inputs = {xv, wv};
  const ir::ValueId y = g.add_value("y", {});
  g.add_node(op, name, {xv, wv}, {y}, std::move(attrs));
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

// The int8 contraction `op` over graph inputs x, w, [b], s with the requantizing epilogue.
ir::Graph int8_one_node(const std::string& op, const std::string& name, const Shape& x,
                        const Shape& w, int64_t channels, bool bias_relu, ir::Attributes attrs) {
  ir::Graph g;
  const ir::ValueId xv = g.add_value("x", {DType::kI8, x});
  const ir::ValueId wv = g.add_value("w", {DType::kI8, w});
  const ir::ValueId sv = g.add_value("scale", {DType::kF32, {channels}});
  ir::ValueId bv = ir::kNoValue;
  g.inputs = {xv, wv, sv};
  if (bias_relu) {
    bv = g.add_value("bias", {DType::kF32, {channels}});
    g.inputs.push_back(bv);
  }
  const ir::ValueId y = g.add_value("y", {});
  ir::Node& n = g.add_node(op, name, {xv, wv, bv, ir::kNoValue, sv}, {y}, std::move(attrs));
  std::vector<ops::EpilogueStep> steps;
  if (bias_relu) steps.push_back({ops::EpilogueKind::kRelu});
  steps.push_back({ops::EpilogueKind::kQuantize, 1.0});
  ops::write_epilogue(n, steps);
  ops::write_out_dtype(n, DType::kI8);
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

// A conv workload's strides, pads and dilations; UserError where its window does not fit.
ir::Attributes conv_attrs(const bench::ConvWorkload& w) {
  TESSEL_USER_CHECK(w.oh() > 0 && w.ow() > 0)
      << "workload '" << w.name << "': the kernel window does not fit the padded input";
  ir::Attributes attrs;
  attrs["strides"] = std::vector<int64_t>{w.stride, w.stride};
  attrs["pads"] = std::vector<int64_t>{w.pad, w.pad, w.pad, w.pad};
  attrs["dilations"] = std::vector<int64_t>{w.dilation, w.dilation};
  return attrs;
}

}  // namespace

ir::Graph int8_workload_graph(const bench::ConvWorkload& w) {
  TESSEL_USER_CHECK(w.groups == 1) << "workload '" << w.name << "': groups=" << w.groups
                                   << ": the int8 kernels take group 1 only";
  return int8_one_node("tessel.Conv", w.name, {w.n, w.h, w.w, w.ci}, {w.co, w.kh, w.kw, w.ci},
                       w.co, true, conv_attrs(w));
}

ir::Graph int8_workload_graph(const bench::GemmWorkload& w) {
  // bench/int8_reference.h: A (m, k) and B (n, k), whatever layout the row names.
  return int8_one_node("tessel.Gemm", w.name, {w.m, w.k}, {w.n, w.k}, w.n, false, {});
}

ir::Graph workload_graph(const bench::ConvWorkload& w) {
  TESSEL_USER_CHECK(w.groups >= 1 && w.ci % w.groups == 0 && w.co % w.groups == 0)
      << "workload '" << w.name << "': groups=" << w.groups << " does not divide ci=" << w.ci
      << " and co=" << w.co;
  ir::Attributes attrs = conv_attrs(w);
  // Narrow groups as the engine runs them: widened (passes/group_widening.h), the weights
  // block-diagonal (bench-op widens the workload's weights to match).
  const int64_t f = passes::group_widening(w.groups, w.co, w.ci / w.groups);
  attrs["group"] = int64_t{w.groups / f};
  return one_node("tessel.Conv", w.name, {DType::kF16, {w.n, w.h, w.w, w.ci}},
                  {DType::kF16, {w.co, w.kh, w.kw, f * w.ci / w.groups}}, std::move(attrs));
}

ir::Graph workload_graph(const bench::GemmWorkload& w) {
  const bool trans_a = w.layout == bench::GemmLayout::kTN;
  const bool trans_b = w.layout == bench::GemmLayout::kNT;
  ir::Attributes attrs;
  attrs["trans_a"] = int64_t{trans_a};
  attrs["trans_b"] = int64_t{trans_b};
  const Shape a = trans_a ? Shape{w.k, w.m} : Shape{w.m, w.k};
  const Shape b = trans_b ? Shape{w.n, w.k} : Shape{w.k, w.n};
  return one_node("tessel.Gemm", w.name, {DType::kF16, a}, {DType::kF16, b}, std::move(attrs));
}

compiler::NodePlan plan_workload(const ir::Graph& g, const compiler::Options& options,
                                 const device::DeviceInfo& target) {
  TESSEL_ICHECK(g.nodes.size() == 1) << "a workload graph has one node";
  return compiler::plan_node(g, g.nodes[0], options, target);
}

std::vector<UniqueContraction> unique_contractions(const PlannedModel& model,
                                                   const device::DeviceInfo& target) {
  const ir::Graph& g = model.graph;
  std::vector<UniqueContraction> out;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    compiler::NodePlan plan = compiler::plan_node(g, g.nodes[i], model.options, target);
    if (plan.run != compiler::NodeRun::kContraction || !plan.tensor_cores()) continue;
    std::string key = compiler::tuning_key(*plan.match.contraction, plan.epilogue);
    auto [at, fresh] = index.try_emplace(key, out.size());
    if (!fresh) {
      ++out[at->second].nodes;
      continue;
    }
    out.push_back({static_cast<int>(i), std::move(plan), std::move(key), 1});
  }
  return out;
}

PlannedModel lower_for_planning(const ModelOptions& model, const std::string& precision) {
  PlannedModel m;
  m.options.precision = parse_precision(precision);
  if (!model.tuning_db.empty())
    m.options.tuning =
        std::make_shared<const compiler::TuningDb>(compiler::TuningDb::load(model.tuning_db));
  m.graph = passes::run_passes(load_model(model), passes::gpu_pipeline({.precision = m.options.precision}));
  return m;
}

device::DeviceInfo planning_target(const std::string& requested) {
  if (!requested.empty()) return device::known_device(requested);
  return device::cuda_available() ? device::device_info(0) : device::known_device("sm_90a");
}

}  // namespace tessel::cli
