#include "ir/graph.h"

#include <unordered_set>

#include "core/error.h"

namespace tessel::ir {

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

std::string Node::label() const { return op + " '" + name + "'"; }

namespace {

template <typename T>
const T* typed_attr(const Node& n, const std::string& key) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  TESSEL_USER_CHECK(v) << n.label() << ": attribute '" << key << "' is "
                       << attribute_kind(it->second) << ", expected a different kind";
  return v;
}

}  // namespace

int64_t Node::get_int(const std::string& key, int64_t def) const {
  const int64_t* v = typed_attr<int64_t>(*this, key);
  return v ? *v : def;
}

double Node::get_float(const std::string& key, double def) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  const double* v = typed_attr<double>(*this, key);
  return *v;
}

std::string Node::get_string(const std::string& key, const std::string& def) const {
  const std::string* v = typed_attr<std::string>(*this, key);
  return v ? *v : def;
}

std::vector<int64_t> Node::get_ints(const std::string& key, std::vector<int64_t> def) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  // An empty list parses as ints; accept an empty float list too.
  if (const auto* f = std::get_if<std::vector<double>>(&it->second); f && f->empty()) return {};
  return *typed_attr<std::vector<int64_t>>(*this, key);
}

std::vector<double> Node::get_floats(const std::string& key, std::vector<double> def) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* i = std::get_if<std::vector<int64_t>>(&it->second)) {
    return std::vector<double>(i->begin(), i->end());
  }
  return *typed_attr<std::vector<double>>(*this, key);
}

const Tensor* Node::get_tensor(const std::string& key) const {
  return typed_attr<Tensor>(*this, key);
}

int64_t Node::require_int(const std::string& key) const {
  TESSEL_USER_CHECK(has_attr(key)) << label() << ": missing required attribute '" << key << "'";
  return get_int(key, 0);
}

std::vector<int64_t> Node::require_ints(const std::string& key) const {
  TESSEL_USER_CHECK(has_attr(key)) << label() << ": missing required attribute '" << key << "'";
  return get_ints(key);
}

ValueId Graph::add_value(std::string name, TensorType type) {
  values.push_back(Value{std::move(name), std::move(type), nullptr});
  return static_cast<ValueId>(values.size() - 1);
}

ValueId Graph::add_constant(std::string name, Tensor data) {
  TensorType t{data.dtype(), data.shape()};
  values.push_back(Value{std::move(name), t, std::make_shared<const Tensor>(std::move(data))});
  return static_cast<ValueId>(values.size() - 1);
}

Node& Graph::add_node(std::string op, std::string name, std::vector<ValueId> ins,
                      std::vector<ValueId> outs, Attributes attrs) {
  for (ValueId v : ins) TESSEL_ICHECK(v == kNoValue || (v >= 0 && v < (ValueId)values.size()));
  for (ValueId v : outs) TESSEL_ICHECK(v >= 0 && v < (ValueId)values.size());
  nodes.push_back(Node{std::move(op), std::move(name), std::move(ins), std::move(outs),
                       std::move(attrs)});
  return nodes.back();
}

Value& Graph::value(ValueId id) {
  TESSEL_ICHECK(id >= 0 && id < static_cast<ValueId>(values.size())) << "value id " << id;
  return values[static_cast<size_t>(id)];
}

const Value& Graph::value(ValueId id) const {
  TESSEL_ICHECK(id >= 0 && id < static_cast<ValueId>(values.size())) << "value id " << id;
  return values[static_cast<size_t>(id)];
}

ValueId Graph::find_value(const std::string& n) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == n) return static_cast<ValueId>(i);
  return kNoValue;
}

std::vector<int> Graph::producers() const {
  std::vector<int> p(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].outputs) p[static_cast<size_t>(v)] = static_cast<int>(i);
  return p;
}

std::vector<std::vector<int>> Graph::users() const {
  std::vector<std::vector<int>> u(values.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) u[static_cast<size_t>(v)].push_back(static_cast<int>(i));
  return u;
}

std::string Graph::unique_value_name(const std::string& base) const {
  std::unordered_set<std::string> used;
  for (const Value& v : values) used.insert(v.name);
  if (!used.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string c = base + "_" + std::to_string(i);
    if (!used.count(c)) return c;
  }
}

std::string Graph::unique_node_name(const std::string& base) const {
  std::unordered_set<std::string> used;
  for (const Node& n : nodes) used.insert(n.name);
  if (!used.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string c = base + "_" + std::to_string(i);
    if (!used.count(c)) return c;
  }
}

void Graph::compact() {
  std::vector<char> live(values.size(), 0);
  for (ValueId v : inputs) live[v] = 1;
  for (ValueId v : outputs) live[v] = 1;
  for (const Node& n : nodes) {
    for (ValueId v : n.inputs)
      if (v != kNoValue) live[v] = 1;
    for (ValueId v : n.outputs) live[v] = 1;
  }
  std::vector<ValueId> remap(values.size(), kNoValue);
  std::vector<Value> kept;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<ValueId>(kept.size());
    kept.push_back(std::move(values[i]));
  }
  values = std::move(kept);
  auto fix = [&](std::vector<ValueId>& ids) {
    for (ValueId& v : ids)
      if (v != kNoValue) v = remap[static_cast<size_t>(v)];
  };
  fix(inputs);
  fix(outputs);
  for (Node& n : nodes) {
    fix(n.inputs);
    fix(n.outputs);
  }
}

}  // namespace tessel::ir
