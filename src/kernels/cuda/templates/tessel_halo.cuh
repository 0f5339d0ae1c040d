// The halo convolution kernel (mma.sync m16n8k16, sm_80+): a stride-1 NHWC convolution
// computed from shared memory that holds all of its weights and one output tile's input
// pixels plus their halo.
//
//   C[img, oy, ox, n] = epilogue(sum_{r,s,c} X[img, oy + r - pt, ox + s - pl, c] * W[n, r, s, c])
//
// Why: the implicit-GEMM kernel (tessel_mma.cuh) streams A = im2col(X) through its pipeline,
// so every input pixel crosses L2 -> SM R*S times, and every CTA streams all of B again. For
// the large-image, few-channel convolutions of super-resolution nets (64-128 channels, 3x3)
// those re-reads, not the Tensor Cores, bound the kernel. Here:
//   - a persistent CTA loads W (block_n x R*S*C, at most ~150 KB) into shared memory once;
//   - per output tile (tile_h x tile_w pixels) it loads the (tile_h+R-1) x (tile_w+S-1) input
//     pixels once (cp.async, zero-filled outside the image), double-buffered where a CTA
//     walks several tiles: the next tile's pixels load while this tile computes (one buffer
//     where each CTA computes one tile: more CTAs per SM overlap their loads instead);
//   - the im2col gather is free: ldmatrix takes one row address per lane, so the A fragment of
//     tap (r, s) for 16 output pixels is read straight from the halo at pixel offset
//     r * halo_w + s. Every k16 step's addresses are compile-time offsets from a per-lane base.
// The epilogue and store map are the contraction kernels' (tessel_epilogue.cuh): an m16 tile
// is 16 pixels of one output row (tile_w % 16 == 0), i.e. 16 consecutive flat m, exactly a
// slab of store_slab; at the right edge of an image whose width is no multiple of tile_w the
// slab's pixels past the edge are not stored (the halo there reads zeros).
//
// Strided and dilated windows (grouped convolutions, and stems: NCHW, or NHWC of at most 4
// channels; any other dense NHWC conv here is stride 1): the halo is (tile - 1) * stride +
// (kernel - 1) * dilation + 1 pixels on a side, and lane l's row address is its output pixel's,
// times the stride, plus the tap's offset, times the dilation.
// With a horizontal stride the halo's columns are stored by phase (column x at slot
// (x % stride) * phase_width + x / stride): the 8 pixels one ldmatrix phase reads, a stride
// apart in the image, are then consecutive slots, on distinct bank quads.
//
// Grouped convolutions (kGroupsPerTile > 0; kernels::HaloLayout): a CTA keeps one channel
// slice of kGroupsPerTile whole groups (kBlockN = kGroupsPerTile * kGroupN output channels,
// kCP = kGroupsPerTile * kGroupC input channels per halo pixel) and walks the spatial tiles;
// each n8 fragment multiplies its own group's channels of the halo (K = taps * kGroupC), so
// no mma computes the zeros of a block-diagonal weight. A dense conv is one group of all
// channels (kGroupC = kCP, kGroupN = kBlockN) in one slice.
//
// Contract with generated code (struct Problem), beyond tessel_epilogue.cuh's:
//   using Element;                                  // f16 or bf16: W, and X once staged
//   using ElementA;                                 // X as stored (Element, or float NCHW)
//   static constexpr int kImages, kInH, kInW, kC;   // X: [kImages, kInH, kInW, kC] (kC: all
//   groups) static constexpr bool kInputNchw;               // X is [kImages, kC, kInH, kInW]
//   instead
// NHWC X and W move by 16-byte cp.async (kC % 8 == 0). A stem's NCHW input (few channels,
// often the graph's fp32 input) is gathered through registers instead, converted to Element
// and stored one 16-byte chunk per pixel and 8 channels (with tap pairs: two 4-channel pixels),
// and so is an NHWC stem's of at most 4 channels under tap pairs (pixels of 2 * kC bytes, 6
// for RGB: no cp.async size, nor aligned to one), each pixel into an 8-byte slot: its loads for
// the next tile are issued before this tile's mainloop and stored after it, so their latency
// hides behind the mmas. W of such a stem (kC not a multiple of 8) is loaded element by
// element, once per CTA.
//   static constexpr int kOutH, kOutW, kR, kS, kPadT, kPadL;
//   static constexpr int kStrideH, kStrideW, kDilationH, kDilationW;
//   static constexpr int kGroupsPerTile, kGroupC, kGroupN, kSlices;
//   static constexpr int kTileH, kTileW, kBlockN, kWarpM, kWarpN;
//   static constexpr int kCP, kPixelPitch, kBufferBytes, kBuffers, kKP, kWeightPitch,
//                        kWeightBytes;
//                                                    // kernels::HaloLayout, the host's numbers
#pragma once

#include "tessel_epilogue.cuh"

