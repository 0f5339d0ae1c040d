// check_tensor_map: what the driver would refuse, said without a GPU.
#include <gtest/gtest.h>

#include "device/tensor_map.h"

namespace tessel::device {
namespace {

using Swizzle = TensorMapSpec::Swizzle;

// A tiled 2-D output map of (rows, cols) elements of `type`, boxes of (16, box_cols).
TensorMapSpec output_map(TensorMapSpec::Type type, uint64_t elem_bytes, uint32_t box_cols, Swizzle swizzle) {
  TensorMapSpec m;
  m.mode = TensorMapSpec::Mode::kTiled;
  m.type = type;
  m.operand = 2;
  m.rank = 2;
  m.swizzle = swizzle;
  m.dims = {256, 1000, 0, 0, 0};
  m.strides = {256 * elem_bytes, 0, 0, 0};
  m.box = {box_cols, 16, 0, 0, 0};
  return m;
}

TEST(TensorMap, SwizzledRowsHoldAtMostTheSwizzleSpan) {
  // The register epilogue's staging: 64 outputs per row, 128 bytes of f16, 64 of int8.
  EXPECT_FALSE(check_tensor_map(output_map(TensorMapSpec::Type::kF16, 2, 64, Swizzle::k128B)));
  EXPECT_FALSE(check_tensor_map(output_map(TensorMapSpec::Type::kU8, 1, 64, Swizzle::k64B)));
  EXPECT_FALSE(check_tensor_map(output_map(TensorMapSpec::Type::kU8, 1, 128, Swizzle::kNone)));
  EXPECT_EQ(check_tensor_map(output_map(TensorMapSpec::Type::kF16, 2, 64, Swizzle::k64B)).value_or(""),
            "tensor map inner box of 64 elements (128 bytes; a multiple of 16, at most 64 for the 64-byte swizzle)");
  EXPECT_EQ(check_tensor_map(output_map(TensorMapSpec::Type::kU8, 1, 256, Swizzle::k128B)).value_or(""),
            "tensor map inner box of 256 elements (256 bytes; a multiple of 16, at most 128 for the 128-byte "
            "swizzle)");
  EXPECT_EQ(check_tensor_map(output_map(TensorMapSpec::Type::kU8, 1, 64, static_cast<Swizzle>(3))).value_or(""),
            "tensor map swizzle 3");
}

TEST(TensorMap, OperandWordsAndIm2colSwizzle) {
  TensorMapSpec m = output_map(TensorMapSpec::Type::kF16, 2, 64, Swizzle::k128B);
  m.operand = kMaxTensorMapOperand;  // the last epilogue operand's word: a residual's
  EXPECT_FALSE(check_tensor_map(m));
  m.operand = kMaxTensorMapOperand + 1;
  EXPECT_EQ(check_tensor_map(m).value_or(""), "tensor map of operand 8 (0 to 7 expected)");

  TensorMapSpec im2col;
  im2col.mode = TensorMapSpec::Mode::kIm2col;
  im2col.rank = 4;
  im2col.dims = {64, 14, 14, 2, 0};
  im2col.strides = {128, 128 * 14, 128 * 14 * 14, 0};
  im2col.channels_per_pixel = 64;
  im2col.pixels_per_column = 128;
  EXPECT_FALSE(check_tensor_map(im2col));
  im2col.swizzle = Swizzle::k64B;
  EXPECT_EQ(check_tensor_map(im2col).value_or(""),
            "tensor map inner box of 64 elements (128 bytes; a multiple of 16, at most 64 for the 64-byte swizzle)");
  // 64-byte rows (the TMA kernel's k-tiles of 32 f16 or 64 int8 channels); an unswizzled
  // im2col box has no wgmma layout here.
  im2col.channels_per_pixel = 32;
  EXPECT_FALSE(check_tensor_map(im2col));
  im2col.swizzle = Swizzle::kNone;
  EXPECT_EQ(check_tensor_map(im2col).value_or(""), "an im2col map without a swizzle");
}

}  // namespace
}  // namespace tessel::device
