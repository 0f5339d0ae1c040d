// Tile machinery shared by tessel's contraction kernels (Tensor Core and SIMT): the kernel
// parameter block, the CTA rasterisation of a 1-D grid, the XOR-swizzled shared-memory tile
// and the global->shared tile loaders that drive the generated operand gathers.
//
// Contract with generated code. For each operand the emitter writes a Gather struct:
//   static constexpr int kIters;                  // vectors this thread moves per k-tile
//   static constexpr bool kReuseInL1;             // rows are re-read at nearby k (windows)
//   void init(const KernelParams&, int batch, int row0, int row_step, int col0);
//   bool valid(int it) const;                     // false: zero-fill (padding, residues)
//   const void* ptr(int it) const;                // address of vector `it` (when valid)
//   const void* base() const;                     // any mapped address of the operand
//   void advance();                               // next k-tile
// "rows" and "cols" are those of the operand's shared-memory tile: for a K-major operand
// (contiguous along k) rows are m (or n) and the thread's one column is a k index; for an
// MN-major operand rows are k and the column is an m (or n) index. The loader below fixes
// which thread moves which vector; the gather turns coordinates into addresses.
#pragma once

#include "tessel_params.cuh"
#include "tessel_ptx.cuh"

namespace tessel {

// ---- CTA rasterisation ----------------------------------------------------------------------
// The grid is 1-D (grid.x only, up to 2^31-1 CTAs), so no problem size can overflow the
// 65535 limit of grid.y/z. blockIdx.x -> (split, batch, tile_m, tile_n). Tiles are visited in
// groups of kRaster tile-rows: consecutive CTAs sweep down a short column of M tiles before
// moving to the next N tile, so the A rows and B columns in flight at one time stay in L2.
struct CtaCoord {
  int split, batch, tile_m, tile_n;
};

template <int kTilesM, int kTilesN, int kBatch, int kSplitK, int kRaster>
__device__ __forceinline__ CtaCoord rasterize(int linear) {
  CtaCoord c;
  c.split = linear % kSplitK;  // the splits of one tile run side by side
  linear /= kSplitK;
  constexpr int kTiles = kTilesM * kTilesN;
  c.batch = linear / kTiles;
  const int tile = linear % kTiles;
  constexpr int kGroup = kRaster * kTilesN;  // tiles in one group of kRaster tile-rows
  const int group = tile / kGroup;
  const int first_m = group * kRaster;
  const int rows = (kTilesM - first_m) < kRaster ? (kTilesM - first_m) : kRaster;
  const int in_group = tile % kGroup;
  c.tile_m = first_m + in_group % rows;
  c.tile_n = in_group / rows;
  return c;
}

// ---- Swizzled shared-memory tile ------------------------------------------------------------
// smem tile: (kRows, kCols) of kElemBytes-byte elements (2: f16/bf16, 1: int8), stored as
// 16-byte chunks (8 or 16 elements). Rows are kColBytes = kCols * kElemBytes long; everything
// below is in bytes, so an int8 tile of 64 columns is laid out as a 16-bit one of 32.
// ldmatrix reads one chunk from each of 8 consecutive rows at the same logical column;
// unswizzled, rows of 64 B or more would put those 8 chunks in the same 4 banks (8-way
// conflict). So the physical chunk is the logical one XOR a 3-bit row key:
//   kColBytes % 128 == 0: the tile is stored as panels of 128 B, (kColBytes/128, kRows, 128 B):
//       each row of a panel is one 128 B line and key = row % 8. 8 consecutive rows -> 8
//       distinct chunk positions -> 8 distinct bank quads. This is exactly the canonical
//       128B-swizzle layout of wgmma shared-memory operands (8-row x 128 B atoms, 16-byte
//       chunk ^= row % 8), K-major for an (m, k) tile of 64 16-bit k, MN-major for a (k, mn)
//       tile, so one layout serves ldmatrix and wgmma descriptors alike. Panels are 1024 B
//       aligned.
//   kColBytes == 64: two rows share a 128 B line; key = line % 8 with
//       line = (row*4 + chunk) / 8 = row / 2, XOR applied to the chunk-in-line (0..7).
//       Rows r..r+7 (r % 8 == 0) are lines L..L+3 with L % 4 == 0: the key takes 4 values that
//       differ only in bits 0-1 (or share bit 2), so bit 2 of the chunk-in-line (which row of
//       the pair) is preserved and bits 0-1 are permuted: 2 halves x 4 keys = 8 distinct quads.
// cp.async writes 16-byte chunks at the same swizzled positions; a warp's 32 chunks cover
// whole 128 B lines, each line a permutation of its 8 bank quads: conflict-free as well.
// Shifting the row by a multiple of 16 leaves the key unchanged in both cases (16 % 8 == 0;
// 16 rows of 64 B = 8 lines) and moves the chunk by 16 * kRowBytes: the fragment loaders
// precompute offsets once and add constants.
template <int kRows, int kCols, int kElemBytes = 2>
struct SwizzledTile {
  static constexpr int kColBytes = kCols * kElemBytes;
  static_assert(kColBytes == 64 || kColBytes % 128 == 0, "rows of 64 B or panels of 128 B rows");
  static_assert(kRows % 8 == 0, "whole 8-row swizzle atoms");
  static constexpr bool kPanels = kColBytes % 128 == 0;
  static constexpr int kChunkElems = 16 / kElemBytes;       // elements per 16-byte chunk
  static constexpr int kRowBytes = kPanels ? 128 : 64;      // row pitch within a panel
  static constexpr int kPanelBytes = kRows * 128;           // distance between panels
  static constexpr int kBytes = kRows * kColBytes;

