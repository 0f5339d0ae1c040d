// fuse-mul-quantize: a float Mul whose product only a per-tensor QuantizeLinear reads becomes
// one tessel.MulQuantizeLinear:
//
//   %p = Mul(%a, %b) : f16[N,H,W,C]                %q = tessel.MulQuantizeLinear(%a, %b, %s, %z)
//   %q = QuantizeLinear(%p, %s, %z) : i8[...]  ->       : i8[N,H,W,C]
//
// The same integers up to one f32 rounding (the op multiplies by the scale's reciprocal, as the
// int8 epilogues do: a value within an ulp of a rounding tie may land one step away), one
// kernel where there were two, and no float tensor between them. This is a quantized
// squeeze-excite block's gate (EfficientNet, MobileNet-v3, RegNet-Y: features times a
// per-image, per-channel sigmoid, then the QuantizeLinear before the int8 projection conv),
// which no contraction absorbs: the gate is computed from the features' mean. Run last among
// the fusions: a Mul that fuse folds into a contraction's epilogue (a SiLU, a per-channel
// constant) is gone by then, and the QuantizeLinear still stands alone.
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {

ir::Graph fuse_mul_quantize(ir::Graph g) {
  const std::vector<std::vector<int>> users = g.users();
  std::vector<char> erase(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& mul = g.nodes[i];
    if (mul.op != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    if (!is_float_storage(g.type(mul.outputs[0]).dtype)) continue;
    const int qi = sole_tensor_quantize(g, users, mul.outputs[0]);
    if (qi < 0) continue;
    ir::Node& q = g.nodes[qi];
    // The fused node takes the QuantizeLinear's place: a and b are written before the Mul, so
    // before it, and every reader of its output comes after it.
    std::vector<ir::ValueId> inputs = {mul.inputs[0], mul.inputs[1], q.inputs[1]};
    if (q.inputs.size() > 2 && q.inputs[2] != ir::kNoValue) inputs.push_back(q.inputs[2]);
    q.op = "tessel.MulQuantizeLinear";
    q.inputs = std::move(inputs);
    q.attrs.clear();  // axis: a per-tensor scale has none that matters
    erase[i] = 1;
  }
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
