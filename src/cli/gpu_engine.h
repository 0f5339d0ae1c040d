// The engine behind the commands that run a model on the GPU (run --device cuda, bench,
// profile): compiled for the GPU present from an .onnx or .tir model, or loaded from a .tsl
// engine file (runtime/cuda_engine/engine_file.h) without compiling anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "runtime/cuda_engine/engine.h"

namespace tessel::cli {

struct GpuEngineOptions {
  ModelOptions model;
  std::string precision = "fp16";
  bool precision_given = false;  // --precision was on the command line
};

// An engine file is read and checked before the GPU is looked for, so that a damaged file is
// reported as such on any machine; compile-time options (--batch, --input-shape, --precision)
// given with one are a UserError. Then "no CUDA device: ..." without a GPU.
runtime::cuda_engine::Engine open_gpu_engine(const GpuEngineOptions& o, ProgressBar& progress);

// Seeded random inputs (random_tensor) for every input of the engine, in its order.
std::vector<Tensor> random_engine_inputs(const runtime::cuda_engine::Engine& engine, uint64_t seed);

// "5 kernels (1 on Tensor Cores), arena 1.0 KiB, constants 512 B"
std::string engine_summary(const runtime::cuda_engine::EngineStats& s);

}  // namespace tessel::cli
