#include "ops/tessel_epilogue.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/quant_common.h"

namespace tessel::ops {
namespace {

struct KindName {
  EpilogueKind kind;
  std::string_view name;
  bool uses_alpha;
  bool uses_beta;
};

constexpr KindName kKinds[] = {
    {EpilogueKind::kRelu, "relu", false, false},
    {EpilogueKind::kLeakyRelu, "leaky_relu", true, false},
    {EpilogueKind::kClip, "clip", true, true},
    {EpilogueKind::kSigmoid, "sigmoid", false, false},
    {EpilogueKind::kHardSwish, "hardswish", false, false},
    {EpilogueKind::kSilu, "silu", false, false},
    {EpilogueKind::kGelu, "gelu", false, false},
    {EpilogueKind::kGeluTanh, "gelu_tanh", false, false},
    {EpilogueKind::kAddResidual, "add_residual", false, false},
    {EpilogueKind::kMul, "mul", true, false},
    {EpilogueKind::kQuantize, "quantize", true, false},
    {EpilogueKind::kAddScaledResidual, "add_residual_scaled", true, false},
    {EpilogueKind::kTanh, "tanh", false, false},
    {EpilogueKind::kMish, "mish", false, false},
    {EpilogueKind::kHardSigmoid, "hard_sigmoid", true, true},
    {EpilogueKind::kElu, "elu", true, false},
    {EpilogueKind::kRound, "round", true, false},
    {EpilogueKind::kSiluQuantizedGate, "silu_qgate", true, true},
    {EpilogueKind::kQuantizeUnit, "quantize_unit", true, true},
};

const KindName& info(EpilogueKind kind) {
  for (const KindName& k : kKinds)
    if (k.kind == kind) return k;
  TESSEL_ICHECK(false) << "epilogue kind " << static_cast<int>(kind) << " has no name";
  return kKinds[0];
}

// The 'store' attribute's spellings.
struct StoreName {
  StoreMap::Kind kind;
  std::string_view name;
};

constexpr StoreName kStores[] = {
    {StoreMap::Kind::kNhwc, "nhwc"},
    {StoreMap::Kind::kNchw, "nchw"},
    {StoreMap::Kind::kDepthToSpace, "depth_to_space"},
    {StoreMap::Kind::kDepthToSpaceNchw, "depth_to_space_nchw"},
};

// Sigmoid in the form whose exp() never overflows.
double sigmoid(double v) {
  if (v >= 0) return 1.0 / (1.0 + std::exp(-v));
  const double e = std::exp(v);
  return e / (1.0 + e);
}

// Written so that NaN propagates, as in the ONNX ops these steps replace.
double clamp_nan(double v, double lo, double hi) {
  const double t = v < lo ? lo : v;
  return t > hi ? hi : t;
}

}  // namespace

std::string_view epilogue_name(EpilogueKind kind) { return info(kind).name; }

std::optional<EpilogueKind> epilogue_kind(std::string_view name) {
  for (const KindName& k : kKinds)
    if (k.name == name) return k.kind;
  return std::nullopt;
}

std::vector<EpilogueStep> read_epilogue(const ir::Node& node) {
  std::vector<std::string> names;
  if (auto it = node.attrs.find("epilogue"); it != node.attrs.end()) {
    const auto* list = std::get_if<std::vector<std::string>>(&it->second);
    // An empty list prints as [] and parses back as an (empty) int list.
    const auto* ints = std::get_if<std::vector<int64_t>>(&it->second);
    TESSEL_USER_CHECK(list || (ints && ints->empty()))
        << node.label() << ": attribute 'epilogue' is " << ir::attribute_kind(it->second)
        << ", expected a list of strings";
    if (list) names = *list;
  }
  const std::vector<double> alpha = node.get_floats("epilogue_alpha");
  const std::vector<double> beta = node.get_floats("epilogue_beta");
  auto check_length = [&](const char* key, const std::vector<double>& v) {
    TESSEL_USER_CHECK(!node.has_attr(key) || v.size() == names.size())
        << node.label() << ": '" << key << "' has " << v.size() << " values, expected one per "
        << "epilogue step (" << names.size() << ")";
  };
  check_length("epilogue_alpha", alpha);
  check_length("epilogue_beta", beta);

  std::vector<EpilogueStep> steps;
  for (size_t i = 0; i < names.size(); ++i) {
    std::optional<EpilogueKind> kind = epilogue_kind(names[i]);
    if (!kind) {
      std::string known;
      for (const KindName& k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k.name);
      TESSEL_USER_ERROR() << node.label() << ": unknown epilogue step '" << names[i]
                          << "' (known: " << known << ")";
    }
    const KindName& k = info(*kind);
    TESSEL_USER_CHECK((!k.uses_alpha || !alpha.empty()) && (!k.uses_beta || !beta.empty()))
        << node.label() << ": epilogue step '" << k.name << "' needs "
        << (k.uses_beta ? "'epilogue_alpha' and 'epilogue_beta'" : "'epilogue_alpha'");
    steps.push_back({*kind, alpha.empty() ? 0.0 : alpha[i], beta.empty() ? 0.0 : beta[i]});
    if (*kind == EpilogueKind::kQuantizeUnit) {
      const double lo = steps.back().alpha, hi = steps.back().beta;
      TESSEL_USER_CHECK(lo == std::nearbyint(lo) && hi == std::nearbyint(hi) && lo < hi &&
                        lo >= -kMaxUnitBound && hi <= kMaxUnitBound)
          << node.label() << ": epilogue step 'quantize_unit' needs integral bounds lo < hi within ["
          << static_cast<int64_t>(-kMaxUnitBound) << ", " << static_cast<int64_t>(kMaxUnitBound) << "], got ["
          << lo << ", " << hi << "]";
    }
  }
  return steps;
}

void write_epilogue(ir::Node& node, const std::vector<EpilogueStep>& steps) {
  if (steps.empty()) {
    node.attrs.erase("epilogue");
    node.attrs.erase("epilogue_alpha");
    node.attrs.erase("epilogue_beta");
    return;
  }
  std::vector<std::string> names;
  std::vector<double> alpha, beta;
  for (const EpilogueStep& s : steps) {
    names.emplace_back(epilogue_name(s.kind));
    alpha.push_back(s.alpha);
    beta.push_back(s.beta);
  }
  node.attrs["epilogue"] = std::move(names);
  node.attrs["epilogue_alpha"] = std::move(alpha);
  node.attrs["epilogue_beta"] = std::move(beta);
}

// As QuantizeLinear's reference: the f32 value divided by the f32 scale in f32, rounded half to
// even (NaN: 0); kQuantize saturates it to int8, kRound leaves that to the clip after it.
static double rounded_quotient(double v, double scale) {
  const float q = static_cast<float>(v) / static_cast<float>(scale);
  return std::isnan(q) ? 0.0 : std::nearbyint(static_cast<double>(q));
}

double apply_epilogue_step(const EpilogueStep& step, double v, double residual) {
  switch (step.kind) {
    case EpilogueKind::kRelu:
      return v < 0 ? 0.0 : v;
    case EpilogueKind::kLeakyRelu:
      return v < 0 ? step.alpha * v : v;
    case EpilogueKind::kClip:
      return clamp_nan(v, step.alpha, step.beta);
    case EpilogueKind::kSigmoid:
      return sigmoid(v);
    case EpilogueKind::kHardSwish:
      return v * clamp_nan(v / 6.0 + 0.5, 0.0, 1.0);
    case EpilogueKind::kSilu:
      return v * sigmoid(v);
    case EpilogueKind::kGelu:  // as the Gelu reference kernel: 1 + erf(z) = erfc(-z)
      return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case EpilogueKind::kGeluTanh:  // 0.5 * (1 + tanh(u)) = 1 / (1 + e^-2u)
      return v / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case EpilogueKind::kAddResidual:
      return v + residual;
    case EpilogueKind::kMul:
      return v * step.alpha;
    case EpilogueKind::kQuantize:
      return std::clamp(rounded_quotient(v, step.alpha), -128.0, 127.0);
    case EpilogueKind::kAddScaledResidual:
      return v + step.alpha * residual;
    case EpilogueKind::kTanh:
      return std::tanh(v);
    case EpilogueKind::kMish: {  // softplus without overflow, as the Mish reference kernel
      const double sp = v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
      return v * std::tanh(sp);
    }
    case EpilogueKind::kHardSigmoid:
      return clamp_nan(step.alpha * v + step.beta, 0.0, 1.0);
    case EpilogueKind::kElu:
      return v < 0 ? step.alpha * std::expm1(v) : v;
    case EpilogueKind::kRound:  // not saturated: the clip after it takes the integer range
      return rounded_quotient(v, step.alpha);
    case EpilogueKind::kSiluQuantizedGate:  // the gate in [0, 1], so its integer in [0, 127]
      return v * (std::min(rounded_quotient(static_cast<float>(sigmoid(v)), step.alpha), 127.0) * step.beta);
    case EpilogueKind::kQuantizeUnit: {  // as the kernels: f32(v) saturated; the rest exact in f64
      const double w = static_cast<float>(v);
      return std::isnan(w) ? step.alpha : std::nearbyint(step.alpha + std::clamp(w, 0.0, 1.0) * (step.beta - step.alpha));
    }
  }
  TESSEL_ICHECK(false) << "unhandled epilogue kind " << static_cast<int>(step.kind);
  return v;
}

namespace {

bool integral_int8(double v) { return v == std::nearbyint(v) && v >= -128.0 && v <= 127.0; }

// A step that maps integers of [-128, 127] to integers of that range.
bool integral_clamp(const EpilogueStep& st) {
  return st.kind == EpilogueKind::kRelu ||
         (st.kind == EpilogueKind::kClip && integral_int8(st.alpha) && integral_int8(st.beta));
}

}  // namespace

bool ends_quantized(const std::vector<EpilogueStep>& steps, DType store) {
  const QuantRange range = quant_range(store);
  double lo = -HUGE_VAL, hi = HUGE_VAL;  // the clamps' bounds, from the last step back
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->kind == EpilogueKind::kQuantize) {
      lo = std::max(lo, -128.0);
      hi = std::min(hi, 127.0);
    }
    if (it->kind == EpilogueKind::kQuantizeUnit) {
      lo = std::max(lo, it->alpha);
      hi = std::min(hi, it->beta);
    }
    if (it->kind == EpilogueKind::kQuantize || it->kind == EpilogueKind::kRound ||
        it->kind == EpilogueKind::kQuantizeUnit)
      return lo >= static_cast<double>(range.lo) && hi <= static_cast<double>(range.hi);
    if (it->kind == EpilogueKind::kRelu) {
      lo = std::max(lo, 0.0);
    } else if (it->kind == EpilogueKind::kClip && it->alpha == std::nearbyint(it->alpha) &&
               it->beta == std::nearbyint(it->beta)) {
      lo = std::max(lo, it->alpha);
      hi = std::min(hi, it->beta);
    } else {
      return false;
    }
  }
  return false;
}

