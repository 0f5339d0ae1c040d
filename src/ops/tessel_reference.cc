#include "ops/tessel_reference.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "ops/tensor_copy.h"

namespace tessel::ops {
namespace {

// Runs fn(); a UserError from it is re-raised with `node`'s label in place of the stand-in's,
// so that the user reads about the op in their graph, and says that shapes in it are NCHW.
template <typename Fn>
auto relabel_errors(const ir::Node& node, const ir::Node& onnx, Fn&& fn) {
  try {
    return fn();
  } catch (const UserError& e) {
    std::string_view msg = e.what();
    const std::string prefix = onnx.label() + ": ";
    if (msg.substr(0, prefix.size()) == prefix) msg.remove_prefix(prefix.size());
    TESSEL_USER_ERROR() << node.label() << ": " << msg << " (checked as ONNX " << onnx.op
                        << " on the NCHW view)";
  }
}

}  // namespace

Shape permute_shape(const Shape& in, const std::vector<int64_t>& perm) {
  TESSEL_ICHECK(in.size() == perm.size())
      << "permute " << shape_str(in) << " by " << shape_str(perm);
  Shape out;
  for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
  return out;
}

Tensor permute(const Tensor& in, const std::vector<int64_t>& perm) {
  Tensor out(in.dtype(), permute_shape(in.shape(), perm));
  transpose_bytes(in, in.shape(), perm, out);
  return out;
}

void check_attributes(const ir::Node& node, const std::vector<std::string>& allowed) {
  for (const auto& [key, value] : node.attrs) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string known;
    for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
    TESSEL_USER_ERROR() << node.label() << ": unknown attribute '" << key << "' (expected "
                        << (known.empty() ? "none" : known) << ")";
  }
}

ir::Node stand_in(const ir::Node& node, const std::string& op, ir::Attributes attrs,
                  int num_inputs) {
  ir::Node n;
  n.op = op;
  n.name = node.name;
  n.attrs = std::move(attrs);
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  n.outputs = {0};
  return n;
}

std::vector<ir::TensorType> infer_stand_in(const ir::Node& node, const ir::Node& onnx,
                                           const std::vector<const ir::TensorType*>& types,
                                           int64_t opset) {
  const ir::OpSchema* schema = ir::OpRegistry::global().find(onnx.op);
  TESSEL_ICHECK(schema) << node.label() << ": stand-in op " << onnx.op << " is not registered";
  return relabel_errors(node, onnx, [&] {
    return ir::infer_node(*schema, onnx, types, std::vector<const Tensor*>(types.size()), opset);
  });
}

std::vector<Tensor> run_stand_in(const ir::Node& node, const ir::Node& onnx,
                                 const std::vector<const Tensor*>& inputs, int64_t opset) {
  const ir::OpSchema* schema = ir::OpRegistry::global().find(onnx.op);
  TESSEL_ICHECK(schema) << node.label() << ": stand-in op " << onnx.op << " is not registered";
  return relabel_errors(node, onnx, [&] {
    std::vector<ir::TensorType> types;
    for (const Tensor* t : inputs) types.push_back({t->dtype(), t->shape()});
    std::vector<const ir::TensorType*> type_ptrs;
    for (const ir::TensorType& t : types) type_ptrs.push_back(&t);
    std::vector<ir::TensorType> out_types = ir::infer_node(*schema, onnx, type_ptrs, inputs, opset);
    std::vector<Tensor> outs;
    for (const ir::TensorType& t : out_types) outs.emplace_back(t.dtype, t.shape);
    ir::KernelContext ctx(onnx, inputs, outs, opset);
    schema->compute(ctx);
    return outs;
  });
}

}  // namespace tessel::ops
