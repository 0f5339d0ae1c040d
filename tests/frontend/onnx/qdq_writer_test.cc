// The QDQ writer on hand-built models: which layers it finds, the nodes and initializers it
// writes, and what it refuses.
#include "frontend/onnx/qdq_writer.h"

#include <gtest/gtest.h>

#include <map>

#include "frontend/onnx/dense_block_model.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/tensor_proto.h"

namespace tessel::onnx {
namespace {

using ::onnx::TensorProto;
using testing::ModelBuilder;

// x (1,1,2,2) -> Conv(w: 2x1x1x2) -> y, with w = [[1, -0.5], [0.25, 0.125]].
ModelBuilder conv_model(int64_t opset = 17) {
  ModelBuilder m(opset);
  m.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  m.initializer_f32("w", {2, 1, 1, 2}, {1, -0.5f, 0.25f, 0.125f});
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.output("y", TensorProto::FLOAT, {1, 2, 2, 1});
  return m;
}

::onnx::ModelProto parse(const std::string& bytes) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

const TensorProto* initializer(const ::onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::vector<std::string> ops(const ::onnx::ModelProto& m) {
  std::vector<std::string> r;
  for (const auto& n : m.graph().node()) r.push_back(n.op_type());
  return r;
}

TEST(QdqWriter, finds_conv_gemm_and_matmul_with_constant_weights) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {1, 4});
  m.input("b", TensorProto::FLOAT, {4, 4});
  m.initializer_f32("g", {4, 4}, std::vector<float>(16, 1));
  m.initializer_f32("k", {4, 4}, std::vector<float>(16, 1));
  m.node("Gemm", {"x", "g"}, {"y1"}, "dense");  // transB 0: B is (K, N)
  auto* t = m.node("Gemm", {"y1", "g"}, {"y2"});
  testing::add_attr(t, "transB", ::onnx::AttributeProto::INT)->set_i(1);
  m.node("MatMul", {"y2", "k"}, {"y3"}, "mm");
  m.node("MatMul", {"y3", "b"}, {"y4"}, "dynamic");  // weight is an input: not quantizable
  m.output("y4", TensorProto::FLOAT, {1, 4});
  const auto layers = quantizable_layers(m.bytes(), "m");
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].name, "dense");
  EXPECT_EQ(layers[0].weight_axis, 1);
  EXPECT_EQ(layers[1].name, "Gemm #1");
  EXPECT_EQ(layers[1].weight_axis, 0);
  EXPECT_EQ(layers[2].op, "MatMul");
  EXPECT_EQ(layers[2].activation, "y2");
  EXPECT_EQ(layers[2].weight_axis, 1);
}

TEST(QdqWriter, writes_qdq_on_the_activation_and_per_channel_int8_weights) {
  const std::string out = write_qdq_model(conv_model().bytes(), {{0, 2.54}}, "m", "");
  const ::onnx::ModelProto m = parse(out);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"QuantizeLinear", "DequantizeLinear",
                                              "DequantizeLinear", "Conv"}));
  EXPECT_EQ(initializer(m, "w"), nullptr);  // the float weight is gone
  const Tensor q = tensor_from_proto(*initializer(m, "w_int8"), "w_int8", "");
  // Channel scales 1/127 and 0.25/127: -0.5 -> -63.5 and 0.125 -> 63.5 round to even.
  EXPECT_EQ(q.to_i64_vector(), (std::vector<int64_t>{127, -64, 127, 64}));
  const Tensor s = tensor_from_proto(*initializer(m, "w_scale"), "w_scale", "");
  EXPECT_FLOAT_EQ(static_cast<float>(s.get_f64(1)), 0.25f / 127);
  const auto& dq = m.graph().node(2);
  ASSERT_EQ(dq.attribute_size(), 1);
  EXPECT_EQ(dq.attribute(0).name(), "axis");
  EXPECT_EQ(dq.attribute(0).i(), 0);
  const Tensor xs = tensor_from_proto(*initializer(m, "x_scale"), "x_scale", "");
  EXPECT_EQ(xs.shape(), Shape{});
  EXPECT_FLOAT_EQ(static_cast<float>(xs.get_f64(0)), 0.02f);
  EXPECT_EQ(m.graph().node(3).input(0), "x_dequantized");
  EXPECT_EQ(m.graph().node(3).input(1), "w_dequantized");
  // The written model imports and runs.
  EXPECT_NO_THROW(import_model_bytes(out, "written", ""));
}

