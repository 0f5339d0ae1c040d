// `tessel predict`: before running, the predicted time of each kernel of a model's engine, the
// total (one replay of its CUDA graph) and the engine's device memory, for the GPU present or
// one that is not (--target sm_80: an A100). The numbers are compiler::predict's (the cost
// model of the default schedules and a roofline for the other kernels, corrected by the learned
// factor of predict_fit.h; the JSON form has both, and each launch's gap); `tessel profile`
// prints them beside the measured times, so the error is visible.
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "compiler/plan_node.h"
#include "compiler/tuning_db.h"
#include "compiler/predict.h"
#include "core/error.h"
#include "passes/pipeline.h"

namespace tessel::cli {

Action add_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "predict", "Predict each kernel's time and the engine's device memory before running (no GPU needed)");
  struct Opts {
    ModelOptions model;
    std::string precision = "fp16";
    std::string target;
    std::string json;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->model);
  add_tuning_db_option(*cmd, o->model);
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--target", o->target,
                  "predict for this GPU: sm_90a (H100) or sm_80 (A100); default: the GPU present, "
                  "else sm_90a");
  cmd->add_option("--json", o->json, "also write the prediction (per node and total) as JSON here");
  cmd->add_flag("--total-only", o->quiet, "print the totals only");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    PlannedModel planned = lower_for_planning(o->model, o->precision);
    const ir::Graph& g = planned.graph;
    const compiler::Options& options = planned.options;
    const device::DeviceInfo device = planning_target(o->target);
    const compiler::ModelPrediction m = compiler::predict(g, options, device);

    std::printf("target %s (%d SMs), precision %s\n", device.arch().c_str(), device.sm_count,
                o->precision.c_str());
    nlohmann::json nodes = nlohmann::json::array();
    int kernels = 0;
    for (const compiler::NodePrediction& p : m.nodes) {
      const ir::Node& n = g.nodes[static_cast<size_t>(p.node)];
      if (p.model == "none") continue;
      ++kernels;
      if (!o->quiet)
        std::printf("%-28s %-18s %9.2f us  %10.3f GFLOP %9.2f MB  (%s)\n", n.name.c_str(),
                    n.op.c_str(), p.microseconds, p.flops * 1e-9, p.bytes * 1e-6, p.model.c_str());
      nodes.push_back({{"node", n.name},
                       {"op", n.op},
                       {"microseconds", p.microseconds},
                       {"analytical_us", p.analytical_us},
                       {"operand_dtype", p.operand_dtype},
                       {"gap_us", compiler::launch_gap_us(p.microseconds, p.contraction, m.cold_weights)},
                       {"flops", p.flops},
                       {"bytes", p.bytes},
                       {"model", p.model},
                       {"ctas", p.launch.ctas},
                       {"threads", p.launch.threads},
                       {"smem_bytes", p.launch.smem_bytes},
                       {"schedule", p.launch.schedule},
                       {"epilogue", p.launch.epilogue},
                       {"entry", p.launch.entry}});
    }
    if (m.calibrated_from > 0)
      std::printf("tuning database: %d contractions measured; the cost model's other "
                  "predictions scaled by their median measured/predicted ratio %.2f\n",
                  m.calibrated_from, m.calibration);
    std::printf("total: %d kernels, %.3f ms predicted per run; device memory %.1f MiB "
                "(activations %.1f, weights %.1f, split-K workspace %.1f)\n",
                kernels, m.microseconds * 1e-3, m.device_bytes() / 1048576.0,
                m.arena_bytes / 1048576.0, m.constant_bytes / 1048576.0,
                m.workspace_bytes / 1048576.0);
    if (!o->json.empty()) {
      std::ofstream f(o->json);
      TESSEL_USER_CHECK(f.good()) << o->json << ": cannot open for writing";
      f << nlohmann::json{{"target", device.arch()},
                          {"precision", o->precision},
                          {"microseconds", m.microseconds},
                          {"device_bytes", m.device_bytes()},
                          {"arena_bytes", m.arena_bytes},
                          {"constant_bytes", m.constant_bytes},
                          {"workspace_bytes", m.workspace_bytes},
                          {"nodes", nodes}}
               .dump(1)
        << "\n";
    }
    return 0;
  };
}

}  // namespace tessel::cli
