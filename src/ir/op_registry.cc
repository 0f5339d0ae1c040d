#include "ir/op_registry.h"

#include "core/error.h"

namespace tessel::ir {

InferContext::InferContext(const Node& node, std::vector<const TensorType*> in_types,
                           std::vector<const Tensor*> in_values, int64_t opset)
    : node_(node),
      in_types_(std::move(in_types)),
      in_values_(std::move(in_values)),
      out_types_(node.outputs.size()),
      opset_(opset) {
  in_values_.resize(in_types_.size(), nullptr);
}

bool InferContext::has_input(int i) const {
  return i >= 0 && i < num_inputs() && in_types_[static_cast<size_t>(i)] != nullptr;
}

const TensorType& InferContext::input(int i) const {
  TESSEL_USER_CHECK(has_input(i)) << node_.label() << ": required input " << i << " is missing";
  return *in_types_[static_cast<size_t>(i)];
}

const Tensor* InferContext::value(int i) const {
  if (!has_input(i)) return nullptr;
  return in_values_[static_cast<size_t>(i)];
}

const Tensor& InferContext::require_value(int i, const char* what) const {
  const Tensor* t = value(i);
  TESSEL_USER_CHECK(t) << node_.label() << ": input " << i << " (" << what
                       << ") must be a constant; tessel compiles static shapes";
  return *t;
}

void InferContext::set_output(int i, DType dtype, Shape shape) {
  TESSEL_ICHECK(i >= 0 && i < static_cast<int>(out_types_.size()))
      << node_.label() << ": output " << i << " of " << out_types_.size();
  numel(shape, node_.label() + " output " + std::to_string(i));
  out_types_[static_cast<size_t>(i)] = TensorType{dtype, std::move(shape)};
}

const Tensor& KernelContext::input(int i) const {
  TESSEL_ICHECK(has_input(i)) << node_.label() << ": input " << i << " missing at run time";
  return *inputs_[static_cast<size_t>(i)];
}

Tensor& KernelContext::output(int i) {
  TESSEL_ICHECK(i >= 0 && i < num_outputs()) << node_.label() << ": output " << i;
  return outputs_[static_cast<size_t>(i)];
}

void OpRegistry::add(OpSchema schema) {
  TESSEL_ICHECK(!schemas_.count(schema.name)) << "op " << schema.name << " registered twice";
  TESSEL_ICHECK(schema.infer && schema.compute) << "op " << schema.name << " is incomplete";
  std::string name = schema.name;
  schemas_.emplace(std::move(name), std::move(schema));
}

void OpRegistry::set_facts(const std::string& op, OpFacts facts) {
  auto it = schemas_.find(op);
  TESSEL_ICHECK(it != schemas_.end()) << "facts for op " << op << ", which is not registered";
  it->second.facts = std::move(facts);
}

const OpFacts& OpRegistry::facts(const std::string& op) const {
  static const OpFacts kNone;
  const OpSchema* s = find(op);
  return s ? s->facts : kNone;
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kOther: return "other";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kContraction: return "contraction";
    case OpKind::kWindow: return "window";
    case OpKind::kNormalization: return "normalization";
    case OpKind::kReduction: return "reduction";
    case OpKind::kDataMovement: return "data movement";
    case OpKind::kView: return "view";
    case OpKind::kQuantization: return "quantization";
    case OpKind::kShape: return "shape";
  }
  return "other";
}

const char* gpu_kernel_name(GpuKernel k) {
  switch (k) {
    case GpuKernel::kNone: return "none";
    case GpuKernel::kContraction: return "contraction";
    case GpuKernel::kElementwise: return "elementwise";
    case GpuKernel::kCopy: return "copy";
    case GpuKernel::kWindow: return "window";
    case GpuKernel::kReduce: return "reduce";
    case GpuKernel::kResize: return "resize";
    case GpuKernel::kMatMul: return "matmul";
  }
  return "none";
}

const OpSchema* OpRegistry::find(const std::string& op) const {
  auto it = schemas_.find(op);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> r;
  for (const auto& [name, _] : schemas_) r.push_back(name);
  return r;
}

std::vector<TensorType> infer_node(const OpSchema& schema, const Node& node,
                                   const std::vector<const TensorType*>& in_types,
                                   const std::vector<const Tensor*>& in_values, int64_t opset) {
  int n_in = static_cast<int>(node.inputs.size());
  // Trailing omitted inputs do not count toward arity.
  while (n_in > 0 && node.inputs[static_cast<size_t>(n_in - 1)] == kNoValue) --n_in;
  TESSEL_USER_CHECK(n_in >= schema.min_inputs && n_in <= schema.max_inputs)
      << node.label() << ": has " << n_in << " inputs, expected " << schema.min_inputs
      << (schema.max_inputs != schema.min_inputs ? " to " + std::to_string(schema.max_inputs)
                                                  : std::string());
  int n_out = static_cast<int>(node.outputs.size());
  TESSEL_USER_CHECK(n_out >= schema.min_outputs && n_out <= schema.max_outputs)
      << node.label() << ": has " << n_out << " outputs, expected " << schema.min_outputs
      << (schema.max_outputs != schema.min_outputs ? " to " + std::to_string(schema.max_outputs)
                                                    : std::string());
  InferContext ctx(node, in_types, in_values, opset);
  schema.infer(ctx);
  return std::move(ctx.outputs());
}

}  // namespace tessel::ir
