// integer-readers: the readers of a quantized tensor's DequantizeLinear read the quantized
// tensor itself, where every one of them can:
//
//   %f = DequantizeLinear(%q, %s, %z)
//   %m = ReduceMean(%f) | GlobalAveragePool(%f)      %y = tessel.QLinearReduceMean(%q, %s, %z, %t, %w)
//   [%r = Reshape(%m, ...)]                       ->  [%r = Reshape(%y, ...)]
//   %y = QuantizeLinear(%m | %r, %t, %w)
//
//   %p = Mul(%f, %g)                              ->  %y = tessel.MulQuantizeLinear(%q, %g, %t, %w, %s, %z)
//   %y = QuantizeLinear(%p, %t, %w)
//
//   %r = Transpose(%f), %u = Reshape(%r, ...)     ->  %r = Transpose(%q), %u = Reshape(%r, ...)
//   %y = QuantizeLinear(%u, %s, %z)                   (the same grid: Q(DQ(q)) is q)
//
// (the Reshape after a mean standing for any shape-only op: Flatten, Squeeze, Unsqueeze too;
// the chain of moves any of Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Slice). And,
// reader by reader, a chain of moves that ends at a
// contraction's input moves the integers, the DequantizeLinear after it:
//
//   %r = Transpose(%f)                            ->  %r8 = Transpose(%q)
//   %c = tessel.Conv(%r, ...)                         %r = DequantizeLinear(%r8, %s, %z)
//                                                     %c = tessel.Conv(%r, ...)
//
// so that fold-qdq, which runs next, finds the conv's input dequantized and makes it an int8
// conv (a QDQ ShuffleNet's channel shuffle: Reshape, Transpose, Reshape in NCHW, between the
// layout Transposes convert-layout puts around it, each requantized to the same grid, left both
// of its convs float). The model's input edge (a DequantizeLinear of the graph input or of its
// QuantizeLinear) stays: fuse folds its layout into the stem. In a quantized
// squeeze-excite block, the features a conv quantizes are dequantized once and read twice in
// float: by the mean that computes the gate and by the Mul that applies it, each followed by a
// QuantizeLinear (onnxruntime's QDQ EfficientNet, MobileNet-v3, RegNet-Y); a quantized
// classifier dequantizes its last features for the global pool and quantizes the pool. With
// every reader rewritten, nothing reads %f: the conv that writes %q (its epilogue ending in the
// quantize, after fuse) stores int8 instead of the dequantized f16 tensor, and the mean and the
// gate read half the bytes, with the mean's QuantizeLinear folded into its store. Where one
// reader cannot take %q (a Sigmoid, a concat, a float conv), nothing changes: %f is written
// anyway, and reading it costs no more than reading %q.
//
// The values are the DequantizeLinear's up to f32 roundings, as the ops define them
// (ops/quantized.cc): the mean of %q's integers times s / t, the gate's product times s / t;
// a result within an ulp of a rounding tie may land one step away. The mean's sums must be
// exact in the kernel's f32 (counts up to 2^24 / 255); %z and %w are per tensor. A Mul by a
// constant, or by a value computed element for element from %q (a SiLU's gate), is left to
// fuse, which folds it into the conv's epilogue instead.
//
// Runs before fold-qdq (so that the contractions the moves reach see their input dequantized)
// and before choose-precision and fuse.
#include <algorithm>
#include <set>

#include "ir/infer.h"
#include "ops/quant_common.h"
#include "ops/reduce_common.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

bool shape_only(const ir::Node& n) {
  return n.op == "Reshape" || n.op == "Flatten" || n.op == "Squeeze" || n.op == "Unsqueeze";
}

// An op that moves its input 0's values unchanged (its other inputs constants: a shape, Slice's
// bounds), one output: it moves integers as it moves floats. Not DepthToSpace: fuse folds a
// pixel shuffle between a conv's QuantizeLinear and DequantizeLinear into the conv's store.
bool moves_values(const ir::Graph& g, const ir::Node& n) {
  const bool move = shape_only(n) || n.op == "Transpose" || n.op == "Slice";
  if (!move || n.outputs.size() != 1 || n.inputs.empty()) return false;
  return std::all_of(n.inputs.begin() + 1, n.inputs.end(),
                     [&](ir::ValueId v) { return v == ir::kNoValue || g.value(v).is_constant(); });
}

