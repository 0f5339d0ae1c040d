// Helpers of the opset conversion tests: attributes and initializers of ModelBuilder models,
// and the check that an old form imports as the same graph, with the same outputs, as the model
// written in the form it converts to.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/onnx/model_builder.h"
#include "ir/equal.h"
#include "ir/printer.h"
#include "runtime/cpu/executor.h"

namespace tessel::onnx::testing {

using ::onnx::AttributeProto;
using ::onnx::NodeProto;

inline void set_int(NodeProto* n, const char* name, int64_t v) {
  add_attr(n, name, AttributeProto::INT)->set_i(v);
}
inline void set_float(NodeProto* n, const char* name, float v) {
  add_attr(n, name, AttributeProto::FLOAT)->set_f(v);
}
inline void set_string(NodeProto* n, const char* name, const std::string& v) {
  add_attr(n, name, AttributeProto::STRING)->set_s(v);
}
inline void set_ints(NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  auto* a = add_attr(n, name, AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void set_floats(NodeProto* n, const char* name, const std::vector<float>& v) {
  auto* a = add_attr(n, name, AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void initializer_i64(ModelBuilder& m, const std::string& name,
                            const std::vector<int64_t>& v) {
  TensorProto* t = m.initializer(name, TensorProto::INT64, {static_cast<int64_t>(v.size())});
  for (int64_t x : v) t->add_int64_data(x);
}
// A scalar initializer of the given type holding `v`.
inline void initializer_scalar(ModelBuilder& m, const std::string& name, int elem_type, double v) {
  TensorProto* t = m.initializer(name, elem_type, {});
  if (elem_type == TensorProto::DOUBLE)
    t->add_double_data(v);
  else if (elem_type == TensorProto::FLOAT)
    t->add_float_data(static_cast<float>(v));
  else
    t->add_int32_data(static_cast<int32_t>(v));  // 8-bit types live in int32_data
}
// Resize-11's roi input, unused outside tf_crop_and_resize: empty.
inline void empty_roi(ModelBuilder& m) { m.initializer("roi", TensorProto::FLOAT, {0}); }

inline Tensor iota_f32(Shape shape, float start = 1) {
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, start + static_cast<float>(i));
  return t;
}

// Imports with tessel's own ops.
inline ir::Graph import(const ModelBuilder& m) {
  return import_model_bytes(m.bytes(), "m.onnx", "");
}

inline std::string import_error(const ModelBuilder& m) {
  return user_error_of([&] { import(m); });
}

// `old_form` imports as the same graph as `new_form`, the model written in the form it converts
// to, and both compute the same outputs from `inputs`. Returns those outputs.
inline std::vector<Tensor> expect_converts_to(const ModelBuilder& old_form,
                                              const ModelBuilder& new_form,
                                              const std::vector<Tensor>& inputs) {
  const ir::Graph a = import(old_form);
  const ir::Graph b = import(new_form);
  EXPECT_EQ(ir::structural_diff(a, b), "") << "converted:\n"
                                           << ir::print_graph(a) << "expected:\n"
                                           << ir::print_graph(b);
  std::vector<Tensor> ya = runtime::cpu::run_graph(a, inputs);
  std::vector<Tensor> yb = runtime::cpu::run_graph(b, inputs);
  EXPECT_EQ(ya.size(), yb.size());
  for (size_t i = 0; i < ya.size() && i < yb.size(); ++i)
    EXPECT_TRUE(bitwise_equal(ya[i], yb[i])) << "output " << i;
  return ya;
}

inline const ir::Node& only_node(const ir::Graph& g, const std::string& op) {
  const ir::Node* found = nullptr;
  for (const ir::Node& n : g.nodes) {
    if (n.op != op) continue;
    EXPECT_EQ(found, nullptr) << "more than one " << op;
    found = &n;
  }
  EXPECT_NE(found, nullptr) << "no " << op;
  return found ? *found : g.nodes.at(0);
}

}  // namespace tessel::onnx::testing
