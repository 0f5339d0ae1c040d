// Depthwise convolution (tessel.Conv with group == C, one input and one output channel per
// group) over NHWC activations in f16, bf16 or f32 storage, or int8 (a QDQ model's, with its
// dequantization scale: fold-qdq's int8-input form), with fp32 math. Each output channel
// reads kKH*kKW inputs of its own channel: a memory-bound op for 3x3 windows, for which the
// kernel moves each input byte from DRAM once and each output byte once, in 16-byte copies;
// at 7x7 (49 fp32 FMAs per output) the FMAs bound it, and the kernel keeps every other
// instruction (shared reads, f16 or int8 conversions, weights) few per FMA by blocking outputs
// per thread.
//
// Per CTA (the tiling, with every shape, is tessel_depthwise_tile.cuh): once, the slab's
// weights into smem w (KH*KW, slab) fp32 and, where they fit, into each thread's registers;
// the bias into registers. Then per tile:
//   1. cp.async stages the input tile with its halo, smem x (in_rows, in_cols, slab), one
//      16-byte chunk (8 f16 or 16 int8 channels) per copy whatever the thread's fragment,
//      coalesced along channels; the window's padding and the channels past kC are zero-filled
//      by the copy itself. With two stages the next tile's copies fly while this one is
//      computed;
//   2. each thread computes a block of rows_per_thread x cols_per_thread output pixels x kVec
//      channels, reading its span of staged pixels one row at a time into registers: each
//      staged pixel is read and converted once and feeds every tap that uses it (KH x KW
//      taps of up to rows x cols outputs), so shared-memory traffic per output falls with the
//      block and the weights need no shared-memory reads when they live in registers;
//   3. the int8 input's scale and the bias (one fma), the fused epilogue steps and the
//      residual in fp32, one rounding, one store of kVec channels per pixel (16 bytes for 8
//      f16), or the problem's store map element-wise.
// CTAs walk the tiles grid-stride (a 1-D grid of any size); the emitter launches one CTA per
// tile or a multiple of the slab count, so that a CTA keeps its slab and its weights.
//
// Problem supplies: using X (the input: T, or i8), using T (W and the residual), using Out (Y:
// T, or i8 where the epilogue's last step quantizes, store_as); kN, kH, kW, kC (input), kXLd
// and kXOffset (X's pixels are rows of kXLd elements, its channels from kXOffset on: a
// channel slice of a Concat's buffer, else kC and 0), kOH,
// kOW, kCo (pre-store output, kCo == kC), kKH, kKW, kSH, kSW, kPT, kPL, kDH, kDW, kStageVec;
// the tiling kVec, kSlabVecs, kColGroups, kColsPerThread, kRowGroups, kRowsPerThread, kStages,
// kRegisterWeights, kTilePerCta; kResidual, kVectorStore, kScale (an int8 X's scale) and
// kRequantize (an int8 X read as quantize_s8_f(x, requantize_factor(p, c)), its integers on
// another grid: prologue "requantize"); and
//   static float bias(const OpParams&, int c);            // 0 without a bias
//   static float scale(const OpParams&, int c);           // kScale: S[c], an int8 X's
//                                                         // dequantization scale
//   static float requantize_factor(const OpParams&, int c);  // kRequantize: R[c]
//   static float epilogue(float v, float residual);       // the fused steps, in order
//   static i64 store_offset(int n, int oh, int ow, int c); // where pre-store (n, oh, ow, c) goes
// The residual (p.in[3]) is shaped like the pre-store output.
#pragma once

#include "tessel_depthwise_tile.cuh"
#include "tessel_op_common.cuh"

