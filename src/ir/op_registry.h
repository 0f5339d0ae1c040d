// The op registry: one OpSchema per op type, registered by name in one place
// (ops/all_ops.cc). A schema knows how to check a node and infer its output types, and how
// to compute it on the host (the reference kernel: obviously right, not fast).
//
// Inference and the reference kernel share one path: the CPU executor first calls infer()
// with the actual input tensors as known values, then compute(). Static shape inference on a
// Graph calls infer() with the values it knows (constants and small folded shape chains).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::ir {

class InferContext {
 public:
  InferContext(const Node& node, std::vector<const TensorType*> in_types,
               std::vector<const Tensor*> in_values, int64_t opset);

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(in_types_.size()); }
  // False for an omitted optional input ("" in ONNX) or past the end.
  bool has_input(int i) const;
  const TensorType& input(int i) const;  // UserError if the input is absent
  DType dtype(int i) const { return input(i).dtype; }
  const Shape& shape(int i) const { return input(i).shape; }
  int64_t rank(int i) const { return static_cast<int64_t>(input(i).shape.size()); }
  // The value of input i if it is known at this point (constant, folded, or at run time).
  const Tensor* value(int i) const;
  // The value of input i, or a UserError saying the op needs it to be constant.
  const Tensor& require_value(int i, const char* what) const;

  // Output types, one per node output; the schema's infer() must set every one.
  std::vector<TensorType>& outputs() { return out_types_; }
  void set_output(int i, DType dtype, Shape shape);

 private:
  const Node& node_;
  std::vector<const TensorType*> in_types_;
  std::vector<const Tensor*> in_values_;
  std::vector<TensorType> out_types_;
  int64_t opset_;
};

class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs,
                int64_t opset)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs), opset_(opset) {}
  const Node& node() const { return node_; }
  // The default-domain opset of the graph: some ops changed meaning across versions.
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const {
    return i < num_inputs() && inputs_[i] != nullptr;
  }
  const Tensor& input(int i) const;
  // Outputs are allocated (zeroed) by the executor from the inferred types.
  Tensor& output(int i);
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  int64_t opset_;
};

struct OpSchema {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  // Checks attributes and input types (UserError naming the node on a problem) and sets the
  // output types.
  std::function<void(InferContext&)> infer;
  // Computes outputs from inputs on the host.
  std::function<void(KernelContext&)> compute;
  // Cheap enough and deterministic enough to evaluate at compile time when all inputs are
  // constant (shape arithmetic). Everything except random ops is.
  bool foldable = true;
};

class OpRegistry {
 public:
  // The registry with every op of ops/ registered.
  static const OpRegistry& global();

  void add(OpSchema schema);
  const OpSchema* find(const std::string& op) const;
  std::vector<std::string> names() const;  // sorted

 private:
  std::map<std::string, OpSchema> schemas_;
};

// Runs a schema's arity checks and infer() on a node. Used by graph shape inference and by
// the CPU executor. Throws UserError for an unknown op, wrong arity or a failed check.
std::vector<TensorType> infer_node(const OpSchema& schema, const Node& node,
                                   const std::vector<const TensorType*>& in_types,
                                   const std::vector<const Tensor*>& in_values, int64_t opset);

}  // namespace tessel::ir
