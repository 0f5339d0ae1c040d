// Device queries: DeviceInfo from cuDeviceGetAttribute.
#include "device/cuda_api.h"
#include "device/driver.h"

namespace tessel::device {


DeviceInfo device_info(int ordinal) {
  if (ordinal < 0) ordinal = current_gpu();
  check_gpu(ordinal);
  const detail::DriverApi& api = detail::driver();
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
  if (const DeviceInfo* known = find_known_device(info.arch())) {
    info.peak_tensor_tflops = known->peak_tensor_tflops;
    info.peak_tensor_int8_tops = known->peak_tensor_int8_tops;
    info.peak_simt_tflops = known->peak_simt_tflops;
  }
  return info;
}

}  // namespace tessel::device
