// Depthwise convolution (tessel.Conv with group == C, one input and one output channel per
// group) over NHWC activations in f16, bf16 or f32 storage with fp32 math. A memory-bound op:
// each output channel reads kKH*kKW inputs of its own channel, so the kernel is built to move
// each input byte from DRAM once and each output byte once, at full 16-byte width.
//
// Per CTA and tile (the tiling, with every shape, is tessel_depthwise_tile.cuh):
//   1. cp.async stages the input tile with its halo, smem x (in_rows, in_cols, slab), one
//      16-byte fragment (8 f16 channels) per copy, coalesced along channels; the window's
//      padding and the channels past kC are zero-filled by the copy itself;
//   2. when the slab changes, the slab's weights are transposed into smem w (KH*KW, slab) fp32
//      and its bias into smem bias (slab) fp32, while the copies are in flight;
//   3. each thread computes rows_per_thread output rows x kVec channels of one output column,
//      walking one smem column per kernel column so that each staged pixel is read and
//      converted once and feeds all the taps that use it;
//   4. bias, the fused epilogue steps and the residual in fp32, one rounding, one 16-byte
//      store per pixel (or the problem's store map, element-wise).
// CTAs walk the tiles grid-stride (a 1-D grid of any size); the emitter makes the grid a
// multiple of the slab count, so that a CTA keeps its slab and stages its weights once.
//
// Problem supplies: using T; kN, kH, kW, kC (input), kOH, kOW, kCo (pre-store output, kCo ==
// kC), kKH, kKW, kSH, kSW, kPT, kPL, kDH, kDW, kVec; the tiling kSlabVecs, kTileCols,
// kRowGroups, kRowsPerThread; kResidual and kVectorStore; and
//   static float bias(const OpParams&, int c);            // 0 without a bias
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

