#include "ops/op_test_util.h"

#include <cmath>

#include "runtime/cpu/executor.h"

namespace tessel::testing {

std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           ir::Attributes attrs, int num_outputs, int64_t opset) {
  ir::Graph g;
  g.opset = opset;
  std::vector<ir::ValueId> ins;
  std::vector<Tensor> given;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(ir::kNoValue);
      continue;
    }
    ir::ValueId v = g.add_value("in" + std::to_string(i),
                                ir::TensorType{inputs[i].dtype(), inputs[i].shape()});
    g.inputs.push_back(v);
    ins.push_back(v);
    given.push_back(inputs[i]);
  }
  std::vector<ir::ValueId> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i), {}));
  g.add_node(op, "node", ins, outs, std::move(attrs));
  g.outputs = outs;
  return runtime::cpu::run_graph(g, given);
}

Tensor run1(const std::string& op, const std::vector<Tensor>& inputs, ir::Attributes attrs,
            int64_t opset) {
  return run_op(op, inputs, std::move(attrs), 1, opset)[0];
}

void expect_user_error(const std::function<void()>& fn, const std::string& label,
                       const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected a UserError mentioning '" << fragment << "'";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(label), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get_f64(i), y = b.get_f64(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return false;
      continue;
    }
    if (std::fabs(x - y) > atol + rtol * std::fabs(y)) return false;
  }
  return true;
}

}  // namespace tessel::testing
