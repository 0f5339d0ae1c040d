// Recognises the decomposed layer normalization, GELU, Mish, HardSwish and HardSigmoid that
// exporters write where the opset has no LayerNormalization (before 17), Gelu (before 20), Mish
// (before 18) or HardSwish (before 14), and pixel shuffles written as reshapes and a
// transpose, and replaces each with the one node. tessel's IR has these ops at every opset, so the rewrite
// does not depend on the graph's.
//
// LayerNorm (torch.onnx.export before opset 17 writes the Pow / Div form):
//   m = ReduceMean(x, axes=[a])            a the last axis (-1 or rank-1), keepdims=1; axes an
//   d = Sub(x, m)                          attribute (opset < 18) or a constant input (18)
//   v = ReduceMean(Pow(d, 2) | Mul(d, d), axes=[a])
//   s = Sqrt(Add(v, eps))                  eps a one-element constant
//   y = Div(d, s) | Mul(d, Reciprocal(s))
//   y = Mul(y, gamma), y = Add(y, beta)    each optional; gamma, beta of shape [C], [1] or []
//                                          (leading 1s allowed), C = x's last dim
//   -> y = LayerNormalization(x, gamma | ones, beta) {axis = -1, epsilon = eps}
//
// GELU: a product of exactly the three factors x, 0.5 and Add(1, p), multiplied in any order
// and association (PyTorch writes (x * (1 + p)) * 0.5, others 0.5 * x * (1 + p)), where
//   p = Erf(Div(x, sqrt(2)) | x * 1/sqrt(2))                  -> Gelu(x)
//   p = Tanh(sqrt(2/pi) * Add(x, 0.044715 * x * x * x | 0.044715 * Pow(x, 3)))
//                                                             -> Gelu(x) {approximate = "tanh"}
//
// Mish (YOLOv4 / CSPDarknet exports, before opset 18's Mish):
//   Mul(x, Tanh(Softplus(x)))                                   -> Mish(x)
//   Mul(x, Tanh(Log(Add(Exp(x), 1))))                           -> Mish(x)
//
// HardSwish and HardSigmoid (MobileNet-v3, YOLOv5; exporters before opset 14's HardSwish, or
// writing relu6 by hand), with r = relu6(x + 3): Clip(Add(x, 3), 0, 6), Clip(Relu(Add(x, 3)),
// none | 0, 6) or Min(Relu(Add(x, 3)), 6):
//   Mul(x, HardSigmoid(x) {alpha = 1/6, beta = 0.5})            -> HardSwish(x)  (PyTorch's)
//   a product of exactly x, r and 1/6, or Div(Mul(x, r), 6),
//   or Mul(x, Div(r, 6))                                        -> HardSwish(x)
//   Div(r, 6), Mul(r, 1/6)                                      -> HardSigmoid(x) {alpha = 1/6,
//                                                                  beta = 0.5}
// (a HardSigmoid that the Mul of a HardSwish reads is left to that match).
//
// Pixel shuffles as Reshape / Transpose / Reshape (PyTorch's pixel_shuffle before opset 11,
// hand-written ESPCN and space-to-depth code), on NCHW x, with static shapes:
//   [N, C*r*r, H, W] -> [N, C, r, r, H, W] -> perm [0, 1, 4, 2, 5, 3] -> [N, C, H*r, W*r]
//                                                           -> DepthToSpace(x) {CRD, r}
//   [N, C*r*r, H, W] -> [N, r, r, C, H, W] -> perm [0, 3, 4, 1, 5, 2] -> [N, C, H*r, W*r]
//                                                           -> DepthToSpace(x) {DCR, r}
//   [N, C, H*r, W*r] -> [N, C, H, r, W, r] -> perm [0, 3, 5, 1, 2, 4] -> [N, C*r*r, H, W]
//                                                           -> SpaceToDepth(x) {r}
// so that the store of the conv before them does the shuffle.
//
// Every operand order of Add and Mul is accepted. Coefficients match within 1e-4 relative (or
// equal the coefficient rounded to their dtype: f16 cannot hold 1/sqrt(2) that closely);
// exponents must be exactly 2 and 3. A pattern is rewritten only when every intermediate
// value has no reader outside it (and is no graph output) and the result has x's type. The
// new node takes the pattern's last node's place and name and writes its output value.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

