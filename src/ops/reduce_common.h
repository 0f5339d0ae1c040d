// What the Reduce* ops share (reduce.cc's ReduceMean, reduce_more.cc's other reductions): which
// axes a node reduces, the output shape that follows, and the walk that pairs every input
// element with the output element it reduces into. Defined in reduce.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::ops {

// The reduced axes of one node applied to an input shape. An empty axis list reduces every
// axis, or none with noop_with_empty_axes, when the output is the input unchanged.
struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;            // with keepdims, reduced dims are kept as 1
  int64_t count = 1;          // input elements per output element
  bool identity = false;      // noop_with_empty_axes with no axes: output = input
};

// The plan for input shape `in` and the node's 'keepdims' and 'noop_with_empty_axes'; `axes`
// may be negative. An axis out of range or listed twice is a UserError naming the node.
ReducePlan plan_reduce(const ir::Node& node, const Shape& in, const std::vector<int64_t>& axes);

// The 'axes' operand at inference: the attribute before opset `axes_input_since` (13 for
// ReduceSum, 18 for the others), optional input 1 (a constant 1-D i64) from then on. The
// wrong form for the opset is a UserError.
std::vector<int64_t> infer_reduce_axes(const ir::InferContext& ctx, int64_t axes_input_since);

// The 'axes' operand at run time: input 1 when present (infer_reduce_axes has checked the form
// for the opset), else the attribute.
std::vector<int64_t> reduce_axes(const ir::KernelContext& ctx);

// Calls f(out, in) for every flat input index `in`, in order, with `out` the flat index of the
// output element it reduces into under `plan`.
template <typename F>
void for_each_reduced(const Shape& in_shape, const ReducePlan& plan, F&& f) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  // Stride of each input dim in the output (0 along reduced dims).
  std::vector<int64_t> out_strides(in_shape.size(), 0);
  for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
    if (plan.reduced[static_cast<size_t>(d)]) continue;
    out_strides[static_cast<size_t>(d)] = s;
    s *= in_shape[static_cast<size_t>(d)];
  }
  std::vector<int64_t> coord(in_shape.size(), 0);
  int64_t out = 0;
  for (int64_t i = 0, n = numel(in_shape); i < n; ++i) {
    f(out, i);
    for (int64_t d = rank - 1; d >= 0; --d) {
      const size_t u = static_cast<size_t>(d);
      out += out_strides[u];
      if (++coord[u] < in_shape[u]) break;
      out -= out_strides[u] * in_shape[u];
      coord[u] = 0;
    }
  }
}

}  // namespace tessel::ops
