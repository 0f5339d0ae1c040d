// Reductions over NHWC/any-layout tensors (kernels/cuda/op_reduce.cc): Softmax and LogSoftmax
// (kLog: x - max - log(sum)), the Reduce*
// ops and LayerNormalization, all accumulating in fp32 whatever the storage type, as
// ops/reduce.cc and ops/reduce_more.cc define them (there in double): softmax(x)_j =
// exp(x_j - max) / sum_k exp(x_k - max), mean = sum / count, and so on. The Reduce* kernels
// store P::finish(p, result) as P::TOut: the result in T, or tessel.QLinearReduceMean's
// requantized mean of int8 integers (their f32 sums exact).
#pragma once

#include "tessel_op_common.cuh"

namespace tessel {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// fn(row, lane) for each of `rows` rows, one warp per row, grid-stride over the warps. The row
// loop is per warp, so every lane of a warp takes the same trip count and full-mask shuffles
// inside fn are legal.
template <typename Fn>
__device__ __forceinline__ void for_each_row_by_warp(i64 rows, Fn fn) {
  const int lane = threadIdx.x & 31;
  const i64 warps_per_block = blockDim.x / 32;
  const i64 stride = static_cast<i64>(gridDim.x) * warps_per_block;
  for (i64 row = blockIdx.x * warps_per_block + threadIdx.x / 32; row < rows; row += stride) fn(row, lane);
}

// The mean and 1 / sqrt(variance + epsilon) of a row of n elements read by a warp (stride 32),
// the variance of the deviations in a second read (from L1), as the references compute it.
template <typename T>
__device__ __forceinline__ float2 row_moments(const T* x, i64 n, int lane, float epsilon) {
  float s = 0.f;
  for (i64 j = lane; j < n; j += 32) s += to_float(x[j]);
  const float mean = warp_sum(s) * (1.f / static_cast<float>(n));
  float q = 0.f;
  for (i64 j = lane; j < n; j += 32) {
    const float d = to_float(x[j]) - mean;
    q = fmaf(d, d, q);
  }
  return make_float2(mean, rsqrtf(warp_sum(q) * (1.f / static_cast<float>(n)) + epsilon));
}

// Softmax over contiguous rows (the normalised axis is the innermost: P::kOuter rows of P::kN
// elements), one warp per row: the lanes read the row with stride 32 (coalesced), and the
// max and the sum are warp shuffles. The row loop is per warp, so every lane of a warp takes
// the same trip count and the full-mask shuffles are legal.
template <typename P>
struct SoftmaxRows {
  using T = typename P::T;
  __device__ __forceinline__ static void run(const OpParams& p) {
    for_each_row_by_warp(P::kOuter, [&](i64 row, int lane) {
      const T* x = static_cast<const T*>(p.in[0]) + row * P::kN;
      T* y = static_cast<T*>(p.out[0]) + row * P::kN;
      float m = __int_as_float(0xff800000);  // -inf
      for (i64 j = lane; j < P::kN; j += 32) m = fmaxf(m, to_float(x[j]));
      m = warp_max(m);
      float s = 0.f;
      for (i64 j = lane; j < P::kN; j += 32) s += expf(to_float(x[j]) - m);
      s = warp_sum(s);
      if constexpr (P::kLog) {
        const float log_s = logf(s);
        for (i64 j = lane; j < P::kN; j += 32) y[j] = from_float<T>(to_float(x[j]) - m - log_s);
      } else {
        for (i64 j = lane; j < P::kN; j += 32) y[j] = from_float<T>(expf(to_float(x[j]) - m) / s);
      }
    });
  }
};

// The first element of line i (one (outer, inner) pair) of an [P::kOuter, P::kN, P::kInner]
// view: its elements are P::kInner apart.
template <typename P>
__device__ __forceinline__ i64 line_base(i64 i) {
  return (i / P::kInner) * P::kN * P::kInner + i % P::kInner;
}

// Softmax over a strided axis (input viewed as [kOuter, kN, kInner], kInner > 1): one thread
// per (outer, inner) pair; consecutive threads take consecutive inner positions, so each of
// the three passes over the axis reads coalesced.
template <typename P>
struct SoftmaxStrided {
  using T = typename P::T;
  static constexpr i64 kItems = P::kOuter * P::kInner;
  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    const i64 base = line_base<P>(i);
    const T* x = static_cast<const T*>(p.in[0]) + base;
    T* y = static_cast<T*>(p.out[0]) + base;
    float m = __int_as_float(0xff800000);
    for (i64 j = 0; j < P::kN; ++j) m = fmaxf(m, to_float(x[j * P::kInner]));
    float s = 0.f;
    for (i64 j = 0; j < P::kN; ++j) s += expf(to_float(x[j * P::kInner]) - m);
    const float log_s = logf(s);
    for (i64 j = 0; j < P::kN; ++j) {
      const float d = to_float(x[j * P::kInner]) - m;
      y[j * P::kInner] = from_float<T>(P::kLog ? d - log_s : expf(d) / s);
    }
  }
};

