// The tensor op family with ONNX semantics. This file holds the ops that only reshape
// (Shape, Flatten, Reshape, Squeeze, Unsqueeze) or permute (Transpose, DepthToSpace,
// SpaceToDepth); indexing ops are in tensor_indexing.cc and Resize in resize_ops.cc.
//
// Every kernel here is dtype-agnostic: reshapes copy bytes, permutations move whole elements.
// Shapes that depend on an input's value (Reshape's target, Squeeze's axes) are read with
// require_value in infer(), which static shape inference and the executor both call.
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "ops/all_ops.h"
#include "ops/more_ops.h"
#include "ops/tensor_copy.h"
#include "ops/tensor_families.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

// ---- Shape ----------------------------------------------------------------------------------

// Shape's [start, end) over the dimensions (opset 15): negative values count from the back and
// both are clamped to [0, rank]; an empty range gives an empty shape.
std::pair<int64_t, int64_t> shape_range(const ir::Node& node, int64_t rank) {
  int64_t start = node.get_int("start", 0), end = node.get_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return {start, end};
}

void register_shape(ir::OpRegistry& r) {
  r.add({.name = "Shape",
         .infer =
             [](ir::InferContext& ctx) {
               auto [start, end] = shape_range(ctx.node(), ctx.rank(0));
               ctx.set_output(0, DType::kI64, {end - start});
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor& x = ctx.input(0);
               auto [start, end] = shape_range(ctx.node(), x.rank());
               int64_t* out = ctx.output(0).data<int64_t>();
               for (int64_t i = start; i < end; ++i) out[i - start] = x.dim(i);
             }});
}

// ---- reshapes: the output is the input's bytes under a new shape ----------------------------

void add_reshape_like(ir::OpRegistry& r, const char* name, int min_inputs, int max_inputs,
                      std::function<Shape(const ir::InferContext&)> out_shape) {
  r.add({.name = name,
         .min_inputs = min_inputs,
         .max_inputs = max_inputs,
         .infer = [out_shape](
                      ir::InferContext& ctx) { ctx.set_output(0, ctx.dtype(0), out_shape(ctx)); },
         .compute = [](ir::KernelContext& ctx) { copy_data(ctx.input(0), ctx.output(0)); }});
}

Shape flatten_shape(const ir::InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int64_t rank = ctx.rank(0);
  int64_t axis = ctx.node().get_int("axis", 1);
  TESSEL_USER_CHECK(axis >= -rank && axis <= rank)
      << ctx.node().label() << ": axis " << axis << " is out of range for rank " << rank
      << " (expected " << -rank << " to " << rank << ")";
  if (axis < 0) axis += rank;
  const Shape outer(in.begin(), in.begin() + axis), inner(in.begin() + axis, in.end());
  return {numel(outer), numel(inner)};
}

// Reshape's target: 0 copies the input's extent at that position (unless allowzero, when it
// is a real 0), and a single -1 takes whatever extent makes the element counts agree.
Shape reshape_shape(const ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  const Shape& in = ctx.shape(0);
  const std::vector<int64_t> spec = require_int_list(ctx, 1, "shape");
  const bool allowzero = node.get_int("allowzero", 0) != 0;
  Shape out(spec.size());
  std::optional<size_t> wildcard;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t v = spec[i];
    if (v == -1) {
      TESSEL_USER_CHECK(!wildcard)
          << node.label() << ": target shape " << shape_str(spec) << " has more than one -1";
      wildcard = i;
      out[i] = 1;
    } else if (v == 0 && !allowzero) {
      TESSEL_USER_CHECK(i < in.size())
          << node.label() << ": target shape " << shape_str(spec) << " has 0 at position " << i
          << ", which copies an input extent, but the input " << shape_str(in) << " has rank "
          << in.size();
      out[i] = in[i];
    } else {
      TESSEL_USER_CHECK(v >= 0) << node.label() << ": target shape " << shape_str(spec)
                                << " has the invalid extent " << v;
      has_zero |= v == 0;
      out[i] = v;
    }
  }
  const int64_t in_count = numel(in);
  const int64_t known = numel(out, node.label() + ": target shape");
  if (wildcard) {
    TESSEL_USER_CHECK(!(allowzero && has_zero))
        << node.label() << ": target shape " << shape_str(spec)
        << " has both 0 and -1, which allowzero=1 leaves ambiguous";
    TESSEL_USER_CHECK(known != 0 && in_count % known == 0)
        << node.label() << ": cannot reshape " << shape_str(in) << " (" << in_count
        << " elements) to " << shape_str(spec);
    out[*wildcard] = in_count / known;
  } else {
    TESSEL_USER_CHECK(known == in_count)
        << node.label() << ": cannot reshape " << shape_str(in) << " (" << in_count
        << " elements) to " << shape_str(out) << " (" << known << " elements)";
  }
  return out;
}

