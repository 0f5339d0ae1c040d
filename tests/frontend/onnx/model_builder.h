// Helpers for the importer tests: build ONNX models with the protobuf API, write them to a
// scratch folder, and a small op registry so that the tests do not depend on the op library.
// Header-only because the test binary is built from the *_test.cc files alone.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "frontend/onnx/importer.h"
#include "ir/op_registry.h"

namespace tessel::onnx::testing {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

// A dim of a declared shape: a number, or the name of a symbolic dim.
struct Dim {
  Dim(int64_t v) : value(v) {}      // NOLINT: implicit by design, {1, "N", 3}
  Dim(const char* p) : param(p) {}  // NOLINT
  int64_t value = -1;
  std::string param;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17, int64_t ir_version = 8) {
    model.set_ir_version(ir_version);
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model.mutable_graph()->set_name("test");
  }

  ::onnx::GraphProto& graph() { return *model.mutable_graph(); }

  ::onnx::ValueInfoProto* input(const std::string& name, int elem_type, std::vector<Dim> dims) {
    return value_info(graph().add_input(), name, elem_type, dims);
  }
  ::onnx::ValueInfoProto* output(const std::string& name, int elem_type, std::vector<Dim> dims) {
    return value_info(graph().add_output(), name, elem_type, dims);
  }
  // An output without a declared type.
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs,
                          std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  TensorProto* initializer(const std::string& name, int elem_type, std::vector<int64_t> dims) {
    TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
  // An f32 initializer in float_data.
  TensorProto* initializer_f32(const std::string& name, std::vector<int64_t> dims,
                               const std::vector<float>& values) {
    TensorProto* t = initializer(name, TensorProto::FLOAT, std::move(dims));
    for (float v : values) t->add_float_data(v);
    return t;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  ::onnx::ModelProto model;

 private:
  static ::onnx::ValueInfoProto* value_info(::onnx::ValueInfoProto* vi, const std::string& name,
                                            int elem_type, const std::vector<Dim>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (d.param.empty())
        dim->set_dim_value(d.value);
      else
        dim->set_dim_param(d.param);
    }
    return vi;
  }
};

inline ::onnx::AttributeProto* add_attr(::onnx::NodeProto* n, const std::string& name,
                                        ::onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

// A fresh folder under the system temp dir, removed with the object. Named after the test and
// the process, so that concurrent test runs never share one.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string leaf = std::string("tessel_onnx_") + info->test_suite_name() + "_" + info->name() +
                       "_" + std::to_string(::getpid());
    std::replace(leaf.begin(), leaf.end(), '/', '_');
    path_ = fs::temp_directory_path() / leaf;
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  // Writes `bytes` to `name` inside the folder and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

 private:
  fs::path path_;
};

// Ops for the tests, independent of ops/: "Relu" (f32, elementwise max(x, 0)), "Add"
// (same-shape f32 sum), "Dropout" (1 to 3 inputs, 1 or 2 outputs; output 0 is input 0, the
// optional output 1 a bool mask of the same shape).
inline const ir::OpRegistry& test_registry() {
  static const ir::OpRegistry registry = [] {
    ir::OpRegistry r;
    ir::OpSchema relu;
    relu.name = "Relu";
    relu.infer = [](ir::InferContext& c) { c.set_output(0, c.dtype(0), c.shape(0)); };
    relu.compute = [](ir::KernelContext& c) {
      const float* x = c.input(0).data<float>();
      float* y = c.output(0).data<float>();
      for (int64_t i = 0; i < c.input(0).numel(); ++i) y[i] = x[i] > 0 ? x[i] : 0;
    };
    r.add(relu);

    ir::OpSchema add;
    add.name = "Add";
    add.min_inputs = add.max_inputs = 2;
    add.infer = [](ir::InferContext& c) {
      TESSEL_USER_CHECK(c.input(0) == c.input(1)) << c.node().label() << ": types differ";
      c.set_output(0, c.dtype(0), c.shape(0));
    };
    add.compute = [](ir::KernelContext& c) {
      const float* a = c.input(0).data<float>();
      const float* b = c.input(1).data<float>();
      float* y = c.output(0).data<float>();
      for (int64_t i = 0; i < c.input(0).numel(); ++i) y[i] = a[i] + b[i];
    };
    r.add(add);

    ir::OpSchema dropout;
    dropout.name = "Dropout";
    dropout.max_inputs = 3;
    dropout.max_outputs = 2;
    dropout.infer = [](ir::InferContext& c) {
      c.set_output(0, c.dtype(0), c.shape(0));
      if (c.outputs().size() > 1) c.set_output(1, DType::kBool, c.shape(0));
    };
    dropout.compute = [](ir::KernelContext& c) { c.output(0) = c.input(0).clone(); };
    r.add(dropout);
    return r;
  }();
  return registry;
}

inline ImportOptions test_options() {
  ImportOptions o;
  o.registry = &test_registry();
  return o;
}

// The message of the UserError that `f` throws; fails the test if it throws none.
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return {};
}

}  // namespace tessel::onnx::testing
