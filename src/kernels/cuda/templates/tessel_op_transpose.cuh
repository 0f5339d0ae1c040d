// Batched 2-D transpose through shared memory: in [kB, kR, kC] -> out [kB, kC, kR], the shape
// every NCHW <-> NHWC layout change takes after collapsing (N, C, H*W) <-> (N, H*W, C). A
// block moves one 32x32 tile: it reads 32 rows of 32 contiguous input elements and writes 32
// rows of 32 contiguous output elements, so both sides are coalesced, whereas a direct
// element-wise transpose strides one of them by kR or kC. Tiles are visited by a 1-D
// grid-stride loop (no y/z grid limit). The +1 column of padding puts the 32 elements of a
// tile column in 32 different banks.
// With 8 or fewer rows (or columns), as an RGB image's NCHW <-> NHWC, a 32x32 tile would hold
// 3 valid rows of 32: a tenth of its threads would work (the edge transpose of ResNet-50's input
// ran at 430 GB/s). There each thread moves one whole short row or column directly: it reads
// (or writes) kR elements kC apart, which consecutive threads make coalesced, and writes (or
// reads) them contiguously.
#pragma once

#include "tessel_op_common.cuh"

namespace tessel {

template <typename P>
struct Transpose2D {
  using In = typename P::In;
  using Out = typename P::Out;
  static constexpr int kTile = 32;
  static constexpr int kThreads = kTile * 8;  // each thread moves 4 elements of a tile
  static constexpr i64 kTilesR = (P::kR + kTile - 1) / kTile;
  static constexpr i64 kTilesC = (P::kC + kTile - 1) / kTile;
  static constexpr i64 kTiles = i64(P::kB) * kTilesR * kTilesC;
  static constexpr int kShort = 8;
  static constexpr bool kFewRows = P::kR <= kShort, kFewCols = !kFewRows && P::kC <= kShort;

  // One thread per input column (kFewRows) or row (kFewCols) of one batch.
  __device__ __forceinline__ static void run_direct(const In* x, Out* y) {
    constexpr i64 kItems = i64(P::kB) * (kFewRows ? P::kC : P::kR);
    for (i64 i = i64(blockIdx.x) * blockDim.x + threadIdx.x; i < kItems; i += i64(gridDim.x) * blockDim.x) {
      if constexpr (kFewRows) {
        const i64 b = i / P::kC, c = i % P::kC;
        const In* xb = x + b * P::kR * P::kC + c;
        Out* yb = y + (b * P::kC + c) * P::kR;
#pragma unroll
        for (int r = 0; r < P::kR; ++r) yb[r] = convert<Out>(xb[i64(r) * P::kC]);
      } else {
        const i64 b = i / P::kR, r = i % P::kR;
        const In* xb = x + (b * P::kR + r) * P::kC;
        Out* yb = y + b * P::kR * P::kC + r;
#pragma unroll
        for (int c = 0; c < P::kC; ++c) yb[i64(c) * P::kR] = convert<Out>(xb[c]);
      }
    }
  }

  __device__ __forceinline__ static void run(const OpParams& p) {
    const In* x = static_cast<const In*>(p.in[0]);
    Out* y = static_cast<Out*>(p.out[0]);
    if constexpr (kFewRows || kFewCols) {
      run_direct(x, y);
      return;
    }
    __shared__ Out tile[kTile][kTile + 1];
    const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
    for (i64 t = blockIdx.x; t < kTiles; t += gridDim.x) {
      const i64 b = t / (kTilesR * kTilesC);
      const i64 r0 = (t / kTilesC) % kTilesR * kTile, c0 = t % kTilesC * kTile;
      const In* xb = x + b * P::kR * P::kC;
      for (int r = ty; r < kTile; r += kThreads / kTile)
        if (r0 + r < P::kR && c0 + tx < P::kC)
          tile[r][tx] = convert<Out>(xb[(r0 + r) * P::kC + c0 + tx]);
      __syncthreads();
      Out* yb = y + b * P::kR * P::kC;
      for (int c = ty; c < kTile; c += kThreads / kTile)
        if (c0 + c < P::kC && r0 + tx < P::kR) yb[(c0 + c) * P::kR + r0 + tx] = tile[tx][c];
      __syncthreads();  // the next tile overwrites `tile`
    }
  }
};

}  // namespace tessel
