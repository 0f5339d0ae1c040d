// The compiler layer's options, in one struct: what the pass pipeline and node planning are
// told. The target GPU is an argument of its own (a device::DeviceInfo), not an option.
#pragma once

#include <memory>

#include "core/dtype.h"
#include "core/progress.h"

namespace tessel::compiler {

class TuningDb;

struct Options {
  Precision precision = Precision::kFp16;
  // false: every contraction takes the SIMT schedule (a baseline, and a way around a Tensor
  // Core kernel suspected of a bug).
  bool tensor_cores = true;
  ProgressFn progress = nullptr;  // optional: "running passes", "compiling kernels"
  // Measured schedules (`tessel tune`): used where a record matches a contraction on the
  // target, the cost model's default elsewhere.
  std::shared_ptr<const TuningDb> tuning;
  // A dynamic-batch engine's profiles: also one at every multiple of this (profile_batches).
  int64_t profile_every = 0;
};

}  // namespace tessel::compiler
