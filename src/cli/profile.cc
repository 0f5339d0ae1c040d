// `tessel profile`: the device time of each kernel of a model's engine, with its work, rate and
// share of the whole, as a table and optionally a Chrome trace (chrome://tracing, Perfetto).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gpu_engine.h"
#include "compiler/predict.h"
#include "core/error.h"
#include "device/cuda_api.h"
#include "runtime/engine_report.h"

namespace tessel::cli {
namespace {

namespace eng = runtime;

// One complete ("X") event per launch, laid end to end on one track, with the table's fields.
nlohmann::json chrome_trace(const eng::ProfileReport& r) {
  nlohmann::json events = nlohmann::json::array();
  for (const eng::KernelRow& row : r.rows) {
    const eng::PlanLaunch& l = *row.launch;
    nlohmann::json args = {{"index", row.index},     {"op", l.op},
                           {"entry", l.entry},       {"time_us", row.us},
                           {"percent", row.percent}, {"flops", l.flops},
                           {"tflops", row.tflops},   {"bytes", l.bytes},
                           {"gbps", row.gbps},       {"instruction", l.instruction},
                           {"schedule", l.schedule}, {"epilogue", l.epilogue},
                           {"operand_dtype", l.operand_dtype},
                           {"predicted_us", l.predicted_us},
                           {"analytical_us", l.analytical_us},
                           {"grid", l.grid},         {"block", l.block},
                           {"smem_bytes", l.smem_bytes}};
    if (row.percent_of_peak) args["percent_of_peak"] = *row.percent_of_peak;
    events.push_back({{"name", l.node},
                      {"cat", l.op},
                      {"ph", "X"},
                      {"ts", row.start_us},
                      {"dur", row.us},
                      {"pid", 0},
                      {"tid", 0},
                      {"args", args}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
}

}  // namespace

Action add_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Time each kernel of a model on the GPU");
  struct Opts {
    GpuEngineOptions gpu;
    int reps = 20;
    uint64_t seed = 0;
    std::string trace;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->gpu.model, "ONNX model (.onnx), textual IR (.tir) or engine (.tsl)");
  add_tuning_db_option(*cmd, o->gpu.model);
  CLI::Option* precision = add_precision_option(*cmd, o->gpu.precision);
  cmd->add_option("--reps", o->reps, "timed replays per kernel (the median is reported)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "seed for the random inputs");
  cmd->add_option("--trace", o->trace, "write a Chrome trace (JSON) of the kernels here");
  return [cmd, o, precision]() {
    if (!cmd->parsed()) return -1;
    o->gpu.precision_given = precision->count() > 0;
    ProgressBar progress;
    Session session = open_gpu_session(o->gpu, progress);
    eng::Engine& engine = *session.engine();
    const eng::EnginePlan& plan = engine.plan();
    const int64_t batch = run_batch(o->gpu, session);
    engine.run(random_inputs(session, o->seed, batch));
    const std::vector<float> launches = engine.profile_launches(o->reps, batch);
    const std::vector<float> replay = engine.time_replays(/*warmup=*/5, o->reps, batch);
    const device::DeviceInfo device = device::device_info();
    const eng::ProfileReport report = eng::make_profile_report(
        *plan.profile_for(batch), launches, replay[replay.size() / 2], device);
    std::printf("model %s on %s: %s, %s, batch %lld%s\n", o->gpu.model.path.c_str(),
                device.name.c_str(), engine_summary(engine.stats()).c_str(),
                precision_name(plan.precision), static_cast<long long>(batch),
                dynamic_batch_note(session, batch).c_str());
    std::fputs(eng::format_profile(report).c_str(), stdout);
    // The replay the predictor expects: its launches plus its per-launch gap (compiler/predict.h).
    const bool cold = compiler::cold_weights(engine.stats().constant_bytes, device);
    double predicted_us = 0;
    for (const eng::KernelRow& row : report.rows)
      predicted_us += row.predicted_us + compiler::launch_gap_us(row.predicted_us,
                                                                 !row.launch->schedule.empty(), cold);
    if (report.replay_us > 0 && !report.rows.empty())
      std::printf("predicted replay (tessel predict): %.2f us, the launches and their gaps; %+.1f%% of the replay\n",
                  predicted_us, 100.0 * (predicted_us - report.replay_us) / report.replay_us);
    if (!o->trace.empty()) {
      std::ofstream f(o->trace);
      TESSEL_USER_CHECK(f.good()) << o->trace << ": cannot open for writing";
      f << chrome_trace(report).dump(1) << "\n";
      std::printf("wrote %s\n", o->trace.c_str());
    }
    return 0;
  };
}

}  // namespace tessel::cli