  // Byte offset of logical 16-byte chunk `chunk` of row `row`.
  __device__ __forceinline__ static u32 offset(int row, int chunk) {
    if constexpr (kPanels) {
      return u32((chunk >> 3) * kPanelBytes + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
    } else {
      const int linear = row * 4 + chunk;
      return u32(linear ^ ((linear >> 3) & 7)) * 16u;
    }
  }
};

// ---- Global -> shared tile loader -----------------------------------------------------------
// Moves one operand tile (kRows, kCols) per k-tile. Each thread owns one column vector
// position (kVec elements) and kIters rows spaced kRowStep apart:
//   vector v = thread + i * kThreads  ->  (row v / kVecsPerRow, col v % kVecsPerRow)
// kThreads % kVecsPerRow == 0 keeps every thread on one column for all its rows, so the
// gather decomposes the column coordinate once and the row coordinates once.
// Vectors of >= 4 bytes go through cp.async (asynchronous, zero-filled when invalid); 2-byte
// vectors (kVec == 1 of 16-bit elements, e.g. ci=3 activations, or kVec == 2 of int8) cannot
// (cp.async moves 4, 8 or 16 bytes), so they are fetched into registers one stage early and
// stored to shared memory before the barrier that publishes the stage.
// The type T if kCond, else F (NVRTC compiles without the standard library).
template <bool kCond, typename T, typename F>
struct Select {
  using type = T;
};
template <typename T, typename F>
struct Select<false, T, F> {
  using type = F;
};

// Where a tile column lands in shared memory: where the gather reads it (most tiles), or a
// permutation of whole vectors (PackedGroupColumns, tessel_mma.cuh).
struct IdentityColumns {
  __device__ __forceinline__ static int map(int col) { return col; }
};

// kTrackValid: the loader remembers, per k-tile in flight, which of its vectors it copied
// (the others are zero-filled: padding, residues), for a prologue that transforms the landed
// vectors and must leave the fills zero (MmaKernel). k-tiles land in the order they are
// issued, so the record is a FIFO of kIters bits per k-tile in 64 bits.
template <typename Gather, int kRows, int kCols, int kVec, int kThreads, int kElemBytes = 2,
          typename Columns = IdentityColumns, bool kTrackValid = false>
struct TileLoader {
  using Tile = SwizzledTile<kRows, kCols, kElemBytes>;
  static constexpr int kVecBytes = kVec * kElemBytes;
  static_assert(kVecBytes >= 2 && kVecBytes <= 16, "vectors of 2 to 16 bytes");
  static constexpr int kVecsPerRow = kCols / kVec;
  static constexpr int kRowStep = kThreads / kVecsPerRow;
  static constexpr int kIters = kRows / kRowStep;
  static constexpr bool kAsync = kVecBytes >= 4;
  static_assert(kThreads % kVecsPerRow == 0, "each thread keeps one column");
  static_assert(kRowStep > 0 && kRows % kRowStep == 0, "rows divide evenly among threads");
  static_assert(Gather::kIters == kIters, "emitter and loader agree on the thread mapping");
  // Rows kRowStep apart keep the swizzle key when the step is a multiple of 8 rows (panels)
  // or 16 rows (64 B rows, 8 lines).
  static constexpr bool kLinearRows = kRowStep % (Tile::kPanels ? 8 : 16) == 0;

