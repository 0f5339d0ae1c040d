// Op forms of opsets 1-6 (opset_conversion_pre7.cc) and what the importer makes of them, checked
// as in opset_conversion_test.cc: the old model imports as the same graph as one written in the
// form it converts to, both compute the same outputs, and those are the ones the old opset
// defines (worked out by hand). Forms that cannot be converted are refused with one line.
#include <gtest/gtest.h>

#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/opset_conversion_util.h"
#include "runtime/cpu/executor.h"

namespace tessel::onnx::testing {
namespace {

// ---- Legacy broadcasting ---------------------------------------------------------------------

// Add-6 with broadcast = 1, axis = 1: B of shape [3] runs along A's dim 1 of [2, 3, 2]. In
// opset 7, B becomes [3, 1].
TEST(OpsetConversionPre7, BroadcastFromAnAxisReshapesAConstant) {
  ModelBuilder old_form(6);
  old_form.input("a", TensorProto::FLOAT, {2, 3, 2});
  old_form.initializer_f32("b", {3}, {10, 20, 30});
  auto* add = old_form.node("Add", {"a", "b"}, {"y"}, "add");
  set_int(add, "broadcast", 1);
  set_int(add, "axis", 1);
  old_form.output("y");

  ModelBuilder new_form(7);
  new_form.input("a", TensorProto::FLOAT, {2, 3, 2});
  new_form.initializer_f32("b", {3, 1}, {10, 20, 30});
  new_form.node("Add", {"a", "b"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({2, 3, 2})});
  EXPECT_EQ(y[0].to_f32_vector(),
            (std::vector<float>{11, 12, 23, 24, 35, 36, 17, 18, 29, 30, 41, 42}));
}

// A computed B gets an Unsqueeze; A computed too, so its rank comes from inferring the nodes
// before the Mul. Trailing alignment (no axis) and broadcast = 0 only drop the attributes.
TEST(OpsetConversionPre7, BroadcastFromAnAxisUnsqueezesAComputedOperand) {
  ModelBuilder old_form(6);
  old_form.input("x", TensorProto::FLOAT, {1, 2, 2, 2});
  old_form.input("s", TensorProto::FLOAT, {2});
  old_form.input("t", TensorProto::FLOAT, {2, 2});
  old_form.node("Relu", {"x"}, {"a"}, "relu_a");
  old_form.node("Relu", {"s"}, {"b"}, "relu_b");
  auto* mul = old_form.node("Mul", {"a", "b"}, {"m"}, "mul");
  set_int(mul, "broadcast", 1);
  set_int(mul, "axis", 1);
  set_int(old_form.node("Sub", {"m", "t"}, {"d"}, "sub"), "broadcast", 1);
  set_int(old_form.node("Div", {"d", "d"}, {"y"}, "div"), "broadcast", 0);
  old_form.output("y");
  old_form.output("d");

  ModelBuilder new_form(7);
  new_form.input("x", TensorProto::FLOAT, {1, 2, 2, 2});
  new_form.input("s", TensorProto::FLOAT, {2});
  new_form.input("t", TensorProto::FLOAT, {2, 2});
  new_form.node("Relu", {"x"}, {"a"});
  new_form.node("Relu", {"s"}, {"b"});
  set_ints(new_form.node("Unsqueeze", {"b"}, {"b2"}), "axes", {1, 2});
  new_form.node("Mul", {"a", "b2"}, {"m"});
  new_form.node("Sub", {"m", "t"}, {"d"});
  new_form.node("Div", {"d", "d"}, {"y"});
  new_form.output("y");
  new_form.output("d");

  const Tensor s = Tensor::from_vector<float>({2}, {2, 3});
  const Tensor t = Tensor::from_vector<float>({2, 2}, {1, 0, 0, 1});
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 2, 2, 2}), s, t});
  // Channel 0 times 2, channel 1 times 3, minus t per (H, W).
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{1, 4, 6, 7, 14, 18, 21, 23}));
}

