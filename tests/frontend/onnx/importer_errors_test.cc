// Every way a model can be bad: each must be a UserError that starts with the model's path
// and names what is wrong and where, never a crash.
#include <gtest/gtest.h>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_builder.h"

namespace tessel::onnx::testing {
namespace {

using ::onnx::AttributeProto;

// Imports `m` from bytes as "bad.onnx" and returns the error message, checking its prefix.
std::string import_error(const ModelBuilder& m, const ImportOptions& o = test_options()) {
  std::string msg = user_error_of([&] { import_model_bytes(m.bytes(), "bad.onnx", "", o); });
  EXPECT_EQ(msg.rfind("bad.onnx: ", 0), 0u) << msg;
  return msg;
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

// x -> Relu -> y, 2 floats: a valid model to break in one place.
ModelBuilder relu_model(int64_t opset = 17) {
  ModelBuilder m(opset);
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y", TensorProto::FLOAT, {2});
  return m;
}

TEST(OnnxImportErrors, MissingFile) {
  ScratchDir dir;
  std::string path = (dir.path() / "absent.onnx").string();
  std::string msg = user_error_of([&] { import_model(path, test_options()); });
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
  EXPECT_HAS(msg, "no such file");
}

TEST(OnnxImportErrors, NotAnOnnxFile) {
  ScratchDir dir;
  // 0xff.. is not a valid protobuf tag varint.
  std::string path = dir.write("junk.onnx", std::string(16, '\xff'));
  std::string msg = user_error_of([&] { import_model(path, test_options()); });
  EXPECT_EQ(msg.rfind(path + ": not an ONNX model: protobuf parsing failed", 0), 0u) << msg;
}

TEST(OnnxImportErrors, EmptyFileHasNoGraph) {
  ScratchDir dir;
  std::string path = dir.write("empty.onnx", "");
  std::string msg = user_error_of([&] { import_model(path, test_options()); });
  EXPECT_EQ(msg, path + ": not an ONNX model: it has no graph");
}

TEST(OnnxImportErrors, TruncatedProtobuf) {
  ModelBuilder m = relu_model();
  m.initializer_f32("w", {4}, {1, 2, 3, 4});
  std::string bytes = m.bytes();
  std::string msg = user_error_of([&] {
    import_model_bytes(bytes.substr(0, bytes.size() - 7), "bad.onnx", "", test_options());
  });
  EXPECT_EQ(msg.rfind("bad.onnx: not an ONNX model: protobuf parsing failed", 0), 0u) << msg;
}

TEST(OnnxImportErrors, IrVersionTooOld) {
  ModelBuilder m(17, /*ir_version=*/2);
  EXPECT_HAS(import_error(m), "ir_version 2 is not supported (tessel needs 3 or later)");
}

TEST(OnnxImportErrors, OpsetOutsideTheSupportedRange) {
  EXPECT_EQ(import_error(relu_model(0)),
            "bad.onnx: opset 0 is not supported (tessel supports opsets 1 to 22)");
  EXPECT_EQ(import_error(relu_model(23)),
            "bad.onnx: opset 23 is not supported (tessel supports opsets 1 to 22)");
}

TEST(OnnxImportErrors, NoDefaultDomainOpset) {
  ModelBuilder m = relu_model();
  m.model.mutable_opset_import(0)->set_domain("com.example");
  EXPECT_HAS(import_error(m), "imports no opset of the default ONNX domain");
}

TEST(OnnxImportErrors, UnsupportedOpNamesOpNodeAndSupportedOps) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Frobnicate", {"x"}, {"y"}, "frob1");
  m.output("y");
  std::string msg = import_error(m);
  EXPECT_HAS(msg, "'frob1'");
  EXPECT_HAS(msg, "unsupported op 'Frobnicate'");
  EXPECT_HAS(msg, "(supported: Add, Dropout, Relu)");
}

TEST(OnnxImportErrors, OpOfAnotherDomain) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"y"}, "ms_relu")->set_domain("com.microsoft");
  m.output("y");
  std::string msg = import_error(m);
  EXPECT_HAS(msg, "Relu 'ms_relu': op 'Relu' of domain 'com.microsoft' is not supported");
}

TEST(OnnxImportErrors, ControlFlowSubgraph) {
  ModelBuilder m;
  m.input("c", TensorProto::BOOL, {});
  auto* n = m.node("If", {"c"}, {"y"}, "branch");
  add_attr(n, "then_branch", AttributeProto::GRAPH)->mutable_g()->set_name("t");
  m.output("y");
  EXPECT_HAS(import_error(m), "If 'branch': attribute 'then_branch' is a subgraph");
}

TEST(OnnxImportErrors, DanglingValue) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Add", {"x", "ghost"}, {"y"}, "add");
  m.output("y");
  EXPECT_HAS(import_error(m), "Add 'add': input 'ghost' is dangling");
}