// LayerNormalization over contiguous rows (the normalised dims are the innermost: P::kOuter
// rows of P::kN elements, NHWC's channels for a channels-last LayerNorm), one warp per row:
// mean, then the variance as the mean of (x - mean)^2 (a second read of the row, from L1),
// then y = (x - mean) * rsqrt(var + eps) * scale + bias, all in fp32. Scale and bias are
// P::kN-element vectors in the storage type; bias is in[2] when P::kHasBias.
template <typename P>
struct LayerNormRows {
  using T = typename P::T;
  __device__ __forceinline__ static void run(const OpParams& p) {
    const T* scale = static_cast<const T*>(p.in[1]);
    const T* bias = static_cast<const T*>(p.in[2]);
    for_each_row_by_warp(P::kOuter, [&](i64 row, int lane) {
      const T* x = static_cast<const T*>(p.in[0]) + row * P::kN;
      T* y = static_cast<T*>(p.out[0]) + row * P::kN;
      const float2 m = row_moments(x, P::kN, lane, P::kEpsilon);
      for (i64 j = lane; j < P::kN; j += 32) {
        float v = (to_float(x[j]) - m.x) * m.y * to_float(scale[j]);
        if constexpr (P::kHasBias) v += to_float(bias[j]);
        y[j] = from_float<T>(v);
      }
    });
  }
};

// CumSum along the middle dim of [kOuter, kN, kInner], one thread per (outer, inner) line,
// accumulating in fp32 in order (kReverse: from the end; kExclusive: each output leaves its own
// element out), as ops/tensor_generate.cc.
template <typename P>
struct CumSumLines {
  using T = typename P::T;
  static constexpr i64 kItems = P::kOuter * P::kInner;
  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    const i64 base = line_base<P>(i);
    const T* x = static_cast<const T*>(p.in[0]) + base;
    T* y = static_cast<T*>(p.out[0]) + base;
    float sum = 0.f;
    for (i64 j = 0; j < P::kN; ++j) {
      const i64 at = (P::kReverse ? P::kN - 1 - j : j) * P::kInner;
      if (P::kExclusive) y[at] = from_float<T>(sum);
      sum += to_float(x[at]);
      if (!P::kExclusive) y[at] = from_float<T>(sum);
    }
  }
};

// ArgMax / ArgMin over the middle dim of [kOuter, kN, kInner], one thread per output (int64):
// the first (kSelectLast: the last) index of the extremum, NaN counting as the extremum, as
// ops/reduce_more.cc decides it (comparisons of f16/bf16 values in fp32 are exact).
template <typename P>
struct ArgExtremum {
  using T = typename P::T;
  static constexpr i64 kItems = P::kOuter * P::kInner;
  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {
    const T* x = static_cast<const T*>(p.in[0]) + line_base<P>(i);
    float best = to_float(x[0]);
    i64 at = 0;
    for (i64 k = 1; k < P::kN; ++k) {
      const float v = to_float(x[k * P::kInner]);
      const bool v_nan = v != v, best_nan = best != best;
      const bool better = !best_nan && (v_nan || (P::kMax ? v > best : v < best));
      const bool tie = v == best || (v_nan && best_nan);
      if (better || (P::kSelectLast && tie)) {
        best = v;
        at = k;
      }
    }
    static_cast<i64*>(p.out[0])[i] = at;
  }
};

