// Element-wise float ops with ONNX (numpy) broadcasting, any rank, and QuantizeLinear /
// DequantizeLinear. Every input is read through its own strides over the output's index space
// (stride 0 along broadcast dims); dims that are contiguous for every operand, or broadcast
// alike, are merged first. The innermost merged dim moves as V-element fragments (16-byte
// stores); an input contiguous along it is loaded V-wide, one broadcast along it is loaded
// once and reused. Arithmetic is fp32 for every storage type (f16, bf16, f32).
//
// A per-axis scale and zero point ([C] along `axis`) are operands broadcast as [C, 1, ..., 1]:
// per channel of NHWC data (axis 3) they are loaded V-wide with the channels, along another
// axis once per fragment. The quantization kernels repeat ops/quantized.cc's arithmetic
// exactly (the GPU tests compare bit for bit): QuantizeLinear divides (correctly rounded,
// __fdiv_rn, not a reciprocal multiply), rounds the quotient to x's own precision for f16 and
// bf16 inputs, rounds half to even and saturates (quantize() in tessel_op_common.cuh);
// DequantizeLinear subtracts the zero point and multiplies by the scale in f32 (__fmul_rn, so
// that no later add contracts into an FMA) and rounds to the scale's dtype. The reference
// divides in double for i32 and f64 inputs; those have no GPU kernel. tessel.MulQuantizeLinear
// multiplies its product by the scale's reciprocal (__frcp_rn, once per thread's fragment), as
// its reference does; with an int8 a, by a_scale / y_scale (__fdiv_rn).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/cuda/op_emit.h"
#include "core/error.h"
#include "ir/op_registry.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 256;