TEST(QdqWriter, one_pair_per_activation_for_all_readers_and_float_weights_kept_where_read) {
  ModelBuilder m;
  m.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  m.initializer_f32("w", {1, 1, 1, 1}, {2});
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("Add", {"r", "r"}, {"s"}, "skip");  // reads r before the chosen convs do
  m.node("Conv", {"r", "w"}, {"a"}, "a");
  m.node("Conv", {"r", "w"}, {"b"}, "b");
  m.node("Conv", {"b", "w"}, {"c"}, "c");
  m.output("s", TensorProto::FLOAT, {1, 1, 2, 2});
  m.output("a", TensorProto::FLOAT, {1, 1, 2, 2});
  m.output("c", TensorProto::FLOAT, {1, 1, 2, 2});
  const ::onnx::ModelProto q = parse(write_qdq_model(m.bytes(), {{2, 1.0}, {3, 1.0}}, "m", ""));
  EXPECT_EQ(ops(q), (std::vector<std::string>{"Relu", "QuantizeLinear", "DequantizeLinear", "Add",
                                              "DequantizeLinear", "Conv", "Conv", "Conv"}));
  EXPECT_EQ(q.graph().node(3).input(0), "r_dequantized");  // the Add reads int8 r too
  EXPECT_EQ(q.graph().node(6).input(0), "r_dequantized");
  EXPECT_NE(initializer(q, "w"), nullptr);  // layer c stays float and reads it
  EXPECT_EQ(q.graph().node(7).input(0), "b");
  EXPECT_EQ(q.graph().node(7).input(1), "w");
}

