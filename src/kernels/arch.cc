#include "kernels/arch.h"

#include <algorithm>
#include <array>

namespace tessel::kernels {
namespace {

// Sorted by cc. Columns: cc, threads/SM, CTAs/SM, registers/SM, then per SM per clock:
// mma.sync flops, wgmma flops, mma.sync int8 ops, wgmma int8 ops, fp32 FMA flops, L2 bytes,
// DRAM bytes; then the boost clock. Dense int8 Tensor Core rates are twice the f16 ones on
// every row (datasheets: A100 624 TOPS, A10 250, L4 242, H100 SXM 1979 with wgmma; Hopper's
// mma.sync issues at half its wgmma rate, as for f16).
//  sm_80 (A100 80GB): 312 TFLOP/s / (108 SMs * 1.41 GHz) = 2048; L2 5120 B/clk (whitepaper)
//        / 108; DRAM 2.0 TB/s / (108 * 1.41 GHz).
//  sm_86 (A10): 125 TFLOP/s / (72 * 1.695 GHz) = 1024; DRAM 600 GB/s -> 5.
//  sm_89 (L4, L40S, RTX 4090): 121 TFLOP/s / (58 * 2.04 GHz) = 1024; DRAM 2.4..3.1.
//  sm_90 (H100 SXM): wgmma 989 TFLOP/s / (132 * 1.83 GHz) = 4096; mma.sync issues at half
//        that rate. Clock: the 1980 MHz the measured H100 reports as its maximum; DRAM
//        3.35 TB/s / (132 * 1.98 GHz). L2: fitted to the H100 measurements of
//        estimate.cc (per-k-tile operand traffic of the generated kernels).
// L2 rates of sm_86 and sm_89 are not published per clock: estimates.
// Shared memory per CTA: the opt-in maxima of the CUDA C++ Programming Guide's table.
constexpr unsigned kAmpere = kMmaSyncF16 | kMmaSyncS8;
constexpr unsigned kHopper = kAmpere | kWgmmaF16 | kWgmmaS8;
constexpr std::array<ArchFacts, 4> kArchFacts = {{
    {80, kAmpere, 163, 2048, 32, 65536, 2048, 0, 4096, 0, 128, 47, 13, 1410},
    {86, kAmpere, 99, 1536, 16, 65536, 1024, 0, 2048, 0, 256, 32, 5, 1695},
    {89, kAmpere, 99, 1536, 24, 65536, 1024, 0, 2048, 0, 256, 32, 3, 2040},
    {90, kHopper, 227, 2048, 32, 65536, 2048, 4096, 4096, 8192, 256, 33, 13, 1980},
}};

constexpr bool sorted_by_cc() {
  for (size_t i = 1; i < kArchFacts.size(); ++i)
    if (kArchFacts[i - 1].cc >= kArchFacts[i].cc) return false;
  return true;
}
static_assert(sorted_by_cc(), "kArchFacts must be sorted by compute capability");

constexpr size_t kReservedSmemPerCta = 1024;

}  // namespace

const ArchFacts& arch_facts(const device::DeviceInfo& device) {
  int cc = 10 * device.cc_major + device.cc_minor;
  const ArchFacts* best = &kArchFacts[0];
  for (const ArchFacts& f : kArchFacts)
    if (f.cc <= cc) best = &f;
  return *best;
}

bool has_wgmma(const device::DeviceInfo& device) {
  // The sm_90 row also describes later architectures for occupancy, but wgmma exists in the
  // sm_90a target alone.
  return device.cc_major == 9 && device.cc_minor == 0 &&
         (arch_facts(device).instructions & kWgmmaF16) != 0;
}

int resident_ctas(const device::DeviceInfo& device, int threads, int regs_per_thread,
                  size_t smem_bytes) {
  if (smem_bytes > device.smem_per_block_optin || threads <= 0) return 0;
  const ArchFacts& f = arch_facts(device);
  // Registers are allocated per warp in units of 256 (8 per thread).
  int regs = (regs_per_thread + 7) / 8 * 8;
  int by_threads = f.max_threads_per_sm / threads;
  int by_regs = f.regs_per_sm / (regs * threads);
  int by_smem = static_cast<int>((device.smem_per_block_optin + kReservedSmemPerCta) /
                                 (smem_bytes + kReservedSmemPerCta));
  return std::min({by_threads, by_regs, by_smem, f.max_ctas_per_sm});
}

}  // namespace tessel::kernels
