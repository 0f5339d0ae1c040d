// How an engine runs a batch: which profiles (engine_plan.h PlanProfile), in which chunks.
// Pure arithmetic on a plan, so the choice is tested without a GPU.
//
// A batch that is a profile runs as that profile. Any other batch b of a dynamic engine runs
// as the cheapest sequence of profile runs that covers it, by the compiler's predicted times
// (PlanLaunch::predicted_us, calibrated by the tuning database where there is one): either
// padded up to one larger profile (b = 3 on profiles 1, 2, 4, 8: one run of 4, latency-bound
// small batches cost about the same) or split into profile-sized chunks with the last one
// padded (b = 33 on profiles ..., 32, 64: 32 + 1 instead of 64, which costs twice 32 once the
// GPU is full). Padded items read whatever the engine's input buffer holds; their outputs are
// dropped. Both assume what holds for the networks tessel compiles, that a batch's items are
// computed independently of each other (compile_profiles requires every input and output to
// lead with the batch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine_plan.h"

namespace tessel::runtime {

struct BatchChunk {
  size_t profile = 0;  // index into EnginePlan::profiles
  int64_t offset = 0;  // the first item of the batch it runs
  int64_t items = 0;   // items it runs: the profile's batch, or fewer (padded)
  bool operator==(const BatchChunk&) const = default;
};

// What one run of a profile is expected to cost, in microseconds, beyond its kernels' time: a
// graph launch and the run's copies. It keeps a split from winning by a hair.
inline constexpr double kRunOverheadUs = 10.0;

// A profile's predicted time per run (the sum of its launches' predictions), 0 where a launch
// has none.
double predicted_us(const PlanProfile& profile);

// "" when `batch` is one the engine runs, else the one-line reason: "batch 65 is outside the
// engine's batch range 1:64" (or "... compiled for batch 8" for a static engine).
std::string batch_error(const EnginePlan& plan, int64_t batch);

// The chunks that run `batch` (batch_error() must be empty), in item order. Every item is in
// exactly one chunk. Without predictions for every profile, a batch between profiles is padded
// up to the next profile (one run).
std::vector<BatchChunk> split_batch(const EnginePlan& plan, int64_t batch);

// "1:64" or "8": a range as the CLI spells it.
std::string batch_range_str(const BatchRange& range);

}  // namespace tessel::runtime
