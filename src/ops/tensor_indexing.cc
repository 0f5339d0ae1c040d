// The indexing ops of the tensor family, with ONNX semantics: Gather, Concat, Split, Slice and
// Pad. All are dtype-agnostic: they move whole elements as bytes. Extents that depend on an
// input's value (Split's split, Slice's starts/ends, Pad's pads) are read with require_value in
// infer() and read again from the actual inputs in compute().
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "ops/tensor_copy.h"
#include "ops/tensor_families.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

// The node's 'axis' attribute normalised against `rank`.
int64_t axis_attr(const ir::Node& node, int64_t rank) {
  return normalize_axis(node, node.get_int("axis", 0), rank, "axis");
}

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// ---- Gather ---------------------------------------------------------------------------------

void infer_gather(ir::InferContext& ctx) {
  const Shape& data = ctx.shape(0);
  TESSEL_USER_CHECK(!data.empty()) << ctx.node().label() << ": data must have rank >= 1";
  check_dtype(ctx, 1, kIndexTypes);
  const int64_t axis = axis_attr(ctx.node(), ctx.rank(0));
  Shape out(data.begin(), data.begin() + axis);
  const Shape& indices = ctx.shape(1);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  ctx.set_output(0, ctx.dtype(0), out);
}

// out[o, k, :] = data[o, indices[k], :] with o over the dimensions before the axis and the
// trailing ':' a contiguous block of the dimensions after it.
void compute_gather(ir::KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const std::vector<int64_t> indices = ctx.input(1).to_i64_vector();
  const int64_t axis = axis_attr(ctx.node(), data.rank());
  const int64_t extent = data.dim(axis);
  const size_t block = static_cast<size_t>(product(data.shape(), static_cast<size_t>(axis) + 1,
                                                   data.shape().size())) *
                       dtype_size(data.dtype());
  const int64_t outer = product(data.shape(), 0, static_cast<size_t>(axis));
  std::vector<int64_t> rows(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    TESSEL_USER_CHECK(i >= -extent && i < extent)
        << ctx.node().label() << ": index " << i << " is out of range for axis " << axis
        << " of extent " << extent;
    rows[k] = i < 0 ? i + extent : i;
  }
  if (block == 0) return;  // the output is empty
  const std::byte* src = data.raw();
  std::byte* dst = ctx.output(0).raw();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t row : rows) {
      std::memcpy(dst, src + static_cast<size_t>(o * extent + row) * block, block);
      dst += block;
    }
  }
}

// ---- Concat and Split -------------------------------------------------------------------------

void infer_concat(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  const Shape& first = ctx.shape(0);
  const int64_t axis =
      normalize_axis(node, node.require_int("axis"), static_cast<int64_t>(first.size()), "axis");
  Shape out = first;
  out[static_cast<size_t>(axis)] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    check_same_dtype(ctx, 0, i);
    const Shape& s = ctx.shape(i);
    bool compatible = s.size() == first.size();
    for (size_t d = 0; compatible && d < s.size(); ++d)
      compatible = d == static_cast<size_t>(axis) || s[d] == first[d];
    TESSEL_USER_CHECK(compatible) << node.label() << ": input " << i << " has shape "
                                  << shape_str(s) << ", which does not match input 0's "
                                  << shape_str(first) << " outside axis " << axis;
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  ctx.set_output(0, ctx.dtype(0), out);
}

// Concat and Split move contiguous blocks: for each index `o` over the dimensions before the
// axis, tensor k owns the block of extent_k * (product of the trailing dimensions) elements.
size_t axis_block_bytes(const Tensor& t, int64_t axis) {
  return static_cast<size_t>(product(t.shape(), static_cast<size_t>(axis), t.shape().size())) *
         dtype_size(t.dtype());
}

void compute_concat(ir::KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const int64_t axis = axis_attr(ctx.node(), out.rank());
  const int64_t outer = product(out.shape(), 0, static_cast<size_t>(axis));
  std::byte* dst = out.raw();
  for (int64_t o = 0; o < outer; ++o) {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& in = ctx.input(i);
      const size_t block = axis_block_bytes(in, axis);
      if (block) std::memcpy(dst, in.raw() + static_cast<size_t>(o) * block, block);
      dst += block;
    }
  }
}

