// Reference convolution kernels in any spatial rank, over the geometry of conv_geometry.h.
// Both are the blocked gemm of nn_gemm.h around a bounded column buffer (im2col for Conv,
// col2im for ConvTranspose) that holds whole rows of the last spatial dim and at most a few
// MiB, so memory stays flat however large the image. Pointwise convolutions (1x1 kernel,
// stride 1, no pads) skip the buffer and multiply the input directly.
#pragma once

#include "ops/conv_geometry.h"

namespace tessel::ops {

// y (N, M, out...) = conv(x (N, C, in...), w (M, C/group, kernel...)), no bias; y is
// overwritten. Instantiated for float, double and int64_t.
template <typename T>
void conv_forward(const ConvGeometry& g, const T* x, const T* w, T* y);

// y (N, M, out...) = conv_transpose(x (N, C, in...), w (C, M/group, kernel...)), no bias;
// y is overwritten. Instantiated for float and double.
template <typename T>
void conv_transpose_forward(const ConvGeometry& g, const T* x, const T* w, T* y);

}  // namespace tessel::ops
