// What the GPU pipeline makes of `tessel quantize`'s QDQ placement around a pre-activation
// norm and a concat (frontend/onnx/qdq_writer.h): int8 from conv to conv, the norms one
// kernel each from int8 to int8, the concat an int8 buffer its producers store into.
#include <gtest/gtest.h>

#include <map>

#include "frontend/onnx/dense_block_model.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/qdq_writer.h"
#include "ir/printer.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

const ir::Node& node_named(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

// The model of onnx::testing::dense_block_model with every layer and its upstream values
// quantized, and their outputs calibrated (thresholds near the values' ranges on inputs in
// [-1, 1)); `upstream` false: the layers' inputs alone.
ir::Graph quantized_dense_block(bool upstream) {
  const std::string bytes = onnx::testing::dense_block_model().bytes();
  std::vector<onnx::QdqLayer> chosen;
  for (const onnx::QuantizableLayer& l : onnx::quantizable_layers(bytes, "m"))
    chosen.push_back({l.node_index, 2.0,
                      upstream ? std::vector<double>(l.upstream.size(), 2.0) : std::vector<double>{},
                      upstream ? 2.0 : 0.0});
  return onnx::import_model_bytes(onnx::write_qdq_model(bytes, chosen, "m", ""), "m", "");
}

TEST(QuantizedDenseBlock, RunsOnIntegersFromConvToConv) {
  const ir::Graph in = quantized_dense_block(true);
  for (const Precision precision : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precision == Precision::kFp32 ? "fp32" : "fp16");
    const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({.precision = precision}));
    std::map<std::string, int> ops;
    for (const ir::Node& n : out.nodes) ++ops[n.op];
    // Four convs, the two norms and the tail's dequantization (1x1 depthwise convs of the
    // integers), the two concats, the graph input's QuantizeLinear (in fp32 its
    // DequantizeLinear too: the stem reads the int8 input itself in fp16 only): no float Mul,
    // Add, Relu or QuantizeLinear between the convs.
    EXPECT_EQ(ops["tessel.Conv"], 7) << ir::print_graph(out);
    EXPECT_EQ(ops["Concat"], 2);
    EXPECT_EQ(ops["QuantizeLinear"], 1);
    EXPECT_EQ(ops["DequantizeLinear"], precision == Precision::kFp32 ? 1 : 0);
    for (const char* op : {"Mul", "Add", "Relu", "BatchNormalization"}) EXPECT_EQ(ops[op], 0) << op;
    for (const char* name : {"c0", "n1", "c1", "cat", "shift", "c2", "c3", "tail"})
      EXPECT_EQ(out.type(node_named(out, name).outputs[0]).dtype, DType::kI8) << name;
    // The concats of c0's, c1's (and c3's) integers, stored in place, one the prefix of the
    // other; the norm after the first requantizes them to its input's scale as it reads them.
    const ir::Node& cat = node_named(out, "cat");
    const ir::Node& tail = node_named(out, "tail");
    EXPECT_EQ(cat.inputs[0], node_named(out, "c0").outputs[0]);
    EXPECT_EQ(cat.inputs[1], node_named(out, "c1").outputs[0]);
    EXPECT_EQ(tail.inputs.back(), node_named(out, "c3").outputs[0]);
    EXPECT_FALSE(cat.get_ints("in_place", {}).empty()) << ir::print_graph(out);
    EXPECT_FALSE(tail.get_ints("in_place", {}).empty());
    const ir::Node& norm = node_named(out, "shift");
    EXPECT_EQ(norm.inputs[0], cat.outputs[0]);
    EXPECT_EQ(norm.get_string("prologue", ""), "requantize");
    // The QDQ model's numbers: each output is the Relu of an int8 value of f (scale 2/127),
    // which fp32 rounding before its quantization may move one step.
    testing::expect_same_numerics(in, out, 0.0, 2.0 / 127 + 1e-6);
  }
}

// Without the upstream values (the layers' inputs alone quantized), the norms and the
// concat stay float kernels: what the placement above removes.
TEST(QuantizedDenseBlock, InputsAloneLeaveTheNormsAndConcatFloat) {
  const ir::Graph out = passes::run_passes(quantized_dense_block(false), passes::gpu_pipeline({}));
  std::map<std::string, int> ops;
  for (const ir::Node& n : out.nodes) ++ops[n.op];
  EXPECT_EQ(ops["QuantizeLinear"], 3) << ir::print_graph(out);
  EXPECT_NE(out.type(node_named(out, "cat").outputs[0]).dtype, DType::kI8);
}

}  // namespace
}  // namespace tessel
