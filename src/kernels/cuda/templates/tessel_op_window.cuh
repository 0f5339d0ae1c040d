// Window kernels over NHWC activations: pools and grouped convolution (depthwise ones run the
// tiled kernel of tessel_depthwise.cuh unless their window is too large to stage). One work
// item is one output pixel's run of kVec consecutive channels, so that a warp reads and
// writes whole 16-byte channel vectors of neighbouring pixels (NHWC makes channels the
// contiguous dim). Accumulation is fp32 for every storage type.
//
// Problem supplies the compile-time geometry:
//   using T;  kN, kH, kW, kC (input), kOH, kOW, kCo (output, pre-store), kKH, kKW, kSH, kSW,
//   kPT, kPL (begin pads), kDH, kDW, kVec; kXLd, kXOffset (GroupedConv's X: pixels kXLd
//   elements apart, channels from kXOffset on; a channel slice of a Concat's buffer, else kC
//   and 0); and per kernel the members named below (GroupedConv:
//   using X, the input's type: T, or i8 for a depthwise conv's int8 input (fold-qdq); using
//   Out, Y's type: T, or i8 where the epilogue's last step quantizes, store_as).
#pragma once

#include "tessel_op_common.cuh"

namespace tessel {

// Decomposes an item into (n, oh, ow, first channel c0).
template <typename P, int kChannels>
struct PixelItem {
  int n, oh, ow, c0;
  __device__ __forceinline__ explicit PixelItem(i64 i) {
    constexpr int kGroups = kChannels / P::kVec;
    c0 = static_cast<int>(i % kGroups) * P::kVec;
    i /= kGroups;
    ow = static_cast<int>(i % P::kOW);
    i /= P::kOW;
    oh = static_cast<int>(i % P::kOH);
    n = static_cast<int>(i / P::kOH);
  }
};

// MaxPool (P::kMax) or AveragePool. Taps outside the input are skipped; the average divides
// by kKH * kKW when P::kCountIncludePad, else by the taps inside the input (0 taps: 0/0 = NaN,
// and a max over no taps is P::kLowest, as the reference kernels define).
//
// A max pool of int8, uint8, f16 or bf16 whose fragments are whole 32-bit words compares packed
// pairs (PackedMax): two elements per max instruction, where the float path spends a
// conversion and a NaN-aware select on every element of every tap. (The int8 pool of a QDQ
// ResNet-50 at batch 32 was bound by those instructions, not by its bytes.)
template <typename T>
struct PackedMax {
  static constexpr bool kOk = false;
};
// int8: byte x as the f16 1024 + (x + 128) (exponent of 1024, whose ulp is 1): exact, ordered as
// x, one xor per word and one prmt per pair; max.f16x2 compares two; the low bytes of the
// winners, xored back, are the int8 maxima. A max over no taps is 1024 + 0, i.e. -128.
// uint8 (onnxruntime's activations, zero point 0): 1024 + x, no xor (kFlip 0); no taps give 0.
template <u32 kFlip>
struct PackedByteMax {
  static constexpr bool kOk = true;
  static constexpr int kPairs = 2;  // f16x2 words per 32-bit word of data
  __device__ __forceinline__ static u32 lowest() { return 0x64006400u; }
  __device__ __forceinline__ static void unpack(u32 w, u32 (&pairs)[2]) {
    w ^= kFlip;
    pairs[0] = __byte_perm(w, 0x64646464u, 0x4140);
    pairs[1] = __byte_perm(w, 0x64646464u, 0x4342);
  }
  __device__ __forceinline__ static u32 max(u32 a, u32 b) {
    u32 r;
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
  __device__ __forceinline__ static u32 pack(const u32 (&pairs)[2]) {
    return __byte_perm(pairs[0], pairs[1], 0x6420) ^ kFlip;
  }
};
template <>
struct PackedMax<i8> : PackedByteMax<0x80808080u> {};
template <>
struct PackedMax<u8> : PackedByteMax<0u> {};
// f16 and bf16: the word is a pair already; max.NaN keeps a NaN, as the float path does.
// kLowest: kLowest of the pool (op_window.cc's lowest_literal) in both halves.
template <u32 kLowest, bool kBf16>
struct PackedPairMax {
  static constexpr bool kOk = true;
  static constexpr int kPairs = 1;
  __device__ __forceinline__ static u32 lowest() { return kLowest; }
  __device__ __forceinline__ static void unpack(u32 w, u32 (&pairs)[1]) { pairs[0] = w; }
  __device__ __forceinline__ static u32 max(u32 a, u32 b) {
    u32 r;
    if constexpr (kBf16)
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
  __device__ __forceinline__ static u32 pack(const u32 (&pairs)[1]) { return pairs[0]; }
};
template <>
struct PackedMax<f16> : PackedPairMax<0xFBFFFBFFu, false> {};  // -65504
template <>
struct PackedMax<bf16> : PackedPairMax<0xFF7FFF7Fu, true> {};  // -3.38953139e38

template <typename P>
struct Pool {
  using T = typename P::T;
  static constexpr i64 kItems = i64(P::kN) * P::kOH * P::kOW * (P::kC / P::kVec);
  using Packed = PackedMax<T>;
  static constexpr bool kPacked = P::kMax && Packed::kOk && (P::kVec * sizeof(T)) % 4 == 0;

