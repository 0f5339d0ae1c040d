// open_gpu_session: an engine file loaded, or a model compiled, for the GPU present.
#include "cli/gpu_engine.h"

#include <random>

#include "core/error.h"

namespace tessel::cli {

Session open_gpu_session(const GpuEngineOptions& o, ProgressBar& progress) {
  const std::string& path = o.model.path;
  Options options = model_api_options(o.model);
  options.device = Device::kCuda;
  options.precision = parse_precision(o.precision);
  options.progress = progress.callback();
  if (is_engine_file(path)) {
    TESSEL_USER_CHECK(o.model.batch == 0 && o.model.input_shapes.empty() && !o.precision_given &&
                      o.model.tuning_db.empty())
        << path << " is a compiled engine: --batch, --input-shape, --precision and --db apply "
        << "when compiling a model (tessel compile)";
  }
  return Session::open(path, options);
}

std::vector<Tensor> random_inputs(const Session& session, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const TensorInfo& t : session.inputs()) inputs.push_back(random_tensor({t.dtype, t.shape}, rng));
  return inputs;
}

std::string engine_summary(const runtime::EngineStats& s) {
  return std::to_string(s.kernels) + " kernels (" + std::to_string(s.tensor_core_kernels) +
         " on Tensor Cores), arena " + human_bytes(s.arena_bytes) + ", constants " +
         human_bytes(s.constant_bytes);
}

}  // namespace tessel::cli
