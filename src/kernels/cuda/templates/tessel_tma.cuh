// The Hopper-native contraction kernel (sm_90a): operand tiles moved by the tensor memory
// accelerator (cp.async.bulk.tensor) into 128B- or 64B-swizzled shared memory, a ring of kStages
// stages guarded by mbarriers, one producer warp and kConsumers warpgroups issuing wgmma.
//
//   C[m, n] = epilogue( sum_k A(m, k) * B(n, k) )
//
// Operands, both K-major in k-tiles of one 128-byte row (64 f16/bf16 or 128 int8 elements: the
// int8 form runs wgmma k32 with int32 accumulators) or of one 64-byte row (the 64-byte swizzle:
// 32 or 64 elements, for channel counts that would leave a 128-byte row's second half zeros, as
// ResNet's 64-channel layers in int8), each stage one box per operand:
//   A, kAIm2col = false: a plain (M, K) matrix (a GEMM, a 1x1 stride-1 conv), tensor map
//       dims {K, M}; box {64, kBlockM} at (k0, m0).
//   A, kAIm2col = true: an NHWC convolution's input, im2col tensor map over {C, W, H, N}:
//       kBlockM consecutive output pixels of 64 channels each, the window origin of pixel m0
//       plus the tap's offsets (kw * dilation, kh * dilation); the map's bounding box and
//       traversal strides walk the following pixels across rows and images, and everything
//       outside the input (padding, pixels past the last image) arrives as zeros.
//   B: the weights [N, taps, C] as a 3-D tiled map {C, taps, N}; box {64, 1, kBlockN} at
//       (c0, tap, n0). A GEMM is one tap with C = K. Or (!kBKMajor, a 16-bit GEMM) a (K, N)
//       matrix as a tiled map {N, K}: kBlockN / 64 boxes {64, 64} at (n0 + 64 j, k0), panels of
//       64 columns in 128-byte swizzled rows of n, which wgmma reads transposed.
// K is walked tap by tap, kChunks channel chunks (one row each) per tap; channels past C are
// zero-filled in both operands, so C needs no multiple of the chunk.
//
// Roles (persistent). The CTA walks output tiles blockIdx.x, + gridDim.x, ...; warps 0-3 and
// 4-7 are the consumer warpgroups, warp 8 the producer, of which one lane issues every copy
// (where the consumers hold 128 accumulators per thread or more, warps 8-11 are a producer
// warpgroup, whose setmaxnreg.dec lets the consumers' setmaxnreg.inc take 232 registers each).
//   "ping-pong" (kWarpM = kBlockM): the CTA's i-th tile belongs to consumer warpgroup i % 2,
//     which computes the whole (kBlockM, kBlockN) tile;
//   cooperative (kWarpM = kBlockM / 2): both warpgroups compute every tile, warpgroup g its rows
//     [g * kWarpM, (g + 1) * kWarpM), so a tile has twice the rows one warpgroup's 128
//     accumulators per thread hold (256x128: half the operand bytes per multiply of 128x128).
//     Their epilogues run together, while the producer fills the ring with the next tile's
//     k-tiles; a stage goes back to the producer once both warpgroups have released it.
// All k-tiles of the CTA's tiles, in order, stream through one ring of kStages stages: the
// CTA's k-tile number `it` (tile i's k-tile kt is it = i * kKTiles + kt) lives in stage
// it % kStages, in that stage's use it / kStages.
//   producer, k-tile it in stage s: wait empty[s] (use it - kStages released), arrive.
//     expect_tx full[s] with the bytes of both boxes, issue both copies onto full[s].
//   consumer: wait full[s]; wgmma over the stage's 4 k16 steps; commit; wgmma.wait_group 1,
//     so the wgmmas of the previous k-tile are done, and release its stage; after the last
//     k-tile, the epilogue.
// So (ping-pong) while one warpgroup runs its epilogue the other's wgmmas keep the Tensor Cores
// busy, and the producer fills the ring ahead of both: copies run up to kStages k-tiles ahead of the
// math, across tile boundaries, and nothing but the producer's one lane computes addresses.
// The epilogue is the other kernels': per warp a (16, kChunkN) fp32 slab in shared memory of
// its own (beside the ring), finished with the fused steps and stored by the store map; where
// that is a plain or channel-slice one of 16-bit or int8 outputs, or a DCR depth_to_space one
// (kTmaStore; kTmaStoreD2s, below), the finished
// (16, kChunkN) tile goes to a staging buffer of the warp's and one bulk tensor store (the
// third map, over C) writes it, clipped to M and N, while the warp goes on. Such outputs skip
// the slab (kRegisterEpilogue, below), and a residual of their type arrives by bulk tensor
// loads (the fourth map, over the residual) into the staging boxes it is finished in.
#pragma once