// A B of one element needs no alignment, whatever the axis says.
TEST(OpsetConversionPre7, BroadcastOfOneElementFromAnyAxis) {
  ModelBuilder old_form(6);
  old_form.input("a", TensorProto::FLOAT, {2, 3});
  old_form.initializer_f32("b", {1, 1}, {10});
  auto* add = old_form.node("Add", {"a", "b"}, {"y"}, "add");
  set_int(add, "broadcast", 1);
  set_int(add, "axis", 1);
  old_form.output("y");

  ModelBuilder new_form(7);
  new_form.input("a", TensorProto::FLOAT, {2, 3});
  new_form.initializer_f32("b", {1, 1}, {10});
  new_form.node("Add", {"a", "b"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({2, 3})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{11, 12, 13, 14, 15, 16}));
}

TEST(OpsetConversionPre7, BroadcastPastTheLastAxisIsRefused) {
  ModelBuilder m(6);
  m.input("a", TensorProto::FLOAT, {2, 3, 4});
  m.initializer_f32("b", {3, 4}, std::vector<float>(12, 1));
  auto* add = m.node("Add", {"a", "b"}, {"y"}, "add");
  set_int(add, "broadcast", 1);
  set_int(add, "axis", 2);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Add 'add' (opset 6): B of shape [3,4] cannot broadcast from axis 2 of A of "
            "shape [2,3,4]");
}

// ---- PRelu -----------------------------------------------------------------------------------

// A slope of C values is per channel before opset 7: [2] becomes [2, 1, 1]. One value stays.
TEST(OpsetConversionPre7, PReluSlopeIsPerChannel) {
  ModelBuilder old_form(6);
  old_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
  old_form.initializer_f32("slope", {2}, {0.5, 0.25});
  old_form.initializer_f32("one", {1}, {0.125});
  old_form.node("PRelu", {"x", "slope"}, {"p"}, "prelu");
  old_form.node("PRelu", {"p", "one"}, {"y"}, "prelu_one");
  old_form.output("y");

  ModelBuilder new_form(7);
  new_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
  new_form.initializer_f32("slope", {2, 1, 1}, {0.5, 0.25});
  new_form.initializer_f32("one", {1}, {0.125});
  new_form.node("PRelu", {"x", "slope"}, {"p"});
  new_form.node("PRelu", {"p", "one"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y =
      expect_converts_to(old_form, new_form, {iota_f32({1, 2, 1, 2}, /*start=*/-2)});
  // x = -2, -1 | 0, 1: channel 0 by 0.5 then 0.125; channel 1 unchanged (not negative).
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{-0.125, -0.0625, 0, 1}));
}

// A rewrite that reads an input's type names the input that is missing.
TEST(OpsetConversionPre7, AnOmittedInputIsRefused) {
  ModelBuilder m(6);
  m.input("x", TensorProto::FLOAT, {1, 2, 3, 3});
  m.node("PRelu", {"x", ""}, {"y"}, "prelu");
  m.output("y");
  EXPECT_EQ(import_error(m), "m.onnx: PRelu 'prelu' (opset 6): input 1 is missing");
}

TEST(OpsetConversionPre7, PReluSlopeOfAnotherLengthIsRefused) {
  ModelBuilder m(6);
  m.input("x", TensorProto::FLOAT, {1, 2, 3, 3});
  m.initializer_f32("slope", {3}, {1, 2, 3});
  m.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: PRelu 'prelu' (opset 6): slope of shape [3] is neither one value nor one per "
            "channel of X of shape [1,2,3,3]");
}

// ---- Attributes that became inputs, renamed or changed ---------------------------------------

