// The untuned schedule: the legal schedule space the tuner searches, and the pick the
// compiler makes without measuring, ranked by the cost model (estimate.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/contraction/contraction.h"
#include "kernels/arch.h"
#include "kernels/estimate.h"
#include "kernels/kernel_rules.h"
#include "kernels/schedule.h"

namespace tessel::kernels {

// The CUDA-core fallback for contractions that are not Tensor Core eligible: 64x64x16 CTA
// tiles of 256 threads (8 warps of 32x16, 4x4 outputs per thread), double-buffered.
Schedule simt_schedule(const contraction::Contraction& c);

// A halo schedule (Mainloop::kHalo, tessel_halo.cuh) for a stride-1 NHWC convolution: output
// tiles of tile_h x tile_w pixels, warp tiles warp_m x warp_n, block_n = N rounded up to
// warp_n, block_k = the padded K (kernel_h * kernel_w * channels rounded up to 16), `ctas`
// persistent CTAs (0: one per tile). groups_per_tile > 0: a grouped convolution's halo
// kernel (kernel_rules.h, HaloLayout), block_n = groups_per_tile whole groups and block_k one
// group's padded K. Whether it is legal is check_schedule's to say.
Schedule halo_schedule(const contraction::Contraction& c, int tile_h, int tile_w, int warp_m,
                       int warp_n, int ctas, int groups_per_tile = 0);

// The schedule a name (Schedule::name()) spells, for `c` (a halo name leaves block_k to
// `c`'s window); nothing when the text is no schedule name. Legality is check_schedule's.
// A TMA schedule (Mainloop::kTma, tessel_tma.cuh): whole (block_m, block_n) tiles per consumer
// warpgroup ("ping-pong"), or where `cooperative` both warpgroups on each tile, half of its rows
// each (warp_m = block_m / 2); block_k 64 (one 128-byte row of f16; int8 callers double it,
// 64-byte rows halve it); `ctas` persistent CTAs (0: one per tile).
Schedule tma_schedule(int block_m, int block_n, int stages, int raster, int ctas,
                      bool cooperative = false);

std::optional<Schedule> parse_schedule(const std::string& name, const contraction::Contraction& c);

// The legal action space for the tuner. mma.sync (sm_80+): CTA tiles from 256x128 / 128x256
// down to 32x32 (and the skinny 128x32, 32x128, 256x32) x warp tiles 64x64, 64x32, 32x64,
// 32x32, 32x16, 16x32, 16x16 giving 2..8 warps x block_k {32, 64, 128} ({64, 128, 256} for
// int8: the same bytes) x stages 2..5. wgmma (compute capability 9.0 only): CTA tiles 64x64 to
// 256x128 x warpgroup tiles {64x64, 64x128, 64x256, 128x64, 128x128} giving 1 or 2 warpgroups
// x block_k {64, 128} x stages 3..5. Each with split_k {1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16} and
// raster {1, 8}, keeping those that pass check_schedule and fit the SM (shared memory,
// registers). Vectors are the contraction's widest (a_vec, b_vec, at most 8; 16 for int8). A
// contraction that is not Tensor Core eligible, or a device below sm_80 (mma.sync m16n8k16
// needs it), has the SIMT schedule alone.
std::vector<Schedule> enumerate_schedules(const contraction::Contraction& c,
                                          const device::DeviceInfo& device);

// The packed-groups schedule (Schedule::groups_per_tile, contraction/grouped.h) of a grouped
// contraction: N tiles of 64 channels of whole groups (32 for groups of 8; one group when a
// group has 64 or more), k-tiles of whole taps (32 or a multiple of 64 columns), 4 warps of
// 16-, 32- or 64-channel warp tiles, the largest M tile of 128, 64 or 32 with at most 16 KiB of
// A per stage that still gives every SM two CTAs, the deepest pipeline of 4, 3 or 2 stages (no
// more than the k-tiles) that keeps two CTAs per SM. Nothing, and why in `why`, where the kernel
// cannot take the contraction (e.g. groups of fewer than 8 output channels, int8 operands).
std::optional<Schedule> packed_groups_schedule(const contraction::Contraction& c,
                                               const device::DeviceInfo& device,
                                               std::string* why = nullptr);

// The grouped halo schedule (kernels::HaloLayout) of a grouped NHWC convolution: N tiles of
// whole groups up to 32 channels (64 where a group has more than 16), output tiles of 8 x 16
// pixels (an even image height up to 16: the whole height) in warp tiles of 32 pixels, 8 CTAs
// per SM (a multiple of the slices). Nothing where
// the kernel cannot take it (channels per group not a multiple of 8, int8), a strided conv
// has more than 8 input channels per group, the output width wastes more than 1/7 of a
// 16-wide tile, or the work is too little for the SMs (a slice's tile per SM).
std::optional<Schedule> grouped_halo_schedule(const contraction::Contraction& c,
                                              const device::DeviceInfo& device);

// Groups of at least this many output channels fill a dense GEMM tile well enough (112 of a
// 128-wide tile; 32 of a 32-wide one) that, where neither grouped kernel takes them, the dense
// GEMM kernels run them as a batch of per-group GEMMs rather than the direct CUDA-core kernel.
inline constexpr int64_t kDenseGroupsMinChannels = 32;

// Whether `c` is a grouped contraction whose groups the dense GEMM kernels may run as a batch:
// at least kDenseGroupsMinChannels output channels per group and input channels per group a
// multiple of 8 (16-byte loads that stay inside a group). Narrower groups, where the grouped
// kernels refuse them, run off Tensor Cores (the direct grouped kernel).
bool dense_groups_wide(const contraction::Contraction& c);

// Whether schedule `s`'s kernel runs a grouped contraction's groups as its batch dim: the
// mma.sync kernel, whose loaders and stores address each group's channels through the batch
// (checked on the GPU with int8 groups; tests/gpu's dense_group_problems check f16 and bf16).
// The TMA kernel computes one GEMM (kernel_rules.cc); the cp.async wgmma kernel shares the
// mma.sync kernel's loaders, but the defaults and the tuner offer grouped contractions to the
// kernel whose grouped batch a GPU run has checked, mma.sync, alone.
bool runs_groups_as_batch(const Schedule& s);

// The schedules of the grouped kernels that `tessel tune` measures for a grouped contraction
// (the GEMM space runs groups as a batch of N = channels-per-group problems, which no grouped
// kernel loses to): the packed-groups default with M tiles of 32, 64 and 128 and 2 to 4
// stages, then grouped halo schedules (slices of 1 to 8 groups, output tiles 16 wide and 4, 7,
// 8, 14 or 16 high, 2 to 16 warps) nearest the default's shape first. All legal and fitting
// the device; empty for other contractions.
std::vector<Schedule> grouped_schedules(const contraction::Contraction& c,
                                        const device::DeviceInfo& device);

// The default, picked without measuring: among the default kernels (a fixed list of
// configurations measured on an H100 across the public workloads, each with its measured
// residual against the estimate) with split-K from the space's list where the M x N tiles
// cannot fill the SMs and each split keeps K >= 128, the one with the smallest estimate. Estimates
// within 2% count as equal; then the least split-K wins. Raster 8, the TMA kernel's raster 1 (see
// default_schedule.cc). Falls back to the whole space where no default kernel fits the device.
// int8 contractions take the mma.sync defaults with block_k doubled (128x128x64, 128x64x64,
// 64x64x64, ...: the same bytes per k-tile as the f16 kernels) and the TMA kernel's with 128,
// 16-byte vectors, ranked on the int8 Tensor Core rate.
// mma_sync_only: the plain mma.sync kernel's defaults only (no halo, packed groups or wgmma),
// for what only that kernel does (an A prologue, contraction/epilogue.h).
// epilogue_read_bytes: what the epilogue reads per output element (a residual's bytes,
// contraction::read_bytes_per_output), charged as estimate() charges it;
// epilogue_transcendentals: its transcendental activations per output
// (contraction::transcendentals_per_output).
// On the architecture of kernels/rank_fit.h (Hopper), contractions of the dtypes it measured
// (16-bit, and int8 by families of its own: has_learned_factor) are ranked by the estimate times
// learned_factor (estimate.h) instead of the table's residuals, and the halo kernel keeps a
// windowed conv of more than 16 output channels only where the TMA kernel cannot walk its taps
// in whole 64-channel chunks.
Schedule default_schedule(const contraction::Contraction& c, const device::DeviceInfo& device,
                          bool mma_sync_only = false, int64_t epilogue_read_bytes = 0,
                          int epilogue_transcendentals = 0);

}  // namespace tessel::kernels
