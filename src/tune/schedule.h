// A Schedule: the knobs of a generated contraction kernel. A plain struct, so the tuner
// can enumerate, hash and store it.
#pragma once

#include <string>

namespace tessel::tune {

enum class Instruction {
  kMmaSync,  // mma.sync.aligned.m16n8k16 (sm_80+), ldmatrix, cp.async pipeline
  kWgmma,    // wgmma.mma_async (sm_90a only), operands from 128B-swizzled shared memory
  kSimt,     // CUDA cores, fp32 FMA: the fallback for contractions that do not qualify
};

// Threads per warp tile: warp_m x warp_n is the tile of one warp for mma.sync and SIMT, and
// of one warpgroup (4 warps, 128 threads, issuing wgmma together) for wgmma.
constexpr int warps_per_warp_tile(Instruction i) { return i == Instruction::kWgmma ? 4 : 1; }

struct Schedule {
  Instruction instruction = Instruction::kMmaSync;
  int block_m = 128, block_n = 128, block_k = 32;  // CTA tile
  // Warp tile (wgmma: warpgroup tile, see warps_per_warp_tile); block / warp = warp tiles.
  int warp_m = 64, warp_n = 64;
  int stages = 3;            // shared-memory pipeline depth (mma.sync 2..5, wgmma 3..5)
  int split_k = 1;           // K split across CTAs (fp32 partials)
  int raster = 8;            // CTA swizzle: tiles grouped by this many rows
  int a_vec = 8, b_vec = 8;  // elements per global load (<= contraction's)

  // Warp (or warpgroup) tiles per CTA.
  int warp_tiles() const { return (block_m / warp_m) * (block_n / warp_n); }
  int warps() const { return warp_tiles() * warps_per_warp_tile(instruction); }
  int threads() const { return 32 * warps(); }
  // "tc_128x128x32_s3_w64x64_sk1_r8", "wgmma_128x256x64_s4_w64x256_sk1_r8"
  std::string name() const;
  bool operator==(const Schedule&) const = default;
};

}  // namespace tessel::tune
