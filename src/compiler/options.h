// The compiler layer's options, in one struct: what the pass pipeline and node planning are
// told. The target GPU is an argument of its own (a device::DeviceInfo), not an option.
#pragma once

#include "core/dtype.h"
#include "core/progress.h"

namespace tessel::compiler {

struct Options {
  Precision precision = Precision::kFp16;
  // false: every contraction takes the SIMT schedule (a baseline, and a way around a Tensor
  // Core kernel suspected of a bug).
  bool tensor_cores = true;
  ProgressFn progress = nullptr;  // optional: "running passes", "compiling kernels"
};

}  // namespace tessel::compiler