  // Calls f with the fragment of each tap of the item's window that lies inside the input.
  template <typename F>
  __device__ __forceinline__ static void for_each_tap(const OpParams& p, const PixelItem<P, P::kC>& it, F&& f) {
    const T* x = static_cast<const T*>(p.in[0]) + i64(it.n) * P::kH * P::kW * P::kC + it.c0;
#pragma unroll
    for (int kh = 0; kh < P::kKH; ++kh) {
      const int ih = it.oh * P::kSH - P::kPT + kh * P::kDH;
      if (ih < 0 || ih >= P::kH) continue;
#pragma unroll
      for (int kw = 0; kw < P::kKW; ++kw) {
        const int iw = it.ow * P::kSW - P::kPL + kw * P::kDW;
        if (iw < 0 || iw >= P::kW) continue;
        Frag<T, P::kVec> frag;
        frag.load(x + (i64(ih) * P::kW + iw) * P::kC);
        f(frag);
      }
    }
  }

  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    if constexpr (kPacked) {
      packed_item(p, i);
      return;
    }
    const PixelItem<P, P::kC> it(i);
    float acc[P::kVec];
#pragma unroll
    for (int v = 0; v < P::kVec; ++v) acc[v] = P::kMax ? P::kLowest : 0.f;
    int taps = 0;
    for_each_tap(p, it, [&](const Frag<T, P::kVec>& f) {
      ++taps;
#pragma unroll
      for (int v = 0; v < P::kVec; ++v) {
        const float e = to_float(f.v[v]);
        // NaN propagates through a max as in the reference (std::max keeps the first NaN
        // only by accident; an explicit test keeps it deterministically).
        acc[v] = P::kMax ? (e > acc[v] || e != e ? e : acc[v]) : acc[v] + e;
      }
    });
    Frag<T, P::kVec> y;
    const float scale = P::kMax ? 1.f : 1.f / (P::kCountIncludePad ? float(P::kKH * P::kKW) : float(taps));
#pragma unroll
    for (int v = 0; v < P::kVec; ++v) y.v[v] = store_as<T>(P::kMax ? acc[v] : acc[v] * scale);
    T* out = static_cast<T*>(p.out[0]) + ((i64(it.n) * P::kOH + it.oh) * P::kOW + it.ow) * P::kC + it.c0;
    y.store(out);
  }

  __device__ __forceinline__ static void packed_item(const OpParams& p, i64 i) {
    constexpr int kWords = P::kVec * int(sizeof(T)) / 4;
    const PixelItem<P, P::kC> it(i);
    u32 acc[kWords][Packed::kPairs];
#pragma unroll
    for (int w = 0; w < kWords; ++w)
#pragma unroll
      for (int q = 0; q < Packed::kPairs; ++q) acc[w][q] = Packed::lowest();
    for_each_tap(p, it, [&](const Frag<T, P::kVec>& f) {
      u32 words[kWords];
      memcpy(words, f.v, sizeof(words));
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        u32 pairs[Packed::kPairs];
        Packed::unpack(words[w], pairs);
#pragma unroll
        for (int q = 0; q < Packed::kPairs; ++q) acc[w][q] = Packed::max(acc[w][q], pairs[q]);
      }
    });
    Frag<T, P::kVec> y;
    u32 words[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = Packed::pack(acc[w]);
    memcpy(y.v, words, sizeof(words));
    T* out = static_cast<T*>(p.out[0]) + ((i64(it.n) * P::kOH + it.oh) * P::kOW + it.ow) * P::kC + it.c0;
    y.store(out);
  }
};

// LRN over the channel axis of an [kOuter, kC, kInner] view (NHWC: kInner 1, the window's
// channels contiguous; channels-first: kInner the pixels), one item per element: x divided by
// (bias + alpha / size * the sum of squares over channels [c - kBefore, c + kAfter] clipped to
// the tensor)^beta, in fp32, as ops/pool_ops.cc defines it (there in double).
template <typename P>
struct Lrn {
  using T = typename P::T;
  static constexpr i64 kItems = P::kOuter * P::kC * P::kInner;
  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    const i64 c = (i / P::kInner) % P::kC;
    const T* x = static_cast<const T*>(p.in[0]) + (i - c * P::kInner);  // channel 0 here
    const i64 lo = c < P::kBefore ? 0 : c - P::kBefore;
    const i64 hi = c + P::kAfter >= P::kC ? P::kC - 1 : c + P::kAfter;
    float sum = 0.f;
    for (i64 j = lo; j <= hi; ++j) {
      const float v = to_float(x[j * P::kInner]);
      sum = fmaf(v, v, sum);
    }
    const float xi = to_float(static_cast<const T*>(p.in[0])[i]);
    static_cast<T*>(p.out[0])[i] = from_float<T>(xi / powf(P::kBias + P::kAlphaOverSize * sum, P::kBeta));
  }
};

// Grouped convolution, NHWC input [N, H, W, C], OHWI weights [Co, KH, KW, kCig]. Output
// channel co belongs to group co / kCog and reads input channels group * kCig + [0, kCig).
// An item is kVec consecutive output channels of one pixel. In the depthwise case
// (kCig == 1, kCog == 1) the kVec channels read kVec consecutive input channels: one
// 16-byte load per tap. P::bias(p, co) (and, where P::kScale, P::scale(p, co), an int8
// input's dequantization scale: one fma), P::epilogue(v, n, oh, ow, co) and
// P::store_offset(n, oh, ow, co) finish each output (fused steps, store map).
template <typename P>
struct GroupedConv {
  using X = typename P::X;
  using T = typename P::T;
  static constexpr bool kDepthwise = P::kCig == 1 && P::kCog == 1;
  static_assert(!P::kRequantize || kDepthwise, "a requantizing prologue reads a depthwise conv's X");
  static constexpr i64 kItems = i64(P::kN) * P::kOH * P::kOW * (P::kCo / P::kVec);