// The expression of each op over the operands x0, x1, ... (floats). Attribute values are
// filled in by expression().
const std::map<std::string, std::string>& op_table() {
  static const std::map<std::string, std::string> kOps = {
      {"Relu", "x0 < 0.f ? 0.f : x0"},
      {"LeakyRelu", "x0 < 0.f ? {alpha} * x0 : x0"},
      {"Elu", "x0 < 0.f ? {alpha} * (expf(x0) - 1.f) : x0"},
      {"Sigmoid", "1.f / (1.f + expf(-x0))"},
      {"HardSigmoid", "fminf(fmaxf({alpha} * x0 + {beta}, 0.f), 1.f)"},
      {"HardSwish", "x0 * fminf(fmaxf(x0 * (1.f / 6.f) + 0.5f, 0.f), 1.f)"},
      {"Tanh", "tanhf(x0)"},
      {"Selu", "{gamma} * (x0 > 0.f ? x0 : {alpha} * expm1f(x0))"},
      {"Celu", "x0 > 0.f ? x0 : {alpha} * expm1f(x0 / {alpha})"},
      {"ThresholdedRelu", "x0 > {alpha} ? x0 : 0.f"},
      {"Softsign", "x0 / (1.f + fabsf(x0))"},
      // log(1 + e^x) without overflow, as the reference.
      {"Softplus", "(x0 > 0.f ? x0 + log1pf(expf(-x0)) : log1pf(expf(x0)))"},
      {"Mish", "x0 * tanhf(x0 > 0.f ? x0 + log1pf(expf(-x0)) : log1pf(expf(x0)))"},
      {"Shrink", "(x0 < -{lambd} ? x0 + {bias} : (x0 > {lambd} ? x0 - {bias} : 0.f))"},
      {"Round", "rintf(x0)"},  // half to even, as ONNX's Round
      {"Sin", "sinf(x0)"},
      {"Cos", "cosf(x0)"},
      {"Sign", "(x0 > 0.f ? 1.f : (x0 < 0.f ? -1.f : x0))"},  // 0 and NaN stay
      {"Exp", "expf(x0)"},
      {"Log", "logf(x0)"},
      {"Sqrt", "sqrtf(x0)"},
      {"Neg", "-x0"},
      {"Abs", "fabsf(x0)"},
      {"Reciprocal", "1.f / x0"},
      {"Floor", "floorf(x0)"},
      {"Ceil", "ceilf(x0)"},
      {"Erf", "erff(x0)"},
      // GELU, both forms rewritten as the reference kernel does so that nothing cancels for
      // negative x: 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2), and the tanh form
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
      {"Gelu", "{gelu}"},
      // min(max(x, lo), hi), so that lo > hi yields hi as ONNX specifies (and NaN stays NaN).
      {"Clip", "((x0 < {lo} ? {lo} : x0) > {hi} ? {hi} : (x0 < {lo} ? {lo} : x0))"},
      {"Add", "x0 + x1"},
      {"Sub", "x0 - x1"},
      {"Mul", "x0 * x1"},
      {"Div", "x0 / x1"},
      {"Pow", "powf(x0, x1)"},
      // Comparisons and logic: bool results (b8 stores any non-zero float as 1); bool operands
      // read as 0 / 1. Where picks by a bool condition.
      {"Equal", "(x0 == x1 ? 1.f : 0.f)"},
      {"Greater", "(x0 > x1 ? 1.f : 0.f)"},
      {"GreaterOrEqual", "(x0 >= x1 ? 1.f : 0.f)"},
      {"Less", "(x0 < x1 ? 1.f : 0.f)"},
      {"LessOrEqual", "(x0 <= x1 ? 1.f : 0.f)"},
      {"And", "(x0 != 0.f && x1 != 0.f ? 1.f : 0.f)"},
      {"Or", "(x0 != 0.f || x1 != 0.f ? 1.f : 0.f)"},
      {"Xor", "((x0 != 0.f) != (x1 != 0.f) ? 1.f : 0.f)"},
      {"Not", "(x0 != 0.f ? 0.f : 1.f)"},
      {"Where", "(x0 != 0.f ? x1 : x2)"},
      {"Mod", "fmodf(x0, x1)"},  // floats: ONNX requires fmod = 1, C's fmod
      {"Max", "{variadic}"},
      {"Min", "{variadic}"},
      {"Sum", "{variadic}"},
      {"Mean", "{variadic}"},
      {"PRelu", "x0 < 0.f ? x1 * x0 : x0"},
  };
  return kOps;
}

// The variadic ops (any number of broadcast operands, up to OpParams' 8 inputs).
bool is_variadic(const std::string& op) { return op == "Max" || op == "Min" || op == "Sum" || op == "Mean"; }

// Broadcasting ops read two operands; the variadic ones any number; Where three; the others
// one (Clip: three, its bounds).
bool is_binary(const std::string& op) {
  return ir::OpRegistry::global().facts(op).kind == ir::OpKind::kBroadcast && !is_variadic(op) && op != "Where";
}

// Max, Min, Sum and Mean over operands x0 .. x{k-1}, folded left to right as the reference
// does (ops/elementwise_math.cc): NaN propagates through Max and Min; Mean divides the sum.
std::string variadic_expression(const std::string& op, size_t k) {
  std::string body = "float a = x0;";
  for (size_t i = 1; i < k; ++i) {
    if (op == "Max") body += fmt::format(" a = a >= x{0} || a != a ? a : x{0};", i);
    else if (op == "Min") body += fmt::format(" a = a <= x{0} || a != a ? a : x{0};", i);
    else body += fmt::format(" a += x{};", i);
  }
  if (op == "Mean") body += fmt::format(" a /= {}.f;", k);
  return "[&] { " + body + " return a; }()";
}

bool is_quantization(const std::string& op) {
  return op == "QuantizeLinear" || op == "DequantizeLinear";
}

constexpr const char* kMulQuantize = "tessel.MulQuantizeLinear";

bool is_float_storage(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }
bool is_int8(DType t) { return t == DType::kI8 || t == DType::kU8; }

