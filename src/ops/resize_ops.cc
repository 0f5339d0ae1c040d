// Resize (opsets 11-18) and its predecessors Upsample and Resize-10, modes 'nearest', 'linear'
// and 'cubic' (with opset 18's antialias), following ONNX's reference implementation
// (onnx/reference/ops/op_resize.py).
//
// Every output coordinate x maps to a source coordinate x_original along each axis (the
// coordinate_transformation_mode). 'nearest' rounds it to one input index: the whole op is then
// a per-axis gather of whole elements (gather_axes), exact for every dtype. 'linear' and 'cubic'
// weigh the neighbouring indices (2 and 4 of them; more when antialias widens the filter to
// downsample); the interpolation is separable, so it runs as one 1-D pass per resized axis, in
// double, and rounds to the output dtype once at the end.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/resize.h"
#include "ops/tensor_copy.h"
#include "ops/tensor_families.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

enum class CoordMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,  // opsets 11-12 only
  kTfCropAndResize,
};
// kLegacy is Upsample's and Resize-10's rounding: down when upsampling, up when downsampling,
// as onnxruntime does and as ONNX's opset-10 test test_resize_downsample_nearest expects
// ([[1,2,3,4],[5,6,7,8]] scaled by 0.6 gives [[1,3]]).
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };

struct ResizePlan {
  ResizeMode mode = ResizeMode::kNearest;
  double cubic_a = -0.75;        // cubic_coeff_a
  bool exclude_outside = false;  // taps outside the input get weight 0, the rest renormalised
  bool antialias = false;        // linear and cubic filters widen by 1 / scale to downsample
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double extrapolation = 0.0;
  std::vector<int64_t> axes;   // the axes that scales, sizes and roi refer to
  std::vector<double> scales;  // per dimension: the scale of the coordinate transform
  Shape out;
};

// Resize's inputs besides X; nullptr where omitted. roi does not affect the output shape, so
// infer() leaves it out.
struct ResizeOperands {
  const Tensor* roi = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
};

