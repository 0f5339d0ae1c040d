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
  // Core and 66.9 fp32; A100 312 and 19.5. Memory and clocks as the boards report them.
  static const std::vector<DeviceInfo> devices = [] {
    DeviceInfo h100;
    h100.name = "NVIDIA H100 SXM";
    h100.cc_major = 9, h100.cc_minor = 0;
    h100.sm_count = 132;
    h100.max_threads_per_block = 1024;
    h100.smem_per_block_optin = 227 * 1024;
    h100.smem_per_sm = 228 * 1024;
    h100.regs_per_sm = 65536;
    h100.l2_bytes = 50 * 1024 * 1024;
    h100.global_mem = size_t{80} << 30;
    h100.clock_khz = 1980000;
    h100.peak_tensor_tflops = 989.4;
    h100.peak_simt_tflops = 66.9;
    DeviceInfo a100;
    a100.name = "NVIDIA A100 SXM";
    a100.cc_major = 8, a100.cc_minor = 0;
    a100.sm_count = 108;
    a100.max_threads_per_block = 1024;
    a100.smem_per_block_optin = 163 * 1024;
    a100.smem_per_sm = 164 * 1024;
    a100.regs_per_sm = 65536;
    a100.l2_bytes = 40 * 1024 * 1024;
    a100.global_mem = size_t{80} << 30;
    a100.clock_khz = 1410000;
    a100.peak_tensor_tflops = 312.0;
    a100.peak_simt_tflops = 19.5;
    return std::vector<DeviceInfo>{h100, a100};
  }();
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
