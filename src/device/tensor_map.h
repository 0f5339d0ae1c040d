// TMA descriptors (CUtensorMap) as data. A kernel that reads its operands with the tensor
// memory accelerator describes each map it needs as a TensorMapSpec; whoever knows the
// addresses (a launcher, the engine at load) encodes the 128-byte descriptor with
// encode_tensor_map and hands its device address to the kernel. Specs are plain values, so an
// engine file stores them and a machine without a GPU checks them (check_tensor_map).
//
// Operand maps have 128-byte swizzling (the wgmma operand layout: boxes of 128-byte rows),
// output maps 128- or 64-byte swizzled or dense boxes; none interleaves, and loads are
// zero-filled outside the tensor.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::device {

struct TensorMapSpec {
  enum class Mode : uint8_t { kTiled, kIm2col };
  enum class Type : uint8_t { kU8, kF16, kBF16 };
  Mode mode = Mode::kTiled;
  Type type = Type::kF16;
  uint8_t operand = 0;  // the kernel parameter word whose address the map starts from (0 to 7)
  // The shared-memory layout of a box: rows of 128 or 64 bytes whose 16-byte chunks are XORed
  // with the row's position (the wgmma operand layout; conflict-free rows of 16-bit or 8-bit
  // outputs), or dense rows.
  enum class Swizzle : uint8_t { kNone = 0, k128B = 1, k64B = 2 };
  Swizzle swizzle = Swizzle::k128B;
  uint8_t rank = 2;     // tiled 1..5, im2col 3..5
  int64_t offset_bytes = 0;             // the tensor starts this far after the operand address
  std::array<uint64_t, 5> dims{};       // innermost first, in elements
  std::array<uint64_t, 4> strides{};    // bytes between consecutive indices of dims 1..rank-1
  std::array<uint32_t, 5> box{};        // tiled: the box; im2col: unused
  std::array<uint32_t, 5> element_strides{1, 1, 1, 1, 1};  // im2col: the spatial traversal strides
  // im2col: the bounding box of the window origins over the spatial dims (dims 1..rank-2,
  // W first): origins run from lower to dim - 1 + upper; and the box every copy moves.
  std::array<int32_t, 3> lower{}, upper{};
  uint32_t channels_per_pixel = 0, pixels_per_column = 0;

  bool operator==(const TensorMapSpec&) const = default;
};

inline constexpr int kTensorMapBytes = 128;  // sizeof(CUtensorMap); 64-byte aligned in memory
using TensorMapBytes = std::array<uint8_t, kTensorMapBytes>;

// Why the driver would refuse `spec` (ranks, boxes, strides and address alignment, the
// 128-byte swizzle's box width, corner ranges), or nothing. Needs no GPU.
std::optional<std::string> check_tensor_map(const TensorMapSpec& spec);

// The by-value kernel parameter of up to four descriptors (TensorMaps in the kernel templates):
// A, B, and C's bulk stores and the residual's bulk loads where a kernel has them.
inline constexpr int kMaxTensorMaps = 4;
// A contraction kernel's parameter words (KernelParams): A, B, C, workspace, 4 epilogue operands.
inline constexpr int kMaxTensorMapOperand = 7;
struct alignas(64) TensorMapParam {
  std::array<TensorMapBytes, kMaxTensorMaps> maps{};
};

// Each spec of `specs` (at most kMaxTensorMaps) encoded over words[spec.operand], of the kernel's
// n_words parameter words: its TensorMaps parameter.
TensorMapParam encode_tensor_maps(const std::vector<TensorMapSpec>& specs, const uint64_t* words,
                                  size_t n_words);

// The descriptor of `spec` over the tensor at device address `operand_address` (+ the spec's
// offset). DriverError where the driver refuses it; UserError without a GPU.
TensorMapBytes encode_tensor_map(const TensorMapSpec& spec, uint64_t operand_address);

}  // namespace tessel::device