template <typename E>
E parse_enum(const ir::Node& node, const char* attr, const char* def,
             std::initializer_list<std::pair<const char*, E>> names) {
  const std::string v = node.get_string(attr, def);
  std::string known;
  for (const auto& [name, e] : names) {
    if (v == name) return e;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  TESSEL_USER_ERROR() << node.label() << ": " << attr << " '" << v << "' is not supported ("
                      << known << ")";
}

// Upsample and Resize-10 know nearest and linear; Resize-11 added cubic.
ResizeMode parse_mode(const ir::Node& node, bool legacy) {
  const std::string mode = node.get_string("mode", "nearest");
  if (mode == "nearest") return ResizeMode::kNearest;
  if (mode == "linear") return ResizeMode::kLinear;
  TESSEL_USER_CHECK(mode == "cubic" && !legacy)
      << node.label() << ": mode '" << mode << "' is not supported ("
      << (legacy ? "nearest, linear" : "nearest, linear, cubic") << ")";
  return ResizeMode::kCubic;
}

// out = floor(in * scale) along each axis, as the ONNX reference computes it (in double).
void apply_scales(const ir::Node& node, const Shape& in, const std::vector<double>& scales,
                  ResizePlan& plan) {
  TESSEL_USER_CHECK(scales.size() == plan.axes.size())
      << node.label() << ": 'scales' has " << scales.size() << " values, expected "
      << plan.axes.size();
  for (size_t i = 0; i < scales.size(); ++i) {
    const size_t d = static_cast<size_t>(plan.axes[i]);
    const double extent = static_cast<double>(in[d]) * scales[i];
    TESSEL_USER_CHECK(std::isfinite(scales[i]) && scales[i] > 0 &&
                      extent < static_cast<double>(kMaxElements))
        << node.label() << ": scale " << scales[i] << " of axis " << d << " is not valid";
    plan.scales[d] = scales[i];
    plan.out[d] = static_cast<int64_t>(std::floor(extent));
  }
}

// Upsample (opsets 7-9) and Resize-10: scales only, asymmetric coordinates.
ResizePlan legacy_plan(const ir::Node& node, const Shape& in, const Tensor* scales) {
  ResizePlan plan;
  plan.mode = parse_mode(node, /*legacy=*/true);
  plan.coord = CoordMode::kAsymmetric;
  plan.nearest = NearestMode::kLegacy;
  plan.scales.assign(in.size(), 1.0);
  plan.out = in;
  for (size_t d = 0; d < in.size(); ++d) plan.axes.push_back(static_cast<int64_t>(d));
  TESSEL_USER_CHECK(scales || node.has_attr("scales"))
      << node.label() << ": needs 'scales' (an input since opset 9, an attribute before)";
  apply_scales(node, in,
               scales ? read_float_list(node, *scales, "scales") : node.get_floats("scales"), plan);
  return plan;
}

ResizePlan resize_plan(const ir::Node& node, const Shape& in, const ResizeOperands& ops) {
  const int64_t rank = static_cast<int64_t>(in.size());
  ResizePlan plan;
  plan.mode = parse_mode(node, /*legacy=*/false);
  plan.cubic_a = node.get_float("cubic_coeff_a", -0.75);
  plan.exclude_outside = node.get_int("exclude_outside", 0) != 0;
  // Opset 18's antialias, which ONNX's reference refuses in nearest mode.
  plan.antialias = node.get_int("antialias", 0) != 0;
  TESSEL_USER_CHECK(!plan.antialias || plan.mode != ResizeMode::kNearest)
      << node.label() << ": antialias applies to linear and cubic modes, not nearest";
  plan.coord = parse_enum<CoordMode>(node, "coordinate_transformation_mode", "half_pixel",
                                     {{"half_pixel", CoordMode::kHalfPixel},
                                      {"half_pixel_symmetric", CoordMode::kHalfPixelSymmetric},
                                      {"pytorch_half_pixel", CoordMode::kPytorchHalfPixel},
                                      {"align_corners", CoordMode::kAlignCorners},
                                      {"asymmetric", CoordMode::kAsymmetric},
                                      {"tf_half_pixel_for_nn", CoordMode::kTfHalfPixelForNn},
                                      {"tf_crop_and_resize", CoordMode::kTfCropAndResize}});
  plan.nearest = parse_enum<NearestMode>(node, "nearest_mode", "round_prefer_floor",
                                         {{"round_prefer_floor", NearestMode::kRoundPreferFloor},
                                          {"round_prefer_ceil", NearestMode::kRoundPreferCeil},
                                          {"floor", NearestMode::kFloor},
                                          {"ceil", NearestMode::kCeil}});
  plan.extrapolation = node.get_float("extrapolation_value", 0.0);
  for (int64_t d = 0; d < rank; ++d) plan.axes.push_back(d);
  if (node.has_attr("axes")) plan.axes = normalize_axes(node, node.get_ints("axes"), rank, "axis");
  plan.scales.assign(in.size(), 1.0);
  plan.out = in;

  // Opset 11 passes an empty 'scales' tensor when 'sizes' is used; later opsets omit it.
  const bool has_scales = ops.scales && ops.scales->numel() > 0;
  const bool has_sizes = ops.sizes && ops.sizes->numel() > 0;
  TESSEL_USER_CHECK(has_scales != has_sizes)
      << node.label() << ": exactly one of 'scales' and 'sizes' must be given";
  if (has_scales) {
    apply_scales(node, in, read_float_list(node, *ops.scales, "scales"), plan);
    return plan;
  }
  const std::vector<int64_t> sizes = read_int_list(node, *ops.sizes, "sizes");
  TESSEL_USER_CHECK(sizes.size() == plan.axes.size())
      << node.label() << ": 'sizes' has " << sizes.size() << " values, expected "
      << plan.axes.size();
  std::vector<double> ratios;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t extent = in[static_cast<size_t>(plan.axes[i])];
    TESSEL_USER_CHECK(sizes[i] > 0 && extent > 0)
        << node.label() << ": cannot resize axis " << plan.axes[i] << " of extent " << extent
        << " to " << sizes[i];
    ratios.push_back(static_cast<double>(sizes[i]) / static_cast<double>(extent));
  }
  const std::string policy = node.get_string("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") {
    for (size_t i = 0; i < sizes.size(); ++i) {
      plan.scales[static_cast<size_t>(plan.axes[i])] = ratios[i];
      plan.out[static_cast<size_t>(plan.axes[i])] = sizes[i];
    }
    return plan;
  }
  TESSEL_USER_CHECK(policy == "not_larger" || policy == "not_smaller")
      << node.label() << ": keep_aspect_ratio_policy '" << policy
      << "' is not supported (stretch, not_larger, not_smaller)";
  // One scale for all the axes, and extents rounded half up.
  const double scale = policy == "not_larger" ? *std::min_element(ratios.begin(), ratios.end())
                                              : *std::max_element(ratios.begin(), ratios.end());
  for (int64_t a : plan.axes) {
    const size_t d = static_cast<size_t>(a);
    plan.scales[d] = scale;
    plan.out[d] = static_cast<int64_t>(std::floor(scale * static_cast<double>(in[d]) + 0.5));
  }
  return plan;
}

