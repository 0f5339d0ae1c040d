// The architecture table: per SM version, the facts the kernel generators and the schedule
// chooser rely on (instruction families, shared memory, register file, occupancy limits,
// Tensor Core rate, bandwidths), frozen and checked at compile time. The device itself is a
// device::DeviceInfo (device/device_info.h); its compute capability picks the row.
#pragma once

#include <cstddef>

#include "device/device_info.h"

namespace tessel::kernels {


// Per-SM facts of one architecture. Occupancy limits are from the CUDA C++ Programming Guide
// ("Technical Specifications per Compute Capability"); rates are per SM per clock, from the
// whitepapers (peak dense Tensor Core throughput = SMs x clock x rate) and public
// microbenchmarks (bandwidths), except where the table says a value was fitted to
// measurements. They rank schedules; the tuner's measurements calibrate them.
// Tensor Core instruction families an architecture has (bit flags of ArchFacts::instructions):
// mma.sync m16n8k16 f16/bf16 -> f32 and m16n8k32 s8 -> s32 (PTX ISA "Warp-level matrix
// multiply-accumulate instructions", sm_80+), wgmma f16 (K=16) and s8 (K=32) from shared memory
// (PTX ISA "Asynchronous warpgroup level matrix multiply-accumulate", sm_90a only).
enum InstructionFamily : unsigned {
  kMmaSyncF16 = 1u << 0,
  kMmaSyncS8 = 1u << 1,
  kWgmmaF16 = 1u << 2,
  kWgmmaS8 = 1u << 3,
};

struct ArchFacts {
  int cc;  // 10 * major + minor
  unsigned instructions;    // InstructionFamily flags
  int smem_per_block_kib;   // opt-in maximum of shared memory per CTA
  int max_threads_per_sm;
  int max_ctas_per_sm;
  int regs_per_sm;          // 32-bit registers
  int mma_flops_per_clk;    // mma.sync m16n8k16 f16 -> f32 (A100: 312 TFLOP/s / 108 / 1.41 GHz)
  int wgmma_flops_per_clk;  // wgmma f16 -> f32; 0 where the architecture has none
  int mma_s8_ops_per_clk;   // mma.sync m16n8k32 s8 -> s32 (A100: 624 TOPS / 108 / 1.41 GHz)
  int wgmma_s8_ops_per_clk;  // wgmma s8 -> s32; 0 where the architecture has none
  int fma_flops_per_clk;    // fp32 FMA on CUDA cores (2 flops per lane)
  int l2_bytes_per_clk;     // L2 -> SM
  int dram_bytes_per_clk;   // device memory bandwidth / SMs
  int clock_mhz;            // SM boost clock, to turn cycles into time
};

// The table row of the newest architecture at or below the device's compute capability
// (sm_80's for anything older, which the Tensor Core path does not support anyway).
const ArchFacts& arch_facts(const device::DeviceInfo& device);

// wgmma exists in the arch-specific sm_90a target only, whose code runs on compute capability
// 9.0 alone (not on later architectures, unlike sm_80 code).
bool has_wgmma(const device::DeviceInfo& device);

// How many CTAs of `threads` threads, `regs_per_thread` registers each and `smem_bytes` of
// shared memory fit on one SM at once (0 if not even one). Each CTA also takes 1 KiB of
// shared memory the CUDA runtime reserves; the SM's capacity is smem_per_block plus that
// reservation (164/163 KiB on A100, 228/227 KiB on H100, 100/99 KiB on sm_86 and sm_89).
int resident_ctas(const device::DeviceInfo& device, int threads, int regs_per_thread,
                  size_t smem_bytes);

}  // namespace tessel::kernels
