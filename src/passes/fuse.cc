// Fuses the per-element work after each contraction into it, as epilogue data
// (ops/tessel_epilogue.h): a tessel.Conv or tessel.Gemm absorbs the chain of ops that reads its
// output, one op at a time, while each intermediate value has exactly one reader:
//   Relu, LeakyRelu, Sigmoid, HardSwish       -> relu, leaky_relu(alpha), sigmoid, hardswish
//   Clip with constant (or absent) bounds     -> clip(min, max); an absent bound is the fp32
//                                                range, as in the Clip reference kernel
//   Mul(v, Sigmoid(v))                         -> silu (v read by exactly those two)
//   Add(v, r), r any tensor of v's type        -> add_residual, r becomes input R (one per node)
//   tessel.DepthToSpace (tessel.Conv only)     -> store = depth_to_space; nothing after it
// The conv's bias was already input B (convert-layout); Gemm's likewise.
//
// Order: the fused node takes the place of the last node it absorbs, not of the contraction.
// Every operand it reads is an operand of some absorbed node or of the contraction, all of
// which come before that last node; every value it writes was written there. So the residual
// r may be computed anywhere before the Add -- even after the conv -- and no node moves
// except the contraction, later, past nodes that do not read its chain. Topological order,
// and the position of every surviving value's producer, are preserved.
//
// Injective chains that no contraction absorbs (a Relu after a pool, a residual Add of two
// pool outputs, the edge Transpose + Pad + Cast) stay ONNX ops in place: the lowering groups
// maximal single-consumer chains of injective ops into one generated kernel, so marking them
// here would only duplicate that analysis. Run after convert-layout (which creates the tessel
// contractions) and choose-precision.
#include <algorithm>
#include <cfloat>
#include <optional>

#include "ops/tessel_epilogue.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;
using ops::EpilogueKind;
using ops::EpilogueStep;

class Fuser {
 public:
  explicit Fuser(ir::Graph g)
      : g_(std::move(g)),
        uses_(use_counts(g_)),
        users_(g_.users()),
        absorbed_(g_.nodes.size(), 0),
        placed_(g_.nodes.size()) {}

