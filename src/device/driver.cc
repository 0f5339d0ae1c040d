// Loading libcuda at run time, the primary context, and driver error reporting.
#include "device/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>

#include "device/cuda_api.h"

namespace tessel::device {
namespace detail {
namespace {

// The GPU of each thread (DeviceScope); CUDA_VISIBLE_DEVICES chooses which physical GPUs the
// ordinals count.
thread_local int t_gpu = 0;

// cuGetProcAddress has had this signature since CUDA 12.0; older drivers are refused.
constexpr int kMinDriverVersion = 12000;

struct Driver {
  DriverApi api;
  bool ok = false;
  std::string reason;  // why not, when !ok
  int gpus = 0;        // visible devices, read once at load (fixed for the process)
};

std::string version_str(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// Fills `d` or says in d.reason why the driver cannot be used. Never throws: a missing GPU
// is a normal condition, reported through cuda_available().
void load_driver(Driver& d) {
  // RTLD_LOCAL keeps libcuda's symbols out of the global namespace; everything goes through
  // the table. The handle is never closed: entry points must stay valid until exit.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    d.reason = std::string("libcuda.so.1 could not be loaded (") + (err ? err : "unknown") +
               "); is an NVIDIA driver installed?";
    return;
  }
  using GetProcAddress = decltype(&::cuGetProcAddress);  // cuGetProcAddress_v2
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  auto driver_version =
      reinterpret_cast<decltype(&::cuDriverGetVersion)>(dlsym(lib, "cuDriverGetVersion"));
  if (!get_proc || !driver_version) {
    d.reason = "libcuda.so.1 predates CUDA " + version_str(kMinDriverVersion) +
               " (no cuGetProcAddress_v2); update the NVIDIA driver";
    return;
  }
  int version = 0;
  if (CUresult r = driver_version(&version); r != CUDA_SUCCESS) {
    // The toolkit ships a stub libcuda for linking; found at run time, it fails every call.
    d.reason = r == CUDA_ERROR_STUB_LIBRARY
                   ? "libcuda.so.1 is the CUDA toolkit's stub library, not an NVIDIA driver"
                   : "cuDriverGetVersion failed with CUresult " + std::to_string(r);
    return;
  }
  if (version < kMinDriverVersion) {
    d.reason = "the NVIDIA driver supports CUDA " + version_str(version) + ", tessel needs " +
               version_str(kMinDriverVersion) + " or newer";
    return;
  }
  // Ask for the entry points as of the older of the driver and the headers we were built
  // with: their ABI is the one declared in DriverApi. Legacy-stream variants: a null stream
  // means the legacy default stream, as it does for cuDNN and cuBLAS.
  const int request = version < CUDA_VERSION ? version : CUDA_VERSION;
  std::string missing;
#define TESSEL_CU_LOAD(fn)                                                                        \
  {                                                                                               \
    void* p = nullptr;                                                                            \
    CUdriverProcAddressQueryResult status;                                                        \
    if (get_proc(#fn, &p, request, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) == CUDA_SUCCESS && \
        status == CU_GET_PROC_ADDRESS_SUCCESS && p) {                                             \
      d.api.fn = reinterpret_cast<decltype(d.api.fn)>(p);                                         \
    } else {                                                                                      \
      missing += std::string(missing.empty() ? "" : ", ") + #fn;                                  \
    }                                                                                             \
  }
  TESSEL_CU_FUNCTIONS(TESSEL_CU_LOAD)
#undef TESSEL_CU_LOAD
  if (!missing.empty()) {
    d.reason = "libcuda.so.1 (CUDA " + version_str(version) + ") lacks " + missing;
    return;
  }
  if (CUresult r = d.api.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.api.cuGetErrorName(r, &name);
    d.reason = std::string("cuInit failed: ") + (name ? name : "unknown error");
    return;
  }
  int count = 0;
  if (d.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    d.reason = "the NVIDIA driver reports no CUDA device";
    return;
  }
  d.gpus = count;
  d.ok = true;
}

const Driver& loaded_driver() {
  static const Driver* d = [] {
    auto* p = new Driver;  // never destroyed: buffers freed during static destruction use it
    load_driver(*p);
    return p;
  }();
  return *d;
}

struct Context {
  CUcontext ctx = nullptr;
  LaunchLimits limits{};
};

int attribute(const DriverApi& api, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  TESSEL_CU_CHECK(api.cuDeviceGetAttribute(&v, a, dev));
  return v;
}

Context retain_primary_context(const DriverApi& api, int ordinal) {
  Context c;
  CUdevice dev;
  TESSEL_CU_CHECK(api.cuDeviceGet(&dev, ordinal));
  // The primary context is the one the CUDA runtime uses too, so cuDNN and cuBLAS (which go
  // through the runtime) share buffers and modules with tessel without any hand-off.
  TESSEL_CU_CHECK(api.cuDevicePrimaryCtxRetain(&c.ctx, dev));
  using A = CUdevice_attribute;
  const A grid[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                     CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  const A block[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                      CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  for (int i = 0; i < 3; ++i) {
    c.limits.max_grid[i] = static_cast<unsigned>(attribute(api, dev, grid[i]));
    c.limits.max_block[i] = static_cast<unsigned>(attribute(api, dev, block[i]));
  }
  c.limits.max_threads_per_block =
      static_cast<unsigned>(attribute(api, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  c.limits.smem_per_block_optin = static_cast<unsigned>(
      attribute(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  const char* pdl = std::getenv("TESSEL_PDL");
  c.limits.programmatic_launch =
      attribute(api, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) >= 9 &&
      !(pdl && std::string_view(pdl) == "0");
  return c;
}

const Context& primary_context() {
  // Each GPU's is retained exactly once; a failure (say, the device is in exclusive use) is
  // rethrown to every caller rather than cached as a half-built context.
  // All are leaked on purpose, like the Driver: buffers destroyed during static destruction
  // still bind their context to free themselves.
  // Every driver call comes through here, from every serving thread: the last context this
  // thread used is kept, so that the lock is taken only when the thread changes GPU.
  thread_local int t_cached_gpu = -1;
  thread_local const Context* t_cached = nullptr;
  if (t_cached_gpu == t_gpu) return *t_cached;
  static auto* mu = new std::mutex;
  static auto* contexts = new std::map<int, Context*>;
  std::lock_guard lock(*mu);
  Context*& ctx = (*contexts)[t_gpu];
  if (!ctx) ctx = new Context(retain_primary_context(driver(), t_gpu));
  t_cached_gpu = t_gpu;
  t_cached = ctx;
  return *ctx;
}

}  // namespace

const DriverApi& driver() {
  const Driver& d = loaded_driver();
  TESSEL_USER_CHECK(d.ok) << "no CUDA device: " << d.reason;
  return d.api;
}

const DriverApi& bind_context() {
  const DriverApi& api = driver();
  const Context& c = primary_context();
  // The current context is per thread: bind it on whichever thread calls in.
  CUcontext current = nullptr;
  TESSEL_CU_CHECK(api.cuCtxGetCurrent(&current));
  if (current != c.ctx) TESSEL_CU_CHECK(api.cuCtxSetCurrent(c.ctx));
  return api;
}

const LaunchLimits& launch_limits() { return primary_context().limits; }

std::string describe(CUresult result) {
  const Driver& d = loaded_driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.api.cuGetErrorName) d.api.cuGetErrorName(result, &name);
  if (d.api.cuGetErrorString) d.api.cuGetErrorString(result, &text);
  std::ostringstream os;
  if (name) {
    os << name;
  } else {
    os << "CUresult " << static_cast<int>(result);
  }
  if (text) os << " (" << text << ")";
  return os.str();
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  throw DriverError(static_cast<int>(result),
                    std::string("CUDA driver call ") + call + " failed: " + describe(result));
}

}  // namespace detail

int current_gpu() { return detail::t_gpu; }

int gpu_count() { return detail::loaded_driver().gpus; }

void check_gpu(int ordinal) {
  detail::driver();  // "no CUDA device: <reason>" first
  const int count = gpu_count();
  TESSEL_USER_CHECK(ordinal >= 0 && ordinal < count)
      << "GPU " << ordinal << " does not exist: " << count << " CUDA device(s) visible";
}

// A scope on every session call: no driver call, the count was read at load.
DeviceScope::DeviceScope(int ordinal) : previous_(detail::t_gpu) {
  check_gpu(ordinal);
  detail::t_gpu = ordinal;
}

DeviceScope::~DeviceScope() { detail::t_gpu = previous_; }

bool cuda_available(std::string* reason) {
  const detail::Driver& d = detail::loaded_driver();
  if (reason) *reason = d.ok ? "" : d.reason;
  return d.ok;
}

void synchronize() { TESSEL_CU_CHECK(detail::bind_context().cuCtxSynchronize()); }

}  // namespace tessel::device
