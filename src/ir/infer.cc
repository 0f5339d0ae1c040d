#include "ir/infer.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace tessel::ir {
namespace {

// Known values are folded only when small: shape arithmetic, not weights.
constexpr int64_t kMaxFoldElements = 1 << 12;

const OpSchema& schema_of(const Node& n, const OpRegistry& registry) {
  const OpSchema* s = registry.find(n.op);
  if (!s) {
    std::string supported;
    for (const std::string& name : registry.names()) supported += (supported.empty() ? "" : ", ") + name;
    TESSEL_USER_ERROR() << "node '" << n.name << "': unsupported op '" << n.op
                        << "' (supported: " << supported << ")";
  }
  return *s;
}

}  // namespace

Tensor shape_value(const Node& n, const Shape& input_shape) {
  const int64_t rank = static_cast<int64_t>(input_shape.size());
  int64_t start = n.get_int("start", 0), end = n.get_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Tensor t(DType::kI64, {end - start});
  for (int64_t i = start; i < end; ++i) t.data<int64_t>()[i - start] = input_shape[i];
  return t;
}

void infer_types(Graph& g, const OpRegistry& registry) {
  std::unordered_map<ValueId, Tensor> known;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].data) known.emplace(static_cast<ValueId>(i), *g.values[i].data);

  for (const Node& n : g.nodes) {
    const OpSchema& schema = schema_of(n, registry);
    std::vector<const TensorType*> in_types;
    std::vector<const Tensor*> in_values;
    bool all_known = true;
    int64_t in_elems = 0;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        in_types.push_back(nullptr);
        in_values.push_back(nullptr);
        continue;
      }
      in_types.push_back(&g.value(v).type);
      auto it = known.find(v);
      in_values.push_back(it == known.end() ? nullptr : &it->second);
      if (it == known.end()) all_known = false;
      else in_elems += it->second.numel();
    }
    std::vector<TensorType> outs = infer_node(schema, n, in_types, in_values, g.opset);
    int64_t out_elems = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      g.value(n.outputs[i]).type = outs[i];
      out_elems += numel(outs[i].shape);
    }
    // Shape reads only its input's type, so its value is always known.
    bool fold = schema.foldable && out_elems <= kMaxFoldElements &&
                ((all_known && in_elems <= kMaxFoldElements) || n.op == "Shape");
    if (!fold) continue;
    if (n.op == "Shape" && !all_known) {
      known[n.outputs[0]] = shape_value(n, in_types[0]->shape);
      continue;
    }
    std::vector<Tensor> out_tensors;
    for (const TensorType& t : outs) out_tensors.emplace_back(t.dtype, t.shape);
    KernelContext kctx(n, in_values, out_tensors, g.opset);
    schema.compute(kctx);
    for (size_t i = 0; i < n.outputs.size(); ++i) known[n.outputs[i]] = out_tensors[i];
  }
}

void verify(const Graph& g, const OpRegistry& registry) {
  const ValueId n_values = static_cast<ValueId>(g.values.size());
  std::vector<char> defined(g.values.size(), 0);
  auto check_id = [&](ValueId v, const std::string& where) {
    TESSEL_USER_CHECK(v >= 0 && v < n_values) << where << ": refers to value id " << v
                                              << ", but the graph has " << n_values;
  };
  for (ValueId v : g.inputs) {
    check_id(v, "graph input");
    TESSEL_USER_CHECK(!defined[v]) << "graph input '" << g.value(v).name << "' listed twice";
    defined[v] = 1;
  }
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].data) defined[i] = 1;

  std::unordered_set<std::string> node_names;
  std::unordered_set<std::string> value_names;
  for (const Value& v : g.values) {
    TESSEL_USER_CHECK(value_names.insert(v.name).second)
        << "value name '" << v.name << "' is used by more than one value";
  }
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    schema_of(n, registry);
    TESSEL_USER_CHECK(node_names.insert(n.name).second)
        << "node name '" << n.name << "' is used by more than one node";
    for (ValueId v : n.outputs) {
      check_id(v, n.label());
      TESSEL_USER_CHECK(producer[v] < 0 && !g.value(v).data &&
                        std::find(g.inputs.begin(), g.inputs.end(), v) == g.inputs.end())
          << n.label() << ": output '" << g.value(v).name
          << "' is already defined (by another node, a graph input or a constant)";
      producer[v] = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      check_id(v, n.label());
      if (defined[v]) continue;
      if (producer[v] < 0) {
        TESSEL_USER_ERROR() << n.label() << ": input '" << g.value(v).name
                            << "' is dangling: no node, graph input or initializer defines it";
      }
      TESSEL_USER_ERROR() << n.label() << ": input '" << g.value(v).name
                          << "' is produced by a later node ("
                          << g.nodes[static_cast<size_t>(producer[v])].label()
                          << "): the graph has a cycle or is not topologically sorted";
    }
    for (ValueId v : n.outputs) defined[v] = 1;
  }
  for (ValueId v : g.outputs) {
    check_id(v, "graph output");
    TESSEL_USER_CHECK(defined[v]) << "graph output '" << g.value(v).name
                                  << "' is not produced by any node";
  }
}

}  // namespace tessel::ir
