// The SIMT contraction kernel: fp32 FMA on CUDA cores, for contractions the Tensor Core
// kernel cannot take (fp32 operands, mixed operand types, --no-tensor-cores) and as the
// reference-quality fallback. Same generated gathers, epilogue and store map as the Tensor
// Core kernel (tessel_tile.cuh, tessel_epilogue.cuh); only the inner product differs.
//
// CTA tile (kBlockM, kBlockN), warp tile (kWarpM, kWarpN); a warp's 32 lanes form a
// kLanesM x kLanesN grid (4 x 8 when the warp tile is at least 32 wide, else 8 x 4), lane
// (ly, lx) = (lane / kLanesN, lane % kLanesN) owns the (kTM, kTN) = (kWarpM / kLanesM,
// kWarpN / kLanesN) thread tile at rows ly*kTM.., cols lx*kTN.. of the warp tile:
//   acc (T32, V(kTM*kTN)) -> (kWarpM, kWarpN): acc[i][j] at (ly*kTM + i, lx*kTN + j)
// Operands are converted to fp32 on their way to shared memory and stored k-major-outer:
//   smem A: (kBlockK, kBlockM + 4) fp32,  smem B: (kBlockK, kBlockN + 4) fp32
// so that each k step reads kTM (kTN) consecutive floats per lane as float4s; lanes of one
// row of the lane grid broadcast the same A vector, the kLanesN columns read distinct B
// vectors.
#pragma once

#include "tessel_epilogue.cuh"

namespace tessel {

// Global -> registers -> fp32 shared tile. Same thread mapping as TileLoader (one column per
// thread, kIters rows kRowStep apart); the smem tile is stored (k, mn) whatever the operand's
// majorness, so a K-major operand is transposed on the way.
// kPrologue (K-major A only; contraction/epilogue.h): each loaded element of channel
// c = k % kProChannels becomes act(a * P[0, c] + P[1, c]) rounded to Elem, as the mma.sync
// kernel's prologue; zero fills stay zero. 1: affine, 2: affine then relu.
template <typename Gather, typename Elem, int kRows, int kCols, int kVec, int kThreads, bool kKMajor,
          int kPrologue = 0, int kProChannels = 1>
struct SimtLoader {
  static constexpr int kVecsPerRow = kCols / kVec;
  static constexpr int kRowStep = kThreads / kVecsPerRow;
  static constexpr int kIters = kRows / kRowStep;
  static constexpr int kVecBytes = kVec * int(sizeof(Elem));
  static constexpr int kMn = kKMajor ? kRows : kCols;  // extent of the mn side of the tile
  static constexpr int kPitch = kMn + 4;
  static_assert(kThreads % kVecsPerRow == 0 && kRowStep > 0 && kRows % kRowStep == 0, "mapping");
  static_assert(Gather::kIters == kIters, "emitter and loader agree on the thread mapping");

  static_assert(kPrologue == 0 || kKMajor, "a prologue transforms K-major A");
  Gather gather;
  int row0, col;
  int k;                 // kPrologue: the k of this thread's column in the next k-tile
  const float* pro;      // kPrologue: P [2, kProChannels]
  float staged[kIters][kVec];

  __device__ __forceinline__ void init(const KernelParams& p, int batch, int row_base,
                                       int col_base, int thread, const void* prologue = nullptr) {
    row0 = thread / kVecsPerRow;
    col = (thread % kVecsPerRow) * kVec;
    k = col_base + col;
    pro = static_cast<const float*>(prologue);
    gather.init(p, batch, row_base + row0, kRowStep, col_base + col);
  }

  __device__ __forceinline__ void fetch() {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      union {
        typename Vec<kVecBytes>::type raw;
        Elem e[kVec];
      } v;
      if (gather.valid(it)) {
        v.raw = *static_cast<const typename Vec<kVecBytes>::type*>(gather.ptr(it));
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          float x = to_float(v.e[i]);
          if constexpr (kPrologue != 0) {
            const int c = (k + i) % kProChannels;
            x = x * __ldg(pro + c) + __ldg(pro + kProChannels + c);
            if constexpr (kPrologue == 2) x = fmaxf(x, 0.0f);
            x = to_float(from_float<Elem>(x));
          }
          staged[it][i] = x;
        }
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) staged[it][i] = 0.0f;
      }
    }
    k += kCols;
    gather.advance();
  }

  __device__ __forceinline__ void store(float* tile) const {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int row = row0 + it * kRowStep;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if constexpr (kKMajor) tile[(col + i) * kPitch + row] = staged[it][i];  // (k, mn)
        else tile[row * kPitch + col + i] = staged[it][i];
      }
    }
  }
};

