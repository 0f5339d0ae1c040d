// The one description of a GPU in tessel: what the driver reports about the device present,
// or, for cross-compiling without one, a known device's datasheet facts. The kernel layer's
// schedule chooser, the compiler and the runtime's load-time check all take this struct; the
// architecture's per-SM facts (kernels/arch.h) are looked up from its compute capability.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tessel::device {

struct DeviceInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
  int max_threads_per_block = 0;
  // The opt-in maximum of shared memory per CTA (cudaDevAttrMaxSharedMemoryPerBlockOptin:
  // 163 KiB on A100, 227 KiB on H100), not the 48 KiB default; kernels above 48 KiB opt in.
  size_t smem_per_block_optin = 0;
  size_t smem_per_sm = 0;
  int regs_per_sm = 0;
  size_t l2_bytes = 0;
  size_t global_mem = 0;
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_width = 0;
  // Datasheet peaks, dense: fp16 inputs with fp32 accumulation on Tensor Cores, int8 inputs
  // with int32 accumulation on Tensor Cores (TOP/s), and fp32 FMA on CUDA cores, in TFLOP/s;
  // 0 where tessel does not know the board.
  double peak_tensor_tflops = 0;
  double peak_tensor_int8_tops = 0;
  double peak_simt_tflops = 0;

  // "sm_90a" for Hopper (wgmma allowed), else "sm_XY": the target its cubins are built for.
  std::string arch() const;
  // "sm_90a (NVIDIA H100 SXM, 132 SMs)"
  std::string str() const;
  bool operator==(const DeviceInfo&) const = default;
};

// The GPUs tessel can compile for without having one (a CI runner cross-compiling an engine):
// sm_90a (H100 SXM) and sm_80 (A100 SXM), with the facts the compiler uses.
const std::vector<DeviceInfo>& known_devices();
// The known device of `arch`, or null.
const DeviceInfo* find_known_device(const std::string& arch);
// The known device of `arch`; a UserError naming the known ones for any other.
const DeviceInfo& known_device(const std::string& arch);

}  // namespace tessel::device
