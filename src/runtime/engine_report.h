// What `tessel bench` and `tessel profile` report, as pure functions of a plan and of times
// measured on the GPU (Engine::time_replays, Engine::profile_launches), so that the
// arithmetic and the table are tested without one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/engine_plan.h"
#include "device/device_info.h"

namespace tessel::runtime {

struct LatencyStats {
  double median_ms = 0;
  double p90_ms = 0;            // nearest rank: the ceil(0.9 n)-th smallest
  double throughput_per_s = 0;  // batch items per second at the median latency
  int reps = 0;
};

// From per-replay times in any order; `replay_ms` must not be empty.
LatencyStats latency_stats(std::vector<float> replay_ms, int64_t batch);

struct KernelRow {
  int index = 0;
  const PlanLaunch* launch = nullptr;
  double start_us = 0;  // the launches laid end to end, as in a trace
  double us = 0;
  double percent = 0;                     // of the sum of all launches' times
  double tflops = 0;                      // launch->flops / time
  double gbps = 0;                        // launch->bytes / time
  std::optional<double> percent_of_peak;  // of the peak of its instruction class, when known
  double predicted_us = 0;                // the compiler's prediction (0: none recorded)
};

// How far the compiler's predictions (PlanLaunch::predicted_us) are from the measured times:
// per kernel |predicted - measured| / measured, over the launches that have a prediction.
struct PredictionError {
  int kernels = 0;
  double median = 0;        // of the per-kernel relative errors
  int within_10_percent = 0;
  double total_predicted_us = 0;  // against ProfileReport::total_us
};
PredictionError prediction_error(const struct ProfileReport& r);

struct ProfileReport {
  std::vector<KernelRow> rows;
  double total_us = 0;  // the sum of the launches' own times
  int64_t total_flops = 0;
  int64_t total_bytes = 0;
  double replay_us = 0;                // one replay of the whole graph
  device::DeviceInfo device;  // whose datasheet peaks "% of peak" uses (0: none known)
};

// `launch_ms[i]` is launch i's time (Engine::profile_launches), `replay_ms` the whole graph's.
// Tensor Core launches are measured against device.peak_tensor_tflops (int8 contractions, whose
// operand_dtype is i8 or u8, against device.peak_tensor_int8_tops), the rest against
// device.peak_simt_tflops, where those are known.
ProfileReport make_profile_report(const PlanProfile& plan, const std::vector<float>& launch_ms,
                                  double replay_ms, const device::DeviceInfo& device);

// The table `tessel profile` prints: a header naming the peaks used, a row per launch, a total
// row, and the sum of the launches' times against one replay of the graph.
std::string format_profile(const ProfileReport& report);

}  // namespace tessel::runtime