namespace tessel {

// Whether a staged X of element type A converts to the mma element E by its bits (an int8 X, a
// QDQ model's quantized input, into f16: HaloConvKernel::stage_bits).
template <typename A, typename E>
struct StagedByBits {
  static constexpr bool value = false;
};
template <>
struct StagedByBits<s8, f16> {
  static constexpr bool value = true;
};

template <typename P>
struct HaloConvKernel {
  using Element = typename P::Element;
  static constexpr int kTH = P::kTileH, kTW = P::kTileW;
  static constexpr int kSH = P::kStrideH, kSW = P::kStrideW, kDH = P::kDilationH,
                       kDW = P::kDilationW;
  // Tap pairs (kernels::HaloLayout::tap_pairs, a stem of at most 4 channels, NCHW or NHWC, and
  // an even horizontal stride): 8-byte pixels of 4 channels in plain column order, and K over
  // (kernel row, pair of adjacent taps) halves: a half's 16 bytes are pixels x and x + 1, x = the
  // lane's column (a multiple of the stride, so 16-byte aligned) plus 2 * pair.
  static constexpr bool kPairs = P::kTapPairs;
  // X staged through registers (fetch_staged, store_staged) rather than by cp.async: an NCHW
  // input, converted as it goes, or tap pairs' few-channel NHWC pixels.
  static constexpr bool kStaged = P::kInputNchw || kPairs;
  static constexpr int kPairsPerRow = (P::kS + 1) / 2;
  static constexpr int kPhases = kPairs ? 1 : kSW;  // column phases stored
  static constexpr int kHaloH = (kTH - 1) * kSH + (P::kR - 1) * kDH + 1;
  static constexpr int kHaloW =
      kPairs ? (kTW - 1) * kSW + 2 * kPairsPerRow : (kTW - 1) * kSW + (P::kS - 1) * kDW + 1;
  static constexpr int kHaloPixels = kHaloH * kHaloW;       // loaded
  static constexpr int kPhaseW = (kHaloW + kPhases - 1) / kPhases;  // slots of one column phase
  static constexpr int kRowSlots = kPhaseW * kPhases;               // slots of one halo row
  // The slot of halo column x, and of a lane's column moved by d (a tap's offset): the lane's
  // own column is a multiple of the stride, so its slot moves by a constant.
  __host__ __device__ static constexpr int slot(int x) { return (x % kPhases) * kPhaseW + x / kPhases; }
  static constexpr int kPixelChunks = P::kCP / 8;  // 16-byte chunks per halo pixel (not pairs)
  static constexpr int kGC = P::kGroupC, kGN = P::kGroupN;
  static constexpr int kChunks = kPairs ? 1 : kGC / 8;  // 16-byte chunks of one group per tap
  static constexpr int kBM = kTH * kTW, kBN = P::kBlockN, kSlices = P::kSlices;
  static constexpr int kWM = P::kWarpM, kWN = P::kWarpN;
  static constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kMI = kWM / 16, kNI = kWN / 8;
  // Groups per warp tile: its n8 fragments belong to kGW groups (one where a group spans the
  // warp tile, or more); fragment ni multiplies the A fragment of group group_of(ni).
  static constexpr int kGW = kWN >= kGN ? kWN / kGN : 1;
  __host__ __device__ static constexpr int group_of(int ni) {
    return kWN >= kGN ? ni * 8 / kGN : 0;
  }
  // K runs over (tap, 8-channel chunk) pairs, "halves" of a k16 step: half h is tap h /
  // kChunks, chunk h % kChunks; k16 step j takes halves 2j and 2j+1 (lanes 0-15 and 16-31 of
  // the A ldmatrix). An odd count leaves the last step's upper half without data: its weights
  // are zero and its lanes re-read the previous half's pixels (finite data, no stray address).
  static constexpr int kTaps = P::kR * P::kS;
  static constexpr int kHalves = kPairs ? P::kR * kPairsPerRow : kTaps * kChunks;
  static constexpr int kKSteps = P::kKP / 16;
  static constexpr int kTilesX = (P::kOutW + kTW - 1) / kTW;
  static constexpr int kTilesY = (P::kOutH + kTH - 1) / kTH;
  static constexpr int kTiles = P::kImages * kTilesY * kTilesX;  // spatial, per slice
  static constexpr int kSlabPitch = kWN + 8;        // as tessel_mma.cuh: conflict-free float2
  static_assert(kSlabPitch % 4 == 0, "16-byte slab rows (slab_run)");
  static constexpr int kEpilogueBytes = kWarpsM * kWarpsN * 16 * kSlabPitch * 4;
  // kBuffers buffers (2, or 1 where each CTA computes one tile), each a tile's pixels and
  // then, after the mainloop, the staging slabs.
  static_assert(P::kBuffers == 1 || P::kBuffers == 2, "one or two halo buffers");
  static constexpr int kSmemBytes = P::kWeightBytes + P::kBuffers * P::kBufferBytes;
  static_assert(kHaloH * kRowSlots * P::kPixelPitch <= P::kBufferBytes &&
                    kEpilogueBytes <= P::kBufferBytes,
                "a buffer holds a tile's pixels or the staging slabs");
  static_assert(kTW % 16 == 0, "an m16 tile is 16 pixels of one output row");
  static_assert(kBM % kWM == 0 && kBN % kWN == 0, "warp tiles divide the CTA tile");
  // B fragments load two n8 tiles at a time (ldmatrix.x4), or one for a warp tile 8 wide
  // (ldmatrix.x2: an RGB output pads N to 8 rather than 16).
  static_assert(kWM % 16 == 0 && (kNI % 2 == 0 || kNI == 1), "whole n16 pairs, or one n8 tile");
  static_assert(kPairs ? P::kC <= 4 && P::kCP == 4 && kSW % 2 == 0 && kDW == 1 && kHaloW % 2 == 0 &&
                             (P::kInputNchw || sizeof(typename P::ElementA) == sizeof(Element))
                       : (P::kInputNchw || P::kC % 8 == 0) && P::kCP % 8 == 0 && kGC % 8 == 0,
                "16-byte chunks, or tap pairs of 8-byte pixels (NHWC ones in Element)");
  static_assert(kWN % kGN == 0 || kGN % kWN == 0, "warp tiles nest with the groups");
  static_assert(kGN % 8 == 0, "an n8 fragment belongs to one group");
  static_assert(P::kCP == P::kGroupsPerTile * kGC, "a halo pixel holds the slice's groups");
  static_assert(P::kKP == (kHalves + 1) / 2 * 16, "the padded K is whole k16 steps of halves");
  // Register staging of a tile: 16-byte units (an NCHW pixel's chunk, or with tap pairs two
  // neighbouring pixels of a row) per thread.
  static constexpr int kStageUnits = kPairs ? kHaloPixels / 2 : kHaloPixels * kPixelChunks;
  static constexpr int kStagedIters = (kStageUnits + kThreads - 1) / kThreads;
  // Odd chunk pitches keep ldmatrix phases on distinct bank quads; with tap pairs a phase's 8
  // lanes read 16-byte units stride * 8 bytes apart, consecutive for stride 2.
  static_assert((kPairs || (P::kPixelPitch / 16) % 2 == 1) && (P::kWeightPitch / 16) % 2 == 1,
                "odd chunk pitches keep ldmatrix phases on distinct bank quads");

