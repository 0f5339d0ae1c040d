#include "kernels/contraction/index_map.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace tessel::contraction {
namespace {

void validate_access(const Access& x, size_t num_dims, const char* name) {
  TESSEL_ICHECK(x.index.size() == x.shape.size())
      << "operand " << name << " has " << x.index.size() << " indices for rank " << x.shape.size();
  for (size_t d = 0; d < x.shape.size(); ++d) {
    TESSEL_ICHECK(x.shape[d] >= 0) << "operand " << name << " has negative extent";
    TESSEL_ICHECK(x.index[d].coeffs.size() == num_dims)
        << "operand " << name << " index " << d << " has " << x.index[d].coeffs.size()
        << " coefficients for " << num_dims << " iteration dims";
  }
}

std::string access_str(const Access& x, const std::vector<IterDim>& dims) {
  std::string s = "[";
  for (size_t d = 0; d < x.index.size(); ++d) {
    if (d) s += ", ";
    s += affine_str(x.index[d], dims);
  }
  return s + "]";
}

}  // namespace

void validate(const IndexMaps& maps) {
  for (const IterDim& dim : maps.dims)
    TESSEL_ICHECK(dim.extent >= 0)
        << "iteration dim '" << dim.name << "' has extent " << dim.extent;
  validate_access(maps.a, maps.dims.size(), "A");
  validate_access(maps.b, maps.dims.size(), "B");
  validate_access(maps.c, maps.dims.size(), "C");
}

std::vector<int64_t> element_strides(const Access& x, size_t num_dims) {
  std::vector<int64_t> tensor_strides = strides_of(x.shape);
  std::vector<int64_t> strides(num_dims, 0);
  for (size_t d = 0; d < x.index.size(); ++d)
    for (size_t j = 0; j < num_dims; ++j) strides[j] += x.index[d].coeffs[j] * tensor_strides[d];
  return strides;
}

int64_t element_offset(const Access& x) {
  std::vector<int64_t> tensor_strides = strides_of(x.shape);
  int64_t offset = 0;
  for (size_t d = 0; d < x.index.size(); ++d) offset += x.index[d].offset * tensor_strides[d];
  return offset;
}

bool always_in_bounds(const Access& x, const std::vector<IterDim>& dims) {
  for (const IterDim& dim : dims)
    if (dim.extent == 0) return true;  // nothing is ever read
  for (size_t d = 0; d < x.index.size(); ++d) {
    // An affine function over a box reaches its extremes at the box's corners: each term
    // independently at 0 or at extent - 1.
    int64_t lo = x.index[d].offset, hi = x.index[d].offset;
    for (size_t j = 0; j < dims.size(); ++j) {
      int64_t far = x.index[d].coeffs[j] * (dims[j].extent - 1);
      (far < 0 ? lo : hi) += far;
    }
    if (lo < 0 || hi >= x.shape[d]) return false;
  }
  return true;
}

std::string affine_str(const AffineIndex& index, const std::vector<IterDim>& dims) {
  std::ostringstream os;
  bool first = true;
  for (size_t j = 0; j < index.coeffs.size(); ++j) {
    int64_t c = index.coeffs[j];
    if (c == 0) continue;
    if (first)
      os << (c < 0 ? "-" : "");
    else
      os << (c < 0 ? " - " : " + ");
    if (std::llabs(c) != 1) os << std::llabs(c) << "*";
    os << dims[j].name;
    first = false;
  }
  if (first)
    os << index.offset;
  else if (index.offset != 0)
    os << (index.offset < 0 ? " - " : " + ") << std::llabs(index.offset);
  return os.str();
}

std::string IndexMaps::str() const {
  // The loop nest in the RFC's notation:
  //   for b<1, oh<56, ow<56, co<64; sum kh<3, kw<3, ci<64:
  //     C[b, oh, ow, co] += A[b, oh + kh - 1, ow + kw - 1, ci] * B[co, kh, kw, ci]
  std::ostringstream os;
  auto list = [&](bool reduction) {
    std::string s;
    for (const IterDim& dim : dims) {
      if (dim.reduction != reduction) continue;
      if (!s.empty()) s += ", ";
      s += dim.name + "<" + std::to_string(dim.extent);
    }
    return s;
  };
  std::string outer = list(false), inner = list(true);
  os << "for " << (outer.empty() ? "()" : outer);
  if (!inner.empty()) os << "; sum " << inner;
  os << ":\n  C" << access_str(c, dims) << " += A" << access_str(a, dims) << " * B"
     << access_str(b, dims) << "\n";
  os << "  A " << dtype_name(a.dtype) << shape_str(a.shape) << ", B " << dtype_name(b.dtype)
     << shape_str(b.shape) << ", C " << dtype_name(c.dtype) << shape_str(c.shape);
  return os.str();
}

}  // namespace tessel::contraction
