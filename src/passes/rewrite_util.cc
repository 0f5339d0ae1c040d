#include "passes/rewrite_util.h"

#include <algorithm>

#include "ir/infer.h"
#include "ir/op_registry.h"

namespace tessel::passes {

std::optional<QdqParams> qdq_params(const ir::Graph& g, const ir::Node& n, std::string* why) {
  auto no = [&](const char* reason) -> std::optional<QdqParams> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const bool quantize = n.op == "QuantizeLinear";
  if ((!quantize && n.op != "DequantizeLinear") || n.inputs.size() < 2 || n.outputs.size() != 1)
    return no(" is no QuantizeLinear or DequantizeLinear");
  if (n.get_int("block_size", 0) != 0) return no(" is block-quantized");
  QdqParams q;
  q.scale = g.value(n.inputs[1]).data.get();
  if (!q.scale || !is_float(q.scale->dtype()) || q.scale->numel() < 1)
    return no("'s scale is not a constant float");
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    q.zero_point = g.value(n.inputs[2]).data.get();
    if (!q.zero_point) return no("'s zero point is not a constant");
  }
  const ir::ValueId integer = quantize ? n.outputs[0] : n.inputs[0];
  q.integer = g.type(integer).dtype;
  const int64_t rank = static_cast<int64_t>(g.type(n.inputs[0]).shape.size());
  q.axis = n.get_int("axis", 1);
  if (q.axis < 0) q.axis += rank;
  return q;
}

std::optional<SymmetricQdq> symmetric_qdq(const ir::Graph& g, const ir::Node& n, std::string* why) {
  std::optional<QdqParams> q = qdq_params(g, n, why);
  if (!q) return std::nullopt;
  for (int64_t i = 0; q->zero_point && i < q->zero_point->numel(); ++i) {
    if (q->zero_point->get_i64(i) != 0) {
      if (why) *why = " has a non-zero zero point (asymmetric)";
      return std::nullopt;
    }
  }
  return q;
}

bool replace_all_uses(ir::Graph& g, ir::ValueId from, ir::ValueId to) {
  bool from_is_output = std::count(g.outputs.begin(), g.outputs.end(), from) > 0;
  if (from_is_output) {
    bool to_is_fixed = g.value(to).is_constant() ||
                       std::count(g.inputs.begin(), g.inputs.end(), to) > 0 ||
                       std::count(g.outputs.begin(), g.outputs.end(), to) > 0;
    if (to_is_fixed) return false;
    std::string name = g.value(from).name;
    g.value(from).name = g.unique_value_name(name + ".replaced");
    g.value(to).name = name;
  }
  for (ir::Node& n : g.nodes)
    for (ir::ValueId& v : n.inputs)
      if (v == from) v = to;
  for (ir::ValueId& v : g.outputs)
    if (v == from) v = to;
  return true;
}

void erase_nodes(ir::Graph& g, const std::vector<char>& erase) {
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!erase[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  g.compact();
}

std::vector<int> use_counts(const ir::Graph& g) {
  std::vector<int> uses(g.values.size(), 0);
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) ++uses[static_cast<size_t>(v)];
  for (ir::ValueId v : g.outputs) ++uses[static_cast<size_t>(v)];
  return uses;
}

bool upsamples_into_output(const ir::Graph& g, const ir::Node& n, const std::vector<int>& uses) {
  if (n.op != "Resize" || n.inputs.empty() || n.outputs.size() != 1) return false;
  const ir::ValueId y = n.outputs[0];
  const auto as_output = std::count(g.outputs.begin(), g.outputs.end(), y);
  return as_output > 0 && uses.at(static_cast<size_t>(y)) == as_output &&
         numel(g.type(y).shape) > numel(g.type(n.inputs[0]).shape);
}

int sole_reader(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v) {
  const std::vector<int>& r = users[static_cast<size_t>(v)];
  if (r.size() != 1 || std::count(g.outputs.begin(), g.outputs.end(), v) > 0) return -1;
  const ir::Node& n = g.nodes[static_cast<size_t>(r[0])];
  return std::count(n.inputs.begin(), n.inputs.end(), v) == 1 ? r[0] : -1;
}

int sole_tensor_quantize(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v) {
  const int qi = sole_reader(g, users, v);
  if (qi < 0 || g.nodes[static_cast<size_t>(qi)].op != "QuantizeLinear" ||
      g.nodes[static_cast<size_t>(qi)].inputs[0] != v)
    return -1;
  const std::optional<QdqParams> p = qdq_params(g, g.nodes[static_cast<size_t>(qi)]);
  return p && p->per_tensor() && p->tensor_zero_point() ? qi : -1;
}

const Tensor* channel_constant(const ir::Graph& g, ir::ValueId c, int64_t channels) {
  const Tensor* t = c == ir::kNoValue ? nullptr : g.value(c).data.get();
  if (!t || t->numel() != channels || t->shape().empty() || t->shape().back() != channels) return nullptr;
  return t;
}

UniqueNames UniqueNames::of_values(const ir::Graph& g) {
  UniqueNames n;
  for (const ir::Value& v : g.values) n.used_.insert(v.name);
  return n;
}

UniqueNames UniqueNames::of_nodes(const ir::Graph& g) {
  UniqueNames n;
  for (const ir::Node& node : g.nodes) n.used_.insert(node.name);
  return n;
}

std::string UniqueNames::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; !used_.insert(name).second; ++i) name = base + "_" + std::to_string(i);
  return name;
}

NodeRewriter::NodeRewriter(ir::Graph g)
    : g_(std::move(g)), values_(UniqueNames::of_values(g_)), names_(UniqueNames::of_nodes(g_)) {}

ir::Graph NodeRewriter::run() && {
  bool changed = false;
  for (const ir::Node& n : std::vector<ir::Node>(g_.nodes)) {
    if (rewrites(n)) {
      rewrite(n);
      changed = true;
    } else {
      out_.push_back(n);
    }
  }
  if (!changed) return std::move(g_);
  g_.nodes = std::move(out_);
  ir::infer_types(g_, ir::OpRegistry::global());
  return std::move(g_);
}

ir::ValueId NodeRewriter::value(const std::string& base, DType dtype, Shape shape) {
  return g_.add_value(values_.fresh(base), {dtype, std::move(shape)});
}

ir::ValueId NodeRewriter::i64s(const std::string& base, const std::vector<int64_t>& v) {
  return constant(base, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
}

ir::ValueId NodeRewriter::constant(const std::string& base, Tensor t) {
  return g_.add_constant(values_.fresh(base), std::move(t));
}

void NodeRewriter::emit(const std::string& op, const std::string& name,
                        std::vector<ir::ValueId> ins, ir::ValueId out, ir::Attributes attrs) {
  out_.push_back(ir::Node{op, names_.fresh(name), std::move(ins), {out}, std::move(attrs)});
}

ir::ValueId NodeRewriter::emit(const std::string& op, const std::string& name,
                               std::vector<ir::ValueId> ins, DType dtype, Shape shape,
                               ir::Attributes attrs) {
  const ir::ValueId y = value(name, dtype, std::move(shape));
  emit(op, name, std::move(ins), y, std::move(attrs));
  return y;
}

void NodeRewriter::emit_as(const ir::Node& n, const std::string& op, std::vector<ir::ValueId> ins,
                           ir::ValueId out, ir::Attributes attrs) {
  out_.push_back(ir::Node{op, n.name, std::move(ins), {out}, std::move(attrs)});
}

}  // namespace tessel::passes