  // Weights: row n of shared memory holds W[slice * kBlockN + n, r, s, 0..kGC) for every tap,
  // k = tap*kGC + c, then zeros up to kKP; channels >= kC and rows >= N are zeros. Loaded once
  // per CTA (a CTA keeps its slice).
  __device__ __forceinline__ static void load_weights(const KernelParams& p, u32 smem_w, int tid,
                                                      int slice) {
    const Element* w = static_cast<const Element*>(p.b);
    if constexpr (P::kC % 8 != 0) {
      // Rows of kTaps * kC elements are not 16-byte aligned per tap: 2-byte copies, eight in
      // flight per thread (one at a time, each store waiting on its load, the copy of ResNet's
      // 64 x 224 stem weights was 15% of the int8 stem's stall samples, Nsight Compute, H200).
#pragma unroll 8
      for (int i = tid; i < kBN * P::kKP; i += kThreads) {
        const int n = i / P::kKP, k = i % P::kKP;
        // (tap, channel) of column k: k = tap * kCP + c, or with tap pairs k = half * 8 + e, half
        // = row * kPairsPerRow + pair, e = (tap - 2 * pair) * 4 + c.
        const int half = k / 8, e = k % 8;
        const int col = kPairs ? 2 * (half % kPairsPerRow) + e / 4 : 0;
        const int tap = kPairs ? (half < kHalves && col < P::kS ? half / kPairsPerRow * P::kS + col : kTaps)
                               : k / P::kCP;
        const int c = kPairs ? e % 4 : k % P::kCP;
        const u16 v = n < P::kN && tap < kTaps && c < P::kC
                          ? ld_global_nc<2>(w + (n * kTaps + tap) * P::kC + c)
                          : u16(0);
        asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(smem_w + u32(n * P::kWeightPitch + k * 2)), "h"(v));
      }
      return;
    }
    constexpr int kRowChunks = P::kKP / 8;  // kHalves, plus one zero chunk when odd
    for (int i = tid; i < kBN * kRowChunks; i += kThreads) {
      const int n = i / kRowChunks, h = i % kRowChunks;
      const int row = slice * kBN + n;
      const bool ok = row < P::kN && h < kHalves;
      const Element* src =
          ok ? w + (long long)row * (kTaps * kGC) + h * 8 : w;  // rows of taps x kGC
      CpAsync<16>::copy(smem_w + u32(n * P::kWeightPitch + h * 16), src, ok);
    }
  }

  // Input pixels of tile `tile` plus halo, pixel (hy, hx) at hy * kRowSlots + slot(hx), channels of
  // the CTA's slice; zeros outside the image (the convolution's padding), in the channel padding
  // and past the last group.
  __device__ __forceinline__ static void load_halo(const KernelParams& p, u32 smem_x, int tile,
                                                   int slice, int tid) {
    const int tx = tile % kTilesX, ty = tile / kTilesX % kTilesY, img = tile / (kTilesX * kTilesY);
    const int y0 = ty * kTH * kSH - P::kPadT, x0 = tx * kTW * kSW - P::kPadL;
    const Element* x = static_cast<const Element*>(p.a);
    for (int i = tid; i < kHaloPixels * kPixelChunks; i += kThreads) {
      const int pix = i / kPixelChunks, q = i % kPixelChunks;
      const int iy = y0 + pix / kHaloW, ix = x0 + pix % kHaloW;
      const int ch = slice * P::kCP + q * 8;
      const bool ok = iy >= 0 && iy < P::kInH && ix >= 0 && ix < P::kInW && ch < P::kC;
      const Element* src =
          ok ? x + ((static_cast<typename P::Index>(img) * P::kInH + iy) * P::kInW + ix) * P::kC +
                   ch
             : x;
      const int at = pix / kHaloW * kRowSlots + slot(pix % kHaloW);
      CpAsync<16, true>::copy(smem_x + u32(at * P::kPixelPitch + q * 16), src, ok);
    }
  }

