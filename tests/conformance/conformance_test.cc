// The conformance harness's own rules: comparison, skip classification, case discovery and
// running, on hand-made cases whose outcome is known.
#include "conformance/conformance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/onnx/model_builder.h"

namespace tessel::conformance {
namespace {

using ::onnx::TensorProto;
using onnx::testing::ModelBuilder;
using onnx::testing::ScratchDir;
using onnx::testing::test_registry;

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST(ConformanceCompare, FloatToleranceIsAtolPlusRtolTimesExpected) {
  Tolerance tol{1e-3, 1e-5};
  Tensor want = Tensor::from_vector<float>({2}, {100.0f, 0.0f});
  // |got - want| <= 1e-5 + 1e-3 * 100 = 0.10001 passes; 0.2 does not.
  EXPECT_FALSE(compare(Tensor::from_vector<float>({2}, {100.1f, 0.0f}), want, tol, "y"));
  EXPECT_FALSE(compare(Tensor::from_vector<float>({2}, {100.0f, 9e-6f}), want, tol, "y"));
  auto diff = compare(Tensor::from_vector<float>({2}, {100.2f, 2e-5f}), want, tol, "y");
  ASSERT_TRUE(diff);
  EXPECT_HAS(*diff, "y: 2 of 2 elements differ; first at [0]: got 100.199997");
  EXPECT_HAS(*diff, "expected 100 (rtol 0.001, atol 1e-05)");
}

TEST(ConformanceCompare, NanEqualsNanAndInfinitiesMustMatch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tolerance tol;
  Tensor want = Tensor::from_vector<float>({3}, {nan, inf, -inf});
  EXPECT_FALSE(compare(Tensor::from_vector<float>({3}, {nan, inf, -inf}), want, tol, "y"));
  EXPECT_TRUE(compare(Tensor::from_vector<float>({3}, {0, inf, -inf}), want, tol, "y"));
  EXPECT_TRUE(compare(Tensor::from_vector<float>({3}, {nan, -inf, -inf}), want, tol, "y"));
  EXPECT_TRUE(compare(Tensor::from_vector<float>({3}, {nan, 3e38f, -inf}), want, tol, "y"));
  EXPECT_TRUE(compare(Tensor::from_vector<float>({1}, {nan}), Tensor::from_vector<float>({1}, {1}),
                      tol, "y"));
}

TEST(ConformanceCompare, IntegersAreExactAndTypesMustMatch) {
  Tensor want = Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, (1LL << 53) + 1});
  EXPECT_FALSE(compare(want.clone(), want, {}, "y"));
  auto diff = compare(Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, 1LL << 53}), want, {}, "y");
  ASSERT_TRUE(diff);
  EXPECT_EQ(*diff,
            "y: 1 of 4 elements differ; first at [1,1]: got 9007199254740992, expected "
            "9007199254740993");
  EXPECT_EQ(*compare(want.cast(DType::kI32), want, {}, "y"), "y: got i32[2,2], expected i64[2,2]");
  EXPECT_EQ(*compare(want.reshaped({4}), want, {}, "y"), "y: got i64[4], expected i64[2,2]");
}

// --- skip rules

ModelBuilder relu_model(int64_t opset = 17) {
  ModelBuilder m(opset);
  m.input("x", TensorProto::FLOAT, {2});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", TensorProto::FLOAT, {2});
  return m;
}

TEST(ConformanceSkip, SupportedModelIsNotSkipped) {
  EXPECT_FALSE(skip_reason(relu_model().model, test_registry()));
  ModelBuilder c = relu_model();
  c.node("Constant", {}, {"k"});  // handled by the importer, not the registry
  EXPECT_FALSE(skip_reason(c.model, test_registry()));
}

TEST(ConformanceSkip, Reasons) {
  EXPECT_EQ(skip_reason(relu_model(23).model, test_registry()).value().reason,
            "opset 23 (tessel supports 1 to 22)");
  EXPECT_FALSE(skip_reason(relu_model(1).model, test_registry()));
  EXPECT_FALSE(skip_reason(relu_model(6).model, test_registry()));
  EXPECT_FALSE(skip_reason(relu_model(22).model, test_registry()));

  ModelBuilder op = relu_model();
  op.node("Loop", {"y"}, {"z"});
  op.node("If", {"y"}, {"w"});
  std::optional<Skip> ops = skip_reason(op.model, test_registry());
  ASSERT_TRUE(ops);
  EXPECT_EQ(ops->reason, "unsupported ops If, Loop");
  EXPECT_EQ(ops->groups, (std::vector<std::string>{"unsupported op If", "unsupported op Loop"}));

  ModelBuilder dom = relu_model();
  dom.node("Adam", {"y"}, {"z"})->set_domain("ai.onnx.preview.training");
  EXPECT_EQ(skip_reason(dom.model, test_registry()).value().reason,
            "op domain 'ai.onnx.preview.training'");

  ModelBuilder u16 = relu_model();
  u16.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::UINT16);
  EXPECT_EQ(skip_reason(u16.model, test_registry()).value().reason, "element type UINT16");

  ModelBuilder cast = relu_model();
  auto* to = cast.graph().mutable_node(0)->add_attribute();
  to->set_name("to");
  to->set_type(::onnx::AttributeProto::INT);
  to->set_i(TensorProto::STRING);
  EXPECT_EQ(skip_reason(cast.model, test_registry()).value().reason, "element type STRING");

  ModelBuilder seq = relu_model();
  seq.graph().mutable_output(0)->mutable_type()->mutable_sequence_type();
  EXPECT_EQ(skip_reason(seq.model, test_registry()).value().reason, "sequence type");

  ModelBuilder opt = relu_model();
  opt.graph().mutable_input(0)->mutable_type()->mutable_optional_type();
  EXPECT_EQ(skip_reason(opt.model, test_registry()).value().reason, "optional type");
}

