// The reduce op family: Softmax, LogSoftmax and ReduceMean, and the helpers every Reduce* op
// shares (reduce_common.h); the other reductions are in reduce_more.cc. Kernels accumulate in
// double and round once on store.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/all_ops.h"
#include "ops/more_ops.h"
#include "ops/nn_common.h"
#include "ops/reduce_common.h"

namespace tessel::ops {
namespace {

// ---- Softmax / LogSoftmax -----------------------------------------------------------------

// Softmax views its input as (outer, n, inner) and normalises along n. The axis attribute
// changed meaning in opset 13:
//  - opsets 1-12: the input is coerced to 2-D at `axis` (default 1), so the softmax runs over
//    all of dims [axis, rank) at once: n = prod(shape[axis:]), inner = 1;
//  - opset 13+: a single axis (default -1): n = shape[axis], inner = prod(shape[axis+1:]).
struct SoftmaxView {
  int64_t outer = 1, n = 1, inner = 1;
};

SoftmaxView softmax_view(const ir::Node& node, const Shape& shape, int64_t opset) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerce_2d = opset < 13;
  int64_t axis = node.get_int("axis", coerce_2d ? 1 : -1);
  // Coercion at axis == rank is legal (n = 1); a single axis must name a dim.
  const int64_t end = coerce_2d ? rank + 1 : rank;
  TESSEL_USER_CHECK(rank >= 1 && axis >= -rank && axis < end)
      << node.label() << ": axis " << axis << " out of range for input of shape "
      << shape_str(shape) << " (opset " << opset << ")";
  if (axis < 0) axis += rank;
  SoftmaxView v;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      v.outer *= shape[d];
    } else if (d == axis || coerce_2d) {
      v.n *= shape[d];
    } else {
      v.inner *= shape[d];
    }
  }
  return v;
}

void infer_softmax(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "input");
  softmax_view(ctx.node(), ctx.shape(0), ctx.opset());
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

template <bool kLog>
void compute_softmax(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const SoftmaxView v = softmax_view(ctx.node(), x.shape(), ctx.opset());
  std::vector<double> e(static_cast<size_t>(v.n));
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      // Subtracting the maximum keeps exp() in range for large inputs.
      double max = -INFINITY;
      for (int64_t j = 0; j < v.n; ++j) max = std::max(max, x.get_f64(base + j * v.inner));
      double sum = 0;
      for (int64_t j = 0; j < v.n; ++j) {
        e[j] = std::exp(x.get_f64(base + j * v.inner) - max);
        sum += e[j];
      }
      const double log_sum = std::log(sum);
      for (int64_t j = 0; j < v.n; ++j) {
        const int64_t at = base + j * v.inner;
        y.set_f64(at, kLog ? x.get_f64(at) - max - log_sum : e[j] / sum);
      }
    }
  }
}

// ---- ReduceMean -----------------------------------------------------------------------------

void infer_reduce_mean(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  DType t = ctx.dtype(0);
  TESSEL_USER_CHECK(is_float(t) || t == DType::kI32 || t == DType::kI64)
      << node.label() << ": input data has dtype " << dtype_name(t)
      << ", expected f32, f16, bf16, f64, i32 or i64";
  ctx.set_output(0, t, plan_reduce(node, ctx.shape(0), infer_reduce_axes(ctx, 18)).out_shape);
}

void compute_reduce_mean(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ReducePlan p = plan_reduce(ctx.node(), x.shape(), reduce_axes(ctx));
  Tensor& y = ctx.output(0);
  std::vector<double> sum(static_cast<size_t>(y.numel()), 0.0);
  for_each_reduced(x.shape(), p, [&](int64_t out, int64_t in) { sum[out] += x.get_f64(in); });
  // Integer means truncate toward zero, as numpy's astype in ONNX's reference does. A
  // reduction over zero elements is 0 / 0 = NaN.
  for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, sum[i] / static_cast<double>(p.count));
}

}  // namespace

// ---- shared by the Reduce* ops (reduce_common.h) --------------------------------------------

ReducePlan plan_reduce(const ir::Node& node, const Shape& in, const std::vector<int64_t>& axes) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const bool keepdims = node.get_int("keepdims", 1) != 0;
  const bool noop = node.get_int("noop_with_empty_axes", 0) != 0;
  ReducePlan p;
  p.identity = axes.empty() && noop;
  p.reduced.assign(in.size(), axes.empty() && !noop);
  for (int64_t a : axes) {
    TESSEL_USER_CHECK(a >= -rank && a < rank)
        << node.label() << ": axis " << a << " out of range for input of shape " << shape_str(in);
    int64_t d = a < 0 ? a + rank : a;
    TESSEL_USER_CHECK(!p.reduced[d]) << node.label() << ": axis " << a << " is listed twice";
    p.reduced[d] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (!p.reduced[d]) {
      p.out_shape.push_back(in[d]);
    } else {
      p.count *= in[d];
      if (keepdims) p.out_shape.push_back(1);
    }
  }
  return p;
}

std::vector<int64_t> infer_reduce_axes(const ir::InferContext& ctx, int64_t axes_input_since) {
  const ir::Node& node = ctx.node();
  if (ctx.opset() < axes_input_since) {
    TESSEL_USER_CHECK(!ctx.has_input(1)) << node.label() << ": 'axes' is an attribute before opset "
                                         << axes_input_since << ", not an input";
    return node.get_ints("axes");
  }
  TESSEL_USER_CHECK(!node.has_attr("axes")) << node.label() << ": 'axes' is input 1 since opset "
                                            << axes_input_since << ", not an attribute";
  if (!ctx.has_input(1)) return {};
  TESSEL_USER_CHECK(ctx.dtype(1) == DType::kI64 && ctx.rank(1) == 1)
      << node.label() << ": input axes has type " << ctx.input(1).str()
      << ", expected a 1-D i64 tensor";
  return ctx.require_value(1, "axes").to_i64_vector();
}

std::vector<int64_t> reduce_axes(const ir::KernelContext& ctx) {
  if (ctx.has_input(1)) return ctx.input(1).to_i64_vector();
  return ctx.node().get_ints("axes");
}

void register_reduce_ops(ir::OpRegistry& r) {
  r.add({.name = "Softmax", .infer = infer_softmax, .compute = compute_softmax<false>});
  r.add({.name = "LogSoftmax", .infer = infer_softmax, .compute = compute_softmax<true>});
  r.add({.name = "ReduceMean",
         .min_inputs = 1,
         .max_inputs = 2,
         .infer = infer_reduce_mean,
         .compute = compute_reduce_mean});
  register_reduce_more_ops(r);
}

}  // namespace tessel::ops
