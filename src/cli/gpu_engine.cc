// open_gpu_engine: an engine file loaded, or a model compiled, for the GPU present.
#include "cli/gpu_engine.h"

#include <random>

#include "core/error.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/engine_file.h"

namespace tessel::cli {

namespace eng = runtime::cuda_engine;

eng::Engine open_gpu_engine(const GpuEngineOptions& o, ProgressBar& progress) {
  const std::string& path = o.model.path;
  if (eng::is_engine_file(path)) {
    TESSEL_USER_CHECK(o.model.batch == 0 && o.model.input_shapes.empty() && !o.precision_given)
        << path << " is a compiled engine: --batch, --input-shape and --precision apply when "
        << "compiling a model (tessel compile)";
    eng::EnginePlan plan = eng::read_engine_file(path);
    std::string why;
    TESSEL_USER_CHECK(runtime::cuda::cuda_available(&why)) << "no CUDA device: " << why;
    return eng::Engine::load(std::move(plan), path, progress.callback());
  }
  std::string why;
  TESSEL_USER_CHECK(runtime::cuda::cuda_available(&why)) << "no CUDA device: " << why;
  const ir::Graph g = load_model(o.model);
  eng::EngineOptions options;
  options.precision = parse_precision(o.precision);
  options.progress = progress.callback();
  return eng::Engine::compile(g, options);
}

std::vector<Tensor> random_engine_inputs(const eng::Engine& engine, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const eng::PlanTensor& t : engine.plan().inputs)
    inputs.push_back(random_tensor({t.dtype, t.shape}, rng));
  return inputs;
}

std::string engine_summary(const eng::EngineStats& s) {
  return std::to_string(s.kernels) + " kernels (" + std::to_string(s.tensor_core_kernels) +
         " on Tensor Cores), arena " + human_bytes(s.arena_bytes) + ", constants " +
         human_bytes(s.constant_bytes);
}

}  // namespace tessel::cli
