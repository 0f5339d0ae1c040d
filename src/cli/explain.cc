// `tessel explain`: runs the GPU pass pipeline on a model and says, per node of the compiled
// graph, how the engine will run it: a contraction on Tensor Cores or SIMT (with the matcher's
// remarks), an op kernel, or nothing (with the reason), and why each layout change is there.
// The decisions are the engine's own (node_kernels.h: lowered_as_contraction, plan_contraction;
// op_kernels.h: can_emit_op), made for the GPU present or an H100 when there is none, so this
// works on a machine without a GPU and compiles nothing.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "codegen/cuda/op_kernels.h"
#include "core/error.h"
#include "ops/tessel_epilogue.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "runtime/cuda_engine/node_kernels.h"

namespace tessel::cli {
namespace {

namespace eng = runtime::cuda_engine;

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

// "Tensor Cores (wgmma) <schedule>" or "SIMT: <why>", then the matcher's remarks, indented.
std::string explain_contraction(const ir::Graph& g, const ir::Node& n,
                                const eng::EngineOptions& options,
                                const tune::DeviceInfoLite& device, Summary& sum) {
  const eng::ContractionPlan plan = eng::plan_contraction(g, n, options, device);
  std::string how;
  if (plan.error) {
    ++sum.unsupported;
    how = "not supported on the GPU: " + *plan.error;
  } else if (plan.schedule.instruction == tune::Instruction::kSimt) {
    ++sum.simt;
    how = "SIMT: " + plan.simt_reason;
  } else {
    ++sum.tensor_cores;
    how = std::string("Tensor Cores (") +
          (plan.schedule.instruction == tune::Instruction::kWgmma ? "wgmma" : "mma.sync") + ") " +
          plan.schedule.name();
  }
  if (!plan.error) {
    how += "\n    epilogue: " + plan.epilogue.str();
    const DType c_dtype =
        plan.match.contraction ? plan.match.contraction->maps.c.dtype : plan.epilogue.out_dtype;
    if (fuses_other_nodes(plan.epilogue, c_dtype)) ++sum.fused_epilogues;
  }
  // The matcher's remarks explain why the GEMM kernels cannot take a node; where the halo
  // kernel took it anyway (an NCHW stem), they describe a path not taken.
  if (plan.schedule.mainloop != tune::Mainloop::kHalo)
    for (const contraction::Remark& r : plan.match.remarks) how += "\n    note: " + r.text;
  return how;
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
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->model);
  cmd->add_option("--precision", o->precision, "GPU storage precision: fp16 or fp32")
      ->check(CLI::IsMember({"fp16", "fp32"}));
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    ir::Graph g = load_model(o->model);
    eng::EngineOptions options;
    options.precision = o->precision == "fp32" ? passes::Precision::kFp32 : passes::Precision::kFp16;
    passes::CompileOptions copts;
    copts.precision = options.precision;
    g = passes::run_passes(std::move(g), passes::gpu_pipeline(copts));

    std::string arch;
    const tune::DeviceInfoLite device = target_device(&arch);
    std::printf("target %s (%d SMs), precision %s\n", arch.c_str(), device.sm_count,
                o->precision.c_str());
    const std::vector<int> producers = g.producers();
    const std::vector<std::vector<int>> users = g.users();
    Summary sum;
    for (const ir::Node& n : g.nodes) {
      ++sum.nodes;
      std::string how;
      if (eng::lowered_as_contraction(n)) {
        how = explain_contraction(g, n, options, device, sum) + folded_layouts(g, n);
      } else if (const std::optional<std::string> why = codegen::cuda::can_emit_op(g, n)) {
        ++sum.unsupported;
        how = "not supported on the GPU: " + *why;
      } else if (passes::is_view_alias(g, n) ||
                 (n.op == "Concat" &&
                  passes::in_place_inputs(g, n).size() == n.inputs.size())) {
        how = "no kernel: its output aliases its input's memory (memory plan)";
      } else {
        ++sum.other_kernels;
        how = "CUDA kernel";
      }
      if (n.op == "Transpose") {
        ++sum.layout_changes;
        how += "\n    layout: " + explain_transpose(g, n, producers, users);
      }
      const std::string type = n.outputs.empty() ? "-" : g.type(n.outputs[0]).str();
      std::printf("%-24s %-18s %-22s %s\n", n.name.c_str(), n.op.c_str(), type.c_str(), how.c_str());
    }
    std::printf(
        "summary: %d nodes, %d on Tensor Cores, %d SIMT contractions, %d other kernels, "
        "%d unsupported, %d layout changes, %d fused epilogues\n",
        sum.nodes, sum.tensor_cores, sum.simt, sum.other_kernels, sum.unsupported,
        sum.layout_changes, sum.fused_epilogues);
    return 0;
  };
}

}  // namespace tessel::cli
