// LayerNormalization (ONNX opset 17), InstanceNormalization and GroupNormalization of the nn
// family. X is viewed as (outer, n) with n the
// product of X's dims from `axis` on; each of the `outer` rows is standardised on its own:
//
//   mean = sum(x) / n,  var = sum((x - mean)^2) / n,  inv_std = 1 / sqrt(var + epsilon)
//   Y = (x - mean) * inv_std * Scale + B
//
// Scale and B broadcast (numpy rules) to X's dims from `axis` on, as in ONNX's reference
// implementation; they may have leading dims of 1 but not reach into the dims before `axis`. The
// optional outputs Mean and InvStdDev have X's shape with the normalised dims set to 1 and the
// stash type's dtype.
//
// The kernel accumulates in double for every input dtype and rounds once on store, as the
// reduce family does; stash_type must be 1 (f32), the only statistics type that tessel stores
// (ONNX also allows bf16).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/nn_common.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

constexpr int64_t kStashF32 = 1;  // TensorProto.FLOAT

struct LayerNormView {
  int64_t axis = 0;   // in [0, rank)
  Shape normalized;   // X's dims from axis on
  int64_t outer = 1;  // rows: product of the dims before axis
  int64_t n = 1;      // elements per row
};

LayerNormView layer_norm_view(const ir::Node& node, const Shape& x) {
  LayerNormView v;
  const int64_t rank = static_cast<int64_t>(x.size());
  v.axis = normalize_axis(node, node.get_int("axis", -1), rank, "axis");
  v.normalized.assign(x.begin() + v.axis, x.end());
  for (int64_t d = 0; d < v.axis; ++d) v.outer *= x[static_cast<size_t>(d)];
  v.n = numel(v.normalized);
  return v;
}

// Scale and B: X's dtype, and a shape that broadcasts to X's dims from axis on without reaching
// into the dims before it (numpy rules, right-aligned: each dim equals X's or is 1, and is 1
// before axis).
void check_affine_input(const ir::InferContext& ctx, int i, const char* what,
                        const LayerNormView& v) {
  require_same_dtype(ctx, 0, i, "X", what);
  const Shape &s = ctx.shape(i), &x = ctx.shape(0);
  bool ok = s.size() <= x.size();
  for (size_t k = 1; ok && k <= s.size(); ++k) {
    const int64_t d = s[s.size() - k];
    const bool normalized = x.size() - k >= static_cast<size_t>(v.axis);
    ok = d == 1 || (normalized && d == x[x.size() - k]);
  }
  TESSEL_USER_CHECK(ok) << ctx.node().label() << ": input " << what << " has shape " << shape_str(s)
                        << ", which does not broadcast to the normalized shape "
                        << shape_str(v.normalized) << " (X's dims from axis " << v.axis << ")";
}

void infer_layer_norm(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  require_float_input(ctx, 0, "X");
  require_rank(ctx, 0, "X", 1);
  const LayerNormView v = layer_norm_view(node, ctx.shape(0));
  const int64_t stash = node.get_int("stash_type", kStashF32);
  TESSEL_USER_CHECK(stash == kStashF32)
      << node.label() << ": stash_type " << stash
      << " is not supported; tessel computes and stores Mean and InvStdDev as f32 (stash_type 1)";
  node.get_float("epsilon", 1e-5);  // rejects an attribute of the wrong kind now
  check_affine_input(ctx, 1, "Scale", v);
  if (ctx.has_input(2)) check_affine_input(ctx, 2, "B", v);
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  Shape stats(ctx.shape(0).begin(), ctx.shape(0).begin() + v.axis);
  stats.resize(ctx.shape(0).size(), 1);
  for (size_t i = 1; i < ctx.outputs().size(); ++i)
    ctx.set_output(static_cast<int>(i), DType::kF32, stats);
}