// Split's part sizes. Opsets 11-12 take them from the 'split' attribute, opset 13 on from the
// optional 'split' input; without them the axis splits evenly among the outputs, or, with
// opset 18's 'num_outputs', into parts of ceil(extent / num_outputs) with a smaller last one.
std::vector<int64_t> split_sizes(ir::InferContext& ctx, int64_t extent) {
  const ir::Node& node = ctx.node();
  const int64_t parts = static_cast<int64_t>(ctx.outputs().size());
  std::vector<int64_t> split;
  if (ctx.opset() < 13) {
    TESSEL_USER_CHECK(!ctx.has_input(1))
        << node.label() << ": 'split' is an attribute before opset 13, not an input";
    split = node.get_ints("split");
  } else {
    TESSEL_USER_CHECK(!node.has_attr("split"))
        << node.label() << ": 'split' is an input since opset 13, not an attribute";
    if (ctx.has_input(1)) split = require_int_list(ctx, 1, "split");
  }
  if (!split.empty()) {
    int64_t total = 0;
    for (int64_t s : split) {
      TESSEL_USER_CHECK(s >= 0) << node.label() << ": split " << shape_str(split)
                                << " has a negative size";
      total += s;
    }
    TESSEL_USER_CHECK(static_cast<int64_t>(split.size()) == parts && total == extent)
        << node.label() << ": split " << shape_str(split) << " must have " << parts
        << " sizes (one per output) that sum to the axis extent " << extent;
    return split;
  }
  if (node.has_attr("num_outputs")) {
    const int64_t n = node.get_int("num_outputs", 0);
    TESSEL_USER_CHECK(n == parts) << node.label() << ": num_outputs is " << n
                                  << " but the node has " << parts << " outputs";
    const int64_t chunk = (extent + n - 1) / n;
    TESSEL_USER_CHECK(chunk * (n - 1) <= extent)
        << node.label() << ": an axis of extent " << extent << " cannot be split into " << n
        << " parts of " << chunk << " with a smaller last one";
    std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
    sizes.back() = extent - chunk * (n - 1);
    return sizes;
  }
  TESSEL_USER_CHECK(extent % parts == 0)
      << node.label() << ": an axis of extent " << extent << " does not split evenly into " << parts
      << " outputs; give 'split' sizes";
  return std::vector<int64_t>(static_cast<size_t>(parts), extent / parts);
}

void infer_split(ir::InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const int64_t axis = axis_attr(ctx.node(), ctx.rank(0));
  const std::vector<int64_t> sizes = split_sizes(ctx, in[static_cast<size_t>(axis)]);
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape s = in;
    s[static_cast<size_t>(axis)] = sizes[k];
    ctx.set_output(static_cast<int>(k), ctx.dtype(0), s);
  }
}

void compute_split(ir::KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const int64_t axis = axis_attr(ctx.node(), in.rank());
  const int64_t outer = product(in.shape(), 0, static_cast<size_t>(axis));
  const std::byte* src = in.raw();
  for (int64_t o = 0; o < outer; ++o) {
    for (int k = 0; k < ctx.num_outputs(); ++k) {
      Tensor& out = ctx.output(k);
      const size_t block = axis_block_bytes(out, axis);
      if (block) std::memcpy(out.raw() + static_cast<size_t>(o) * block, src, block);
      src += block;
    }
  }
}

// ---- Slice ------------------------------------------------------------------------------------

// One sliced axis: elements start, start + step, ... (count of them).
struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};

