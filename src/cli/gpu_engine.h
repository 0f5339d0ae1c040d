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
// reported as such on any machine; compile-time options (--batch, --input-shape, --precision)
// given with one are a UserError. Then "no CUDA device: ..." without a GPU.
Session open_gpu_session(const GpuEngineOptions& o, ProgressBar& progress);

// Seeded random inputs (random_tensor) for every input of the session, in its order.
std::vector<Tensor> random_inputs(const Session& session, uint64_t seed);

// "5 kernels (1 on Tensor Cores), arena 1.0 KiB, constants 512 B"
std::string engine_summary(const runtime::EngineStats& s);

}  // namespace tessel::cli
