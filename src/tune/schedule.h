// A Schedule: the knobs of a generated contraction kernel. A plain struct, so the tuner
// can enumerate, hash and store it.
#pragma once

#include <string>

namespace tessel::tune {

enum class Instruction {
  kMmaSync,  // mma.sync.aligned.m16n8k16 (sm_80+), ldmatrix, cp.async pipeline
  kWgmma,    // wgmma.mma_async (sm_90a), TMA
  kSimt,     // CUDA cores, fp32 FMA: the fallback for contractions that do not qualify
};

struct Schedule {
  Instruction instruction = Instruction::kMmaSync;
  int block_m = 128, block_n = 128, block_k = 32;  // CTA tile
  int warp_m = 64, warp_n = 64;                     // warp tile (block / warp = warps per CTA)
  int stages = 3;                                   // shared-memory pipeline depth (2..5)
  int split_k = 1;                                  // K split across CTAs (fp32 partials)
  int raster = 8;                                   // CTA swizzle: tiles grouped by this many rows
  int a_vec = 8, b_vec = 8;                         // elements per global load (<= contraction's)

  int warps() const { return (block_m / warp_m) * (block_n / warp_n); }
  int threads() const { return 32 * warps(); }
  // "tc_128x128x32_s3_w64x64_sk1_r8"
  std::string name() const;
  bool operator==(const Schedule&) const = default;
};

}  // namespace tessel::tune
