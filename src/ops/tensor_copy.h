// Dtype-agnostic data-movement kernels shared by the tensor ops. They move whole elements as
// bytes, so one implementation serves every dtype, and they are written to be fast on the
// common cases (contiguous runs become memcpy) because whole networks run through them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace tessel::ops {

// out = transpose(in viewed with shape `in_shape`, perm): output dimension i is input
// dimension perm[i]. `in_shape` may differ from in.shape() (DepthToSpace transposes a 6-D
// view of a 4-D tensor) but must have the same element count; `out` must have that count too
// and in's dtype; its own shape is not used.
void transpose_bytes(const Tensor& in, const Shape& in_shape, std::span<const int64_t> perm,
                     Tensor& out);

// out[o_0, ..., o_{r-1}] = in[maps[0][o_0], ..., maps[r-1][o_{r-1}]], or the element `fill`
// (dtype_size(in.dtype()) bytes) where any maps[d][o_d] is negative. maps[d] has out.dim(d)
// entries, each in [-1, in.dim(d)). Slice, Pad and nearest-neighbour Resize are this copy with
// different index maps.
void gather_axes(const Tensor& in, const std::vector<std::vector<int64_t>>& maps,
                 const std::byte* fill, Tensor& out);

}  // namespace tessel::ops
