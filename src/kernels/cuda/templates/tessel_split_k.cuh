// Split-K fixup shared by the Tensor Core kernels (mma.sync and wgmma).
//
// Every CTA of a tile writes its raw accumulators (fp32, or int32 for int8 contractions: the
// partial sums stay exact) to its own workspace slot (thread-major 16-byte quads: coalesced,
// no layout change), then counts itself in the tile's
// counter. The CTA that arrives last sums all slots in split order (its own from registers),
// so the result is deterministic whatever the arrival order, resets the counter for the next
// launch and goes on to the epilogue; the others exit. No CTA ever waits for another, so the
// scheme cannot deadlock however the CTAs are scheduled (a serial semaphore would, if a later
// split were resident while an earlier one was not).
// Workspace: [tiles][kSplitK][kCount / 4][kThreads] quads (float4 / int4) of 4-byte
// accumulators, then [tiles] u32 counters (zero before the first launch; each launch leaves
// them zero).
#pragma once

#include "tessel_tile.cuh"

namespace tessel {

// Four accumulators as one 16-byte access.
template <typename T>
struct Quad;
template <>
struct Quad<float> {
  using type = float4;
  __device__ __forceinline__ static float4 make(float a, float b, float c, float d) {
    return make_float4(a, b, c, d);
  }
};
template <>
struct Quad<int> {
  using type = int4;
  __device__ __forceinline__ static int4 make(int a, int b, int c, int d) {
    return make_int4(a, b, c, d);
  }
};

// `acc` holds this thread's kCount accumulators (indexed with constants only, so they stay
// in registers); `arrived` is a word of shared memory for the CTA's broadcast.
template <int kCount, int kThreads, int kSplitK, typename Acc>
__device__ __forceinline__ bool split_k_fixup(const KernelParams& p, Acc* acc, long long tile,
                                              long long tiles, int split, int tid, u32* arrived) {
  static_assert(kCount % 4 == 0, "accumulators move as quads");
  using Q = Quad<Acc>;
  using V = typename Q::type;
  constexpr int kQuads = kCount / 4;
  V* slots = static_cast<V*>(p.workspace);
  u32* counters = reinterpret_cast<u32*>(slots + tiles * kSplitK * kQuads * kThreads);
  V* mine = slots + (tile * kSplitK + split) * kQuads * kThreads;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    __stcg(mine + q * kThreads + tid,
           Q::make(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
  }
  __threadfence();  // the slot is visible device-wide before this CTA counts itself in
  __syncthreads();
  if (tid == 0) *arrived = atomicAdd(counters + tile, 1u);
  __syncthreads();
  if (*arrived != kSplitK - 1) return false;
  __threadfence();  // the other slots are read after the counter was observed complete
  Acc sum[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) sum[i] = Acc(0);
  for (int s = 0; s < kSplitK; ++s) {
    const V* slot = slots + (tile * kSplitK + s) * kQuads * kThreads;
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const V v = s == split ? Q::make(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3])
                             : __ldcg(slot + q * kThreads + tid);
      sum[4 * q] += v.x;
      sum[4 * q + 1] += v.y;
      sum[4 * q + 2] += v.z;
      sum[4 * q + 3] += v.w;
    }
  }
#pragma unroll
  for (int i = 0; i < kCount; ++i) acc[i] = sum[i];
  if (tid == 0) counters[tile] = 0u;
  return true;
}

}  // namespace tessel