// The reductions of ops/reduce.cc and ops/reduce_more.cc in fp32 (the reference accumulates
// in double): an accumulator per kind, which takes elements (add), meets another's partial
// result (merge) and finishes over `count` elements. Max and Min keep NaN once seen; LogSumExp
// keeps a running maximum m and the sum of exp(x - m), so that exp never overflows, and an
// infinite or NaN maximum is the result itself (log of 0 is -inf where every x is -inf).
enum ReduceKind : int {
  kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kReduceSumSquare,
  kReduceL1, kReduceL2, kReduceLogSum, kReduceLogSumExp
};

template <int Kind>
struct ReduceAcc {
  static constexpr bool kTwoWords = Kind == kReduceLogSumExp;
  float a, m;

  __device__ __forceinline__ ReduceAcc()
      : a(Kind == kReduceMax   ? __int_as_float(0xff800000)
          : Kind == kReduceMin ? __int_as_float(0x7f800000)
          : Kind == kReduceProd ? 1.f
                                : 0.f),
        m(__int_as_float(0xff800000)) {}

  __device__ __forceinline__ void add(float x) {
    if constexpr (Kind == kReduceSum || Kind == kReduceMean || Kind == kReduceLogSum) a += x;
    else if constexpr (Kind == kReduceSumSquare || Kind == kReduceL2) a = fmaf(x, x, a);
    else if constexpr (Kind == kReduceL1) a += fabsf(x);
    else if constexpr (Kind == kReduceProd) a *= x;
    else if constexpr (Kind == kReduceMax) a = (x != x || x > a) ? x : a;
    else if constexpr (Kind == kReduceMin) a = (x != x || x < a) ? x : a;
    else {  // LogSumExp
      ReduceAcc o;
      o.a = 1.f;
      o.m = x;
      merge(o);
    }
  }

  __device__ __forceinline__ void merge(const ReduceAcc& o) {
    if constexpr (Kind == kReduceLogSumExp) {
      if (m != m || o.m != o.m) {
        m = m != m ? m : o.m;  // NaN
        return;
      }
      const float hi = fmaxf(m, o.m);
      if (hi == __int_as_float(0x7f800000) || hi == __int_as_float(0xff800000)) {
        m = hi;  // +inf dominates; -inf on both sides: nothing summed yet
        return;
      }
      a = a * __expf(m - hi) + o.a * __expf(o.m - hi);  // exp(-inf) = 0 for an empty side
      m = hi;
    } else if constexpr (Kind == kReduceProd) {
      a *= o.a;
    } else if constexpr (Kind == kReduceMax || Kind == kReduceMin) {
      add(o.a);
    } else {
      a += o.a;
    }
  }

  __device__ __forceinline__ float result(float count) const {
    if constexpr (Kind == kReduceMean) return a / count;  // 0 / 0 = NaN for an empty reduction
    else if constexpr (Kind == kReduceL2) return sqrtf(a);
    else if constexpr (Kind == kReduceLogSum) return logf(a);
    else if constexpr (Kind == kReduceLogSumExp) {
      if (m != m || m == __int_as_float(0x7f800000) || m == __int_as_float(0xff800000)) return m;
      return logf(a) + m;
    } else return a;
  }
};

template <int Kind>
__device__ __forceinline__ ReduceAcc<Kind> warp_merge(ReduceAcc<Kind> acc) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ReduceAcc<Kind> other;
    other.a = __shfl_xor_sync(0xffffffffu, acc.a, o);
    if constexpr (ReduceAcc<Kind>::kTwoWords) other.m = __shfl_xor_sync(0xffffffffu, acc.m, o);
    acc.merge(other);
  }
  return acc;
}

