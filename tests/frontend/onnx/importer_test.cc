// Models the importer must accept, and what it makes of them.
#include "frontend/onnx/importer.h"

#include <gtest/gtest.h>

#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/opset_conversion.h"
#include "runtime/cpu/executor.h"

namespace tessel::onnx::testing {
namespace {

using ::onnx::AttributeProto;

// y = Relu(x + w) with w an initializer: the smallest model that has an input, a constant
// and two nodes.
ModelBuilder relu_add_model(int64_t opset = 17) {
  ModelBuilder m(opset);
  m.input("x", TensorProto::FLOAT, {2, 2});
  m.initializer_f32("w", {2, 2}, {1, -2, 3, -4});
  m.node("Add", {"x", "w"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", TensorProto::FLOAT, {2, 2});
  return m;
}

const ir::Node* find_node(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

TEST(OnnxImport, ImportsAndRunsAGraph) {
  for (int64_t opset : {kMinOpset, kMaxOpset}) {
    ir::Graph g = import_model_bytes(relu_add_model(opset).bytes(), "m.onnx", "", test_options());
    EXPECT_EQ(g.opset, converted_opset(opset));
    EXPECT_EQ(g.name, "test");
    ASSERT_EQ(g.inputs.size(), 1u);
    EXPECT_EQ(g.value(g.inputs[0]).name, "x");
    ASSERT_EQ(g.nodes.size(), 2u);
    EXPECT_EQ(g.nodes[0].label(), "Add 'add'");
    EXPECT_EQ(g.type(g.outputs[0]), (ir::TensorType{DType::kF32, {2, 2}}));
    Tensor x = Tensor::from_vector<float>({2, 2}, {0.5f, 1.0f, -5.0f, 6.0f});
    std::vector<Tensor> y = runtime::cpu::run_graph(g, {x}, {}, test_registry());
    // Relu(x + w) = Relu([1.5, -1, -2, 2]).
    EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1.5f, 0.0f, 0.0f, 2.0f}));
  }
}

TEST(OnnxImport, ReadsAModelFromAFile) {
  ScratchDir dir;
  std::string path = dir.write("model.onnx", relu_add_model().bytes());
  ir::Graph g = import_model(path, test_options());
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(OnnxImport, InitializerListedAsInputIsAConstant) {
  ModelBuilder m = relu_add_model();
  m.input("w", TensorProto::FLOAT, {2, 2});  // ONNX < IR 4 style: initializers are inputs
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  ASSERT_EQ(g.inputs.size(), 1u);
  ir::ValueId w = g.find_value("w");
  ASSERT_NE(w, ir::kNoValue);
  EXPECT_TRUE(g.value(w).is_constant());
  EXPECT_EQ(g.value(w).data->to_f32_vector(), (std::vector<float>{1, -2, 3, -4}));
}

TEST(OnnxImport, SortsNodesTopologically) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {3});
  m.node("Relu", {"b"}, {"c"}, "third");
  m.node("Relu", {"a"}, {"b"}, "second");
  m.node("Relu", {"x"}, {"a"}, "first");
  m.output("c", TensorProto::FLOAT, {3});
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
  EXPECT_EQ(g.nodes[2].name, "third");
}

TEST(OnnxImport, KeepsTheOrderOfIndependentNodes) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {3});
  m.node("Relu", {"x"}, {"a"}, "n0");
  m.node("Relu", {"x"}, {"b"}, "n1");
  m.node("Add", {"a", "b"}, {"c"}, "n2");
  m.node("Relu", {"x"}, {"d"}, "n3");
  m.output("c");
  m.output("d");
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  std::vector<std::string> names;
  for (const ir::Node& n : g.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"n0", "n1", "n2", "n3"}));
}

TEST(OnnxImport, MakesNodeNamesUnique) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {3});
  m.node("Relu", {"x"}, {"a"}, "r");
  m.node("Relu", {"a"}, {"b"}, "r");       // duplicate of an explicit name: suffixed
  m.node("Relu", {"b"}, {"c"});            // nameless: would be "Relu_2", but see below
  m.node("Relu", {"c"}, {"d"});            // nameless: "Relu_3"
  m.node("Relu", {"d"}, {"e"}, "Relu_2");  // a model's own unique name is kept
  m.output("e");
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  std::vector<std::string> names;
  for (const ir::Node& n : g.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"r", "r_1", "Relu_2_1", "Relu_3", "Relu_2"}));
}

