// The CUDA layer of tessel: device query, NVRTC compilation with a persistent on-disk kernel
// cache, module loading and launching through the driver API.
//
// libcuda is loaded at run time (dlopen), so tessel runs on machines without a GPU: there,
// cuda_available() is false and everything else that needs a device throws a UserError
// "no CUDA device: <reason>". NVRTC needs no device: kernels compile for any arch anywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/device_info.h"

namespace tessel::device {

// A CUDA driver call failed on a machine that has a device (out of memory, a faulting kernel,
// an invalid launch). The message names the call and the CUresult by name, e.g.
// CUDA_ERROR_OUT_OF_MEMORY; code() is the raw CUresult, for callers that handle specific
// failures (a tuner may skip a candidate that hits CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
class DriverError : public Error {
 public:
  DriverError(int code, const std::string& message) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};


// True when libcuda loads and a device exists. `reason` (optional) says why not.
bool cuda_available(std::string* reason = nullptr);

// The GPU a thread drives: device 0 (of those CUDA_VISIBLE_DEVICES leaves visible) unless a
// DeviceScope on that thread names another. Every allocation, module load and launch goes to
// the calling thread's GPU, through that GPU's primary context; memory and modules must be
// freed with the same GPU current (a server with a session per GPU holds a scope around each
// session's calls, its destruction included).
int current_gpu();
// The GPUs visible (0 without a driver).
int gpu_count();
// "no CUDA device: <reason>" without a driver; "GPU 2 does not exist: 1 CUDA device(s)
// visible" for an ordinal outside [0, gpu_count()). Both UserErrors.
void check_gpu(int ordinal);
class DeviceScope {
 public:
  // UserError where `ordinal` names no visible GPU.
  explicit DeviceScope(int ordinal);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

// The GPU `ordinal` (-1: the calling thread's, current_gpu()) as the driver reports it, with the
// datasheet peaks of its known_device() row where its arch has one.
DeviceInfo device_info(int ordinal = -1);

// ---- NVRTC ----------------------------------------------------------------------------
struct CompileOptions {
  std::string arch = "sm_90a";     // "sm_80", "sm_90", "sm_90a"
  std::vector<std::string> extra;  // extra nvrtc options, e.g. "-lineinfo"
  // Headers made available to #include, as (name, contents) pairs.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct CompiledKernel {
  std::string cubin;  // SASS for options.arch
  std::string log;    // NVRTC's log, also on success (warnings)
  bool from_cache = false;
};

// NVRTC version as major*1000 + minor*10.
int nvrtc_version();

// Compiles `source`. Every NVRTC call is checked; a failed compile throws an InternalError
// (generated code failing to compile is a compiler bug) that carries the full log and the
// first lines of source around the error. With a cache directory set (see below), results
// are cached by (source hash, headers hash, arch, NVRTC version, options).
CompiledKernel compile(const std::string& source, const std::string& name,
                       const CompileOptions& options);

// The kernel cache directory: $TESSEL_CACHE_DIR (set but empty: no cache), else
// $XDG_CACHE_HOME/tessel, else ~/.cache/tessel; kernels go to its kernels/ folder. Entries are
// written atomically (temp file + rename) with a checksum; a corrupt or truncated entry is
// detected, deleted and rebuilt, never loaded. set_cache_dir() overrides the environment.
std::string cache_dir();
void set_cache_dir(const std::string& dir);  // "" disables the cache

// ---- Driver: modules, launches, memory, events, graphs -----------------------------------
// All of these work on device 0's primary context (the one the CUDA runtime, cuDNN and cuBLAS
// use too); CUDA_VISIBLE_DEVICES chooses the GPU. Driver failures throw DriverError.
class Module {
 public:
  static std::shared_ptr<Module> load(const std::string& cubin);
  ~Module();
  // Raw CUfunction handle; raises UserError if the symbol is missing.
  void* function(const std::string& name) const;

 private:
  explicit Module(void* handle) : handle_(handle) {}
  void* handle_;
};

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;
  void* stream = nullptr;  // CUstream
  // The kernel begins with grid_dependency_wait (tessel_ptx.cuh): it is launched as a
  // programmatic dependent of the kernel before it in the stream, set up ahead and dispatched
  // as that one completes, without the gap of a plain launch (about 0.3 us a kernel on an
  // H200). Taken on GPUs of compute capability 9.0 and up, on a stream other than the legacy
  // default one, unless TESSEL_PDL=0.
  bool programmatic = false;
};
// Launches with cuLaunchKernel (cuLaunchKernelEx where `programmatic` is taken) after raising
// the function's dynamic shared-memory limit when smem_bytes > 48 KiB. Checks grid limits
// (y, z <= 65535) and reports a clear error.
void launch(void* function, const LaunchConfig& config, void** args);

// Device memory owned by RAII.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint64_t ptr() const { return ptr_; }  // CUdeviceptr
  size_t size() const { return size_; }
  // Host -> device, synchronous, into [offset, offset + bytes) of the buffer.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes) const;
  // The same enqueued on `stream` (a CUstream) and not waited for; the host side must be
  // page-locked (a PinnedBuffer's) for the copy to run asynchronously.
  void upload_async(const void* src, size_t bytes, size_t offset, void* stream);
  void download_async(void* dst, size_t bytes, void* stream) const;
  void fill_bytes(uint8_t value);  // e.g. poison with 0xff (NaN for f16/f32)

