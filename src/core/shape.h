// Static tensor shapes: a list of non-negative extents, row-major (C order) strides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

using Shape = std::vector<int64_t>;

// Largest element count tessel accepts for one tensor (2^40): keeps byte counts and flat
// indices far from int64 overflow. A model asking for more is a user error.
constexpr int64_t kMaxElements = int64_t{1} << 40;

// Product of extents. Throws UserError naming `what` if an extent is negative or the
// product exceeds kMaxElements.
int64_t numel(const Shape& s, const std::string& what = "tensor");
// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// "[1,3,224,224]"
std::string shape_str(const Shape& s);
// Normalises a possibly negative axis against `rank`; throws UserError naming `what`.
int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what);
// numpy-style broadcast of two shapes; throws UserError naming `what` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);

}  // namespace tessel