TEST(OnnxImport, OmittedInputsAndOutputs) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {4});
  // Inputs: data, "" (ratio omitted), training_mode omitted by truncation. Outputs: the
  // result, then a trailing omitted mask.
  m.node("Dropout", {"x", ""}, {"y", ""}, "drop");
  // An omitted output followed by a used one keeps its position with an invented value.
  m.node("Dropout", {"y"}, {"", "mask"}, "drop2");
  m.output("y");
  m.output("mask", TensorProto::BOOL, {4});
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  const ir::Node* drop = find_node(g, "drop");
  ASSERT_NE(drop, nullptr);
  EXPECT_EQ(drop->inputs.size(), 2u);
  EXPECT_EQ(drop->inputs[1], ir::kNoValue);
  EXPECT_EQ(drop->outputs.size(), 1u);  // the trailing "" is dropped
  const ir::Node* drop2 = find_node(g, "drop2");
  ASSERT_NE(drop2, nullptr);
  ASSERT_EQ(drop2->outputs.size(), 2u);
  EXPECT_EQ(g.value(drop2->outputs[0]).name, "drop2_unused_output_0");
  EXPECT_EQ(g.type(drop2->outputs[1]), (ir::TensorType{DType::kBool, {4}}));
}

TEST(OnnxImport, InventedNamesAvoidTheModelsNames) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {4});
  m.node("Dropout", {"x"}, {"", "mask"}, "d");
  m.node("Relu", {"x"}, {"d_unused_output_0"}, "r");  // the name tessel would invent
  m.output("mask");
  m.output("d_unused_output_0");
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  EXPECT_EQ(g.value(find_node(g, "d")->outputs[0]).name, "d_unused_output_0_1");
}

TEST(OnnxImport, ConstantNodesBecomeConstants) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  auto* c = m.node("Constant", {}, {"k"}, "k_node");
  auto* t = add_attr(c, "value", AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(2);
  t->add_float_data(0.25f);
  t->add_float_data(-8.0f);
  add_attr(m.node("Constant", {}, {"f"}), "value_float", AttributeProto::FLOAT)->set_f(1.5f);
  auto* fs = add_attr(m.node("Constant", {}, {"fs"}), "value_floats", AttributeProto::FLOATS);
  fs->add_floats(1);
  fs->add_floats(2);
  add_attr(m.node("Constant", {}, {"i"}), "value_int", AttributeProto::INT)->set_i(-7);
  auto* is = add_attr(m.node("Constant", {}, {"is"}), "value_ints", AttributeProto::INTS);
  is->add_ints(3);
  is->add_ints(1LL << 40);
  m.node("Add", {"x", "k"}, {"y"}, "add");
  for (const char* out : {"y", "f", "fs", "i", "is"}) m.output(out);
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  ASSERT_EQ(g.nodes.size(), 1u);  // only the Add
  auto value_of = [&](const char* name) -> const Tensor& {
    ir::ValueId id = g.find_value(name);
    EXPECT_NE(id, ir::kNoValue) << name;
    EXPECT_TRUE(g.value(id).is_constant()) << name;
    return *g.value(id).data;
  };
  EXPECT_EQ(value_of("k").to_f32_vector(), (std::vector<float>{0.25f, -8.0f}));
  EXPECT_EQ(value_of("f").type_str(), "f32[]");
  EXPECT_EQ(value_of("f").to_f32_vector(), (std::vector<float>{1.5f}));
  EXPECT_EQ(value_of("fs").type_str(), "f32[2]");
  EXPECT_EQ(value_of("i").type_str(), "i64[]");
  EXPECT_EQ(value_of("i").get_i64(0), -7);
  EXPECT_EQ(value_of("is").to_i64_vector(), (std::vector<int64_t>{3, 1LL << 40}));
}

