#include "ops/conv_geometry.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::ops {
namespace {

AutoPad read_auto_pad(const ir::Node& node) {
  std::string s = node.get_string("auto_pad", "NOTSET");
  if (s == "NOTSET") return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  TESSEL_USER_ERROR() << node.label() << ": auto_pad is '" << s
                      << "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID";
}

// An ints attribute with one entry per spatial dim (two for pads), or `def` when absent.
std::vector<int64_t> read_spatial_ints(const ir::Node& node, const char* key, size_t count,
                                       int64_t def, int64_t min_value) {
  if (!node.has_attr(key)) return std::vector<int64_t>(count, def);
  std::vector<int64_t> v = node.get_ints(key);
  TESSEL_USER_CHECK(v.size() == count)
      << node.label() << ": attribute '" << key << "' has " << v.size() << " values, expected "
      << count << " for the input's spatial rank";
  for (int64_t x : v)
    TESSEL_USER_CHECK(x >= min_value)
        << node.label() << ": attribute '" << key << "' value " << x << " must be >= " << min_value;
  return v;
}

// The kernel_shape attribute, when present, must agree with the weight's spatial dims.
void check_kernel_shape_attr(const ir::Node& node, const Shape& kernel, const char* w_name) {
  if (!node.has_attr("kernel_shape")) return;
  std::vector<int64_t> ks = node.get_ints("kernel_shape");
  TESSEL_USER_CHECK(ks == kernel) << node.label() << ": kernel_shape " << shape_str(ks)
                                  << " does not match the spatial dims " << shape_str(kernel)
                                  << " of " << w_name;
}

void check_conv_shapes(const ir::Node& node, const Shape& x, const Shape& w, const char* x_name,
                       const char* w_name) {
  TESSEL_USER_CHECK(x.size() >= 3) << node.label() << ": input " << x_name << " has shape "
                                   << shape_str(x) << ", expected rank >= 3 (N, C, spatial...)";
  TESSEL_USER_CHECK(w.size() == x.size())
      << node.label() << ": weight " << w_name << " has shape " << shape_str(w)
      << ", expected rank " << x.size() << " like " << x_name << " " << shape_str(x);
  for (size_t d = 2; d < w.size(); ++d)
    TESSEL_USER_CHECK(w[d] >= 1) << node.label() << ": weight " << w_name << " has shape "
                                 << shape_str(w) << ", expected kernel dims >= 1";
}

int64_t read_group(const ir::Node& node) {
  int64_t group = node.get_int("group", 1);
  TESSEL_USER_CHECK(group >= 1) << node.label() << ": group " << group << " must be >= 1";
  return group;
}

}  // namespace

WindowAttrs read_window_attrs(const ir::Node& node, size_t spatial_rank) {
  WindowAttrs a;
  a.auto_pad = read_auto_pad(node);
  a.strides = read_spatial_ints(node, "strides", spatial_rank, 1, 1);
  a.dilations = read_spatial_ints(node, "dilations", spatial_rank, 1, 1);
  a.pads = read_spatial_ints(node, "pads", 2 * spatial_rank, 0, 0);
  return a;
}

WindowPlan plan_forward_window(const ir::Node& node, const WindowAttrs& attrs, const Shape& in,
                               const Shape& kernel, bool ceil_mode) {
  const size_t rank = in.size();
  WindowPlan p;
  p.out.resize(rank);
  p.pad_begin.assign(rank, 0);
  p.pad_end.assign(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t s = attrs.strides[d];
    const int64_t dk = (kernel[d] - 1) * attrs.dilations[d] + 1;
    switch (attrs.auto_pad) {
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        // Explicit pads are ignored here, as onnxruntime does: auto_pad decides them.
        p.out[d] = ceil_div(in[d], s);
        int64_t total = std::max<int64_t>(0, (p.out[d] - 1) * s + dk - in[d]);
        int64_t small = total / 2;
        p.pad_begin[d] = attrs.auto_pad == AutoPad::kSameUpper ? small : total - small;
        p.pad_end[d] = total - p.pad_begin[d];
        break;
      }
      case AutoPad::kValid:
      case AutoPad::kNotSet: {
        if (attrs.auto_pad == AutoPad::kNotSet) {
          p.pad_begin[d] = attrs.pads[d];
          p.pad_end[d] = attrs.pads[rank + d];
        }
        const int64_t span = in[d] + p.pad_begin[d] + p.pad_end[d] - dk;
        TESSEL_USER_CHECK(span >= 0)
            << node.label() << ": window of extent " << dk << " (kernel " << kernel[d]
            << ", dilation " << attrs.dilations[d] << ") is larger than spatial dim " << d
            << " of the input (" << in[d] << ") plus its pads (" << p.pad_begin[d] << ", "
            << p.pad_end[d] << ")";
        const bool round_up = ceil_mode && attrs.auto_pad == AutoPad::kNotSet;
        p.out[d] = (round_up ? ceil_div(span, s) : span / s) + 1;
        break;
      }
    }
  }
  return p;
}

