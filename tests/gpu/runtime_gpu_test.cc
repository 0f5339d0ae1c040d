// The CUDA runtime layer on a real device: memory, module loading, launches, event timing,
// graph capture and replay timing. Skipped, with the reason, where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "bench/baselines.h"
#include "bench/reference.h"
#include "device/cuda_api.h"

namespace tessel::device {
namespace {

class GpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda_available(&reason)) GTEST_SKIP() << "no CUDA device: " << reason;
    set_cache_dir("");  // compile afresh: these tests exercise NVRTC output on the device
  }

  // Compiles `source` for this device and returns its kernel `name` (the module is kept).
  void* kernel(const std::string& source, const std::string& name) {
    CompileOptions o;
    o.arch = device_info(0).arch();
    modules_.push_back(Module::load(compile(source, name, o).cubin));
    return modules_.back()->function(name);
  }

  std::vector<std::shared_ptr<Module>> modules_;
};

TEST_F(GpuRuntime, DeviceBufferRoundTrip) {
  std::vector<uint8_t> host(1000);
  std::iota(host.begin(), host.end(), 7);  // wraps: every byte value appears
  DeviceBuffer buf(host.size());
  EXPECT_NE(buf.ptr(), 0u);
  EXPECT_EQ(buf.size(), host.size());
  buf.upload(host.data(), host.size());
  std::vector<uint8_t> back(host.size(), 0);
  buf.download(back.data(), back.size());
  EXPECT_EQ(back, host);

  buf.fill_bytes(0xff);
  buf.download(back.data(), back.size());
  EXPECT_EQ(back, std::vector<uint8_t>(host.size(), 0xff));

  DeviceBuffer moved = std::move(buf);
  EXPECT_EQ(buf.ptr(), 0u);
  EXPECT_EQ(moved.size(), host.size());
  moved.download(back.data(), back.size());
  EXPECT_EQ(back, std::vector<uint8_t>(host.size(), 0xff));

  EXPECT_THROW(moved.upload(host.data(), host.size() + 1), InternalError);
}

TEST_F(GpuRuntime, FailedAllocationIsADriverError) {
  try {
    DeviceBuffer huge(size_t{1} << 52);  // 4 PiB
    FAIL() << "allocated 4 PiB";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), 2) << "CUDA_ERROR_OUT_OF_MEMORY";
    EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
        << e.what();
  }
  DeviceBuffer still_works(64);  // the error is not sticky
  still_works.fill_bytes(1);
}

constexpr const char* kCoords = R"(
extern "C" __global__ void coords(int* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  int w = gridDim.x * blockDim.x, h = gridDim.y * blockDim.y;
  out[(z * h + y) * w + x] = x + 1000 * y + 1000000 * z;
}
)";

TEST_F(GpuRuntime, LaunchCoversEveryGridAndBlockDimension) {
  void* f = kernel(kCoords, "coords");
  const unsigned grid[3] = {3, 2, 5}, block[3] = {32, 4, 2};
  const int w = 96, h = 8, d = 10;
  DeviceBuffer out(sizeof(int) * w * h * d);
  out.fill_bytes(0xff);
  uint64_t ptr = out.ptr();
  void* args[] = {&ptr};
  LaunchConfig c;
  std::memcpy(c.grid, grid, sizeof(grid));
  std::memcpy(c.block, block, sizeof(block));
  launch(f, c, args);
  synchronize();
  std::vector<int> host(w * h * d);
  out.download(host.data(), out.size());
  for (int z = 0; z < d; ++z)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(host[(z * h + y) * w + x], x + 1000 * y + 1000000 * z)
            << x << "," << y << "," << z;
}

// Each thread writes its slice of a shared buffer, then reads another thread's.
constexpr const char* kMirror = R"(
extern "C" __global__ void mirror(float* out, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
)";

TEST_F(GpuRuntime, LargeDynamicSharedMemoryIsRaised) {
  DeviceInfo info = device_info(0);
  ASSERT_GT(info.smem_per_block_optin, 64u * 1024);
  void* f = kernel(kMirror, "mirror");
  int n = 64 * 1024 / sizeof(float);
  DeviceBuffer out(n * sizeof(float));
  out.fill_bytes(0xff);
  uint64_t ptr = out.ptr();
  void* args[] = {&ptr, &n};
  LaunchConfig c;
  c.block[0] = 256;
  c.smem_bytes = 64 * 1024;
  launch(f, c, args);
  launch(f, c, args);  // the limit is already raised
  synchronize();
  std::vector<float> host(n);
  out.download(host.data(), out.size());
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], n - 1 - i) << i;
}