TEST(OnnxImportErrors, CycleNamesTheNodesOnIt) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"a"}, "entry");
  m.node("Add", {"a", "c"}, {"b"}, "add");
  m.node("Relu", {"b"}, {"c"}, "back");
  m.output("c");
  EXPECT_HAS(import_error(m), "the graph has a cycle: Add 'add' -> Relu 'back' -> Add 'add'");
}

TEST(OnnxImportErrors, NodeReadingItsOwnOutput) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Add", {"x", "y"}, {"y"}, "self");
  m.output("y");
  EXPECT_HAS(import_error(m), "the graph has a cycle: Add 'self' -> Add 'self'");
}

TEST(OnnxImportErrors, ValueDefinedTwice) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"y"}, "first");
  m.node("Relu", {"x"}, {"y"}, "second");
  m.output("y");
  EXPECT_HAS(import_error(m), "value 'y' is defined twice: by Relu 'first' and by Relu 'second'");
}

TEST(OnnxImportErrors, NodeOverwritingAGraphInput) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"x"}, "clobber");
  m.output("x");
  EXPECT_HAS(import_error(m),
             "value 'x' is defined twice: by graph input 'x' and by Relu 'clobber'");
}

TEST(OnnxImportErrors, GraphOutputNotProduced) {
  ModelBuilder m = relu_model();
  m.output("nowhere");
  EXPECT_HAS(import_error(m), "graph output 'nowhere' is not produced by any node");
}

TEST(OnnxImportErrors, AbsurdInputDims) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {1LL << 30, 1LL << 30, 1LL << 30});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  std::string msg = import_error(m);
  EXPECT_HAS(msg, "graph input 'x'");
  EXPECT_HAS(msg, "more than 2^40 elements");
}

TEST(OnnxImportErrors, NegativeInputDim) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {2, -3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_HAS(import_error(m), "graph input 'x': dim 1 is -3, expected >= 0");
}

TEST(OnnxImportErrors, SymbolicDimWithoutShape) {
  ModelBuilder m;
  m.input("image", TensorProto::FLOAT, {"N", 3, "height", 224});
  m.node("Relu", {"image"}, {"y"});
  m.output("y");
  std::string msg = import_error(m);
  EXPECT_HAS(msg, "graph input 'image': has symbolic dim 2 ('height') in f32[N,3,height,224]");
  EXPECT_HAS(msg, "ImportOptions::input_shapes");
}

TEST(OnnxImportErrors, InputWithoutShape) {
  ModelBuilder m = relu_model();
  m.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  EXPECT_HAS(import_error(m), "graph input 'x': has no declared shape");
}

TEST(OnnxImportErrors, InputShapeOptionContradictsTheModel) {
  ImportOptions o = test_options();
  o.input_shapes["x"] = {3};
  EXPECT_HAS(import_error(relu_model(), o),
             "graph input 'x': ImportOptions::input_shapes gives shape [3], but the model "
             "declares f32[2]");
}

TEST(OnnxImportErrors, OptionsNamingNoInput) {
  ImportOptions o = test_options();
  o.input_shapes["X"] = {2};
  EXPECT_HAS(import_error(relu_model(), o),
             "ImportOptions::input_shapes names 'X', which is not a graph input");
  ImportOptions b = test_options();
  b.bind_constants["y"] = Tensor::scalar_i64(1);
  EXPECT_HAS(import_error(relu_model(), b),
             "ImportOptions::bind_constants names 'y', which is not a graph input");
  ImportOptions n = test_options();
  n.batch = -1;
  EXPECT_HAS(import_error(relu_model(), n), "ImportOptions::batch is -1, expected >= 0");
}

TEST(OnnxImportErrors, BoundConstantOfTheWrongType) {
  ImportOptions o = test_options();
  o.bind_constants["x"] = Tensor::from_vector<int64_t>({2}, {1, 2});
  EXPECT_HAS(import_error(relu_model(), o),
             "graph input 'x': ImportOptions::bind_constants gives i64[2], but the model "
             "declares f32[2]");
}

TEST(OnnxImportErrors, UnsupportedElementTypes) {
  ModelBuilder m = relu_model();
  m.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::UINT16);
  EXPECT_HAS(import_error(m), "graph input 'x': element type UINT16 is not supported");

  ModelBuilder s = relu_model();
  s.initializer("names", TensorProto::STRING, {1})->add_string_data("a");
  EXPECT_HAS(import_error(s), "initializer 'names': element type STRING is not supported");

  ModelBuilder c = relu_model();
  c.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::COMPLEX64);
  EXPECT_HAS(import_error(c), "graph output 'y': element type COMPLEX64 is not supported");
}

TEST(OnnxImportErrors, SequenceTypedInput) {
  ModelBuilder m = relu_model();
  auto* vi = m.graph().add_input();
  vi->set_name("seq");
  vi->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(TensorProto::FLOAT);
  EXPECT_HAS(import_error(m), "graph input 'seq': has sequence type; tessel supports tensors only");
}

