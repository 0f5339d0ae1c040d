#include "device/tensor_map.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "device/driver.h"

namespace tessel::device {
namespace {

uint64_t element_bytes(TensorMapSpec::Type t) { return t == TensorMapSpec::Type::kU8 ? 1 : 2; }

CUtensorMapDataType data_type(TensorMapSpec::Type t) {
  switch (t) {
    case TensorMapSpec::Type::kU8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case TensorMapSpec::Type::kF16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case TensorMapSpec::Type::kBF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

}  // namespace

std::optional<std::string> check_tensor_map(const TensorMapSpec& s) {
  const bool im2col = s.mode == TensorMapSpec::Mode::kIm2col;
  if (s.rank < (im2col ? 3 : 1) || s.rank > 5)
    return fmt::format("tensor map of rank {} ({} expected)", s.rank, im2col ? "3 to 5" : "1 to 5");
  if (s.operand > kMaxTensorMapOperand)
    return fmt::format("tensor map of operand {} (0 to {} expected)", s.operand, kMaxTensorMapOperand);
  const uint64_t elem = element_bytes(s.type);
  if (s.offset_bytes < 0 || s.offset_bytes % 16 != 0)
    return fmt::format("tensor map offset {} bytes is not a non-negative multiple of 16", s.offset_bytes);
  for (int d = 0; d < s.rank; ++d) {
    if (s.dims[d] < 1 || s.dims[d] > (uint64_t{1} << 32))
      return fmt::format("tensor map dim {} of extent {} (1 to 2^32)", d, s.dims[d]);
    if (s.element_strides[d] < 1 || s.element_strides[d] > 8)
      return fmt::format("tensor map element stride {} in dim {} (1 to 8)", s.element_strides[d], d);
  }
  uint64_t span = s.dims[0] * elem;
  for (int d = 1; d < s.rank; ++d) {
    const uint64_t st = s.strides[d - 1];
    if (st % 16 != 0 || st >= (uint64_t{1} << 40))
      return fmt::format("tensor map stride {} bytes of dim {} (a multiple of 16 below 2^40)", st, d);
    if (st < span) return fmt::format("tensor map stride {} bytes of dim {} overlaps dim {}", st, d, d - 1);
    span = st * s.dims[d];
  }
  // The inner box: whole 16-byte units, at most the swizzle's row (128 or 64 bytes).
  using Swizzle = TensorMapSpec::Swizzle;
  if (s.swizzle != Swizzle::kNone && s.swizzle != Swizzle::k128B && s.swizzle != Swizzle::k64B)
    return fmt::format("tensor map swizzle {}", static_cast<int>(s.swizzle));
  const uint64_t row = s.swizzle == Swizzle::k128B ? 128 : s.swizzle == Swizzle::k64B ? 64 : 0;
  const uint64_t inner = im2col ? s.channels_per_pixel : s.box[0];
  if (inner < 1 || inner * elem % 16 != 0 || (row > 0 && inner * elem > row))
    return fmt::format("tensor map inner box of {} elements ({} bytes; a multiple of 16{})", inner, inner * elem,
                       row > 0 ? fmt::format(", at most {} for the {}-byte swizzle", row, row) : "");
  if (im2col && s.swizzle == Swizzle::kNone) return "an im2col map without a swizzle";
  if (im2col) {
    if (s.pixels_per_column < 1 || s.pixels_per_column > 256)
      return fmt::format("im2col map of {} pixels per column (1 to 256)", s.pixels_per_column);
    // Corner ranges by rank (cuTensorMapEncodeIm2col): 3-D 16 bits, 4-D 8 bits, 5-D 5 bits.
    const int bits = s.rank == 3 ? 16 : s.rank == 4 ? 8 : 5;
    const int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
    for (int d = 0; d < s.rank - 2; ++d) {
      if (s.lower[d] < lo || s.lower[d] > hi || s.upper[d] < lo || s.upper[d] > hi)
        return fmt::format("im2col map corners [{}, {}] of spatial dim {} outside [{}, {}]",
                           s.lower[d], s.upper[d], d, lo, hi);
    }
  } else {
    for (int d = 0; d < s.rank; ++d)
      if (s.box[d] < 1 || s.box[d] > 256)
        return fmt::format("tensor map box extent {} in dim {} (1 to 256)", s.box[d], d);
  }
  return std::nullopt;
}

TensorMapBytes encode_tensor_map(const TensorMapSpec& s, uint64_t operand_address) {
  if (auto why = check_tensor_map(s)) {
    TESSEL_ICHECK(false) << "encode_tensor_map: " << *why;
  }
  const uint64_t address = operand_address + static_cast<uint64_t>(s.offset_bytes);
  TESSEL_ICHECK(address % 16 == 0) << "tensor map over a misaligned address 0x" << std::hex << address;
  const detail::DriverApi& api = detail::bind_context();
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], estrides[5];
  for (int d = 0; d < 5; ++d) {
    dims[d] = s.dims[d];
    box[d] = s.box[d];
    estrides[d] = s.element_strides[d];
  }
  for (int d = 0; d < 4; ++d) strides[d] = s.strides[d];
  void* global = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  const CUtensorMapSwizzle swizzle = s.swizzle == TensorMapSpec::Swizzle::k128B  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : s.swizzle == TensorMapSpec::Swizzle::k64B ? CU_TENSOR_MAP_SWIZZLE_64B
                                                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  if (s.mode == TensorMapSpec::Mode::kIm2col) {
    int lower[3], upper[3];
    for (int d = 0; d < 3; ++d) {
      lower[d] = s.lower[d];
      upper[d] = s.upper[d];
    }
    TESSEL_CU_CHECK(api.cuTensorMapEncodeIm2col(
        &map, data_type(s.type), s.rank, global, dims, strides, lower, upper, s.channels_per_pixel,
        s.pixels_per_column, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  } else {
    TESSEL_CU_CHECK(api.cuTensorMapEncodeTiled(
        &map, data_type(s.type), s.rank, global, dims, strides, box, estrides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }
  static_assert(sizeof(CUtensorMap) == kTensorMapBytes, "CUtensorMap is 128 bytes");
  TensorMapBytes bytes;
  std::memcpy(bytes.data(), &map, sizeof(map));
  return bytes;
}

TensorMapParam encode_tensor_maps(const std::vector<TensorMapSpec>& specs, const uint64_t* words,
                                  size_t n_words) {
  TESSEL_ICHECK(specs.size() <= static_cast<size_t>(kMaxTensorMaps))
      << "a kernel takes at most " << kMaxTensorMaps << " tensor maps, not " << specs.size();
  TensorMapParam param;
  for (size_t i = 0; i < specs.size(); ++i) {
    TESSEL_ICHECK(specs[i].operand < n_words)
        << "tensor map " << i << " over parameter word " << int(specs[i].operand) << " of " << n_words;
    param.maps[i] = encode_tensor_map(specs[i], words[specs[i].operand]);
  }
  return param;
}

}  // namespace tessel::device
