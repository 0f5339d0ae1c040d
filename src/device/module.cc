// Modules (loaded cubins) and kernel launches.
#include <sstream>

#include "device/cuda_api.h"
#include "device/driver.h"

namespace tessel::device {
namespace {

std::string dims(const unsigned d[3]) {
  std::ostringstream os;
  os << "(" << d[0] << ", " << d[1] << ", " << d[2] << ")";
  return os.str();
}

// Raises `f`'s dynamic shared-memory limit to `bytes` unless it is already that high. The
// attribute sticks to the function, so only its first launch pays for the set; reading it is
// a host-side lookup in the driver.
void raise_dynamic_smem_limit(const detail::DriverApi& api, CUfunction f, unsigned bytes) {
  int limit = 0;
  TESSEL_CU_CHECK(
      api.cuFuncGetAttribute(&limit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  if (static_cast<unsigned>(limit) >= bytes) return;
  int static_smem = 0;
  TESSEL_CU_CHECK(api.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  const unsigned optin = detail::launch_limits().smem_per_block_optin;
  TESSEL_ICHECK(static_cast<size_t>(static_smem) + bytes <= optin)
      << "kernel needs " << static_smem << " B static + " << bytes
      << " B dynamic shared memory; the device allows " << optin << " B per block";
  TESSEL_CU_CHECK(api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(bytes)));
}

}  // namespace

std::shared_ptr<Module> Module::load(const std::string& cubin) {
  TESSEL_ICHECK(!cubin.empty()) << "Module::load: empty cubin";
  const detail::DriverApi& api = detail::bind_context();
  CUmodule module = nullptr;
  TESSEL_CU_CHECK(api.cuModuleLoadData(&module, cubin.data()));
  return std::shared_ptr<Module>(new Module(module));
}

Module::~Module() {
  // A destructor cannot report an error; at process exit the driver may already be shut down
  // (CUDA_ERROR_DEINITIALIZED), which releases the module anyway.
  try {
    detail::bind_context().cuModuleUnload(static_cast<CUmodule>(handle_));
  } catch (const Error&) {
  }
}

void* Module::function(const std::string& name) const {
  const detail::DriverApi& api = detail::bind_context();
  CUfunction f = nullptr;
  CUresult r = api.cuModuleGetFunction(&f, static_cast<CUmodule>(handle_), name.c_str());
  TESSEL_USER_CHECK(r != CUDA_ERROR_NOT_FOUND)
      << "kernel '" << name << "' is not defined in the loaded module (is it extern \"C\"?)";
  TESSEL_CU_CHECK(r);
  return f;
}

void launch(void* function, const LaunchConfig& config, void** args) {
  TESSEL_ICHECK(function != nullptr) << "launch: null function";
  const detail::DriverApi& api = detail::bind_context();
  const detail::LaunchLimits& lim = detail::launch_limits();
  // Out-of-range dimensions are a code generator's bug (it must tile large problems, e.g. put
  // the 90000 row tiles of a 4K image in grid x, not y); say which limit was hit, rather than
  // leave the driver's bare CUDA_ERROR_INVALID_VALUE.
  unsigned long long threads = 1;
  for (int i = 0; i < 3; ++i) {
    const char axis = "xyz"[i];
    TESSEL_ICHECK(config.grid[i] >= 1 && config.grid[i] <= lim.max_grid[i])
        << "launch grid " << dims(config.grid) << " is outside the device's limits "
        << dims(lim.max_grid) << " in " << axis;
    TESSEL_ICHECK(config.block[i] >= 1 && config.block[i] <= lim.max_block[i])
        << "launch block " << dims(config.block) << " is outside the device's limits "
        << dims(lim.max_block) << " in " << axis;
    threads *= config.block[i];
  }
  TESSEL_ICHECK(threads <= lim.max_threads_per_block)
      << "launch block " << dims(config.block) << " has " << threads
      << " threads; the device allows " << lim.max_threads_per_block;

  // Without opting in, static plus dynamic shared memory must stay within 48 KiB: the
  // function's default dynamic limit is 48 KiB minus its static size, so compare against it.
  auto f = static_cast<CUfunction>(function);
  if (config.smem_bytes > 0) raise_dynamic_smem_limit(api, f, config.smem_bytes);

  const bool programmatic =
      config.programmatic && config.stream != nullptr && lim.programmatic_launch;
  CUresult r;
  if (programmatic) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c{};
    c.gridDimX = config.grid[0];
    c.gridDimY = config.grid[1];
    c.gridDimZ = config.grid[2];
    c.blockDimX = config.block[0];
    c.blockDimY = config.block[1];
    c.blockDimZ = config.block[2];
    c.sharedMemBytes = config.smem_bytes;
    c.hStream = static_cast<CUstream>(config.stream);
    c.attrs = &attribute;
    c.numAttrs = 1;
    r = api.cuLaunchKernelEx(&c, f, args, nullptr);
  } else {
    r = api.cuLaunchKernel(f, config.grid[0], config.grid[1], config.grid[2], config.block[0],
                           config.block[1], config.block[2], config.smem_bytes,
                           static_cast<CUstream>(config.stream), args, nullptr);
  }
  if (r != CUDA_SUCCESS) {
    throw DriverError(static_cast<int>(r),
                      std::string(programmatic ? "cuLaunchKernelEx (programmatic)" : "cuLaunchKernel") +
                          " with grid " + dims(config.grid) + ", block " +
                          dims(config.block) + ", " + std::to_string(config.smem_bytes) +
                          " B dynamic shared memory failed: " + detail::describe(r));
  }
}

}  // namespace tessel::device
