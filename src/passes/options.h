// The options of the pass layer, in one struct: which passes the GPU pipeline runs and with
// which parameters, and what the pipeline logs. Passes take what they need from here as plain
// arguments (choose_precision(g, options.precision)); nothing in a pass reads the environment.
#pragma once

#include <ostream>

#include "core/dtype.h"

namespace tessel::passes {

struct Options {
  // kFp32 leaves the model's precision alone: choose-precision-fp16 is not run.
  Precision precision = Precision::kFp16;
  bool print_after_all = false;  // dump the IR after every pass to `log`
  std::ostream* log = nullptr;
};

}  // namespace tessel::passes
