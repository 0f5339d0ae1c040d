// The Tensor Core contraction kernel (sm_80+, runs on Hopper): mma.sync m16n8k16 (f16, bf16)
// with fp32 accumulators or m16n8k32 (int8) with int32 ones, ldmatrix fragment loads from
// XOR-swizzled shared memory, a multi-stage
// cp.async pipeline fed by the generated operand gathers, register double-buffered
// fragments, optional split-K with an in-kernel fixup, and a shared-memory staged epilogue.
//
//   C[b, m, n] = epilogue( sum_k A(b, m, k) * B(b, n, k) )
//
// One CTA computes a (kBlockM, kBlockN) tile; its warps each own a (kWarpM, kWarpN) sub-tile
// of kMI x kNI mma tiles (16x8). The generated `struct Problem` supplies extents, schedule
// constants, GatherA / GatherB (tessel_tile.cuh) and the epilogue / store map
// (tessel_epilogue.cuh).
#pragma once

#include "tessel_epilogue.cuh"
#include "tessel_split_k.cuh"

namespace tessel {

// ---- Fragment traits of mma.m16n8k16 (PTX ISA 9.7.14.5.8) ---------------------------------
// lane = 4*g + t (g = lane / 4 in 0..7, t = lane % 4 in 0..3); each u32 holds two 16-bit
// elements, the lower k (or n) first.
//   A (T32,V8) -> (M16,K16):  a[0]: (g,   2t..2t+1)   a[1]: (g+8, 2t..2t+1)
//                             a[2]: (g,   2t+8..+9)   a[3]: (g+8, 2t+8..+9)
//   B (T32,V4) -> (K16,N8):   b[0]: (2t..2t+1, g)     b[1]: (2t+8..2t+9, g)
//   C (T32,V4) -> (M16,N8):   c[0..1]: (g, 2t..2t+1)  c[2..3]: (g+8, 2t..2t+1)
// ldmatrix.x4 produces exactly these registers when lane l addresses:
//   A K-major  (smem rows m, cols k), no trans:  row m0 + l%16,           chunk k0/8 + l/16
//   A MN-major (smem rows k, cols m), .trans:    row k0 + l%8 + 8*(l/16), chunk m0/8 + (l/8)%2
//   B K-major  (smem rows n, cols k), no trans:  row n0 + l%8 + 8*(l/16), chunk k0/8 + (l/8)%2
//   B MN-major (smem rows k, cols n), .trans:    row k0 + l%8 + 8*((l/8)%2), chunk n0/8 + l/16
// (for B one x4 covers two n8 tiles: registers {0,1} are the b of n0..n0+7 and {2,3} of
// n0+8..n0+15). Derivation: matrix i is addressed by lanes 8i..8i+7 and lands in register i;
// the placement above makes matrix i the 8x8 block that register i of the fragment holds.
//
// ---- int8: mma.m16n8k32 .s8, or .u8 A (PTX ISA 9.7.14.5.10), K-major operands only --------
// Each u32 holds four 8-bit elements, the lower k first:
//   A (T32,V16) -> (M16,K32): a[0]: (g, 4t..4t+3)     a[1]: (g+8, 4t..4t+3)
//                             a[2]: (g, 4t+16..+19)   a[3]: (g+8, 4t+16..+19)
//   B (T32,V8)  -> (K32,N8):  b[0]: (4t..4t+3, g)     b[1]: (4t+16..4t+19, g)
//   C (T32,V4)  -> (M16,N8):  int32, placed as the fp32 C above.
// In bytes of a K-major row this is the k16 fragment of 16-bit elements exactly: a[0] is
// bytes 4t..4t+3 of row g in both, a[2] bytes 16+4t.., b likewise. So a k32 step of int8 is
// a 32-byte step like a k16 step of f16, and the non-.trans ldmatrix addresses above (in
// 16-byte chunks, two per step) load it unchanged. ldmatrix .trans moves 16-bit elements:
// it cannot transpose bytes, so MN-major int8 operands are refused (kernel_rules.cc).

// The warp-level Tensor Core instruction of an element type and its accumulator.
template <typename T>
struct MmaTraits;
template <>
struct MmaTraits<f16> {
  using Acc = float;
  static constexpr int kK = 16;  // k per instruction: one 32-byte step of a K-major row
  __device__ __forceinline__ static void fma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    MmaM16N8K16<f16>::fma(d, a, b);
  }
};
template <>
struct MmaTraits<bf16> {
  using Acc = float;
  static constexpr int kK = 16;
  __device__ __forceinline__ static void fma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    MmaM16N8K16<bf16>::fma(d, a, b);
  }
};
template <>
struct MmaTraits<s8> {
  using Acc = int;
  static constexpr int kK = 32;
  __device__ __forceinline__ static void fma(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    MmaM16N8K32S8::fma(d, a, b);
  }
};
// Keyed by A's element: a u8 A (onnxruntime's uint8 activations) multiplies the s8 weights.
template <>
struct MmaTraits<u8q> {
  using Acc = int;
  static constexpr int kK = 32;
  __device__ __forceinline__ static void fma(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    MmaM16N8K32U8S8::fma(d, a, b);
  }
};