// From reader r of a value (reading it as input 0 only), the moves that each alone read the
// one before: r and the moves after it. Returns their node indices (empty where r is not a
// move) and, in *next, the node that alone reads the last one's output (-1: none, or several).
std::vector<int> move_chain(const ir::Graph& g, const std::vector<std::vector<int>>& users, int r, int* next) {
  std::vector<int> chain;
  *next = -1;
  for (int n = r; n >= 0 && moves_values(g, g.nodes[n]);) {
    chain.push_back(n);
    const ir::ValueId out = g.nodes[n].outputs[0];
    const int after = sole_reader(g, users, out);
    if (after < 0 || g.nodes[after].inputs[0] != out ||
        std::count(g.nodes[after].inputs.begin(), g.nodes[after].inputs.end(), out) != 1)
      return chain;
    *next = after;
    n = after;
  }
  return chain;
}

// A per-tensor QuantizeLinear / DequantizeLinear: its constant scale, its zero point (absent or
// one constant value).
std::optional<QdqParams> per_tensor(const ir::Graph& g, const ir::Node& n) {
  std::optional<QdqParams> p = qdq_params(g, n);
  if (!p || !p->per_tensor() || !p->tensor_zero_point()) return std::nullopt;
  return p;
}

// The same quantization grid: equal scales and zero points, one integer dtype.
bool same_grid(const QdqParams& a, const QdqParams& b) {
  return a.integer == b.integer && a.scale->get_f64(0) == b.scale->get_f64(0) &&
         *a.tensor_zero_point() == *b.tensor_zero_point();
}

