// `tessel run`: runs a model on inputs from .npy files or seeded random data, on the CPU
// reference executor or as a compiled GPU engine (runtime/cuda_engine), writes the outputs as
// .npy and prints a summary and the time.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli/commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "runtime/cpu/executor.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/engine.h"

namespace tessel::cli {
namespace {

// Uniform [-1, 1) for floats, small non-negative integers for integer inputs.
Tensor random_tensor(const ir::TensorType& t, std::mt19937_64& rng) {
  Tensor r(t.dtype, t.shape);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (is_float(t.dtype))
      r.set_f64(i, uni(rng));
    else
      r.set_i64(i, small(rng));
  }
  return r;
}

std::string sanitize(const std::string& name) {
  std::string r;
  for (char c : name) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return r;
}

// 1.5 MiB, 800 KiB, 512 B.
std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a model and print or save its outputs");
  struct Opts {
    ModelOptions model;
    std::vector<std::string> inputs;
    uint64_t seed = 0;
    std::string device = "cpu";
    std::string output_dir;
    int repeat = 1;
    std::string precision = "fp16";
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->model);
  cmd->add_option("--input", o->inputs, "input from a .npy file: name=path.npy (others random)");
  cmd->add_option("--seed", o->seed, "seed for random inputs");
  cmd->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--output-dir", o->output_dir, "write each output as <name>.npy here");
  cmd->add_option("--repeat", o->repeat, "timed runs (median is reported)")->check(CLI::PositiveNumber);
  cmd->add_option("--precision", o->precision, "GPU storage precision: fp16 or fp32 (--device cuda)")
      ->check(CLI::IsMember({"fp16", "fp32"}));
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    if (o->device == "cuda") {
      std::string why;
      TESSEL_USER_CHECK(runtime::cuda::cuda_available(&why)) << "no CUDA device: " << why;
    }
    ir::Graph g = load_model(o->model);
    std::map<std::string, Tensor> given;
    for (const std::string& spec : o->inputs) {
      size_t eq = spec.find('=');
      TESSEL_USER_CHECK(eq != std::string::npos && eq > 0)
          << "--input '" << spec << "': expected name=path.npy";
      std::string name = spec.substr(0, eq);
      TESSEL_USER_CHECK(g.find_value(name) != ir::kNoValue &&
                        std::find(g.inputs.begin(), g.inputs.end(), g.find_value(name)) != g.inputs.end())
          << "--input '" << spec << "': the model has no input named '" << name << "'";
      Tensor t = read_npy(spec.substr(eq + 1));
      const ir::TensorType& want = g.type(g.find_value(name));
      TESSEL_USER_CHECK(t.dtype() == want.dtype && t.shape() == want.shape)
          << "input '" << name << "': expected " << want.str() << ", got " << t.type_str()
          << " from " << spec.substr(eq + 1);
      given[name] = t;
    }
    std::mt19937_64 rng(o->seed);
    std::vector<Tensor> inputs;
    for (ir::ValueId v : g.inputs) {
      const ir::Value& val = g.value(v);
      auto it = given.find(val.name);
      Tensor t = it != given.end() ? it->second : random_tensor(val.type, rng);
      std::printf("input  %-20s %s%s\n", val.name.c_str(), t.type_str().c_str(),
                  it != given.end() ? "" : " (random)");
      inputs.push_back(t);
    }
    std::vector<Tensor> outputs;
    std::vector<double> ms;
    std::string timed;  // what was timed, for the summary line
    if (o->device == "cuda") {
      namespace eng = runtime::cuda_engine;
      eng::EngineOptions options;
      options.precision = o->precision == "fp32" ? passes::Precision::kFp32 : passes::Precision::kFp16;
      eng::Engine engine = eng::Engine::compile(g, options);
      const eng::EngineStats& st = engine.stats();
      std::printf("engine %d kernels (%d on Tensor Cores), arena %s, constants %s, compiled in %.0f ms\n",
                  st.kernels, st.tensor_core_kernels, human_bytes(st.arena_bytes).c_str(),
                  human_bytes(st.constant_bytes).c_str(), st.compile_ms);
      outputs = engine.run(inputs);
      // Device time of graph replays (inputs already uploaded), bracketed by CUDA events.
      for (float t : engine.time_replays(/*warmup=*/std::min(o->repeat, 10), o->repeat)) ms.push_back(t);
      timed = "cuda (" + o->precision + ", one CUDA graph replay)";
    } else {
      for (int r = 0; r < o->repeat; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        outputs = runtime::cpu::run_graph(g, inputs);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      timed = "cpu (reference executor)";
    }
    std::sort(ms.begin(), ms.end());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = outputs[i];
      const std::string& name = g.value(g.outputs[i]).name;
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
