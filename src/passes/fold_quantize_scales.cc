// fold-quantize-scales: each fused QuantizeLinear's division moved into the multiplication
// before it (ops::fold_quantize_scales states the rule and its rounding), so that an int8
// epilogue multiplies once per output where it multiplied twice. The one that reaches the
// accumulator goes into the int8 contraction's dequantization scale S and its bias B,
// per-channel constants scaled here once: the kernels' leading FFMA (v * S + B, emit.cc) then
// yields the quotient directly.
// unit-quantize, after it: each saturated rounding's range scaled into [0, 1] by the
// multiplication before it (ops::fold_unit_quantize), S and B taking the factor and the offset
// where it reaches the accumulator, so that the kernels saturate in that FFMA.
//
// Both apply to tessel.Conv and tessel.Gemm with an epilogue. A factor bound for S and B needs
// both constant (fold-qdq writes them so); otherwise that rounding stays as it is.
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

constexpr int kBias = ops::kBiasInput, kScale = ops::kScaleInput;  // tessel.Conv / tessel.Gemm inputs

bool has_input(const ir::Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; }

// f32 `t` times f plus `offset`, each rounded once from double.
Tensor scaled(const Tensor& t, double f, double offset = 0.0) {
  Tensor r(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) r.data<float>()[i] = static_cast<float>(t.get_f64(i) * f + offset);
  return r;
}

// Whether n's S (and B, where given) are f32 constants that a fold may scale.
bool constant_lead(const ir::Graph& g, const ir::Node& n) {
  auto constant_f32 = [&](size_t i) {
    return g.value(n.inputs[i]).is_constant() && g.type(n.inputs[i]).dtype == DType::kF32;
  };
  return has_input(n, kScale) && constant_f32(kScale) && (!has_input(n, kBias) || constant_f32(kBias));
}

}  // namespace

ir::Graph fold_quantize_scales(ir::Graph g) {
  UniqueNames names = UniqueNames::of_values(g);
  for (ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv" && n.op != "tessel.Gemm") continue;
    const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
    ops::QuantizeScaleFold fold = ops::fold_quantize_scales(steps, constant_lead(g, n));
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

ir::Graph fold_unit_quantize(ir::Graph g) {
  UniqueNames names = UniqueNames::of_values(g);
  for (ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv" && n.op != "tessel.Gemm") continue;
    const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
    const bool lead = constant_lead(g, n);
    // S and B on the exact grid (power-of-two scales): their roundings keep their ties.
    bool on_grid = lead;
    for (size_t input : {kScale, kBias}) {
      if (!lead || !has_input(n, input)) continue;
      const Tensor& t = *g.value(n.inputs[input]).data;
      for (int64_t i = 0; i < t.numel() && on_grid; ++i) on_grid = ops::on_exact_grid(t.get_f64(i));
    }
    ops::UnitQuantizeFold fold = ops::fold_unit_quantize(steps, lead, on_grid);
    if (fold.steps == steps) continue;
    if (fold.lead_factor != 1.0 || fold.lead_offset != 0.0) {
      const Tensor& s = *g.value(n.inputs[kScale]).data;
      n.inputs[kScale] = g.add_constant(names.fresh(g.value(n.inputs[kScale]).name + ".unit"),
                                        scaled(s, fold.lead_factor));
      // B f + offset; a conv without B gets one of the offset alone.
      const bool bias = has_input(n, kBias);
      const Tensor b = bias ? *g.value(n.inputs[kBias]).data : Tensor(DType::kF32, s.shape());
      const std::string name = bias ? g.value(n.inputs[kBias]).name + ".unit" : n.name + ".unit_bias";
      if (n.inputs.size() <= kBias) n.inputs.resize(kBias + 1, ir::kNoValue);
      n.inputs[kBias] = g.add_constant(names.fresh(name), scaled(b, bias ? fold.lead_factor : 0.0, fold.lead_offset));
    }
    ops::write_epilogue(n, fold.steps);
  }
  g.compact();  // drops the constants left unused
  return g;
}

}  // namespace tessel::passes