TEST(OnnxImportErrors, InitializerRawDataSizeMismatch) {
  ModelBuilder m = relu_model();
  m.initializer("w", TensorProto::FLOAT, {2, 3})->set_raw_data(std::string(20, '\0'));
  EXPECT_HAS(import_error(m),
             "initializer 'w': raw_data has 20 bytes, but dims [2,3] of f32 need 24");
}

TEST(OnnxImportErrors, InitializerTypedDataCountMismatch) {
  ModelBuilder m = relu_model();
  m.initializer_f32("w", {3}, {1, 2});
  EXPECT_HAS(import_error(m), "initializer 'w': float_data has 2 values, but dims [3] need 3");
  ModelBuilder e = relu_model();
  e.initializer("w", TensorProto::INT64, {2});  // no data at all
  EXPECT_HAS(import_error(e), "initializer 'w': int64_data has 0 values, but dims [2] need 2");
}

TEST(OnnxImportErrors, InitializerHugeOrNegativeDims) {
  // The dims are checked before anything is allocated: no 2^40-element buffer is attempted.
  ModelBuilder h = relu_model();
  h.initializer("w", TensorProto::FLOAT, {1LL << 20, 1LL << 20, 2});
  EXPECT_HAS(import_error(h), "initializer 'w': shape [1048576,1048576,2] has more than 2^40");
  ModelBuilder big = relu_model();
  big.initializer("w", TensorProto::FLOAT, {1LL << 20, 1LL << 19});  // 2^39: allowed by numel
  EXPECT_HAS(import_error(big), "initializer 'w': float_data has 0 values, but dims");
  ModelBuilder n = relu_model();
  n.initializer("w", TensorProto::FLOAT, {4, -1});
  EXPECT_HAS(import_error(n), "initializer 'w': negative dimension -1");
}

TEST(OnnxImportErrors, ConstantNodeErrors) {
  ModelBuilder s = relu_model();
  add_attr(s.node("Constant", {}, {"k"}, "kstr"), "value_string", AttributeProto::STRING)
      ->set_s("hi");
  EXPECT_HAS(import_error(s),
             "Constant 'kstr': attribute 'value_string': string tensors are not "
             "supported");
  ModelBuilder none = relu_model();
  none.node("Constant", {}, {"k"}, "knone");
  EXPECT_HAS(import_error(none), "Constant 'knone': has 0 attributes, expected exactly one");
  ModelBuilder kind = relu_model();
  add_attr(kind.node("Constant", {}, {"k"}, "kk"), "value_int", AttributeProto::FLOAT);
  EXPECT_HAS(import_error(kind),
             "Constant 'kk': attribute 'value_int' has kind FLOAT, expected INT");
}

TEST(OnnxImportErrors, AttributeErrors) {
  ModelBuilder twice = relu_model();
  auto* n = twice.graph().mutable_node(0);
  add_attr(n, "alpha", AttributeProto::FLOAT);
  add_attr(n, "alpha", AttributeProto::FLOAT);
  EXPECT_HAS(import_error(twice), "Relu 'relu': attribute 'alpha' is given twice");
  ModelBuilder untyped = relu_model();
  untyped.graph().mutable_node(0)->add_attribute()->set_name("mode");
  EXPECT_HAS(import_error(untyped), "Relu 'relu': attribute 'mode' has no type");
  ModelBuilder sparse = relu_model();
  add_attr(sparse.graph().mutable_node(0), "sp", AttributeProto::SPARSE_TENSOR);
  EXPECT_HAS(import_error(sparse),
             "Relu 'relu': attribute 'sp' has kind SPARSE_TENSOR, which tessel does not support");
  ModelBuilder tensor = relu_model();
  auto* t = add_attr(tensor.graph().mutable_node(0), "t", AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(2);
  EXPECT_HAS(import_error(tensor),
             "Relu 'relu': attribute 't': float_data has 0 values, but dims [2] need 2");
}

TEST(OnnxImportErrors, OpInferenceErrorsSurfaceWithThePath) {
  ModelBuilder m;
  m.input("a", TensorProto::FLOAT, {2});
  m.input("b", TensorProto::FLOAT, {3});
  m.node("Add", {"a", "b"}, {"y"}, "sum");
  m.output("y");
  EXPECT_EQ(import_error(m), "bad.onnx: Add 'sum': types differ");
}

TEST(OnnxImportErrors, DeclaredOutputContradictsInference) {
  ModelBuilder m = relu_model();
  m.graph()
      .mutable_output(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(5);
  EXPECT_HAS(import_error(m), "graph output 'y' is declared as f32[5], but tessel infers f32[2]");
  ModelBuilder t = relu_model();
  t.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::INT64);
  EXPECT_HAS(import_error(t), "graph output 'y' is declared as i64[2], but tessel infers f32[2]");
}

TEST(OnnxImportErrors, SparseInitializer) {
  ModelBuilder m = relu_model();
  m.graph().add_sparse_initializer();
  EXPECT_HAS(import_error(m), "sparse initializers are not supported");
}

}  // namespace
}  // namespace tessel::onnx::testing