std::vector<EpilogueStep> fold_requantize(std::vector<EpilogueStep> steps) {
  auto at = [&](size_t k) { return steps.begin() + static_cast<std::ptrdiff_t>(k); };
  for (size_t i = 0; i < steps.size();) {
    // quantize(s) at i, integral clamps of q, mul(s') at m, relu/clip steps, quantize(s) at j.
    size_t m = i + 1, j = 0;
    while (m < steps.size() && integral_clamp(steps[m])) ++m;
    if (steps[i].kind == EpilogueKind::kQuantize && m < steps.size() && steps[m].kind == EpilogueKind::kMul) {
      j = m + 1;
      while (j < steps.size() && (steps[j].kind == EpilogueKind::kRelu || steps[j].kind == EpilogueKind::kClip)) ++j;
    }
    const double s = steps[i].alpha, s_dq = m < steps.size() ? steps[m].alpha : 0.0;
    // The same grid: both quantizes divide by the same f32 scale (the reference's arithmetic).
    const bool fold = j > 0 && j < steps.size() && steps[j].kind == EpilogueKind::kQuantize &&
                      static_cast<float>(steps[j].alpha) == static_cast<float>(s) && s > 0.0 && s_dq > 0.0 &&
                      128.0 * std::abs(s_dq / s - 1.0) <= 0.25;
    if (!fold) {
      ++i;
      continue;
    }
    std::vector<EpilogueStep> on_q(at(m + 1), at(j));
    for (EpilogueStep& st : on_q) {
      if (st.kind != EpilogueKind::kClip) continue;
      const EpilogueStep q{EpilogueKind::kQuantize, s};
      st.alpha = apply_epilogue_step(q, st.alpha, 0.0);
      st.beta = apply_epilogue_step(q, st.beta, 0.0);
    }
    steps.erase(at(m), at(j + 1));
    steps.insert(at(m), on_q.begin(), on_q.end());
    // The quantize at i stays: it may meet another mul, now closer.
  }
  return steps;
}