TEST_F(GpuRuntime, OutOfRangeLaunchesAreRefusedBeforeTheDriver) {
  void* f = kernel("extern \"C\" __global__ void nop() {}", "nop");
  LaunchConfig c;
  c.grid[1] = 65536;  // y is limited to 65535: large images must tile in x
  try {
    launch(f, c, nullptr);
    FAIL() << "launched grid y = 65536";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("launch grid (1, 65536, 1) is outside the device's "
                                         "limits (2147483647, 65535, 65535) in y"),
              std::string::npos)
        << e.what();
  }
  c.grid[1] = 1;
  c.block[0] = 2048;
  EXPECT_THROW(launch(f, c, nullptr), InternalError);
  c.block[0] = 1;
  c.smem_bytes = static_cast<unsigned>(device_info(0).smem_per_block_optin) + 1024;
  EXPECT_THROW(launch(f, c, nullptr), InternalError);
}

TEST_F(GpuRuntime, MissingKernelIsAUserError) {
  CompileOptions o;
  o.arch = device_info(0).arch();
  auto m = Module::load(compile("extern \"C\" __global__ void present() {}", "m", o).cubin);
  EXPECT_NE(m->function("present"), nullptr);
  EXPECT_THROW(m->function("absent"), UserError);
}

constexpr const char* kSpin = R"(
extern "C" __global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
)";

TEST_F(GpuRuntime, EventsTimeAKernelOfKnownDuration) {
  void* f = kernel(kSpin, "spin_ns");
  unsigned long long ns = 200000;  // 200 us
  std::vector<float> ms = time_with_events(
      [&](void* stream) {
        void* args[] = {&ns};
        LaunchConfig c;
        c.stream = stream;
        launch(f, c, args);
      },
      3, 20);
  ASSERT_EQ(ms.size(), 20u);
  EXPECT_TRUE(std::is_sorted(ms.begin(), ms.end()));
  EXPECT_GE(ms.front(), 0.2f);
  EXPECT_LT(ms[ms.size() / 2], 0.25f);
}

// A kernel far shorter than its host-side enqueue must still be timed by its device time:
// the runs are queued behind a spin kernel, so the device does not wait for the host.
TEST_F(GpuRuntime, HostEnqueueCostIsNotTimed) {
  void* f = kernel(kSpin, "spin_ns");
  unsigned long long ns = 5000;  // 5 us on the device
  std::vector<float> ms = time_with_events(
      [&](void* stream) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // slow host
        void* args[] = {&ns};
        LaunchConfig c;
        c.stream = stream;
        launch(f, c, args);
      },
      3, 40);
  EXPECT_GE(ms[ms.size() / 2], 0.005f);
  EXPECT_LT(ms[ms.size() / 2], 0.05f) << "the host's 300 us leaked into the device time";
}

// Spins for a number of SM clock cycles: at the device's highest clock that takes
// cycles / clock_khz ms, and longer at any lower clock, never less.
constexpr const char* kSpinCycles = R"(
extern "C" __global__ void spin_cycles(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
)";

TEST_F(GpuRuntime, GraphReplaysTimeEachLaunch) {
  void* f = kernel(kSpinCycles, "spin_cycles");
  const DeviceInfo info = device_info(0);
  const long long cycles = info.clock_khz / 100;  // 10 us at the highest clock
  const int launches = 20;
  const auto spin = [&](long long n) {
    return [f, n](void* stream) {
      long long arg = n;
      void* args[] = {&arg};
      LaunchConfig c;
      c.stream = stream;
      launch(f, c, args);  // the driver copies the argument: `arg` may go out of scope
    };
  };
  // The reference: one kernel spinning as long as all launches together, timed with events,
  // whose few µs of overhead are small next to its 200 µs.
  const std::vector<float> whole = time_with_events(spin(cycles * launches), 3, 10);
  const double reference_ms = whole[whole.size() / 2] / launches;

  CapturedGraph graph(spin(cycles), launches);
  EXPECT_EQ(graph.launches(), launches);
  EXPECT_EQ(graph.node_count(), static_cast<size_t>(launches)) << "one kernel node per launch";
  const std::vector<float> ms = time_graph_replays(graph, 3, 20);
  ASSERT_EQ(ms.size(), 20u);
  EXPECT_TRUE(std::is_sorted(ms.begin(), ms.end()));
  // Per launch, not per replay (which would be 20 times as long): at least the kernel's own
  // 10 µs, and at most the reference plus a launch-to-launch gap of a few µs.
  EXPECT_GE(ms.front(), 0.0099f);
  EXPECT_GE(ms.front(), 0.95 * reference_ms);
  EXPECT_LE(ms[ms.size() / 2], 1.02 * reference_ms + 0.003);

  // Per-run event timing of the same 10 µs kernel, for the log: the overhead graphs remove.
  const std::vector<float> single = time_with_events(spin(cycles), 3, 20);
  std::printf("10 us spin: graph %.2f us/launch, events %.2f us/run, reference %.2f us\n",
              1e3 * ms[ms.size() / 2], 1e3 * single[single.size() / 2], 1e3 * reference_ms);
}