#include "tessel_epilogue.cuh"
#include "tessel_wgmma_ops.cuh"

namespace tessel {

// ---- mbarrier (PTX ISA 9.7.13.15) -----------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (the copy engine) before use.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// One arrival plus `bytes` of expected transactions: the phase completes when the copies that
// signal this barrier have written that many bytes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}
// Blocks until the phase of parity `phase` has completed.
__device__ __forceinline__ void mbarrier_wait(u32 bar, u32 phase) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// ---- Register reallocation (PTX ISA, "setmaxnreg": sm_90a) -------------------------------------
// Every warp of a warpgroup executes the same one; the CTA's pool lends what .dec returned.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// ---- Bulk tensor copies (PTX ISA 9.7.9.25) --------------------------------------------------
// The tensor map is a __grid_constant__ kernel parameter, addressed generically.
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
__device__ __forceinline__ void tma_load_2d(u32 dst, const void* map, u32 bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const void* map, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(u32 dst, const void* map, u32 bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// Shared -> global: a box at {c0, c1} from `src`, tracked by this thread's bulk async-groups.
__device__ __forceinline__ void tma_store_2d(const void* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
// ... a 4-D box at {c0, c1, c2, c3} (a depth_to_space output's map, below).
__device__ __forceinline__ void tma_store_4d(const void* map, u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups are still reading their shared memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until at most N of this thread's bulk groups are incomplete (their writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// im2col: coordinates {c, w, h, n} of the first pixel's window origin, offsets {w, h} of the tap.
__device__ __forceinline__ void tma_load_im2col_4d(u32 dst, const void* map, u32 bar, int c, int w, int h,
                                                   int n, unsigned short off_w, unsigned short off_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n), "h"(off_w), "h"(off_h)
      : "memory");
}

// The accumulator type: int32 for int8 operands, else fp32.
template <bool kInt8>
struct AccumulatorOf {
  using type = float;
};
template <>
struct AccumulatorOf<true> {
  using type = int;
};

template <typename P>
struct TmaWgmmaKernel {
  using Element = typename P::Element;
  static constexpr int kBM = P::kBlockM, kBN = P::kBlockN, kBK = P::kBlockK;
  static constexpr int kStages = P::kStages;
  static constexpr int kConsumers = 2;
  // + the producer warp, or warpgroup (Schedule::tma_producer_warpgroup: setmaxnreg moves its
  // registers to the consumers, kConsumerRegs each; ptxas fixes such a launch at 168).
  static constexpr bool kProducerWarpgroup = P::kProducerWarpgroup;
  static constexpr int kThreads = 128 * kConsumers + (kProducerWarpgroup ? 128 : 32);
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(!kProducerWarpgroup || (kProducerRegs * 128 + kConsumerRegs * 256 <= 168 * 384),
                "the consumers take what the producer warpgroup returns to the launch's 168 per thread");
  static constexpr bool kInt8 = sizeof(Element) == 1;
  using Acc = typename AccumulatorOf<kInt8>::type;
  // One swizzled row per k-tile (kernels::check_tma): 128 bytes, or 64 with the 64-byte swizzle.
  static constexpr int kRowBytes = kBK * int(sizeof(Element));
  static_assert(kRowBytes == 128 || kRowBytes == 64, "one 128- or 64-byte swizzled box row per k-tile");
  static constexpr int kChunkElems = kBK;
  static constexpr bool kCoop = P::kWarpM * 2 == kBM;  // both warpgroups on each tile (above)
  static constexpr int kWM = P::kWarpM;                 // a warpgroup's rows of a tile
  static constexpr int kMI = kWM / 64, kKSteps = kRowBytes / 32;  // k16 (f16) or k32 (int8) steps
  static constexpr int kTilesM = (P::kM + kBM - 1) / kBM;
  static constexpr int kTilesN = (P::kN + kBN - 1) / kBN;
  static constexpr int kTiles = kTilesM * kTilesN;
  // Row windows (Schedule::row_windows): a k-tile is (kernel row, chunk); its stage holds the
  // A box of the tile's pixel run plus the window's width (kABoxRows rows, padded to whole
  // 1024-byte swizzle atoms) and B of the row's kKernelW taps; tap s multiplies A from row
  // s * kDilationW (the descriptor's start moved by whole 128- or 64-byte rows: the swizzle is
  // the address's, which the copy wrote it by).
  static constexpr bool kRows = P::kARowWindows;
  static constexpr int kRowTaps = kRows ? P::kKernelW : 1;  // taps per k-tile
  static constexpr int kKTiles = (kRows ? P::kTaps / P::kKernelW : P::kTaps) * P::kChunks;
  static_assert(P::kWarpN == kBN && (P::kWarpM == kBM || kCoop),
                "a consumer warpgroup computes whole tiles, or (cooperative) half of each tile's rows");
  static_assert(kWM % 64 == 0 && (kBN == 64 || kBN == 128 || kBN == 256), "wgmma m64nNk16 tiles");
  static_assert(P::kBatch == 1, "one GEMM per launch");

  // (A's box in whole 1024-byte swizzle atoms: 8 rows of 128 bytes, 16 of 64.)
  static constexpr int kAtomRows = 1024 / kRowBytes;
  static constexpr int kABytes =
      (kRows ? (P::kABoxRows + kAtomRows - 1) / kAtomRows * kAtomRows : kBM) * kRowBytes;  // one stage's boxes
  static constexpr int kBBytes = kBN * kRowBytes * kRowTaps;
  static_assert(!kRows || (P::kBKMajor && P::kAIm2col), "row windows: a conv's A, B K-major");
  // The bytes a stage's copies bring (A's box without the atom padding).
  static constexpr int kTxBytes = (kRows ? P::kABoxRows : kBM) * kRowBytes + kBBytes;
  // An MN-major B: kBN / 64 panels per stage, each kBK rows of 64 n (128 bytes).
  static constexpr int kBPanelBytes = kBK * 128;
  static_assert(P::kBKMajor || (!kInt8 && kRowBytes == 128), "an MN-major B: 16-bit, 128-byte k-tiles");
  static constexpr int kStageBytes = kABytes + kBBytes;
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "1024-byte aligned swizzle atoms");
  static constexpr int kPipelineBytes = kStages * kStageBytes;
  // Epilogue: per consumer warp a (16, kChunkN) fp32 slab, pitch kChunkN + 8.
  static constexpr int kChunkN = 64;
  static constexpr int kSlabPitch = kChunkN + 8;
  static_assert(kSlabPitch % 4 == 0, "16-byte slab rows (slab_run)");
  static constexpr int kStagingBytes = 16 * kChunkN * 2;  // per warp: 16 x 64 outputs of <= 2 bytes
  static constexpr int kEpilogueBytes = kConsumers * 4 * (16 * kSlabPitch * 4 + kStagingBytes);
  static constexpr int kBarrierBytes = (2 * kStages + 2) * 8;  // full, empty, turn
  // + 1024: the dynamic shared memory base is aligned up to the swizzle atom.
  static constexpr int kSmemBytes = kPipelineBytes + kEpilogueBytes + kBarrierBytes + 1024;

  // Outputs of a bulk-stored map are finished where the accumulators are (no fp32 slab round
  // trip): each thread applies the epilogue to its own fragment and writes the pairs into a
  // staging box of its warp's in the swizzled layout the C map reads, rows of 64 outputs in
  // 128 bytes (16-bit, the 128-byte swizzle) or 64 (int8, the 64-byte swizzle), so that the 8
  // rows a store instruction touches fall on distinct banks. Each warp has two staging boxes, used by
  // its chunks in turn, so that a chunk is finished while the previous one's store reads.
  // A residual of the output's type (kTmaResidual) arrives in the same boxes: a bulk tensor load
  // through the fourth map (C's, over the residual) puts each chunk's residual where its outputs
  // go, issued a chunk ahead (the tile's first two before its mainloop), and each thread reads
  // its pairs there and overwrites them with the outputs. A residual of another type keeps the
  // slab path, whose 16-byte residual loads are coalesced where the fragment's pairs are not
  // (ResNet-50's residual 1x1 convs were 3.5x slower with the pairs loaded from global memory).
  static constexpr bool kTmaResidual = P::kResidual >= 0 && P::kTmaResidual;
  static constexpr bool kRegisterEpilogue = P::kTmaStore && (P::kResidual < 0 || kTmaResidual);
  static constexpr int kOutBytes = int(sizeof(typename P::Out));
  static constexpr int kBoxBytes = 16 * kChunkN * kOutBytes;  // one chunk's staged outputs
  static_assert(!kRegisterEpilogue || (kOutBytes <= 2 && kBoxBytes <= kStagingBytes),
                "a chunk's outputs fit a staging box");
  // The register epilogue's second staging box per warp, and its two residual barriers, sit in
  // the slab area it does not use: boxes of kStagingBytes at warp * kStagingBytes (1024-byte
  // aligned, the swizzle atom), the barriers after the 8 boxes.
  static constexpr int kSlabAreaBytes = kConsumers * 4 * 16 * kSlabPitch * 4;
  static_assert(kConsumers * 4 * (kStagingBytes + 16) <= kSlabAreaBytes, "second staging boxes fit the slabs");

  // A chunk of a tile: (16, kChunkN) outputs of warp `wq` (its quarter of the warpgroup's rows,
  // which start at m0).
  __device__ __forceinline__ static void chunk_origin(int q, int m0, int n0, int wq, int& m_base, int& n_base) {
    constexpr int kPerRow = kBN / kChunkN;
    m_base = m0 + (q / kPerRow) * 64 + wq * 16;
    n_base = n0 + (q % kPerRow) * kChunkN;
  }

  // One lane: the residual box of the warp's chunk number `seq` (counted over all its tiles)
  // into staging box seq % 2, completing on that box's barrier.
  __device__ __forceinline__ static void load_residual(const TensorMaps& maps, u32 box0, u32 box1, u32 bars,
                                                       int seq, int m_base, int n_base) {
    const u32 bar = bars + 8 * (seq & 1);
    mbarrier_arrive_expect_tx(bar, kBoxBytes);
    tma_load_2d(seq & 1 ? box1 : box0, maps.map[3], bar, n_base, m_base);
  }

  // A depth_to_space output (DCR, P::kTmaStoreD2s = block * C' channels of a pixel pair row
  // (j, c), the map kernels::cuda::tma_store_map builds): out[img, oh*b + i, ow*b + j, c] is
  // element ((img*H + oh) * b + i, ow, j*C' + c) of a 4-D map {b*C', W, b, images*H}, and the
  // chunk's 64 columns n = i*b*C' + j*C' + c are kLine consecutive (j, c) of 64 / kLine values
  // of i. The box {kLine, 16, 64 / kLine, 1} is laid out in shared memory as 64 / kLine planes
  // of 16 rows of kLine outputs: for kLine = 64 exactly a plain chunk's rows; for kLine = 32
  // rows of 64 bytes (the 64-byte swizzle).
  static constexpr int kD2sChannels = P::kTmaStoreD2s;
  static constexpr int kLine = kD2sChannels > 0 && kD2sChannels < kChunkN ? kD2sChannels : kChunkN;
  static_assert(kLine == kChunkN || (kLine == 32 && kOutBytes == 2), "lines of 64 outputs, or 32 of 16 bits");
  static constexpr int kLineBytes = kLine * kOutBytes;
  static_assert(kD2sChannels == 0 || kRegisterEpilogue, "a depth_to_space box is finished in registers");

  // The staging byte of output (row r, column col) of a chunk: line (col / kLine) * 16 + r, its
  // 16-byte piece XORed with the line's position (bits 7-9 of 128-byte lines, 7-8 of 64-byte ones).
  __device__ __forceinline__ static int staging_byte(int r, int col) {
    const int line = (col / kLine) * 16 + r, byte = (col % kLine) * kOutBytes;
    const int swizzle = kLineBytes == 128 ? (line & 7) : ((line >> 1) & 3);
    return line * kLineBytes + (((byte >> 4) ^ swizzle) << 4) + (byte & 15);
  }

  // One lane: the bulk store of a staged chunk whose first output is (m_base, n_base).
  __device__ __forceinline__ static void store_box(const TensorMaps& maps, u32 src, int m_base, int n_base) {
    if constexpr (kD2sChannels > 0) {
      tma_store_4d(maps.map[2], src, n_base % kD2sChannels, m_base % P::kTmaStoreD2sWidth,
                   n_base / kD2sChannels, m_base / P::kTmaStoreD2sWidth);
    } else {
      tma_store_2d(maps.map[2], src, n_base, m_base);
    }
  }

  template <typename AccRow>
  __device__ __forceinline__ static void finish_in_registers(const KernelParams& p, const TensorMaps& maps,
                                                             const AccRow& acc, int nc, int m_base, int n_base,
                                                             int lane, unsigned char* staging) {
    using Out = typename P::Out;
    const int g = lane / 4, t = lane % 4;
    // Each pair as one 2- or 4-byte shared access (the residual's load, the outputs' store).
    using Pair = typename Vec<2 * sizeof(Out)>::type;
    union PairBits {
      Pair raw;
      Out elem[2];
    };
    // A bulk-loaded residual: the chunk's pairs are all read before any output is written. The
    // compiler cannot tell a pair's store from the next pair's load (one box), so interleaved
    // they ran one column at a time, each behind its shared-memory load; read first, the chunk's
    // 32 outputs per thread are independent chains (ResNet-50's residual 1x1 convs 2-5% faster,
    // int8 and fp16). Without a residual each column's outputs are stored as they are finished:
    // holding the chunk's finished outputs until its end slowed the mainloop-bound convs that
    // way (int8 3x3 64 -> 64 12.2 -> 12.8 us, fp16 3x3 256 13.6 -> 14.4).
    constexpr int kCols = kChunkN / 8;
    // The swizzle (staging_byte): a row's 16-byte chunk c lands at c ^ (row & 7) of 128-byte
    // rows, or at c ^ ((row >> 1) & 3) of 64-byte rows (the XOR takes address bits 7-9 or 7-8).
    auto pair_at = [&](int j, int h) {
      return reinterpret_cast<Pair*>(staging + staging_byte(g + 8 * h, j * 8 + 2 * t));
    };
    // Column pair j of rows g and g + 8, finished in place (io holds the residual's pairs), so
    // that the compiler loads each column's per-channel operands once, not once per row.
    auto finish_column = [&](int j, PairBits (&io)[2]) {
      const int jj = nc * kCols + j;
      const int n = n_base + j * 8 + 2 * t;
      // Columns past N are clipped by the bulk store, so what they hold is never written: they
      // take the last column's channel (a valid index into the per-channel operands) instead of
      // a guard. Guarded, the compiler kept the guard wherever it could not bound the tile's
      // columns from its index (N of 6 tiles of 64: MobileNet-v2's 384 outputs; N past a tile's
      // edge): each column's operand loads predicated, their pointers reloaded per load, 2.5x
      // the instructions per tile of N = 256. Where N is one tile, though, a column's place is
      // known from the unrolled indices alone: the groups past N (32 of 128 columns at N = 96)
      // are skipped, not finished on a clamped channel (Inception-v3's 3x3 96 -> 96 convs 24%
      // slower that way).
      if (kTilesN == 1 && nc * kChunkN + j * 8 >= P::kN) return;
      // No column left past N: N a whole number of tiles, or one tile of whole groups of 8 (the
      // clamp there spilled registers: Inception-v3's 96 -> 96, 23 spilled words).
      constexpr bool kUnclamped = P::kN % kBN == 0 || (kTilesN == 1 && P::kN % 8 == 0);
      const int ch0 = P::channel(0, kUnclamped ? n : min(n, P::kN - 1));
      const int ch1 = P::channel(0, kUnclamped ? n + 1 : min(n + 1, P::kN - 1));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float res0 = 0.0f, res1 = 0.0f;
        if constexpr (kTmaResidual && sizeof(Out) == 1) {
          const float2 r = byte_pair_to_float2<Out>(io[h].raw);
          res0 = r.x, res1 = r.y;
        } else if constexpr (kTmaResidual) {
          res0 = to_float(io[h].elem[0]), res1 = to_float(io[h].elem[1]);
        }
        io[h].elem[0] = finish_element<P>(p, acc_to_float(acc[4 * jj + 2 * h]), ch0, res0);
        io[h].elem[1] = finish_element<P>(p, acc_to_float(acc[4 * jj + 2 * h + 1]), ch1, res1);
      }
    };
    if constexpr (kTmaResidual) {
      PairBits io[kCols][2];
#pragma unroll
      for (int j = 0; j < kCols; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) io[j][h].raw = *pair_at(j, h);
#pragma unroll
      for (int j = 0; j < kCols; ++j) finish_column(j, io[j]);
#pragma unroll
      for (int j = 0; j < kCols; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) *pair_at(j, h) = io[j][h].raw;
    } else {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        Pair* pair[2] = {pair_at(j, 0), pair_at(j, 1)};
        PairBits io[2]{};  // a skipped column stages zeros
        finish_column(j, io);
#pragma unroll
        for (int h = 0; h < 2; ++h) *pair[h] = io[h].raw;
      }
    }
    fence_proxy_async_shared();  // the staged outputs, visible to the copy engine
    __syncwarp();
    if (lane == 0) {
      store_box(maps, smem_addr(staging), m_base, n_base);
      bulk_commit();
    }
  }

