// Compilation options that select passes and their parameters. Passes take what they need
// from here as plain arguments (choose_precision(g, options.precision)); nothing in a pass
// reads the environment.
#pragma once

namespace tessel::passes {

// Storage precision of activations and weights inside the compiled graph. Graph inputs and
// outputs keep the model's fp32 either way.
enum class Precision {
  kFp32,  // the model as given: choose-precision is not run
  kFp16,  // fp16 storage, fp32 accumulation and epilogues (choose_precision.cc)
};

struct CompileOptions {
  Precision precision = Precision::kFp16;
};

}  // namespace tessel::passes
