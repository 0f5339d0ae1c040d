// The untuned schedule: one analytical estimate of a (Contraction, Schedule) pair on a
// device, the legal schedule space it ranks, and the pick.
//
// The estimate is a roofline over the busiest SM: tiles are dealt to SMs in rounds of
// `resident` co-resident CTAs; each K step of a round costs the largest of its Tensor Core
// time, shared-memory time (ldmatrix reads + cp.async writes), L2 time (the tile's A and B
// slices: this is where the tile's arithmetic intensity enters) and the load latency the
// pipeline cannot hide; each tile adds a pipeline fill and its epilogue store. Split-K adds
// the fp32 partials' round trip. DRAM traffic of the unique operands bounds it from below.
// Wave count, wave efficiency and tile quantisation fall out of the tile counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "contraction/contraction.h"
#include "tune/device_model.h"
#include "tune/schedule.h"

namespace tessel::tune {

// Shared memory of the operand pipeline: smem A (BLK_M, BLK_K, STAGES) and smem B
// (BLK_N, BLK_K, STAGES), in the operands' element types.
size_t smem_bytes(const contraction::Contraction& c, const Schedule& s);

struct ScheduleEstimate {
  int64_t tiles = 0;           // CTAs: batch * ceil(M/bm) * ceil(N/bn) * split_k
  int regs_per_thread = 0;     // estimated from the warp tile
  int ctas_per_sm = 0;         // co-resident CTAs (threads, registers, shared memory)
  int64_t waves = 0;           // ceil(tiles / (sm_count * ctas_per_sm))
  double wave_efficiency = 0;  // tiles / (waves * sm_count * ctas_per_sm)
  double quantization = 0;     // padded M*N / real M*N (>= 1)
  double intensity = 0;        // flops per byte of A and B tile loaded from L2
  double cycles = 0;           // predicted kernel time in SM clocks (plus split-K reduction)
};

// Requires ctas_per_sm >= 1 (a schedule from enumerate_schedules); for one that does not fit
// the SM, ctas_per_sm is 0 and cycles is infinite.
ScheduleEstimate estimate(const contraction::Contraction& c, const Schedule& s,
                          const DeviceInfoLite& device);

// The CUDA-core fallback for contractions that are not Tensor Core eligible: 64x64x16 CTA
// tiles of 256 threads (8 warps of 32x16, 4x4 outputs per thread), double-buffered.
Schedule simt_schedule(const contraction::Contraction& c);

// The legal action space for the tuner: CTA tiles {128x256, 256x128, 128x128, 128x64,
// 64x128, 64x64, 64x32, 32x64} x warp tiles {64x64, 64x32, 32x64, 32x32} dividing them into
// 2..8 warps x block_k {32, 64} x stages 2..5 x split_k {1, 2, 3, 4, 6, 8, 12, 16} (no split
// left without a K tile) x raster {1, 8}, keeping those that fit shared memory and the SM.
// A contraction that is not Tensor Core eligible, or a device below sm_80 (mma.sync
// m16n8k16 needs it), has the SIMT schedule alone.
std::vector<Schedule> enumerate_schedules(const contraction::Contraction& c,
                                          const DeviceInfoLite& device);

// The schedule with the smallest estimate among the space's 3- and 4-stage members, with
// split-K only where the M x N tiles cannot fill the SMs and each split keeps K >= 256.
// Estimates within 2% count as equal; then the least padding, the least split-K and the
// least shared memory win. Raster 8 when the grid is more than one wave and at least 8 tiles
// both ways (the CTAs running together then share A and B tiles in L2), else 1.
Schedule default_schedule(const contraction::Contraction& c, const DeviceInfoLite& device);

}  // namespace tessel::tune
