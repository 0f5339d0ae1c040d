// Tensor ops that generate or replicate values, with ONNX semantics: Expand, Tile,
// ConstantOfShape, Range and Size, plus GatherElements and CumSum. Output shapes that depend on
// input values (Expand's shape, Tile's repeats, ConstantOfShape's input, Range's bounds) are
// read with require_value in infer(), as tensor.cc does for Reshape.
//
// Expand, Tile, ConstantOfShape and GatherElements only move elements and serve every dtype;
// Range and CumSum compute and are instantiated per dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "ops/more_ops.h"
#include "ops/tensor_copy.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

constexpr DType kRangeTypes[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
constexpr DType kCumSumTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                                  DType::kF64, DType::kI32, DType::kI64};

// An extent list read from an input ("shape", "repeats"): every entry must be >= 0.
std::vector<int64_t> require_extents(const ir::InferContext& ctx, int i, const char* what) {
  std::vector<int64_t> v = require_int_list(ctx, i, what);
  for (int64_t e : v)
    TESSEL_USER_CHECK(e >= 0) << ctx.node().label() << ": '" << what << "' " << shape_str(v)
                              << " has the negative value " << e;
  return v;
}

// ---- Expand and Tile: index maps for gather_axes --------------------------------------------

// Expand broadcasts the input and the 'shape' operand against each other (bidirectionally:
// a 1 in 'shape' keeps the input's extent).
Shape expand_shape(const ir::InferContext& ctx) {
  return broadcast_shapes(ctx.shape(0), require_extents(ctx, 1, "shape"), ctx.node().label());
}

void compute_expand(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  // The input seen with the output's rank (leading 1s), read at 0 along its broadcast axes.
  Shape view(static_cast<size_t>(out.rank() - x.rank()), 1);
  view.insert(view.end(), x.shape().begin(), x.shape().end());
  std::vector<std::vector<int64_t>> maps(view.size());
  for (size_t d = 0; d < view.size(); ++d) {
    maps[d].resize(static_cast<size_t>(out.dim(static_cast<int64_t>(d))));
    for (size_t o = 0; o < maps[d].size(); ++o)
      maps[d][o] = view[d] == 1 ? 0 : static_cast<int64_t>(o);
  }
  gather_axes(x.reshaped(view), maps, nullptr, out);
}

Shape tile_shape(const ir::InferContext& ctx) {
  const std::vector<int64_t> repeats = require_extents(ctx, 1, "repeats");
  const Shape& in = ctx.shape(0);
  TESSEL_USER_CHECK(repeats.size() == in.size())
      << ctx.node().label() << ": 'repeats' " << shape_str(repeats) << " has " << repeats.size()
      << " values, expected one per input dimension (" << in.size() << ")";
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] * repeats[d];
  return out;
}

// Output coordinate o along each axis reads input coordinate o mod extent.
void compute_tile(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    std::vector<int64_t>& m = maps[static_cast<size_t>(d)];
    m.resize(static_cast<size_t>(out.dim(d)));
    for (size_t o = 0; o < m.size(); ++o) m[o] = static_cast<int64_t>(o) % x.dim(d);
  }
  gather_axes(x, maps, nullptr, out);
}

// ---- ConstantOfShape and Size ---------------------------------------------------------------

// The fill value: the one-element tensor 'value', or f32 0 when it is absent.
Tensor constant_of_shape_value(const ir::Node& node) {
  const Tensor* v = node.get_tensor("value");
  if (!v) return Tensor(DType::kF32, {});
  TESSEL_USER_CHECK(v->numel() == 1)
      << node.label() << ": 'value' is " << v->type_str() << ", expected a tensor of one element";
  return *v;
}

void register_constant_of_shape(ir::OpRegistry& r) {
  r.add({.name = "ConstantOfShape",
         .infer =
             [](ir::InferContext& ctx) {
               TESSEL_USER_CHECK(ctx.dtype(0) == DType::kI64 && ctx.rank(0) == 1)
                   << ctx.node().label() << ": input has type " << ctx.input(0).str()
                   << ", expected a 1-D i64 shape";
               ctx.set_output(0, constant_of_shape_value(ctx.node()).dtype(),
                              require_extents(ctx, 0, "input"));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor v = constant_of_shape_value(ctx.node());
               Tensor& out = ctx.output(0);
               const size_t esize = dtype_size(out.dtype());
               for (int64_t i = 0; i < out.numel(); ++i)
                 std::memcpy(out.raw() + static_cast<size_t>(i) * esize, v.raw(), esize);
             }});
}