// Squeeze's and Unsqueeze's 'axes': an attribute before opset 13, input 1 since. Absent when
// the node has neither.
std::optional<std::vector<int64_t>> axes_operand(const ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  if (ctx.opset() < 13) {
    TESSEL_USER_CHECK(!ctx.has_input(1))
        << node.label() << ": 'axes' is an attribute before opset 13, not an input";
    if (!node.has_attr("axes")) return std::nullopt;
    return node.get_ints("axes");
  }
  TESSEL_USER_CHECK(!node.has_attr("axes"))
      << node.label() << ": 'axes' is an input since opset 13, not an attribute";
  if (!ctx.has_input(1)) return std::nullopt;
  return require_int_list(ctx, 1, "axes");
}

Shape squeeze_shape(const ir::InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const std::optional<std::vector<int64_t>> axes = axes_operand(ctx);
  Shape out;
  if (!axes) {  // every extent of 1
    std::copy_if(in.begin(), in.end(), std::back_inserter(out), [](int64_t d) { return d != 1; });
    return out;
  }
  const std::vector<int64_t> drop = normalize_axes(ctx.node(), *axes, ctx.rank(0), "axis");
  for (int64_t a : drop)
    TESSEL_USER_CHECK(in[static_cast<size_t>(a)] == 1)
        << ctx.node().label() << ": cannot squeeze axis " << a << " of extent "
        << in[static_cast<size_t>(a)] << " (input shape " << shape_str(in) << ")";
  for (size_t d = 0; d < in.size(); ++d)
    if (std::find(drop.begin(), drop.end(), static_cast<int64_t>(d)) == drop.end())
      out.push_back(in[d]);
  return out;
}

Shape unsqueeze_shape(const ir::InferContext& ctx) {
  const std::optional<std::vector<int64_t>> axes = axes_operand(ctx);
  TESSEL_USER_CHECK(axes) << ctx.node().label() << ": missing 'axes'";
  const Shape& in = ctx.shape(0);
  const int64_t out_rank = ctx.rank(0) + static_cast<int64_t>(axes->size());
  const std::vector<int64_t> added = normalize_axes(ctx.node(), *axes, out_rank, "axis");
  Shape out;
  auto next = in.begin();
  for (int64_t d = 0; d < out_rank; ++d)
    out.push_back(std::find(added.begin(), added.end(), d) != added.end() ? 1 : *next++);
  return out;
}

// ---- permutations -----------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const ir::Node& node, int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the dimensions
  if (!node.has_attr("perm")) return perm;
  perm = node.get_ints("perm");
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t i = 0; valid && i < rank; ++i) valid = sorted[static_cast<size_t>(i)] == i;
  TESSEL_USER_CHECK(valid) << node.label() << ": perm " << shape_str(perm)
                           << " is not a permutation of the " << rank << " input dimensions";
  return perm;
}

