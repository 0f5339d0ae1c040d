// `tessel explain`: runs the GPU pass pipeline on a model and says, per node of the compiled
// graph, how the engine will run it: a contraction on Tensor Cores or SIMT (with the matcher's
// remarks), an op kernel, or nothing (with the reason), and why each layout change is there.
// The decisions are plan_node's (compiler/plan_node.h), the function the engine's compiler
// asks, made for the GPU present or an H100 when there is none, so this works on a machine
// without a GPU and compiles nothing.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fstream>

#include "cli/commands.h"
#include "compiler/profiles.h"
#include "cli/op_kernels.h"
#include "compiler/plan_node.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "ops/tessel_epilogue.h"
#include "passes/pipeline.h"

namespace tessel::cli {
namespace {

struct Summary {
  int nodes = 0;
  int tensor_cores = 0;
  int simt = 0;
  int other_kernels = 0;
  int unsupported = 0;
  int layout_changes = 0;
  int fused_epilogues = 0;
};

// True when `v` is a graph input, or is computed from one by Casts only (choose-precision
// casts the fp32 inputs to fp16 before the layout Transpose).
bool from_graph_input(const ir::Graph& g, const std::vector<int>& producers, ir::ValueId v) {
  for (;;) {
    if (std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end()) return true;
    const int p = producers[v];
    if (p < 0 || g.nodes[p].op != "Cast") return false;
    v = g.nodes[p].inputs.at(0);
  }
}

// True when `v` is a graph output, or reaches one through Casts only (the cast back to fp32).
bool to_graph_output(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v) {
  for (;;) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return true;
    if (users[v].size() != 1 || g.nodes[users[v][0]].op != "Cast") return false;
    v = g.nodes[users[v][0]].outputs.at(0);
  }
}

// An epilogue fuses work of other nodes when it does more than the contraction's own bias:
// an activation, a scale, a residual add, a store other than the plain one, or a Cast.
bool fuses_other_nodes(const contraction::Epilogue& e, DType c_dtype) {
  const bool steps = std::any_of(e.steps.begin(), e.steps.end(), [](const contraction::EpilogueStep& s) {
    return s.kind != contraction::EpilogueOpKind::kBias;
  });
  return steps || e.store.kind != contraction::StoreMap::Kind::kPlain || e.out_dtype != c_dtype;
}

// The graph-edge layout and dtype changes a conv does itself (fuse.cc): "" when none.
std::string folded_layouts(const ir::Graph& g, const ir::Node& n) {
  std::string s;
  if (n.op != "tessel.Conv") return s;
  if (ops::read_nchw_input(n)) {
    s += "\n    layout: reads the NCHW " + std::string(dtype_name(g.type(n.inputs.at(0)).dtype)) +
         " input itself (graph edge folded into the conv)";
  }
  if (ops::read_store(n).nchw()) {
    s += "\n    layout: stores NCHW " + std::string(dtype_name(g.type(n.outputs.at(0)).dtype)) +
         " itself (graph edge folded into the store)";
  }
  return s;
}

// The plan's summary line, then for a contraction its epilogue and the matcher's remarks.
std::string explain_node(const ir::Graph& g, const ir::Node& n, const compiler::NodePlan& plan,
                         Summary& sum) {
  std::string how = plan.summary();
  switch (plan.run) {
    case compiler::NodeRun::kUnsupported: ++sum.unsupported; return how;
    case compiler::NodeRun::kNoKernel: return how;
    case compiler::NodeRun::kOpKernel: ++sum.other_kernels; return how;
    case compiler::NodeRun::kContraction: break;
  }
  ++(plan.tensor_cores() ? sum.tensor_cores : sum.simt);
  how += "\n    epilogue: " + plan.epilogue.str();
  if (fuses_other_nodes(plan.epilogue, plan.match.contraction->maps.c.dtype)) ++sum.fused_epilogues;
  // The matcher's remarks explain why the GEMM kernels cannot take a node, or read it narrowly;
  // where the halo kernel took it anyway (a stem), they describe a path not taken.
  if (plan.schedule.mainloop != kernels::Mainloop::kHalo)
    for (const contraction::Remark& r : plan.match.remarks) how += "\n    note: " + r.text;
  return how + folded_layouts(g, n);
}

const char* run_name(const compiler::NodePlan& p) {
  switch (p.run) {
    case compiler::NodeRun::kNoKernel: return "none";
    case compiler::NodeRun::kContraction: return p.tensor_cores() ? "tensor_cores" : "simt";
    case compiler::NodeRun::kOpKernel: return "op_kernel";
    case compiler::NodeRun::kUnsupported: return "unsupported";
  }
  return "unsupported";
}

std::string explain_transpose(const ir::Graph& g, const ir::Node& n, const std::vector<int>& producers,
                              const std::vector<std::vector<int>>& users) {
  if (n.has_attr("layout_reason")) return n.get_string("layout_reason", "");
  const bool edge = from_graph_input(g, producers, n.inputs.at(0)) ||
                    to_graph_output(g, users, n.outputs.at(0));
  return edge ? "graph edge: NCHW<->NHWC" : "no reason recorded";
}

}  // namespace

