#include "ops/conv_kernels.h"

#include <algorithm>
#include <vector>

#include "ops/nn_gemm.h"

namespace tessel::ops {
namespace {

// Upper bound of a column buffer. One row of the last spatial dim per kernel element is
// always allowed, so the bound only bites for large images.
constexpr int64_t kColumnBudgetBytes = int64_t{4} << 20;

// Maps rows of a "grid" (Conv: output positions; ConvTranspose: input positions) onto an
// "image" plane (Conv: input; ConvTranspose: output) for one kernel offset, following
// image_d = g_d * stride_d - pad_begin_d + kpos_d * dilation_d. A row is a run of the grid's
// last spatial dim; rows are numbered row-major over the other spatial dims.
class PatchRows {
 public:
  PatchRows(const ConvGeometry& g, const Shape& grid, const Shape& image)
      : g_(g), grid_(grid), image_(image), image_strides_(strides_of(image)) {}

  int64_t row_length() const { return grid_.back(); }
  int64_t num_rows() const { return numel(grid_) / row_length(); }

  // Calls fn(r, offset, lo, hi) for each grid row r in [r0, r1): grid positions j in
  // [lo, hi) of the row map to the image element offset + j * stride (flat within the plane),
  // the rest of the row falls into padding (lo == hi when the whole row does).
  template <typename Fn>
  void for_each_row(const int64_t* kpos, int64_t r0, int64_t r1, Fn&& fn) const {
    const size_t last = grid_.size() - 1;
    const int64_t shift = kpos[last] * g_.dilations[last] - g_.pad_begin[last];
    const int64_t s = g_.strides[last];
    const int64_t lo = std::clamp<int64_t>(ceil_div(-shift, s), 0, row_length());
    const int64_t hi =
        std::clamp<int64_t>(floor_div(image_[last] - 1 - shift, s) + 1, lo, row_length());
    // Coordinates of row r0 in the outer grid dims, advanced like an odometer.
    std::vector<int64_t> coord(last);
    for (int64_t rem = r0, d = static_cast<int64_t>(last) - 1; d >= 0; --d) {
      coord[d] = rem % grid_[d];
      rem /= grid_[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      int64_t offset = shift;
      bool inside = true;
      for (size_t d = 0; d < last && inside; ++d) {
        int64_t i = coord[d] * g_.strides[d] - g_.pad_begin[d] + kpos[d] * g_.dilations[d];
        inside = i >= 0 && i < image_[d];
        offset += i * image_strides_[d];
      }
      if (inside) {
        fn(r, offset, lo, hi);
      } else {
        fn(r, int64_t{0}, int64_t{0}, int64_t{0});
      }
      for (int64_t d = static_cast<int64_t>(last) - 1; d >= 0 && ++coord[d] == grid_[d]; --d)
        coord[d] = 0;
    }
  }

 private:
  const ConvGeometry& g_;
  const Shape& grid_;
  const Shape& image_;
  std::vector<int64_t> image_strides_;
};

// All kernel offsets, row-major: offsets[k * rank + d] is coordinate d of kernel element k.
std::vector<int64_t> kernel_offsets(const Shape& kernel) {
  const int64_t n = numel(kernel);
  const size_t rank = kernel.size();
  std::vector<int64_t> offsets(static_cast<size_t>(n) * rank);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t rem = k, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      offsets[static_cast<size_t>(k) * rank + d] = rem % kernel[d];
      rem /= kernel[d];
    }
  return offsets;
}

// Grid rows per column-buffer chunk for a buffer of `kdim` rows.
template <typename T>
int64_t rows_per_chunk(int64_t kdim, int64_t row_length, int64_t num_rows) {
  int64_t fit = kColumnBudgetBytes / static_cast<int64_t>(sizeof(T)) /
                std::max<int64_t>(1, kdim * row_length);
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(1, num_rows));
}

bool is_pointwise(const ConvGeometry& g) {
  for (size_t d = 0; d < g.spatial_rank(); ++d)
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0)
      return false;
  return true;
}

}  // namespace