// Reshape-1's shape attribute; Concat-1's default axis 1; consumed_inputs dropped.
TEST(OpsetConversionPre7, ReshapeShapeAndConcatAxis) {
  ModelBuilder old_form(3);
  old_form.input("a", TensorProto::FLOAT, {2, 3});
  old_form.input("b", TensorProto::FLOAT, {1, 3});
  auto* reshape = old_form.node("Reshape", {"a"}, {"r"}, "reshape");
  set_ints(reshape, "shape", {3, 2});
  set_ints(reshape, "consumed_inputs", {1});
  set_ints(old_form.node("Reshape", {"b"}, {"rb"}, "reshape_b"), "shape", {3, 1});
  old_form.node("Concat", {"r", "rb"}, {"y"}, "concat");
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("a", TensorProto::FLOAT, {2, 3});
  new_form.input("b", TensorProto::FLOAT, {1, 3});
  initializer_i64(new_form, "shape", {3, 2});
  initializer_i64(new_form, "shape_b", {3, 1});
  new_form.node("Reshape", {"a", "shape"}, {"r"});
  new_form.node("Reshape", {"b", "shape_b"}, {"rb"});
  set_int(new_form.node("Concat", {"r", "rb"}, {"y"}), "axis", 1);
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(
      old_form, new_form, {iota_f32({2, 3}), Tensor::from_vector<float>({1, 3}, {7, 8, 9})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 2, 7, 3, 4, 8, 5, 6, 9}));
}

TEST(OpsetConversionPre7, ReshapeWithoutShapeIsRefused) {
  ModelBuilder m(4);
  m.input("a", TensorProto::FLOAT, {2, 3});
  m.node("Reshape", {"a"}, {"y"}, "reshape");
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Reshape 'reshape' (opset 4): expected one input and the 'shape' attribute "
            "(before opset 5 the shape is an attribute)");
}

// Upsample-1: height_scale and width_scale of an NCHW tensor, 'bilinear' for linear.
TEST(OpsetConversionPre7, Upsample1ScaleAttributes) {
  ModelBuilder old_form(6);
  old_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  auto* up = old_form.node("Upsample", {"x"}, {"y"}, "up");
  set_float(up, "height_scale", 2);
  set_float(up, "width_scale", 3);
  set_string(up, "mode", "bilinear");
  old_form.output("y");

  ModelBuilder new_form(7);
  new_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  auto* up7 = new_form.node("Upsample", {"x"}, {"y"});
  set_floats(up7, "scales", {1, 1, 2, 3});
  set_string(up7, "mode", "linear");
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 2})});
  EXPECT_EQ(y[0].type_str(), "f32[1,1,4,6]");
}

TEST(OpsetConversionPre7, Upsample1WithoutItsScalesIsRefused) {
  ModelBuilder m(6);
  m.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  set_float(m.node("Upsample", {"x"}, {"y"}, "up"), "height_scale", 2);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Upsample 'up' (opset 6): needs the 'height_scale' and 'width_scale' "
            "attributes (required before opset 7)");
  set_float(m.graph().mutable_node(0), "width_scale", 2);
  set_string(m.graph().mutable_node(0), "mode", "cubic");
  EXPECT_EQ(import_error(m),
            "m.onnx: Upsample 'up' (opset 6): mode 'cubic' is not one of Upsample-1's (nearest, "
            "bilinear)");
}

// Pad-1's paddings are Pad-2's pads; Split-1's lengths as an input are Split-2's attribute.
TEST(OpsetConversionPre7, Pad1PaddingsAndSplit1Lengths) {
  ModelBuilder old_form(1);
  old_form.input("x", TensorProto::FLOAT, {1, 3});
  auto* pad = old_form.node("Pad", {"x"}, {"p"}, "pad");
  set_ints(pad, "paddings", {0, 1, 0, 2});
  set_float(pad, "value", 5);
  initializer_i64(old_form, "lengths", {2, 4});
  set_int(old_form.node("Split", {"p", "lengths"}, {"y", "z"}, "split"), "axis", 1);
  old_form.output("y");
  old_form.output("z");

  ModelBuilder new_form(2);
  new_form.input("x", TensorProto::FLOAT, {1, 3});
  auto* pad2 = new_form.node("Pad", {"x"}, {"p"});
  set_ints(pad2, "pads", {0, 1, 0, 2});
  set_float(pad2, "value", 5);
  auto* split2 = new_form.node("Split", {"p"}, {"y", "z"});
  set_int(split2, "axis", 1);
  set_ints(split2, "split", {2, 4});
  new_form.output("y");
  new_form.output("z");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 3})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{5, 1}));
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{2, 3, 5, 5}));
}