  ir::Graph run() {
    bool changed = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const std::string& op = g_.nodes[i].op;
      if (!absorbed_[i] && (op == "tessel.Conv" || op == "tessel.Gemm")) changed |= fuse_from(i);
    }
    if (!changed) return std::move(g_);
    std::vector<ir::Node> nodes;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (placed_[i]) {
        nodes.push_back(std::move(*placed_[i]));
      } else if (!absorbed_[i]) {
        nodes.push_back(std::move(g_.nodes[i]));
      }
    }
    g_.nodes = std::move(nodes);
    g_.compact();
    return std::move(g_);
  }

 private:
  // The only reader of v (and v is no graph output), or -1.
  int sole_user(ValueId v) const {
    const std::vector<int>& u = users_[static_cast<size_t>(v)];
    return uses_[static_cast<size_t>(v)] == 1 && u.size() == 1 && !absorbed_[u[0]] ? u[0] : -1;
  }

  const Tensor* constant(ValueId v) const {
    return v == kNoValue ? nullptr : g_.value(v).data.get();
  }

  // The epilogue step of a per-element activation reading v as its input 0.
  std::optional<EpilogueStep> activation_step(const ir::Node& n, ValueId v) const {
    if (n.inputs.empty() || n.inputs[0] != v || n.outputs.size() != 1) return std::nullopt;
    if (n.op == "Relu") return EpilogueStep{EpilogueKind::kRelu};
    if (n.op == "Sigmoid") return EpilogueStep{EpilogueKind::kSigmoid};
    if (n.op == "HardSwish") return EpilogueStep{EpilogueKind::kHardSwish};
    if (n.op == "LeakyRelu")
      return EpilogueStep{EpilogueKind::kLeakyRelu, n.get_float("alpha", 0.01)};
    if (n.op != "Clip") return std::nullopt;
    double bound[2] = {n.get_float("min", -FLT_MAX), n.get_float("max", FLT_MAX)};
    for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
      if (n.inputs[i] == kNoValue) continue;
      const Tensor* t = constant(n.inputs[i]);
      if (!t) return std::nullopt;  // a run-time bound is no epilogue parameter
      bound[i - 1] = t->get_f64(0);
    }
    return EpilogueStep{EpilogueKind::kClip, bound[0], bound[1]};
  }

  // Mul(v, Sigmoid(v)) with v read by exactly those two: the Sigmoid's and Mul's indices.
  std::optional<std::pair<int, int>> silu(ValueId v) const {
    const std::vector<int>& u = users_[static_cast<size_t>(v)];
    if (uses_[static_cast<size_t>(v)] != 2 || u.size() != 2) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      const int s = u[k], m = u[1 - k];
      const ir::Node& sig = g_.nodes[s];
      const ir::Node& mul = g_.nodes[m];
      if (sig.op != "Sigmoid" || mul.op != "Mul" || absorbed_[s] || absorbed_[m]) continue;
      const ValueId sv = sig.outputs[0];
      const bool operands = (mul.inputs[0] == v && mul.inputs[1] == sv) ||
                            (mul.inputs[0] == sv && mul.inputs[1] == v);
      if (operands && sole_user(sv) == m) return std::make_pair(s, m);
    }
    return std::nullopt;
  }

  // The other operand r of Add(v, r) / Add(r, v) if it can become the residual input R: a
  // non-constant of v's type, and the epilogue has no residual yet.
  ValueId residual(const ir::Node& add, ValueId v, const std::vector<EpilogueStep>& steps) const {
    if (add.op != "Add" || add.inputs.size() != 2) return kNoValue;
    // v has this Add as its only reader, so exactly one operand is v.
    const ValueId r = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    if (g_.value(r).is_constant()) return kNoValue;
    if (!(g_.type(r) == g_.type(v)) || !(g_.type(add.outputs[0]) == g_.type(v))) return kNoValue;
    for (const EpilogueStep& s : steps)
      if (s.kind == EpilogueKind::kAddResidual) return kNoValue;
    return r;
  }

  bool fuse_from(size_t i) {
    ir::Node fused = g_.nodes[i];
    const bool conv = fused.op == "tessel.Conv";
    std::vector<EpilogueStep> steps = ops::read_epilogue(fused);
    ops::StoreMap store = conv ? ops::read_store(fused) : ops::StoreMap{};
    ValueId v = fused.outputs[0];
    std::vector<int> chain;
    while (store.kind == ops::StoreMap::Kind::kNhwc) {
      if (auto sm = silu(v)) {
        steps.push_back({EpilogueKind::kSilu});
        chain.push_back(sm->first);
        chain.push_back(sm->second);
        v = g_.nodes[sm->second].outputs[0];
        continue;
      }
      const int u = sole_user(v);
      if (u < 0) break;
      const ir::Node& next = g_.nodes[u];
      if (auto step = activation_step(next, v)) {
        steps.push_back(*step);
      } else if (ValueId r = residual(next, v, steps); r != kNoValue) {
        steps.push_back({EpilogueKind::kAddResidual});
        fused.inputs.resize(3, kNoValue);  // B may be omitted; R is input 3
        fused.inputs.push_back(r);
      } else if (conv && next.op == "tessel.DepthToSpace") {
        store.kind = ops::StoreMap::Kind::kDepthToSpace;
        store.block = next.require_int("blocksize");
        store.dcr = next.get_string("mode", "DCR") == "DCR";
      } else {
        break;
      }
      chain.push_back(u);
      v = next.outputs[0];
    }
    if (chain.empty()) return false;
    fused.outputs[0] = v;
    ops::write_epilogue(fused, steps);
    if (conv) ops::write_store(fused, store);
    absorbed_[i] = 1;
    for (int c : chain) absorbed_[c] = 1;
    // The SiLU pair is pushed Sigmoid first, but the Mul comes after it: take the last index.
    placed_[static_cast<size_t>(*std::max_element(chain.begin(), chain.end()))] = std::move(fused);
    return true;
  }

  ir::Graph g_;
  std::vector<int> uses_;
  std::vector<std::vector<int>> users_;
  std::vector<char> absorbed_;
  std::vector<std::optional<ir::Node>> placed_;  // a fused node, at the index it replaces
};

}  // namespace

ir::Graph fuse(ir::Graph g) { return Fuser(std::move(g)).run(); }

}  // namespace tessel::passes
