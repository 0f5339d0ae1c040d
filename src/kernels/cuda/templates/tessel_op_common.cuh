// Shared pieces of the kernels for non-contraction ops (kernels/cuda/op_*.cc): the parameter
// block, element conversions for every storage type those ops see, the rounding of
// QuantizeLinear, V-element fragments that move with 16-byte accesses, and the grid-stride loop
// every op kernel is built on.
//
// Self-contained like tessel_ptx.cuh (no cuda_fp16.h under NVRTC): f16 is a raw 16-bit pattern
// converted with cvt instructions.
#pragma once

#include "tessel_activations.cuh"
#include "tessel_ptx.cuh"

namespace tessel {

// The ABI of op kernels (op_kernels.h): device addresses of the node's inputs and outputs.
struct OpParams {
  const void* in[8];
  void* out[4];
};

using i64 = long long;
using i32 = int;
// The quantized types of QuantizeLinear / DequantizeLinear.
using i8 = signed char;
using u8 = unsigned char;
// std::is_same, which NVRTC's headers lack.
template <typename A, typename B>
struct SameType {
  static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
  static constexpr bool value = true;
};

// ONNX bool: one byte, 0 or 1.
struct b8 {
  unsigned char v;
};

// ---- Conversions between storage types ---------------------------------------------------
// Floating types meet in float (the arithmetic type of every op kernel); integers convert
// directly so that i64 values above 2^24 survive an integer-to-integer cast.
__device__ __forceinline__ float to_float(i64 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(i32 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(b8 x) { return x.v ? 1.f : 0.f; }
__device__ __forceinline__ float to_float(i8 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(u8 x) { return static_cast<float>(x); }
template <>
__device__ __forceinline__ i64 from_float<i64>(float f) {
  return static_cast<i64>(f);  // truncation toward zero, as ONNX Cast
}
template <>
__device__ __forceinline__ i32 from_float<i32>(float f) {
  return static_cast<i32>(f);
}
template <>
__device__ __forceinline__ b8 from_float<b8>(float f) {
  return b8{static_cast<unsigned char>(f != 0.f)};
}

template <typename To, typename From>
struct Convert {
  __device__ __forceinline__ static To run(From x) { return from_float<To>(to_float(x)); }
};
template <typename T>
struct Convert<T, T> {
  __device__ __forceinline__ static T run(T x) { return x; }
};
template <>
struct Convert<i64, i32> {
  __device__ __forceinline__ static i64 run(i32 x) { return x; }
};
template <>
struct Convert<i32, i64> {
  __device__ __forceinline__ static i32 run(i64 x) { return static_cast<i32>(x); }
};
template <>
struct Convert<b8, i64> {
  __device__ __forceinline__ static b8 run(i64 x) { return b8{static_cast<unsigned char>(x != 0)}; }
};
// i64 -> 8-bit integers wraps around, as ONNX's integer casts (Pad's default zero).
template <>
struct Convert<i8, i64> {
  __device__ __forceinline__ static i8 run(i64 x) { return static_cast<i8>(x); }
};
template <>
struct Convert<u8, i64> {
  __device__ __forceinline__ static u8 run(i64 x) { return static_cast<u8>(x); }
};
template <>
struct Convert<i64, b8> {
  __device__ __forceinline__ static i64 run(b8 x) { return x.v; }
};
template <typename To, typename From>
__device__ __forceinline__ To convert(From x) {
  return Convert<To, From>::run(x);
}

// ---- QuantizeLinear's rounding (ops/quant_common.cc, quantize_value) -------------------------
// saturate(round_half_even(q) + zero_point) into Q (i8 or u8); NaN gives the zero point.
// cvt.rni rounds ties to even and saturates at the i32 range (infinities included); clamping
// to [lo - zp, hi - zp] before adding the zero point keeps the sum from overflowing.
template <typename Q>
struct QuantLimits;
template <>
struct QuantLimits<i8> {
  static constexpr int kLo = -128, kHi = 127;
};
template <>
struct QuantLimits<u8> {
  static constexpr int kLo = 0, kHi = 255;
};
template <typename Q>
__device__ __forceinline__ Q quantize(float q, int zero_point) {
  if (isnan(q)) return static_cast<Q>(zero_point);
  int r;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(r) : "f"(q));
  r = min(max(r, QuantLimits<Q>::kLo - zero_point), QuantLimits<Q>::kHi - zero_point);
  return static_cast<Q>(r + zero_point);
}

// ---- The stored value of a fused epilogue ---------------------------------------------------
// A grouped or depthwise conv's epilogue result as its output type: from_float, but int8 (after
// a last quantize step) by store_s8, as the contraction kernels store it, uint8 by store_u8. Not a Cast: ONNX's
// Cast to int8 truncates, and no op kernel writes int8 by a cast.
template <typename Out>
__device__ __forceinline__ Out store_as(float v) {
  return from_float<Out>(v);
}
template <>
__device__ __forceinline__ i8 store_as<i8>(float v) {
  return store_s8(v);
}
// uint8 (a max pool of onnxruntime's uint8 activations) by store_u8 alike.
template <>
__device__ __forceinline__ u8 store_as<u8>(float v) {
  return store_u8(v);
}
// Four int8 (uint8) results packed into one word, `a` in the low byte.
template <typename B = i8>
__device__ __forceinline__ u32 pack4_s8(float a, float b, float c, float d) {
  const u32 lo = __byte_perm(u32(u8(store_as<B>(a))), u32(u8(store_as<B>(b))), 0x0040);
  const u32 hi = __byte_perm(u32(u8(store_as<B>(c))), u32(u8(store_as<B>(d))), 0x0040);
  return __byte_perm(lo, hi, 0x5410);
}

// ---- Fragments: V consecutive elements moved with the widest accesses that fit ------------
// The caller guarantees that the address is aligned to min(16, V * sizeof(T)) bytes: buffers
// are 16-byte aligned and the emitter only picks V where every fragment starts at a multiple
// of V elements.
template <typename T, int V>
struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) Frag {
  T v[V];
  static constexpr int kBytes = sizeof(T) * V;
  static constexpr int kChunk = kBytes < 16 ? kBytes : 16;
  using Chunk = typename Vec<kChunk>::type;

  __device__ __forceinline__ void load(const T* p) {
#pragma unroll
    for (int c = 0; c < kBytes / kChunk; ++c)
      reinterpret_cast<Chunk*>(v)[c] = __ldg(reinterpret_cast<const Chunk*>(p) + c);
  }
  __device__ __forceinline__ void store(T* p) const {
#pragma unroll
    for (int c = 0; c < kBytes / kChunk; ++c)
      reinterpret_cast<Chunk*>(p)[c] = reinterpret_cast<const Chunk*>(v)[c];
  }
};

// A fragment's elements as floats, to_float of each.
template <typename T, int V>
__device__ __forceinline__ void to_floats(const Frag<T, V>& f, float (&out)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_float(f.v[i]);
}
// 8-bit codes (a depthwise conv's int8 input: fold-qdq; the element-wise kernels' int8
// operands), exactly and without cvt.rn.f32.s8, which issues at a quarter of the rate: for
// int8 one xor per word turns each byte x into x + 128 unsigned, one prmt per element puts it
// under the exponent of 2^23 (bits 0x4B0000uu: 2^23 + u), one subtract of 2^23 (+ 128) leaves
// x: 2.25 full-rate instructions per element (2 for uint8).
template <typename B, int V>
__device__ __forceinline__ void codes_to_floats(const Frag<B, V>& f, float (&out)[V]) {
  constexpr bool kSigned = SameType<B, i8>::value;
  constexpr int kWords = (V + 3) / 4;
  u32 w[kWords] = {};
  memcpy(w, f.v, V);
  if constexpr (kSigned)
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] ^= 0x80808080u;
#pragma unroll
  for (int i = 0; i < V; ++i)
    out[i] = __fsub_rn(__int_as_float(__byte_perm(w[i / 4], 0x4B000000u, 0x7440 + i % 4)),
                       kSigned ? 8388736.0f : 8388608.0f);  // 2^23 + 128, 2^23
}
template <int V>
__device__ __forceinline__ void to_floats(const Frag<i8, V>& f, float (&out)[V]) {
  codes_to_floats(f, out);
}
template <int V>
__device__ __forceinline__ void to_floats(const Frag<u8, V>& f, float (&out)[V]) {
  codes_to_floats(f, out);
}

// ---- Pad's source coordinates (ops/tensor_indexing.cc, pad_source) -------------------------
// reflect: mirrored about the first and last elements (no repeat of the edge), periodic with
// 2 * (n - 1) for pads wider than the axis; edge: clamped.
__device__ __forceinline__ i64 pad_reflect(i64 i, i64 n) {
  if (i >= 0 && i < n) return i;
  if (n == 1) return 0;
  const i64 period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}
__device__ __forceinline__ i64 pad_edge(i64 i, i64 n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// ---- The loop every op kernel runs -------------------------------------------------------
// Problem::kItems independent work items (an item is a fragment of V outputs, one output
// pixel's channel vector, one row...), visited by a 1-D grid-stride loop so that any problem
// size runs with a grid below the 2^31-1 limit of x and none of y/z's 65535.
template <typename Problem>
__device__ __forceinline__ void for_each_item(const OpParams& p) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < Problem::kItems;
       i += stride)
    Problem::item(p, i);
}

}  // namespace tessel