TEST(OpsetConversionPre7, Split1WithoutAnAxisIsRefused) {
  ModelBuilder m(1);
  m.input("x", TensorProto::FLOAT, {2, 2});
  m.node("Split", {"x"}, {"y", "z"}, "split");
  m.output("y");
  m.output("z");
  EXPECT_EQ(import_error(m),
            "m.onnx: Split 'split' (opset 1): Split-1 has no 'axis'; its default is undefined "
            "(Split-2 made it 0), so tessel does not guess it");
}

// Cast-1 names its target type.
TEST(OpsetConversionPre7, Cast1TypeName) {
  ModelBuilder old_form(5);
  old_form.input("x", TensorProto::FLOAT, {3});
  set_string(old_form.node("Cast", {"x"}, {"y"}, "cast"), "to", "int32");
  old_form.output("y");

  ModelBuilder new_form(6);
  new_form.input("x", TensorProto::FLOAT, {3});
  set_int(new_form.node("Cast", {"x"}, {"y"}), "to", TensorProto::INT32);
  new_form.output("y");

  std::vector<Tensor> y =
      expect_converts_to(old_form, new_form, {Tensor::from_vector<float>({3}, {1.5, -2.5, 7})});
  EXPECT_EQ(y[0].type_str(), "i32[3]");

  ModelBuilder bad(5);
  bad.input("x", TensorProto::FLOAT, {3});
  set_string(bad.node("Cast", {"x"}, {"y"}, "cast"), "to", "REAL");
  bad.output("y");
  EXPECT_EQ(import_error(bad),
            "m.onnx: Cast 'cast' (opset 5): 'to' is 'REAL', which is not an ONNX element type");
}

// Tile-1 repeats along one axis, given as inputs.
TEST(OpsetConversionPre7, Tile1TilesAndAxis) {
  ModelBuilder old_form(5);
  old_form.input("x", TensorProto::FLOAT, {2, 2});
  initializer_i64(old_form, "tiles", {3});
  initializer_i64(old_form, "axis", {1});
  old_form.node("Tile", {"x", "tiles", "axis"}, {"y"}, "tile");
  old_form.output("y");

  ModelBuilder new_form(6);
  new_form.input("x", TensorProto::FLOAT, {2, 2});
  initializer_i64(new_form, "repeats", {1, 3});
  new_form.node("Tile", {"x", "repeats"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({2, 2})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));

  ModelBuilder fed(5);
  fed.input("x", TensorProto::FLOAT, {2, 2});
  fed.input("tiles", TensorProto::INT64, {1});
  initializer_i64(fed, "axis", {1});
  fed.node("Tile", {"x", "tiles", "axis"}, {"y"}, "tile");
  fed.output("y");
  EXPECT_EQ(import_error(fed),
            "m.onnx: Tile 'tile' (opset 5): input 'tiles' must be a constant (tessel needs it to "
            "convert the node to its opset-7 form)");
}

// Selu-1's defaults differ from Selu-6's. tessel has no Selu: a registry of one shows the node.
TEST(OpsetConversionPre7, Selu1Defaults) {
  ir::OpRegistry registry;
  ir::OpSchema selu;
  selu.name = "Selu";
  selu.infer = [](ir::InferContext& c) { c.set_output(0, c.dtype(0), c.shape(0)); };
  selu.compute = [](ir::KernelContext& c) { c.output(0) = c.input(0).clone(); };
  registry.add(selu);
  ImportOptions options;
  options.registry = &registry;
  for (int64_t opset : {5, 6}) {
    ModelBuilder m(opset);
    m.input("x", TensorProto::FLOAT, {2});
    set_float(m.node("Selu", {"x"}, {"s"}, "selu"), "gamma", 2);
    m.node("Selu", {"s"}, {"y"}, "selu_default");
    m.output("y");
    const ir::Graph g = import_model_bytes(m.bytes(), "m.onnx", "", options);
    EXPECT_EQ(g.nodes[0].get_float("gamma", 0), 2.0);
    EXPECT_EQ(g.nodes[0].has_attr("alpha"), opset == 5);
    EXPECT_EQ(g.nodes[1].has_attr("alpha"), opset == 5);
    if (opset == 5) {
      EXPECT_EQ(g.nodes[1].get_float("alpha", 0), static_cast<double>(1.6732f));
      EXPECT_EQ(g.nodes[1].get_float("gamma", 0), static_cast<double>(1.0507f));
    }
  }
}

