// The graph IR. A Graph is a list of Values (typed tensors, some constant) and a list of
// Nodes in topological order; nodes refer to values by ValueId (an index into values).
// Semantics are ONNX's: one node per ONNX op, NCHW, attributes as in the ONNX spec, so that
// the CPU reference executor can run any graph the importer or a pass produces.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/attribute.h"

namespace tessel::ir {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
  std::string str() const;  // "f32[1,3,224,224]"
};

struct Value {
  std::string name;
  TensorType type;
  // Set for constants (ONNX initializers and Constant outputs after folding).
  std::shared_ptr<const Tensor> data;
  bool is_constant() const { return data != nullptr; }
};

struct Node {
  std::string op;    // ONNX op type, or a tessel op name ("tessel.FusedConv", ...)
  std::string name;  // unique within the graph; used in every error about this node
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attributes attrs;

  // "Conv 'layer1.0.conv1'": how errors name a node.
  std::string label() const;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  // Typed attribute access. A missing attribute returns the default; one of the wrong kind
  // is a UserError naming the node. get_float accepts an int attribute and converts it.
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  std::string get_string(const std::string& key, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> def = {}) const;
  std::vector<double> get_floats(const std::string& key, std::vector<double> def = {}) const;
  const Tensor* get_tensor(const std::string& key) const;  // nullptr when absent
  // Required attributes: a UserError naming the node if absent.
  int64_t require_int(const std::string& key) const;
  std::vector<int64_t> require_ints(const std::string& key) const;
};

class Graph {
 public:
  std::string name = "main";
  int64_t opset = 17;  // default-domain opset the graph was written against
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;

  ValueId add_value(std::string name, TensorType type);
  ValueId add_constant(std::string name, Tensor data);
  // Appends a node. Outputs must be values created by add_value.
  Node& add_node(std::string op, std::string name, std::vector<ValueId> inputs,
                 std::vector<ValueId> outputs, Attributes attrs = {});

  Value& value(ValueId id);
  const Value& value(ValueId id) const;
  const TensorType& type(ValueId id) const { return value(id).type; }
  // The id of the value with this name, or kNoValue.
  ValueId find_value(const std::string& name) const;

  // producers()[v] = index of the node that writes v, or -1 (graph input / constant).
  std::vector<int> producers() const;
  // users()[v] = indices of the nodes that read v.
  std::vector<std::vector<int>> users() const;

  // A name not yet used by any value, built from `base`.
  std::string unique_value_name(const std::string& base) const;
  std::string unique_node_name(const std::string& base) const;

  // Drops values nobody refers to and renumbers the rest (keeps relative order).
  void compact();
};

}  // namespace tessel::ir