void register_size(ir::OpRegistry& r) {
  r.add({.name = "Size",
         .infer = [](ir::InferContext& ctx) { ctx.set_output(0, DType::kI64, {}); },
         .compute =
             [](ir::KernelContext& ctx) {
               ctx.output(0).data<int64_t>()[0] = ctx.input(0).numel();
             }});
}

// ---- Range ----------------------------------------------------------------------------------

// Range's element count max(ceil((limit - start) / delta), 0). Integers are computed exactly
// in unsigned arithmetic (limit - start may not fit int64); floats in double, like numpy's
// arange. The count is capped just above kMaxElements so that set_output reports it.
int64_t range_count(const ir::Node& node, const Tensor& start, const Tensor& limit,
                    const Tensor& delta) {
  if (is_float(start.dtype())) {
    const double d = delta.get_f64(0);
    TESSEL_USER_CHECK(d != 0 && std::isfinite(d))
        << node.label() << ": delta is " << d << ", expected a finite non-zero value";
    const double n = std::ceil((limit.get_f64(0) - start.get_f64(0)) / d);
    TESSEL_USER_CHECK(!std::isnan(n)) << node.label() << ": start and limit must be finite";
    return n <= 0 ? 0 : static_cast<int64_t>(std::min(n, static_cast<double>(kMaxElements + 1)));
  }
  const int64_t s = start.get_i64(0), l = limit.get_i64(0), d = delta.get_i64(0);
  TESSEL_USER_CHECK(d != 0) << node.label() << ": delta is 0";
  if (d > 0 ? l <= s : l >= s) return 0;
  const uint64_t span = d > 0 ? static_cast<uint64_t>(l) - static_cast<uint64_t>(s)
                              : static_cast<uint64_t>(s) - static_cast<uint64_t>(l);
  const uint64_t step = d > 0 ? static_cast<uint64_t>(d) : uint64_t{0} - static_cast<uint64_t>(d);
  const uint64_t n = span / step + (span % step != 0);
  return static_cast<int64_t>(std::min<uint64_t>(n, kMaxElements + 1));
}

void infer_range(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 0, kRangeTypes);
  static constexpr const char* kNames[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    check_same_dtype(ctx, 0, i);
    TESSEL_USER_CHECK(ctx.rank(i) <= 1 && numel(ctx.shape(i)) == 1)
        << node.label() << ": '" << kNames[i] << "' has shape " << shape_str(ctx.shape(i))
        << ", expected a scalar";
  }
  const int64_t n = range_count(node, ctx.require_value(0, "start"), ctx.require_value(1, "limit"),
                                ctx.require_value(2, "delta"));
  ctx.set_output(0, ctx.dtype(0), {n});
}

// output[i] = start + i * delta, in double for floats and wrapping int64 for integers (every
// value lies between start and limit, so nothing actually wraps).
void compute_range(ir::KernelContext& ctx) {
  const Tensor &start = ctx.input(0), &delta = ctx.input(2);
  Tensor& out = ctx.output(0);
  visit_dtype<float, double, int32_t, int64_t>(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        p[i] = static_cast<T>(start.get_f64(0) + static_cast<double>(i) * delta.get_f64(0));
      } else {
        const uint64_t v = static_cast<uint64_t>(start.get_i64(0)) +
                           static_cast<uint64_t>(i) * static_cast<uint64_t>(delta.get_i64(0));
        p[i] = static_cast<T>(static_cast<int64_t>(v));
      }
    }
  });
}

// ---- GatherElements -------------------------------------------------------------------------

// out[i_0, ..., i_{r-1}] = data[i_0, ..., indices[i_0, ..., i_{r-1}], ..., i_{r-1}] with the
// index replacing coordinate `axis`. The output has the indices' shape, which may be smaller
// than data's off the axis (as onnxruntime and PyTorch's gather allow).
void infer_gather_elements(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 1, kIndexTypes);
  const Shape &data = ctx.shape(0), &indices = ctx.shape(1);
  TESSEL_USER_CHECK(!data.empty() && indices.size() == data.size())
      << node.label() << ": indices " << shape_str(indices) << " must have the rank of data "
      << shape_str(data) << " (at least 1)";
  const int64_t axis = normalize_axis(node, node.get_int("axis", 0), ctx.rank(0), "axis");
  for (size_t d = 0; d < data.size(); ++d)
    TESSEL_USER_CHECK(static_cast<int64_t>(d) == axis || indices[d] <= data[d])
        << node.label() << ": indices " << shape_str(indices) << " exceed data " << shape_str(data)
        << " along axis " << d;
  ctx.set_output(0, ctx.dtype(0), indices);
}

