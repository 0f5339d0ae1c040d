// How a Resize (or Upsample) samples its input: the coordinate mapping of the CPU reference
// kernel (resize_ops.cc), exposed so that the GPU emitter (kernels/cuda/op_resize.cc) samples
// exactly the same input elements with the same weights instead of re-deriving the ONNX
// coordinate transforms and rounding modes in a second place.
//
// Sampling is separable: output coordinate o of dimension d reads taps[d][o], and an output
// element reads the product of its coordinates' taps (weights multiply). 'nearest' has one tap
// of weight 1 per coordinate; 'linear' one or two with weights summing to 1 (a whole source
// coordinate reads one pixel, so an unresized dimension is exactly {o, 1.0} everywhere);
// 'cubic' up to four, some negative; with antialias, linear and cubic read as many as the
// filter, widened by 1 / scale to downsample, covers. No tap at all marks an element that
// tf_crop_and_resize extrapolates (it is `extrapolation`). Tap indices are already clamped to
// the input (so two taps may read the same index), and no tap has weight 0.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tessel::ops {

struct ResizeTap {
  int64_t index;
  double weight;
};

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizeSampling {
  ResizeMode mode = ResizeMode::kNearest;
  double extrapolation = 0.0;
  Shape out;
  std::vector<std::vector<std::vector<ResizeTap>>> taps;  // [dimension][output coordinate]
};

// The sampling of Resize / Upsample `node` on an input of shape `in`. `operands[i]` is the
// value of the node's input i where known (roi, scales, sizes: constants after import), nullptr
// where the input is absent; operands[0] (X) is not read. A UserError naming the node for
// anything the reference kernel rejects (unsupported mode, malformed scales / sizes / roi).
ResizeSampling resize_sampling(const ir::Node& node, int64_t opset, const Shape& in,
                               const std::vector<const Tensor*>& operands);

}  // namespace tessel::ops
