// Timing device work with CUDA events, per run or per replay of a captured CUDA graph.
//
// Events measure the device's timeline, but a kernel that takes less time than its host-side
// enqueue (a few microseconds for cuLaunchKernel, tens for a library call that builds its
// launch) leaves the device idle between the start event and the kernel, and that gap is
// counted. So each batch of timed runs is queued behind a short spin kernel that holds the
// stream until the host has enqueued the whole batch; the runs then execute back to back and
// the events see device time only. This is the "blocking kernel" of NVIDIA's nvbench.
//
// That removes the host's gaps but not the device's own cost of each launch and of the two
// events around it (together several µs, as much as a small kernel itself). Graph replays
// remove those too: many launches are captured into one graph, and a replay is timed as a
// whole, so per launch only the graph's launch-to-launch latency remains, as it would in an
// application that replays graphs.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "device/cuda_api.h"
#include "device/driver.h"

namespace tessel::device {
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
  // Compiled (or read from the kernel cache) and loaded on first use on each GPU (a module
  // belongs to one GPU's context), kept for the process.
  struct Loaded {
    std::shared_ptr<Module> module;
    void* function = nullptr;
  };
  static std::mutex mu;
  static std::map<int, Loaded> loaded;
  std::lock_guard lock(mu);
  Loaded& l = loaded[current_gpu()];
  if (!l.function) {
    CompileOptions o;
    o.arch = device_info().arch();
    l.module = Module::load(compile(kSpinSource, "tessel_spin", o).cubin);
    l.function = l.module->function("tessel_spin");
  }
  return l.function;
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

// Enqueues `runs` runs (each a call of `run`, which enqueues on `s`), each between a start and
// a stop event, in batches queued behind a spin kernel; returns each run's milliseconds,
// sorted. `host_per_run` is the host's estimated cost of one call, which sizes the spin.
std::vector<float> timed_runs(const detail::DriverApi& api, CUstream s, double host_per_run,
                              size_t runs, const std::function<void()>& run) {
  Events events(api, runs);
  for (size_t first = 0; first < runs; first += kBatch) {
    const size_t n = std::min(kBatch, runs - first);
    spin(s, std::min(kMaxSpinSeconds, 1.25 * n * (host_per_run + 2 * kEventRecordSeconds) + 20e-6));
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = first; i < first + n; ++i) {
      TESSEL_CU_CHECK(api.cuEventRecord(events.start(i), s));
      run();
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

// Runs `warmup` untimed calls of `run` and returns the host's median cost of one (the first
// call, which may load modules or pick algorithms, is left out when others exist), or a
// default where there were none.
double warm_up(int warmup, const std::function<void()>& run) {
  std::vector<double> host;
  for (int i = 0; i < warmup; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    host.push_back(seconds_since(t0));
  }
  if (host.size() > 1) host.erase(host.begin());
  if (host.empty()) return kDefaultHostSeconds;
  std::sort(host.begin(), host.end());
  return host[host.size() / 2];
}

}  // namespace

std::vector<float> time_with_events(const std::function<void(void* stream)>& fn, int warmup,
                                    int reps, void* stream) {
  TESSEL_ICHECK(warmup >= 0 && reps >= 1)
      << "time_with_events: warmup " << warmup << ", reps " << reps;
  const detail::DriverApi& api = detail::bind_context();
  auto s = static_cast<CUstream>(stream);
  const auto run = [&] { fn(stream); };
  const double host_per_run = warm_up(warmup, run);
  TESSEL_CU_CHECK(api.cuStreamSynchronize(s));
  return timed_runs(api, s, host_per_run, static_cast<size_t>(reps), run);
}

CapturedGraph::CapturedGraph(const std::function<void(void* stream)>& fn, int launches)
    : launches_(launches) {
  TESSEL_ICHECK(launches >= 1) << "CapturedGraph: " << launches << " launches";
  const detail::DriverApi& api = detail::bind_context();
  // Capture from an idle device: work still queued on the default stream would be an implicit
  // dependency of the blocking stream's first captured call, one a graph cannot record.
  TESSEL_CU_CHECK(api.cuCtxSynchronize());
  CUstream s = nullptr;
  TESSEL_CU_CHECK(api.cuStreamCreate(&s, CU_STREAM_DEFAULT));  // blocking: see the header
  stream_ = s;
  try {
    // Thread-local mode refuses capture-unsafe calls (cuMemAlloc, synchronous copies) made
    // from this thread while capturing, so work that the graph would silently miss fails
    // the capture instead; other threads of the process are left alone.
    TESSEL_CU_CHECK(api.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CUgraph g = nullptr;
    try {
      for (int i = 0; i < launches; ++i) fn(stream_);
    } catch (...) {
      // End the capture, so the stream can be destroyed, and drop what was recorded.
      if (api.cuStreamEndCapture(s, &g) == CUDA_SUCCESS && g) api.cuGraphDestroy(g);
      throw;
    }
    // Invalidated capture (an illegal call inside `fn` that was not itself reported) fails
    // here, with no graph.
    const CUresult ended = api.cuStreamEndCapture(s, &g);
    graph_ = g;
    TESSEL_CU_CHECK(ended);
    TESSEL_CU_CHECK(api.cuGraphGetNodes(g, nullptr, &nodes_));
    CUgraphExec exec = nullptr;
    TESSEL_CU_CHECK(api.cuGraphInstantiateWithFlags(&exec, g, 0));
    exec_ = exec;
  } catch (...) {
    release();
    throw;
  }
}

CapturedGraph::~CapturedGraph() { release(); }

void CapturedGraph::release() noexcept {
  // Nothing can be reported from here; at process exit the driver may already be gone.
  try {
    const detail::DriverApi& api = detail::bind_context();
    auto s = static_cast<CUstream>(stream_);
    if (s) api.cuStreamSynchronize(s);  // no replay may still be running on what is freed
    if (exec_) api.cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
    if (graph_) api.cuGraphDestroy(static_cast<CUgraph>(graph_));
    if (s) api.cuStreamDestroy(s);
  } catch (const Error&) {
  }
  exec_ = graph_ = stream_ = nullptr;
}

void CapturedGraph::replay() { replay(stream_); }

void CapturedGraph::replay(void* stream) {
  TESSEL_CU_CHECK(detail::bind_context().cuGraphLaunch(static_cast<CUgraphExec>(exec_),
                                                       static_cast<CUstream>(stream)));
}

void CapturedGraph::synchronize() {
  TESSEL_CU_CHECK(detail::bind_context().cuStreamSynchronize(static_cast<CUstream>(stream_)));
}

std::vector<float> time_graph_replays(CapturedGraph& graph, int warmup, int reps) {
  TESSEL_ICHECK(warmup >= 0 && reps >= 1)
      << "time_graph_replays: warmup " << warmup << ", reps " << reps;
  const detail::DriverApi& api = detail::bind_context();
  const auto run = [&] { graph.replay(); };
  const double host_per_replay = warm_up(warmup, run);
  graph.synchronize();
  // Replays are timed like single runs (behind a spin, so a replay shorter than its enqueue
  // is still timed on the device alone); each is then shared among its launches.
  std::vector<float> ms = timed_runs(api, static_cast<CUstream>(graph.stream()), host_per_replay,
                                     static_cast<size_t>(reps), run);
  for (float& v : ms) v /= static_cast<float>(graph.launches());
  return ms;
}

}  // namespace tessel::device
