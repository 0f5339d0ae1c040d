#include "frontend/onnx/importer.h"
#include "runtime/cpu/executor.h"
#include "tessel/tessel.h"

namespace tessel {

Session Session::load(const std::string& onnx_path, const SessionOptions& options) {
  TESSEL_USER_CHECK(options.device == "cpu")
      << "device '" << options.device << "': whole-model GPU execution is not available yet";
  onnx::ImportOptions import;
  import.batch = options.batch;
  import.input_shapes = options.input_shapes;
  Session s;
  s.graph_ = std::make_shared<const ir::Graph>(onnx::import_model(onnx_path, import));
  s.options_ = options;
  return s;
}

std::vector<std::string> Session::input_names() const {
  std::vector<std::string> r;
  for (ir::ValueId v : graph_->inputs) r.push_back(graph_->value(v).name);
  return r;
}

std::vector<std::string> Session::output_names() const {
  std::vector<std::string> r;
  for (ir::ValueId v : graph_->outputs) r.push_back(graph_->value(v).name);
  return r;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) const {
  return runtime::cpu::run_graph(*graph_, inputs);
}

}  // namespace tessel
