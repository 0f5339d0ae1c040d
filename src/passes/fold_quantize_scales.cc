// fold-quantize-scales: each fused QuantizeLinear's division moved into the multiplication
// before it (ops::fold_quantize_scales states the rule and its rounding), so that an int8
// epilogue multiplies once per output where it multiplied twice. The one that reaches the
// accumulator goes into the int8 contraction's dequantization scale S and its bias B,
// per-channel constants scaled here once: the kernels' leading FFMA (v * S + B, emit.cc) then
// yields the quotient directly.
//
// Applies to tessel.Conv and tessel.Gemm with an epilogue. A factor bound for S and B needs
// both constant (fold-qdq writes them so); otherwise that quantize keeps its scale.
#include "ops/tessel_epilogue.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

constexpr size_t kBias = 2, kScale = 4;  // tessel.Conv / tessel.Gemm inputs (ops/tessel_ops.h)

bool has_input(const ir::Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; }

// f32 `t` times f, each product rounded once from double.
Tensor scaled(const Tensor& t, double f) {
  Tensor r(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) r.data<float>()[i] = static_cast<float>(t.get_f64(i) * f);
  return r;
}

}  // namespace

ir::Graph fold_quantize_scales(ir::Graph g) {
  UniqueNames names = UniqueNames::of_values(g);
  for (ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv" && n.op != "tessel.Gemm") continue;
    const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
    auto constant_f32 = [&](size_t i) {
      return g.value(n.inputs[i]).is_constant() && g.type(n.inputs[i]).dtype == DType::kF32;
    };
    const bool lead = has_input(n, kScale) && constant_f32(kScale) && (!has_input(n, kBias) || constant_f32(kBias));
    ops::QuantizeScaleFold fold = ops::fold_quantize_scales(steps, lead);
    if (fold.steps == steps) continue;
    if (fold.lead_factor != 1.0) {
      for (size_t input : {kScale, kBias}) {
        if (!has_input(n, input)) continue;
        const ir::Value& v = g.value(n.inputs[input]);
        const std::string name = names.fresh(v.name + ".over_q");
        n.inputs[input] = g.add_constant(name, scaled(*v.data, fold.lead_factor));
      }
    }
    ops::write_epilogue(n, fold.steps);
  }
  g.compact();  // drops the constants left unused
  return g;
}

}  // namespace tessel::passes