constexpr double kCoefficientRtol = 1e-4;

// A matched pattern: its nodes, and the node that replaces the last of them.
struct Match {
  std::vector<int> nodes;
  std::string op;
  std::vector<ValueId> inputs;  // kNoValue for an input to be made: LayerNorm's ones
  ir::Attributes attrs;
};

// Read-only queries on the graph as it was before any rewrite. Nodes claimed by an earlier
// match are invisible to later ones, so that no node is rewritten twice.
class Matcher {
 public:
  explicit Matcher(const ir::Graph& g)
      : g_(g),
        producer_(g.producers()),
        uses_(use_counts(g)),
        users_(g.users()),
        claimed_(g.nodes.size(), 0) {}

  // The LayerNorm whose normalising Div / Mul (y = d / s above) is node i; the GELU whose
  // outermost Mul is node i.
  std::optional<Match> layer_norm(int i) const;
  std::optional<Match> gelu(int i) const;
  // The Mish whose Mul is node i.
  std::optional<Match> mish(int i) const;
  // The HardSwish or HardSigmoid whose last Mul or Div is node i.
  std::optional<Match> hard_swish(int i) const;
  // The DepthToSpace or SpaceToDepth whose last Reshape is node i.
  std::optional<Match> pixel_shuffle(int i) const;
  bool claimed(int i) const { return claimed_[static_cast<size_t>(i)] != 0; }
  void claim(const Match& m) {
    for (int n : m.nodes) claimed_[static_cast<size_t>(n)] = 1;
  }

 private:
  // The index of the unclaimed `op` node that writes v, or -1.
  int def(ValueId v, std::string_view op) const {
    if (v == kNoValue) return -1;
    const int p = producer_[static_cast<size_t>(v)];
    if (p < 0 || claimed_[static_cast<size_t>(p)] || g_.nodes[static_cast<size_t>(p)].op != op)
      return -1;
    return p;
  }
  // def(v, op), when v is also read exactly once and is no graph output.
  int sole_def(ValueId v, std::string_view op) const {
    return v != kNoValue && uses_[static_cast<size_t>(v)] == 1 ? def(v, op) : -1;
  }
  const ir::Node& node(int i) const { return g_.nodes[static_cast<size_t>(i)]; }
  ValueId in(int i, size_t k) const {
    const ir::Node& n = node(i);
    return k < n.inputs.size() ? n.inputs[k] : kNoValue;
  }
  ValueId out(int i) const { return node(i).outputs[0]; }

  // The value of a one-element constant.
  std::optional<double> scalar(ValueId v) const {
    if (v == kNoValue || !g_.value(v).is_constant() || g_.value(v).data->numel() != 1)
      return std::nullopt;
    return g_.value(v).data->get_f64(0);
  }
  bool is_scalar(ValueId v, double want) const { return scalar(v) == want; }
  bool near(ValueId v, double want) const {
    const std::optional<double> c = scalar(v);
    if (!c) return false;
    Tensor rounded(g_.type(v).dtype, {});
    rounded.set_f64(0, want);
    return std::fabs(*c - want) <= kCoefficientRtol * std::fabs(want) ||
           (is_float(rounded.dtype()) && *c == rounded.get_f64(0));
  }

