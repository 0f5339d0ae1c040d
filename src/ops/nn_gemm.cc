#include "ops/nn_gemm.h"

#include <algorithm>
#include <vector>

namespace tessel::ops {
namespace {

// Register tile: the micro-kernel keeps a (kMR, kNR) block of C in accumulators. kNR = 8
// floats are two SSE vectors; compile-time trip counts let GCC vectorise the j loop at -O2
// (its "very cheap" cost model only vectorises loops with a known multiple of the width).
constexpr int64_t kMR = 4;
constexpr int64_t kNR = 8;
// Cache blocks: a packed (kKC, kNC) panel of B (1 MiB of f32) stays in L2 while packed
// (kMC, kKC) blocks of A (128 KiB) stream through it.
constexpr int64_t kKC = 256;
constexpr int64_t kNC = 1024;
constexpr int64_t kMC = 128;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Packs A[0:mc, 0:kc] into row panels of kMR: panel p is (kc, kMR) row-major, i.e. for each
// k the kMR values A[p*kMR + i, k]; rows past mc are zero so the micro-kernel never branches.
template <typename T>
void pack_a(MatrixRef<T> a, int64_t mc, int64_t kc, T* dst) {
  for (int64_t p = 0; p < mc; p += kMR) {
    int64_t rows = std::min(kMR, mc - p);
    for (int64_t kk = 0; kk < kc; ++kk) {
      for (int64_t i = 0; i < rows; ++i) dst[i] = a.at(p + i, kk);
      for (int64_t i = rows; i < kMR; ++i) dst[i] = T(0);
      dst += kMR;
    }
  }
}

// Packs B[0:kc, 0:nc] into column panels of kNR: panel p is (kc, kNR) row-major, columns
// past nc zero.
template <typename T>
void pack_b(MatrixRef<T> b, int64_t kc, int64_t nc, T* dst) {
  for (int64_t p = 0; p < nc; p += kNR) {
    int64_t cols = std::min(kNR, nc - p);
    for (int64_t kk = 0; kk < kc; ++kk) {
      for (int64_t j = 0; j < cols; ++j) dst[j] = b.at(kk, p + j);
      for (int64_t j = cols; j < kNR; ++j) dst[j] = T(0);
      dst += kNR;
    }
  }
}

// C[0:rows, 0:cols] (+)= Apanel (kc, kMR)^T x Bpanel (kc, kNR).
template <typename T>
void micro_kernel(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, int64_t rows,
                  int64_t cols, bool overwrite) {
  T acc[kMR][kNR] = {};
  for (int64_t kk = 0; kk < kc; ++kk) {
    for (int64_t i = 0; i < kMR; ++i) {
      const T av = ap[i];
      for (int64_t j = 0; j < kNR; ++j) acc[i][j] += av * bp[j];
    }
    ap += kMR;
    bp += kNR;
  }
  for (int64_t i = 0; i < rows; ++i) {
    T* ci = c + i * ldc;
    if (overwrite) {
      for (int64_t j = 0; j < cols; ++j) ci[j] = acc[i][j];
    } else {
      for (int64_t j = 0; j < cols; ++j) ci[j] += acc[i][j];
    }
  }
}

}  // namespace

template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,
          bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const int64_t kc_max = std::min(kKC, k);
  std::vector<T> bpack(static_cast<size_t>(kc_max * round_up(std::min(kNC, n), kNR)));
  std::vector<T> apack(static_cast<size_t>(kc_max * round_up(std::min(kMC, m), kMR)));
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const bool overwrite = pc == 0 && !accumulate;
      pack_b(b.offset(pc, jc), kc, nc, bpack.data());
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(a.offset(ic, pc), mc, kc, apack.data());
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            micro_kernel(kc, apack.data() + ir * kc, bpack.data() + jr * kc,
                         c + (ic + ir) * ldc + jc + jr, ldc, std::min(kMR, mc - ir),
                         std::min(kNR, nc - jr), overwrite);
          }
        }
      }
    }
  }
}

template void gemm<float>(int64_t, int64_t, int64_t, MatrixRef<float>, MatrixRef<float>, float*,
                          int64_t, bool);
template void gemm<double>(int64_t, int64_t, int64_t, MatrixRef<double>, MatrixRef<double>, double*,
                           int64_t, bool);
template void gemm<int64_t>(int64_t, int64_t, int64_t, MatrixRef<int64_t>, MatrixRef<int64_t>,
                            int64_t*, int64_t, bool);

}  // namespace tessel::ops
