// The analytical cost model: the time of one generated contraction kernel (Contraction,
// Schedule) on a device, without running it. It ranks schedules for the untuned default
// (default_schedule.h) and answers `tessel predict`.
//
// Tiles are dealt to SMs in rounds of `active` co-resident CTAs (occupancy from threads,
// registers and shared memory). A round lasts the longer of
//  - the SM's shared resources, summed over its CTAs: per k-tile the largest of Tensor Core
//    time, shared-memory time (ldmatrix / wgmma reads and the tile writes), L2 time (the
//    tile's A and B slices: this is where the tile's arithmetic intensity enters) and load
//    issue time (per vector, more for 2-byte register-path loads and gathers); plus the
//    epilogue stores;
//  - one CTA's own serial path: per k-tile its Tensor Core time on the SM sub-partitions its
//    warps cover, or the load latency its pipeline cannot hide (latency / (stages - 1), or
//    the whole latency on the 2-byte register path, which fetches one k-tile ahead); plus the
//    pipeline fill and its epilogue (its stores, and the residual it reads).
// Latency is longer where an operand streams from DRAM (each byte loaded once).
// Registers above 255 spill; split-K adds the last CTA's serial sum of the other splits'
// fp32 partials. DRAM traffic of the unique operands bounds the time from below, and each
// launch adds a fixed overhead.
#pragma once

#include <string>

#include <cstdint>

#include "kernels/contraction/contraction.h"
#include "kernels/arch.h"
#include "kernels/schedule.h"

namespace tessel::kernels {

struct ScheduleEstimate {
  int64_t tiles = 0;           // CTAs: batch * ceil(M/bm) * ceil(N/bn) * split_k
  int64_t k_steps = 0;         // k-tiles a CTA walks per tile (TMA: taps x channel chunks)
  int regs_per_thread = 0;     // estimated; above 255 the kernel spills
  int ctas_per_sm = 0;         // co-resident CTAs (threads, registers, shared memory)
  int64_t waves = 0;           // ceil(tiles / (sm_count * ctas_per_sm))
  double wave_efficiency = 0;  // tiles / (waves * sm_count * ctas_per_sm)
  double quantization = 0;     // padded M*N / real M*N (>= 1)
  double intensity = 0;        // flops per byte of A and B tile loaded from L2
  double cycles = 0;           // predicted kernel time in SM clocks, launch overhead excluded
  // The unique operands' DRAM traffic (<= cycles): at full bandwidth, or at what a streamed
  // operand's bytes in flight allow (Little's law).
  double dram_cycles = 0;
  double microseconds = 0;     // predicted time per launch at the boost clock, launch included
};

// For a schedule that does not fit the SM (ctas_per_sm 0), cycles and microseconds are
// infinite. The schedule must pass check_schedule (kernel_rules.h). `epilogue_read_bytes`: what
// the epilogue reads per output element (contraction::read_bytes_per_output: a residual's
// element); it moves with the stores, and from DRAM. `epilogue_store_bytes`: what it stores per
// output element, the size of its out_dtype (an int8 contraction's C is f32, its store mostly
// i8); 0 charges C's dtype, as the defaults' ranking does (kernels/rank_fit.h's correction was
// fitted on that charge).
ScheduleEstimate estimate(const contraction::Contraction& c, const Schedule& s,
                          const device::DeviceInfo& device, int64_t epilogue_read_bytes = 0,
                          int64_t epilogue_store_bytes = 0);

// Registers per thread of the generated kernel: accumulators, mma.sync fragments
// (double-buffered), split-K sums, register-path staging, address and loop state.
int estimate_regs(const contraction::Contraction& c, const Schedule& s);

// The fixed cost of one launch inside a CUDA graph, in SM clocks of `device`.
double launch_cycles(const device::DeviceInfo& device);

// The cost model's learned correction: measured / estimated time as a function of the kernel
// family (mma.sync, cp.async wgmma, TMA), the shape (ln k-steps per tile, ln tiles per SM, a
// residual read, transcendental activations per output) and a small offset per schedule class,
// fitted by bench/rank_fit.py to tune's own measurements (kernels/rank_fit.h) on the
// architecture they were made on; int8 contractions by families and classes of their own
// (fitted_class). Elsewhere, for other families (halo, SIMT), and for int8 contractions where
// the fit has no int8 measurements, 1. Only ratios between candidates of one contraction are
// meaningful: the fit leaves each contraction's level free. `e`: estimate(c, s, device), whose
// k-steps and tiles it reads (the callers have it: each candidate is estimated once).
double learned_factor(const contraction::Contraction& c, const Schedule& s,
                      const ScheduleEstimate& e, const device::DeviceInfo& device,
                      int64_t epilogue_read_bytes = 0, int epilogue_transcendentals = 0);
// Whether learned_factor corrects c's schedules on `device`: the fit was measured on its
// architecture and has families for c's operands (16-bit, or int8). Where it does, the defaults
// rank c by tuning_rank (default_schedule.h).
bool has_learned_factor(const contraction::Contraction& c, const device::DeviceInfo& device);
// `tessel tune`'s order of candidates, and where has_learned_factor the defaults' ranking
// (default_schedule.h): the estimate's microseconds times learned_factor.
double tuning_rank(const contraction::Contraction& c, const Schedule& s,
                   const device::DeviceInfo& device, int64_t epilogue_read_bytes = 0,
                   int epilogue_transcendentals = 0);
// A schedule's class for the offset: its name's first three fields ("tma_128x128x64_s4"), and a
// cooperative TMA schedule's warpgroup tile after them ("tma_128x256x64_s3_w64x256").
std::string rank_class(const Schedule& s);
// The class the fit names for s on c: rank_class, after "i8_" for an int8 contraction, whose
// k-tiles hold twice the elements ("i8_tc_64x64x64_s3" is not the 16-bit "tc_64x64x64_s3").
std::string fitted_class(const contraction::Contraction& c, const Schedule& s);

}  // namespace tessel::kernels