  // The factors of the product that node i (a Mul) computes: its inputs, each expanded in
  // turn when it is an unclaimed Mul read only there. Gives up (false) past `max_leaves`.
  bool product(int i, size_t max_leaves, std::vector<ValueId>& leaves,
               std::vector<int>& nodes) const {
    nodes.push_back(i);
    for (ValueId v : node(i).inputs) {
      const int m = sole_def(v, "Mul");
      if (m >= 0) {
        if (!product(m, max_leaves, leaves, nodes)) return false;
      } else {
        leaves.push_back(v);
      }
      if (leaves.size() > max_leaves) return false;
    }
    return true;
  }
  // The factors of value v when it is a single-use product of exactly `n` factors.
  std::optional<std::vector<ValueId>> factors(ValueId v, size_t n, std::vector<int>& nodes) const {
    const int m = sole_def(v, "Mul");
    std::vector<ValueId> leaves;
    if (m < 0 || !product(m, n, leaves, nodes) || leaves.size() != n) return std::nullopt;
    return leaves;
  }

  bool reduces_last_axis(int i) const;
  bool fits_last_axis(ValueId affine, ValueId x) const;
  bool sum_of(int add, ValueId a, double b) const;
  std::optional<bool> phi(ValueId h, ValueId x, std::vector<int>& nodes) const;
  bool erf_argument(ValueId z, ValueId x, std::vector<int>& nodes) const;
  bool tanh_argument(ValueId u, ValueId x, std::vector<int>& nodes) const;
  bool softplus_of(ValueId s, ValueId x, std::vector<int>& nodes) const;
  std::optional<ValueId> relu6_plus3(ValueId r, std::vector<int>& nodes) const;
  std::optional<ValueId> sixth_of_relu6(int d, std::vector<int>& nodes) const;
  std::optional<double> clip_bound(int clip, size_t input, const char* attr) const;

  const ir::Graph& g_;
  std::vector<int> producer_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> users_;
  std::vector<char> claimed_;
};

// ---- LayerNorm ------------------------------------------------------------------------------