// Packed groups (kernels/contraction/grouped.h): the A view's k-tile of T taps holds, per
// tap, the kCP = kGroups * kCi channels of every group of the N tile; shared memory keeps
// each group's T*kCi values together, group after group, so that a group's k-tile is a plain
// K-major (rows m, kBK columns) slice of the tile at column group * kBK:
//   view column tap * kCP + group * kCi + ci  ->  tile column group * kBK + tap * kCi + ci
// Vectors never cross a group (kAVec <= kCi), so each moves as a whole.
template <int kGroups, int kCi, int kBK>
struct PackedGroupColumns {
  static constexpr int kCP = kGroups * kCi;
  __device__ __forceinline__ static int map(int col) {
    return (col % kCP) / kCi * kBK + (col / kCP) * kCi + col % kCi;
  }
};

template <typename P>
struct MmaKernel {
  using Element = typename P::Element;
  using Mma = MmaTraits<Element>;
  using Acc = typename Mma::Acc;
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr int kBM = P::kBlockM, kBN = P::kBlockN, kBK = P::kBlockK;
  static constexpr int kWM = P::kWarpM, kWN = P::kWarpN;
  static constexpr int kStages = P::kStages;
  static constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  // k-steps of one instruction (k16 of 16-bit elements, k32 of int8: 32 bytes of a row each).
  static constexpr int kMI = kWM / 16, kNI = kWN / 8, kKSteps = kBK / Mma::kK;
  static_assert(Mma::kK * kElemBytes == 32, "a k-step is 32 bytes: two 16-byte chunks");
  static constexpr int kTilesM = (P::kM + kBM - 1) / kBM;
  static constexpr int kTilesN = (P::kN + kBN - 1) / kBN;
  static constexpr int kKTiles = (P::kK + kBK - 1) / kBK;
  static_assert(kKSteps >= 2, "register double-buffering needs two k-steps per k-tile");
  static_assert(kNI % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  static_assert(kElemBytes == 2 || (P::kAKMajor && P::kBKMajor),
                "ldmatrix .trans moves 16-bit elements: 8-bit operands must be K-major");

  // Packed groups: the N tile is kGroupsPerTile whole groups of kGroupN channels; a warp's n8
  // fragments belong to kGW groups (one when a group spans the warp tile), and fragment ni
  // multiplies the A fragment of its own group. Without groups: one A fragment per mi.
  static constexpr bool kPacked = P::kGroupsPerTile > 0;
  static constexpr int kGroupN = kPacked ? P::kGroupN : kWN;
  static_assert(!kPacked || (P::kAKMajor && P::kBKMajor && P::kSplitK == 1 && kElemBytes == 2),
                "packed groups: 16-bit K-major operands, no split");
  static_assert(!kPacked || kGroupN % 8 == 0, "an n8 fragment holds one group");
  static_assert(kWN % kGroupN == 0 || kGroupN % kWN == 0, "warps and groups nest");
  static constexpr int kGW = kWN > kGroupN ? kWN / kGroupN : 1;
  __host__ __device__ static constexpr int group_of_fragment(int ni) {
    return kWN > kGroupN ? ni * 8 / kGroupN : 0;
  }
  static constexpr int kACols = kPacked ? kBK * P::kGroupsPerTile : kBK;  // A's k columns

  // smem A: (kBM, kACols, kStages) if K-major, else (kBK, kBM, kStages); likewise B.
  using TileA = SwizzledTile<P::kAKMajor ? kBM : kBK, P::kAKMajor ? kACols : kBM, kElemBytes>;
  using TileB = SwizzledTile<P::kBKMajor ? kBN : kBK, P::kBKMajor ? kBK : kBN, kElemBytes>;
  using ColumnsA = typename Select<kPacked, PackedGroupColumns<(kPacked ? P::kGroupsPerTile : 1),
                                                               (kPacked ? P::kGroupCi : 1), kBK>,
                                   IdentityColumns>::type;
  static constexpr bool kPrologue = P::kPrologue != 0;
  static_assert(!kPrologue || (P::kAKMajor && !kPacked && kElemBytes == 2 && P::kAVec % 2 == 0),
                "an A prologue transforms K-major 16-bit A in vectors of whole u32 words");
  using LoaderA = TileLoader<typename P::GatherA, P::kAKMajor ? kBM : kBK,
                             P::kAKMajor ? kACols : kBM, P::kAVec, kThreads, kElemBytes, ColumnsA,
                             kPrologue>;
  using LoaderB = TileLoader<typename P::GatherB, P::kBKMajor ? kBN : kBK, P::kBKMajor ? kBK : kBN,
                             P::kBVec, kThreads, kElemBytes>;
  static constexpr int kPipelineBytes = kStages * (TileA::kBytes + TileB::kBytes);

  // Epilogue staging: each warp stages one 16-row slab of its accumulators at a time,
  // (M16, kWN) fp32 with a pitch of kWN + 8 floats. The +8 makes float2 writes of a fragment
  // conflict-free: a half-warp writes rows g=0..3 at columns 2t, and 8*g + 2t covers all 32
  // banks once (pitch % 32 == 8 for kWN % 32 == 0; kWN == 16 gives pitch 24, also distinct).
  static constexpr int kSlabPitch = kWN + 8;
  static_assert(kSlabPitch % 4 == 0, "16-byte slab rows (slab_run)");
  static constexpr int kEpilogueBytes = kWarpsM * kWarpsN * 16 * kSlabPitch * 4;
  // + 16 bytes for the split-K arrival flag: dynamic, so that the kernel has no static shared
  // memory (static + dynamic > 48 KiB needs the opt-in the launcher sizes for dynamic alone).
  static constexpr int kSmemBytes =
      (kPipelineBytes > kEpilogueBytes ? kPipelineBytes : kEpilogueBytes) + (P::kSplitK > 1 ? 16 : 0);

  // Per-lane byte offsets of the ldmatrix addresses within one stage (see the table above).
  // K-major operands vary the chunk with the k-step (offset per step, two 16-byte chunks per
  // step; the 16-row shift of the next m16/n16 tile keeps the swizzle key, so it is a
  // constant added later). MN-major operands vary the chunk with the m16/n16 tile (offset per
  // tile; the next k16 step is a 16-row shift, again a constant).
  struct FragmentOffsets {
    u32 a[P::kAKMajor ? kKSteps : kMI][kGW];
    u32 b[P::kBKMajor ? kKSteps : kNI / 2];
  };

  __device__ __forceinline__ static FragmentOffsets fragment_offsets(int lane, int wm, int wn) {
    FragmentOffsets f;
    if constexpr (P::kAKMajor) {
      // Packed groups: the warp's first group within the tile; group q's k-tile starts at
      // column group * kBK.
      const int group0 = kPacked ? wn * kWN / kGroupN : 0;
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks)
#pragma unroll
        for (int q = 0; q < kGW; ++q)
          f.a[ks][q] = TileA::offset(
              wm * kWM + lane % 16, (group0 + q) * (kBK / TileA::kChunkElems) + ks * 2 + lane / 16);
    } else {
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
        f.a[mi][0] = TileA::offset(lane % 8 + 8 * (lane / 16), (wm * kWM + mi * 16) / 8 + (lane / 8) % 2);
    }
    if constexpr (P::kBKMajor) {
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks)
        f.b[ks] = TileB::offset(wn * kWN + lane % 8 + 8 * (lane / 16), ks * 2 + (lane / 8) % 2);
    } else {
#pragma unroll
      for (int nj = 0; nj < kNI / 2; ++nj)
        f.b[nj] = TileB::offset(lane % 8 + 8 * ((lane / 8) % 2), (wn * kWN + nj * 16) / 8 + lane / 16);
    }
    return f;
  }

  // Loads the A and B fragments of k-step `ks` of the stage at `sa` / `sb`.
  __device__ __forceinline__ static void load_fragments(u32 (&af)[kMI][kGW][4], u32 (&bf)[kNI][2],
                                                        const FragmentOffsets& f, u32 sa, u32 sb,
                                                        int ks) {
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      if constexpr (P::kAKMajor) {
#pragma unroll
        for (int q = 0; q < kGW; ++q)
          ldmatrix_x4(af[mi][q], sa + f.a[ks][q] + u32(mi * 16 * TileA::kRowBytes));
      } else {
        ldmatrix_x4_trans(af[mi][0], sa + f.a[mi][0] + u32(ks * 16 * TileA::kRowBytes));
      }
    }