namespace tessel {

// A fragment read from shared memory (Frag::load reads global memory through the read-only
// path, which shared addresses must not take).
template <typename T, int V>
__device__ __forceinline__ void load_shared(Frag<T, V>& f, const T* p) {
  using Chunk = typename Frag<T, V>::Chunk;
#pragma unroll
  for (int c = 0; c < Frag<T, V>::kBytes / Frag<T, V>::kChunk; ++c)
    reinterpret_cast<Chunk*>(f.v)[c] = reinterpret_cast<const Chunk*>(p)[c];
}

// One element through the read-only path (ld.global.nc): loads the compiler may batch ahead of
// shared-memory stores, which a generic pointer's loads could alias.
template <typename T>
__device__ __forceinline__ T load_nc(const T* p) {
  const auto bits = ld_global_nc<static_cast<int>(sizeof(T))>(p);
  T v;
  memcpy(&v, &bits, sizeof(T));
  return v;
}

// Copies one fragment of kBytes from global `src` to shared `dst`, or zeros when !valid.
// 4, 8 and 16 bytes go through cp.async (the zero fill is its source size 0; `src` must still
// be mapped); a 1- or 2-byte fragment (an odd channel count of int8, or of f16/bf16; 2 int8
// channels) is a plain copy.
template <int kBytes>
__device__ __forceinline__ void stage_fragment(void* dst, const void* src, bool valid) {
  if constexpr (kBytes >= 4) {
    CpAsync<kBytes>::copy(smem_addr(dst), src, valid);
  } else {
    static_assert(kBytes == 1 || kBytes == 2, "fragments are 1, 2, 4, 8 or 16 bytes");
    using Bits = typename Vec<kBytes>::type;
    *static_cast<Bits*>(dst) = valid ? ld_global_nc<kBytes>(src) : Bits(0);
  }
}

// Two fp32 values rounded to T and packed into one 32-bit word, `lo` in the low half: one
// cvt for both (PTX ISA 9.7.9.21: cvt.rn.{f16x2,bf16x2}.f32 d, a, b puts a in the upper half).
template <typename T>
__device__ __forceinline__ u32 pack2(float lo, float hi);
template <>
__device__ __forceinline__ u32 pack2<f16>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <>
__device__ __forceinline__ u32 pack2<bf16>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// v rounded to T and stored at p (aligned to the fragment's bytes) with 16-, 8- or 4-byte
// stores of whole words, so that a fragment of 8 f16 channels is one st.global.v4.
template <typename T, int V>
__device__ __forceinline__ void store_rounded(T* p, const float (&v)[V]) {
  constexpr int kWords = V * static_cast<int>(sizeof(T)) / 4;
  if constexpr (kWords == 0) {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = store_as<T>(v[i]);  // one 2-byte element, or 1-2 int8
  } else {
    u32 w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(T) == 4)
        w[i] = __float_as_uint(v[i]);
      else if constexpr (sizeof(T) == 1)
        w[i] = pack4_s8<T>(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);  // i8 or u8
      else
        w[i] = pack2<T>(v[2 * i], v[2 * i + 1]);
    }
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords; i += 4)
        st_global_v4(p + i * 4 / sizeof(T), w[i], w[i + 1], w[i + 2], w[i + 3]);
    } else if constexpr (kWords % 2 == 0) {
      st_global_v2(p, w[0], w[1]);
    } else {
      reinterpret_cast<u32*>(p)[0] = w[0];
    }
  }
}

template <typename P>
struct DepthwiseConv {
  using X = typename P::X;
  using T = typename P::T;
  static_assert(P::kCo == P::kC, "channel multiplier 1: the grouped kernel takes the others");

  // In DepthwiseTiling's field order: problem, staged chunk width, tiling.
  // clang-format off
  static constexpr DepthwiseTiling kTiling{
      P::kN, P::kH, P::kW, P::kC, P::kOH, P::kOW,
      P::kKH, P::kKW, P::kSH, P::kSW, P::kPT, P::kPL, P::kDH, P::kDW, P::kStageVec,
      P::kVec, P::kSlabVecs, P::kColGroups, P::kColsPerThread, P::kRowGroups, P::kRowsPerThread,
      P::kStages, P::kRegisterWeights, P::kTilePerCta};
  // clang-format on
  static constexpr int kVec = P::kVec;
  static constexpr int kSlab = kTiling.slab();
  static constexpr int kThreads = kTiling.threads();
  static constexpr int kChunks = kTiling.chunks();
  static constexpr int kRows = P::kRowsPerThread;
  static constexpr int kCols = P::kColsPerThread;
  static constexpr int kSpanCols = kTiling.span_cols();
  static constexpr int kTaps = P::kKH * P::kKW;
  static constexpr int kStages = P::kStages;
  static constexpr int kChunkBytes = P::kStageVec * static_cast<int>(sizeof(X));
  // The weights a thread keeps: all its taps, or (from smem at each use) none.
  static constexpr int kWeightRegs = P::kRegisterWeights ? kTaps : 1;

  struct Smem {
    alignas(16) X x[kStages][kTiling.smem_x_elems()];  // smem x: (stages, in_rows, in_cols, slab)
    alignas(16) float w[kTaps * kSlab];                // smem w: (KH*KW, slab), tap-major
  };
  static_assert(sizeof(Smem) <= 48 * 1024, "static shared memory");
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(!P::kTilePerCta || kStages == 1, "one tile per CTA has nothing to prefetch");
  static_assert(P::kStageVec % kVec == 0 && kSlab % P::kStageVec == 0,
                "fragments split chunks, slabs are whole chunks");

