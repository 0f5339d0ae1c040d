// Timing device work with CUDA events.
//
// Events measure the device's timeline, but a kernel that takes less time than its host-side
// enqueue (a few microseconds for cuLaunchKernel, tens for a library call that builds its
// launch) leaves the device idle between the start event and the kernel, and that gap is
// counted. So each batch of timed runs is queued behind a short spin kernel that holds the
// stream until the host has enqueued the whole batch; the runs then execute back to back and
// the events see device time only. This is the "blocking kernel" of NVIDIA's nvbench.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/driver.h"

namespace tessel::runtime::cuda {
namespace {

constexpr size_t kBatch = 32;  // timed runs queued behind one spin kernel
// Host cost assumed per run when no warm-up measured it, and per event record.
constexpr double kDefaultHostSeconds = 20e-6;
constexpr double kEventRecordSeconds = 2e-6;
constexpr double kMaxSpinSeconds = 0.05;

// Spins one thread on the global nanosecond timer.
constexpr const char* kSpinSource = R"(
extern "C" __global__ void tessel_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
)";

void* spin_function() {
  // Compiled (or read from the kernel cache) and loaded on first use, kept for the process.
  static std::mutex mu;
  static std::shared_ptr<Module> module;
  static void* function = nullptr;
  std::lock_guard lock(mu);
  if (!function) {
    CompileOptions o;
    o.arch = device_info(0).arch();
    module = Module::load(compile(kSpinSource, "tessel_spin", o).cubin);
    function = module->function("tessel_spin");
  }
  return function;
}

void spin(void* stream, double seconds) {
  unsigned long long ns = static_cast<unsigned long long>(seconds * 1e9);
  void* args[] = {&ns};
  LaunchConfig config;
  config.stream = stream;
  launch(spin_function(), config, args);
}

// A start and a stop event for each timed run, destroyed with the timing call.
class Events {
 public:
  Events(const detail::DriverApi& api, size_t runs) : api_(api), events_(2 * runs, nullptr) {
    for (CUevent& e : events_) TESSEL_CU_CHECK(api_.cuEventCreate(&e, CU_EVENT_DEFAULT));
  }
  ~Events() {
    for (CUevent e : events_)
      if (e) api_.cuEventDestroy(e);  // nothing to report from a destructor
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent start(size_t run) const { return events_[2 * run]; }
  CUevent stop(size_t run) const { return events_[2 * run + 1]; }

 private:
  const detail::DriverApi& api_;
  std::vector<CUevent> events_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<float> time_with_events(const std::function<void(void* stream)>& fn, int warmup,
                                    int reps, void* stream) {
  TESSEL_ICHECK(warmup >= 0 && reps >= 1)
      << "time_with_events: warmup " << warmup << ", reps " << reps;
  const detail::DriverApi& api = detail::bind_context();
  auto s = static_cast<CUstream>(stream);

  // Warm-up runs, also measuring the host's cost of one enqueue (the first run, which may
  // load modules or pick algorithms, is left out of that estimate when others exist).
  std::vector<double> host;
  for (int i = 0; i < warmup; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn(stream);
    host.push_back(seconds_since(t0));
  }
  TESSEL_CU_CHECK(api.cuStreamSynchronize(s));
  if (host.size() > 1) host.erase(host.begin());
  std::sort(host.begin(), host.end());
  double host_per_run = host.empty() ? kDefaultHostSeconds : host[host.size() / 2];

  const auto runs = static_cast<size_t>(reps);
  Events events(api, runs);
  for (size_t first = 0; first < runs; first += kBatch) {
    const size_t n = std::min(kBatch, runs - first);
    spin(stream,
         std::min(kMaxSpinSeconds, 1.25 * n * (host_per_run + 2 * kEventRecordSeconds) + 20e-6));
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = first; i < first + n; ++i) {
      TESSEL_CU_CHECK(api.cuEventRecord(events.start(i), s));
      fn(stream);
      TESSEL_CU_CHECK(api.cuEventRecord(events.stop(i), s));
    }
    // The next batch's spin is sized by what this one really cost on the host.
    host_per_run = std::max(0.0, seconds_since(t0) / n - 2 * kEventRecordSeconds);
  }
  TESSEL_CU_CHECK(api.cuEventSynchronize(events.stop(runs - 1)));

  std::vector<float> ms(runs);
  for (size_t i = 0; i < runs; ++i)
    TESSEL_CU_CHECK(api.cuEventElapsedTime(&ms[i], events.start(i), events.stop(i)));
  std::sort(ms.begin(), ms.end());
  return ms;
}

}  // namespace tessel::runtime::cuda
