// What the generated contraction kernels (codegen/cuda/kernels/tessel_{mma,wgmma,simt}.cuh)
// accept as a schedule, and the shared memory each instantiation takes. The schedule space,
// the default pick and the cost model use these; codegen's can_implement() applies the same
// rules plus those that depend on the whole problem (index maps, epilogue, store map), so a
// schedule rejected here is rejected there too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "contraction/contraction.h"
#include "tune/schedule.h"

namespace tessel::tune {

// Why the kernel templates cannot instantiate `s` for `c` (empty when they can). The rules:
//  - tiles: positive, warp tiles dividing the CTA tile, at most 1024 threads;
//  - mma.sync: warp tiles multiples of 16 (m16n8k16, B fragments two n8 tiles at a time),
//    block_k a multiple of 32 (two k16 steps per k-tile for register double-buffering),
//    2..5 stages;
//  - wgmma: warpgroup tiles of m a multiple of 64 and n 64, 128 or 256 with at most 128 fp32
//    accumulators per thread, block_k a multiple of 64 (128-byte swizzle rows), 3..5 stages;
//  - SIMT: float4 thread tiles (warp 16x32 or 32x16 multiples), no split-K;
//  - operand loads: vectors of 1, 2, 4 or 8 elements, no wider than the contraction's
//    (a_vec/b_vec), each thread on one column of the shared-memory tile with at most 32 rows,
//    Tensor Core tiles swizzled (rows of 64 elements, or 32 for mma.sync); an MN-major operand
//    needs a single K dim;
//  - split-K: every split gets at least one k-tile.
// The shared memory limit is the device's: see smem_bytes and resident_ctas.
std::optional<std::string> check_schedule(const contraction::Contraction& c, const Schedule& s);

// Dynamic shared memory of the kernel: the operand pipeline (A (block_m, block_k, stages) and
// B (block_n, block_k, stages)) or, when larger, the epilogue's fp32 staging (one 16-row slab
// per warp); plus the wgmma swizzle-atom alignment (1 KiB) and the split-K arrival flag.
// SIMT kernels: double-buffered fp32 tiles, and per-warp staging of the whole warp tile.
size_t smem_bytes(const contraction::Contraction& c, const Schedule& s);

}  // namespace tessel::tune
