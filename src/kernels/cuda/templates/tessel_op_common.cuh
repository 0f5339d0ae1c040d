// Shared pieces of the kernels for non-contraction ops (kernels/cuda/op_*.cc): the parameter
// block, element conversions for every storage type those ops see, V-element fragments that
// move with 16-byte accesses, and the grid-stride loop every op kernel is built on.
//
// Self-contained like tessel_ptx.cuh (no cuda_fp16.h under NVRTC): f16 is a raw 16-bit pattern
// converted with cvt instructions.
#pragma once

#include "tessel_ptx.cuh"

namespace tessel {

// The ABI of op kernels (op_kernels.h): device addresses of the node's inputs and outputs.
struct OpParams {
  const void* in[8];
  void* out[4];
};

using i64 = long long;
using i32 = int;
// ONNX bool: one byte, 0 or 1.
struct b8 {
  unsigned char v;
};

template <>
struct Vec<1> {
  using type = unsigned char;
};

// ---- Conversions between storage types ---------------------------------------------------
// Floating types meet in float (the arithmetic type of every op kernel); integers convert
// directly so that i64 values above 2^24 survive an integer-to-integer cast.
__device__ __forceinline__ float to_float(i64 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(i32 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(b8 x) { return x.v ? 1.f : 0.f; }
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
template <>
struct Convert<i64, b8> {
  __device__ __forceinline__ static i64 run(b8 x) { return x.v; }
};
template <typename To, typename From>
__device__ __forceinline__ To convert(From x) {
  return Convert<To, From>::run(x);
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