TEST(QdqWriter, a_pre_activation_norm_quantizes_its_input_and_the_concat_before_it) {
  const std::string bytes = testing::dense_block_model().bytes();
  const auto layers = quantizable_layers(bytes, "m");
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].upstream, std::vector<std::string>{});  // x: a graph input
  EXPECT_EQ(layers[1].upstream, std::vector<std::string>{"p"});
  EXPECT_EQ(layers[2].upstream, (std::vector<std::string>{"k", "p", "y1"}));
  EXPECT_EQ(layers[3].upstream, std::vector<std::string>{});  // n3 folds into c2

  const ::onnx::ModelProto q = parse(write_qdq_model(
      bytes,
      {{layers[0].node_index, 1.0, {}},
       {layers[1].node_index, 1.0, {2.0}},
       {layers[2].node_index, 1.0, {3.0, 2.0, 4.0}},
       {layers[3].node_index, 1.0, {}, 5.0}},
      "m", ""));
  // Q/DQ before each quantized value's first reader, which every reader then takes.
  const std::vector<std::string> q_dq{"QuantizeLinear", "DequantizeLinear"};
  std::vector<std::string> want;
  auto add = [&](std::vector<std::string> ops) { want.insert(want.end(), ops.begin(), ops.end()); };
  add(q_dq);  // x
  add({"DequantizeLinear", "Conv", "Relu"});
  add(q_dq);  // p, before n1
  add({"BatchNormalization", "Relu"});
  add(q_dq);  // a1
  add({"DequantizeLinear", "Conv"});
  add(q_dq);  // y1, before the concat
  add({"Concat"});
  add(q_dq);  // k, before the Mul
  add({"Mul", "Add", "Relu"});
  add(q_dq);  // a2
  add({"DequantizeLinear", "Conv", "BatchNormalization", "Relu"});
  add(q_dq);  // a3
  add({"DequantizeLinear", "Conv"});
  add(q_dq);  // c3's output, before the concat
  add({"Concat"});
  add(q_dq);  // f: a concat of quantized values and c3's output, to the largest threshold
  add({"Relu"});
  EXPECT_EQ(ops(q), want);
  const std::map<std::string, std::vector<std::string>> reads{
      {"n1", {"p_dequantized"}},
      {"cat", {"p_dequantized", "y1_dequantized"}},
      {"scale", {"k_dequantized"}},
      {"n3", {"y2"}},  // float: the norm folds into c2
      {"tail", {"p_dequantized", "y1_dequantized", "out_dequantized"}},
      {"tail_relu", {"f_dequantized"}}};
  for (const auto& n : q.graph().node()) {
    auto it = reads.find(n.name());
    if (it == reads.end()) continue;
    for (size_t k = 0; k < it->second.size(); ++k) EXPECT_EQ(n.input(static_cast<int>(k)), it->second[k]) << n.name();
  }
  // Each value's scale is its own threshold over 127.
  for (const auto& [v, amax] : std::vector<std::pair<std::string, double>>{
           {"p", 2.0}, {"k", 3.0}, {"y1", 4.0}, {"out", 5.0}, {"f", 5.0}}) {
    const Tensor scale = tensor_from_proto(*initializer(q, v + "_scale"), v, "");
    EXPECT_FLOAT_EQ(static_cast<float>(scale.get_f64(0)), static_cast<float>(amax / 127)) << v;
  }
  EXPECT_NO_THROW(import_model_bytes(q.SerializeAsString(), "written", ""));
  EXPECT_EQ(quantized_values(q.SerializeAsString(), "written"),
            (std::vector<std::string>{"x", "p", "a1", "y1", "k", "a2", "a3", "out", "f"}));
  // Without thresholds for them, the upstream values stay float; without c3's output
  // threshold, so do c3's output and the tail concat.
  const ::onnx::ModelProto plain = parse(write_qdq_model(bytes, {{layers[2].node_index, 1.0}}, "m", ""));
  EXPECT_EQ(initializer(plain, "k_scale"), nullptr);
  EXPECT_NE(initializer(plain, "a2_scale"), nullptr);
  std::vector<QdqLayer> no_output{{layers[1].node_index, 1.0, {2.0}}, {layers[3].node_index, 1.0, {}}};
  const ::onnx::ModelProto partial = parse(write_qdq_model(bytes, no_output, "m", ""));
  EXPECT_NE(initializer(partial, "p_scale"), nullptr);
  EXPECT_EQ(initializer(partial, "out_scale"), nullptr);
  EXPECT_EQ(initializer(partial, "f_scale"), nullptr);
}

TEST(QdqWriter, weights_are_per_tensor_before_opset_13) {
  const ::onnx::ModelProto m = parse(write_qdq_model(conv_model(12).bytes(), {{0, 1.0}}, "m", ""));
  const auto& dq = m.graph().node(2);
  EXPECT_EQ(dq.attribute_size(), 0);
  const Tensor s = tensor_from_proto(*initializer(m, "w_scale"), "w_scale", "");
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_FLOAT_EQ(static_cast<float>(s.get_f64(0)), 1.0f / 127);
}

TEST(QdqWriter, refuses_opsets_without_quantize_linear) {
  try {
    write_qdq_model(conv_model(9).bytes(), {{0, 1.0}}, "m.onnx", "");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "m.onnx: quantizing needs opset 10 or newer (the first with "
                 "QuantizeLinear); the model has opset 9");
  }
  EXPECT_THROW(quantizable_layers("not a model", "junk"), UserError);
}

}  // namespace
}  // namespace tessel::onnx