bool given(const ir::Node& n, size_t input) {
  return n.inputs.size() > input && n.inputs[input] != ir::kNoValue;
}

// The shape input k broadcasts from, right-aligned against the output: its own, except that a
// per-axis scale or zero point ([C], one value per index of `axis`) is [C, 1, ..., 1] with
// rank - axis dims.
Shape operand_shape(const ir::Graph& g, const ir::Node& n, size_t k) {
  const Shape& s = g.type(n.inputs[k]).shape;
  if (!is_quantization(n.op) || k == 0 || numel(s) == 1) return s;
  const int64_t rank = static_cast<int64_t>(g.type(n.inputs[0]).shape.size());
  int64_t axis = n.get_int("axis", 1);
  if (axis < 0) axis += rank;
  Shape r(static_cast<size_t>(rank - axis), 1);
  r[0] = s.at(0);
  return r;
}

// Why a QuantizeLinear / DequantizeLinear has no kernel here; infer() checked the rest (the
// parameters' shapes, the axis, no blocked quantization, the zero point's dtype).
std::optional<std::string> check_quantization(const ir::Graph& g, const ir::Node& n) {
  const DType x = g.type(n.inputs[0]).dtype, scale = g.type(n.inputs[1]).dtype;
  const DType y = g.type(n.outputs[0]).dtype;
  if (!is_float_storage(scale))
    return n.label() + ": a scale of dtype " + std::string(dtype_name(scale)) +
           " has no GPU kernel (f32, f16, bf16)";
  if (n.op == "QuantizeLinear") {
    if (!is_float_storage(x))
      return n.label() + ": input x of dtype " + std::string(dtype_name(x)) +
             " has no GPU kernel (f32, f16, bf16; the reference divides i32 in double)";
    if (!is_int8(y)) return n.label() + ": output must be i8 or u8";
    return std::nullopt;
  }
  if (!is_int8(x) && x != DType::kI32)
    return n.label() + ": input x of dtype " + std::string(dtype_name(x)) +
           " has no GPU kernel (i8, u8, i32)";
  if (!is_float_storage(y)) return n.label() + ": output must be f32, f16 or bf16";
  return std::nullopt;
}

// The value stored to output element v: the op's float expression over x0, x1, ... converted
// to the output's type, or QuantizeLinear's (tessel.MulQuantizeLinear's) rounding.
std::string stored_value(const ir::Graph& g, const ir::Node& n, const std::string& expr) {
  const std::string yt = type_of(g.type(n.outputs[0]).dtype);
  if (n.op != "QuantizeLinear" && n.op != kMulQuantize) return fmt::format("from_float<{}>({})", yt, expr);
  const size_t zero_point = n.op == kMulQuantize ? 3 : 2;  // after the operands and the scale
  return fmt::format("quantize<{}>({}, {})", yt, expr,
                     given(n, zero_point) ? fmt::format("static_cast<int>(x{})", zero_point) : "0");
}

// QuantizeLinear's quotient x / scale, rounded to x's precision as the reference does
// (ops/quantized.cc, quantize_quotient), and DequantizeLinear's (x - zero point) * scale.
// tessel.MulQuantizeLinear's: the product times the scale's reciprocal, each rounded to f32
// (__fmul_rn: no FMA; x2 is the same for a thread's fragment, so its reciprocal is one).
std::string quantization_expression(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "DequantizeLinear") return given(n, 2) ? "__fmul_rn(x0 - x2, x1)" : "__fmul_rn(x0, x1)";
  if (n.op == kMulQuantize && given(n, 4))  // a quantized: its integers, a_scale / y_scale
    return given(n, 5) ? "__fmul_rn(__fmul_rn(__fsub_rn(x0, x5), x1), __fdiv_rn(x4, x2))"
                       : "__fmul_rn(__fmul_rn(x0, x1), __fdiv_rn(x4, x2))";
  if (n.op == kMulQuantize) return "__fmul_rn(__fmul_rn(x0, x1), __frcp_rn(x2))";
  const DType x = g.type(n.inputs[0]).dtype;
  if (x == DType::kF32) return "__fdiv_rn(x0, x1)";
  return fmt::format("to_float(from_float<{}>(__fdiv_rn(x0, x1)))", type_of(x));
}