QuantizeScaleFold fold_quantize_scales(std::vector<EpilogueStep> steps, bool scaled_accumulator) {
  QuantizeScaleFold out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != EpilogueKind::kQuantize || steps[i].alpha == 1.0 || !(steps[i].alpha > 0.0)) continue;
    // The steps between the multiplication that takes the factor (k, or the accumulator) and i.
    size_t j = i;
    bool taken = false;
    while (j > 0 && !taken) {
      const EpilogueKind kind = steps[j - 1].kind;
      const bool homogeneous = kind == EpilogueKind::kRelu || kind == EpilogueKind::kLeakyRelu ||
                               kind == EpilogueKind::kClip || kind == EpilogueKind::kAddScaledResidual;
      if (kind == EpilogueKind::kMul) {
        taken = true;
      } else if (!homogeneous) {
        break;
      }
      --j;
    }
    const bool to_lead = !taken && j == 0 && scaled_accumulator && out.lead_factor == 1.0;
    if (!taken && !to_lead) continue;
    const double f = 1.0 / steps[i].alpha;
    for (size_t k = j; k < i; ++k) {
      EpilogueStep& st = steps[k];
      if (st.kind == EpilogueKind::kMul || st.kind == EpilogueKind::kAddScaledResidual) st.alpha *= f;
      if (st.kind == EpilogueKind::kClip) {
        st.alpha *= f;
        st.beta *= f;
      }
    }
    if (to_lead) out.lead_factor = f;
    steps[i].alpha = 1.0;
  }
  out.steps = std::move(steps);
  return out;
}

