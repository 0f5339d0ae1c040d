// MatMul of two activations (kernels/cuda/op_matmul.cc): numpy's batched matrix product,
// Y[b, m, n] = sum_k A[b, m, k] * B[b, k, n] with the batch dims broadcast, accumulated in
// fp32 on CUDA cores. The attention products of hybrid CNNs; a constant B is a tessel.Gemm on
// Tensor Cores instead (convert-layout).
#pragma once

#include "tessel_op_common.cuh"

namespace tessel {

// One 32x32 output tile per block iteration (grid-stride over batch x tiles), 256 threads of
// 32 columns x 8 rows, each thread 4 outputs of one column. The A and B k-tiles are staged in
// shared memory as fp32 (pitch 33: the column reads of A are conflict-free); a warp reads one
// A element (broadcast) and 32 consecutive B elements per step. Batch b's matrices start at
// sum_d coord_d * kAStride[d] (0 where A is broadcast along d), likewise B.
template <typename P>
struct BatchedMatMul {
  using T = typename P::T;
  static constexpr int kTile = 32;

  __device__ __forceinline__ static void run(const OpParams& p) {
    __shared__ float as[kTile][kTile + 1];
    __shared__ float bs[kTile][kTile + 1];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    constexpr i64 kTilesM = (P::kM + kTile - 1) / kTile, kTilesN = (P::kN + kTile - 1) / kTile;
    for (i64 t = blockIdx.x; t < P::kBatch * kTilesM * kTilesN; t += gridDim.x) {
      const i64 batch = t / (kTilesM * kTilesN);
      const i64 m0 = (t / kTilesN) % kTilesM * kTile, n0 = t % kTilesN * kTile;
      i64 a_off = 0, b_off = 0, r = batch;
#pragma unroll
      for (int d = P::kBatchDims - 1; d >= 0; --d) {
        const i64 c = r % P::kBatchExtent[d];
        r /= P::kBatchExtent[d];
        a_off += c * P::kAStride[d];
        b_off += c * P::kBStride[d];
      }
      const T* a = static_cast<const T*>(p.in[0]) + a_off;
      const T* b = static_cast<const T*>(p.in[1]) + b_off;
      float acc[4] = {};
      for (i64 k0 = 0; k0 < P::kK; k0 += kTile) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = ty + 8 * i;
          const i64 m = m0 + row, ka = k0 + tx, kb = k0 + row, n = n0 + tx;
          as[row][tx] = m < P::kM && ka < P::kK ? to_float(a[m * P::kK + ka]) : 0.f;
          bs[row][tx] = kb < P::kK && n < P::kN ? to_float(b[kb * P::kN + n]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kTile; ++kk) {
          const float bv = bs[kk][tx];
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[i] = fmaf(as[ty + 8 * i][kk], bv, acc[i]);
        }
        __syncthreads();
      }
      T* y = static_cast<T*>(p.out[0]) + batch * P::kM * P::kN;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 m = m0 + ty + 8 * i, n = n0 + tx;
        if (m < P::kM && n < P::kN) y[m * P::kN + n] = from_float<T>(acc[i]);
      }
    }
  }
};

}  // namespace tessel