// A reduction over the middle dim of an [kOuter, kR, kInner] view: a reduction over a run of
// adjacent dims with kept dims after it (NHWC's spatial mean or max, kInner = C: squeeze-excite,
// the classifier's pool, attention's channel pools) and the global pools. One block per (outer,
// chunk of kCols vector columns of kVec inner elements; grid-stride over those): its threads
// are kCols columns x kLanes row lanes, lane l reducing rows l, l + kLanes, ... of its column
// (consecutive threads on consecutive 16-byte vectors: coalesced; four rows in flight per
// thread), then the lanes' partial results meet in shared memory. Sized by the emitter so that
// small kOuter * kInner still spreads over the SMs (one thread per output left 32 of 132 SMs
// reading EfficientNet's 112x112 squeeze at batch 32: 228 us for 26 MB).
template <typename P>
struct ReduceColumns {
  using T = typename P::T;
  using Acc = ReduceAcc<P::kKind>;
  static constexpr int kVec = P::kVec, kCols = P::kCols, kLanes = P::kThreads / P::kCols;
  static constexpr i64 kVectors = P::kInner / kVec;
  static constexpr i64 kChunks = (kVectors + kCols - 1) / kCols;
  static constexpr int kSlots = kLanes * kCols * kVec;
  static_assert(P::kInner % kVec == 0, "whole vectors");
  // 8-bit integers (tessel.QLinearReduceMean's codes) are summed as integers: exact, and
  // without a conversion per element (cvt.rn.f32.s8 issues at a quarter of the rate).
  static constexpr bool kSigned8 = SameType<T, i8>::value, kInt8 = kSigned8 || SameType<T, u8>::value;
  static_assert(!kInt8 || P::kKind == kReduceSum, "8-bit codes are summed");

  // The sums of a lane's rows of one vector of kVec bytes, as unsigned bytes (i8: x + 128),
  // into acc: each 32-bit word's bytes split into two words of 16-bit lanes (even bytes, odd
  // bytes: a mask, a shift and a mask), added whole: 1.25 integer instructions per byte where
  // to_float and an FADD take two, one of them quarter-rate. A 16-bit lane holds 257 bytes of
  // 255, so the lanes are emptied into 32-bit sums every 256 rows.
  __device__ __forceinline__ static void sum_int8(const T* x, int lane, Acc (&acc)[kVec]) {
    constexpr int kWords = (kVec + 3) / 4;
    constexpr u32 kBias = kSigned8 ? 0x80808080u : 0u;
    u32 total[kVec] = {};
    for (i64 r0 = lane; r0 < P::kR; r0 += 256 * kLanes) {
      const i64 end = r0 + 256 * kLanes < P::kR ? r0 + 256 * kLanes : P::kR;
      u32 even[kWords] = {}, odd[kWords] = {};
#pragma unroll 4
      for (i64 r = r0; r < end; r += kLanes) {
        Frag<T, kVec> f;
        f.load(x + r * P::kInner);
        u32 w[kWords] = {};
        memcpy(w, f.v, kVec);
#pragma unroll
        for (int k = 0; k < kWords; ++k) {
          const u32 u = w[k] ^ kBias;
          even[k] += u & 0x00ff00ffu;
          odd[k] += (u >> 8) & 0x00ff00ffu;
        }
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const u32 lanes = (e % 2 == 0 ? even : odd)[e / 4];
        total[e] += e % 4 < 2 ? lanes & 0xffffu : lanes >> 16;
      }
    }
    // Exact in f32: the emitter bounds kR so that 255 * kR < 2^24.
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e].a = static_cast<float>(total[e]);
  }

  __device__ __forceinline__ static void run(const OpParams& p) {
    __shared__ float partial[kSlots];
    __shared__ float partial_m[Acc::kTwoWords ? kSlots : 1];
    // Threads past kLanes * kCols (kThreads not a multiple of kCols) only meet the barriers.
    const int col = threadIdx.x % kCols, lane = threadIdx.x / kCols;
    const bool active = lane < kLanes;
    for (i64 b = blockIdx.x; b < P::kOuter * kChunks; b += gridDim.x) {
      const i64 outer = b / kChunks, v = (b % kChunks) * kCols + col;
      Acc acc[kVec];
      if constexpr (kInt8) {
        if (active && v < kVectors) sum_int8(static_cast<const T*>(p.in[0]) + outer * P::kR * P::kInner + v * kVec, lane, acc);
      } else if (active && v < kVectors) {
        const T* x = static_cast<const T*>(p.in[0]) + outer * P::kR * P::kInner + v * kVec;
        i64 r = lane;
        for (; r + 3 * kLanes < P::kR; r += 4 * kLanes) {
          Frag<T, kVec> f[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) f[u].load(x + (r + u * kLanes) * P::kInner);
#pragma unroll
          for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int e = 0; e < kVec; ++e) acc[e].add(to_float(f[u].v[e]));
        }
        for (; r < P::kR; r += kLanes) {
          Frag<T, kVec> f;
          f.load(x + r * P::kInner);
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[e].add(to_float(f.v[e]));
        }
      }
      // partial[lane][col][e]: the finishing threads below read consecutive words.
      if (active)
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          partial[(lane * kCols + col) * kVec + e] = acc[e].a;
          if constexpr (Acc::kTwoWords) partial_m[(lane * kCols + col) * kVec + e] = acc[e].m;
        }
      __syncthreads();
      if (threadIdx.x < kCols * kVec) {
        const i64 out_v = (b % kChunks) * kCols + threadIdx.x / kVec;
        Acc total;
        for (int l = 0; l < kLanes; ++l) {
          Acc part;
          part.a = partial[l * kCols * kVec + threadIdx.x];
          if constexpr (Acc::kTwoWords) part.m = partial_m[l * kCols * kVec + threadIdx.x];
          total.merge(part);
        }
        // int8: the sums were of x + 128 (sum_int8's unsigned bytes).
        if constexpr (kSigned8) total.a = __fsub_rn(total.a, 128.f * static_cast<float>(P::kR));
        if (out_v < kVectors)
          static_cast<typename P::TOut*>(p.out[0])[outer * P::kInner + out_v * kVec + threadIdx.x % kVec] =
              P::finish(p, total.result(static_cast<float>(P::kR)));
      }
      __syncthreads();
    }
  }
};