// Slice's per-axis ranges from its inputs (starts, ends, optional axes and steps), clamped as
// ONNX specifies: negative starts/ends count from the back; then for a positive step both are
// clamped to [0, extent], for a negative step start to [0, extent-1] and end to [-1, extent-1].
std::vector<SliceAxis> slice_plan(const ir::Node& node, const Shape& in, const Tensor& starts_t,
                                  const Tensor& ends_t, const Tensor* axes_t,
                                  const Tensor* steps_t) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> starts = read_int_list(node, starts_t, "starts");
  const std::vector<int64_t> ends = read_int_list(node, ends_t, "ends");
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  if (axes_t) axes = normalize_axes(node, read_int_list(node, *axes_t, "axes"), rank, "axis");
  if (steps_t) steps = read_int_list(node, *steps_t, "steps");
  TESSEL_USER_CHECK(ends.size() == starts.size() && axes.size() == starts.size() &&
                    steps.size() == starts.size())
      << node.label() << ": starts, ends, axes and steps must have the same length, got "
      << starts.size() << ", " << ends.size() << ", " << axes.size() << ", " << steps.size();

  std::vector<SliceAxis> plan(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    plan[static_cast<size_t>(d)] = {0, 1, in[static_cast<size_t>(d)]};
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t extent = in[static_cast<size_t>(axes[i])];
    const int64_t step = steps[i];
    TESSEL_USER_CHECK(step != 0) << node.label() << ": step 0 on axis " << axes[i];
    int64_t start = starts[i] < 0 ? starts[i] + extent : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + extent : ends[i];
    int64_t count = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, extent);
      end = std::clamp<int64_t>(end, 0, extent);
      if (end > start) count = (end - start + step - 1) / step;
    } else if (extent > 0) {
      start = std::clamp<int64_t>(start, 0, extent - 1);
      end = std::clamp<int64_t>(end, -1, extent - 1);
      if (start > end) count = (start - end - step - 1) / -step;
    }
    plan[static_cast<size_t>(axes[i])] = {start, step, count};
  }
  return plan;
}

const Tensor* optional_input(const ir::InferContext& ctx, int i, const char* what) {
  return ctx.has_input(i) ? &ctx.require_value(i, what) : nullptr;
}

void infer_slice(ir::InferContext& ctx) {
  const std::vector<SliceAxis> plan = slice_plan(
      ctx.node(), ctx.shape(0), ctx.require_value(1, "starts"), ctx.require_value(2, "ends"),
      optional_input(ctx, 3, "axes"), optional_input(ctx, 4, "steps"));
  Shape out;
  for (const SliceAxis& a : plan) out.push_back(a.count);
  ctx.set_output(0, ctx.dtype(0), out);
}

void compute_slice(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<SliceAxis> plan = slice_plan(ctx.node(), x.shape(), ctx.input(1), ctx.input(2),
                                                 ctx.has_input(3) ? &ctx.input(3) : nullptr,
                                                 ctx.has_input(4) ? &ctx.input(4) : nullptr);
  std::vector<std::vector<int64_t>> maps;
  for (const SliceAxis& a : plan) {
    std::vector<int64_t>& m = maps.emplace_back(static_cast<size_t>(a.count));
    for (int64_t j = 0; j < a.count; ++j) m[static_cast<size_t>(j)] = a.start + j * a.step;
  }
  gather_axes(x, maps, nullptr, ctx.output(0));
}

// ---- Pad --------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

struct PadPlan {
  std::vector<int64_t> begin, end;  // per dimension; negative values crop
  PadMode mode = PadMode::kConstant;
  Shape out;
};

PadMode pad_mode(const ir::Node& node) {
  const std::string mode = node.get_string("mode", "constant");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  TESSEL_USER_CHECK(mode == "edge")
      << node.label() << ": mode '" << mode << "' is not supported (constant, reflect, edge)";
  return PadMode::kEdge;
}

// Pad's inputs: pads [begin_0, ..., begin_{n-1}, end_0, ..., end_{n-1}] over all dimensions, or
// over opset 18's 'axes'.
PadPlan pad_plan(const ir::Node& node, const Shape& in, const Tensor& pads_t,
                 const Tensor* axes_t) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> pads = read_int_list(node, pads_t, "pads");
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) axes[static_cast<size_t>(d)] = d;
  if (axes_t) axes = normalize_axes(node, read_int_list(node, *axes_t, "axes"), rank, "axis");
  TESSEL_USER_CHECK(pads.size() == 2 * axes.size())
      << node.label() << ": pads " << shape_str(pads) << " must have " << 2 * axes.size()
      << " values (begin and end for each of " << axes.size() << " axes)";
  PadPlan plan{std::vector<int64_t>(static_cast<size_t>(rank), 0),
               std::vector<int64_t>(static_cast<size_t>(rank), 0), pad_mode(node), in};
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t d = static_cast<size_t>(axes[i]);
    plan.begin[d] = pads[i];
    plan.end[d] = pads[axes.size() + i];
    plan.out[d] = in[d] + plan.begin[d] + plan.end[d];
    TESSEL_USER_CHECK(plan.out[d] >= 0)
        << node.label() << ": pads " << shape_str(pads) << " crop more than the extent " << in[d]
        << " of axis " << d;
    TESSEL_USER_CHECK(plan.mode == PadMode::kConstant || in[d] > 0 || plan.out[d] == 0)
        << node.label() << ": cannot pad the empty axis " << d << " in mode '"
        << node.get_string("mode", "constant") << "'";
  }
  return plan;
}