Shape ConvGeometry::out_shape() const {
  Shape s{batch, out_channels};
  s.insert(s.end(), out_spatial.begin(), out_spatial.end());
  return s;
}

void plan_window_into(const ir::Node& node, ConvGeometry& g, bool ceil_mode) {
  WindowAttrs attrs = read_window_attrs(node, g.in_spatial.size());
  WindowPlan plan = plan_forward_window(node, attrs, g.in_spatial, g.kernel, ceil_mode);
  g.out_spatial = plan.out;
  g.strides = attrs.strides;
  g.dilations = attrs.dilations;
  g.pad_begin = plan.pad_begin;
  g.pad_end = plan.pad_end;
}

ConvGeometry plan_conv(const ir::Node& node, const Shape& x, const Shape& w, const char* x_name,
                       const char* w_name) {
  check_conv_shapes(node, x, w, x_name, w_name);
  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  g.group = read_group(node);
  TESSEL_USER_CHECK(g.in_channels % g.group == 0)
      << node.label() << ": " << x_name << " has " << g.in_channels
      << " channels, not divisible by group " << g.group;
  TESSEL_USER_CHECK(w[1] * g.group == g.in_channels)
      << node.label() << ": weight " << w_name << " " << shape_str(w) << " has " << w[1]
      << " input channels per group, expected " << g.in_channels << " / group " << g.group << " = "
      << g.in_channels / g.group;
  TESSEL_USER_CHECK(g.out_channels % g.group == 0)
      << node.label() << ": weight " << w_name << " has " << g.out_channels
      << " output channels, not divisible by group " << g.group;
  g.in_spatial.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  check_kernel_shape_attr(node, g.kernel, w_name);
  plan_window_into(node, g, false);
  return g;
}

ConvGeometry plan_conv_transpose(const ir::Node& node, const Shape& x, const Shape& w) {
  check_conv_shapes(node, x, w, "X", "W");
  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.group = read_group(node);
  TESSEL_USER_CHECK(w[0] == g.in_channels)
      << node.label() << ": weight W " << shape_str(w) << " has " << w[0]
      << " input channels, expected " << g.in_channels << " like X " << shape_str(x);
  TESSEL_USER_CHECK(g.in_channels % g.group == 0)
      << node.label() << ": X has " << g.in_channels << " channels, not divisible by group "
      << g.group;
  g.out_channels = w[1] * g.group;
  g.in_spatial.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  check_kernel_shape_attr(node, g.kernel, "W");
  const size_t rank = g.spatial_rank();
  WindowAttrs attrs = read_window_attrs(node, rank);
  g.strides = attrs.strides;
  g.dilations = attrs.dilations;
  std::vector<int64_t> output_padding = read_spatial_ints(node, "output_padding", rank, 0, 0);

  // The extent with no padding at all; pads and output_shape trim it.
  Shape full(rank);
  for (size_t d = 0; d < rank; ++d)
    full[d] = g.strides[d] * (g.in_spatial[d] - 1) + output_padding[d] +
              (g.kernel[d] - 1) * g.dilations[d] + 1;

  Shape target;  // the output extents, when fixed by output_shape or SAME auto-padding
  if (node.has_attr("output_shape")) {
    target = node.get_ints("output_shape");
    TESSEL_USER_CHECK(target.size() == rank)
        << node.label() << ": output_shape " << shape_str(target) << " has " << target.size()
        << " values, expected " << rank << " (the spatial dims)";
  } else if (attrs.auto_pad == AutoPad::kSameUpper || attrs.auto_pad == AutoPad::kSameLower) {
    target.resize(rank);
    for (size_t d = 0; d < rank; ++d) target[d] = g.in_spatial[d] * g.strides[d];
  }
  g.pad_begin.assign(rank, 0);
  g.pad_end.assign(rank, 0);
  g.out_spatial.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (!target.empty()) {
      int64_t total = std::max<int64_t>(0, full[d] - target[d]);
      int64_t small = total / 2;
      g.pad_begin[d] = attrs.auto_pad == AutoPad::kSameUpper ? small : total - small;
      g.pad_end[d] = total - g.pad_begin[d];
      g.out_spatial[d] = target[d];
    } else {
      if (attrs.auto_pad == AutoPad::kNotSet) {
        g.pad_begin[d] = attrs.pads[d];
        g.pad_end[d] = attrs.pads[rank + d];
      }
      g.out_spatial[d] = full[d] - g.pad_begin[d] - g.pad_end[d];
    }
    TESSEL_USER_CHECK(g.out_spatial[d] >= 1)
        << node.label() << ": output spatial dim " << d << " would be " << g.out_spatial[d]
        << " (input " << g.in_spatial[d] << ", pads " << g.pad_begin[d] << "+" << g.pad_end[d]
        << "), expected >= 1";
  }
  return g;
}

}  // namespace tessel::ops