TEST(OnnxImport, ConvertsEveryAttributeKind) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {1});
  auto* n = m.node("Relu", {"x"}, {"y"}, "r");
  add_attr(n, "i", AttributeProto::INT)->set_i(-3);
  add_attr(n, "f", AttributeProto::FLOAT)->set_f(0.1f);
  add_attr(n, "s", AttributeProto::STRING)->set_s("nearest");
  auto* ints = add_attr(n, "ints", AttributeProto::INTS);
  ints->add_ints(1);
  ints->add_ints(-2);
  auto* floats = add_attr(n, "floats", AttributeProto::FLOATS);
  floats->add_floats(0.5f);
  auto* strings = add_attr(n, "strings", AttributeProto::STRINGS);
  strings->add_strings("a");
  strings->add_strings("b");
  auto* t = add_attr(n, "t", AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(TensorProto::INT32);
  t->add_int32_data(42);
  m.output("y");
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  const ir::Node& r = g.nodes.at(0);
  EXPECT_EQ(r.get_int("i", 0), -3);
  // FLOAT attributes are floats in ONNX and doubles in tessel: the float value, widened.
  EXPECT_EQ(r.get_float("f", 0), static_cast<double>(0.1f));
  EXPECT_EQ(r.get_string("s", ""), "nearest");
  EXPECT_EQ(r.get_ints("ints"), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(r.get_floats("floats"), (std::vector<double>{0.5}));
  EXPECT_EQ(std::get<std::vector<std::string>>(r.attrs.at("strings")),
            (std::vector<std::string>{"a", "b"}));
  ASSERT_NE(r.get_tensor("t"), nullptr);
  EXPECT_EQ(r.get_tensor("t")->type_str(), "i32[]");
  EXPECT_EQ(r.get_tensor("t")->get_i64(0), 42);
}

TEST(OnnxImport, SymbolicBatchDefaultsToOne) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {"N", 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"N", 3});
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  EXPECT_EQ(g.type(g.inputs[0]).shape, (Shape{1, 3}));
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{1, 3}));
}

TEST(OnnxImport, BatchOptionResolvesASymbolicBatchOnly) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {"N", 3});
  m.input("z", TensorProto::FLOAT, {2, 3});  // static batch: the model's, kept
  m.node("Relu", {"x"}, {"y"});
  m.node("Relu", {"z"}, {"w"});
  m.output("y");
  m.output("w");
  ImportOptions o = test_options();
  o.batch = 8;
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", o);
  EXPECT_EQ(g.type(g.inputs[0]).shape, (Shape{8, 3}));
  EXPECT_EQ(g.type(g.inputs[1]).shape, (Shape{2, 3}));
}

TEST(OnnxImport, InputShapesResolveOtherSymbolicDims) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {"N", 3, "H", "W"});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"N", 3, "H", "W"});
  ImportOptions o = test_options();
  o.input_shapes["x"] = {2, 3, 5, 7};
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", o);
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{2, 3, 5, 7}));
}

TEST(OnnxImport, BoundConstantsReplaceInputs) {
  ModelBuilder m = relu_add_model();
  ImportOptions o = test_options();
  o.bind_constants["x"] = Tensor::from_vector<float>({2, 2}, {1, 1, 1, 1});
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", o);
  EXPECT_TRUE(g.inputs.empty());
  ir::ValueId x = g.find_value("x");
  EXPECT_TRUE(g.value(x).is_constant());
  std::vector<Tensor> y = runtime::cpu::run_graph(g, {}, {}, test_registry());
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{2, 0, 4, 0}));
}

TEST(OnnxImport, GraphOutputMayBeAnInputOrAConstant) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.initializer_f32("w", {1}, {3});
  m.output("x", TensorProto::FLOAT, {2});
  m.output("w", TensorProto::FLOAT, {1});
  ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", test_options());
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.outputs[0], g.inputs[0]);
  EXPECT_TRUE(g.value(g.outputs[1]).is_constant());
}

TEST(OnnxImport, UsesTheGlobalRegistryByDefault) {
  // Whatever ops/ registers, a made-up op is not among them and the message lists them.
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("NoSuchOpInTessel", {"x"}, {"y"}, "n");
  m.output("y");
  std::string msg = user_error_of([&] { import_model_bytes(m.bytes(), "m.onnx", ""); });
  EXPECT_NE(msg.find("unsupported op 'NoSuchOpInTessel'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supported:"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel::onnx::testing