template <typename P>
struct SimtKernel {
  static constexpr int kBM = P::kBlockM, kBN = P::kBlockN, kBK = P::kBlockK;
  static constexpr int kWM = P::kWarpM, kWN = P::kWarpN;
  static constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kLanesN = kWN % 32 == 0 ? 8 : 4, kLanesM = 32 / kLanesN;
  static constexpr int kTM = kWM / kLanesM, kTN = kWN / kLanesN;
  static constexpr int kTilesM = (P::kM + kBM - 1) / kBM;
  static constexpr int kTilesN = (P::kN + kBN - 1) / kBN;
  static constexpr int kKTiles = (P::kK + kBK - 1) / kBK;
  static_assert(kWM % kLanesM == 0 && kWN % kLanesN == 0 && kTM % 4 == 0 && kTN % 4 == 0,
                "thread tiles are read as float4s");
  static_assert(P::kSplitK == 1, "the SIMT kernel does not split K");

  using LoaderA = SimtLoader<typename P::GatherA, typename P::ElementA, P::kAKMajor ? kBM : kBK,
                             P::kAKMajor ? kBK : kBM, P::kAVec, kThreads, P::kAKMajor,
                             P::kPrologue, P::kPrologueChannels>;
  using LoaderB = SimtLoader<typename P::GatherB, typename P::ElementB, P::kBKMajor ? kBN : kBK,
                             P::kBKMajor ? kBK : kBN, P::kBVec, kThreads, P::kBKMajor>;
  static constexpr int kPitchA = kBM + 4, kPitchB = kBN + 4;
  static constexpr int kMainBytes = kBK * (kPitchA + kPitchB) * 4;
  static constexpr int kSlabPitch = kWN + 4;
  static_assert(kSlabPitch % 4 == 0, "16-byte slab rows (slab_run)");
  static constexpr int kEpilogueBytes = kWarpsM * kWarpsN * kWM * kSlabPitch * 4;
  static constexpr int kSmemBytes = kMainBytes > kEpilogueBytes ? kMainBytes : kEpilogueBytes;

  __device__ __forceinline__ static void run(const KernelParams& p) {
    extern __shared__ __align__(128) unsigned char smem[];
    float* sa = reinterpret_cast<float*>(smem);
    float* sb = sa + kBK * kPitchA;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const int ly = lane / kLanesN, lx = lane % kLanesN;
    const CtaCoord cta = rasterize<kTilesM, kTilesN, P::kBatch, 1, P::kRaster>(blockIdx.x);
    const int m0 = cta.tile_m * kBM, n0 = cta.tile_n * kBN;

    LoaderA la;
    LoaderB lb;
    if constexpr (P::kAKMajor) la.init(p, cta.batch, m0, 0, tid, p.extra[P::kPrologueOperand]);
    else la.init(p, cta.batch, 0, m0, tid);
    if constexpr (P::kBKMajor) lb.init(p, cta.batch, n0, 0, tid);
    else lb.init(p, cta.batch, 0, n0, tid);

    float acc[kTM][kTN] = {};
    la.fetch();
    lb.fetch();
    for (int kt = 0; kt < kKTiles; ++kt) {
      la.store(sa);
      lb.store(sb);
      __syncthreads();
      // The next tile's global loads are in flight during this tile's FMAs.
      if (kt + 1 < kKTiles) {
        la.fetch();
        lb.fetch();
      }
      const float* a_col = sa + wm * kWM + ly * kTM;
      const float* b_col = sb + wn * kWN + lx * kTN;
#pragma unroll 4
      for (int k = 0; k < kBK; ++k) {
        float av[kTM], bv[kTN];
#pragma unroll
        for (int i = 0; i < kTM; i += 4)
          *reinterpret_cast<float4*>(av + i) = *reinterpret_cast<const float4*>(a_col + k * kPitchA + i);
#pragma unroll
        for (int j = 0; j < kTN; j += 4)
          *reinterpret_cast<float4*>(bv + j) = *reinterpret_cast<const float4*>(b_col + k * kPitchB + j);
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      __syncthreads();
    }

    // Epilogue: the warp stages its (kWM, kWN) tile and stores it through the store map.
    float* slab = reinterpret_cast<float*>(smem) + warp * kWM * kSlabPitch;
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
      for (int j = 0; j < kTN; j += 4)
        *reinterpret_cast<float4*>(slab + (ly * kTM + i) * kSlabPitch + lx * kTN + j) =
            make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
    __syncwarp();
    store_slab<P, kWM, kWN, 32>(p, slab, kSlabPitch, cta.batch, m0 + wm * kWM, n0 + wn * kWN, lane);
  }
};

}  // namespace tessel
