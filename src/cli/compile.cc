// `tessel compile`: a model compiled into a .tsl engine file (runtime/cuda_engine/engine_file.h)
// that `tessel run/bench/profile` load without compiling. Compiling needs NVRTC, not a GPU:
// --target compiles for a known GPU that is not here.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/engine.h"
#include "runtime/cuda_engine/engine_file.h"
#include "runtime/cuda_engine/target.h"

namespace tessel::cli {
namespace {

namespace eng = runtime::cuda_engine;

// --target's GPU, else the GPU present; without either, say how to name one.
eng::TargetInfo compile_target(const std::string& requested) {
  if (!requested.empty()) return eng::target_for_arch(requested);
  std::string why;
  if (runtime::cuda::cuda_available(&why))
    return eng::target_of_device(runtime::cuda::device_info());
  std::string known;
  for (const eng::KnownTarget& t : eng::known_targets())
    known += (known.empty() ? "--target " : " or --target ") + t.info.arch;
  TESSEL_USER_ERROR() << "no CUDA device to compile for (" << why << "); pass " << known
                      << " to compile for a GPU that is not here";
  return {};
}

}  // namespace

Action add_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compile", "Compile a model into a .tsl engine file for `tessel run/bench/profile`");
  struct Opts {
    ModelOptions model;
    std::string output;
    std::string precision = "fp16";
    std::string target;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->model);
  cmd->add_option("-o,--output", o->output, "the engine file to write (.tsl)")->required();
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--target", o->target,
                  "compile for this GPU: sm_90a (H100) or sm_80 (A100); default: the GPU present");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    const eng::TargetInfo target = compile_target(o->target);
    const ir::Graph g = load_model(o->model);
    ProgressBar progress;
    eng::EngineOptions options;
    options.precision = parse_precision(o->precision);
    options.progress = progress.callback();
    const eng::CompiledPlan compiled = eng::compile_plan(g, options, target);
    eng::write_engine_file(compiled.plan, o->output);
    const eng::EnginePlan& p = compiled.plan;
    std::printf(
        "compiled %s for %s, %s, batch %lld: %zu kernels (%d on Tensor Cores), arena %s, "
        "constants %s, in %ld ms -> %s\n",
        o->model.path.c_str(), target.str().c_str(), eng::precision_name(p.precision),
        static_cast<long long>(p.batch), p.launches.size(), eng::tensor_core_launches(p),
        human_bytes(static_cast<int64_t>(p.arena_bytes)).c_str(),
        human_bytes(static_cast<int64_t>(p.constants.size())).c_str(),
        std::lround(compiled.compile_ms), o->output.c_str());
    return 0;
  };
}

}  // namespace tessel::cli