// The elements of `t` (Scale or B) broadcast to `normalized`, in row-major order.
// check_affine_input has made sure that any dims of t beyond normalized's rank are 1.
std::vector<double> broadcast_to(const Tensor& t, const Shape& normalized) {
  const size_t rank = normalized.size();
  const Shape ts(t.shape().end() - static_cast<int64_t>(std::min(rank, t.shape().size())),
                 t.shape().end());
  const size_t offset = rank - ts.size();
  // Stride in t of each normalised dim: 0 where t broadcasts (absent or 1).
  std::vector<int64_t> stride(rank, 0);
  const std::vector<int64_t> strides = strides_of(ts);
  for (size_t d = offset; d < rank; ++d)
    if (ts[d - offset] != 1) stride[d] = strides[d - offset];
  std::vector<double> r;
  r.reserve(static_cast<size_t>(numel(normalized)));
  std::vector<int64_t> coord(rank, 0);
  for (int64_t j = 0, n = numel(normalized); j < n; ++j) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at += coord[d] * stride[d];
    r.push_back(t.get_f64(at));
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < normalized[d]) break;
      coord[d] = 0;
    }
  }
  return r;
}

void compute_layer_norm(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const LayerNormView v = layer_norm_view(ctx.node(), x.shape());
  const double epsilon = ctx.node().get_float("epsilon", 1e-5);
  const std::vector<double> scale = broadcast_to(ctx.input(1), v.normalized);
  const std::vector<double> bias = ctx.has_input(2) ? broadcast_to(ctx.input(2), v.normalized)
                                                    : std::vector<double>(scale.size(), 0.0);
  Tensor& y = ctx.output(0);
  for (int64_t o = 0; o < v.outer; ++o) {
    const int64_t base = o * v.n;
    double sum = 0;
    for (int64_t j = 0; j < v.n; ++j) sum += x.get_f64(base + j);
    const double mean = sum / static_cast<double>(v.n);
    // Two passes: the variance of the deviations, not E[x^2] - mean^2, which cancels badly.
    double sq = 0;
    for (int64_t j = 0; j < v.n; ++j) {
      const double d = x.get_f64(base + j) - mean;
      sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(v.n) + epsilon);
    for (int64_t j = 0; j < v.n; ++j) {
      const size_t k = static_cast<size_t>(j);
      y.set_f64(base + j, (x.get_f64(base + j) - mean) * inv_std * scale[k] + bias[k]);
    }
    if (ctx.num_outputs() > 1) ctx.output(1).set_f64(o, mean);
    if (ctx.num_outputs() > 2) ctx.output(2).set_f64(o, inv_std);
  }
}

// InstanceNormalization (style-transfer and GAN generators): X [N, C, D1, ...], each (n, c)
// plane standardised on its own over the spatial dims, then scaled and shifted per channel:
// Y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], var the population variance. Scale
// and B are [C] of X's dtype.
void infer_instance_norm(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "input");
  require_rank(ctx, 0, "input", 3);
  require_same_dtype(ctx, 1, 0, "scale", "input");
  require_same_dtype(ctx, 2, 0, "B", "input");
  const int64_t channels = ctx.shape(0)[1];
  for (int i : {1, 2})
    TESSEL_USER_CHECK(ctx.shape(i) == Shape{channels})
        << ctx.node().label() << ": " << (i == 1 ? "scale" : "B") << " has shape " << shape_str(ctx.shape(i))
        << ", expected [" << channels << "] (one value per channel)";
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void compute_instance_norm(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double epsilon = ctx.node().get_float("epsilon", 1e-5);
  const int64_t channels = x.dim(1), planes = x.dim(0) * channels;
  const int64_t plane = planes == 0 ? 0 : x.numel() / planes;
  Tensor& y = ctx.output(0);
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t base = p * plane, c = p % channels;
    double sum = 0;
    for (int64_t j = 0; j < plane; ++j) sum += x.get_f64(base + j);
    const double mean = sum / static_cast<double>(plane);
    double sq = 0;  // two passes, as LayerNormalization
    for (int64_t j = 0; j < plane; ++j) {
      const double d = x.get_f64(base + j) - mean;
      sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(plane) + epsilon);
    const double scale = ctx.input(1).get_f64(c), shift = ctx.input(2).get_f64(c);
    for (int64_t j = 0; j < plane; ++j) y.set_f64(base + j, (x.get_f64(base + j) - mean) * inv_std * scale + shift);
  }
}