void register_transpose(ir::OpRegistry& r) {
  r.add({.name = "Transpose",
         .infer =
             [](ir::InferContext& ctx) {
               const Shape& in = ctx.shape(0);
               Shape out;
               for (int64_t p : transpose_perm(ctx.node(), ctx.rank(0)))
                 out.push_back(in[static_cast<size_t>(p)]);
               ctx.set_output(0, ctx.dtype(0), out);
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor& x = ctx.input(0);
               transpose_bytes(x, x.shape(), transpose_perm(ctx.node(), x.rank()), ctx.output(0));
             }});
}

// DepthToSpace and SpaceToDepth are a transpose of a 6-D view of the NCHW input; the views and
// permutations are the numpy definitions in the ONNX spec.
struct SpaceDepthPlan {
  Shape view;                 // the input seen as 6-D
  std::vector<int64_t> perm;  // applied to the view
  Shape out;                  // the 4-D output
};

int64_t blocksize_of(const ir::Node& node) {
  const int64_t b = node.require_int("blocksize");
  TESSEL_USER_CHECK(b > 0) << node.label() << ": blocksize " << b << " must be positive";
  return b;
}

void check_nchw(const ir::Node& node, const Shape& x) {
  TESSEL_USER_CHECK(x.size() == 4)
      << node.label() << ": input has shape " << shape_str(x) << ", expected rank 4 (N, C, H, W)";
}

SpaceDepthPlan depth_to_space_plan(const ir::Node& node, const Shape& x) {
  check_nchw(node, x);
  const int64_t b = blocksize_of(node);
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  TESSEL_USER_CHECK(c % (b * b) == 0)
      << node.label() << ": channels " << c << " are not divisible by blocksize^2 = " << b * b;
  const std::string mode = node.get_string("mode", "DCR");
  const Shape out = {n, c / (b * b), h * b, w * b};
  // DCR: channel = (bh, bw, c'); CRD: channel = (c', bh, bw).
  if (mode == "DCR") return {{n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, out};
  TESSEL_USER_CHECK(mode == "CRD")
      << node.label() << ": mode '" << mode << "' is not supported (DCR, CRD)";
  return {{n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, out};
}

SpaceDepthPlan space_to_depth_plan(const ir::Node& node, const Shape& x) {
  check_nchw(node, x);
  const int64_t b = blocksize_of(node);
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  TESSEL_USER_CHECK(h % b == 0 && w % b == 0) << node.label() << ": spatial extents " << h << "x"
                                              << w << " are not divisible by blocksize " << b;
  // Output channel = (bh, bw, c), the inverse of DepthToSpace's DCR.
  return {{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, c * b * b, h / b, w / b}};
}

void add_space_depth(ir::OpRegistry& r, const char* name,
                     SpaceDepthPlan (*plan)(const ir::Node&, const Shape&)) {
  r.add({.name = name,
         .infer =
             [plan](ir::InferContext& ctx) {
               ctx.set_output(0, ctx.dtype(0), plan(ctx.node(), ctx.shape(0)).out);
             },
         .compute =
             [plan](ir::KernelContext& ctx) {
               const Tensor& x = ctx.input(0);
               const SpaceDepthPlan p = plan(ctx.node(), x.shape());
               transpose_bytes(x, p.view, p.perm, ctx.output(0));
             }});
}

}  // namespace

void register_tensor_ops(ir::OpRegistry& r) {
  register_shape(r);
  add_reshape_like(r, "Flatten", 1, 1, flatten_shape);
  add_reshape_like(r, "Reshape", 2, 2, reshape_shape);
  add_reshape_like(r, "Squeeze", 1, 2, squeeze_shape);
  add_reshape_like(r, "Unsqueeze", 1, 2, unsqueeze_shape);
  register_transpose(r);
  add_space_depth(r, "DepthToSpace", depth_to_space_plan);
  add_space_depth(r, "SpaceToDepth", space_to_depth_plan);
  register_tensor_indexing_ops(r);
  register_resize_ops(r);
  register_tensor_generate_ops(r);
}

}  // namespace tessel::ops
