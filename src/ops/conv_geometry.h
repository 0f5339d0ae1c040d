// Sliding-window geometry of Conv, ConvTranspose, the pools and the quantized convolutions:
// reading and validating strides / dilations / pads / auto_pad, and the output extents and
// effective pads they imply, with ONNX's formulas in one place.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"
#include "ir/graph.h"

namespace tessel::ops {

// Integer division rounding toward -inf / +inf (b > 0), for window bounds that may be negative.
inline int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// The window attributes of a node, each with one entry per spatial dim (pads: ONNX order,
// all begins then all ends). Absent attributes take ONNX's defaults (strides and dilations 1,
// pads 0). Wrong lengths or non-positive strides/dilations are UserErrors naming the node.
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;
};
WindowAttrs read_window_attrs(const ir::Node& node, size_t spatial_rank);

// Per spatial dim: the output extent and the pads actually applied before and after.
struct WindowPlan {
  Shape out;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
};
// Plans a forward window (Conv and the pools) over `in` with `kernel`:
//  - NOTSET: out = floor((in + pads - dk) / s) + 1, dk = (k - 1) * d + 1; with ceil_mode the
//    division rounds up. The last window may then start past the end pad: opsets up to 21 keep
//    it, as ONNX's shape inference and onnxruntime do, and so does this plan; opset 22 drops
//    such a window (PyTorch's rule), which the pools apply on top (pool_ops.cc).
//  - VALID: no pads, out = floor((in - dk) / s) + 1 (ceil_mode gives the same extent).
//  - SAME_UPPER / SAME_LOWER: out = ceil(in / s); the total pad max(0, (out-1)*s + dk - in)
//    is split evenly, the odd element going at the end (UPPER) or at the beginning (LOWER).
// A window larger than the padded input is a UserError naming the node.
WindowPlan plan_forward_window(const ir::Node& node, const WindowAttrs& attrs, const Shape& in,
                               const Shape& kernel, bool ceil_mode);

// Geometry of a convolution: for Conv, input x (N, C, in...), weight (M, C/group, kernel...),
// output (N, M, out...); for ConvTranspose the weight is (C, M/group, kernel...). Either way the
// kernel offset `kpos` links a position g of the "grid" (Conv: output, ConvTranspose: input)
// to a position of the "image" (Conv: input, ConvTranspose: output) per spatial dim d:
//   image_d = g_d * strides[d] - pad_begin[d] + kpos_d * dilations[d].
struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;   // C
  int64_t out_channels = 0;  // M
  int64_t group = 1;
  Shape in_spatial;
  Shape kernel;
  Shape out_spatial;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;

  size_t spatial_rank() const { return kernel.size(); }
  Shape out_shape() const;  // (N, M, out...)
};

// Fills g's output extents, strides, dilations and pads from node's window attributes
// (strides, dilations, pads, auto_pad), given g.in_spatial and g.kernel: the forward window
// shared by Conv and the pools.
void plan_window_into(const ir::Node& node, ConvGeometry& g, bool ceil_mode);

// Validates and resolves Conv's (and ConvInteger's, QLinearConv's) attributes against the
// shapes of x and w: ranks, C == w[1] * group, M divisible by group, kernel_shape matching w.
// `x_name` / `w_name` are the ONNX input names used in error messages.
ConvGeometry plan_conv(const ir::Node& node, const Shape& x, const Shape& w,
                       const char* x_name = "X", const char* w_name = "W");
// Same for ConvTranspose, including output_padding and output_shape (which, when given,
// fixes the output and determines the pads: total = s*(in-1) + output_padding + dk - out,
// clamped at 0 as onnxruntime does, split with the odd element at the end for SAME_UPPER and
// at the beginning otherwise, per the ONNX spec).
ConvGeometry plan_conv_transpose(const ir::Node& node, const Shape& x, const Shape& w);

}  // namespace tessel::ops
