// `tessel run`: runs a model on inputs from .npy files or seeded random data, on the CPU
// reference executor or as a GPU engine (runtime/cuda_engine) compiled from the model or loaded
// from a .tsl engine file, writes the outputs as .npy and prints a summary and the time.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "cli/commands.h"
#include "cli/gpu_engine.h"
#include "core/error.h"
#include "core/npy.h"

namespace tessel::cli {
namespace {

std::string sanitize(const std::string& name) {
  std::string r;
  for (char c : name) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return r;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a model and print or save its outputs");
  struct Opts {
    GpuEngineOptions gpu;
    std::vector<std::string> inputs;
    uint64_t seed = 0;
    std::string device = "cpu";
    std::string output_dir;
    int repeat = 1;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->gpu.model,
                    "ONNX model (.onnx), textual IR (.tir) or compiled engine (.tsl, cuda only)");
  add_tuning_db_option(*cmd, o->gpu.model);
  cmd->add_option("--input", o->inputs, "input from a .npy file: name=path.npy (others random)");
  cmd->add_option("--seed", o->seed, "seed for random inputs");
  cmd->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--output-dir", o->output_dir, "write each output as <name>.npy here");
  cmd->add_option("--repeat", o->repeat, "timed runs (median is reported)")->check(CLI::PositiveNumber);
  CLI::Option* precision = add_precision_option(*cmd, o->gpu.precision);
  return [cmd, o, precision]() {
    if (!cmd->parsed()) return -1;
    const std::string& path = o->gpu.model.path;
    o->gpu.precision_given = precision->count() > 0;
    const bool engine_file = is_engine_file(path);
    TESSEL_USER_CHECK(!engine_file || o->device == "cuda")
        << path << " is a compiled engine: it runs with --device cuda only";

    // The model's inputs and outputs, from the graph (CPU) or the engine's plan (GPU).
    std::optional<Session> session;
    if (o->device == "cuda") {
      ProgressBar progress;
      session.emplace(open_gpu_session(o->gpu, progress));
      const std::string origin =
          engine_file ? "loaded from " + path
                      : "compiled in " + std::to_string(std::lround(session->compile_ms())) + " ms";
      std::printf("engine %s, %s\n", engine_summary(session->engine()->stats()).c_str(),
                  origin.c_str());
    } else {
      Options cpu = model_api_options(o->gpu.model);
      refuse_batch_range(cpu);
      cpu.device = Device::kCpu;
      session.emplace(Session::open(path, cpu));
    }
    runtime::Engine* engine = session->engine();
    const int64_t batch = engine ? run_batch(o->gpu, *session) : session->batch_range().opt;
    std::vector<std::pair<std::string, ir::TensorType>> input_types;
    std::vector<std::string> output_names;
    for (const TensorInfo& t : session->inputs()) {
      Shape shape = t.shape;
      if (!shape.empty() && shape[0] == kDynamicBatch) shape[0] = batch;
      input_types.push_back({t.name, {t.dtype, shape}});
    }
    for (const TensorInfo& t : session->outputs()) output_names.push_back(t.name);

    std::map<std::string, Tensor> given;
    for (const std::string& spec : o->inputs) {
      size_t eq = spec.find('=');
      TESSEL_USER_CHECK(eq != std::string::npos && eq > 0)
          << "--input '" << spec << "': expected name=path.npy";
      std::string name = spec.substr(0, eq);
      auto want = std::find_if(input_types.begin(), input_types.end(),
                               [&](const auto& in) { return in.first == name; });
      TESSEL_USER_CHECK(want != input_types.end())
          << "--input '" << spec << "': the model has no input named '" << name << "'";
      Tensor t = read_npy(spec.substr(eq + 1));
      TESSEL_USER_CHECK(t.dtype() == want->second.dtype && t.shape() == want->second.shape)
          << "input '" << name << "': expected " << want->second.str() << ", got " << t.type_str()
          << " from " << spec.substr(eq + 1)
          << (session->batch_range().min != session->batch_range().max
                  ? " (the engine runs batch " + std::to_string(batch) +
                        "; pass --batch N for another batch of its range)"
                  : std::string());
      given[name] = t;
    }
    std::mt19937_64 rng(o->seed);
    std::vector<Tensor> inputs;
    for (const auto& [name, type] : input_types) {
      auto it = given.find(name);
      Tensor t = it != given.end() ? it->second : random_tensor(type, rng);
      std::printf("input  %-20s %s%s\n", name.c_str(), t.type_str().c_str(),
                  it != given.end() ? "" : " (random)");
      inputs.push_back(t);
    }
    std::vector<Tensor> outputs;
    std::vector<double> ms;
    std::string timed;  // what was timed, for the summary line
    if (engine) {
      outputs = engine->run(inputs);
      // Device time of graph replays (inputs already uploaded), bracketed by CUDA events.
      for (float t : engine->time_replays(/*warmup=*/std::min(o->repeat, 10), o->repeat, batch))
        ms.push_back(t);
      timed = std::string("cuda (") + precision_name(engine->plan().precision) +
              ", one CUDA graph replay, batch " + std::to_string(batch) +
              dynamic_batch_note(*session, batch) + ")";
    } else {
      for (int r = 0; r < o->repeat; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        outputs = session->run(inputs);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      timed = "cpu (reference executor)";
    }
    std::sort(ms.begin(), ms.end());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = outputs[i];
      const std::string& name = output_names[i];
      double sum = 0, sq = 0;
      for (int64_t j = 0; j < t.numel(); ++j) {
        double x = t.get_f64(j);
        sum += x;
        sq += x * x;
      }
      double mean = t.numel() ? sum / t.numel() : 0;
      double stdev = t.numel() ? std::sqrt(std::max(0.0, sq / t.numel() - mean * mean)) : 0;
      std::printf("output %-20s %s mean %.6g std %.6g first [", name.c_str(), t.type_str().c_str(),
                  mean, stdev);
      for (int64_t j = 0; j < std::min<int64_t>(t.numel(), 5); ++j)
        std::printf("%s%.6g", j ? ", " : "", t.get_f64(j));
      std::printf("%s]\n", t.numel() > 5 ? ", ..." : "");
      if (!o->output_dir.empty()) {
        std::filesystem::create_directories(o->output_dir);
        std::string path = o->output_dir + "/" + sanitize(name) + ".npy";
        write_npy(path, t);
        std::printf("       wrote %s\n", path.c_str());
      }
    }
    std::printf("device %s: %.3f ms median of %d run(s)\n", timed.c_str(), ms[ms.size() / 2],
                o->repeat);
    return 0;
  };
}

}  // namespace tessel::cli