 private:
  uint64_t ptr_ = 0;
  size_t size_ = 0;
};

// Page-locked host memory owned by RAII (cuMemHostAlloc): the host side of copies the GPU's
// copy engines run at full speed and asynchronously. Pinning is costly and finite; allocate
// once and reuse.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // DriverError where the driver cannot pin `bytes`.
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Copies `bytes` from device address `src` (memory this process did not wrap in a
// DeviceBuffer, e.g. a benchmark's operand set) to host memory, synchronously.
void copy_to_host(void* dst, uint64_t src, size_t bytes);
// Copies `bytes` from device address `src` to device address `dst`, enqueued on `stream` (a
// CUstream; null: the legacy default stream) and not waited for.
void copy_on_device(uint64_t dst, uint64_t src, size_t bytes, void* stream);

// Copies `bytes` between any two addresses of the unified address space (host memory, or
// device memory of any visible GPU: a peer copy where they differ), enqueued on `stream` and
// not waited for; the copy runs asynchronously where host memory is page-locked.
void copy_async(uint64_t dst, uint64_t src, size_t bytes, void* stream);
// The same, synchronous: returns when the bytes are there.
void copy(uint64_t dst, uint64_t src, size_t bytes);

// A stream of the calling thread's GPU, owned. A non-blocking one: it does not order with the
// legacy default stream, so a synchronous copy elsewhere (a server's answer written into GPU
// memory) does not wait for the work queued on it, nor it for that copy; order it with events.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return stream_; }  // CUstream
  void synchronize() const;

 private:
  void* stream_ = nullptr;
};

// An event without timing, owned: one stream records it, another waits on it, or the host does.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(void* stream);             // marks the work queued on `stream` so far
  void make_wait(void* stream) const;    // work queued on `stream` after this waits for it
  void synchronize() const;              // the host waits for it

 private:
  void* event_ = nullptr;  // CUevent
};

// Free and total memory of the current GPU (DeviceScope), as the driver reports them
// (cuMemGetInfo): what every process has allocated, and the driver's own reservations, counted
// as used.
struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};
MemoryInfo memory_info();

void synchronize();

// Times `fn` (which enqueues work on `stream`) with CUDA events: `warmup` runs, then `reps`
// timed runs each bracketed by events; returns per-run milliseconds, sorted. The timed runs
// are queued behind a short spin kernel, so host-side enqueue cost does not leak into the
// device times of short kernels.
std::vector<float> time_with_events(const std::function<void(void* stream)>& fn, int warmup,
                                    int reps, void* stream = nullptr);

// The work of `launches` consecutive calls of fn(stream), captured once into a CUDA graph and
// replayed as a whole on a stream of its own. Replaying removes the per-launch host and
// launch-latency gaps that event timing of single runs counts for kernels of a few µs.
//
// The stream is a blocking one (it orders with the legacy default stream both ways), so work
// queued on the default stream before a replay (a poisoning memset) is done before it, and
// work queued there after (a result check) waits for it. Capture is thread-local: `fn` may
// only enqueue on the stream it is given; anything else (a synchronous copy, an allocation,
// work on the default stream) fails the capture.
class CapturedGraph {
 public:
  // Calls fn(stream) `launches` times under stream capture; nothing runs yet. Throws
  // DriverError when capture fails, and rethrows whatever `fn` throws (a library refusing to
  // run under capture), with the stream left out of capture mode either way.
  CapturedGraph(const std::function<void(void* stream)>& fn, int launches);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void replay();                            // enqueues one replay of the whole graph on stream()
  void replay(void* stream);                // the same on another stream (a CUstream)
  void synchronize();                       // waits until every replay enqueued so far has finished
  void* stream() const { return stream_; }  // CUstream
  int launches() const { return launches_; }
  size_t node_count() const { return nodes_; }  // kernels, memsets, ... the capture recorded

 private:
  void release() noexcept;
  void* stream_ = nullptr;  // CUstream
  void* graph_ = nullptr;   // CUgraph
  void* exec_ = nullptr;    // CUgraphExec
  int launches_ = 0;
  size_t nodes_ = 0;
};

// Times replays of `graph`: `warmup` untimed replays, then `reps` replays each bracketed by
// events; returns the time per launch (replay time / graph.launches()) of each, in ms, sorted.
std::vector<float> time_graph_replays(CapturedGraph& graph, int warmup, int reps);

}  // namespace tessel::device