#pragma unroll
    for (int nj = 0; nj < kNI / 2; ++nj) {
      u32 r[4];
      if constexpr (P::kBKMajor) {
        ldmatrix_x4(r, sb + f.b[ks] + u32(nj * 16 * TileB::kRowBytes));
      } else {
        ldmatrix_x4_trans(r, sb + f.b[nj] + u32(ks * 16 * TileB::kRowBytes));
      }
      bf[2 * nj][0] = r[0];
      bf[2 * nj][1] = r[1];
      bf[2 * nj + 1][0] = r[2];
      bf[2 * nj + 1][1] = r[3];
    }
  }

  // The A prologue (contraction/epilogue.h): once this thread's vectors of A's k-tile
  // `k_tile` (of the whole K) have landed in `stage` (the byte offset of the stage in shared
  // memory), each copied element a of channel c becomes act(a * P[0, c] + P[1, c]), rounded
  // back to the element type; zero-filled vectors (padding) stay zero. Each thread rewrites
  // only what it copied itself, so cp.async.wait_group orders it, and the barrier after it
  // publishes the stage as before. A thread's column is one vector of channels for the whole
  // tile: the same 2 x kAVec parameters for all its rows.
  __device__ __forceinline__ static void apply_prologue(const KernelParams& p, LoaderA& la,
                                                        unsigned char* smem, u32 stage,
                                                        int k_tile) {
    constexpr int kV = P::kAVec;
    const u32 copied = la.pop_copied();
    const int c0 = (k_tile * kBK + la.col) % P::kPrologueChannels;
    const float* pv = static_cast<const float*>(p.extra[P::kPrologueOperand]);
    float scale[kV], shift[kV];
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      scale[j] = __ldg(pv + c0 + j);
      shift[j] = __ldg(pv + P::kPrologueChannels + c0 + j);
    }