// InstanceNormalization of NHWC data, [kOuter images, kR pixels, kInner channels]: the blocks
// and threads of ReduceColumns, three passes over the block's columns (the mean; the variance
// of the deviations, as the reference computes it; the output), the per-column statistics
// meeting in shared memory between them. Scale (in[1]) and B (in[2]) are [kInner] of T.
template <typename P>
struct InstanceNormColumns {
  using T = typename P::T;
  static constexpr int kVec = P::kVec, kCols = P::kCols, kLanes = P::kThreads / P::kCols;
  static constexpr i64 kVectors = P::kInner / kVec;
  static constexpr i64 kChunks = (kVectors + kCols - 1) / kCols;
  static_assert(P::kInner % kVec == 0, "whole vectors");

  // The sum over the lanes of each column element of `acc`, in stat[col * kVec + e] after the
  // barrier (scaled by 1 / kR, then through `finish`).
  template <typename Finish>
  __device__ __forceinline__ static void meet(float (&acc)[kVec], float* partial, float* stat, bool active,
                                              int lane, int col, Finish finish) {
    if (active)
#pragma unroll
      for (int e = 0; e < kVec; ++e) partial[(lane * kCols + col) * kVec + e] = acc[e];
    __syncthreads();
    if (threadIdx.x < kCols * kVec) {
      float sum = 0.f;
      for (int l = 0; l < kLanes; ++l) sum += partial[l * kCols * kVec + threadIdx.x];
      stat[threadIdx.x] = finish(sum * (1.f / static_cast<float>(P::kR)));
    }
    __syncthreads();
  }