void compute_gather_elements(ir::KernelContext& ctx) {
  const Tensor &data = ctx.input(0), &indices = ctx.input(1);
  Tensor& out = ctx.output(0);
  const size_t rank = static_cast<size_t>(data.rank());
  const int64_t axis =
      normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), data.rank(), "axis");
  const int64_t extent = data.dim(axis);
  const std::vector<int64_t> strides = strides_of(data.shape());
  const size_t esize = dtype_size(data.dtype());
  std::vector<int64_t> coord(rank, 0);  // odometer over the output (= indices) shape
  int64_t base = 0;                     // data offset of coord with coordinate `axis` at 0
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t k = indices.get_i64(i);
    TESSEL_USER_CHECK(k >= -extent && k < extent)
        << ctx.node().label() << ": index " << k << " is out of range for axis " << axis
        << " of extent " << extent;
    const int64_t src = base + (k < 0 ? k + extent : k) * strides[static_cast<size_t>(axis)];
    std::memcpy(out.raw() + static_cast<size_t>(i) * esize,
                data.raw() + static_cast<size_t>(src) * esize, esize);
    for (size_t d = rank; d-- > 0;) {
      const int64_t step = static_cast<int64_t>(d) == axis ? 0 : strides[d];
      base += step;
      if (++coord[d] < out.dim(static_cast<int64_t>(d))) break;
      base -= step * out.dim(static_cast<int64_t>(d));
      coord[d] = 0;
    }
  }
}

// ---- CumSum ---------------------------------------------------------------------------------

// CumSum's axis: input 1, a scalar (or one-element 1-D) i32/i64.
int64_t cumsum_axis(const ir::Node& node, const Tensor& axis, int64_t rank) {
  TESSEL_USER_CHECK(axis.numel() == 1 && axis.rank() <= 1)
      << node.label() << ": 'axis' has shape " << shape_str(axis.shape()) << ", expected a scalar";
  return normalize_axis(node, axis.get_i64(0), rank, "axis");
}

void infer_cumsum(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 0, kCumSumTypes);
  check_dtype(ctx, 1, kIndexTypes);
  TESSEL_USER_CHECK(ctx.rank(0) >= 1) << node.label() << ": input x must have rank >= 1";
  // The axis does not change the shape; it is checked here when already known.
  if (const Tensor* axis = ctx.value(1)) cumsum_axis(node, *axis, ctx.rank(0));
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

// Running sums along the axis, viewed as (outer, n, inner). 'exclusive' leaves the current
// element out of its own sum; 'reverse' runs from the end. f16/bf16 accumulate in f32 and
// integers wrap around.
void compute_cumsum(ir::KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  const Tensor& in = ctx.input(0);
  const int64_t axis = cumsum_axis(node, ctx.input(1), in.rank());
  const bool exclusive = node.get_int("exclusive", 0) != 0;
  const bool reverse = node.get_int("reverse", 0) != 0;
  const bool narrow = in.dtype() == DType::kF16 || in.dtype() == DType::kBF16;
  const Tensor x = narrow ? in.cast(DType::kF32) : in;
  Tensor y(x.dtype(), x.shape());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(axis);
  visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Integers accumulate unsigned, where overflow wraps instead of being undefined.
    using Acc = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                            std::type_identity<T>>::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        Acc sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = o * n * inner + (reverse ? n - 1 - j : j) * inner + i;
          if (exclusive) py[at] = static_cast<T>(sum);
          sum = static_cast<Acc>(sum + static_cast<Acc>(px[at]));
          if (!exclusive) py[at] = static_cast<T>(sum);
        }
      }
    }
  });
  ctx.output(0) = narrow ? y.cast(in.dtype()) : y;
}

}  // namespace

void register_tensor_generate_ops(ir::OpRegistry& r) {
  r.add({.name = "Expand",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.dtype(0), expand_shape(ctx)); },
         .compute = compute_expand});
  r.add({.name = "Tile",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.dtype(0), tile_shape(ctx)); },
         .compute = compute_tile});
  register_constant_of_shape(r);
  register_size(r);
  r.add({.name = "Range",
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_range,
         .compute = compute_range});
  r.add({.name = "GatherElements",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_gather_elements,
         .compute = compute_gather_elements});
  r.add({.name = "CumSum",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_cumsum,
         .compute = compute_cumsum});
}

}  // namespace tessel::ops