// Copies one fragment of kBytes from global `src` to shared `dst`, or zeros when !valid.
// 4, 8 and 16 bytes go through cp.async (the zero fill is its source size 0; `src` must still
// be mapped); a 2-byte fragment (an f16/bf16 tensor with an odd channel count) is a plain copy.
template <int kBytes>
__device__ __forceinline__ void stage_fragment(void* dst, const void* src, bool valid) {
  if constexpr (kBytes >= 4) {
    CpAsync<kBytes>::copy(smem_addr(dst), src, valid);
  } else {
    static_assert(kBytes == 2, "fragments are 2, 4, 8 or 16 bytes");
    *static_cast<u16*>(dst) = valid ? ld_global_nc<2>(src) : u16(0);
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
    *p = from_float<T>(v[0]);  // one 2-byte element
  } else {
    u32 w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(T) == 4)
        w[i] = __float_as_uint(v[i]);
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
  using T = typename P::T;
  static_assert(P::kCo == P::kC, "channel multiplier 1: the grouped kernel takes the others");

  // In DepthwiseTiling's field order: problem, fragment width, tiling.
  static constexpr DepthwiseTiling kTiling{
      P::kN,   P::kH,        P::kW,        P::kC,         P::kOH,           P::kOW, P::kKH,
      P::kKW,  P::kSH,       P::kSW,       P::kPT,        P::kPL,           P::kDH, P::kDW,
      P::kVec, P::kSlabVecs, P::kTileCols, P::kRowGroups, P::kRowsPerThread};
  static constexpr int kVec = P::kVec;
  static constexpr int kSlab = kTiling.slab();
  static constexpr int kThreads = kTiling.threads();
  static constexpr int kChunks = kTiling.chunks();
  static constexpr int kRows = P::kRowsPerThread;
  static constexpr int kTaps = P::kKH * P::kKW;
  static constexpr int kFragBytes = kVec * static_cast<int>(sizeof(T));

  struct Smem {
    alignas(16) T x[kTiling.smem_x_elems()];  // smem x: (in_rows, in_cols, slab)
    alignas(16) float w[kTaps * kSlab];       // smem w: (KH*KW, slab), tap-major
    alignas(16) float bias[kSlab];            // smem bias: (slab)
  };
  static_assert(sizeof(Smem) <= 48 * 1024, "static shared memory");
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");

  // 1. The input tile with its halo into smem x; zeros outside the image and past kC.
  __device__ __forceinline__ static void stage_input(Smem& s, const T* x, const DwTile& tile) {
    constexpr DepthwiseTiling t = kTiling;
    const int ih0 = t.ih0(tile), iw0 = t.iw0(tile);
#pragma unroll
    for (int q0 = 0; q0 < kChunks; q0 += kThreads) {
      const int q = q0 + static_cast<int>(threadIdx.x);
      if (kChunks % kThreads != 0 && q >= kChunks) break;
      const DwChunk ch = t.chunk(q);
      const int ih = ih0 + ch.row, iw = iw0 + ch.col, c = tile.c0 + ch.frag * kVec;
      const bool valid = ih >= 0 && ih < P::kH && iw >= 0 && iw < P::kW && c < P::kC;
      const T* src = valid ? x + ((i64(tile.n) * P::kH + ih) * P::kW + iw) * P::kC + c : x;
      stage_fragment<kFragBytes>(s.x + t.smem_offset(ch.row, ch.col, ch.frag), src, valid);
    }
  }

  // 2. The slab's weights (OHWI [kC, KH, KW, 1]) into smem w, tap-major, and its bias.
  __device__ __forceinline__ static void stage_weights(Smem& s, const OpParams& p, int c0) {
    const T* w = static_cast<const T*>(p.in[1]);
    for (int e = static_cast<int>(threadIdx.x); e < kTaps * kSlab; e += kThreads) {
      const int tap = e / kSlab, c = c0 + e % kSlab;
      s.w[e] = c < P::kC ? to_float(w[i64(c) * kTaps + tap]) : 0.f;
    }
    for (int e = static_cast<int>(threadIdx.x); e < kSlab; e += kThreads)
      s.bias[e] = c0 + e < P::kC ? P::bias(p, c0 + e) : 0.f;
  }

  // 3. This thread's kRows x kVec accumulators. Span row j of smem column (col*SW + kw*DW)
  // feeds output row r through kernel row tap_row(j, r); the unrolled loops resolve every
  // tap at compile time, so acc and wk stay in registers.
  __device__ __forceinline__ static void accumulate(const Smem& s, const DwThread& th,
                                                    float (&acc)[kRows][kVec]) {
    constexpr DepthwiseTiling t = kTiling;
#pragma unroll
    for (int kw = 0; kw < P::kKW; ++kw) {
      float wk[P::kKH][kVec];
#pragma unroll
      for (int kh = 0; kh < P::kKH; ++kh) {
        Frag<float, kVec> f;
        load_shared(f, s.w + (kh * P::kKW + kw) * kSlab + th.frag * kVec);
#pragma unroll
        for (int v = 0; v < kVec; ++v) wk[kh][v] = f.v[v];
      }
#pragma unroll
      for (int j = 0; j < t.span_rows(); ++j) {
        if (!t.span_row_used(j)) continue;
        Frag<T, kVec> f;
        load_shared(f, s.x + t.smem_offset(t.span_row(th, j), t.span_col(th, kw), th.frag));
        float xv[kVec];
#pragma unroll
        for (int v = 0; v < kVec; ++v) xv[v] = to_float(f.v[v]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int kh = t.tap_row(j, r);
          if (kh < 0) continue;
#pragma unroll
          for (int v = 0; v < kVec; ++v) acc[r][v] = fmaf(xv[v], wk[kh][v], acc[r][v]);
        }
      }
    }
  }

  // 4. Bias, epilogue, residual, store.
  __device__ __forceinline__ static void store(const Smem& s, const OpParams& p, const DwTile& tile,
                                               const DwThread& th,
                                               const float (&acc)[kRows][kVec]) {
    const int c = tile.c0 + th.frag * kVec;
    const int ow = tile.ow0 + th.col;
    if (c >= P::kC || ow >= P::kOW) return;
    Frag<float, kVec> b;
    load_shared(b, s.bias + th.frag * kVec);
    T* y = static_cast<T*>(p.out[0]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int oh = tile.oh0 + th.row0 + r;
      if (oh >= P::kOH) break;
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
      for (int v = 0; v < kVec; ++v) out[v] = P::epilogue(acc[r][v] + b.v[v], residual[v]);
      if constexpr (P::kVectorStore) {
        store_rounded(y + P::store_offset(tile.n, oh, ow, c), out);
      } else {
#pragma unroll
        for (int v = 0; v < kVec; ++v)
          y[P::store_offset(tile.n, oh, ow, c + v)] = from_float<T>(out[v]);
      }
    }
  }

  __device__ static void run(const OpParams& p) {
    constexpr DepthwiseTiling t = kTiling;
    __shared__ Smem s;
    const T* x = static_cast<const T*>(p.in[0]);
    const DwThread th = t.thread(static_cast<int>(threadIdx.x));
    int staged_c0 = -1;
    for (i64 i = blockIdx.x; i < t.tiles(); i += gridDim.x) {
      const DwTile tile = t.tile(i);
      __syncthreads();  // every thread is done reading the previous tile's smem
      stage_input(s, x, tile);
      cp_async_commit();
      if (tile.c0 != staged_c0) {  // uniform across the CTA
        stage_weights(s, p, tile.c0);
        staged_c0 = tile.c0;
      }
      cp_async_wait<0>();
      __syncthreads();
      float acc[kRows][kVec] = {};
      accumulate(s, th, acc);
      store(s, p, tile, th, acc);
    }
  }
};

}  // namespace tessel