bool on_exact_grid(double v) {
  const double scaled = std::ldexp(v, kExactGridBits);
  return std::isfinite(v) && scaled == std::nearbyint(scaled);
}

UnitQuantizeFold fold_unit_quantize(std::vector<EpilogueStep> steps, bool scaled_accumulator, bool lead_on_grid) {
  UnitQuantizeFold out;
  bool lead_taken = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool quantize = steps[i].kind == EpilogueKind::kQuantize;
    if ((!quantize && steps[i].kind != EpilogueKind::kRound) || !(steps[i].alpha > 0.0)) continue;
    const double s = steps[i].alpha;
    // [lo, hi]: the quantize's int8 range (a round has none), narrowed by the integral clamps
    // after it while their intervals nest, and by a relu right before it.
    double lo = quantize ? -128.0 : -HUGE_VAL, hi = quantize ? 127.0 : HUGE_VAL;
    size_t last = i;
    for (; last + 1 < steps.size(); ++last) {
      const EpilogueStep& next = steps[last + 1];
      const bool relu = next.kind == EpilogueKind::kRelu;
      if (!relu && next.kind != EpilogueKind::kClip) break;
      const double a = relu ? 0.0 : next.alpha, b = relu ? hi : next.beta;
      if (a != std::nearbyint(a) || b != std::nearbyint(b) || std::max(lo, a) > std::min(hi, b)) break;
      lo = std::max(lo, a);
      hi = std::min(hi, b);
    }
    size_t first = i;
    if (i > 0 && steps[i - 1].kind == EpilogueKind::kRelu) {
      lo = std::max(lo, 0.0);
      first = i - 1;
    } else if (i > 0 && steps[i - 1].kind == EpilogueKind::kClip) {
      // A clip before it (a ReLU6: clip(0, 6 / s) once fold-quantize-scales moved s): rounding
      // is monotone, so it rounds the clip's bounds as it rounds the value, and clamps after.
      const EpilogueStep rounding{steps[i].kind, s};
      const double a = std::nearbyint(apply_epilogue_step(rounding, steps[i - 1].alpha, 0.0));
      const double b = std::nearbyint(apply_epilogue_step(rounding, steps[i - 1].beta, 0.0));
      lo = std::max(lo, a);
      hi = std::min(hi, b);
      first = i - 1;
    }
    if (!(lo < hi) || lo < -kMaxUnitBound || hi > kMaxUnitBound) continue;
    // The multiplication that takes the factor: a mul at j - 1, or (j == 0) the accumulator's S.
    size_t j = first;
    bool mul = false;
    while (j > 0) {
      const EpilogueKind kind = steps[j - 1].kind;
      if (kind == EpilogueKind::kMul) {
        mul = true;
        break;
      }
      const bool homogeneous =
          kind == EpilogueKind::kRelu || kind == EpilogueKind::kLeakyRelu || kind == EpilogueKind::kClip;
      if (kind != EpilogueKind::kAddScaledResidual && !(homogeneous && lo == 0.0)) break;
      --j;
    }
    const bool lead = !mul && j == 0 && scaled_accumulator && !lead_taken;
    if (!(mul && lo == 0.0) && !lead) continue;
    // Exact grids keep their ties: the factors that make the value, over s, all on the grid.
    bool grid = lead ? lead_on_grid : true;
    for (size_t k = mul ? j - 1 : 0; k < first; ++k)
      if (steps[k].kind == EpilogueKind::kMul || steps[k].kind == EpilogueKind::kAddScaledResidual)
        grid = grid && on_exact_grid(steps[k].alpha / s);
    if (grid) continue;
    const double f = 1.0 / (s * (hi - lo)), offset = -lo / (hi - lo);
    for (size_t k = mul ? j - 1 : 0; k < first; ++k) {
      EpilogueStep& st = steps[k];
      if (st.kind == EpilogueKind::kMul || st.kind == EpilogueKind::kAddScaledResidual) st.alpha *= f;
      if (st.kind == EpilogueKind::kClip) {
        st.alpha *= f;
        st.beta *= f;
      }
    }
    if (lead) {
      out.lead_factor = f;
      out.lead_offset = offset;
      lead_taken = true;
    }
    auto at = [&](size_t k) { return steps.begin() + static_cast<std::ptrdiff_t>(k); };
    steps.erase(at(first), at(last + 1));
    steps.insert(at(first), EpilogueStep{EpilogueKind::kQuantizeUnit, lo, hi});
    i = first;
  }
  out.steps = std::move(steps);
  return out;
}

