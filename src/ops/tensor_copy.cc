#include "ops/tensor_copy.h"

#include <cstring>

#include "core/error.h"

namespace tessel::ops {
namespace {

// Copies `n` elements of E bytes from src with a stride of `stride` elements. E is a template
// parameter so that each element copy compiles to a single load and store.
template <size_t E>
void copy_strided(std::byte* dst, const std::byte* src, int64_t n, int64_t stride) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * E, src + j * stride * E, E);
}

void copy_strided(size_t esize, std::byte* dst, const std::byte* src, int64_t n, int64_t stride) {
  switch (esize) {
    case 1:
      return copy_strided<1>(dst, src, n, stride);
    case 2:
      return copy_strided<2>(dst, src, n, stride);
    case 4:
      return copy_strided<4>(dst, src, n, stride);
    case 8:
      return copy_strided<8>(dst, src, n, stride);
  }
  TESSEL_ICHECK(false) << "element size " << esize;
}

// One output row of gather_axes: element j comes from byte offset offs[j] of src, or is
// `fill` where offs[j] < 0.
template <size_t E>
void gather_row(std::byte* dst, const std::byte* src, const int64_t* offs, int64_t n,
                const std::byte* fill) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * E, offs[j] < 0 ? fill : src + offs[j], E);
}

void gather_row(size_t esize, std::byte* dst, const std::byte* src, const int64_t* offs, int64_t n,
                const std::byte* fill) {
  switch (esize) {
    case 1:
      return gather_row<1>(dst, src, offs, n, fill);
    case 2:
      return gather_row<2>(dst, src, offs, n, fill);
    case 4:
      return gather_row<4>(dst, src, offs, n, fill);
    case 8:
      return gather_row<8>(dst, src, offs, n, fill);
  }
  TESSEL_ICHECK(false) << "element size " << esize;
}

}  // namespace

void transpose_bytes(const Tensor& in, const Shape& in_shape, std::span<const int64_t> perm,
                     Tensor& out) {
  TESSEL_ICHECK(perm.size() == in_shape.size() && numel(in_shape) == in.numel() &&
                out.numel() == in.numel() && out.dtype() == in.dtype())
      << "transpose_bytes: " << in.type_str() << " viewed as " << shape_str(in_shape) << " into "
      << out.type_str();
  const size_t esize = dtype_size(in.dtype());
  if (in.numel() == 0) return;
  const std::vector<int64_t> in_strides = strides_of(in_shape);

  // Output dimensions with their input strides; extents of 1 dropped and dimensions that stay
  // adjacent in the input merged, so that e.g. NCHW -> NHWC is the 3-D (N, HW, C) copy.
  std::vector<int64_t> dims, strides;
  for (int64_t p : perm) {
    const int64_t extent = in_shape[static_cast<size_t>(p)];
    const int64_t stride = in_strides[static_cast<size_t>(p)];
    if (extent == 1) continue;
    if (!dims.empty() && strides.back() == stride * extent) {
      dims.back() *= extent;
      strides.back() = stride;
    } else {
      dims.push_back(extent);
      strides.push_back(stride);
    }
  }
  if (dims.empty() || (dims.size() == 1 && strides[0] == 1)) {  // the identity permutation
    std::memcpy(out.raw(), in.raw(), in.nbytes());
    return;
  }

  const size_t inner = dims.size() - 1;
  const int64_t count = dims[inner];
  const int64_t inner_stride = strides[inner];
  const std::byte* src = in.raw();
  std::byte* dst = out.raw();
  std::vector<int64_t> index(inner, 0);  // odometer over the outer output dimensions
  int64_t offset = 0;                    // input element offset of the current row
  for (int64_t o = 0; o < out.numel(); o += count) {
    copy_strided(esize, dst + o * static_cast<int64_t>(esize),
                 src + offset * static_cast<int64_t>(esize), count, inner_stride);
    for (size_t d = inner; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < dims[d]) break;
      offset -= strides[d] * dims[d];
      index[d] = 0;
    }
  }
}

void gather_axes(const Tensor& in, const std::vector<std::vector<int64_t>>& maps,
                 const std::byte* fill, Tensor& out) {
  const size_t rank = static_cast<size_t>(in.rank());
  TESSEL_ICHECK(maps.size() == rank && out.rank() == in.rank() && out.dtype() == in.dtype())
      << "gather_axes: " << in.type_str() << " into " << out.type_str();
  const int64_t esize = static_cast<int64_t>(dtype_size(in.dtype()));
  if (out.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(out.raw(), in.raw(), static_cast<size_t>(esize));
    return;
  }

  // Byte offset into `in` contributed by each coordinate of each output axis; -1 for fill.
  const std::vector<int64_t> in_strides = strides_of(in.shape());
  std::vector<std::vector<int64_t>> offs(rank);
  for (size_t d = 0; d < rank; ++d) {
    TESSEL_ICHECK(static_cast<int64_t>(maps[d].size()) == out.dim(static_cast<int64_t>(d)))
        << "gather_axes: map " << d << " has " << maps[d].size() << " entries for "
        << out.type_str();
    offs[d].reserve(maps[d].size());
    for (int64_t m : maps[d]) {
      TESSEL_ICHECK(m < in.dim(static_cast<int64_t>(d))) << "gather_axes: index " << m;
      offs[d].push_back(m < 0 ? -1 : m * in_strides[d] * esize);
    }
  }
  // The innermost map is usually a contiguous range (Slice with step 1, the interior of a Pad):
  // then each row is one memcpy.
  const std::vector<int64_t>& last = maps[rank - 1];
  bool contiguous = last[0] >= 0;
  for (size_t j = 1; contiguous && j < last.size(); ++j)
    contiguous = last[j] == last[0] + int64_t(j);

  const size_t inner = rank - 1;
  const int64_t count = out.dim(static_cast<int64_t>(inner));
  const std::byte* src = in.raw();
  std::byte* dst = out.raw();
  std::vector<int64_t> index(inner, 0);
  for (int64_t o = 0; o < out.numel(); o += count, dst += count * esize) {
    int64_t base = 0;
    bool filled = false;
    for (size_t d = 0; d < inner; ++d) {
      const int64_t off = offs[d][static_cast<size_t>(index[d])];
      filled |= off < 0;
      base += off;
    }
    if (filled) {
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(dst + j * esize, fill, static_cast<size_t>(esize));
    } else if (contiguous) {
      std::memcpy(dst, src + base + offs[inner][0], static_cast<size_t>(count * esize));
    } else {
      gather_row(static_cast<size_t>(esize), dst, src + base, offs[inner].data(), count, fill);
    }
    for (size_t d = inner; d-- > 0;) {
      if (++index[d] < out.dim(static_cast<int64_t>(d))) break;
      index[d] = 0;
    }
  }
}

}  // namespace tessel::ops
