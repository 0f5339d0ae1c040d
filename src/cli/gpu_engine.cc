// open_gpu_session: an engine file loaded, or a model compiled, for the GPU present.
#include "cli/gpu_engine.h"

#include <random>

#include "core/error.h"
#include "runtime/batch_split.h"
#include "runtime/engine_file.h"

namespace tessel::cli {

Session open_gpu_session(const GpuEngineOptions& o, ProgressBar& progress) {
  const std::string& path = o.model.path;
  Options options = model_api_options(o.model);
  options.device = Device::kCuda;
  options.precision = parse_precision(o.precision);
  options.progress = progress.callback();
  if (!is_engine_file(path)) {
    refuse_batch_range(options);
    return Session::open(path, options);
  }
  TESSEL_USER_CHECK(o.model.input_shapes.empty() && !o.precision_given &&
                    o.model.tuning_db.empty() && options.batch_range.empty())
      << path << " is a compiled engine: --input-shape, --precision, --db and a batch range "
      << "apply when compiling a model (tessel compile)";
  if (options.batch != 0) {
    // Checked before the engine is loaded (and the GPU looked for), as a damaged file is.
    const std::string bad = runtime::batch_error(runtime::read_engine_file(path), options.batch);
    TESSEL_USER_CHECK(bad.empty()) << path << ": " << bad;
  }
  options.batch = 0;
  return Session::open(path, options);
}

int64_t run_batch(const GpuEngineOptions& o, const Session& session) {
  const BatchRange r = session.batch_range();
  if (r.min == r.max || o.model.batch.empty()) return r.opt;
  return model_api_options(o.model).batch;
}

std::string dynamic_batch_note(const Session& session, int64_t batch) {
  const runtime::EnginePlan& plan = session.engine()->plan();
  if (!plan.batch.dynamic()) return "";
  const std::vector<runtime::BatchChunk> chunks = runtime::split_batch(plan, batch);
  std::string how;
  if (chunks.size() == 1) {
    const int64_t p = plan.profiles[chunks[0].profile].batch;
    how = p == batch ? "profile " + std::to_string(p) : "padded to profile " + std::to_string(p);
  } else {
    how = "profiles ";
    for (size_t i = 0; i < chunks.size(); ++i)
      how += (i ? " + " : "") + std::to_string(plan.profiles[chunks[i].profile].batch);
  }
  return " (dynamic engine " + runtime::batch_range_str(plan.batch) + ": " + how + ")";
}

std::vector<Tensor> random_inputs(const Session& session, uint64_t seed, int64_t batch) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const TensorInfo& t : session.inputs()) {
    Shape shape = t.shape;
    if (!shape.empty() && shape[0] == kDynamicBatch) shape[0] = batch;
    inputs.push_back(random_tensor({t.dtype, shape}, rng));
  }
  return inputs;
}

std::string engine_summary(const runtime::EngineStats& s) {
  const std::string profiles =
      s.profiles > 1 ? std::to_string(s.profiles) + " profiles, at the opt batch " : "";
  return profiles + std::to_string(s.kernels) + " kernels (" +
         std::to_string(s.tensor_core_kernels) + " on Tensor Cores), arena " +
         human_bytes(s.arena_bytes) + ", constants " + human_bytes(s.constant_bytes);
}

}  // namespace tessel::cli