std::string expression(const ir::Graph& g, const ir::Node& n) {
  if (is_quantization(n.op) || n.op == kMulQuantize) return quantization_expression(g, n);
  std::string e = op_table().at(n.op);
  auto put = [&e](const std::string& key, const std::string& value) {
    for (size_t at; (at = e.find(key)) != std::string::npos;) e.replace(at, key.size(), value);
  };
  const double default_alpha = n.op == "LeakyRelu"     ? 0.01
                               : n.op == "HardSigmoid" ? 0.2
                               : n.op == "Selu"        ? 1.67326319217681884765625
                                                       : 1.0;
  put("{alpha}", float_literal(n.get_float("alpha", default_alpha)));
  put("{beta}", float_literal(n.get_float("beta", 0.5)));
  put("{gamma}", float_literal(n.get_float("gamma", 1.05070102214813232421875)));
  put("{lambd}", float_literal(n.get_float("lambd", 0.5)));
  put("{bias}", float_literal(n.get_float("bias", 0.0)));
  if (is_variadic(n.op)) put("{variadic}", variadic_expression(n.op, n.inputs.size()));
  if (n.op == "Gelu") {
    put("{gelu}", n.get_string("approximate", "none") == "tanh"
                      ? "x0 / (1.f + expf(-1.5957691216f * (x0 + 0.044715f * x0 * x0 * x0)))"
                      : "0.5f * x0 * erfcf(-0.70710678118f * x0)");
  }
  if (n.op == "Clip") {
    // Opset 11+: min and max are optional inputs 1 and 2 (operands x1, x2); before, attributes.
    auto bound = [&](size_t input, const char* attr, double def) {
      if (n.inputs.size() > input && n.inputs[input] != ir::kNoValue) return fmt::format("x{}", input);
      return float_literal(n.get_float(attr, def));
    };
    put("{lo}", bound(1, "min", -INFINITY));
    put("{hi}", bound(2, "max", INFINITY));
  }
  return e;
}

struct Operand {
  int index;
  DType type;
  std::vector<int64_t> stride;  // over the merged output dims; 0 along broadcast dims
};

}  // namespace


// tessel.MulQuantizeLinear: float operands of one storage dtype, or an int8 a with its scale
// and a float b; per-tensor float scales, an int8 result (its infer checked the rest).
std::optional<std::string> check_mul_quantize(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 3 || !given(n, 0) || !given(n, 1) || !given(n, 2))
    return n.label() + ": expected a, b, a scale and an optional zero point";
  const DType a = g.type(n.inputs[0]).dtype, b = g.type(n.inputs[1]).dtype;
  if (given(n, 4) ? !is_int8(a) || !is_float_storage(b) : !is_float_storage(a))
    return n.label() + ": operands of dtype " + std::string(dtype_name(a)) + " and " + std::string(dtype_name(b)) +
           " have no GPU kernel (f32, f16, bf16; an i8 or u8 a with its scale)";
  for (size_t k : {2, 4})
    if (given(n, k) && !is_float_storage(g.type(n.inputs[k]).dtype))
      return n.label() + ": the scales must be f32, f16 or bf16";
  if (!is_int8(g.type(n.outputs[0]).dtype)) return n.label() + ": output must be i8 or u8";
  return std::nullopt;
}

