// Evaluates nodes whose inputs are all constant at compile time, and Shape / Size of any value
// (they read only its static type), but one kind: the
// DequantizeLinear of a QDQ model's conv and dense weights (an integer constant, per tensor or
// per output channel, read only as the weight of one Conv or Gemm) stays, so that
// convert-layout and fold-qdq still see the int8 weights and their scales; fold-qdq folds
// whatever it does not make an int8 contraction.
#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

// Folding must not turn a small graph into a huge constant (ConstantOfShape, Expand).
constexpr int64_t kMaxFoldedElements = int64_t{1} << 26;

// For each value read only as the weight (input 1) of Conv or Gemm nodes: the axis of its output
// channels (0 for Conv's OIHW and Gemm's transB = 1 [N, K], 1 for Gemm's [K, N]); -1 otherwise.
std::vector<int> weight_channel_axis(const ir::Graph& g) {
  std::vector<int> axis(g.values.size(), -1);
  std::vector<char> other(g.values.size(), 0);
  for (const ir::Node& n : g.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::ValueId v = n.inputs[i];
      if (v == ir::kNoValue) continue;
      const bool weight = i == 1 && (n.op == "Conv" || n.op == "Gemm");
      const int a = n.op == "Gemm" && n.get_int("transB", 0) == 0 ? 1 : 0;
      if (!weight || (axis[v] >= 0 && axis[v] != a)) other[v] = 1;
      else axis[v] = a;
    }
  for (ir::ValueId v : g.outputs) other[v] = 1;
  for (size_t v = 0; v < axis.size(); ++v)
    if (other[v]) axis[v] = -1;
  return axis;
}

bool is_quantized_weight(const ir::Graph& g, const ir::Node& n, const std::vector<int>& axis) {
  if (n.op != "DequantizeLinear" || n.outputs.size() != 1 || axis[n.outputs[0]] < 0) return false;
  const ir::Value& q = g.value(n.inputs[0]);
  const size_t rank = q.type.shape.size();
  if (!q.is_constant() || !is_integer(q.type.dtype) || (rank != 4 && rank != 2)) return false;
  if (n.get_int("block_size", 0) != 0) return false;
  const bool per_tensor = numel(g.type(n.inputs[1]).shape) == 1;
  const int64_t a = n.get_int("axis", 1);
  return per_tensor || (a < 0 ? a + static_cast<int64_t>(rank) : a) == axis[n.outputs[0]];
}

}  // namespace

ir::Graph fold_constants(ir::Graph g) {
  const ir::OpRegistry& registry = ir::OpRegistry::global();
  const std::vector<int> weight_axis = weight_channel_axis(g);
  std::vector<char> erase(g.nodes.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const ir::OpSchema* schema = registry.find(n.op);
    if (!schema || !schema->foldable) continue;
    if (is_quantized_weight(g, n, weight_axis)) continue;
    bool all_constant = true;
    std::vector<const ir::TensorType*> types;
    std::vector<const Tensor*> values;
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue) {
        types.push_back(nullptr);
        values.push_back(nullptr);
        continue;
      }
      all_constant &= g.value(v).is_constant();
      types.push_back(&g.value(v).type);
      values.push_back(g.value(v).data.get());
    }
    // Shape and Size read only their input's type, which is static: PyTorch's dynamic-axes
    // exports compute flatten sizes and interpolate targets from them.
    if (!all_constant && (n.op == "Shape" || n.op == "Size") && n.outputs.size() == 1) {
      const Shape& s = g.type(n.inputs[0]).shape;
      Tensor value = n.op == "Shape" ? ir::shape_value(n, s) : Tensor(DType::kI64, {});
      if (n.op == "Size") value.data<int64_t>()[0] = numel(s);
      ir::Value& out = g.value(n.outputs[0]);
      TESSEL_ICHECK(out.type.dtype == value.dtype() && out.type.shape == value.shape())
          << n.label() << ": folded " << value.shape().size() << "-D value differs from inferred "
          << out.type.str();
      out.data = std::make_shared<const Tensor>(std::move(value));
      erase[i] = 1;
      changed = true;
      continue;
    }
    if (!all_constant) continue;
    int64_t out_elems = 0;
    for (ir::ValueId v : n.outputs) out_elems += numel(g.type(v).shape);
    if (out_elems > kMaxFoldedElements) continue;
    std::vector<ir::TensorType> out_types = ir::infer_node(*schema, n, types, values, g.opset);
    std::vector<Tensor> outs;
    for (const ir::TensorType& t : out_types) outs.emplace_back(t.dtype, t.shape);
    ir::KernelContext ctx(n, values, outs, g.opset);
    schema->compute(ctx);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ir::Value& out = g.value(n.outputs[k]);
      TESSEL_ICHECK(out.type == out_types[k]) << n.label() << ": folded type " << out_types[k].str()
                                              << " differs from inferred " << out.type.str();
      out.data = std::make_shared<const Tensor>(std::move(outs[k]));
    }
    erase[i] = 1;
    changed = true;
  }
  if (!changed) return g;
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