// GroupNormalization (ResNet-GN, detection heads, diffusion UNets): X [N, C, D1, ...] with its C
// channels in `num_groups` groups of C / G; each (n, group) standardised over its channels and
// pixels together, then scaled and shifted: per group (opset 18: scale and bias [G]) or per
// channel (opset 21: [C]). Statistics in double (stash_type 1, f32, is the only one tessel
// stores), two passes as LayerNormalization.
struct GroupNormView {
  int64_t groups = 1, channels = 1, per_group = 1, pixels = 1;
  bool per_channel_affine = true;
};

GroupNormView group_norm_view(const ir::Node& node, const Shape& x, int64_t opset) {
  TESSEL_USER_CHECK(node.has_attr("num_groups")) << node.label() << ": the num_groups attribute is required";
  TESSEL_USER_CHECK(node.get_int("stash_type", 1) == 1)
      << node.label() << ": stash_type " << node.get_int("stash_type", 1) << " (tessel keeps statistics in f32: 1)";
  GroupNormView v;
  v.groups = node.get_int("num_groups", 1);
  v.channels = x[1];
  TESSEL_USER_CHECK(v.groups >= 1 && v.channels % v.groups == 0)
      << node.label() << ": num_groups " << v.groups << " does not divide the " << v.channels << " channels";
  v.per_group = v.channels / v.groups;
  for (size_t d = 2; d < x.size(); ++d) v.pixels *= x[d];
  v.per_channel_affine = opset >= 21;
  return v;
}

void infer_group_norm(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "X");
  require_rank(ctx, 0, "X", 3);
  require_same_dtype(ctx, 1, 0, "scale", "X");
  require_same_dtype(ctx, 2, 0, "bias", "X");
  const GroupNormView v = group_norm_view(ctx.node(), ctx.shape(0), ctx.opset());
  const int64_t want = v.per_channel_affine ? v.channels : v.groups;
  for (int i : {1, 2})
    TESSEL_USER_CHECK(ctx.shape(i) == Shape{want})
        << ctx.node().label() << ": " << (i == 1 ? "scale" : "bias") << " has shape " << shape_str(ctx.shape(i))
        << ", expected [" << want << "] (one value per " << (v.per_channel_affine ? "channel" : "group")
        << " at opset " << ctx.opset() << ")";
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void compute_group_norm(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double epsilon = ctx.node().get_float("epsilon", 1e-5);
  const GroupNormView v = group_norm_view(ctx.node(), x.shape(), ctx.opset());
  const int64_t block = v.per_group * v.pixels;  // one (n, group): contiguous in NCHW
  Tensor& y = ctx.output(0);
  for (int64_t ng = 0; ng < x.dim(0) * v.groups; ++ng) {
    const int64_t base = ng * block, g = ng % v.groups;
    double sum = 0;
    for (int64_t j = 0; j < block; ++j) sum += x.get_f64(base + j);
    const double mean = sum / static_cast<double>(block);
    double sq = 0;
    for (int64_t j = 0; j < block; ++j) {
      const double d = x.get_f64(base + j) - mean;
      sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(block) + epsilon);
    for (int64_t j = 0; j < block; ++j) {
      const int64_t at = v.per_channel_affine ? g * v.per_group + j / v.pixels : g;
      y.set_f64(base + j, (x.get_f64(base + j) - mean) * inv_std * ctx.input(1).get_f64(at) + ctx.input(2).get_f64(at));
    }
  }
}

}  // namespace

void register_layer_norm_ops(ir::OpRegistry& r) {
  r.add({.name = "GroupNormalization",
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_group_norm,
         .compute = compute_group_norm});
  r.add({.name = "InstanceNormalization",
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_instance_norm,
         .compute = compute_instance_norm});
  r.add({.name = "LayerNormalization",
         .min_inputs = 2,
         .max_inputs = 3,
         .min_outputs = 1,
         .max_outputs = 3,
         .infer = infer_layer_norm,
         .compute = compute_layer_norm});
}

}  // namespace tessel::ops
