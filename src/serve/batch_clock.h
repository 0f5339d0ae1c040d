// BatchClock: when a pipelined server instance takes its next batch. Header-only, free of
// Triton, so that it is tested on its own (tests/api/serve_batch_clock_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel::serve {

// When a pipelined server instance hands itself back to Triton's batcher (triton_backend.cc).
// A batch formed as soon as the one before it is submitted is small (a closed-loop client whose
// answer is still in that batch cannot be in it) and then waits for the GPU anyway. So the
// instance returns once the run before is done and the one just submitted will be done in
// about the time the next batch takes to form and stage: the batcher forms the next batch
// then, of every request that came meanwhile, and it is staged while the GPU finishes. The
// times are measured as batches run: each batch size's GPU time (from the end of the run
// before it, or of its submit, to its collect), the time a batch takes to form (from the
// instance's return to the next submit) and the staging time per row (a submit's duration);
// moving averages (a fifth of each new measurement).
class BatchClock {
 public:
  explicit BatchClock(int64_t max_rows = 1) : gpu_us_(static_cast<size_t>(max_rows) + 1, 0.0) {}

  void staged(int64_t rows, double us) {
    average(stage_us_per_row_, us / static_cast<double>(std::max<int64_t>(rows, 1)));
  }
  // From execute()'s return to the next batch's submit: the batcher's queue delay and the
  // gathering of the requests.
  void formed(double us) { average(form_us_, us); }
  void ran(int64_t rows, double us) {
    if (rows >= 0 && rows < static_cast<int64_t>(gpu_us_.size()))
      average(gpu_us_[static_cast<size_t>(rows)], us);
  }

  // When the batcher should form the next batch, the run of `rows` submitted having started on
  // the GPU at `start_ns`; 0 (at once) until that size's GPU time is measured.
  uint64_t form_next_ns(int64_t rows, uint64_t start_ns) const {
    if (rows < 0 || rows >= static_cast<int64_t>(gpu_us_.size())) return 0;
    const double gpu = gpu_us_[static_cast<size_t>(rows)];
    const double lead = form_us_ + stage_us_per_row_ * static_cast<double>(rows) + kMarginUs;
    if (gpu <= lead) return 0;
    return start_ns + static_cast<uint64_t>(std::min(gpu - lead, kMaxWaitUs) * 1e3);
  }

 private:
  static constexpr double kMarginUs = 150;     // early rather than late: the GPU must not idle
  static constexpr double kMaxWaitUs = 20000;  // whatever was measured
  static void average(double& mean, double x) { mean = mean == 0 ? x : 0.8 * mean + 0.2 * x; }
  std::vector<double> gpu_us_;  // by batch rows; 0: not measured
  double stage_us_per_row_ = 0, form_us_ = 0;
};

}  // namespace tessel::serve