// ---- Test mode and the rules of opsets 7-10 from opset 1 on ----------------------------------

// BatchNormalization-5 with consumed_inputs, is_test and spatial; Clip-6's bounds; Slice-1's
// attributes; Gemm-6's broadcast.
TEST(OpsetConversionPre7, OlderFormsOfTheOpset7Conversions) {
  auto common = [](ModelBuilder& m) {
    m.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
    const char* names[] = {"scale", "B", "mean", "var"};
    const std::vector<std::vector<float>> params = {{1, 2}, {0.5, -1}, {0.25, 3}, {4, 1}};
    for (size_t i = 0; i < 4; ++i) m.initializer_f32(names[i], {2}, params[i]);
    m.initializer_f32("w", {2, 2}, {1, 2, 3, 4});
    m.initializer_f32("c", {2}, {10, 20});
  };
  ModelBuilder old_form(5);
  common(old_form);
  auto* bn = old_form.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"n"}, "bn");
  set_ints(bn, "consumed_inputs", {0, 0, 0, 1, 1});
  set_int(bn, "is_test", 1);
  set_int(bn, "spatial", 1);
  set_float(bn, "epsilon", 0);
  auto* clip = old_form.node("Clip", {"n"}, {"k"}, "clip");
  set_float(clip, "min", -0.5);
  set_float(clip, "max", 1.25);
  auto* slice = old_form.node("Slice", {"k"}, {"s"}, "slice");
  set_ints(slice, "starts", {0, 0});
  set_ints(slice, "ends", {2, 1});
  set_ints(slice, "axes", {1, 3});
  auto* flat = old_form.node("Flatten", {"s"}, {"f"}, "flatten");
  set_int(flat, "axis", 1);
  set_int(old_form.node("Gemm", {"f", "w", "c"}, {"y"}, "gemm"), "broadcast", 1);
  old_form.output("y");

  ModelBuilder new_form(11);
  common(new_form);
  set_float(new_form.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"n"}),
            "epsilon", 0);
  initializer_scalar(new_form, "lo", TensorProto::FLOAT, -0.5);
  initializer_scalar(new_form, "hi", TensorProto::FLOAT, 1.25);
  new_form.node("Clip", {"n", "lo", "hi"}, {"k"});
  initializer_i64(new_form, "starts", {0, 0});
  initializer_i64(new_form, "ends", {2, 1});
  initializer_i64(new_form, "axes", {1, 3});
  new_form.node("Slice", {"k", "starts", "ends", "axes"}, {"s"});
  set_int(new_form.node("Flatten", {"s"}, {"f"}), "axis", 1);
  new_form.node("Gemm", {"f", "w", "c"}, {"y"});
  new_form.output("y");

  // BN: [0.875, 1.375 | -1, 1]; clipped: [0.875, 1.25 | -0.5, 1]; sliced: [0.875, -0.5];
  // times w = [[1, 2], [3, 4]], plus c.
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 2, 1, 2})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{9.375, 19.75}));
}

TEST(OpsetConversionPre7, TrainingModeIsRefused) {
  ModelBuilder bn(6);
  bn.input("x", TensorProto::FLOAT, {1, 2, 1, 1});
  for (const char* p : {"scale", "B", "mean", "var"}) bn.initializer_f32(p, {2}, {1, 1});
  set_int(bn.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn"), "is_test",
          0);
  bn.output("y");
  EXPECT_EQ(import_error(bn),
            "m.onnx: BatchNormalization 'bn' (opset 6): is_test = 0 asks for training mode; "
            "tessel runs inference (export the model in eval mode)");

  ModelBuilder drop(6);
  drop.input("x", TensorProto::FLOAT, {2});
  set_int(drop.node("Dropout", {"x"}, {"y"}, "drop"), "is_test", 0);
  drop.output("y");
  EXPECT_EQ(import_error(drop),
            "m.onnx: Dropout 'drop' (opset 6): is_test = 0 asks for training mode; tessel runs "
            "inference (export the model in eval mode)");
}

}  // namespace
}  // namespace tessel::onnx::testing