  __device__ __forceinline__ static void run(const OpParams& p) {
    __shared__ float partial[kLanes * kCols * kVec];
    __shared__ float stat[kCols * kVec];
    const int col = threadIdx.x % kCols, lane = threadIdx.x / kCols;
    const bool active = lane < kLanes;
    for (i64 b = blockIdx.x; b < P::kOuter * kChunks; b += gridDim.x) {
      const i64 outer = b / kChunks, v = (b % kChunks) * kCols + col;
      const bool mine = active && v < kVectors;
      const T* x = static_cast<const T*>(p.in[0]) + outer * P::kR * P::kInner + v * kVec;
      T* y = static_cast<T*>(p.out[0]) + outer * P::kR * P::kInner + v * kVec;
      float acc[kVec] = {};
      if (mine)
        for (i64 r = lane; r < P::kR; r += kLanes) {
          Frag<T, kVec> f;
          f.load(x + r * P::kInner);
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[e] += to_float(f.v[e]);
        }
      meet(acc, partial, stat, active, lane, col, [](float m) { return m; });
      float mean[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        mean[e] = stat[col * kVec + e];
        acc[e] = 0.f;
      }
      if (mine)
        for (i64 r = lane; r < P::kR; r += kLanes) {
          Frag<T, kVec> f;
          f.load(x + r * P::kInner);
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const float d = to_float(f.v[e]) - mean[e];
            acc[e] = fmaf(d, d, acc[e]);
          }
        }
      meet(acc, partial, stat, active, lane, col, [](float var) { return rsqrtf(var + P::kEpsilon); });
      if (mine) {
        float a[kVec], c[kVec];  // y = (x - mean) * a + c: no cancellation against a large mean
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const i64 ch = v * kVec + e;
          a[e] = stat[col * kVec + e] * to_float(static_cast<const T*>(p.in[1])[ch]);
          c[e] = to_float(static_cast<const T*>(p.in[2])[ch]);
        }
        for (i64 r = lane; r < P::kR; r += kLanes) {
          Frag<T, kVec> f;
          f.load(x + r * P::kInner);
#pragma unroll
          for (int e = 0; e < kVec; ++e) f.v[e] = from_float<T>(P::act(fmaf(to_float(f.v[e]) - mean[e], a[e], c[e])));
          f.store(y + r * P::kInner);
        }
      }
      __syncthreads();  // stat is rewritten by the next block's first meet
    }
  }
};

// GroupNormalization: one block per (image, group), reducing the group's kPerGroup channels over
// its kPixels pixels together: NHWC data (kNhwc: the group is a run of kPerGroup channels of
// each pixel's kC) or channels-first (the group is one contiguous run). Two passes (the mean,
// then the variance of the deviations, as the reference) and a third that writes, each a
// block-wide sum by warp shuffles and shared memory. Scale (in[1]) and B (in[2]) are per channel
// (opset 21) or per group (kPerGroupAffine, opset 18). P::act applies the fused activations.
template <typename P>
struct GroupNorm {
  using T = typename P::T;
  static constexpr i64 kElems = P::kPerGroup * P::kPixels;

  // Element e of the group, from the group's first element; its channel within the group.
  __device__ __forceinline__ static i64 offset(i64 e) {
    if constexpr (P::kNhwc) return (e / P::kPerGroup) * P::kC + e % P::kPerGroup;
    return e;
  }
  __device__ __forceinline__ static i64 channel_in_group(i64 e) {
    if constexpr (P::kNhwc) return e % P::kPerGroup;
    return e / P::kPixels;
  }
  // The sum of v over the block, in every thread (every thread must call it).
  __device__ __forceinline__ static float block_sum(float v, float* shared) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.f;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += shared[w];
    __syncthreads();
    return total;
  }

  __device__ __forceinline__ static void run(const OpParams& p) {
    __shared__ float shared[32];
    for (i64 b = blockIdx.x; b < P::kImages * P::kGroups; b += gridDim.x) {
      const i64 n = b / P::kGroups, g = b % P::kGroups;
      const i64 base = P::kNhwc ? n * P::kPixels * P::kC + g * P::kPerGroup : b * kElems;
      const T* x = static_cast<const T*>(p.in[0]) + base;
      T* y = static_cast<T*>(p.out[0]) + base;
      float s = 0.f;
      for (i64 e = threadIdx.x; e < kElems; e += blockDim.x) s += to_float(x[offset(e)]);
      const float mean = block_sum(s, shared) * (1.f / static_cast<float>(kElems));
      float q = 0.f;
      for (i64 e = threadIdx.x; e < kElems; e += blockDim.x) {
        const float d = to_float(x[offset(e)]) - mean;
        q = fmaf(d, d, q);
      }
      const float inv = rsqrtf(block_sum(q, shared) * (1.f / static_cast<float>(kElems)) + P::kEpsilon);
      for (i64 e = threadIdx.x; e < kElems; e += blockDim.x) {
        const i64 ch = P::kPerGroupAffine ? g : g * P::kPerGroup + channel_in_group(e);
        const float a = inv * to_float(static_cast<const T*>(p.in[1])[ch]);
        y[offset(e)] = from_float<T>(P::act(fmaf(to_float(x[offset(e)]) - mean, a, to_float(static_cast<const T*>(p.in[2])[ch]))));
      }
    }
  }
};