// The input coordinate that output coordinate `o` reads along one axis, or -1 for the constant.
int64_t pad_source(int64_t o, int64_t begin, int64_t extent, PadMode mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < extent) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return std::clamp<int64_t>(i, 0, extent - 1);
    case PadMode::kReflect: {
      // Mirror about the first and last elements (no repeat of the edge): the pattern repeats
      // with period 2 * (extent - 1), as numpy's 'reflect' does for pads wider than the axis.
      if (extent == 1) return 0;
      const int64_t period = 2 * (extent - 1);
      i = ((i % period) + period) % period;
      return i < extent ? i : period - i;
    }
  }
  return -1;
}

void infer_pad(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  TESSEL_USER_CHECK(ctx.opset() >= 18 || !ctx.has_input(3))
      << node.label() << ": the 'axes' input needs opset 18 (the model has opset " << ctx.opset()
      << ")";
  if (ctx.has_input(2)) {
    check_same_dtype(ctx, 0, 2);
    TESSEL_USER_CHECK(numel(ctx.shape(2)) <= 1) << node.label() << ": 'constant_value' has shape "
                                                << shape_str(ctx.shape(2)) << ", expected a scalar";
  }
  const PadPlan plan =
      pad_plan(node, ctx.shape(0), ctx.require_value(1, "pads"), optional_input(ctx, 3, "axes"));
  ctx.set_output(0, ctx.dtype(0), plan.out);
}

void compute_pad(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const PadPlan plan =
      pad_plan(ctx.node(), x.shape(), ctx.input(1), ctx.has_input(3) ? &ctx.input(3) : nullptr);
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < plan.out.size(); ++d) {
    std::vector<int64_t>& m = maps.emplace_back(static_cast<size_t>(plan.out[d]));
    for (int64_t o = 0; o < plan.out[d]; ++o)
      m[static_cast<size_t>(o)] =
          pad_source(o, plan.begin[d], x.dim(static_cast<int64_t>(d)), plan.mode);
  }
  // The fill element in the data's dtype: constant_value, or zero when it is omitted or empty.
  std::byte fill[8] = {};
  if (ctx.has_input(2) && ctx.input(2).numel() == 1)
    std::memcpy(fill, ctx.input(2).raw(), dtype_size(x.dtype()));
  gather_axes(x, maps, fill, ctx.output(0));
}

// ONNX's bound on variadic inputs and outputs.
constexpr int kVariadic = std::numeric_limits<int32_t>::max();

}  // namespace

void register_tensor_indexing_ops(ir::OpRegistry& r) {
  r.add({.name = "Gather",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_gather,
         .compute = compute_gather});
  r.add({.name = "Concat",
         .min_inputs = 1,
         .max_inputs = kVariadic,
         .infer = infer_concat,
         .compute = compute_concat});
  r.add({.name = "Split",
         .min_inputs = 1,
         .max_inputs = 2,
         .min_outputs = 1,
         .max_outputs = kVariadic,
         .infer = infer_split,
         .compute = compute_split});
  r.add({.name = "Slice",
         .min_inputs = 3,
         .max_inputs = 5,
         .infer = infer_slice,
         .compute = compute_slice});
  r.add({.name = "Pad",
         .min_inputs = 2,
         .max_inputs = 4,
         .infer = infer_pad,
         .compute = compute_pad});
}

}  // namespace tessel::ops