StoreMap read_store(const ir::Node& node) {
  StoreMap s;
  const std::string kind = node.get_string("store", "nhwc");
  const StoreName* name = nullptr;
  for (const StoreName& k : kStores)
    if (k.name == kind) name = &k;
  if (!name) {
    std::string known;
    for (const StoreName& k : kStores) known += (known.empty() ? "" : ", ") + std::string(k.name);
    TESSEL_USER_ERROR() << node.label() << ": store '" << kind << "' is not supported (" << known
                        << ")";
  }
  s.kind = name->kind;
  if (!s.depth_to_space()) {
    TESSEL_USER_CHECK(!node.has_attr("block") && !node.has_attr("mode"))
        << node.label() << ": 'block' and 'mode' apply only to the depth_to_space stores";
    return s;
  }
  s.block = node.require_int("block");
  TESSEL_USER_CHECK(s.block >= 1) << node.label() << ": block " << s.block << " must be positive";
  const std::string mode = node.get_string("mode", "DCR");
  TESSEL_USER_CHECK(mode == "DCR" || mode == "CRD")
      << node.label() << ": mode '" << mode << "' is not supported (DCR, CRD)";
  s.dcr = mode == "DCR";
  return s;
}

void write_store(ir::Node& node, const StoreMap& store) {
  node.attrs.erase("store");
  node.attrs.erase("block");
  node.attrs.erase("mode");
  if (store.kind == StoreMap::Kind::kNhwc) return;
  for (const StoreName& k : kStores)
    if (k.kind == store.kind) node.attrs["store"] = std::string(k.name);
  if (!store.depth_to_space()) return;
  node.attrs["block"] = store.block;
  node.attrs["mode"] = std::string(store.dcr ? "DCR" : "CRD");
}