// --- whole cases on disk

std::string tensor_pb(const Tensor& t) {
  TensorProto p;
  p.set_data_type(dtype_info(t.dtype()).onnx_type);
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(std::string(reinterpret_cast<const char*>(t.raw()), t.nbytes()));
  return p.SerializeAsString();
}

void write_case(const ScratchDir& dir, const std::string& name, const ModelBuilder& m,
                const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  dir.write(name + "/model.onnx", m.bytes());
  for (size_t i = 0; i < inputs.size(); ++i)
    dir.write(name + "/test_data_set_0/input_" + std::to_string(i) + ".pb", tensor_pb(inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i)
    dir.write(name + "/test_data_set_0/output_" + std::to_string(i) + ".pb", tensor_pb(outputs[i]));
}

TEST(ConformanceCases, PassFailSkip) {
  ScratchDir dir;
  Tensor x = Tensor::from_vector<float>({2}, {-1.0f, 2.5f});
  write_case(dir, "test_relu_ok", relu_model(), {x}, {Tensor::from_vector<float>({2}, {0, 2.5f})});
  write_case(dir, "test_relu_wrong", relu_model(), {x},
             {Tensor::from_vector<float>({2}, {0, 2.6f})});
  write_case(dir, "test_relu_opset23", relu_model(23), {x}, {x});
  std::vector<TestCase> cases = discover_cases(dir.path(), {"node"});
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].name, "test_relu_ok");  // sorted by name
  EXPECT_EQ(cases[0].suite, dir.path().filename().string());

  CaseResult ok = run_case(cases[0], test_registry());
  EXPECT_EQ(ok.status, CaseResult::Status::kPass) << ok.reason;
  EXPECT_EQ(ok.ops, "Relu");
  CaseResult future = run_case(cases[1], test_registry());
  EXPECT_EQ(future.status, CaseResult::Status::kSkip);
  EXPECT_EQ(future.reason, "opset 23 (tessel supports 1 to 22)");
  EXPECT_EQ(future.skip_groups, (std::vector<std::string>{future.reason}));
  CaseResult wrong = run_case(cases[2], test_registry());
  EXPECT_EQ(wrong.status, CaseResult::Status::kFail);
  EXPECT_HAS(wrong.reason, "test_data_set_0: output 0 'y': 1 of 2 elements differ; first at [1]");
}

TEST(ConformanceCases, ImportAndRunErrorsAreFailures) {
  ScratchDir dir;
  ModelBuilder m;
  m.input("a", TensorProto::FLOAT, {2});
  m.input("b", TensorProto::FLOAT, {3});
  m.node("Add", {"a", "b"}, {"y"}, "sum");
  m.output("y");
  write_case(dir, "test_add", m, {Tensor(DType::kF32, {2}), Tensor(DType::kF32, {3})},
             {Tensor(DType::kF32, {2})});
  std::vector<TestCase> cases = discover_cases(dir.path(), {});
  ASSERT_EQ(cases.size(), 1u);
  CaseResult r = run_case(cases[0], test_registry());
  EXPECT_EQ(r.status, CaseResult::Status::kFail);
  EXPECT_HAS(r.reason, "model.onnx: Add 'sum': types differ");
}

TEST(ConformanceCases, IntegerInputsAreBoundAsConstants) {
  // The i64 input is bound, so the graph has no runtime input left and its output is the
  // bound value itself; the f32 input stays an input and runs through Relu.
  ScratchDir dir;
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {"N"});
  m.input("k", TensorProto::INT64, {"K"});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  m.output("k");
  Tensor k = Tensor::from_vector<int64_t>({3}, {4, 5, 6});
  write_case(dir, "test_bind", m, {Tensor::from_vector<float>({1}, {-3}), k},
             {Tensor::from_vector<float>({1}, {0}), k});
  CaseResult r = run_case(discover_cases(dir.path(), {}).at(0), test_registry());
  EXPECT_EQ(r.status, CaseResult::Status::kPass) << r.reason;
}

TEST(ConformanceCases, SuiteTolerancesAndDataJson) {
  ScratchDir dir;
  ModelBuilder m = relu_model();
  dir.write("pytorch-converted/test_a/model.onnx", m.bytes());
  dir.write("node/test_b/model.onnx", m.bytes());
  dir.write("node/test_c/model.onnx", m.bytes());
  dir.write("node/test_c/data.json", R"({"rtol": 0.5, "atol": 0.25})");
  dir.write("node/not_a_case/readme.txt", "");
  std::vector<TestCase> cases = discover_cases(dir.path(), {"node", "pytorch-converted"});
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].id(), "node/test_b");
  EXPECT_EQ(cases[0].tolerance.atol, 1e-7);
  EXPECT_EQ(cases[1].id(), "node/test_c");
  EXPECT_EQ(cases[1].tolerance.rtol, 0.5);
  EXPECT_EQ(cases[1].tolerance.atol, 0.25);
  EXPECT_EQ(cases[2].id(), "pytorch-converted/test_a");
  EXPECT_EQ(cases[2].tolerance.rtol, 1e-3);
  EXPECT_EQ(cases[2].tolerance.atol, 1e-5);
}

}  // namespace
}  // namespace tessel::conformance
