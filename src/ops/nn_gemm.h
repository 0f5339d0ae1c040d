// The matrix-multiply core of the reference kernels: Gemm, MatMul, Conv (through bounded
// im2col), ConvTranspose (through col2im) and the integer ops all end here. It is blocked and
// packed like BLIS (https://github.com/flame/blis/blob/master/docs/KernelsHowTo.md) so that
// the f32 path runs whole networks in the test suite quickly at -O2, with scratch memory
// bounded by the cache blocks rather than by the problem size.
#pragma once

#include <cstdint>

namespace tessel::ops {

// A read-only strided matrix: element (r, c) is data[r * row_stride + c * col_stride], so a
// transposed operand is the same buffer with its strides swapped.
template <typename T>
struct MatrixRef {
  const T* data;
  int64_t row_stride;
  int64_t col_stride;

  static MatrixRef row_major(const T* d, int64_t ld) { return {d, ld, 1}; }
  const T& at(int64_t r, int64_t c) const { return data[r * row_stride + c * col_stride]; }
  MatrixRef transposed() const { return {data, col_stride, row_stride}; }
  MatrixRef offset(int64_t r, int64_t c) const { return {&at(r, c), row_stride, col_stride}; }
};

// C[m, n] = sum_k A[m, k] * B[k, n], stored into row-major C (leading dimension ldc), which is
// overwritten, or added to when `accumulate`. Instantiated for float, double and int64_t (the
// integer ops accumulate exactly in int64 and wrap to int32 afterwards).
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,
          bool accumulate);

}  // namespace tessel::ops