ResizePlan plan_for(const ir::Node& node, int64_t opset, const Shape& in,
                    const ResizeOperands& ops) {
  if (node.op == "Upsample" || opset < 11) return legacy_plan(node, in, ops.scales);
  return resize_plan(node, in, ops);
}

// The source coordinate of output coordinate x along one axis. Like the ONNX reference, the
// transforms use the resized length scale * in (which is the output extent whenever 'sizes'
// was given or in * scale is whole).
double source_coord(const ResizePlan& plan, double x, double scale, int64_t in, int64_t out,
                    double roi_start, double roi_end) {
  const double in_len = static_cast<double>(in);
  const double out_len = scale * in_len;
  switch (plan.coord) {
    case CoordMode::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixelSymmetric: {
      // Centres the sampled region when the output extent was rounded down.
      const double adjustment = static_cast<double>(out) / out_len;
      return in_len / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case CoordMode::kPytorchHalfPixel:
      return out_len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case CoordMode::kAlignCorners:
      return out_len == 1 ? 0.0 : x * (in_len - 1) / (out_len - 1);
    case CoordMode::kAsymmetric:
      return x / scale;
    case CoordMode::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case CoordMode::kTfCropAndResize:
      if (out_len == 1) return (roi_end - roi_start) * (in_len - 1) / 2 + roi_start * (in_len - 1);
      return roi_start * (in_len - 1) + x * (roi_end - roi_start) * (in_len - 1) / (out_len - 1);
  }
  return 0.0;
}

int64_t round_nearest(double x, NearestMode mode, double scale) {
  const double f = std::floor(x);
  if (x == f) return static_cast<int64_t>(f);
  const double frac = x - f;
  switch (mode) {
    case NearestMode::kRoundPreferFloor:
      return static_cast<int64_t>(frac <= 0.5 ? f : f + 1);
    case NearestMode::kRoundPreferCeil:
      return static_cast<int64_t>(frac < 0.5 ? f : f + 1);
    case NearestMode::kFloor:
      return static_cast<int64_t>(f);
    case NearestMode::kCeil:
      return static_cast<int64_t>(f + 1);
    case NearestMode::kLegacy:
      return static_cast<int64_t>(scale < 1 ? f + 1 : f);
  }
  return 0;
}

using Tap = ResizeTap;

// Cubic convolution (Keys) of parameter a at distance |x| from the sample.
double cubic_weight(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// The interpolating taps around source coordinate x = base + ratio, ratio in (0, 1] (a whole x
// is base + 1: the reference prefers the pixel on the left). Without antialias: base, base + 1
// for linear; base - 1 .. base + 2 for cubic. With it, the filter stretches by 1 / scale to
// downsample, over as many taps as it covers, and its weights are normalised to sum to 1.
// Indices are not yet clamped to the input.
std::vector<Tap> filter_taps(const ResizePlan& plan, double x, double scale) {
  const double f = std::floor(x);
  const double ratio = x == f ? 1.0 : x - f;
  const int64_t base = static_cast<int64_t>(f) - (x == f ? 1 : 0);
  const bool cubic = plan.mode == ResizeMode::kCubic;
  std::vector<Tap> taps;
  if (!plan.antialias) {
    if (!cubic) return {{base, 1.0 - ratio}, {base + 1, ratio}};
    for (int64_t k = -1; k <= 2; ++k)
      taps.push_back({base + k, cubic_weight(static_cast<double>(k) - ratio, plan.cubic_a)});
    return taps;
  }
  const double s = std::min(scale, 1.0);
  const double support = cubic ? 2.0 : 1.0;  // half-width of the filter, in output pixels
  const int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
  double total = 0;
  for (int64_t k = start; k < 2 - start; ++k) {
    const double d = s * (static_cast<double>(k) - ratio);
    const double w = cubic ? cubic_weight(d, plan.cubic_a) : std::clamp(1 - std::fabs(d), 0.0, 1.0);
    taps.push_back({base + k, w});
    total += w;
  }
  for (Tap& t : taps) t.weight /= total;
  return taps;
}

// The input taps of every output coordinate along dimension d: one for nearest, several for
// linear and cubic, none where tf_crop_and_resize extrapolates. Taps of weight 0 are left out
// (a whole coordinate reads one pixel, so an unresized axis is recognised); the others read
// indices clamped to the input's edge, or with exclude_outside, those outside are dropped and
// the rest renormalised.
std::vector<std::vector<Tap>> axis_taps(const ResizePlan& plan, size_t d, int64_t in,
                                        const std::vector<double>& roi) {
  const int64_t out = plan.out[d];
  const size_t n_dims = plan.out.size();
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  // An axis neither resized nor cropped reads its input as it is. Every transform but
  // tf_half_pixel_for_nn maps it so anyway; that one would shift it by half a pixel (batch and
  // channels by one whole index under round_prefer_ceil), which onnxruntime does not do.
  if (out == in && plan.scales[d] == 1.0 && plan.coord != CoordMode::kTfCropAndResize) {
    for (int64_t o = 0; o < out; ++o) taps[static_cast<size_t>(o)].push_back({o, 1.0});
    return taps;
  }
  for (int64_t o = 0; o < out; ++o) {
    // Clamped to [-1, in]: anything further out reads the same edge, and int64 stays safe.
    const double x =
        std::clamp(source_coord(plan, static_cast<double>(o), plan.scales[d], in, out,
                                roi.empty() ? 0.0 : roi[d], roi.empty() ? 1.0 : roi[n_dims + d]),
                   -1.0, static_cast<double>(in));
    std::vector<Tap>& t = taps[static_cast<size_t>(o)];
    if (plan.coord == CoordMode::kTfCropAndResize && (x < 0 || x > static_cast<double>(in - 1)))
      continue;
    if (plan.mode == ResizeMode::kNearest) {
      t.push_back(
          {std::clamp<int64_t>(round_nearest(x, plan.nearest, plan.scales[d]), 0, in - 1), 1.0});
      continue;
    }
    std::vector<Tap> filter = filter_taps(plan, x, plan.scales[d]);
    if (plan.exclude_outside) {
      double kept = 0;
      for (const Tap& tap : filter)
        if (tap.index >= 0 && tap.index < in) kept += tap.weight;
      for (Tap& tap : filter) tap.weight = tap.index >= 0 && tap.index < in ? tap.weight / kept : 0;
    }
    for (const Tap& tap : filter)
      if (tap.weight != 0) t.push_back({std::clamp<int64_t>(tap.index, 0, in - 1), tap.weight});
  }
  return taps;
}

// tf_crop_and_resize's region per dimension as [starts..., ends...] over all dimensions.
std::vector<double> roi_per_dim(const ir::Node& node, const ResizePlan& plan, const Tensor* roi_t) {
  if (plan.coord != CoordMode::kTfCropAndResize) return {};
  TESSEL_USER_CHECK(roi_t && roi_t->numel() > 0)
      << node.label() << ": coordinate_transformation_mode 'tf_crop_and_resize' needs 'roi'";
  const std::vector<double> roi = read_float_list(node, *roi_t, "roi");
  TESSEL_USER_CHECK(std::all_of(roi.begin(), roi.end(), [](double v) { return std::isfinite(v); }))
      << node.label() << ": 'roi' has a value that is not finite";
  const size_t n = plan.axes.size(), rank = plan.out.size();
  TESSEL_USER_CHECK(roi.size() == 2 * n)
      << node.label() << ": 'roi' has " << roi.size() << " values, expected " << 2 * n;
  std::vector<double> r(2 * rank);
  for (size_t d = 0; d < rank; ++d) r[rank + d] = 1.0;
  for (size_t i = 0; i < n; ++i) {
    r[static_cast<size_t>(plan.axes[i])] = roi[i];
    r[rank + static_cast<size_t>(plan.axes[i])] = roi[n + i];
  }
  return r;
}

void resize_nearest(const Tensor& x, const ResizePlan& plan, const std::vector<double>& roi,
                    Tensor& out) {
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < plan.out.size(); ++d) {
    std::vector<int64_t>& m = maps.emplace_back();
    for (const std::vector<Tap>& t : axis_taps(plan, d, x.dim(static_cast<int64_t>(d)), roi))
      m.push_back(t.empty() ? -1 : t[0].index);
  }
  Tensor fill(x.dtype(), {});
  fill.set_f64(0, plan.extrapolation);
  gather_axes(x, maps, fill.raw(), out);
}

// One 1-D interpolation pass per resized dimension over a double copy of the input. Extrapolated
// coordinates are set to the extrapolation value in the pass of their dimension; later passes
// only mix elements that share that coordinate, so they stay at that value.
Tensor resize_interpolating(const Tensor& x, const ResizePlan& plan,
                            const std::vector<double>& roi) {
  Tensor cur = x.cast(DType::kF64);
  for (size_t d = 0; d < plan.out.size(); ++d) {
    const int64_t in = cur.dim(static_cast<int64_t>(d)), out = plan.out[d];
    const std::vector<std::vector<Tap>> taps = axis_taps(plan, d, in, roi);
    bool identity = in == out;
    for (int64_t o = 0; identity && o < out; ++o) {
      const std::vector<Tap>& t = taps[static_cast<size_t>(o)];
      identity = t.size() == 1 && t[0].index == o && t[0].weight == 1.0;
    }
    if (identity) continue;
    Shape shape = cur.shape();
    shape[d] = out;
    Tensor next(DType::kF64, shape);
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= shape[k];
    for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
    const double* src = cur.data<double>();
    double* dst = next.data<double>();
    for (int64_t b = 0; b < outer; ++b) {
      for (int64_t o = 0; o < out; ++o) {
        double* row = dst + (b * out + o) * inner;
        const std::vector<Tap>& t = taps[static_cast<size_t>(o)];
        if (t.empty()) std::fill(row, row + inner, plan.extrapolation);
        for (const Tap& tap : t) {
          const double* s = src + (b * in + tap.index) * inner;
          for (int64_t k = 0; k < inner; ++k) row[k] += tap.weight * s[k];
        }
      }
    }
    cur = next;
  }
  return cur.cast(x.dtype());
}

void infer_resize(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 0, kNumericTypes);
  ResizeOperands ops;
  if (node.op == "Upsample" || ctx.opset() < 11) {
    if (ctx.has_input(1)) ops.scales = &ctx.require_value(1, "scales");
  } else {
    if (ctx.has_input(2)) ops.scales = &ctx.require_value(2, "scales");
    if (ctx.has_input(3)) ops.sizes = &ctx.require_value(3, "sizes");
  }
  ctx.set_output(0, ctx.dtype(0), plan_for(node, ctx.opset(), ctx.shape(0), ops).out);
}