  __device__ __forceinline__ static u64 desc(u32 tile, int row0, int ks) {
    // K-major swizzled rows of kRowBytes: 8-row atoms 8 rows apart, a k step = 32 B.
    return wgmma_descriptor(tile + row0 * kRowBytes + ks * 32, 16, 8 * kRowBytes,
                            kRowBytes == 128 ? kWgmmaSwizzle128B : kWgmmaSwizzle64B);
  }

  __device__ __forceinline__ static void produce(const TensorMaps& maps, u32 smem, u32 full, u32 empty) {
    const void* map_a = maps.map[0];
    const void* map_b = maps.map[1];
    prefetch_tensor_map(map_a);
    prefetch_tensor_map(map_b);
    int stage = 0;
    u32 phase = 0;
    int it = 0;
    for (int tile = blockIdx.x; tile < kTiles; tile += gridDim.x) {
      const CtaCoord cta = rasterize<kTilesM, kTilesN, 1, 1, P::kRaster>(tile);
      const int m0 = cta.tile_m * kBM, n0 = cta.tile_n * kBN;
      // The window origin of pixel m0 (im2col): (img, oh, ow) -> input (h, w).
      int img = 0, h0 = 0, w0 = 0;
      if constexpr (P::kAIm2col) {
        img = m0 / (P::kOutH * P::kOutW);
        const int r = m0 % (P::kOutH * P::kOutW);
        h0 = (r / P::kOutW) * P::kStrideH - P::kPadT;
        w0 = (r % P::kOutW) * P::kStrideW - P::kPadL;
      }
      for (int kt = 0; kt < kKTiles; ++kt, ++it) {
        const int tap = kt / P::kChunks, c0 = (kt % P::kChunks) * kChunkElems;
        if (it >= kStages) mbarrier_wait(empty + 8 * stage, phase ^ 1);
        const u32 bar = full + 8 * stage;
        const u32 dst = smem + stage * kStageBytes;
        mbarrier_arrive_expect_tx(bar, kTxBytes);
        if constexpr (kRows) {
          const int kh = kt / P::kChunks, cr = (kt % P::kChunks) * kChunkElems;
          tma_load_4d(dst, map_a, bar, cr, w0, h0 + kh * P::kDilationH, img);
#pragma unroll
          for (int s = 0; s < kRowTaps; ++s)
            tma_load_3d(dst + kABytes + s * kBN * kRowBytes, map_b, bar, cr, kh * kRowTaps + s, n0);
        } else if constexpr (P::kAIm2col) {
          const int kh = tap / P::kKernelW, kw = tap % P::kKernelW;
          tma_load_im2col_4d(dst, map_a, bar, c0, w0, h0, img, (unsigned short)(kw * P::kDilationW),
                             (unsigned short)(kh * P::kDilationH));
        } else {
          tma_load_2d(dst, map_a, bar, c0, m0);
        }
        if constexpr (kRows) {
          // B went with A above.
        } else if constexpr (P::kBKMajor) {
          tma_load_3d(dst + kABytes, map_b, bar, c0, tap, n0);
        } else {
#pragma unroll
          for (int j = 0; j < kBN / 64; ++j) tma_load_2d(dst + kABytes + j * kBPanelBytes, map_b, bar, n0 + 64 * j, c0);
        }
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  }

  // `maps`: the kernel's __grid_constant__ parameter (its address is a parameter-space one the
  // copy engine reads the descriptors from).
  __device__ __forceinline__ static void run(const KernelParams& p, const TensorMaps& maps) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u32 raw = smem_addr(smem_raw);
    const u32 pad = ((raw + 1023u) & ~1023u) - raw;
    unsigned char* smem = smem_raw + pad;
    const u32 smem_base = smem_addr(smem);
    const u32 full = smem_base + kPipelineBytes + kEpilogueBytes;
    const u32 empty = full + 8 * kStages;
    const u32 turn = empty + 8 * kStages;  // turn[w]: warpgroup w may start a mainloop
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

    if (tid == 0) {
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(full + 8 * s, 1);   // the producer's expect_tx arrival
        mbarrier_init(empty + 8 * s, kCoop ? 8 : 4);  // one arrival per warp of the consuming warpgroup(s)
      }
      mbarrier_init(turn, 4);
      mbarrier_init(turn + 8, 4);
      if constexpr (kTmaResidual)
        for (int b = 0; b < kConsumers * 4 * 2; ++b)
          mbarrier_init(smem_base + kPipelineBytes + kConsumers * 4 * kStagingBytes + 8 * b, 1);
      fence_barrier_init();
    }
    __syncthreads();

    if (warp >= 4 * kConsumers) {
      if constexpr (kProducerWarpgroup) setmaxnreg_dec<kProducerRegs>();
      if (warp == 4 * kConsumers && lane == 0) produce(maps, smem_base, full, empty);
      return;  // the copies complete on their own; the consumers wait for them
    }
    if constexpr (kProducerWarpgroup) setmaxnreg_inc<kConsumerRegs>();

    const int group = warp / 4;
    // The slabs, then the staging buffers (1024-byte aligned each: the swizzle atom).
    float* slab = reinterpret_cast<float*>(smem + kPipelineBytes) + warp * 16 * kSlabPitch;
    unsigned char* staging_bytes =
        smem + kPipelineBytes + kConsumers * 4 * 16 * kSlabPitch * 4 + warp * kStagingBytes;
    typename P::Out* staging = reinterpret_cast<typename P::Out*>(staging_bytes);
    // The register epilogue's two staging boxes and (kTmaResidual) their barriers.
    unsigned char* box1_bytes = smem + kPipelineBytes + warp * kStagingBytes;
    const u32 box0 = smem_addr(staging_bytes), box1 = smem_addr(box1_bytes);
    const u32 res_bars = smem_base + kPipelineBytes + kConsumers * 4 * kStagingBytes + 16 * warp;
    int seq = 0;  // the warp's chunks so far, over all its tiles: chunk seq uses box seq % 2
    constexpr int kChunksPerTile = kMI * (kBN / kChunkN);
    const int g = lane / 4, t = lane % 4;
    // Ping-pong: this warpgroup's tiles are the CTA's tiles number group, group + 2, ... Their
    // mainloops alternate with the other warpgroup's (turn barriers): a parity wait cannot tell
    // a phase from the one two ahead, so no warpgroup may wait on a stage's use before every
    // earlier use of the ring was waited for; and the Tensor Cores serve one mainloop at a time
    // while the other warpgroup runs its epilogue. Warpgroup 0's n-th mainloop follows
    // warpgroup 1's (n-1)-th (turn[0]'s phase n - 1), warpgroup 1's n-th follows warpgroup 0's
    // n-th. Cooperative: both take every tile of the CTA (i = n), each a stage's use in order;
    // neither can wait on a use two ahead, whose copies need the other's release of the one
    // between.
    constexpr int kTileStep = kCoop ? 1 : kConsumers;
    const int wg_row = kCoop ? group * kWM : 0;  // the warpgroup's first row of a tile
    int i = kCoop ? 0 : group;
    for (int tile = blockIdx.x + (kCoop ? 0 : group) * gridDim.x, n = 0; tile < kTiles;
         tile += kTileStep * gridDim.x, i += kTileStep, ++n) {
      const CtaCoord cta = rasterize<kTilesM, kTilesN, 1, 1, P::kRaster>(tile);
      const int m0 = cta.tile_m * kBM + wg_row, n0 = cta.tile_n * kBN;  // m0: the warpgroup's rows
      if constexpr (kTmaResidual) {
        // The residual of the tile's first two chunks, into the staging boxes once the stores
        // of the previous tile's last two have read them.
        if (lane == 0) {
          bulk_wait_read<0>();
          for (int q = 0; q < 2 && q < kChunksPerTile; ++q) {
            int mb, nb;
            chunk_origin(q, m0, n0, warp % 4, mb, nb);
            load_residual(maps, box0, box1, res_bars, seq + q, mb, nb);
          }
        }
      } else {
        // While the other warpgroup's mainloop (cooperative: this one's) runs: this tile's
        // residual, into L2.
        prefetch_residual<P, kWM, kBN, 128>(p, 0, m0, n0, tid % 128);
      }
      if constexpr (!kCoop) {
        if (group == 1)
          mbarrier_wait(turn + 8, n & 1);
        else if (n > 0)
          mbarrier_wait(turn, (n - 1) & 1);
      }
      Acc acc[kMI][kBN / 2];
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int j = 0; j < kBN / 2; ++j) acc[mi][j] = 0;

      int it = i * kKTiles;
      int prev = 0;
      for (int kt = 0; kt < kKTiles; ++kt, ++it) {
        const int stage = it % kStages;
        mbarrier_wait(full + 8 * stage, (it / kStages) & 1);
        const u32 a = smem_base + stage * kStageBytes, b = a + kABytes;
        wgmma_fence();
#pragma unroll
        for (int tap = 0; tap < kRowTaps; ++tap) {
          const int shift = kRows ? tap * P::kDilationW : 0;  // tap's first row of the A box
          const u32 bt = b + tap * kBN * kRowBytes;
#pragma unroll
          for (int ks = 0; ks < kKSteps; ++ks) {
            // MN-major B: the k16 step is 16 rows of its panels (8-row atoms 1024 bytes apart),
            // the panels kBPanelBytes apart.
            const u64 db = P::kBKMajor ? desc(bt, 0, ks) : wgmma_descriptor(bt + ks * 16 * 128, kBPanelBytes, 1024);
#pragma unroll
            for (int mi = 0; mi < kMI; ++mi) {
              const u64 da = desc(a, wg_row + mi * 64 + shift, ks);
              if constexpr (kInt8) WgmmaI8<kBN, Element>::mma(acc[mi], da, db);
              else Wgmma<kBN, Element>::template mma<0, P::kBKMajor ? 0 : 1>(acc[mi], da, db);
            }
          }
        }
        wgmma_commit();
        wgmma_wait<1>();
        // The wgmmas of the previous k-tile have retired: its stage goes back to the producer.
        if (kt > 0 && lane == 0) mbarrier_arrive(empty + 8 * prev);
        prev = stage;
      }
      if (!kCoop && lane == 0) mbarrier_arrive(turn + 8 * (1 - group));  // the other's mainloop may start
      wgmma_wait<0>();
      if (lane == 0) mbarrier_arrive(empty + 8 * prev);

      // Epilogue: per warp, one (16, kChunkN) slab at a time.
      //   (T32, V(kBN/2)) -> (M16, kBN): acc[mi][4j..4j+1] at (g, 8j + 2t), [4j+2..4j+3] at (g+8, ...)
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
        for (int nc = 0; nc < kBN / kChunkN; ++nc) {
          if constexpr (kRegisterEpilogue) {
            const int q = mi * (kBN / kChunkN) + nc;
            int mb, nb;
            chunk_origin(q, m0, n0, warp % 4, mb, nb);
            if constexpr (kTmaResidual) {
              // The next chunk's residual goes into the other box once the previous chunk's
              // store (issued from it) has read it; this chunk's was issued a chunk ago.
              if (lane == 0 && q >= 1 && q + 1 < kChunksPerTile) {
                bulk_wait_read<0>();
                int mn, nn;
                chunk_origin(q + 1, m0, n0, warp % 4, mn, nn);
                load_residual(maps, box0, box1, res_bars, seq + 1, mn, nn);
              }
              mbarrier_wait(res_bars + 8 * (seq & 1), (seq >> 1) & 1);
            } else {
              if (lane == 0) bulk_wait_read<1>();  // the store two chunks ago has read this box
              __syncwarp();
            }
            finish_in_registers(p, maps, acc[mi], nc, mb, nb, lane, seq & 1 ? box1_bytes : staging_bytes);
            ++seq;
            continue;
          }
#pragma unroll
          for (int j = 0; j < kChunkN / 8; ++j) {
            const int jj = nc * (kChunkN / 8) + j;
            *reinterpret_cast<float2*>(slab + g * kSlabPitch + j * 8 + 2 * t) =
                make_float2(acc_to_float(acc[mi][4 * jj]), acc_to_float(acc[mi][4 * jj + 1]));
            *reinterpret_cast<float2*>(slab + (g + 8) * kSlabPitch + j * 8 + 2 * t) =
                make_float2(acc_to_float(acc[mi][4 * jj + 2]), acc_to_float(acc[mi][4 * jj + 3]));
          }
          __syncwarp();
          const int m_base = m0 + mi * 64 + (warp % 4) * 16, n_base = n0 + nc * kChunkN;
          if constexpr (P::kTmaStore) {
            static_assert(sizeof(typename P::Out) <= 2, "16 x 64 outputs of at most 2 bytes per staging buffer");
            if (lane == 0) bulk_wait_read<0>();  // the previous store has read the staging buffer
            __syncwarp();
            stage_slab<P, 16, kChunkN, 32>(p, slab, kSlabPitch, m_base, n_base, lane, staging);
            fence_proxy_async_shared();  // the staged outputs, visible to the copy engine
            __syncwarp();
            if (lane == 0) {
              tma_store_2d(maps.map[2], smem_addr(staging), n_base, m_base);
              bulk_commit();
            }
          } else {
            store_slab<P, 16, kChunkN, 32>(p, slab, kSlabPitch, 0, m_base, n_base, lane);
          }
          __syncwarp();
        }
      }
    }
    if constexpr (P::kTmaStore) {
      if (lane == 0) bulk_wait<0>();  // every store done before the CTA (and its staging) ends
    }
  }
};

}  // namespace tessel