// InstanceNormalization of channels-first data: kOuter rows (image, channel) of kR pixels, one
// warp per row as LayerNormRows, channel = row % kC for scale (in[1]) and B (in[2]).
template <typename P>
struct InstanceNormRows {
  using T = typename P::T;
  __device__ __forceinline__ static void run(const OpParams& p) {
    for_each_row_by_warp(P::kOuter, [&](i64 row, int lane) {
      const T* x = static_cast<const T*>(p.in[0]) + row * P::kR;
      T* y = static_cast<T*>(p.out[0]) + row * P::kR;
      const float2 m = row_moments(x, P::kR, lane, P::kEpsilon);
      const i64 ch = row % P::kC;
      const float a = m.y * to_float(static_cast<const T*>(p.in[1])[ch]);
      const float c = to_float(static_cast<const T*>(p.in[2])[ch]);
      for (i64 j = lane; j < P::kR; j += 32) y[j] = from_float<T>(P::act(fmaf(to_float(x[j]) - m.x, a, c)));
    });
  }
};

// A reduction over the innermost kR elements of kOuter contiguous rows: one warp per row, the
// lanes reading the row with stride 32 (coalesced) and meeting by shuffles.
template <typename P>
struct ReduceRows {
  using T = typename P::T;
  __device__ __forceinline__ static void run(const OpParams& p) {
    for_each_row_by_warp(P::kOuter, [&](i64 row, int lane) {
      const T* x = static_cast<const T*>(p.in[0]) + row * P::kR;
      ReduceAcc<P::kKind> acc;
      for (i64 j = lane; j < P::kR; j += 32) acc.add(to_float(x[j]));
      acc = warp_merge(acc);
      if (lane == 0) static_cast<typename P::TOut*>(p.out[0])[row] = P::finish(p, acc.result(static_cast<float>(P::kR)));
    });
  }
};

// A reduction over any axes (the general case: reduced dims that are not one run, and the
// identity), one thread per output element. The input's dims are split into kept dims (the
// output's index space: extents kKeptExtent, input strides kKeptStride, outermost first) and
// reduced dims (kRedExtent, kRedStride); the innermost reduced dim is a plain strided loop.
// Both arrays end with a {1, 0} sentinel so that they are never empty.
template <typename P>
struct ReduceAny {
  using T = typename P::T;
  static constexpr i64 kItems = P::kOutElems;
  __device__ __forceinline__ static void item(const OpParams& p, i64 o) {
    i64 base = 0;
    i64 r = o;
#pragma unroll
    for (int d = P::kKept - 1; d >= 0; --d) {
      base += (r % P::kKeptExtent[d]) * P::kKeptStride[d];
      r /= P::kKeptExtent[d];
    }
    const T* x = static_cast<const T*>(p.in[0]) + base;
    constexpr int kLast = P::kRed > 0 ? P::kRed - 1 : 0;
    constexpr i64 kInnerExtent = P::kRedExtent[kLast];
    constexpr i64 kInnerStride = P::kRedStride[kLast];
    constexpr i64 kOuterCount = kInnerExtent == 0 ? 0 : P::kCount / kInnerExtent;
    ReduceAcc<P::kKind> acc;
    for (i64 q = 0; q < kOuterCount; ++q) {
      i64 off = 0, t = q;
#pragma unroll
      for (int d = kLast - 1; d >= 0; --d) {
        off += (t % P::kRedExtent[d]) * P::kRedStride[d];
        t /= P::kRedExtent[d];
      }
      for (i64 j = 0; j < kInnerExtent; ++j) acc.add(to_float(x[off + j * kInnerStride]));
    }
    static_cast<typename P::TOut*>(p.out[0])[o] = P::finish(p, acc.result(static_cast<float>(P::kCount)));
  }
};

}  // namespace tessel
