// `tessel bench`: the latency, throughput and device memory of a whole model on the GPU, from
// an .onnx/.tir model (compiled first) or a .tsl engine file, on seeded random inputs.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gpu_engine.h"
#include "core/error.h"
#include "device/cuda_api.h"
#include "runtime/engine_report.h"

namespace tessel::cli {

namespace eng = runtime;

Action add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Time a whole model on the GPU: latency, throughput, device memory");
  struct Opts {
    GpuEngineOptions gpu;
    int warmup = 20, reps = 200;
    uint64_t seed = 0;
    std::string json;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->gpu.model,
                    "ONNX model (.onnx), textual IR (.tir) or engine (.tsl); --batch N runs batch "
                    "N of a dynamic engine (default: its opt batch)");
  add_tuning_db_option(*cmd, o->gpu.model);
  CLI::Option* precision = add_precision_option(*cmd, o->gpu.precision);
  cmd->add_option("--warmup", o->warmup, "untimed replays first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--reps", o->reps, "timed replays of the CUDA graph")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "seed for the random inputs");
  cmd->add_option("--json", o->json, "also write the results as JSON here");
  return [cmd, o, precision]() {
    if (!cmd->parsed()) return -1;
    o->gpu.precision_given = precision->count() > 0;
    const bool from_file = is_engine_file(o->gpu.model.path);
    // The driver's view of memory use needs the context the engine will use; taking the first
    // reading after opening it keeps the context's own memory out of the difference.
    std::string why;
    const bool has_gpu = device::cuda_available(&why);
    const device::MemoryInfo before =
        has_gpu ? device::memory_info() : device::MemoryInfo{};
    ProgressBar progress;
    Session session = open_gpu_session(o->gpu, progress);
    eng::Engine& engine = *session.engine();
    const device::MemoryInfo after = device::memory_info();
    const eng::EnginePlan& plan = engine.plan();

    const int64_t batch = run_batch(o->gpu, session);
    engine.run(random_inputs(session, o->seed, batch));
    const eng::LatencyStats lat =
        eng::latency_stats(engine.time_replays(o->warmup, o->reps, batch), batch);
    const eng::EngineStats& st = engine.stats();
    const int64_t driver_delta =
        static_cast<int64_t>(before.free) - static_cast<int64_t>(after.free);

    const std::string origin =
        from_file ? "loaded from an engine file"
                  : "compiled in " + std::to_string(std::lround(session.compile_ms())) + " ms";
    std::printf("model %s: %s, %s, batch %lld%s, %s\n", o->gpu.model.path.c_str(),
                engine_summary(st).c_str(), precision_name(plan.precision),
                static_cast<long long>(batch), dynamic_batch_note(session, batch).c_str(),
                origin.c_str());
    std::printf(
        "latency     median %.3f ms, p90 %.3f ms (%d replays of one CUDA graph after %d warm-up)\n",
        lat.median_ms, lat.p90_ms, lat.reps, o->warmup);
    std::printf("throughput  %.1f items/s\n", lat.throughput_per_s);
    std::printf(
        "memory      %s allocated by the engine (arena %s, constants %s, inputs and outputs "
        "%s, workspaces %s); the driver reports %s more in use\n",
        human_bytes(st.device_bytes).c_str(), human_bytes(st.arena_bytes).c_str(),
        human_bytes(st.constant_bytes).c_str(), human_bytes(st.io_bytes).c_str(),
        human_bytes(st.workspace_bytes).c_str(), human_bytes(driver_delta).c_str());
    if (!o->json.empty()) {
      nlohmann::json j;
      j["model"] = o->gpu.model.path;
      j["device"] = device::device_info().name;
      j["precision"] = precision_name(plan.precision);
      j["batch"] = batch;
      j["batch_range"] = {plan.batch.min, plan.batch.max};
      j["profiles"] = session.profiles();
      j["median_ms"] = lat.median_ms;
      j["p90_ms"] = lat.p90_ms;
      j["throughput_per_s"] = lat.throughput_per_s;
      j["reps"] = lat.reps;
      j["warmup"] = o->warmup;
      j["peak_device_bytes"] = st.device_bytes;
      j["driver_used_delta_bytes"] = driver_delta;
      j["compile_ms"] = from_file ? nlohmann::json(nullptr) : nlohmann::json(session.compile_ms());
      std::ofstream f(o->json);
      TESSEL_USER_CHECK(f.good()) << o->json << ": cannot open for writing";
      f << j.dump(2) << "\n";
    }
    return 0;
  };
}

}  // namespace tessel::cli
