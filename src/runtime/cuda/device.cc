// Device queries: DeviceInfo from cuDeviceGetAttribute.
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/driver.h"

namespace tessel::runtime::cuda {

std::string DeviceInfo::arch() const {
  // Hopper's wgmma and setmaxnreg exist only in the arch-specific sm_90a target; code built
  // for it runs on compute capability 9.0 alone, which is exactly the device we describe.
  std::string arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major == 9 && cc_minor == 0) arch += "a";
  return arch;
}

DeviceInfo device_info(int ordinal) {
  const detail::DriverApi& api = detail::driver();
  int count = 0;
  TESSEL_CU_CHECK(api.cuDeviceGetCount(&count));
  TESSEL_USER_CHECK(ordinal >= 0 && ordinal < count)
      << "CUDA device " << ordinal << " does not exist: " << count << " device(s) visible";
  CUdevice dev;
  TESSEL_CU_CHECK(api.cuDeviceGet(&dev, ordinal));

  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  TESSEL_CU_CHECK(api.cuDeviceGetName(name, sizeof(name) - 1, dev));
  info.name = name;
  auto get = [&](CUdevice_attribute a) {
    int v = 0;
    TESSEL_CU_CHECK(api.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = get(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_threads_per_block = get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.smem_per_block_optin =
      static_cast<size_t>(get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  info.smem_per_sm =
      static_cast<size_t>(get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  info.regs_per_sm = get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  info.l2_bytes = static_cast<size_t>(get(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  info.clock_khz = get(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.mem_clock_khz = get(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.mem_bus_width = get(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  size_t total = 0;
  TESSEL_CU_CHECK(api.cuDeviceTotalMem(&total, dev));
  info.global_mem = total;
  return info;
}

}  // namespace tessel::runtime::cuda
