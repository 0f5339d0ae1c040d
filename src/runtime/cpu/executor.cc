#include "runtime/cpu/executor.h"

#include "core/error.h"

namespace tessel::runtime::cpu {

std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<Tensor>& inputs,
                              const RunOptions& options, const ir::OpRegistry& registry) {
  TESSEL_USER_CHECK(inputs.size() == g.inputs.size())
      << "graph '" << g.name << "' takes " << g.inputs.size() << " inputs, " << inputs.size()
      << " given";
  std::vector<Tensor> env(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].data) env[i] = *g.values[i].data;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = g.value(g.inputs[i]);
    TESSEL_USER_CHECK(inputs[i].dtype() == v.type.dtype && inputs[i].shape() == v.type.shape)
        << "input '" << v.name << "': expected " << v.type.str() << ", got "
        << inputs[i].type_str();
    env[static_cast<size_t>(g.inputs[i])] = inputs[i];
  }

  // Last reader of each value, so intermediates can be dropped early.
  std::vector<int> last_use(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId v : g.nodes[i].inputs)
      if (v != ir::kNoValue) last_use[v] = static_cast<int>(i);
  std::vector<char> keep(g.values.size(), 0);
  for (ir::ValueId v : g.outputs) keep[v] = 1;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].data) keep[i] = 1;

  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const ir::Node& n = g.nodes[ni];
    const ir::OpSchema* schema = registry.find(n.op);
    TESSEL_USER_CHECK(schema) << "node '" << n.name << "': unsupported op '" << n.op << "'";
    std::vector<const ir::TensorType*> in_types;
    std::vector<ir::TensorType> actual(n.inputs.size());
    std::vector<const Tensor*> in_values;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ir::ValueId v = n.inputs[i];
      if (v == ir::kNoValue) {
        in_types.push_back(nullptr);
        in_values.push_back(nullptr);
        continue;
      }
      const Tensor& t = env[static_cast<size_t>(v)];
      TESSEL_ICHECK(t.defined()) << n.label() << ": input '" << g.value(v).name
                                 << "' has no value at run time";
      actual[i] = ir::TensorType{t.dtype(), t.shape()};
      in_types.push_back(&actual[i]);
      in_values.push_back(&t);
    }
    std::vector<ir::TensorType> out_types =
        ir::infer_node(*schema, n, in_types, in_values, g.opset);
    std::vector<Tensor> outs;
    outs.reserve(out_types.size());
    for (const ir::TensorType& t : out_types) outs.emplace_back(t.dtype, t.shape);
    ir::KernelContext ctx(n, in_values, outs, g.opset);
    schema->compute(ctx);
    if (options.on_node) options.on_node(ni, outs);
    for (size_t i = 0; i < n.outputs.size(); ++i) env[static_cast<size_t>(n.outputs[i])] = outs[i];
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue && last_use[v] == static_cast<int>(ni) && !keep[v])
        env[static_cast<size_t>(v)] = Tensor();
  }
  std::vector<Tensor> result;
  for (ir::ValueId v : g.outputs) result.push_back(env[static_cast<size_t>(v)]);
  return result;
}

}  // namespace tessel::runtime::cpu
