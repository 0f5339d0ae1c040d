// split_batch: the cheapest chunks of profile runs for a batch, by dynamic programming over the
// predicted times.
#include "runtime/batch_split.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessel::runtime {

double predicted_us(const PlanProfile& profile) {
  double us = 0;
  for (const PlanLaunch& l : profile.launches) {
    if (l.predicted_us <= 0) return 0;
    us += l.predicted_us;
  }
  return us;
}

std::string batch_range_str(const BatchRange& range) {
  return range.dynamic() ? std::to_string(range.min) + ":" + std::to_string(range.max)
                         : std::to_string(range.min);
}

std::string batch_error(const EnginePlan& plan, int64_t batch) {
  const BatchRange& r = plan.batch;
  if (batch >= r.min && batch <= r.max) return "";
  if (!r.dynamic())
    return "batch " + std::to_string(batch) + ": the engine is compiled for batch " +
           std::to_string(r.min) + " (compile it with --batch A:B for a range)";
  return "batch " + std::to_string(batch) + " is outside the engine's batch range " +
         batch_range_str(r);
}

std::vector<BatchChunk> split_batch(const EnginePlan& plan, int64_t batch) {
  const std::string bad = batch_error(plan, batch);
  TESSEL_ICHECK(bad.empty()) << bad;
  const size_t profiles = plan.profiles.size();
  for (size_t k = 0; k < profiles; ++k)
    if (plan.profiles[k].batch == batch) return {{k, 0, batch}};
  // A run's cost: its prediction and the overhead. Without every prediction, 1 per run and a
  // little per item, so that the fewest runs win and then the least padding.
  std::vector<double> cost(profiles);
  bool predicted = true;
  for (const PlanProfile& p : plan.profiles) predicted = predicted && predicted_us(p) > 0;
  for (size_t k = 0; k < profiles; ++k)
    cost[k] = predicted ? predicted_us(plan.profiles[k]) + kRunOverheadUs
                        : 1.0 + 1e-6 * static_cast<double>(plan.profiles[k].batch);

  // best[n]: the cheapest way to run n items; first[n]: the profile of one of its chunks. A chunk of profile k takes min(n, its batch) items, so padding is a chunk whose
  // profile's batch exceeds what is left.
  const size_t n_max = static_cast<size_t>(batch);
  std::vector<double> best(n_max + 1, std::numeric_limits<double>::infinity());
  std::vector<size_t> first(n_max + 1, 0);
  best[0] = 0;
  for (size_t n = 1; n <= n_max; ++n) {
    for (size_t k = 0; k < profiles; ++k) {
      const size_t take = std::min(n, static_cast<size_t>(plan.profiles[k].batch));
      const double c = cost[k] + best[n - take];
      // Ties go to the smaller profile (k ascends by batch).
      if (c < best[n]) {
        best[n] = c;
        first[n] = k;
      }
    }
  }
  std::vector<BatchChunk> chunks;
  for (size_t n = n_max; n > 0;) {
    const size_t k = first[n];
    const size_t take = std::min(n, static_cast<size_t>(plan.profiles[k].batch));
    chunks.push_back({k, 0, static_cast<int64_t>(take)});
    n -= take;
  }
  // The largest chunks first, a padded one last.
  std::stable_sort(chunks.begin(), chunks.end(), [](const BatchChunk& a, const BatchChunk& b) {
    return a.items > b.items;
  });
  int64_t offset = 0;
  for (BatchChunk& c : chunks) {
    c.offset = offset;
    offset += c.items;
  }
  return chunks;
}

}  // namespace tessel::runtime