  // The value the epilogue steps start from: acc (* S[co]) + B[co].
  __device__ __forceinline__ static float start(const OpParams& p, float acc, int co) {
    return P::kScale ? fmaf(acc, P::scale(p, co), P::bias(p, co)) : acc + P::bias(p, co);
  }

  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    const PixelItem<P, P::kCo> it(i);
    const X* x = static_cast<const X*>(p.in[0]) + i64(it.n) * P::kH * P::kW * P::kXLd + P::kXOffset;
    const T* w = static_cast<const T*>(p.in[1]);
    float acc[P::kVec] = {};
#pragma unroll
    for (int kh = 0; kh < P::kKH; ++kh) {
      const int ih = it.oh * P::kSH - P::kPT + kh * P::kDH;
      if (ih < 0 || ih >= P::kH) continue;
#pragma unroll
      for (int kw = 0; kw < P::kKW; ++kw) {
        const int iw = it.ow * P::kSW - P::kPL + kw * P::kDW;
        if (iw < 0 || iw >= P::kW) continue;
        const X* px = x + (i64(ih) * P::kW + iw) * P::kXLd;
        if constexpr (kDepthwise) {
          Frag<X, P::kVec> f;
          f.load(px + it.c0);
          float xv[P::kVec];
          to_floats(f, xv);
          if constexpr (P::kRequantize) {
#pragma unroll
            for (int v = 0; v < P::kVec; ++v) xv[v] = quantize_s8_f(xv[v], P::requantize_factor(p, it.c0 + v));
          }
#pragma unroll
          for (int v = 0; v < P::kVec; ++v)
            acc[v] += xv[v] * to_float(w[(i64(it.c0 + v) * P::kKH + kh) * P::kKW + kw]);
        } else {
#pragma unroll
          for (int v = 0; v < P::kVec; ++v) {
            const int co = it.c0 + v;
            const X* xg = px + (co / P::kCog) * P::kCig;
            const T* wc = w + ((i64(co) * P::kKH + kh) * P::kKW + kw) * P::kCig;
            // Unrolled by 4, not fully: a full unroll of kCig x kVec x taps multiply-adds took
            // NVRTC 14-40 s per kernel for groups of 100 to 112 channels.
#pragma unroll 4
            for (int k = 0; k < P::kCig; ++k) acc[v] += to_float(xg[k]) * to_float(wc[k]);
          }
        }
      }
    }
    using Out = typename P::Out;
    Out* y = static_cast<Out*>(p.out[0]);
    if constexpr (P::kVectorStore) {
      Frag<Out, P::kVec> f;
#pragma unroll
      for (int v = 0; v < P::kVec; ++v)
        f.v[v] = store_as<Out>(
            P::epilogue(p, start(p, acc[v], it.c0 + v), it.n, it.oh, it.ow, it.c0 + v));
      f.store(y + P::store_offset(it.n, it.oh, it.ow, it.c0));
    } else {
#pragma unroll
      for (int v = 0; v < P::kVec; ++v) {
        const int co = it.c0 + v;
        y[P::store_offset(it.n, it.oh, it.ow, co)] =
            store_as<Out>(P::epilogue(p, start(p, acc[v], co), it.n, it.oh, it.ow, co));
      }
    }
  }
};

}  // namespace tessel