Shape stored_shape(const ir::Node& node, const StoreMap& store, const Shape& pre_store) {
  TESSEL_ICHECK(pre_store.size() == 4)
      << node.label() << ": pre-store shape " << shape_str(pre_store);
  Shape nhwc = pre_store;
  if (store.depth_to_space()) {
    const int64_t b = store.block, co = pre_store[3];
    TESSEL_USER_CHECK(co % (b * b) == 0)
        << node.label() << ": " << co << " output channels are not divisible by block^2 = "
        << b * b << " (store = depth_to_space)";
    nhwc = {pre_store[0], pre_store[1] * b, pre_store[2] * b, co / (b * b)};
  }
  if (!store.nchw()) return nhwc;
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

std::optional<DType> read_out_dtype(const ir::Node& node) {
  if (!node.has_attr("out_dtype")) return std::nullopt;
  const std::string name = node.get_string("out_dtype", "");
  const std::optional<DType> t = dtype_from_name(name);
  TESSEL_USER_CHECK(t && (is_float(*t) || *t == DType::kI8 || *t == DType::kU8))
      << node.label() << ": out_dtype '" << name
      << "' is neither a float dtype, i8 nor u8 (f32, f16, bf16, f64, i8, u8)";
  return t;
}

bool is_depthwise(const Shape& x_nhwc, const Shape& w_ohwi, int64_t group) {
  return w_ohwi.size() == 4 && x_nhwc.size() == 4 && group > 1 && w_ohwi[3] == 1 &&
         w_ohwi[0] == group && x_nhwc[3] == group;
}

bool is_depthwise_conv(const ir::Graph& g, const ir::Node& conv) {
  if (conv.op != "tessel.Conv" || conv.inputs.size() < 2) return false;
  return is_depthwise(g.type(conv.inputs[0]).shape, g.type(conv.inputs[1]).shape,
                      conv.get_int("group", 1));
}

bool stores_uint8(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "tessel.Gemm") return true;
  return n.op == "tessel.Conv" && (n.get_int("group", 1) == 1 || is_depthwise_conv(g, n));
}

bool is_int8_contraction(const ir::Graph& g, const ir::Node& n) {
  return (n.op == "tessel.Conv" || n.op == "tessel.Gemm") && n.inputs.size() > 1 &&
         n.inputs[1] != ir::kNoValue && g.type(n.inputs[1]).dtype == DType::kI8;
}

void write_out_dtype(ir::Node& node, std::optional<DType> dtype) {
  node.attrs.erase("out_dtype");
  if (dtype) node.attrs["out_dtype"] = std::string(dtype_name(*dtype));
}

bool read_nchw_input(const ir::Node& node) {
  const std::string layout = node.get_string("input_layout", "nhwc");
  TESSEL_USER_CHECK(layout == "nhwc" || layout == "nchw")
      << node.label() << ": input_layout '" << layout << "' is not supported (nhwc, nchw)";
  return layout == "nchw";
}

void write_nchw_input(ir::Node& node, bool nchw) {
  node.attrs.erase("input_layout");
  if (nchw) node.attrs["input_layout"] = std::string("nchw");
}

std::optional<Prologue> read_prologue(const ir::Node& node) {
  if (!node.attrs.count("prologue")) return std::nullopt;
  const std::string name = node.get_string("prologue", "");
  TESSEL_USER_CHECK(name == "affine" || name == "affine_relu" || name == "requantize")
      << node.label() << ": prologue '" << name << "' is not supported (affine, affine_relu, requantize)";
  return Prologue{.relu = name == "affine_relu", .requantize = name == "requantize"};
}

void write_prologue(ir::Node& node, std::optional<Prologue> prologue) {
  node.attrs.erase("prologue");
  if (prologue)
    node.attrs["prologue"] =
        std::string(prologue->requantize ? "requantize" : prologue->relu ? "affine_relu" : "affine");
}

}  // namespace tessel::ops