  Gather gather;
  int row0, col;  // this thread's first row and its column (elements)
  u16 staged[kAsync ? 1 : kIters];
  u64 copied = 0;    // kTrackValid: bit (kIters * i + it) = vector it of the i-th k-tile in flight
  int in_flight = 0;

  __device__ __forceinline__ void init(const KernelParams& p, int batch, int row_base,
                                       int col_base, int thread) {
    row0 = thread / kVecsPerRow;
    col = (thread % kVecsPerRow) * kVec;
    gather.init(p, batch, row_base + row0, kRowStep, col_base + col);
  }

  __device__ __forceinline__ u32 dst(int it) const {
    const int scol = Columns::map(col);
    constexpr int kChunk = Tile::kChunkElems;
    const u32 within = u32(scol % kChunk * kElemBytes);
    if constexpr (kLinearRows) {
      return Tile::offset(row0, scol / kChunk) + u32(it * kRowStep * Tile::kRowBytes) + within;
    } else {
      return Tile::offset(row0 + it * kRowStep, scol / kChunk) + within;
    }
  }

  // Asynchronous path: issue this thread's copies of the next k-tile into `stage`.
  __device__ __forceinline__ void load_async(u32 stage) {
    u64 bits = 0;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const bool ok = gather.valid(it);
      CpAsync<kVecBytes, Gather::kReuseInL1>::copy(stage + dst(it), ok ? gather.ptr(it) : gather.base(), ok);
      bits |= u64(ok) << it;
    }
    if constexpr (kTrackValid) {
      copied |= bits << (kIters * in_flight);
      ++in_flight;
    }
    gather.advance();
  }

  // kTrackValid: which vectors of the oldest k-tile in flight were copied; forgets it.
  __device__ __forceinline__ u32 pop_copied() {
    static_assert(kTrackValid && kIters <= 32, "the loader tracks copied vectors");
    const u32 bits = u32(copied & ((u64(1) << kIters) - 1));
    copied >>= kIters;
    --in_flight;
    return bits;
  }

  // Register path, part 1: read the next k-tile into registers (zeros where invalid).
  __device__ __forceinline__ void fetch() {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      staged[it] = gather.valid(it) ? ld_global_nc<2>(gather.ptr(it)) : u16(0);
    }
    gather.advance();
  }
  // Register path, part 2: write them to `stage` (before the barrier that publishes it).
  __device__ __forceinline__ void store(u32 stage) const {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(stage + dst(it)), "h"(staged[it]));
    }
  }

  // The pipeline's two hooks: `issue` starts the next k-tile towards `stage`; `finish`
  // completes it before the barrier that publishes the stage (a no-op for cp.async, whose
  // completion is awaited with cp.async.wait_group instead).
  __device__ __forceinline__ void issue(u32 stage) {
    if constexpr (kAsync) load_async(stage);
    else fetch();
  }
  __device__ __forceinline__ void finish(u32 stage) const {
    if constexpr (!kAsync) store(stage);
  }
};

}  // namespace tessel
