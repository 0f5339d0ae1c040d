// Operand sets, the checked run and the timing of one implementation.
#include "bench/measure.h"

#include <algorithm>
#include <memory>

#include "bench/int8_reference.h"
#include "bench/reference.h"

namespace tessel::bench {
namespace {

namespace rt = device;

// More sets than this would only matter for operands of a few hundred KiB, which 256 sets
// already spread over far more than L2.
constexpr int kMaxBufferSets = 256;
constexpr size_t kSetAlignment = 256;  // every operand starts 256-byte aligned, like cudaMalloc
constexpr size_t kHalf = 2;
// Event-timed runs that estimate one run's length before a graph is sized (the least of them
// is taken: event overhead only ever lengthens a run).
constexpr int kPilotRuns = 3;

void set_times(Measurement& m, const std::vector<float>& sorted_ms) {
  m.median_us = 1e3 * sorted_ms[sorted_ms.size() / 2];
  m.min_us = 1e3 * sorted_ms.front();
}

// Graph timing (see bench.h). Returns false, with the reason in `why`, where the work cannot
// be captured; any other failure throws.
bool measure_with_graph(Measurement& m, const Enqueue& enqueue, const Bed& bed,
                        const BenchOptions& o, std::string* why) {
  int next = 0;
  const auto rotating = [&](void* stream) { enqueue(bed.sets[next++ % bed.sets.count()], stream); };
  // These first runs happen outside any capture, so modules load and libraries set themselves
  // up here rather than inside the graph.
  const std::vector<float> pilot = rt::time_with_events(rotating, /*warmup=*/1, kPilotRuns);
  std::unique_ptr<rt::CapturedGraph> graph;
  try {
    next = 0;  // the graph's first launch writes set 0, which the check reads
    graph = std::make_unique<rt::CapturedGraph>(
        rotating, launches_per_graph(1e3 * pilot.front(), bed.sets.count()));
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
  bed.sets.poison_outputs(bed.poison);
  graph->replay();
  graph->synchronize();
  bed.check(m);
  set_times(m, rt::time_graph_replays(*graph, o.warmup, o.reps));
  m.timing = Timing::kGraph;
  m.launches_per_graph = graph->launches();
  return true;
}

// Event timing: a plain checked run on set 0, then runs rotating over the sets.
void measure_with_events(Measurement& m, const Enqueue& enqueue, const Bed& bed,
                         const BenchOptions& o) {
  bed.sets.poison_outputs(bed.poison);
  enqueue(bed.sets[0], nullptr);
  bed.check(m);
  int next = 0;
  set_times(m, rt::time_with_events(
                   [&](void* stream) { enqueue(bed.sets[next++ % bed.sets.count()], stream); },
                   o.warmup, o.reps));
  m.timing = Timing::kEvents;
}

}  // namespace

OperandSets::OperandSets(const size_t bytes[3], int count) : count_(count) {
  for (int i = 0; i < 3; ++i) {
    stride_[i] = (bytes[i] + kSetAlignment - 1) / kSetAlignment * kSetAlignment;
    buffers_[i] = rt::DeviceBuffer(stride_[i] * static_cast<size_t>(count));
  }
}

Operands OperandSets::operator[](int s) const {
  const auto at = [&](int i) { return buffers_[i].ptr() + stride_[i] * static_cast<size_t>(s); };
  return {at(0), at(1), at(2), scale_.ptr(), bias_.ptr()};
}

void OperandSets::fill_f16(uint64_t seed) {
  for (int s = 0; s < count_; ++s) {
    for (int i = 0; i < 2; ++i) {
      const uint64_t draw = (seed << 32) + 2 * static_cast<uint64_t>(s) + i;
      fill_uniform_f16(buffers_[i].ptr() + stride_[i] * s, stride_[i] / kHalf, draw, nullptr);
    }
  }
}

void OperandSets::fill_i8(uint64_t seed, std::vector<int8_t>* a0, std::vector<int8_t>* b0) {
  for (int i = 0; i < 2; ++i) {
    std::vector<int8_t> host(stride_[i] * static_cast<size_t>(count_));
    for (int s = 0; s < count_; ++s) {
      const uint64_t draw = (seed << 32) + 2 * static_cast<uint64_t>(s) + i;
      fill_uniform_i8(host.data() + stride_[i] * s, stride_[i], draw);
    }
    buffers_[i].upload(host.data(), host.size());
    host.resize(stride_[i]);  // set 0
    *(i == 0 ? a0 : b0) = std::move(host);
  }
}

void OperandSets::set_constants(const std::vector<float>& scale, const std::vector<float>& bias) {
  const auto upload = [](rt::DeviceBuffer& b, const std::vector<float>& v) {
    b = v.empty() ? rt::DeviceBuffer() : rt::DeviceBuffer(v.size() * sizeof(float));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(float));
  };
  upload(scale_, scale);
  upload(bias_, bias);
}

int buffer_sets(size_t set_bytes, size_t l2) {
  if (set_bytes >= l2) return 1;
  const size_t sets = (2 * l2 + set_bytes - 1) / set_bytes;
  return static_cast<int>(std::clamp<size_t>(sets, 2, kMaxBufferSets));
}

Measurement measure(const Enqueue& enqueue, const Bed& bed, const BenchOptions& o,
                    const std::string& what) {
  Measurement m;
  try {
    std::string capture_failure;
    if (o.timing == Timing::kEvents || !measure_with_graph(m, enqueue, bed, o, &capture_failure))
      measure_with_events(m, enqueue, bed, o);
    m.ran = true;
    m.description = what;
    if (!capture_failure.empty())
      m.description += " (timed with events: graph capture failed: " + capture_failure + ")";
  } catch (const Error& e) {
    m = Measurement{};
    m.description = std::string("failed: ") + e.what();
  }
  return m;
}

std::optional<TesselKernel> ready_tessel(const std::function<TesselKernel()>& make,
                                         const OperandSets& sets, std::string* why) {
  TesselKernel tessel;
  try {
    tessel = make();
  } catch (const Error& e) {
    tessel.description = std::string("failed to build: ") + e.what();
  }
  if (!tessel.enqueue) {
    *why = tessel.description.empty() ? "not supported" : tessel.description;
    return std::nullopt;
  }
  if (tessel.prepare) {
    try {
      for (int i = 0; i < sets.count(); ++i) tessel.prepare(sets[i]);
    } catch (const Error& e) {
      *why = std::string("failed to prepare its operands: ") + e.what();
      return std::nullopt;
    }
  }
  return tessel;
}

}  // namespace tessel::bench