// A mean's reduced axes: ReduceMean's (input 1, a constant, or the attribute), a global pool's
// pixels (tessel.GlobalAveragePool: NHWC's H and W; GlobalAveragePool: every dim after N and C).
std::optional<std::vector<int64_t>> mean_axes(const ir::Graph& g, const ir::Node& n) {
  const int64_t rank = static_cast<int64_t>(g.type(n.inputs[0]).shape.size());
  if (n.op == "tessel.GlobalAveragePool") return std::vector<int64_t>{1, 2};
  if (n.op == "GlobalAveragePool") {
    std::vector<int64_t> axes;
    for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  if (n.op != "ReduceMean" || n.get_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
  std::vector<int64_t> axes = n.get_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue) {
    const ir::Value& v = g.value(n.inputs[1]);
    if (!v.is_constant()) return std::nullopt;
    axes = v.data->to_i64_vector();
  }
  if (axes.empty()) return std::nullopt;  // every axis: no classifier or gate reduces so
  return axes;
}

// The values v is computed from element for element: v and, walking back a few nodes over
// producers of v's shape, their inputs. A Mul of two values that share one (a SiLU: x times
// the Sigmoid of x, each through a QuantizeLinear and DequantizeLinear of its own) is the
// activation fuse folds into the epilogue of x's conv; a squeeze-excite gate, broadcast from
// its [N, 1, 1, C], shares none with the features.
void elementwise_sources(const ir::Graph& g, const std::vector<int>& producers, ir::ValueId v, const Shape& shape,
                         std::set<ir::ValueId>& out, int depth = 6) {
  if (g.value(v).is_constant() || g.type(v).shape != shape || !out.insert(v).second) return;
  if (depth == 0 || producers[v] < 0) return;
  for (ir::ValueId in : g.nodes[producers[v]].inputs)
    if (in != ir::kNoValue) elementwise_sources(g, producers, in, shape, out, depth - 1);
}

bool share_elementwise_source(const ir::Graph& g, const std::vector<int>& producers, ir::ValueId a, ir::ValueId b) {
  std::set<ir::ValueId> from_a, from_b;
  elementwise_sources(g, producers, a, g.type(a).shape, from_a);
  elementwise_sources(g, producers, b, g.type(b).shape, from_b);
  return std::any_of(from_a.begin(), from_a.end(), [&](ir::ValueId v) { return from_b.count(v) != 0; });
}

// One planned rewrite of a reader of %f (the DequantizeLinear's output).
struct Reader {
  enum Kind { kMean, kMul, kRequantize } kind;
  int node;                   // the mean, the Mul, or the first move
  int quantize;               // the QuantizeLinear after it
  int reshape = -1;           // kMean: a shape-only op between the mean and the QuantizeLinear;
                              // kRequantize: the last move
  std::vector<int64_t> axes;  // kMean
};

// How reader r of %f (DequantizeLinear `dq`'s output) reads %q instead, or nothing.
std::optional<Reader> plan_reader(const ir::Graph& g, const std::vector<std::vector<int>>& users,
                                  const std::vector<int>& producers, const ir::Node& dq, const QdqParams& grid,
                                  int r) {
  const ir::Node& n = g.nodes[r];
  const ir::ValueId f = dq.outputs[0];
  if (std::count(n.inputs.begin(), n.inputs.end(), f) != 1 || n.outputs.size() != 1) return std::nullopt;
  if (n.op == "Mul" && n.inputs.size() == 2) {
    const ir::ValueId other = n.inputs[n.inputs[0] == f ? 1 : 0];
    if (g.value(other).is_constant() || !is_float_storage(g.type(other).dtype) ||
        share_elementwise_source(g, producers, f, other))
      return std::nullopt;
    const int q = sole_tensor_quantize(g, users, n.outputs[0]);
    if (q < 0) return std::nullopt;
    return Reader{Reader::kMul, r, q, -1, {}};
  }
  if (n.inputs[0] != f) return std::nullopt;
  int next = -1;
  if (const std::vector<int> chain = move_chain(g, users, r, &next); !chain.empty()) {
    const ir::ValueId end = g.nodes[chain.back()].outputs[0];
    if (next < 0 || next != sole_tensor_quantize(g, users, end) || !same_grid(grid, *per_tensor(g, g.nodes[next])))
      return std::nullopt;
    return Reader{Reader::kRequantize, r, next, chain.back(), {}};
  }
  std::optional<std::vector<int64_t>> axes = mean_axes(g, n);
  if (!axes) return std::nullopt;
  if (ops::plan_reduce(n, g.type(f).shape, *axes).count > ops::kExactInt8SumCount) return std::nullopt;
  Reader mean{Reader::kMean, r, sole_tensor_quantize(g, users, n.outputs[0]), -1, *axes};
  if (mean.quantize < 0) {
    const int s = sole_reader(g, users, n.outputs[0]);
    if (s < 0 || !shape_only(g.nodes[s]) || g.nodes[s].inputs[0] != n.outputs[0]) return std::nullopt;
    mean.reshape = s;
    mean.quantize = sole_tensor_quantize(g, users, g.nodes[s].outputs[0]);
    if (mean.quantize < 0) return std::nullopt;
  }
  return mean;
}

// %q's zero point as an input (kNoValue where the DequantizeLinear has none).
ir::ValueId zero_point(const ir::Node& n) { return n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue; }

// The second form: each chain of moves from a DequantizeLinear to a contraction's input moves
// the integers, and a DequantizeLinear after it feeds the contraction.
ir::Graph moves_into_contractions(ir::Graph g) {
  const std::vector<std::vector<int>> users = g.users();
  const std::vector<int> producers = g.producers();
  auto graph_input = [&](ir::ValueId v) { return std::count(g.inputs.begin(), g.inputs.end(), v) != 0; };
  std::vector<std::vector<ir::Node>> after(g.nodes.size());  // DequantizeLinears after node i
  UniqueNames values = UniqueNames::of_values(g), names = UniqueNames::of_nodes(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node dq = g.nodes[i];
    if (dq.op != "DequantizeLinear" || dq.outputs.size() != 1 || !is_int8_operand(g.type(dq.inputs[0]).dtype) ||
        !per_tensor(g, dq))
      continue;
    // The model's input edge: fuse folds its layout into the stem.
    const ir::ValueId x = dq.inputs[0];
    const int px = producers[x];
    if (graph_input(x) || (px >= 0 && g.nodes[px].op == "QuantizeLinear" && graph_input(g.nodes[px].inputs[0])))
      continue;
    for (int r : users[dq.outputs[0]]) {
      if (g.nodes[r].inputs[0] != dq.outputs[0] ||
          std::count(g.nodes[r].inputs.begin(), g.nodes[r].inputs.end(), dq.outputs[0]) != 1)
        continue;
      int next = -1;
      const std::vector<int> chain = move_chain(g, users, r, &next);
      if (chain.empty() || next < 0 || (g.nodes[next].op != "tessel.Conv" && g.nodes[next].op != "tessel.Gemm"))
        continue;
      ir::Node& last = g.nodes[chain.back()];
      const ir::ValueId moved = last.outputs[0];
      const ir::ValueId ints = g.add_value(values.fresh(g.value(moved).name + ".int8"), g.type(moved));
      ir::Node requant = dq;
      requant.name = names.fresh(g.value(moved).name + "_DequantizeLinear");
      requant.inputs[0] = ints;
      requant.outputs = {moved};
      last.outputs[0] = ints;
      g.nodes[chain.front()].inputs[0] = x;
      after[chain.back()].push_back(std::move(requant));
    }
  }
  if (std::all_of(after.begin(), after.end(), [](const auto& a) { return a.empty(); })) return g;
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    nodes.push_back(std::move(g.nodes[i]));
    for (ir::Node& n : after[i]) nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  // A DequantizeLinear whose readers all moved away reads on for nothing.
  const std::vector<int> uses = use_counts(g);
  std::vector<char> erase(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    erase[i] = g.nodes[i].op == "DequantizeLinear" && uses[g.nodes[i].outputs[0]] == 0;
  erase_nodes(g, erase);
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

// The first form (the comment at the top): every reader of a DequantizeLinear rewritten, or none.
ir::Graph all_readers(ir::Graph g) {
  const std::vector<std::vector<int>> users = g.users();
  const std::vector<int> uses = use_counts(g);
  const std::vector<int> producers = g.producers();
  std::vector<char> erase(g.nodes.size(), 0), claimed(g.nodes.size(), 0);
  std::vector<std::pair<ir::ValueId, ir::ValueId>> renames;  // a QuantizeLinear's output -> its new writer's
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& dq = g.nodes[i];
    if (dq.op != "DequantizeLinear" || dq.outputs.size() != 1 || !is_int8_operand(g.type(dq.inputs[0]).dtype)) continue;
    const std::optional<QdqParams> grid = per_tensor(g, dq);
    const ir::ValueId f = dq.outputs[0];
    const std::vector<int>& readers = users[f];
    // Every use a node's (not a graph output), each reader distinct.
    if (!grid || readers.empty() || uses[f] != static_cast<int>(readers.size())) continue;
    std::vector<Reader> plan;
    for (int r : readers) {
      std::optional<Reader> p = claimed[r] ? std::nullopt : plan_reader(g, users, producers, dq, *grid, r);
      if (!p) break;
      plan.push_back(*p);
    }
    if (plan.size() != readers.size()) continue;
    const ir::ValueId q = dq.inputs[0], s = dq.inputs[1], z = zero_point(dq);
    for (const Reader& p : plan) {
      claimed[p.node] = 1;
      ir::Node& quantize = g.nodes[p.quantize];
      const ir::ValueId t = quantize.inputs[1];
      const ir::ValueId w = quantize.inputs.size() > 2 ? quantize.inputs[2] : ir::kNoValue;
      ir::Node& n = g.nodes[p.node];
      switch (p.kind) {
        case Reader::kMul: {
          // The QuantizeLinear takes the Mul's place (after it, so after %g; %q is older).
          const ir::ValueId gate = n.inputs[n.inputs[0] == f ? 1 : 0];
          quantize.op = "tessel.MulQuantizeLinear";
          quantize.inputs = {q, gate, t, w, s, z};
          quantize.attrs.clear();
          erase[p.node] = 1;
          break;
        }
        case Reader::kMean: {
          const int64_t keepdims = n.op == "ReduceMean" ? n.get_int("keepdims", 1) : 1;
          n.op = "tessel.QLinearReduceMean";
          n.inputs = {q, s, z, t, w};
          n.attrs = {{"axes", p.axes}, {"keepdims", keepdims}};
          g.value(n.outputs[0]).type.dtype = g.type(quantize.outputs[0]).dtype;
          renames.emplace_back(quantize.outputs[0], g.nodes[p.reshape >= 0 ? p.reshape : p.node].outputs[0]);
          erase[p.quantize] = 1;
          break;
        }
        case Reader::kRequantize:
          n.inputs[0] = q;
          renames.emplace_back(quantize.outputs[0], g.nodes[p.reshape].outputs[0]);
          erase[p.quantize] = 1;
          break;
      }
    }
    erase[i] = 1;
    changed = true;
  }
  if (!changed) return g;
  // The reshapes' outputs (and the means') hold the integers now; their QuantizeLinears' readers
  // read them. A QuantizeLinear's output that is a graph output keeps its name.
  for (auto [from, to] : renames)
    TESSEL_ICHECK(replace_all_uses(g, from, to)) << "integer-readers: cannot replace " << g.value(from).name;
  erase_nodes(g, erase);
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

}  // namespace

ir::Graph integer_readers(ir::Graph g) { return moves_into_contractions(all_readers(std::move(g))); }

}  // namespace tessel::passes
