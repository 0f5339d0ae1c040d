#include "ops/flops.h"

#include <set>
#include <string>

namespace tessel::ops {
namespace {

int64_t out_elems(const ir::Graph& g, const ir::Node& n) {
  return n.outputs.empty() ? 0 : numel(g.type(n.outputs[0]).shape);
}

const Shape& in_shape(const ir::Graph& g, const ir::Node& n, size_t i) {
  return g.type(n.inputs[i]).shape;
}

}  // namespace

int64_t node_flops(const ir::Graph& g, const ir::Node& n) {
  static const std::set<std::string> kMovement = {
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
      "Gather", "Shape", "Identity", "Dropout", "Constant", "Cast", "Pad", "DepthToSpace",
      "SpaceToDepth"};
  if (kMovement.count(n.op) || n.outputs.empty()) return 0;
  const int64_t out = out_elems(g, n);
  if (n.op == "Conv" || n.op == "ConvInteger" || n.op == "QLinearConv") {
    // Each output element reduces over (C_in / group) * prod(kernel).
    size_t w = n.op == "QLinearConv" ? 3 : 1;
    const Shape& ws = in_shape(g, n, w);
    int64_t k = 1;
    for (size_t i = 1; i < ws.size(); ++i) k *= ws[i];
    return 2 * out * k;
  }
  if (n.op == "ConvTranspose") {
    const Shape& xs = in_shape(g, n, 0);
    const Shape& ws = in_shape(g, n, 1);  // (C_in, C_out / group, k...)
    int64_t k = 1;
    for (size_t i = 1; i < ws.size(); ++i) k *= ws[i];
    return 2 * numel(xs) * k;
  }
  if (n.op == "Gemm" || n.op == "MatMul" || n.op == "MatMulInteger" || n.op == "QLinearMatMul") {
    size_t a = 0;
    const Shape& as = in_shape(g, n, a);
    int64_t k = as.empty() ? 1 : as.back();
    if (n.op == "Gemm" && n.get_int("transA", 0)) k = as.front();
    return 2 * out * k;
  }
  if (n.op == "MaxPool" || n.op == "AveragePool") {
    int64_t k = 1;
    for (int64_t d : n.get_ints("kernel_shape")) k *= d;
    return out * k;
  }
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool" || n.op == "ReduceMean")
    return numel(in_shape(g, n, 0));
  return out;
}

int64_t node_parameters(const ir::Graph& g, const ir::Node& n) {
  int64_t p = 0;
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue && g.value(v).is_constant()) p += g.value(v).data->numel();
  return p;
}

}  // namespace tessel::ops
