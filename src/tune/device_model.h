// What the schedule chooser knows about a GPU: the few facts the runtime reports
// (DeviceInfoLite, bridged from runtime DeviceInfo) and, per architecture, a frozen table of
// the rest (occupancy limits, Tensor Core rate, bandwidths) for the analytical estimate.
#pragma once

#include <cstddef>

namespace tessel::tune {

struct DeviceInfoLite {
  int sm_count = 0;
  // The opt-in maximum of shared memory per CTA (cudaDevAttrMaxSharedMemoryPerBlockOptin:
  // 163 KiB on A100, 227 KiB on H100), not the 48 KiB default; kernels above 48 KiB opt in.
  size_t smem_per_block = 0;
  int cc_major = 0, cc_minor = 0;
};

// Per-SM facts of one architecture. Occupancy limits are from the CUDA C++ Programming Guide
// ("Technical Specifications per Compute Capability"); rates are per SM per clock, from the
// whitepapers (peak dense Tensor Core throughput = SMs x clock x rate) and public
// microbenchmarks (bandwidths), except where the table says a value was fitted to
// measurements. They rank schedules; the tuner's measurements calibrate them.
struct ArchFacts {
  int cc;  // 10 * major + minor
  int max_threads_per_sm;
  int max_ctas_per_sm;
  int regs_per_sm;          // 32-bit registers
  int mma_flops_per_clk;    // mma.sync m16n8k16 f16 -> f32 (A100: 312 TFLOP/s / 108 / 1.41 GHz)
  int wgmma_flops_per_clk;  // wgmma f16 -> f32; 0 where the architecture has none
  int fma_flops_per_clk;    // fp32 FMA on CUDA cores (2 flops per lane)
  int l2_bytes_per_clk;     // L2 -> SM
  int dram_bytes_per_clk;   // device memory bandwidth / SMs
  int clock_mhz;            // SM boost clock, to turn cycles into time
};

// The table row of the newest architecture at or below the device's compute capability
// (sm_80's for anything older, which the Tensor Core path does not support anyway).
const ArchFacts& arch_facts(const DeviceInfoLite& device);

// wgmma exists in the arch-specific sm_90a target only, whose code runs on compute capability
// 9.0 alone (not on later architectures, unlike sm_80 code).
bool has_wgmma(const DeviceInfoLite& device);

// How many CTAs of `threads` threads, `regs_per_thread` registers each and `smem_bytes` of
// shared memory fit on one SM at once (0 if not even one). Each CTA also takes 1 KiB of
// shared memory the CUDA runtime reserves; the SM's capacity is smem_per_block plus that
// reservation (164/163 KiB on A100, 228/227 KiB on H100, 100/99 KiB on sm_86 and sm_89).
int resident_ctas(const DeviceInfoLite& device, int threads, int regs_per_thread,
                  size_t smem_bytes);

}  // namespace tessel::tune