std::optional<std::string> check_elementwise(const ir::Graph& g, const ir::Node& n) {
  if (n.op == kMulQuantize) return check_mul_quantize(g, n);
  if (is_quantization(n.op)) {
    if (n.inputs.size() < 2 || n.inputs.size() > 3 || !given(n, 0) || !given(n, 1))
      return n.label() + ": expected x, a scale and an optional zero point";
    return check_quantization(g, n);
  }
  if (!op_table().count(n.op)) return n.label() + ": op " + n.op + " has no elementwise expression";
  const size_t operands = n.op == "Clip" || n.op == "Where" ? 3 : is_binary(n.op) ? 2 : is_variadic(n.op) ? 8 : 1;
  if (n.inputs.size() > operands || n.inputs.empty() || n.inputs[0] == ir::kNoValue)
    return n.label() + ": expected " + std::to_string(operands) + " operand(s) at most";
  if (is_binary(n.op) && (n.inputs.size() != 2 || n.inputs[1] == ir::kNoValue))
    return n.label() + ": expected exactly two operands";
  // Bool operands: the logic ops' and Where's condition; bool results: comparisons and logic.
  const bool logic = n.op == "And" || n.op == "Or" || n.op == "Xor" || n.op == "Not";
  const bool bool_out = logic || n.op == "Equal" || n.op == "Greater" || n.op == "GreaterOrEqual" ||
                        n.op == "Less" || n.op == "LessOrEqual";
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const bool may_be_bool = logic || (n.op == "Where" && k == 0);
    if (n.inputs[k] != ir::kNoValue && g.type(n.inputs[k]).dtype == DType::kBool && !may_be_bool)
      return n.label() + ": a bool operand " + std::to_string(k) + " (only the logic ops and Where's condition take bool)";
    if (n.inputs[k] != ir::kNoValue && g.type(n.inputs[k]).dtype != DType::kBool && logic)
      return n.label() + ": operand " + std::to_string(k) + " must be bool";
  }
  if (bool_out) {
    if (g.type(n.outputs[0]).dtype != DType::kBool) return n.label() + ": output must be bool";
    for (ir::ValueId v : n.inputs)
      if (!logic && !is_float(g.type(v).dtype))
        return n.label() + ": only float operands have a GPU comparison kernel (integer ones are shape arithmetic)";
    return std::nullopt;
  }
  if (is_variadic(n.op) && std::count(n.inputs.begin(), n.inputs.end(), ir::kNoValue))
    return n.label() + ": every operand of " + n.op + " must be given";
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const ir::ValueId v = n.inputs[k];
    if (v != ir::kNoValue && !is_float(g.type(v).dtype) && !(n.op == "Where" && k == 0))
      return n.label() + ": only float operands have a GPU element-wise kernel";
  }
  if (!is_float(g.type(n.outputs[0]).dtype)) return n.label() + ": output must be float";
  return std::nullopt;
}