// ReduceMean node i reduces exactly the last axis of its input and keeps it as 1.
bool Matcher::reduces_last_axis(int i) const {
  const ir::Node& n = node(i);
  if (n.get_int("keepdims", 1) != 1) return false;
  const int64_t rank = static_cast<int64_t>(g_.type(in(i, 0)).shape.size());
  std::vector<int64_t> axes;
  if (in(i, 1) != kNoValue) {
    if (!g_.value(in(i, 1)).is_constant()) return false;
    axes = g_.value(in(i, 1)).data->to_i64_vector();
  } else {
    axes = n.get_ints("axes");
  }
  // No axes reduces them all: the last one when there is one.
  if (axes.empty()) return rank == 1 && n.get_int("noop_with_empty_axes", 0) == 0;
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// `affine` (gamma or beta) broadcast against x varies along x's last axis only, as
// LayerNormalization's Scale and B do: rank <= x's, every dim 1 but the last, which is 1 or C.
bool Matcher::fits_last_axis(ValueId affine, ValueId x) const {
  const Shape &a = g_.type(affine).shape, &s = g_.type(x).shape;
  if (g_.type(affine).dtype != g_.type(x).dtype || a.size() > s.size()) return false;
  for (size_t k = 0; k + 1 < a.size(); ++k)
    if (a[k] != 1) return false;
  return a.empty() || a.back() == 1 || a.back() == s.back();
}

std::optional<Match> Matcher::layer_norm(int i) const {
  // y = d / s or d * Reciprocal(s), s = Sqrt(v + eps).
  Match m;
  m.nodes = {i};
  const ir::Node& norm = node(i);
  ValueId d = kNoValue, s = kNoValue;
  if (norm.op == "Div") {
    d = in(i, 0);
    s = in(i, 1);
  } else if (norm.op == "Mul") {
    for (size_t k : {0, 1}) {
      const int r = sole_def(in(i, k), "Reciprocal");
      if (r < 0) continue;
      m.nodes.push_back(r);
      d = in(i, 1 - k);
      s = in(r, 0);
      break;
    }
  }
  const int sqrt = sole_def(s, "Sqrt");
  const int add = sqrt < 0 ? -1 : sole_def(in(sqrt, 0), "Add");
  if (add < 0) return std::nullopt;
  m.nodes.insert(m.nodes.end(), {sqrt, add});
  const bool eps_first = scalar(in(add, 0)).has_value();
  const ValueId eps = in(add, eps_first ? 0 : 1), v = in(add, eps_first ? 1 : 0);
  const int var = sole_def(v, "ReduceMean");
  if (!scalar(eps) || var < 0 || !reduces_last_axis(var) || g_.type(out(add)) != g_.type(v))
    return std::nullopt;
  m.nodes.push_back(var);

  // v = mean of d^2 over the last axis, d = x - ReduceMean(x); d is read by the square and y
  // only.
  const ValueId sq = in(var, 0);
  int square = sole_def(sq, "Pow");
  int d_uses = 2;
  if (square >= 0 && !(in(square, 0) == d && is_scalar(in(square, 1), 2.0))) return std::nullopt;
  if (square < 0) {
    square = sole_def(sq, "Mul");
    d_uses = 3;
    if (square < 0 || in(square, 0) != d || in(square, 1) != d) return std::nullopt;
  }
  m.nodes.push_back(square);
  const int sub = def(d, "Sub");
  if (sub < 0 || uses_[static_cast<size_t>(d)] != d_uses) return std::nullopt;
  const ValueId x = in(sub, 0);
  const int mean = sole_def(in(sub, 1), "ReduceMean");
  if (mean < 0 || in(mean, 0) != x || !reduces_last_axis(mean)) return std::nullopt;
  m.nodes.insert(m.nodes.end(), {sub, mean});
  if (!is_float(g_.type(x).dtype)) return std::nullopt;

  // The optional y * gamma, then + beta, when y (and y * gamma) has no other reader.
  ValueId y = out(i), gamma = kNoValue, beta = kNoValue;
  auto take = [&](std::string_view op, ValueId& operand) {
    // One reader, and no graph output: a graph output has no reader node.
    const std::vector<int>& readers = users_[static_cast<size_t>(y)];
    if (uses_[static_cast<size_t>(y)] != 1 || readers.size() != 1) return;
    const int u = readers.front();
    if (claimed_[static_cast<size_t>(u)] || node(u).op != op) return;
    const ValueId other = in(u, in(u, 0) == y ? 1 : 0);
    if (other == y || !fits_last_axis(other, x)) return;
    operand = other;
    m.nodes.push_back(u);
    y = out(u);
  };
  take("Mul", gamma);
  take("Add", beta);
  if (g_.type(y) != g_.type(x)) return std::nullopt;

  m.op = "LayerNormalization";
  m.inputs = {x, gamma, beta};
  // Float attributes are float32, as in ONNX.
  m.attrs = {{"axis", int64_t{-1}},
             {"epsilon", static_cast<double>(static_cast<float>(*scalar(eps)))}};
  return m;
}

// ---- GELU -----------------------------------------------------------------------------------

// Add node `add` computes a + b (either order), b a constant.
bool Matcher::sum_of(int add, ValueId a, double b) const {
  return (in(add, 0) == a && near(in(add, 1), b)) || (in(add, 1) == a && near(in(add, 0), b));
}

// z = x / sqrt(2) or x * (1 / sqrt(2)).
bool Matcher::erf_argument(ValueId z, ValueId x, std::vector<int>& nodes) const {
  const int div = sole_def(z, "Div");
  if (div >= 0) {
    nodes.push_back(div);
    return in(div, 0) == x && near(in(div, 1), std::numbers::sqrt2);
  }
  const std::optional<std::vector<ValueId>> f = factors(z, 2, nodes);
  if (!f) return false;
  const size_t c = (*f)[0] == x ? 1 : 0;
  return (*f)[1 - c] == x && near((*f)[c], 1 / std::numbers::sqrt2);
}

// u = sqrt(2/pi) * (x + 0.044715 * x^3), x^3 as x * x * x or Pow(x, 3).
bool Matcher::tanh_argument(ValueId u, ValueId x, std::vector<int>& nodes) const {
  const std::optional<std::vector<ValueId>> outer = factors(u, 2, nodes);
  if (!outer) return false;
  const double sqrt_2_over_pi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
  const size_t c = near((*outer)[0], sqrt_2_over_pi) ? 0 : 1;
  const int add = sole_def((*outer)[1 - c], "Add");
  if (!near((*outer)[c], sqrt_2_over_pi) || add < 0) return false;
  nodes.push_back(add);
  const size_t k = in(add, 0) == x ? 1 : 0;
  if (in(add, 1 - k) != x) return false;
  // k = 0.044715 * x^3: one coefficient, and x three times or one Pow(x, 3).
  std::vector<ValueId> cube;
  const int mul = sole_def(in(add, k), "Mul");
  if (mul < 0 || !product(mul, 4, cube, nodes)) return false;
  const auto coefficient =
      std::find_if(cube.begin(), cube.end(), [&](ValueId f) { return near(f, 0.044715); });
  if (coefficient == cube.end()) return false;
  cube.erase(coefficient);
  if (cube.size() == 3) return std::count(cube.begin(), cube.end(), x) == 3;
  const int pow = cube.size() == 1 ? sole_def(cube[0], "Pow") : -1;
  if (pow < 0) return false;
  nodes.push_back(pow);
  return in(pow, 0) == x && is_scalar(in(pow, 1), 3.0);
}

// h = 1 + p with p = Erf(...) or Tanh(...) of x: true for the tanh form, false for the erf
// form, nullopt for neither.
std::optional<bool> Matcher::phi(ValueId h, ValueId x, std::vector<int>& nodes) const {
  const int add = sole_def(h, "Add");
  if (add < 0) return std::nullopt;
  const ValueId p = in(add, near(in(add, 0), 1.0) ? 1 : 0);
  if (!sum_of(add, p, 1.0)) return std::nullopt;
  nodes.push_back(add);
  const int erf = sole_def(p, "Erf");
  if (erf >= 0) {
    nodes.push_back(erf);
    if (erf_argument(in(erf, 0), x, nodes)) return false;
    return std::nullopt;
  }
  const int tanh = sole_def(p, "Tanh");
  if (tanh < 0) return std::nullopt;
  nodes.push_back(tanh);
  if (tanh_argument(in(tanh, 0), x, nodes)) return true;
  return std::nullopt;
}

std::optional<Match> Matcher::gelu(int i) const {
  if (node(i).op != "Mul") return std::nullopt;
  std::vector<ValueId> f;
  std::vector<int> product_nodes;
  if (!product(i, 3, f, product_nodes) || f.size() != 3) return std::nullopt;
  const auto half = std::find_if(f.begin(), f.end(), [&](ValueId v) { return near(v, 0.5); });
  if (half == f.end()) return std::nullopt;
  f.erase(half);
  // The two other factors are x and 1 + p(x), in either order.
  for (size_t k : {0, 1}) {
    const ValueId x = f[k], h = f[1 - k];
    Match m;
    m.nodes = product_nodes;
    const std::optional<bool> tanh = phi(h, x, m.nodes);
    if (!tanh || !is_float(g_.type(x).dtype) || g_.type(out(i)) != g_.type(x)) continue;
    m.op = "Gelu";
    m.inputs = {x};
    if (*tanh) m.attrs["approximate"] = std::string("tanh");
    return m;
  }
  return std::nullopt;
}

// ---- Mish -----------------------------------------------------------------------------------

// s = Softplus(x) or Log(Add(Exp(x), 1)).
bool Matcher::softplus_of(ValueId s, ValueId x, std::vector<int>& nodes) const {
  const int softplus = sole_def(s, "Softplus");
  if (softplus >= 0) {
    if (in(softplus, 0) != x) return false;
    nodes.push_back(softplus);
    return true;
  }
  const int log = sole_def(s, "Log");
  if (log < 0) return false;
  const int add = sole_def(in(log, 0), "Add");
  if (add < 0) return false;
  const ValueId e = in(add, near(in(add, 0), 1.0) ? 1 : 0);
  const int exp = sole_def(e, "Exp");
  if (!sum_of(add, e, 1.0) || exp < 0 || in(exp, 0) != x) return false;
  nodes.insert(nodes.end(), {log, add, exp});
  return true;
}

std::optional<Match> Matcher::mish(int i) const {
  if (node(i).op != "Mul" || node(i).inputs.size() != 2) return std::nullopt;
  for (size_t k : {0, 1}) {
    const ValueId x = in(i, k);
    const int tanh = sole_def(in(i, 1 - k), "Tanh");
    if (tanh < 0) continue;
    Match m;
    m.nodes = {i, tanh};
    if (!softplus_of(in(tanh, 0), x, m.nodes) || !is_float(g_.type(x).dtype) ||
        g_.type(out(i)) != g_.type(x))
      continue;
    m.op = "Mish";
    m.inputs = {x};
    return m;
  }
  return std::nullopt;
}

// ---- HardSwish, HardSigmoid ------------------------------------------------------------------

// Clip node `clip`'s bound: its input (opset 11 on) or attribute (before); -inf / +inf when
// absent (an input that is not a one-element constant: nothing).
std::optional<double> Matcher::clip_bound(int clip, size_t input, const char* attr) const {
  const double none = input == 1 ? -INFINITY : INFINITY;
  if (in(clip, input) != kNoValue) return scalar(in(clip, input));
  return node(clip).get_float(attr, none);
}

// The x of r = relu6(x + 3), its nodes appended to `nodes`; nothing when r is not one.
std::optional<ValueId> Matcher::relu6_plus3(ValueId r, std::vector<int>& nodes) const {
  std::vector<int> mine;
  ValueId under = kNoValue;  // the operand of the upper bound 6
  bool nonnegative = false;  // under is a Relu's output
  double low = 0;
  if (const int clip = sole_def(r, "Clip"); clip >= 0) {
    const std::optional<double> lo = clip_bound(clip, 1, "min"), hi = clip_bound(clip, 2, "max");
    if (!lo || !hi || *hi != 6.0) return std::nullopt;
    mine.push_back(clip);
    under = in(clip, 0);
    low = *lo;
  } else if (const int min = sole_def(r, "Min"); min >= 0 && node(min).inputs.size() == 2) {
    const size_t six = near(in(min, 0), 6.0) ? 0 : 1;
    if (!is_scalar(in(min, six), 6.0)) return std::nullopt;
    mine.push_back(min);
    under = in(min, 1 - six);
    low = -INFINITY;
  } else {
    return std::nullopt;
  }
  if (const int relu = sole_def(under, "Relu"); relu >= 0) {
    mine.push_back(relu);
    under = in(relu, 0);
    nonnegative = true;
  }
  if (!(low == 0.0 || (nonnegative && low <= 0.0))) return std::nullopt;
  const int add = sole_def(under, "Add");
  if (add < 0) return std::nullopt;
  const ValueId x = in(add, near(in(add, 0), 3.0) ? 1 : 0);
  if (!sum_of(add, x, 3.0) || !is_float(g_.type(x).dtype) || g_.type(r) != g_.type(x))
    return std::nullopt;
  mine.push_back(add);
  nodes.insert(nodes.end(), mine.begin(), mine.end());
  return x;
}

// The x of relu6(x + 3) / 6 when node d computes it as Div(r, 6) or Mul(r, 1/6); d and r's nodes
// appended to `nodes`.
std::optional<ValueId> Matcher::sixth_of_relu6(int d, std::vector<int>& nodes) const {
  const ir::Node& k = node(d);
  if (k.inputs.size() != 2) return std::nullopt;
  ValueId r = kNoValue;
  if (k.op == "Div" && near(in(d, 1), 6.0)) r = in(d, 0);
  if (k.op == "Mul")
    for (size_t j : {0, 1})
      if (near(in(d, j), 1.0 / 6.0)) r = in(d, 1 - j);
  std::vector<int> mine = {d};
  const std::optional<ValueId> x = r == kNoValue ? std::nullopt : relu6_plus3(r, mine);
  if (x) nodes.insert(nodes.end(), mine.begin(), mine.end());
  return x;
}

std::optional<Match> Matcher::hard_swish(int i) const {
  const ir::Node& n = node(i);
  if (n.inputs.size() != 2 || (n.op != "Mul" && n.op != "Div")) return std::nullopt;
  auto made = [&](std::vector<int> nodes, ValueId x, bool swish) -> std::optional<Match> {
    if (g_.type(out(i)) != g_.type(x)) return std::nullopt;
    Match m;
    m.nodes = std::move(nodes);
    m.inputs = {x};
    m.op = swish ? "HardSwish" : "HardSigmoid";
    if (!swish) {
      m.attrs["alpha"] = static_cast<double>(1.0f / 6.0f);  // ONNX float attributes are f32
      m.attrs["beta"] = 0.5;
    }
    return m;
  };
  if (n.op == "Mul") {
    // Mul(x, h), h x's HardSigmoid: a HardSigmoid node of alpha 1/6 and beta 0.5, or r / 6.
    for (size_t k : {0, 1}) {
      const ValueId x = in(i, k), h = in(i, 1 - k);
      if (const int hs = sole_def(h, "HardSigmoid");
          hs >= 0 && in(hs, 0) == x &&
          std::fabs(node(hs).get_float("alpha", 0.2) - 1.0 / 6.0) <= 1e-6 &&
          std::fabs(node(hs).get_float("beta", 0.5) - 0.5) <= 1e-6)
        return made({i, hs}, x, true);
      std::vector<int> nodes = {i};
      if (const int d = sole_def(h, "Div"); d >= 0 && sixth_of_relu6(d, nodes) == x)
        return made(nodes, x, true);
    }
    // A product of exactly x, r and 1/6, in any association (r * 1/6 included).
    std::vector<int> nodes;
    std::vector<ValueId> leaves;
    if (product(i, 3, leaves, nodes) && leaves.size() == 3) {
      for (size_t s6 = 0; s6 < 3; ++s6) {
        if (!near(leaves[s6], 1.0 / 6.0)) continue;
        for (size_t r = 0; r < 3; ++r) {
          if (r == s6) continue;
          std::vector<int> all = nodes;
          const std::optional<ValueId> x = relu6_plus3(leaves[r], all);
          if (x && *x == leaves[3 - s6 - r]) return made(all, *x, true);
        }
      }
    }
  } else if (const int mul = sole_def(in(i, 0), "Mul"); mul >= 0 && near(in(i, 1), 6.0)) {
    // Div(Mul(x, r), 6).
    for (size_t k : {0, 1}) {
      std::vector<int> nodes = {i, mul};
      const std::optional<ValueId> x = relu6_plus3(in(mul, 1 - k), nodes);
      if (x && *x == in(mul, k)) return made(nodes, *x, true);
    }
  }
  // The HardSigmoid alone, unless a Mul by its x reads it (that Mul's HardSwish match).
  std::vector<int> own;
  const std::optional<ValueId> x = sixth_of_relu6(i, own);
  if (!x) return std::nullopt;
  const std::vector<int>& readers = users_[static_cast<size_t>(out(i))];
  if (readers.size() == 1) {
    const ir::Node& r = node(readers[0]);
    if (r.op == "Mul" && std::find(r.inputs.begin(), r.inputs.end(), *x) != r.inputs.end())
      return std::nullopt;
  }
  return made(own, *x, false);
}

// ---- Pixel shuffles --------------------------------------------------------------------------

std::optional<Match> Matcher::pixel_shuffle(int i) const {
  if (node(i).op != "Reshape") return std::nullopt;
  const int t = sole_def(in(i, 0), "Transpose");
  const int r1 = t < 0 ? -1 : sole_def(in(t, 0), "Reshape");
  if (r1 < 0) return std::nullopt;
  const ValueId x = in(r1, 0);
  const Shape &xs = g_.type(x).shape, &six = g_.type(out(r1)).shape, &ys = g_.type(out(i)).shape;
  if (xs.size() != 4 || six.size() != 6 || ys.size() != 4 || g_.type(out(i)).dtype != g_.type(x).dtype)
    return std::nullopt;
  const std::vector<int64_t> perm = node(t).get_ints("perm");
  const int64_t n = xs[0];
  Match m;
  m.nodes = {i, t, r1};
  m.inputs = {x};
  auto is = [](const Shape& s, std::initializer_list<int64_t> want) {
    return s == Shape(want);
  };
  if (perm == std::vector<int64_t>{0, 1, 4, 2, 5, 3} || perm == std::vector<int64_t>{0, 3, 4, 1, 5, 2}) {
    const bool crd = perm[1] == 1;
    const int64_t r = crd ? six[2] : six[1], c = crd ? six[1] : six[3], h = xs[2], w = xs[3];
    const bool shapes = r > 1 && xs[1] == c * r * r && is(ys, {n, c, h * r, w * r}) &&
                        (crd ? is(six, {n, c, r, r, h, w}) : is(six, {n, r, r, c, h, w}));
    if (!shapes) return std::nullopt;
    m.op = "DepthToSpace";
    m.attrs["blocksize"] = r;
    m.attrs["mode"] = std::string(crd ? "CRD" : "DCR");
    return m;
  }
  if (perm == std::vector<int64_t>{0, 3, 5, 1, 2, 4}) {
    const int64_t r = six[3], c = xs[1], h = six[2], w = six[4];
    if (r <= 1 || !is(six, {n, c, h, r, w, r}) || !is(ys, {n, c * r * r, h, w})) return std::nullopt;
    m.op = "SpaceToDepth";
    m.attrs["blocksize"] = r;
    return m;
  }
  return std::nullopt;
}

}  // namespace

