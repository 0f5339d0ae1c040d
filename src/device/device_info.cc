// Known devices and the spelling of a DeviceInfo.
#include "device/device_info.h"

#include "core/error.h"

namespace tessel::device {

std::string DeviceInfo::arch() const {
  // Hopper's wgmma and setmaxnreg exist only in the arch-specific sm_90a target; code built
  // for it runs on compute capability 9.0 alone, which is exactly the device we describe.
  std::string arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major == 9 && cc_minor == 0) arch += "a";
  return arch;
}

std::string DeviceInfo::str() const {
  return arch() + " (" + name + ", " + std::to_string(sm_count) + " SMs)";
}

const std::vector<DeviceInfo>& known_devices() {
  // Shared memory is the opt-in maximum per CTA (cudaDevAttrMaxSharedMemoryPerBlockOptin).
  // Peaks from the datasheets, dense (no sparsity), SXM boards: H100 989.4 TFLOP/s fp16 Tensor
  // Core, 1978.9 TOP/s int8 Tensor Core and 66.9 fp32; A100 312, 624 and 19.5. Memory and
  // clocks as the boards report them.
  static const std::vector<DeviceInfo> devices = {
      {.name = "NVIDIA H100 SXM", .cc_major = 9, .cc_minor = 0, .sm_count = 132,
       .max_threads_per_block = 1024, .smem_per_block_optin = 227 * 1024,
       .smem_per_sm = 228 * 1024, .regs_per_sm = 65536, .l2_bytes = 50 << 20,
       .global_mem = size_t{80} << 30, .clock_khz = 1980000, .peak_tensor_tflops = 989.4,
       .peak_tensor_int8_tops = 1978.9, .peak_simt_tflops = 66.9},
      {.name = "NVIDIA A100 SXM", .cc_major = 8, .cc_minor = 0, .sm_count = 108,
       .max_threads_per_block = 1024, .smem_per_block_optin = 163 * 1024,
       .smem_per_sm = 164 * 1024, .regs_per_sm = 65536, .l2_bytes = 40 << 20,
       .global_mem = size_t{80} << 30, .clock_khz = 1410000, .peak_tensor_tflops = 312.0,
       .peak_tensor_int8_tops = 624.0, .peak_simt_tflops = 19.5},
  };
  return devices;
}

const DeviceInfo* find_known_device(const std::string& arch) {
  for (const DeviceInfo& d : known_devices())
    if (d.arch() == arch) return &d;
  return nullptr;
}

const DeviceInfo& known_device(const std::string& arch) {
  if (const DeviceInfo* d = find_known_device(arch)) return *d;
  std::string known;
  for (const DeviceInfo& d : known_devices())
    known += (known.empty() ? "" : ", ") + d.arch() + " (" + d.name + ")";
  TESSEL_USER_ERROR() << "unknown target '" << arch << "': tessel compiles for " << known;
  return known_devices().front();
}

}  // namespace tessel::device
