// The Hopper contraction kernel (sm_90a): wgmma.mma_async from 128B-swizzled shared memory,
// fed by the same generated gathers and cp.async tile loaders as the mma.sync kernel, with
// the same split-K fixup and staged epilogue.
//
//   C[b, m, n] = epilogue( sum_k A(b, m, k) * B(b, n, k) )
//
// One CTA computes a (kBlockM, kBlockN) tile with warpgroups of 4 warps; each warpgroup owns
// a (kWarpM, kWarpN) sub-tile (here warp_m x warp_n of the schedule name the warpgroup tile)
// computed as kMI = kWarpM / 64 wgmma m64nNk16 per k16 step, N = kWarpN.
//
// Pipeline. Loads are issued by every thread (the operand gathers are implicit-GEMM address
// arithmetic that TMA cannot express), so there are no producer warps; wgmma runs
// asynchronously instead. Iteration kt:
//   wait for stage kt (cp.async.wait_group), fence.proxy.async, barrier;
//   issue the wgmmas of stage kt and commit them;
//   issue the loads of k-tile kt + kStages - 2 into stage (kt - 2) % kStages;
//   wgmma.wait_group 1: the wgmmas of tile kt - 1 are done (those of kt keep running).
// The refilled stage was last read by the wgmmas of tile kt - 2, which every warpgroup
// retired (wait_group 1 in iteration kt - 1) before the barrier of iteration kt: so loads run
// kStages - 2 tiles ahead and one tile of wgmma overlaps the next iteration's wait and barrier.
#pragma once

#include "tessel_epilogue.cuh"
#include "tessel_split_k.cuh"
#include "tessel_wgmma_ops.cuh"

namespace tessel {

template <typename P>
struct WgmmaKernel {
  using Element = typename P::Element;
  static constexpr int kBM = P::kBlockM, kBN = P::kBlockN, kBK = P::kBlockK;
  static constexpr int kWM = P::kWarpM, kWN = P::kWarpN;
  static constexpr int kStages = P::kStages;
  static constexpr int kGroupsM = kBM / kWM, kGroupsN = kBN / kWN;
  static constexpr int kThreads = 128 * kGroupsM * kGroupsN;
  static constexpr int kMI = kWM / 64, kKSteps = kBK / 16;
  static constexpr int kTilesM = (P::kM + kBM - 1) / kBM;
  static constexpr int kTilesN = (P::kN + kBN - 1) / kBN;
  static constexpr int kKTiles = (P::kK + kBK - 1) / kBK;
  static_assert(kStages >= 3, "loads run kStages - 2 tiles ahead");
  static_assert(kWM % 64 == 0 && (kWN == 64 || kWN == 128 || kWN == 256), "wgmma m64nNk16 tiles");
  static_assert(sizeof(Element) == 2, "wgmma kernel: f16 or bf16 operands (int8 runs on mma.sync)");

  // smem A: (kBM, kBK, kStages) if K-major, else (kBK, kBM, kStages); likewise B. All in the
  // 128B-swizzled panel layout of SwizzledTile, which is wgmma's canonical layout.
  using TileA = SwizzledTile<P::kAKMajor ? kBM : kBK, P::kAKMajor ? kBK : kBM>;
  using TileB = SwizzledTile<P::kBKMajor ? kBN : kBK, P::kBKMajor ? kBK : kBN>;
  static_assert(TileA::kPanels && TileB::kPanels, "wgmma operands use 128-byte rows");
  static_assert(TileA::kBytes % 1024 == 0 && TileB::kBytes % 1024 == 0, "1024-byte aligned stages");
  using LoaderA = TileLoader<typename P::GatherA, P::kAKMajor ? kBM : kBK,
                             P::kAKMajor ? kBK : kBM, P::kAVec, kThreads>;
  using LoaderB = TileLoader<typename P::GatherB, P::kBKMajor ? kBN : kBK,
                             P::kBKMajor ? kBK : kBN, P::kBVec, kThreads>;

  static constexpr int kAcc = kMI * kWN / 2;  // fp32 accumulators per thread
  static constexpr int kPipelineBytes = kStages * (TileA::kBytes + TileB::kBytes);
  // Epilogue staging as in MmaKernel: per warp a (M16, kWN) fp32 slab, pitch kWN + 8.
  static constexpr int kSlabPitch = kWN + 8;
  static_assert(kSlabPitch % 4 == 0, "16-byte slab rows (slab_run)");
  static constexpr int kEpilogueBytes = (kThreads / 32) * 16 * kSlabPitch * 4;
  // + 1024: the dynamic shared memory base is aligned up to the 1024-byte swizzle atom;
  // + 16: the split-K arrival flag.
  static constexpr int kSmemBytes = (kPipelineBytes > kEpilogueBytes ? kPipelineBytes : kEpilogueBytes) +
                                    1024 + (P::kSplitK > 1 ? 16 : 0);
  static constexpr long long kTileCount = (long long)kTilesM * kTilesN * P::kBatch;

  // Descriptor of the A slice (64 rows of m, k16 step ks) of the stage at `stage`.
  __device__ __forceinline__ static u64 desc_a(u32 stage, int m0, int ks) {
    if constexpr (P::kAKMajor) {
      // (m, k) rows of 128 B: k16 step = 32 bytes within the row, 4 per panel.
      return wgmma_descriptor(stage + (ks / 4) * TileA::kPanelBytes + m0 * 128 + (ks % 4) * 32, 16, 1024);
    } else {
      // (k, m) panels of 64 m: the slice is one panel, 16 k rows per step.
      return wgmma_descriptor(stage + (m0 / 64) * TileA::kPanelBytes + ks * 16 * 128, TileA::kPanelBytes, 1024);
    }
  }
  __device__ __forceinline__ static u64 desc_b(u32 stage, int n0, int ks) {
    if constexpr (P::kBKMajor) {
      return wgmma_descriptor(stage + (ks / 4) * TileB::kPanelBytes + n0 * 128 + (ks % 4) * 32, 16, 1024);
    } else {
      return wgmma_descriptor(stage + (n0 / 64) * TileB::kPanelBytes + ks * 16 * 128, TileB::kPanelBytes, 1024);
    }
  }