OpKernelSource emit_elementwise(const ir::Graph& g, const ir::Node& n) {
  const Shape& out = g.type(n.outputs[0]).shape;
  const int rank = static_cast<int>(out.size());
  // Per-input strides over the output's dims (right-aligned broadcasting).
  std::vector<Operand> ops;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == ir::kNoValue) continue;
    const Shape s = operand_shape(g, n, k);
    Operand o{static_cast<int>(k), g.type(n.inputs[k]).dtype, std::vector<int64_t>(rank, 0)};
    int64_t st = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      const int od = rank - static_cast<int>(s.size()) + d;
      o.stride[od] = s[d] == 1 ? 0 : st;
      st *= s[d];
    }
    ops.push_back(std::move(o));
  }
  // Merge dim d into the previous merged dim where every operand continues its run there.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(ops.size());
  for (int d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < ops.size() && merge; ++k)
      merge = strides[k].back() == ops[k].stride[d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < ops.size(); ++k) strides[k].back() = ops[k].stride[d];
      continue;
    }
    dims.push_back(out[d]);
    for (size_t k = 0; k < ops.size(); ++k) strides[k].push_back(ops[k].stride[d]);
  }
  if (dims.empty()) {
    dims = {1};
    for (auto& s : strides) s = {0};
  }
  const DType out_type = g.type(n.outputs[0]).dtype;
  // 16-byte accesses on the narrower side of a quantization: 16 int8 per thread, whose floats
  // move as several 16-byte chunks.
  size_t narrowest = dtype_size(out_type);
  if (is_quantization(n.op) || n.op == kMulQuantize)
    narrowest = std::min(narrowest, dtype_size(g.type(n.inputs[0]).dtype));
  int vec = static_cast<int>(16 / narrowest);
  while (vec > 1 && dims.back() % vec != 0) vec /= 2;
  // After broadcasting, an input steps through the innermost merged dim with stride 1 or
  // not at all: its later dims are merged into that one or are broadcast.
  for (const auto& s : strides) TESSEL_ICHECK(s.back() <= 1) << n.label() << ": inner stride " << s.back();
  const int m = static_cast<int>(dims.size());
  const std::string yt = type_of(out_type);

  std::string body = fmt::format("    const i64 e = i * {};\n    i64 r = e;\n", vec);
  for (int d = m - 1; d >= 0; --d)
    body += d == 0 ? "    const i64 c0 = r;\n"
                   : fmt::format("    const i64 c{} = r % {}; r /= {};\n", d, dims[d], dims[d]);
  for (size_t k = 0; k < ops.size(); ++k) {
    const std::string t = type_of(ops[k].type);
    std::string off = "0";
    for (int d = 0; d < m; ++d)
      if (strides[k][d] != 0) off += fmt::format(" + c{} * {}", d, strides[k][d]);
    const bool along = strides[k].back() == 1;
    body += fmt::format("    Frag<{}, {}> a{};  // in[{}] {}\n", t, along ? vec : 1, k, ops[k].index,
                        g.type(n.inputs[ops[k].index]).str());
    body += fmt::format("    a{}.load(static_cast<const {}*>(p.in[{}]) + ({}));\n", k, t, ops[k].index, off);
  }
  // Operands broadcast along the fragment convert once, before its loop; 8-bit integer ones
  // along it by to_floats (two full-rate instructions per element where cvt.rn.f32.s8 issues
  // at a quarter of the rate).
  for (size_t k = 0; k < ops.size(); ++k) {
    if (strides[k].back() != 1)
      body += fmt::format("    const float x{} = to_float(a{}.v[0]);\n", ops[k].index, k);
    else if (is_int8(ops[k].type) && vec > 1)
      body += fmt::format("    float f{}[{}];\n    to_floats(a{}, f{});\n", k, vec, k, k);
  }
  body += fmt::format("    Frag<{}, {}> y;\n#pragma unroll\n    for (int v = 0; v < {}; ++v) {{\n", yt, vec, vec);
  for (size_t k = 0; k < ops.size(); ++k) {
    if (strides[k].back() != 1) continue;
    if (is_int8(ops[k].type) && vec > 1)
      body += fmt::format("      const float x{} = f{}[v];\n", ops[k].index, k);
    else
      body += fmt::format("      const float x{} = to_float(a{}.v[v]);\n", ops[k].index, k);
  }
  body += fmt::format("      y.v[v] = {};\n    }}\n", stored_value(g, n, expression(g, n)));
  body += fmt::format("    y.store(static_cast<{}*>(p.out[0]) + e);\n", yt);

  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  total /= vec;
  const std::string problem = fmt::format(
      "// {} -> {}; merged extents [{}]\nstruct Problem {{\n  static constexpr i64 kItems = {};\n\n"
      "  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {{\n{}  }}\n}};\n",
      n.op, g.type(n.outputs[0]).str(), fmt::join(dims, ", "), total, body);
  return make_source(n, "elementwise", "tessel_op_common.cuh", problem,
                     "tessel::for_each_item<Problem>(p);", (total + kThreads - 1) / kThreads, kThreads);
}

}  // namespace tessel::kernels::cuda::op_detail
