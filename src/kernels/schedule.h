// A Schedule: the knobs of a generated contraction kernel. A plain struct, so the tuner
// can enumerate, hash and store it.
#pragma once

#include <string>
#include <vector>

namespace tessel::kernels {

enum class Instruction {
  kMmaSync,  // mma.sync.aligned.m16n8k16 (int8: m16n8k32) (sm_80+), ldmatrix, cp.async pipeline
  kWgmma,    // wgmma.mma_async (sm_90a only), operands from 128B-swizzled shared memory
  kSimt,     // CUDA cores, fp32 FMA: the fallback for contractions that do not qualify
};

// How the CTA walks K. kGemm: the implicit-GEMM pipeline of every instruction (tiles of
// (block_m, block_k) and (block_n, block_k) streamed through a multi-stage shared-memory
// pipeline). kHalo (mma.sync, stride-1 NHWC convolutions, and grouped NHWC convolutions of any
// stride and dilation, contraction/conv_window.h): a persistent CTA keeps all of B (the
// weights, block_n x K; a grouped conv's: its slice of whole groups) in shared memory, stages
// an output tile's input pixels plus their halo once, and ldmatrix gathers the R*S shifted
// windows from there, so each input pixel leaves L2 about once instead of R*S times.
// kTma (wgmma, sm_90a, tessel_tma.cuh): the operand tiles are moved by the tensor memory
// accelerator into a ring of stages that one producer warp fills and one or two consumer
// warpgroups drain through mbarriers (kernels::tma_layout says which problems it maps).
enum class Mainloop { kGemm, kHalo, kTma };

// Threads per warp tile: warp_m x warp_n is the tile of one warp for mma.sync and SIMT, and
// of one warpgroup (4 warps, 128 threads, issuing wgmma together) for wgmma.
constexpr int warps_per_warp_tile(Instruction i) { return i == Instruction::kWgmma ? 4 : 1; }

// "mma.sync", "wgmma" or "SIMT": how engine plans, explain and profile name an instruction.
const char* instruction_name(Instruction i);

struct Schedule {
  Instruction instruction = Instruction::kMmaSync;
  int block_m = 128, block_n = 128, block_k = 32;  // CTA tile
  // Warp tile (wgmma: warpgroup tile, see warps_per_warp_tile); block / warp = warp tiles.
  int warp_m = 64, warp_n = 64;
  int stages = 3;            // shared-memory pipeline depth (mma.sync 2..5, wgmma 3..5)
  int split_k = 1;           // K split across CTAs (fp32 partials; int32 for int8)
  int raster = 8;            // CTA swizzle: tiles grouped by this many rows
  int a_vec = 8, b_vec = 8;  // elements per global load (<= contraction's; 16 of int8)
  // kTma: warp_m x warp_n = block_m x block_n (a consumer warpgroup computes whole tiles,
  // two of them alternate); `ctas` persistent CTAs walk the tiles (0: one per tile).
  // kHalo: the output tile is tile_h x tile_w pixels (block_m = tile_h * tile_w, tile_w a
  // multiple of 16), block_n covers all of N, block_k is the padded K; `ctas` persistent CTAs
  // loop over the tiles (0: one CTA per tile). stages, split_k, raster and the vectors are
  // unused and stay at their defaults.
  Mainloop mainloop = Mainloop::kGemm;
  int tile_w = 0;
  int ctas = 0;
  // A grouped contraction (contraction/grouped.h): the CTA's N tile holds this many whole
  // groups (block_n = groups_per_tile * N per group), each warp fragment one group's. kGemm:
  // block_k is the K of one group per k-tile (whole taps: a multiple of the channels per
  // group); kHalo: block_k is one group's padded K (kernels::HaloLayout). 0: not grouped.
  int groups_per_tile = 0;
  // kTma over a stride-1-wide convolution whose tiles are pixel runs of one output row
  // (out_w a multiple of block_m): A arrives as one box per (kernel row, k-tile), the run's
  // input pixels plus the window's width, and each tap along the row multiplies the box from
  // its own first row (a shifted wgmma descriptor), so that A crosses L2 once per kernel row
  // instead of once per tap (name suffix "_rw"). Else the im2col map's one box per tap.
  bool row_windows = false;

  // kHalo's tile height.
  int tile_h() const { return tile_w > 0 ? block_m / tile_w : 0; }

  // kTma: a producer warpgroup (four warps, one lane of which issues the copies) in place of
  // the producer warp, where a consumer thread holds 128 accumulators or more (warpgroup tiles
  // of 128x128, 64x256), so that setmaxnreg can hand the producer's registers to the consumer
  // warpgroups: 232 per consumer thread where a CTA of 288 threads caps them at 168 (H200,
  // 2026-11-29: the 128x128 kernels of ResNet-50, VGG-16, ConvNeXt-T and ResNeXt-50 at batch
  // 32 5-10% faster, 4096^3 in the cooperative 128x256 tile 202.5 -> 192.6 us).
  bool tma_producer_warpgroup() const {
    return mainloop == Mainloop::kTma && warp_m * warp_n >= 128 * 128;
  }

  // Warp (or warpgroup) tiles per CTA.
  int warp_tiles() const { return (block_m / warp_m) * (block_n / warp_n); }
  int warps() const {
    // kTma: two consumer warpgroups (whole CTA tiles each, or halves of each) and the producer
    // warp (or warpgroup).
    if (mainloop == Mainloop::kTma) return 2 * 4 + (tma_producer_warpgroup() ? 4 : 1);
    return warp_tiles() * warps_per_warp_tile(instruction);
  }
  int threads() const { return 32 * warps(); }
  // "tc_128x128x32_s3_w64x64_sk1_r8", "wgmma_128x256x64_s4_w64x256_sk1_r8",
  // "halo_8x16_n64_w64x32_c132", "tc_64x64x32_s3_w32x32_sk1_r8_g8" (8 groups per tile),
  // "halo_8x16_n32_w64x16_c528_g4",
  // "tma_128x128x64_s4_r8_c132", "tma_256x128x64_s3_r8_c132_w128x128" (cooperative)
  std::string name() const;
  // The kernel family: the name's first word ("tc", "wgmma", "tma", "halo", "simt").
  std::string family() const;
  bool operator==(const Schedule&) const = default;
};

// An order of `ranked` (best-ranked first) that lets every kernel family compete early: the
// first `per_family` schedules of each family, in rank order, then the rest in rank order.
// `tessel tune` measures candidates in this order, so that a cost model fitted on logs in
// which a family lost still has that family's best few measured in a short tune (the int8 TMA
// kernel, once the int8 epilogues changed under it). Returns indices into `ranked`.
std::vector<size_t> family_spread_order(const std::vector<Schedule>& ranked, int per_family);

}  // namespace tessel::kernels
