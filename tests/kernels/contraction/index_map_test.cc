#include "kernels/contraction/index_map.h"

#include <gtest/gtest.h>

#include "kernels/contraction/ops_maps.h"
#include "core/error.h"

namespace tessel::contraction {
namespace {

TEST(IndexMap, AffineStr) {
  std::vector<IterDim> dims = {{"oh", 4, false}, {"kh", 3, true}, {"k", 2, true}};
  EXPECT_EQ(affine_str({{2, 1, 0}, -1}, dims), "2*oh + kh - 1");
  EXPECT_EQ(affine_str({{0, 0, -1}, 3}, dims), "-k + 3");
  EXPECT_EQ(affine_str({{0, -2, 1}, 0}, dims), "-2*kh + k");
  EXPECT_EQ(affine_str({{0, 0, 0}, 0}, dims), "0");
  EXPECT_EQ(affine_str({{0, 0, 0}, 5}, dims), "5");
}

TEST(IndexMap, StrShowsTheLoopNest) {
  EXPECT_EQ(gemm_maps(512, 64, 256, {false, true}).str(),
            "for m<512, n<64; sum k<256:\n"
            "  C[m, n] += A[m, k] * B[n, k]\n"
            "  A f16[512,256], B f16[64,256], C f16[512,64]");
}

Conv2dParams small_conv() {
  // 5x5x4 input, 3x3 kernel, stride 2, pad 1: output 3x3.
  Conv2dParams p;
  p.h = p.w = 5;
  p.ci = 4;
  p.co = 8;
  p.kh = p.kw = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  return p;
}

TEST(IndexMap, ElementStridesAndOffset) {
  IndexMaps maps = conv2d_nhwc_maps(small_conv());
  // Dims (b, oh, ow, co, kh, kw, ci); A is (1, 5, 5, 4) with row-major strides (100, 20, 4, 1):
  // oh moves 2 rows (40), kh one (20), ow 2 pixels (8), kw one (4); co does not index A.
  EXPECT_EQ(element_strides(maps.a, maps.dims.size()),
            (std::vector<int64_t>{100, 40, 8, 0, 20, 4, 1}));
  EXPECT_EQ(element_offset(maps.a), -20 - 4);  // (ih, iw) = (-1, -1)
  // B is (8, 3, 3, 4).
  EXPECT_EQ(element_strides(maps.b, maps.dims.size()),
            (std::vector<int64_t>{0, 0, 0, 36, 12, 4, 1}));
  EXPECT_EQ(element_offset(maps.b), 0);
}

TEST(IndexMap, AlwaysInBounds) {
  Conv2dParams p = small_conv();
  IndexMaps padded = conv2d_nhwc_maps(p);
  EXPECT_FALSE(always_in_bounds(padded.a, padded.dims));  // oh = 0, kh = 0 reads row -1
  EXPECT_TRUE(always_in_bounds(padded.b, padded.dims));
  EXPECT_TRUE(always_in_bounds(padded.c, padded.dims));

  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;  // 2x2 output, rows 0..4
  IndexMaps valid = conv2d_nhwc_maps(p);
  EXPECT_TRUE(always_in_bounds(valid.a, valid.dims));

  p.pad_bottom = 2;  // 3 output rows: the last window reads rows 4..6 of 0..4
  IndexMaps bottom = conv2d_nhwc_maps(p);
  EXPECT_FALSE(always_in_bounds(bottom.a, bottom.dims));

  IndexMaps empty = gemm_maps(4, 4, 0, {});
  EXPECT_TRUE(always_in_bounds(empty.a, empty.dims));  // nothing is read
}

TEST(IndexMap, ValidateRejectsMalformedMaps) {
  IndexMaps maps = gemm_maps(4, 4, 4, {});
  EXPECT_NO_THROW(validate(maps));
  IndexMaps few = maps;
  few.b.index.pop_back();
  EXPECT_THROW(validate(few), InternalError);
  IndexMaps coeffs = maps;
  coeffs.c.index[0].coeffs.push_back(0);
  EXPECT_THROW(validate(coeffs), InternalError);
  IndexMaps extent = maps;
  extent.dims[0].extent = -1;
  EXPECT_THROW(validate(extent), InternalError);
}

}  // namespace
}  // namespace tessel::contraction