Action add_explain(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "explain", "Say how each node of the compiled model runs on the GPU (no GPU needed)");
  struct Opts {
    ModelOptions model;
    std::string precision = "fp16";
    std::string target;
    std::string json;
  };
  auto o = std::make_shared<Opts>();
  o->model.takes_range = true;
  add_model_options(*cmd, o->model);
  cmd->add_option("--opt-batch", o->model.opt_batch,
                  "with a batch range: the batch whose plan is explained (default: the largest)");
  add_profile_every_option(*cmd, o->model);
  add_tuning_db_option(*cmd, o->model);
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--target", o->target,
                  "plan for this GPU: sm_90a (H100) or sm_80 (A100); default: the GPU present, "
                  "else sm_90a");
  cmd->add_option("--json", o->json,
                  "also write each node's decision (node, op, run, instruction, schedule, why) "
                  "as JSON here");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    PlannedModel planned = lower_for_planning(o->model, o->precision);
    const ir::Graph& g = planned.graph;
    const compiler::Options& options = planned.options;

    const device::DeviceInfo device = planning_target(o->target);
    std::printf("target %s (%d SMs), precision %s\n", device.arch().c_str(), device.sm_count,
                o->precision.c_str());
    const BatchRange range = model_api_options(o->model).batch_range;
    if (!range.empty()) {
      std::string list;
      for (int64_t b : compiler::profile_batches({range.min, range.max, range.opt}, range.every))
        list += (list.empty() ? "" : ", ") + std::to_string(b);
      const std::string every =
          range.every > 0 ? ", and every multiple of " + std::to_string(range.every) : "";
      std::printf(
          "dynamic batch %lld:%lld: profiles %s (the range's ends, the opt batch and the "
          "powers of two between%s); below, the plan of the opt batch %lld\n",
          static_cast<long long>(range.min), static_cast<long long>(range.max), list.c_str(),
          every.c_str(), static_cast<long long>(range.opt));
    }
    const std::vector<int> producers = g.producers();
    const std::vector<std::vector<int>> users = g.users();
    Summary sum;
    nlohmann::json decisions = nlohmann::json::array();
    for (const ir::Node& n : g.nodes) {
      ++sum.nodes;
      const compiler::NodePlan plan = compiler::plan_node(g, n, options, device);
      std::string how = explain_node(g, n, plan, sum);
      if (n.op == "Transpose") {
        ++sum.layout_changes;
        how += "\n    layout: " + explain_transpose(g, n, producers, users);
      }
      const std::string type = n.outputs.empty() ? "-" : g.type(n.outputs[0]).str();
      std::printf("%-24s %-18s %-22s %s\n", n.name.c_str(), n.op.c_str(), type.c_str(), how.c_str());
      decisions.push_back({{"node", n.name},
                           {"op", n.op},
                           {"run", run_name(plan)},
                           {"instruction", plan.instruction()},
                           {"schedule", plan.run == compiler::NodeRun::kContraction
                                            ? plan.schedule.name()
                                            : std::string()},
                           {"why", plan.why}});
    }
    std::printf(
        "summary: %d nodes, %d on Tensor Cores, %d SIMT contractions, %d other kernels, "
        "%d unsupported, %d layout changes, %d fused epilogues\n",
        sum.nodes, sum.tensor_cores, sum.simt, sum.other_kernels, sum.unsupported,
        sum.layout_changes, sum.fused_epilogues);
    if (!o->json.empty()) {
      std::ofstream f(o->json);
      TESSEL_USER_CHECK(f.good()) << o->json << ": cannot open for writing";
      f << decisions.dump(1) << "\n";
    }
    return 0;
  };
}

}  // namespace tessel::cli
