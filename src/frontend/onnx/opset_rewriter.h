// What the rewrites of opset_conversion.cc work with: a Rewriter over the graph being converted
// (fresh names, new constants and values, nodes queued around the one rewritten, the types of a
// node's inputs), and the rewrites of forms older than opset 7, which live in
// opset_conversion_pre7.cc. Internal to the importer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::onnx::detail {

// The graph being converted holds, in g.nodes, the nodes already converted (a prefix of the
// model in topological order); the node a rule rewrites and those after it are not in it yet.
class Rewriter {
 public:
  // `registry` infers the types input_type() needs; nullptr where no rule asks (the typed step).
  Rewriter(ir::Graph& g, int64_t model_opset, const ir::OpRegistry* registry);

  ir::Graph& graph() { return g_; }
  int64_t model_opset() const { return model_opset_; }
  // A value's type once the whole graph is inferred (the typed step).
  const ir::TensorType& type(ir::ValueId v) const { return g_.type(v); }

  // The type of input i of `n`, in the untyped step: a graph input's or a constant's, else
  // inferred over the nodes converted so far (every input of `n` is written by one of them).
  const ir::TensorType& input_type(const ir::Node& n, size_t i);

  // "Pad 'p' (opset 9)": how conversion errors name a node.
  std::string where(const ir::Node& n) const;

  // A new constant, named after the node: "p.pads".
  ir::ValueId constant(const ir::Node& n, const std::string& what, Tensor t);
  // A new value, typed later by inference.
  ir::ValueId value(const ir::Node& n, const std::string& what);
  // A new node named after `n`, to run before or after it.
  void before(const ir::Node& n, ir::Node added) { before_.push_back(named(n, std::move(added))); }
  void after(const ir::Node& n, ir::Node added) { after_.push_back(named(n, std::move(added))); }

  // Appends the queued nodes and `n` between them to `out`.
  void flush(ir::Node n, std::vector<ir::Node>& out);

 private:
  static std::string fresh(std::unordered_set<std::string>& used, const std::string& base);
  // `added.name` says its role ("flatten"); the node is called "<n.name>.<role>".
  ir::Node named(const ir::Node& n, ir::Node added);

  ir::Graph& g_;
  int64_t model_opset_;
  const ir::OpRegistry* registry_;
  std::unordered_set<std::string> value_names_;
  std::unordered_set<std::string> node_names_;
  std::vector<ir::Node> before_;
  std::vector<ir::Node> after_;
  std::vector<char> typed_;    // per value id: its type is known in the untyped step
  size_t inferred_nodes_ = 0;  // g.nodes[0, inferred_nodes_) have their outputs typed
};

ir::Node make_node(std::string op, std::string role, std::vector<ir::ValueId> inputs,
                   std::vector<ir::ValueId> outputs, ir::Attributes attrs = {});
Tensor i64_vector(const std::vector<int64_t>& v);
bool has_input(const ir::Node& n, size_t i);

// ---- Forms of opsets 1 to 6 (opset_conversion_pre7.cc) --------------------------------------
// Each returns whether it changed `n` and throws a UserError for a form it cannot convert.

bool test_mode_only(Rewriter& r, ir::Node& n);             // BatchNormalization, Dropout: is_test
bool broadcast_from_axis(Rewriter& r, ir::Node& n);        // binary ops: broadcast, axis
bool prelu_slope_per_channel(Rewriter& r, ir::Node& n);    // PRelu: a slope of C values
bool concat_default_axis(Rewriter& r, ir::Node& n);        // Concat-1: axis defaults to 1
bool reshape_shape_to_input(Rewriter& r, ir::Node& n);     // Reshape-1: shape attribute
bool upsample_scale_attributes(Rewriter& r, ir::Node& n);  // Upsample-1: height/width_scale
bool pad_paddings_to_pads(Rewriter& r, ir::Node& n);       // Pad-1: paddings
bool split_1_to_split_2(Rewriter& r, ir::Node& n);         // Split-1: split input, axis
bool cast_type_name_to_code(Rewriter& r, ir::Node& n);     // Cast-1: `to` is a type name
bool tile_1_to_repeats(Rewriter& r, ir::Node& n);          // Tile-1: tiles and axis inputs
bool selu_1_defaults(Rewriter& r, ir::Node& n);            // Selu-1: other default alpha, gamma

}  // namespace tessel::onnx::detail
