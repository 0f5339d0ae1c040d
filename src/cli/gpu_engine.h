// The session behind the commands that run a model on the GPU (run --device cuda, bench,
// profile): compiled for the GPU present from an .onnx or .tir model, or loaded from a .tsl
// engine file (runtime/engine_file.h) without compiling anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "runtime/engine.h"
#include "tessel/tessel.h"

namespace tessel::cli {

struct GpuEngineOptions {
  ModelOptions model;
  std::string precision = "fp16";
  bool precision_given = false;  // --precision was on the command line
};

// An engine file is read and checked before the GPU is looked for, so that a damaged file is
// reported as such on any machine; compile-time options (--input-shape, --precision, --db, a
// batch range) given with one are a UserError, and so is a --batch outside the engine's range.
// Then "no CUDA device: ..." without a GPU. A model is compiled for its one --batch.
Session open_gpu_session(const GpuEngineOptions& o, ProgressBar& progress);

// The batch a run of `session` takes: --batch for a dynamic engine (its opt batch without one),
// the session's own batch otherwise.
int64_t run_batch(const GpuEngineOptions& o, const Session& session);

// " (dynamic engine 1:64: profile 8)", " (dynamic engine 1:64: padded to profile 4)",
// " (dynamic engine 1:64: profiles 32 + 1)": how a dynamic engine runs `batch`; "" for a
// static one.
std::string dynamic_batch_note(const Session& session, int64_t batch);

// Seeded random inputs (random_tensor) for every input of the session, in its order, at `batch`
// where the batch is dynamic.
std::vector<Tensor> random_inputs(const Session& session, uint64_t seed, int64_t batch);

// "5 kernels (1 on Tensor Cores), arena 1.0 KiB, constants 512 B"
std::string engine_summary(const runtime::EngineStats& s);

}  // namespace tessel::cli