ir::Graph fuse_norm_gelu(ir::Graph g) {
  Matcher matcher(g);
  std::vector<Match> matches;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int n = static_cast<int>(i);
    if (matcher.claimed(n)) continue;
    std::optional<Match> m = matcher.layer_norm(n);
    if (!m) m = matcher.gelu(n);
    if (!m) m = matcher.mish(n);
    if (!m) m = matcher.hard_swish(n);
    if (!m) m = matcher.pixel_shuffle(n);
    if (!m) continue;
    // Matches are found on the unchanged graph; a node already claimed is never part of a
    // later match (the matcher ignores claimed nodes).
    matcher.claim(*m);
    matches.push_back(std::move(*m));
  }
  if (matches.empty()) return g;

  UniqueNames names = UniqueNames::of_values(g);
  std::vector<char> erase(g.nodes.size(), 0);
  for (Match& m : matches) {
    // Every other node of the pattern comes before the last, and so do the replacement's
    // inputs (they are the pattern's inputs): it can take the last node's place.
    const int last = *std::max_element(m.nodes.begin(), m.nodes.end());
    for (int n : m.nodes) erase[static_cast<size_t>(n)] = n != last;
    // add_constant below adds a value, not a node: the reference stays valid.
    ir::Node& anchor = g.nodes[static_cast<size_t>(last)];
    if (m.op == "LayerNormalization" && m.inputs[1] == kNoValue) {
      const ir::TensorType& x = g.type(m.inputs[0]);
      Tensor ones(x.dtype, {x.shape.back()});
      for (int64_t k = 0; k < ones.numel(); ++k) ones.set_f64(k, 1.0);
      m.inputs[1] = g.add_constant(names.fresh(anchor.name + ".scale"), std::move(ones));
    }
    while (m.inputs.size() > 1 && m.inputs.back() == kNoValue) m.inputs.pop_back();
    anchor.op = m.op;
    anchor.inputs = std::move(m.inputs);
    anchor.attrs = std::move(m.attrs);
  }
  erase_nodes(g, erase);
  return g;
}

}  // namespace tessel::passes
