// Index maps: how an op describes itself as a contraction, independent of op names.
//
//   C[fc(i)] = sum over reduction dims of  A[fa(i)] * B[fb(i)]
//
// over a loop nest of IterDims i. Each operand index is affine in the iteration variables
// (idx_d = sum_j coeff[d][j] * i_j + offset_d). An index outside [0, extent) reads zero:
// that is how convolution padding is expressed. Examples (see ops_maps.h):
//   GEMM NT   dims (m, n, k):  A[m, k]  B[n, k]  C[m, n]
//   conv NHWC dims (b, oh, ow, co, kh, kw, ci):
//             A[b, oh*s + kh*d - p, ow*s + kw*d - p, ci]  B[co, kh, kw, ci]  C[b, oh, ow, co]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace tessel::contraction {

struct IterDim {
  std::string name;
  int64_t extent = 1;
  bool reduction = false;
};

// idx = sum_j coeffs[j] * iter_j + offset; coeffs has one entry per IterDim.
struct AffineIndex {
  std::vector<int64_t> coeffs;
  int64_t offset = 0;
};

// One operand: a dense row-major tensor in memory and one AffineIndex per tensor dim.
struct Access {
  DType dtype = DType::kF16;
  Shape shape;
  std::vector<AffineIndex> index;
};

struct IndexMaps {
  std::vector<IterDim> dims;
  Access a, b, c;  // c is the output (its dtype is the stored dtype, before any epilogue)
  std::string str() const;  // human-readable, for `tessel codegen` and remarks
};

// Checks that every operand has one AffineIndex per tensor dim and one coefficient per
// IterDim, and that extents are non-negative. Index maps are built by the compiler (ops/),
// so a violation is an InternalError.
void validate(const IndexMaps& maps);

// The operand's address as a linear form of the iteration variables, in elements of its
// row-major buffer: &X[fx(i)] = element_offset(x) + sum_j element_strides(x)[j] * i_j. It is
// the true address only where every tensor index is in bounds (see always_in_bounds).
// `num_dims` is the number of IterDims (a rank-0 operand has no coefficients to count).
std::vector<int64_t> element_strides(const Access& x, size_t num_dims);
int64_t element_offset(const Access& x);

// True when no tensor index of `x` can leave [0, extent) anywhere in the iteration space (so
// no read is of padding). Vacuously true for an empty iteration space.
bool always_in_bounds(const Access& x, const std::vector<IterDim>& dims);

// "2*oh + kh - 1", with the dims' names.
std::string affine_str(const AffineIndex& index, const std::vector<IterDim>& dims);

}  // namespace tessel::contraction