template <typename T>
void conv_forward(const ConvGeometry& g, const T* x, const T* w, T* y) {
  const int64_t cg = g.in_channels / g.group;
  const int64_t mg = g.out_channels / g.group;
  const int64_t ksize = numel(g.kernel);
  const int64_t kdim = cg * ksize;  // GEMM K: (c, kernel offset)
  const int64_t in_plane = numel(g.in_spatial);
  const int64_t out_plane = numel(g.out_spatial);
  if (out_plane == 0 || mg == 0) return;
  const size_t rank = g.spatial_rank();
  const int64_t s_last = g.strides.back();
  const bool pointwise = is_pointwise(g);
  const std::vector<int64_t> kpos = kernel_offsets(g.kernel);
  PatchRows rows(g, g.out_spatial, g.in_spatial);
  const int64_t row_len = rows.row_length();
  const int64_t chunk = rows_per_chunk<T>(kdim, row_len, rows.num_rows());
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(kdim * chunk * row_len));

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* xg = x + (n * g.in_channels + gi * cg) * in_plane;
      const auto wg = MatrixRef<T>::row_major(w + gi * mg * kdim, kdim);  // (mg, kdim)
      T* yg = y + (n * g.out_channels + gi * mg) * out_plane;             // (mg, out_plane)
      if (pointwise) {
        gemm(mg, out_plane, cg, wg, MatrixRef<T>::row_major(xg, in_plane), yg, out_plane, false);
        continue;
      }
      for (int64_t r0 = 0; r0 < rows.num_rows(); r0 += chunk) {
        const int64_t r1 = std::min(rows.num_rows(), r0 + chunk);
        const int64_t ncols = (r1 - r0) * row_len;
        // col (kdim, ncols): col[(c, k), (r, j)] = x[c, image position of (r, j) at offset k]
        for (int64_t c = 0; c < cg; ++c) {
          const T* src = xg + c * in_plane;
          for (int64_t k = 0; k < ksize; ++k) {
            T* dst = col.data() + (c * ksize + k) * ncols;
            rows.for_each_row(&kpos[k * rank], r0, r1,
                              [&](int64_t r, int64_t offset, int64_t lo, int64_t hi) {
                                T* d = dst + (r - r0) * row_len;
                                std::fill(d, d + lo, T(0));
                                for (int64_t j = lo; j < hi; ++j) d[j] = src[offset + j * s_last];
                                std::fill(d + hi, d + row_len, T(0));
                              });
          }
        }
        gemm(mg, ncols, kdim, wg, MatrixRef<T>::row_major(col.data(), ncols), yg + r0 * row_len,
             out_plane, false);
      }
    }
  }
}

template <typename T>
void conv_transpose_forward(const ConvGeometry& g, const T* x, const T* w, T* y) {
  const int64_t cg = g.in_channels / g.group;
  const int64_t mg = g.out_channels / g.group;
  const int64_t ksize = numel(g.kernel);
  const int64_t kdim = mg * ksize;  // GEMM M: (m, kernel offset)
  const int64_t in_plane = numel(g.in_spatial);
  const int64_t out_plane = numel(g.out_spatial);
  std::fill(y, y + g.batch * g.out_channels * out_plane, T(0));
  if (in_plane == 0 || kdim == 0) return;
  const size_t rank = g.spatial_rank();
  const int64_t s_last = g.strides.back();
  const std::vector<int64_t> kpos = kernel_offsets(g.kernel);
  PatchRows rows(g, g.in_spatial, g.out_spatial);
  const int64_t row_len = rows.row_length();
  const int64_t chunk = rows_per_chunk<T>(kdim, row_len, rows.num_rows());
  std::vector<T> col(static_cast<size_t>(kdim * chunk * row_len));

  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* xg = x + (n * g.in_channels + gi * cg) * in_plane;  // (cg, in_plane)
      // w's group block is (cg, kdim) row-major; the GEMM needs its transpose (kdim, cg).
      const auto wt = MatrixRef<T>::row_major(w + gi * cg * kdim, kdim).transposed();
      T* yg = y + (n * g.out_channels + gi * mg) * out_plane;
      for (int64_t r0 = 0; r0 < rows.num_rows(); r0 += chunk) {
        const int64_t r1 = std::min(rows.num_rows(), r0 + chunk);
        const int64_t ncols = (r1 - r0) * row_len;
        // col (kdim, ncols) = w^T x: the contribution of each input position at each offset.
        gemm(kdim, ncols, cg, wt, MatrixRef<T>::row_major(xg + r0 * row_len, in_plane), col.data(),
             ncols, false);
        for (int64_t m = 0; m < mg; ++m) {
          T* dst = yg + m * out_plane;
          for (int64_t k = 0; k < ksize; ++k) {
            const T* src = col.data() + (m * ksize + k) * ncols;
            rows.for_each_row(&kpos[k * rank], r0, r1,
                              [&](int64_t r, int64_t offset, int64_t lo, int64_t hi) {
                                const T* s = src + (r - r0) * row_len;
                                for (int64_t j = lo; j < hi; ++j) dst[offset + j * s_last] += s[j];
                              });
          }
        }
      }
    }
  }
}

template void conv_forward<float>(const ConvGeometry&, const float*, const float*, float*);
template void conv_forward<double>(const ConvGeometry&, const double*, const double*, double*);
template void conv_forward<int64_t>(const ConvGeometry&, const int64_t*, const int64_t*, int64_t*);
template void conv_transpose_forward<float>(const ConvGeometry&, const float*, const float*,
                                            float*);
template void conv_transpose_forward<double>(const ConvGeometry&, const double*, const double*,
                                             double*);

}  // namespace tessel::ops