  // Inputs staged through registers (kStaged): part 1 reads this thread's units of tile `tile`
  // into registers (converted, zeros outside the image and beyond kC); part 2 stores them into
  // a buffer.
  __device__ __forceinline__ static void fetch_staged(const KernelParams& p, int tile, int tid,
                                                      u32 (&staged)[kStagedIters][4]) {
    const int tx = tile % kTilesX, ty = tile / kTilesX % kTilesY, img = tile / (kTilesX * kTilesY);
    const int y0 = ty * kTH * kSH - P::kPadT, x0 = tx * kTW * kSW - P::kPadL;
    using A = typename P::ElementA;
    const A* x = static_cast<const A*>(p.a);
    if constexpr (kPairs) {
#pragma unroll
      for (int it = 0; it < kStagedIters; ++it) {
        // Unit i: pixels 2j, 2j + 1 of halo row i / (kHaloW / 2), each one 4-channel slot of two
        // words (channels 0-1, 2-3). NHWC: consecutive threads read consecutive pixel pairs of a
        // row, 4 * kC contiguous bytes each; NCHW: each channel from its plane, consecutive
        // threads reading consecutive pixel pairs of it.
        const int i = tid + it * kThreads;
        const int row = i / (kHaloW / 2), col = i % (kHaloW / 2) * 2;
        const int iy = y0 + row;
#pragma unroll
        for (int px = 0; px < 2; ++px) {
          const int ix = x0 + col + px;
          const bool inside = i < kStageUnits && iy >= 0 && iy < P::kInH && ix >= 0 && ix < P::kInW;
          if constexpr (!P::kInputNchw) {
            // Outside the image the offset is 0: the address stays valid whatever the
            // compiler hoists, and `inside` alone decides the zeros.
            const Element* pixel =
                static_cast<const Element*>(p.a) +
                (inside ? ((static_cast<typename P::Index>(img) * P::kInH + iy) * P::kInW + ix) * P::kC : 0);
            ld_slot(pixel, inside, staged[it][2 * px], staged[it][2 * px + 1]);
          } else {
#pragma unroll
            for (int word = 0; word < 2; ++word) {
              u32 v[2];
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int c = 2 * word + h;
                v[h] = stage_bits(x + ((static_cast<typename P::Index>(img) * P::kC + c) * P::kInH + iy) * P::kInW + ix,
                                  inside && c < P::kC);
              }
              staged[it][2 * px + word] = stage_word(v[0], v[1]);
            }
          }
        }
      }
      return;
    }
#pragma unroll
    for (int it = 0; it < kStagedIters; ++it) {
      // Pixels fastest: consecutive threads read consecutive x of one channel plane.
      const int i = tid + it * kThreads;
      const int q = i / kHaloPixels, pix = i % kHaloPixels;
      const int iy = y0 + pix / kHaloW, ix = x0 + pix % kHaloW;
      const bool inside =
          i < kHaloPixels * kPixelChunks && iy >= 0 && iy < P::kInH && ix >= 0 && ix < P::kInW;
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        u32 v[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = q * 8 + e + h;
          v[h] = stage_bits(x + ((static_cast<typename P::Index>(img) * P::kC + c) * P::kInH + iy) * P::kInW + ix,
                            inside && c < P::kC);
        }
        staged[it][e / 2] = stage_word(v[0], v[1]);
      }
    }
  }
  __device__ __forceinline__ static void store_staged(u32 smem_x, int tid,
                                                      const u32 (&staged)[kStagedIters][4]) {
#pragma unroll
    for (int it = 0; it < kStagedIters; ++it) {
      const int i = tid + it * kThreads;
      if (i >= kStageUnits) break;
      // A pixel's chunk q; with tap pairs unit i is two pixels at 16-byte unit i (plain order).
      const int q = kPairs ? 0 : i / kHaloPixels, pix = kPairs ? 2 * i : i % kHaloPixels;
      const int at = pix / kHaloW * kRowSlots + slot(pix % kHaloW);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_x + u32(at * P::kPixelPitch + q * 16)),
                   "r"(staged[it][0]), "r"(staged[it][1]), "r"(staged[it][2]), "r"(staged[it][3]));
    }
  }
  // An NHWC pixel of kC <= 4 channels as a 4-channel slot (words lo, hi), zeros past kC, and
  // all zeros outside the image (the padding: `inside` false, `pixel` then a valid address
  // not read): one load where its 2 * kC bytes are a power of two (pixels are then aligned to
  // their size), else one per channel. (With a null `pixel` for the padding, tested here, the
  // grayscale 7x7/2 stem read address 0 under compute-sanitizer on sm_90a, 2026-11-29, once
  // its epilogue's code changed; its PTX skipped that load.)
  __device__ __forceinline__ static void ld_slot(const Element* pixel, bool inside, u32& lo, u32& hi) {
    lo = hi = 0;
    if (!inside) return;
    if constexpr (P::kC == 4) {
      const uint2 v = ld_global_nc<8>(pixel);
      lo = v.x;
      hi = v.y;
    } else if constexpr (P::kC == 2) {
      lo = ld_global_nc<4>(pixel);
    } else {
      u32 e[4] = {};
#pragma unroll
      for (int c = 0; c < P::kC; ++c) e[c] = ld_global_nc<2>(pixel + c);
      lo = e[0] | (e[1] << 16);
      hi = e[2] | (e[3] << 16);
    }
  }
  __device__ __forceinline__ static float ld_element(const float* p) { return __ldg(p); }
  // One staged element of an NCHW X: the Element bits of X at p where `ok`, else of zero (read
  // nothing). Through float (to_float, from_float), or for a QDQ model's int8 input under f16
  // weights (its DequantizeLinear folded: S holds the scale) by bits, two integer instructions
  // per element and one f16x2 subtract per pair (stage_word) where the float path takes four: the
  // f16 of bits 0x6400 | (x + 128) is 1152 + x (ulp 1 in [1024, 2048)), zero's is 1152.
  static constexpr bool kStagedByBits = StagedByBits<typename P::ElementA, Element>::value;
  __device__ __forceinline__ static u32 stage_bits(const typename P::ElementA* p, bool ok) {
    if constexpr (kStagedByBits) {
      return 0x6400u | (ok ? u32(ld_global_nc<1>(p)) ^ 0x80u : 0x80u);
    } else {
      return u32(from_float<Element>(ok ? to_float(ld_element(p)) : 0.0f).bits);
    }
  }
  // Two staged elements as one word (the first in the low half); by bits, less 1152 each.
  __device__ __forceinline__ static u32 stage_word(u32 lo, u32 hi) {
    const u32 w = lo | (hi << 16);
    if constexpr (kStagedByBits) {
      u32 d;
      asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(w), "r"(0x64806480u));
      return d;
    } else {
      return w;
    }
  }
  template <typename T>
  __device__ __forceinline__ static T ld_element(const T* p) {
    return T{ld_global_nc<2>(p)};
  }

  // The residual, read into registers before a tile's mainloop and used by its epilogue:
  // store_slab reads it synchronously, and with one CTA per SM nothing would hide that
  // latency. Same chunk mapping as store_slab's (along n, kStoreVec outputs per chunk): lane
  // `lane` handles chunks lane, lane + 32, ... of each 16 x kWN slab.
  static constexpr bool kResidualInRegisters =
      P::kResidual >= 0 && !P::kStoreAlongM && P::kStoreNStride == 1;
  static constexpr int kV = P::kStoreVec;
  static constexpr int kSlabChunks = 16 * (kWN / kV);
  static constexpr int kLaneChunks = (kSlabChunks + 31) / 32;
  using ResidualVector = OutVector<typename P::Residual, kV>;

  // Output coordinates of chunk j of this lane in the slab whose first pixel is flat m_base.
  __device__ __forceinline__ static bool chunk_position(int j, int lane, int m_base, int n_base,
                                                        int rows, int& r, int& c, int& m, int& n) {
    const int q = j * 32 + lane;
    r = q / (kWN / kV);
    c = q % (kWN / kV) * kV;
    m = m_base + r;
    n = n_base + c;
    return q < kSlabChunks && r < rows && m < P::kM && n < P::kN;
  }

  // The pixels of m16 tile `mi` inside the image: 16, or fewer at the right edge (0: none,
  // including rows past the bottom edge, which would alias the next image in flat m).
  __device__ __forceinline__ static int slab_rows(int tile, int wm, int mi, int& m_base) {
    const int tx = tile % kTilesX, ty = tile / kTilesX % kTilesY, img = tile / (kTilesX * kTilesY);
    const int pixel = wm * kWM + mi * 16;
    const int oy = ty * kTH + pixel / kTW, ox = tx * kTW + pixel % kTW;
    m_base = (img * P::kOutH + oy) * P::kOutW + ox;
    if (oy >= P::kOutH || ox >= P::kOutW) return 0;
    return P::kOutW - ox < 16 ? P::kOutW - ox : 16;
  }

  __device__ __forceinline__ static void load_residuals(const KernelParams& p, int tile, int wm,
                                                        int n_base, int lane,
                                                        ResidualVector (&rv)[kMI][kLaneChunks]) {
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      int m_base;
      const int rows = slab_rows(tile, wm, mi, m_base);
#pragma unroll
      for (int j = 0; j < kLaneChunks; ++j) {
        int r, c, m, n;
        if (chunk_position(j, lane, m_base, n_base, rows, r, c, m, n))
          rv[mi][j].load(p.extra[P::kResidual], P::store_offset(0, m, n));
      }
    }
  }

  // store_slab with the residual from registers.
  __device__ __forceinline__ static void store_with_residual(const KernelParams& p, const float* slab,
                                                             int m_base, int n_base, int rows, int lane,
                                                             const ResidualVector (&rv)[kLaneChunks]) {
#pragma unroll
    for (int j = 0; j < kLaneChunks; ++j) {
      int r, c, m, n;
      if (!chunk_position(j, lane, m_base, n_base, rows, r, c, m, n)) continue;
      OutVector<typename P::Out, kV> ov;
      float v[kV];
      slab_run<kV, 1>(slab + r * kSlabPitch + c, v);
#pragma unroll
      for (int i = 0; i < kV; ++i)
        ov.elem[i] = finish_element<P>(p, v[i], P::channel(0, n + i), to_float(rv[j].elem[i]));
      ov.store(p.c, P::store_offset(0, m, n));
    }
  }

  // An output stored along m (NCHW: each channel's pixels contiguous) goes from the
  // accumulators straight to memory, one element per store: a warp's store of one fragment
  // register writes, per channel, 8 consecutive pixels (a 32-byte sector in fp32), the sectors
  // the slab's m-runs would write, without the slab's round trip through shared memory, whose
  // m-runs of one column read 4-way bank conflicts. (The SR net's 16 -> 3 RGB conv at 4K,
  // stored NCHW fp32: L1 83% busy, 29% of its shared-memory wavefronts excess, 1.6 TB/s.)
  __device__ __forceinline__ static void store_fragments(const KernelParams& p,
                                                         const float (&acc)[kMI][kNI][4], int tile,
                                                         int wm, int n_base, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      int m_base;
      const int rows = slab_rows(tile, wm, mi, m_base);
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = g + 8 * (e / 2), n = n_base + ni * 8 + 2 * t + e % 2;
          if (r >= rows || n >= P::kN) continue;
          const typename P::Index off = P::store_offset(0, m_base + r, n);
          tessel::ResidualVector<P, 1> residual;
          residual.load(p, off);
          OutVector<typename P::Out, 1> ov;
          ov.elem[0] = finish_element<P>(p, acc[mi][ni][e], P::channel(0, n), residual[0]);
          ov.store(p.c, off);
        }
    }
  }

  // Stored along n straight from the fragments (an NHWC-like store of 1- or 2-byte outputs, 8
  // consecutive channels contiguous and aligned: the plan's store vector a multiple of 8, no
  // residual, warp tiles 32 channels wide, whole ones in N, so that every channel a lane
  // finishes exists): no slab. Lane (g, t) of an m16n8 fragment holds
  // channels 2t, 2t + 1 of rows g and g + 8; its finished outputs, packed by channel pair, are
  // transposed within the lane's quad (three shuffles per word) so that lane t holds channels
  // 8t .. 8t + 7 of both rows, stored as one 8- (int8) or 16-byte (f16) vector per row: a quad
  // writes a row's 32 channels whole. Against the slab (ResNet's 7x7/2 stem into int8): per
  // warp and m16 tile, 32 shared-memory wavefronts become 3 shuffles, and the per-channel
  // operands (scale, bias) are read for the lane's 8 channels instead of a chunk's 16 (held
  // across the tile's m16 tiles instead, they spilled at the kernel's 128 registers).
  static constexpr bool kDirectStore = !P::kStoreAlongM && P::kStoreNStride == 1 && P::kResidual < 0 &&
                                       kNI == 4 && P::kStoreVec % 8 == 0 && P::kN % kWN == 0 &&
                                       (sizeof(typename P::Out) == 1 || sizeof(typename P::Out) == 2);

  // y[j] = lane (quad lane j)'s x[t] for this lane t of the quad: a 4 x 4 transpose of words.
  __device__ __forceinline__ static void quad_transpose(const u32 (&x)[4], int t, u32 (&y)[4]) {
    u32 got[4];
    got[0] = t == 0 ? x[0] : t == 1 ? x[1] : t == 2 ? x[2] : x[3];
#pragma unroll
    for (int k = 1; k < 4; ++k) {
      const int to = t ^ k;  // lane t ^ k wants this lane's x[t ^ k]
      const u32 send = to == 0 ? x[0] : to == 1 ? x[1] : to == 2 ? x[2] : x[3];
      got[k] = __shfl_xor_sync(0xffffffffu, send, k);  // lane t ^ k's x[t]
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = j ^ t;
      y[j] = k == 0 ? got[0] : k == 1 ? got[1] : k == 2 ? got[2] : got[3];
    }
  }

  __device__ __forceinline__ static void store_direct(const KernelParams& p, const float (&acc)[kMI][kNI][4],
                                                      int tile, int wm, int n_base, int lane) {
    using Out = typename P::Out;
    const int g = lane / 4, t = lane % 4;
    const int n = n_base + 8 * t;  // this lane's 8 stored channels
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      int m_base;
      const int rows = slab_rows(tile, wm, mi, m_base);
      if (rows == 0) continue;  // uniform across the warp
      // word[h][ni]: channels 8 ni + 2t, + 1 of row g + 8h (int8: both rows in word[0]).
      u32 word[2][kNI];
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          u32 pair = 0;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int ch = P::channel(0, n_base + ni * 8 + 2 * t + e);
            const Out o = finish_element<P>(p, acc[mi][ni][2 * h + e], ch, 0.0f);
            pair |= u32(static_cast<u16>(o.bits) & (sizeof(Out) == 1 ? 0xffu : 0xffffu)) << (e * 8 * sizeof(Out));
          }
          if constexpr (sizeof(Out) == 1)
            word[0][ni] = h == 0 ? pair : word[0][ni] | pair << 16;
          else
            word[h][ni] = pair;
        }
      if constexpr (sizeof(Out) == 1) {
        u32 y[4];
        quad_transpose(word[0], t, y);
        // Row g: the low halves (channel pairs t' = 0..3), row g + 8: the high ones.
        const uint2 lo = make_uint2(__byte_perm(y[0], y[1], 0x5410), __byte_perm(y[2], y[3], 0x5410));
        const uint2 hi = make_uint2(__byte_perm(y[0], y[1], 0x7632), __byte_perm(y[2], y[3], 0x7632));
        if (g < rows && m_base + g < P::kM)
          *reinterpret_cast<uint2*>(static_cast<Out*>(p.c) + P::store_offset(0, m_base + g, n)) = lo;
        if (g + 8 < rows && m_base + g + 8 < P::kM)
          *reinterpret_cast<uint2*>(static_cast<Out*>(p.c) + P::store_offset(0, m_base + g + 8, n)) = hi;
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = g + 8 * h;
          u32 y[4];
          quad_transpose(word[h], t, y);
          if (r < rows && m_base + r < P::kM)
            *reinterpret_cast<uint4*>(static_cast<Out*>(p.c) + P::store_offset(0, m_base + r, n)) =
                make_uint4(y[0], y[1], y[2], y[3]);
        }
      }
    }
  }

  // Fragment addressing, per lane (tessel_mma.cuh's table, K-major A and B):
  //   A, m16 tile mi: lane l addresses output pixel l % 16 of the tile's 16 and half
  //     2j + l / 16 of k16 step j: pixel shift (r * kRowSlots + the slot shift of s) of that half's
  //     tap, plus its chunk; the per-step shifts are compile-time constants, one for each half of
  //     the warp.
  //   B, n16 pair nj: lane l addresses weight row n0 + l % 8 + 8 * (l / 16), chunk (l / 8) % 2;
  //     k16 step j adds j * 32.
  struct Lanes {
    u32 a[kMI];
    u32 b;
    bool upper;  // lanes 16-31: the upper half of each k16 step
  };

  __device__ __forceinline__ static Lanes lane_offsets(int lane, int wm, int wn) {
    Lanes o;
    const int first_group = wn * kWN / kGN;  // the warp tile's first group in the slice
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi) {
      const int pixel = wm * kWM + mi * 16;  // first output pixel of the m16 tile in the CTA tile
      // Phases: slot(x * kSW) = x; tap pairs: plain column x * kSW.
      const int hp = (pixel / kTW) * kSH * kRowSlots + (pixel % kTW + lane % 16) * (kPairs ? kSW : 1);
      // With an even chunk count both halves of a step share a tap: the upper half is the
      // next chunk, a per-lane constant (and no per-step select).
      o.a[mi] = u32(hp * P::kPixelPitch + first_group * kChunks * 16 +
                    (kChunks % 2 == 0 ? (lane / 16) * 16 : 0));
    }
    o.b = u32((wn * kWN + lane % 8 + 8 * (lane / 16)) * P::kWeightPitch + ((lane / 8) % 2) * 16);
    o.upper = lane >= 16;
    return o;
  }

  // Byte offset of half h's data from a pixel's first chunk.
  __host__ __device__ static constexpr int half_shift(int h) {
    const int hh = h < kHalves ? h : kHalves - 1;
    if (kPairs) return ((hh / kPairsPerRow) * kDH * kRowSlots + 2 * (hh % kPairsPerRow)) * P::kPixelPitch;
    const int tap = hh / kChunks;
    const int d = (tap % P::kS) * kDW;  // the tap's column offset
    return ((tap / P::kS) * kDH * kRowSlots + (d % kSW) * kPhaseW + d / kSW) * P::kPixelPitch +
           (hh % kChunks) * 16;
  }

  // B fragments of k16 step `step`: two n8 tiles per ldmatrix.x4, or one by .x2.
  __device__ __forceinline__ static void load_b(u32 (&bf)[kNI][2], const Lanes& o, u32 weights, int step) {
    if constexpr (kNI == 1) ldmatrix_x2(bf[0], weights + o.b + u32(step * 32));
#pragma unroll
    for (int nj = 0; nj < kNI / 2; ++nj) {
      u32 r[4];
      ldmatrix_x4(r, weights + o.b + u32(nj * 16 * P::kWeightPitch + step * 32));
      bf[2 * nj][0] = r[0];
      bf[2 * nj][1] = r[1];
      bf[2 * nj + 1][0] = r[2];
      bf[2 * nj + 1][1] = r[3];
    }
  }

  template <int kStep>
  __device__ __forceinline__ static void load_fragments(u32 (&af)[kGW][kMI][4], u32 (&bf)[kNI][2],
                                                        const Lanes& o, u32 halo, u32 weights) {
    constexpr int kLower = half_shift(2 * kStep), kUpper = half_shift(2 * kStep + 1);
    u32 shift = u32(kLower);
    if constexpr (kChunks % 2 != 0) shift = u32(o.upper ? kUpper : kLower);
#pragma unroll
    for (int gw = 0; gw < kGW; ++gw)
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
        ldmatrix_x4(af[gw][mi], halo + o.a[mi] + shift + u32(gw * kChunks * 16));
    load_b(bf, o, weights, kStep);
  }

  // All k16 steps of one tile, fragments double-buffered in registers: step k+1 loads while
  // step k's mmas issue. Unrolled at compile time (kKSteps is 9 * channels / 16 for 3x3).
  template <int kStep>
  __device__ __forceinline__ static void mainloop(float (&acc)[kMI][kNI][4],
                                                  u32 (&af)[2][kGW][kMI][4], u32 (&bf)[2][kNI][2],
                                                  const Lanes& o, u32 halo, u32 weights) {
    if constexpr (kStep < kKSteps) {
      if constexpr (kStep + 1 < kKSteps)
        load_fragments<kStep + 1>(af[(kStep + 1) % 2], bf[(kStep + 1) % 2], o, halo, weights);
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni)
          MmaM16N8K16<Element>::fma(acc[mi][ni], af[kStep % 2][group_of(ni)][mi],
                                    bf[kStep % 2][ni]);
      mainloop<kStep + 1>(acc, af, bf, o, halo, weights);
    }
  }

  // Row reuse (a dense stride-1 window of whole 16-channel steps over 16-pixel tile rows): a
  // warp's kMI m16 tiles are kMI consecutive output rows, and tap (r, s) of output row mi reads
  // input row mi + r * kDH of the halo. The k16 steps of one (column tap s, channel pair cp)
  // are its kernel rows r, whose A fragments are the same kRowsA input rows, shifted: each is
  // read once and multiplied into every output row that takes it (with that r's B), instead
  // of once per (mi, r): kRowsA ldmatrix instead of R * kMI (6 instead of 12 for 3x3 over 4
  // rows). B's fragments of the R steps are read before the rows. (The SR net's 16 -> 3 tail
  // at 4K: shared memory was its busiest unit, 73% of its cycles, the A fragments half of it.)
  static constexpr int kPairsPerTap = kChunks / 2;
  static constexpr bool kRowReuse = !kPairs && kSH == 1 && kSW == 1 && kTW == 16 && kChunks % 2 == 0 &&
                                    kGW == 1 && P::kGroupsPerTile == 1 && P::kR > 1;
  static constexpr int kRowsA = kMI + (P::kR - 1) * kDH;

  __device__ __forceinline__ static void mainloop_rows(float (&acc)[kMI][kNI][4], const Lanes& o, u32 halo,
                                                       u32 weights) {
#pragma unroll
    for (int g = 0; g < P::kS * kPairsPerTap; ++g) {
      const int s = g / kPairsPerTap, cp = g % kPairsPerTap;
      u32 bf[P::kR][kNI][2];
#pragma unroll
      for (int r = 0; r < P::kR; ++r) load_b(bf[r], o, weights, (r * P::kS + s) * kPairsPerTap + cp);
#pragma unroll
      for (int row = 0; row < kRowsA; ++row) {
        u32 af[4];
        // o.a[0]: the lane's pixel of the warp's first output row (and its upper-half chunk).
        ldmatrix_x4(af, halo + o.a[0] + u32((row * kRowSlots + s * kDW) * P::kPixelPitch + cp * 32));
#pragma unroll
        for (int r = 0; r < P::kR; ++r) {
          const int mi = row - r * kDH;
          if (mi < 0 || mi >= kMI) continue;
#pragma unroll
          for (int ni = 0; ni < kNI; ++ni) MmaM16N8K16<Element>::fma(acc[mi][ni], af, bf[r][ni]);
        }
      }
    }
  }

  // Row chains (a strided window of dilation 1 over 16-pixel tile rows: the stems): output row
  // mi's kernel row r reads halo row mi * kSH + r, so the kernel rows of one residue c (r = c,
  // c + kSH, ...) form a chain along which A moves by one m16 tile: A(mi, r + kSH) = A(mi + 1, r).
  // Per chain and k16 step within a kernel row a warp reads kMI + Q - 1 A fragments (Q: the
  // chain's kernel rows) instead of kMI * Q, each kept in registers while the chain walks
  // down; B's fragments are read once per (r, step) as in mainloop. (ResNet's 7x7/2 stem on
  // warps of 4 output rows: 26 A ldmatrix per tile instead of 56; the mainloop's shared-memory
  // reads 336 -> 216 wavefronts per warp.) A k16 step stays inside one kernel row: whole pairs
  // of tap pairs, or of 8-channel chunks. No explicit prefetch into a second set of fragments:
  // at the kernel's 128 registers, with a staged tile's 12 words live across the mainloop, that
  // spilled (ptxas, sm_90a); the scheduler hoists the loads it has room for.
  static constexpr int kStepsPerRow = kPairs ? kPairsPerRow / 2 : P::kS * kChunks / 2;
  static constexpr bool kChainReuse = kSH > 1 && kDH == 1 && kTW == 16 && kMI > 1 && kGW == 1 &&
                                      P::kGroupsPerTile == 1 && P::kR > kSH &&
                                      (kPairs ? kPairsPerRow % 2 == 0 : kChunks % 2 == 0);
  static_assert(!kChainReuse || kKSteps == P::kR * kStepsPerRow, "whole k16 steps per kernel row");

  __device__ __forceinline__ static void mainloop_chains(float (&acc)[kMI][kNI][4], const Lanes& o, u32 halo,
                                                         u32 weights) {
    // The lane's pixel of the warp's first output row; with tap pairs the upper half of a step
    // is the row's next pair, two pixels on (o.a has other windows' upper chunk already).
    const u32 base = halo + o.a[0] + (kPairs && o.upper ? u32(2 * P::kPixelPitch) : 0u);
    constexpr u32 kRowBytes = u32(kRowSlots * P::kPixelPitch);
#pragma unroll
    for (int w = 0; w < kStepsPerRow; ++w) {
#pragma unroll
      for (int c = 0; c < kSH; ++c) {
        const int chain = (P::kR - c + kSH - 1) / kSH;  // kernel rows c, c + kSH, ... below kR
        if (chain <= 0) continue;
        const u32 at = base + u32(half_shift(2 * w)) + u32(c) * kRowBytes;
        u32 af[kMI][4];
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) ldmatrix_x4(af[mi], at + u32(mi * kSH) * kRowBytes);
#pragma unroll
        for (int q = 0; q < chain; ++q) {
          u32 bf[kNI][2];
          load_b(bf, o, weights, (c + kSH * q) * kStepsPerRow + w);
          if (q > 0) {
#pragma unroll
            for (int mi = 0; mi + 1 < kMI; ++mi)
#pragma unroll
              for (int e = 0; e < 4; ++e) af[mi][e] = af[mi + 1][e];
            ldmatrix_x4(af[kMI - 1], at + u32((kMI - 1 + q) * kSH) * kRowBytes);  // A(kMI - 1, q)
          }
#pragma unroll
          for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
            for (int ni = 0; ni < kNI; ++ni) MmaM16N8K16<Element>::fma(acc[mi][ni], af[mi], bf[ni]);
        }
      }
    }
  }

  __device__ __forceinline__ static void run(const KernelParams& p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const u32 smem_w = smem_addr(smem);
    const u32 smem_x = smem_w + P::kWeightBytes;  // kBuffers buffers

    // CTA i keeps slice i % kSlices and walks every (gridDim.x / kSlices)-th spatial tile.
    const int slice = blockIdx.x % kSlices, walk = gridDim.x / kSlices;
    int tile = blockIdx.x / kSlices;
    if (tile >= kTiles) return;
    const int n_slice = slice * kBN;  // the slice's first output channel
    // Group 0: the weights and the first tile's pixels.
    load_weights(p, smem_w, tid, slice);
    u32 staged[kStaged ? kStagedIters : 1][4];
    if constexpr (kStaged) {
      fetch_staged(p, tile, tid, staged);
      store_staged(smem_x, tid, staged);
    } else {
      load_halo(p, smem_x, tile, slice, tid);
    }
    cp_async_commit();
    const Lanes o = lane_offsets(lane, wm, wn);
    const int g = lane / 4;

    for (int buffer = 0; tile < kTiles; tile += walk, buffer ^= 1) {
      // Prefetch the next tile into the other buffer, which every warp finished reading
      // before the barrier that ended the previous iteration. With one buffer the host gave
      // every tile its own CTA (HaloLayout::buffers): there is no next tile.
      const int next = P::kBuffers == 2 ? tile + walk : kTiles;
      if constexpr (kStaged) {
        if (next < kTiles) fetch_staged(p, next, tid, staged);
      } else if (next < kTiles) {
        load_halo(p, smem_x + u32((buffer ^ 1) * P::kBufferBytes), next, slice, tid);
      }
      cp_async_commit();
      cp_async_wait<1>();  // everything but the prefetch has landed
      __syncthreads();

      ResidualVector residual[kResidualInRegisters ? kMI : 1][kLaneChunks];
      if constexpr (kResidualInRegisters)
        load_residuals(p, tile, wm, n_slice + wn * kWN, lane, residual);
      const u32 halo = smem_x + u32(buffer * P::kBufferBytes);
      float acc[kMI][kNI][4] = {};
      if constexpr (kRowReuse) {
        mainloop_rows(acc, o, halo, smem_w);
      } else if constexpr (kChainReuse) {
        mainloop_chains(acc, o, halo, smem_w);
      } else {
        u32 af[2][kGW][kMI][4], bf[2][kNI][2];
        load_fragments<0>(af[0], bf[0], o, halo, smem_w);
        mainloop<0>(acc, af, bf, o, halo, smem_w);
      }

      // Epilogue. Along m (NCHW): from the fragments (store_fragments).
      if constexpr (P::kStoreAlongM) {
        store_fragments(p, acc, tile, wm, n_slice + wn * kWN, lane);
      } else if constexpr (kDirectStore) {
        store_direct(p, acc, tile, wm, n_slice + wn * kWN, lane);
      } else {
        // Epilogue: per m16 tile (16 pixels of one output row), stage the accumulators in this
        // buffer (every warp is done reading its pixels after the barrier) and store the pixels
        // inside the image (slab_rows) through the store map.
        __syncthreads();
        float* slab = reinterpret_cast<float*>(smem + P::kWeightBytes + buffer * P::kBufferBytes) +
                      warp * 16 * kSlabPitch;
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) {
          int m;
          const int rows = slab_rows(tile, wm, mi, m);
          if (rows == 0) continue;  // uniform across the warp
#pragma unroll
          for (int ni = 0; ni < kNI; ++ni) {
            *reinterpret_cast<float2*>(slab + g * kSlabPitch + ni * 8 + 2 * (lane % 4)) =
                make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(slab + (g + 8) * kSlabPitch + ni * 8 + 2 * (lane % 4)) =
                make_float2(acc[mi][ni][2], acc[mi][ni][3]);
          }
          __syncwarp();
          if constexpr (kResidualInRegisters)
            store_with_residual(p, slab, m, n_slice + wn * kWN, rows, lane, residual[mi]);
          else
            store_slab<P, 16, kWN, 32>(p, slab, kSlabPitch, 0, m, n_slice + wn * kWN, lane, rows);
          __syncwarp();
        }
      }
      if constexpr (kStaged) {
        // The other buffer was last read in the previous iteration, before its closing barrier.
        if (next < kTiles) store_staged(smem_x + u32((buffer ^ 1) * P::kBufferBytes), tid, staged);
      }
      __syncthreads();  // this buffer (pixels, then slabs) is refilled by the next prefetch
    }
    cp_async_wait<0>();
  }
};

}  // namespace tessel
