// FLOPs per node, by the op's FlopRule (ops/op_facts.cc): the tessel.* ops count as their ONNX
// forms (tessel.Conv's OHWI weights have the same product of non-leading extents as OIHW).
#include "ops/flops.h"

#include "ir/op_registry.h"

namespace tessel::ops {
namespace {

// Product of a shape's extents from `first` on.
int64_t extent_from(const Shape& s, size_t first) {
  int64_t k = 1;
  for (size_t i = first; i < s.size(); ++i) k *= s[i];
  return k;
}

}  // namespace

int64_t node_flops(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.empty()) return 0;
  const int64_t out = numel(g.type(n.outputs[0]).shape);
  auto in = [&](size_t i) -> const Shape& { return g.type(n.inputs.at(i)).shape; };
  switch (ir::OpRegistry::global().facts(n.op).flops) {
    case ir::FlopRule::kZero:
      return 0;
    case ir::FlopRule::kPerOutput:
      return out;
    case ir::FlopRule::kPerInput:
      return numel(in(0));
    case ir::FlopRule::kConv:
      // Each output element reduces over (C_in / group) * prod(kernel): W's non-leading extents.
      return 2 * out * extent_from(in(n.op == "QLinearConv" ? 3 : 1), 1);
    case ir::FlopRule::kConvTranspose:
      // W is (C_in, C_out / group, k...): each input element scatters into that many outputs.
      return 2 * numel(in(0)) * extent_from(in(1), 1);
    case ir::FlopRule::kGemm: {
      const Shape& a = in(0);
      int64_t k = a.empty() ? 1 : a.back();
      if ((n.op == "Gemm" && n.get_int("transA", 0)) || (n.op == "tessel.Gemm" && n.get_int("trans_a", 0)))
        k = a.front();
      return 2 * out * k;
    }
    case ir::FlopRule::kWindow: {
      int64_t k = 1;
      for (int64_t d : n.get_ints("kernel_shape")) k *= d;
      return out * k;
    }
  }
  return out;
}

int64_t node_parameters(const ir::Graph& g, const ir::Node& n) {
  int64_t p = 0;
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue && g.value(v).is_constant()) p += g.value(v).data->numel();
  return p;
}

}  // namespace tessel::ops
