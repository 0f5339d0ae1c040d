// tessel's public C++ API: load an ONNX model, run it, inspect the compiled graph.
//
//   tessel::Session s = tessel::Session::load("resnet50.onnx", {.batch = 8});
//   std::vector<tessel::Tensor> out = s.run({input});
//
// Errors in the user's input (bad model, unsupported op, wrong input shape) are thrown as
// tessel::UserError with a message naming what and where.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace tessel {

struct SessionOptions {
  int64_t batch = 0;                          // fixes a symbolic batch dimension
  std::map<std::string, Shape> input_shapes;  // static shapes for symbolic inputs
  std::string device = "cpu";                 // "cpu": the reference executor
};

class Session {
 public:
  static Session load(const std::string& onnx_path, const SessionOptions& options = {});

  const ir::Graph& graph() const { return *graph_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  // One tensor per graph input, in order; returns the outputs in order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

 private:
  std::shared_ptr<const ir::Graph> graph_;
  SessionOptions options_;
};

}  // namespace tessel