#pragma unroll
    for (int it = 0; it < LoaderA::kIters; ++it) {
      if (!(copied >> it & 1u)) continue;
      u32* w = reinterpret_cast<u32*>(smem + stage + la.dst(it));
#pragma unroll
      for (int j = 0; j < kV / 2; ++j) {
        const u32 pair = w[j];
        float lo = to_float(Element{u16(pair & 0xffffu)}) * scale[2 * j] + shift[2 * j];
        float hi = to_float(Element{u16(pair >> 16)}) * scale[2 * j + 1] + shift[2 * j + 1];
        if constexpr (P::kPrologue == 2) {
          lo = fmaxf(lo, 0.0f);
          hi = fmaxf(hi, 0.0f);
        }
        w[j] = u32(from_float<Element>(lo).bits) | (u32(from_float<Element>(hi).bits) << 16);
      }
    }
  }

  static constexpr int kAcc = kMI * kNI * 4;
  static constexpr long long kTileCount = (long long)kTilesM * kTilesN * P::kBatch;

  __device__ __forceinline__ static void run(const KernelParams& p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const CtaCoord cta =
        rasterize<kTilesM, kTilesN, P::kBatch, P::kSplitK, P::kRaster>(blockIdx.x);
    const int m0 = cta.tile_m * kBM, n0 = cta.tile_n * kBN;
    // This split's range of k-tiles (the emitter sizes splits so that none is empty).
    const int kt_begin = cta.split * P::kKTilesPerSplit;
    const int kt_count = min(P::kKTilesPerSplit, kKTiles - kt_begin);
    const int k_begin = kt_begin * kBK;

    LoaderA la;
    LoaderB lb;
    // Packed groups: A's view walks tiles of groups as its batch (the N tile), and B's and C's
    // dense view has no batch.
    if constexpr (kPacked) la.init(p, cta.tile_n, m0, 0, tid);
    else if constexpr (P::kAKMajor) la.init(p, cta.batch, m0, k_begin, tid);
    else la.init(p, cta.batch, k_begin, m0, tid);
    if constexpr (P::kBKMajor) lb.init(p, cta.batch, n0, k_begin, tid);
    else lb.init(p, cta.batch, k_begin, n0, tid);
    if (cta.split == 0) prefetch_residual<P, kBM, kBN, kThreads>(p, cta.batch, m0, n0, tid);

    const u32 smem_a = smem_addr(smem);
    const u32 smem_b = smem_a + kStages * TileA::kBytes;
    auto stage_a = [&](int s) { return smem_a + u32(s * TileA::kBytes); };
    auto stage_b = [&](int s) { return smem_b + u32(s * TileB::kBytes); };

    // Prologue: fill kStages-1 stages. Groups are committed even when empty so that
    // "wait until at most kStages-2 groups are pending" always means "the oldest stage landed".
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < kt_count) {
        la.issue(stage_a(s));
        lb.issue(stage_b(s));
        la.finish(stage_a(s));
        lb.finish(stage_b(s));
      }
      cp_async_commit();
    }

    const FragmentOffsets fo = fragment_offsets(lane, wm, wn);
    Acc acc[kMI][kNI][4] = {};
    u32 af[2][kMI][kGW][4], bf[2][kNI][2];

    cp_async_wait<kStages - 2>();
    if constexpr (kPrologue) {
      if (kt_count > 0) apply_prologue(p, la, smem, 0, kt_begin);
    }
    __syncthreads();
    int read_stage = 0, write_stage = kStages - 1;
    load_fragments(af[0], bf[0], fo, stage_a(0), stage_b(0), 0);

    // Iteration kt computes k-tile kt from stage kt % kStages and refills stage
    // (kt + kStages - 1) % kStages, which was last read in iteration kt - 1, before the
    // barrier that ended it.
    for (int kt = 0; kt < kt_count; ++kt) {
      const bool prefetch = kt + kStages - 1 < kt_count;
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        if (ks == kKSteps - 1) {
          if (prefetch) {
            la.finish(stage_a(write_stage));
            lb.finish(stage_b(write_stage));
          }
          write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
          // Stage kt+1 has landed (its group is the oldest pending) and is visible to all
          // warps; every warp is done reading stage kt-1's slot before anyone refills it.
          cp_async_wait<kStages - 2>();
          read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
          if constexpr (kPrologue) {
            if (kt + 1 < kt_count)
              apply_prologue(p, la, smem, u32(read_stage * TileA::kBytes), kt_begin + kt + 1);
          }
          __syncthreads();
        }
        // Double-buffering: fragments of the next k-step load while this step's mmas run.
        const int next = ks + 1 == kKSteps ? 0 : ks + 1;
        load_fragments(af[(ks + 1) % 2], bf[(ks + 1) % 2], fo, stage_a(read_stage),
                       stage_b(read_stage), next);
        if (ks == 0) {
          if (prefetch) {
            la.issue(stage_a(write_stage));
            lb.issue(stage_b(write_stage));
          }
          cp_async_commit();
        }
        // Where K ends inside the last k-tile, its k-steps past K would multiply the zeros
        // the gathers filled in: skipped, warp-uniformly. (A group of 8 channels, 3x3: K = 72
        // in k-tiles of 32, the third k-tile's second step.)
        if (P::kK % kBK != 0 && (kt_begin + kt) * kBK + ks * Mma::kK >= P::kK) continue;
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
          for (int ni = 0; ni < kNI; ++ni)
            Mma::fma(acc[mi][ni], af[ks % 2][mi][group_of_fragment(ni)], bf[ks % 2][ni]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the pipeline's shared memory is reused for the epilogue below

    if constexpr (P::kSplitK > 1) {
      const long long tile = ((long long)cta.batch * kTilesM + cta.tile_m) * kTilesN + cta.tile_n;
      u32* arrived = reinterpret_cast<u32*>(smem + kSmemBytes - 16);
      if (!split_k_fixup<kAcc, kThreads, P::kSplitK>(p, &acc[0][0][0], tile, kTileCount, cta.split,
                                                     tid, arrived)) {
        return;
      }
    }

    // Epilogue: per warp, one (M16, kWN) slab at a time, the accumulators as fp32.
    //   (T32, V(kNI*4)) -> (M16, kWN): c[ni][0..1] at (g, ni*8 + 2t), c[ni][2..3] at (g+8, ...)
    // A thread's columns are the same in every slab: the epilogue's leading per-channel steps
    // (scale, bias) are applied here, from operands loaded once per column, where store_slab
    // would load two per output (a memory-bound int8 conv's epilogue is bound by instructions).
    float* slab = reinterpret_cast<float*>(smem) + warp * 16 * kSlabPitch;
    const int g = lane / 4, t = lane % 4;
    typename P::Lead lead[kNI][2];
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int n = n0 + wn * kWN + ni * 8 + 2 * t + j;
        lead[ni][j] = P::kHasLead && n < P::kN ? P::lead_of(p, P::channel(cta.batch, n)) : typename P::Lead{};
      }
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        *reinterpret_cast<float2*>(slab + g * kSlabPitch + ni * 8 + 2 * t) =
            make_float2(P::apply_lead(lead[ni][0], acc_to_float(acc[mi][ni][0])),
                        P::apply_lead(lead[ni][1], acc_to_float(acc[mi][ni][1])));
        *reinterpret_cast<float2*>(slab + (g + 8) * kSlabPitch + ni * 8 + 2 * t) =
            make_float2(P::apply_lead(lead[ni][0], acc_to_float(acc[mi][ni][2])),
                        P::apply_lead(lead[ni][1], acc_to_float(acc[mi][ni][3])));
      }
      __syncwarp();
      store_slab<P, 16, kWN, 32, true>(p, slab, kSlabPitch, cta.batch, m0 + wm * kWM + mi * 16,
                                       n0 + wn * kWN, lane);
      __syncwarp();
    }
  }
};

}  // namespace tessel