// Resize-10's inputs are (X, scales); from opset 11 on they are (X, roi, scales[, sizes]).
// input(i): the value of node input i, nullptr where absent.
template <typename Input>
ResizeOperands operands_of(const ir::Node& node, int64_t opset, Input&& input) {
  const bool legacy = node.op == "Upsample" || opset < 11;
  return legacy ? ResizeOperands{nullptr, input(1), nullptr}
                : ResizeOperands{input(1), input(2), input(3)};
}

void compute_resize(ir::KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  const ResizeOperands ops = operands_of(
      node, ctx.opset(), [&](int i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; });
  const ResizePlan plan = plan_for(node, ctx.opset(), x.shape(), ops);
  TESSEL_ICHECK(plan.out == out.shape())
      << node.label() << ": planned " << shape_str(plan.out) << ", allocated " << out.type_str();
  const std::vector<double> roi = roi_per_dim(node, plan, ops.roi);
  if (plan.mode != ResizeMode::kNearest)
    out = resize_interpolating(x, plan, roi);
  else
    resize_nearest(x, plan, roi, out);
}

}  // namespace

ResizeSampling resize_sampling(const ir::Node& node, int64_t opset, const Shape& in,
                               const std::vector<const Tensor*>& operands) {
  const ResizeOperands ops = operands_of(node, opset, [&](int i) -> const Tensor* {
    return static_cast<size_t>(i) < operands.size() ? operands[static_cast<size_t>(i)] : nullptr;
  });
  const ResizePlan plan = plan_for(node, opset, in, ops);
  const std::vector<double> roi = roi_per_dim(node, plan, ops.roi);
  ResizeSampling s;
  s.mode = plan.mode;
  s.extrapolation = plan.extrapolation;
  s.out = plan.out;
  for (size_t d = 0; d < in.size(); ++d) s.taps.push_back(axis_taps(plan, d, in[d], roi));
  return s;
}

void register_resize_ops(ir::OpRegistry& r) {
  r.add({.name = "Resize",
         .min_inputs = 1,
         .max_inputs = 4,
         .infer = infer_resize,
         .compute = compute_resize});
  r.add({.name = "Upsample",
         .min_inputs = 1,
         .max_inputs = 2,
         .infer = infer_resize,
         .compute = compute_resize});
}

}  // namespace tessel::ops