constexpr const char* kAddOne = R"(
extern "C" __global__ void add_one(int* counter) { atomicAdd(counter, 1); }
)";

TEST_F(GpuRuntime, CaptureRecordsWithoutRunningAndReplaysRunEverything) {
  void* f = kernel(kAddOne, "add_one");
  DeviceBuffer counter(sizeof(int));
  counter.fill_bytes(0);
  uint64_t ptr = counter.ptr();
  int calls = 0;
  CapturedGraph graph(
      [&](void* stream) {
        ++calls;
        void* args[] = {&ptr};
        LaunchConfig c;
        c.stream = stream;
        launch(f, c, args);
      },
      5);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(graph.node_count(), 5u);
  synchronize();
  int value = -1;
  counter.download(&value, sizeof(value));
  EXPECT_EQ(value, 0) << "capturing ran the kernels";
  graph.replay();
  graph.replay();
  graph.synchronize();
  counter.download(&value, sizeof(value));
  EXPECT_EQ(value, 10);
  // Replays are ordered after default-stream work queued before them (the graph's stream
  // is a blocking one): the memset lands first, then one replay adds 5.
  counter.fill_bytes(0);
  graph.replay();
  graph.synchronize();
  counter.download(&value, sizeof(value));
  EXPECT_EQ(value, 5);
}

TEST_F(GpuRuntime, FailedCaptureThrowsAndLeavesTheDeviceUsable) {
  void* f = kernel(kAddOne, "add_one");
  DeviceBuffer counter(sizeof(int));
  counter.fill_bytes(0);
  uint64_t ptr = counter.ptr();
  const auto add = [&](void* stream) {
    void* args[] = {&ptr};
    LaunchConfig c;
    c.stream = stream;
    launch(f, c, args);
  };
  // Synchronizing the context is illegal while this thread captures: the capture fails, and
  // the error comes out of the constructor.
  EXPECT_THROW(CapturedGraph(
                   [&](void* stream) {
                     add(stream);
                     synchronize();
                   },
                   2),
               Error);
  synchronize();  // not left capturing, nor with a sticky error
  CapturedGraph graph(add, 3);
  graph.replay();
  graph.synchronize();
  int value = -1;
  counter.download(&value, sizeof(value));
  EXPECT_EQ(value, 3) << "only the good graph's launches ran";
}

// cuBLASLt is timed through graphs too: its matmul must be captured as kernels that compute
// the product only when replayed.
TEST_F(GpuRuntime, CublasLtCallsAreCapturedAndReplayed) {
  bench::GemmWorkload g;
  g.name = "capture";
  g.m = 96, g.n = 80, g.k = 264, g.layout = bench::GemmLayout::kNN;
  DeviceBuffer a(g.a_elems() * 2), b(g.b_elems() * 2), c(g.c_elems() * 2),
      ref(g.c_elems() * sizeof(float));
  bench::fill_uniform_f16(a.ptr(), g.a_elems(), 11, nullptr);
  bench::fill_uniform_f16(b.ptr(), g.b_elems(), 12, nullptr);
  bench::gemm_reference(g, a.ptr(), b.ptr(), ref.ptr(), nullptr);
  bench::CublasLtGemm lt(g);
  const bench::Operands ops{a.ptr(), b.ptr(), c.ptr()};
  // A first call outside capture, as the benchmark makes: kernels load on first use.
  lt.enqueue(ops, nullptr);
  c.fill_bytes(0xff);  // NaN
  CapturedGraph graph([&](void* stream) { lt.enqueue(ops, stream); }, 3);
  EXPECT_GE(graph.node_count(), 3u) << "at least a kernel per matmul";
  EXPECT_EQ(bench::compare_f16(c.ptr(), ref.ptr(), g.c_elems()).nonfinite, g.c_elems())
      << "capturing ran the matmul";
  graph.replay();
  graph.synchronize();
  const bench::Comparison after = bench::compare_f16(c.ptr(), ref.ptr(), g.c_elems());
  EXPECT_EQ(after.nonfinite, 0u);
  EXPECT_LT(after.rel_l2, 2e-3) << lt.algorithm();
  const std::vector<float> ms = time_graph_replays(graph, 2, 5);
  ASSERT_EQ(ms.size(), 5u);
  EXPECT_GT(ms.front(), 0.0f);
}

}  // namespace
}  // namespace tessel::device
