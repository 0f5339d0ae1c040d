#include "cli/op_kernels.h"

#include "passes/group_widening.h"

#include "core/error.h"
#include "device/cuda_api.h"
#include "ir/infer.h"
#include "ir/op_registry.h"

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

}  // namespace

ir::Graph workload_graph(const bench::ConvWorkload& w) {
  TESSEL_USER_CHECK(w.groups >= 1 && w.ci % w.groups == 0 && w.co % w.groups == 0)
      << "workload '" << w.name << "': groups=" << w.groups << " does not divide ci=" << w.ci
      << " and co=" << w.co;
  TESSEL_USER_CHECK(w.oh() > 0 && w.ow() > 0)
      << "workload '" << w.name << "': the kernel window does not fit the padded input";
  ir::Attributes attrs;
  attrs["strides"] = std::vector<int64_t>{w.stride, w.stride};
  attrs["pads"] = std::vector<int64_t>{w.pad, w.pad, w.pad, w.pad};
  attrs["dilations"] = std::vector<int64_t>{w.dilation, w.dilation};
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

device::DeviceInfo planning_target(const std::string& requested) {
  if (!requested.empty()) return device::known_device(requested);
  return device::cuda_available() ? device::device_info(0) : device::known_device("sm_90a");
}

}  // namespace tessel::cli