  __device__ __forceinline__ static void run(const KernelParams& p) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    // Align the operand stages to the 1024-byte swizzle atom (the dynamic base is not
    // guaranteed to be).
    const u32 raw = smem_addr(smem_raw);
    const u32 pad = ((raw + 1023u) & ~1023u) - raw;
    unsigned char* smem = smem_raw + pad;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int group = warp / 4;
    const int gm = group % kGroupsM, gn = group / kGroupsM;
    const CtaCoord cta =
        rasterize<kTilesM, kTilesN, P::kBatch, P::kSplitK, P::kRaster>(blockIdx.x);
    const int m0 = cta.tile_m * kBM, n0 = cta.tile_n * kBN;
    const int kt_begin = cta.split * P::kKTilesPerSplit;
    const int kt_count = min(P::kKTilesPerSplit, kKTiles - kt_begin);
    const int k_begin = kt_begin * kBK;

    LoaderA la;
    LoaderB lb;
    if constexpr (P::kAKMajor) la.init(p, cta.batch, m0, k_begin, tid);
    else la.init(p, cta.batch, k_begin, m0, tid);
    if constexpr (P::kBKMajor) lb.init(p, cta.batch, n0, k_begin, tid);
    else lb.init(p, cta.batch, k_begin, n0, tid);

    // No prefetch_residual here: on FCN-ResNet50's 512 -> 2048 residual convs (K = 512, one
    // 128x256 CTA per SM) it made them 10% slower on an H100, where the mma.sync kernel's
    // layers gained up to 14%.

    const u32 smem_a = smem_addr(smem);
    const u32 smem_b = smem_a + kStages * TileA::kBytes;
    auto stage_a = [&](int s) { return smem_a + u32(s * TileA::kBytes); };
    auto stage_b = [&](int s) { return smem_b + u32(s * TileB::kBytes); };

    // Prologue: kStages - 2 tiles in flight.
#pragma unroll
    for (int s = 0; s < kStages - 2; ++s) {
      if (s < kt_count) {
        la.issue(stage_a(s));
        lb.issue(stage_b(s));
        la.finish(stage_a(s));
        lb.finish(stage_b(s));
      }
      cp_async_commit();
    }

    float acc[kMI][kWN / 2];
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int i = 0; i < kWN / 2; ++i) acc[mi][i] = 0.0f;

    int read_stage = 0, write_stage = kStages - 2;
    int pending_stage = -1;  // register path: stage whose fetched tile is still in registers
    for (int kt = 0; kt < kt_count; ++kt) {
      if (pending_stage >= 0) {  // register path only (2-byte vectors)
        la.finish(stage_a(pending_stage));
        lb.finish(stage_b(pending_stage));
        pending_stage = -1;
      }
      cp_async_wait<kStages - 3>();
      fence_proxy_async_shared();
      __syncthreads();

      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        const u64 db = desc_b(stage_b(read_stage), gn * kWN, ks);
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) {
          Wgmma<kWN, Element>::template mma<P::kAKMajor ? 0 : 1, P::kBKMajor ? 0 : 1>(
              acc[mi], desc_a(stage_a(read_stage), gm * kWM + mi * 64, ks), db);
        }
      }
      wgmma_commit();

      if (kt + kStages - 2 < kt_count) {
        la.issue(stage_a(write_stage));
        lb.issue(stage_b(write_stage));
        if constexpr (!LoaderA::kAsync || !LoaderB::kAsync) pending_stage = write_stage;
      }
      cp_async_commit();
      read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
    __syncthreads();  // every warpgroup is done with the stages: the epilogue reuses them

    if constexpr (P::kSplitK > 1) {
      const long long tile = ((long long)cta.batch * kTilesM + cta.tile_m) * kTilesN + cta.tile_n;
      u32* arrived = reinterpret_cast<u32*>(smem_raw + kSmemBytes - 16);
      if (!split_k_fixup<kAcc, kThreads, P::kSplitK>(p, &acc[0][0], tile, kTileCount, cta.split, tid,
                                                     arrived)) {
        return;
      }
    }

    // Epilogue: per warp, one (M16, kWN) slab per 64-row block of its warpgroup.
    //   (T32, V(kWN/2)) -> (M16, kWN): acc[mi][4j..4j+1] at (g, 8j + 2t), [4j+2..4j+3] at (g+8, ...)
    float* slab = reinterpret_cast<float*>(smem) + warp * 16 * kSlabPitch;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
      for (int j = 0; j < kWN / 8; ++j) {
        *reinterpret_cast<float2*>(slab + g * kSlabPitch + j * 8 + 2 * t) =
            make_float2(acc[mi][4 * j], acc[mi][4 * j + 1]);
        *reinterpret_cast<float2*>(slab + (g + 8) * kSlabPitch + j * 8 + 2 * t) =
            make_float2(acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
      }
      __syncwarp();
      store_slab<P, 16, kWN, 32>(p, slab, kSlabPitch, cta.batch,
                                 m0 + gm * kWM + mi * 64 + (warp % 4) * 16, n0 + gn * kWN, lane);
      __syncwarp();
    }
  }
};

}  // namespace tessel