  // 1. The input tile with its halo into one stage of smem x; zeros outside the image and past
  // kC (kC is a multiple of the chunk's channels: a chunk is wholly inside or outside).
  __device__ __forceinline__ static void stage_input(X* sx, const X* x, const DwTile& tile) {
    constexpr DepthwiseTiling t = kTiling;
    const int ih0 = t.ih0(tile), iw0 = t.iw0(tile);
#pragma unroll 4
    for (int q0 = 0; q0 < kChunks; q0 += kThreads) {
      const int q = q0 + static_cast<int>(threadIdx.x);
      if (kChunks % kThreads != 0 && q >= kChunks) break;
      const DwChunk ch = t.chunk(q);
      const int ih = ih0 + ch.row, iw = iw0 + ch.col, c = tile.c0 + ch.chunk * P::kStageVec;
      const bool valid = ih >= 0 && ih < P::kH && iw >= 0 && iw < P::kW && c < P::kC;
      const X* src = valid ? x + ((i64(tile.n) * P::kH + ih) * P::kW + iw) * P::kXLd + P::kXOffset + c : x;
      stage_fragment<kChunkBytes>(sx + t.smem_offset(ch.row, ch.col, ch.chunk * P::kStageVec), src,
                                  valid);
    }
  }

  // 2. The slab's weights (OHWI [kC, KH, KW, 1]) into smem w, tap-major, fp32: the slab's
  // block of weights is contiguous, and each thread's share is loaded in batches of 8
  // independent read-only loads before any is stored, so a CTA waits about one L2 latency per
  // batch rather than one per weight.
  __device__ __forceinline__ static void stage_weights(Smem& s, const OpParams& p, int c0) {
    constexpr int kAll = kTaps * kSlab, kBatch = 8;
    const T* w = static_cast<const T*>(p.in[1]);
#pragma unroll 1
    for (int e0 = 0; e0 < kAll; e0 += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kThreads + static_cast<int>(threadIdx.x);
        const int tap = e / kSlab, c = c0 + e % kSlab;
        v[b] = e < kAll && c < P::kC ? to_float(load_nc(w + i64(c) * kTaps + tap)) : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kThreads + static_cast<int>(threadIdx.x);
        if (e < kAll) s.w[e] = v[b];
      }
    }
  }

  // The weights of tap `tap` for this thread's fragment: from registers, or from smem w.
  __device__ __forceinline__ static void weight(const Smem& s, const DwThread& th,
                                                const float (&wr)[kWeightRegs][kVec], int tap,
                                                float (&wk)[kVec]) {
    if constexpr (P::kRegisterWeights) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) wk[v] = wr[tap][v];
    } else {
      Frag<float, kVec> f;
      load_shared(f, s.w + tap * kSlab + th.frag * kVec);
#pragma unroll
      for (int v = 0; v < kVec; ++v) wk[v] = f.v[v];
    }
  }

  // 3. This thread's kRows x kCols x kVec accumulators. Span row j goes into registers, span
  // column u of it feeds output (r, q) through tap (tap_row(j, r), tap_col(u, q)); the
  // unrolled loops resolve every tap at compile time, so acc, the span row and the weights
  // stay in registers.
  __device__ __forceinline__ static void accumulate(const Smem& s, const X* sx, const DwThread& th,
                                                    const float (&wr)[kWeightRegs][kVec],
                                                    const float (&requant)[kVec],
                                                    float (&acc)[kRows][kCols][kVec]) {
    constexpr DepthwiseTiling t = kTiling;
#pragma unroll
    for (int j = 0; j < t.span_rows(); ++j) {
      if (!t.span_row_used(j)) continue;
      float xr[kSpanCols][kVec];
#pragma unroll
      for (int u = 0; u < kSpanCols; ++u) {
        if (!t.span_col_used(u)) continue;
        Frag<X, kVec> f;
        load_shared(f, sx + t.smem_offset(t.span_row(th, j), t.span_col(th, u), th.frag * kVec));
        to_floats(f, xr[u]);
        if constexpr (P::kRequantize) {
#pragma unroll
          for (int v = 0; v < kVec; ++v) xr[u][v] = quantize_s8_f(xr[u][v], requant[v]);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int kh = t.tap_row(j, r);
        if (kh < 0) continue;
#pragma unroll
        for (int kw = 0; kw < P::kKW; ++kw) {
          float wk[kVec];
          weight(s, th, wr, kh * P::kKW + kw, wk);
#pragma unroll
          for (int q = 0; q < kCols; ++q) {
            const int u = q * P::kSW + kw * P::kDW;
#pragma unroll
            for (int v = 0; v < kVec; ++v) acc[r][q][v] = fmaf(xr[u][v], wk[v], acc[r][q][v]);
          }
        }
      }
    }
  }

  // 4. Scale and bias, epilogue, residual, store.
  __device__ __forceinline__ static void store(const OpParams& p, const DwTile& tile,
                                               const DwThread& th, const float (&scale)[kVec],
                                               const float (&bias)[kVec],
                                               const float (&acc)[kRows][kCols][kVec]) {
    const int c = tile.c0 + th.frag * kVec;
    if (c >= P::kC) return;
    using Out = typename P::Out;
    Out* y = static_cast<Out*>(p.out[0]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int oh = tile.oh0 + th.row0 + r;
      if (oh >= P::kOH) break;
#pragma unroll
      for (int q = 0; q < kCols; ++q) {
        const int ow = tile.ow0 + th.col0 + q;
        if (ow >= P::kOW) break;
        float residual[kVec] = {};
        if constexpr (P::kResidual) {
          Frag<T, kVec> f;
          f.load(static_cast<const T*>(p.in[3]) +
                 ((i64(tile.n) * P::kOH + oh) * P::kOW + ow) * P::kCo + c);
#pragma unroll
          for (int v = 0; v < kVec; ++v) residual[v] = to_float(f.v[v]);
        }
        float out[kVec];
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const float a = acc[r][q][v];
          out[v] = P::epilogue(P::kScale ? fmaf(a, scale[v], bias[v]) : a + bias[v], residual[v]);
        }
        if constexpr (P::kVectorStore) {
          store_rounded(y + P::store_offset(tile.n, oh, ow, c), out);
        } else {
#pragma unroll
          for (int v = 0; v < kVec; ++v)
            y[P::store_offset(tile.n, oh, ow, c + v)] = store_as<Out>(out[v]);
        }
      }
    }
  }

  // CTA b takes tiles b, b + grid, ...: all of one slab (the emitter launches one CTA per tile
  // or a multiple of the slab count), so its weights and bias are staged once. With two
  // stages, tile k + 1's copies are in flight while tile k is computed; one barrier per tile
  // both publishes tile k's copies and frees the stage that tile k + 1 overwrites.
  __device__ static void run(const OpParams& p) {
    constexpr DepthwiseTiling t = kTiling;
    __shared__ Smem s;
    const X* x = static_cast<const X*>(p.in[0]);
    const DwThread th = t.thread(static_cast<int>(threadIdx.x));
    const i64 tiles = t.tiles();
    i64 i = blockIdx.x;
    if (i >= tiles) return;
    const int c0 = t.tile(i).c0;
    stage_input(s.x[0], x, t.tile(i));  // first: its DRAM latency overlaps the weights' loads
    cp_async_commit();
    stage_weights(s, p, c0);
    float scale[kVec], bias[kVec], requant[kVec];  // (scale unused without kScale, requant
#pragma unroll                                       // without kRequantize)
    for (int v = 0; v < kVec; ++v) {
      const int c = c0 + th.frag * kVec + v;
      scale[v] = c < P::kC ? P::scale(p, c) : 1.f;
      bias[v] = c < P::kC ? P::bias(p, c) : 0.f;
      requant[v] = c < P::kC ? P::requantize_factor(p, c) : 1.f;
    }
    __syncthreads();  // smem w
    float wr[kWeightRegs][kVec];
    if constexpr (P::kRegisterWeights) {
#pragma unroll
      for (int tap = 0; tap < kTaps; ++tap) {
        Frag<float, kVec> f;
        load_shared(f, s.w + tap * kSlab + th.frag * kVec);
#pragma unroll
        for (int v = 0; v < kVec; ++v) wr[tap][v] = f.v[v];
      }
    }
    for (int k = 0; i < tiles; i += gridDim.x, ++k) {
      const DwTile tile = t.tile(i);
      const i64 next = i + gridDim.x;
      cp_async_wait<0>();
      __syncthreads();  // tile k staged by every thread; every thread done with tile k - 1
      if constexpr (kStages == 2) {
        if (next < tiles) {
          stage_input(s.x[(k + 1) % 2], x, t.tile(next));
          cp_async_commit();
        }
      }
      float acc[kRows][kCols][kVec] = {};
      accumulate(s, s.x[k % kStages], th, wr, requant, acc);
      store(p, tile, th, scale, bias, acc);
      if constexpr (kStages == 1) {
        if (next < tiles) {
          __syncthreads();  // every thread done reading the one stage
          stage_input(s.x[0], x, t.tile(next));
          cp_async_commit();
        }
      }
    }
  }
};

}  // namespace tessel
