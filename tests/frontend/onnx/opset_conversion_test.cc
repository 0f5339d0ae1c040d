// Op forms of opsets 7-10 and 19-22 and what the importer makes of them. Each conversion is
// checked twice: the old model imports as the same graph as a model written in the current
// form (ir::structural_diff), both compute the same outputs on the CPU executor, and those
// outputs are the ones the old opset defines (worked out by hand below). Forms that cannot be
// converted must be refused with one line naming the node, the op, the opset and why.
#include "frontend/onnx/opset_conversion.h"

#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/model_builder.h"
#include "frontend/onnx/opset_conversion_util.h"
#include "ir/printer.h"
#include "runtime/cpu/executor.h"

namespace tessel::onnx::testing {
namespace {

using ::onnx::AttributeProto;
using ::onnx::NodeProto;

TEST(OpsetConversion, ConvertedOpset) {
  EXPECT_EQ(converted_opset(7), 11);
  EXPECT_EQ(converted_opset(10), 11);
  EXPECT_EQ(converted_opset(11), 11);
  EXPECT_EQ(converted_opset(22), 22);
}

// ---- Upsample and Resize-10 -> Resize-11 -----------------------------------------------------

TEST(OpsetConversion, Upsample7NearestBecomesResizeRoundingDown) {
  ModelBuilder old_form(7);
  old_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  auto* up = old_form.node("Upsample", {"x"}, {"y"}, "up");
  set_string(up, "mode", "nearest");
  set_floats(up, "scales", {1, 1, 2, 3});
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  empty_roi(new_form);
  new_form.initializer_f32("scales", {4}, {1, 1, 2, 3});
  auto* resize = new_form.node("Resize", {"x", "roi", "scales"}, {"y"});
  set_string(resize, "mode", "nearest");
  set_string(resize, "coordinate_transformation_mode", "asymmetric");
  set_string(resize, "nearest_mode", "floor");
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 2})});
  EXPECT_EQ(y[0].type_str(), "f32[1,1,4,6]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,  //
                                                      3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
  EXPECT_EQ(import(old_form).opset, 11);
}

TEST(OpsetConversion, Upsample9LinearBecomesAsymmetricLinearResize) {
  ModelBuilder old_form(9);
  old_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  old_form.initializer_f32("scales", {4}, {1, 1, 2, 2});
  set_string(old_form.node("Upsample", {"x", "scales"}, {"y"}, "up"), "mode", "linear");
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  new_form.initializer_f32("scales", {4}, {1, 1, 2, 2});
  empty_roi(new_form);
  auto* resize = new_form.node("Resize", {"x", "roi", "scales"}, {"y"});
  set_string(resize, "mode", "linear");
  set_string(resize, "coordinate_transformation_mode", "asymmetric");
  new_form.output("y");

  // x_in = x_out / 2, clamped at the last pixel.
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 2})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 1.5, 2, 2, 2, 2.5, 3, 3,  //
                                                      3, 3.5, 4, 4, 3, 3.5, 4, 4}));
}

// ONNX's opset-10 test test_resize_downsample_nearest: [[1,2,3,4],[5,6,7,8]] scaled by 0.6
// gives [[1,3]], rounding up along the shrinking axes.
TEST(OpsetConversion, Resize10ShrinkingRoundsUp) {
  ModelBuilder old_form(10);
  old_form.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  old_form.initializer_f32("scales", {4}, {1, 1, 0.6f, 0.6f});
  old_form.node("Resize", {"x", "scales"}, {"y"}, "down");
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  new_form.initializer_f32("scales", {4}, {1, 1, 0.6f, 0.6f});
  empty_roi(new_form);
  auto* resize = new_form.node("Resize", {"x", "roi", "scales"}, {"y"});
  set_string(resize, "coordinate_transformation_mode", "asymmetric");
  set_string(resize, "nearest_mode", "ceil");
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 4})});
  EXPECT_EQ(y[0].type_str(), "f32[1,1,1,2]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 3}));
}

// One axis grows (rounding down), another shrinks (rounding up): one Resize per rounding.
TEST(OpsetConversion, Resize10GrowingAndShrinkingBecomesTwoResizes) {
  ModelBuilder old_form(10);
  old_form.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  old_form.initializer_f32("scales", {4}, {1, 1, 2, 0.6f});
  old_form.node("Resize", {"x", "scales"}, {"y"}, "r");
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  empty_roi(new_form);
  new_form.initializer_f32("grow", {4}, {1, 1, 2, 1});
  new_form.initializer_f32("shrink", {4}, {1, 1, 1, 0.6f});
  auto* grow = new_form.node("Resize", {"x", "roi", "grow"}, {"g"});
  set_string(grow, "coordinate_transformation_mode", "asymmetric");
  set_string(grow, "nearest_mode", "floor");
  auto* shrink = new_form.node("Resize", {"g", "roi", "shrink"}, {"y"});
  set_string(shrink, "coordinate_transformation_mode", "asymmetric");
  set_string(shrink, "nearest_mode", "ceil");
  new_form.output("y");

  // Rows [0, 0, 1, 1] (x / 2 rounded down), columns [0, 2] (x / 0.6 rounded up).
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 4})});
  EXPECT_EQ(y[0].type_str(), "f32[1,1,4,2]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 3, 1, 3, 5, 7, 5, 7}));
}

// Scales that inference computes (here through an Identity) are not known when the nodes are
// rewritten; the rounding is chosen once the shapes are.
TEST(OpsetConversion, Upsample9ComputedScalesRoundDown) {
  auto model = [](int64_t opset) {
    ModelBuilder m(opset);
    m.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
    m.initializer_f32("s", {4}, {1, 1, 1.5f, 1.5f});
    m.node("Identity", {"s"}, {"scales"}, "scales");
    return m;
  };
  ModelBuilder old_form = model(9);
  old_form.node("Upsample", {"x", "scales"}, {"y"}, "up");
  old_form.output("y");

  ModelBuilder new_form = model(11);
  empty_roi(new_form);
  auto* resize = new_form.node("Resize", {"x", "roi", "scales"}, {"y"});
  set_string(resize, "coordinate_transformation_mode", "asymmetric");
  set_string(resize, "nearest_mode", "floor");
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 1, 2, 2})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4}));
}

TEST(OpsetConversion, Resize10ComputedScalesThatShrinkAreRefused) {
  ModelBuilder m(10);
  m.input("x", TensorProto::FLOAT, {1, 1, 2, 4});
  m.initializer_f32("s", {4}, {1, 1, 0.5f, 0.5f});
  m.node("Identity", {"s"}, {"scales"}, "scales");
  m.node("Resize", {"x", "scales"}, {"y"}, "down");
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Resize 'down' (opset 10): an Upsample or Resize before opset 11 that shrinks "
            "[1,1,2,4] to [1,1,1,2] in nearest mode needs constant scales (tessel reads them to "
            "round each axis as opsets 7-10 do)");
}

TEST(OpsetConversion, UpsampleWithoutScalesIsRefused) {
  ModelBuilder m(7);
  m.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  m.node("Upsample", {"x"}, {"y"}, "up");
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Upsample 'up' (opset 7): has no 'scales' attribute (required before opset 9)");

  ModelBuilder both(8);
  both.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  both.initializer_f32("s", {4}, {1, 1, 2, 2});
  set_floats(both.node("Upsample", {"x", "s"}, {"y"}, "up"), "scales", {1, 1, 2, 2});
  both.output("y");
  EXPECT_EQ(import_error(both),
            "m.onnx: Upsample 'up' (opset 8): has 2 inputs, expected 1 (before opset 9 the scales "
            "are an attribute)");

  ModelBuilder none(9);
  none.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  none.node("Upsample", {"x"}, {"y"}, "up");
  none.output("y");
  EXPECT_EQ(import_error(none),
            "m.onnx: Upsample 'up' (opset 9): expected 2 inputs (X, scales), got 1");
}

// ---- Pad, Slice and Clip attributes -> inputs ------------------------------------------------

TEST(OpsetConversion, Pad2AttributesBecomeInputs) {
  ModelBuilder old_form(10);
  old_form.input("x", TensorProto::FLOAT, {2, 2});
  auto* pad = old_form.node("Pad", {"x"}, {"y"}, "pad");
  set_ints(pad, "pads", {0, 1, 1, 0});
  set_float(pad, "value", 1.5f);
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {2, 2});
  initializer_i64(new_form, "pads", {0, 1, 1, 0});
  initializer_scalar(new_form, "value", TensorProto::FLOAT, 1.5);
  new_form.node("Pad", {"x", "pads", "value"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({2, 2})});
  EXPECT_EQ(y[0].type_str(), "f32[3,3]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1.5, 1, 2, 1.5, 3, 4, 1.5, 1.5, 1.5}));
}

// The fill value takes the data's type; a zero is the input's default; other modes ignore it.
TEST(OpsetConversion, Pad2ValueIsTypedLikeTheData) {
  ModelBuilder old_form(9);
  old_form.input("x", TensorProto::DOUBLE, {3});
  set_ints(old_form.node("Pad", {"x"}, {"a"}, "a"), "pads", {1, 0});
  auto* b = old_form.node("Pad", {"x"}, {"b"}, "b");
  set_ints(b, "pads", {0, 1});
  set_float(b, "value", -2);
  auto* c = old_form.node("Pad", {"x"}, {"c"}, "c");
  set_ints(c, "pads", {2, 0});
  set_string(c, "mode", "reflect");
  set_float(c, "value", 7);
  for (const char* out : {"a", "b", "c"}) old_form.output(out);

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::DOUBLE, {3});
  initializer_i64(new_form, "pads_a", {1, 0});
  initializer_i64(new_form, "pads_b", {0, 1});
  initializer_scalar(new_form, "value_b", TensorProto::DOUBLE, -2);
  initializer_i64(new_form, "pads_c", {2, 0});
  new_form.node("Pad", {"x", "pads_a"}, {"a"});
  new_form.node("Pad", {"x", "pads_b", "value_b"}, {"b"});
  set_string(new_form.node("Pad", {"x", "pads_c"}, {"c"}), "mode", "reflect");
  for (const char* out : {"a", "b", "c"}) new_form.output(out);

  Tensor x = Tensor::from_vector<double>({3}, {1, 2, 3});
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {x});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{1, 2, 3, -2}));
  EXPECT_EQ(y[2].to_f32_vector(), (std::vector<float>{3, 2, 1, 2, 3}));
}

TEST(OpsetConversion, PadWithoutPadsIsRefused) {
  ModelBuilder m(10);
  m.input("x", TensorProto::FLOAT, {2});
  set_float(m.node("Pad", {"x"}, {"y"}, "pad"), "value", 1);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Pad 'pad' (opset 10): has no 'pads' attribute (required before opset 11)");

  ModelBuilder both(10);
  both.input("x", TensorProto::FLOAT, {2});
  initializer_i64(both, "p", {1, 1});
  set_ints(both.node("Pad", {"x", "p"}, {"y"}, "pad"), "pads", {1, 1});
  both.output("y");
  EXPECT_EQ(import_error(both),
            "m.onnx: Pad 'pad' (opset 10): has 2 inputs, expected 1 (before opset 11 the pads are "
            "an attribute)");
}

TEST(OpsetConversion, Slice1AttributesBecomeInputs) {
  ModelBuilder old_form(9);
  old_form.input("x", TensorProto::FLOAT, {3, 4});
  auto* s = old_form.node("Slice", {"x"}, {"y"}, "s");
  set_ints(s, "starts", {1, -3});
  set_ints(s, "ends", {1000, -1});
  set_ints(s, "axes", {0, 1});
  auto* all = old_form.node("Slice", {"x"}, {"z"}, "all");  // no axes: the leading ones
  set_ints(all, "starts", {2});
  set_ints(all, "ends", {3});
  old_form.output("y");
  old_form.output("z");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {3, 4});
  initializer_i64(new_form, "starts", {1, -3});
  initializer_i64(new_form, "ends", {1000, -1});
  initializer_i64(new_form, "axes", {0, 1});
  initializer_i64(new_form, "starts2", {2});
  initializer_i64(new_form, "ends2", {3});
  new_form.node("Slice", {"x", "starts", "ends", "axes"}, {"y"});
  new_form.node("Slice", {"x", "starts2", "ends2"}, {"z"});
  new_form.output("y");
  new_form.output("z");

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({3, 4}, 0)});
  EXPECT_EQ(y[0].type_str(), "f32[2,2]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{5, 6, 9, 10}));
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(OpsetConversion, SliceOfTheWrongFormIsRefused) {
  ModelBuilder m(9);
  m.input("x", TensorProto::FLOAT, {4});
  set_ints(m.node("Slice", {"x"}, {"y"}, "s"), "ends", {2});
  m.output("y");
  EXPECT_EQ(
      import_error(m),
      "m.onnx: Slice 's' (opset 9): needs the 'starts' and 'ends' attributes (required before "
      "opset 10)");

  ModelBuilder inputs(9);
  inputs.input("x", TensorProto::FLOAT, {4});
  initializer_i64(inputs, "starts", {1});
  initializer_i64(inputs, "ends", {2});
  inputs.node("Slice", {"x", "starts", "ends"}, {"y"}, "s");
  inputs.output("y");
  EXPECT_EQ(import_error(inputs),
            "m.onnx: Slice 's' (opset 9): has 3 inputs, expected 1 (before opset 10 starts, ends "
            "and axes are attributes)");
}

TEST(OpsetConversion, Clip6BoundsBecomeTypedInputs) {
  ModelBuilder old_form(10);
  old_form.input("x", TensorProto::DOUBLE, {4});
  auto* both = old_form.node("Clip", {"x"}, {"a"}, "both");
  set_float(both, "min", -1);
  set_float(both, "max", 1);
  set_float(old_form.node("Clip", {"x"}, {"b"}, "upper"), "max", 0.25f);
  old_form.output("a");
  old_form.output("b");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::DOUBLE, {4});
  initializer_scalar(new_form, "lo", TensorProto::DOUBLE, -1);
  initializer_scalar(new_form, "hi", TensorProto::DOUBLE, 1);
  initializer_scalar(new_form, "hi2", TensorProto::DOUBLE, 0.25);
  new_form.node("Clip", {"x", "lo", "hi"}, {"a"});
  new_form.node("Clip", {"x", "", "hi2"}, {"b"});
  new_form.output("a");
  new_form.output("b");

  Tensor x = Tensor::from_vector<double>({4}, {-2, -0.5, 0.5, 2});
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {x});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{-1, -0.5, 0.5, 1}));
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{-2, -0.5, 0.25, 0.25}));
  const ir::Graph g = import(old_form);
  for (const ir::Node& n : g.nodes) EXPECT_TRUE(n.attrs.empty()) << n.label();
}

TEST(OpsetConversion, ClipWithBoundAttributesAndInputsIsRefused) {
  ModelBuilder m(10);
  m.input("x", TensorProto::FLOAT, {2});
  m.initializer_f32("lo", {}, {0});
  set_float(m.node("Clip", {"x", "lo"}, {"y"}, "clip"), "max", 1);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Clip 'clip' (opset 10): has bound attributes and bound inputs; before opset "
            "11 the bounds are attributes only");
}

// ---- BatchNormalization, Gemm, Dropout, binary ops: removed attributes -----------------------

void add_batch_norm_params(ModelBuilder& m, std::vector<int64_t> dims,
                           const std::vector<std::vector<float>>& values) {
  const char* names[] = {"scale", "B", "mean", "var"};
  for (size_t i = 0; i < 4; ++i) m.initializer_f32(names[i], dims, values[i]);
}

TEST(OpsetConversion, BatchNorm7SpatialAndLeftoversAreDropped) {
  const std::vector<std::vector<float>> params = {{1, 2}, {0.5, -1}, {0.25, 3}, {4, 1}};
  ModelBuilder old_form(7);
  old_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
  add_batch_norm_params(old_form, {2}, params);
  auto* bn = old_form.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn");
  set_int(bn, "spatial", 1);
  set_int(bn, "is_test", 1);
  set_ints(bn, "consumed_inputs", {0, 0, 0, 1, 1});
  set_float(bn, "epsilon", 0);
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
  add_batch_norm_params(new_form, {2}, params);
  set_float(new_form.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}),
            "epsilon", 0);
  new_form.output("y");

  // Channel 0: (x - 0.25) / 2 * 1 + 0.5; channel 1: (x - 3) / 1 * 2 - 1.
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 2, 1, 2})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{0.875, 1.375, -1, 1}));
}

// spatial = 0: one mean, variance, scale and bias per activation (C x H x W).
TEST(OpsetConversion, BatchNorm7PerActivationStatistics) {
  const std::vector<std::vector<float>> params = {
      {1, 2, 3, 4}, {0, 1, 0, -1}, {1, 1, 2, 2}, {1, 4, 0.25, 1}};
  ModelBuilder old_form(8);
  old_form.input("x", TensorProto::FLOAT, {2, 2, 1, 2});
  add_batch_norm_params(old_form, {2, 1, 2}, params);
  auto* bn = old_form.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn");
  set_int(bn, "spatial", 0);
  set_float(bn, "epsilon", 0);
  old_form.output("y");

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {2, 2, 1, 2});
  set_int(new_form.node("Flatten", {"x"}, {"flat_x"}), "axis", 1);
  add_batch_norm_params(new_form, {4}, params);
  new_form.node("Shape", {"x"}, {"x_shape"});
  set_float(
      new_form.node("BatchNormalization", {"flat_x", "scale", "B", "mean", "var"}, {"flat_y"}),
      "epsilon", 0);
  new_form.node("Reshape", {"flat_y", "x_shape"}, {"y"});
  new_form.output("y");

  const Tensor x = iota_f32({2, 2, 1, 2});
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {x});
  ASSERT_EQ(y[0].type_str(), "f32[2,2,1,2]");
  for (int64_t i = 0; i < 8; ++i) {
    const size_t a = static_cast<size_t>(i % 4);  // the activation
    const double want =
        (x.get_f64(i) - params[2][a]) / std::sqrt(params[3][a]) * params[0][a] + params[1][a];
    EXPECT_NEAR(y[0].get_f64(i), want, 1e-6) << i;
  }

  // Statistics that are not constants are flattened by Reshape nodes: same numbers.
  ModelBuilder fed(8);
  fed.input("x", TensorProto::FLOAT, {2, 2, 1, 2});
  for (const char* p : {"scale", "B", "mean", "var"}) fed.input(p, TensorProto::FLOAT, {2, 1, 2});
  auto* fed_bn = fed.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn");
  set_int(fed_bn, "spatial", 0);
  set_float(fed_bn, "epsilon", 0);
  fed.output("y");
  std::vector<Tensor> feed = {x};
  for (const std::vector<float>& p : params)
    feed.push_back(Tensor::from_vector<float>({2, 1, 2}, p));
  const ir::Graph g = import(fed);
  EXPECT_TRUE(bitwise_equal(runtime::cpu::run_graph(g, feed)[0], y[0]));
}

TEST(OpsetConversion, BatchNormSpatialOtherThanZeroOrOneIsRefused) {
  ModelBuilder m(7);
  m.input("x", TensorProto::FLOAT, {1, 2, 1, 1});
  add_batch_norm_params(m, {2}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}});
  set_int(m.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn"), "spatial",
          2);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: BatchNormalization 'bn' (opset 7): spatial is 2, expected 0 or 1");
}

TEST(OpsetConversion, RemovedBroadcastAttributesAreDropped) {
  auto model = [](int64_t opset) {
    ModelBuilder m(opset);
    m.input("a", TensorProto::FLOAT, {2, 3});
    m.initializer_f32("b", {2, 3}, {1, 0, -1, 2, 1, 0});
    m.initializer_f32("c", {2}, {10, 20});
    return m;
  };
  ModelBuilder old_form = model(7);
  auto* gemm = old_form.node("Gemm", {"a", "b", "c"}, {"g"}, "gemm");
  set_int(gemm, "broadcast", 1);
  set_int(gemm, "transB", 1);
  set_int(old_form.node("Add", {"g", "c"}, {"y"}, "add"), "broadcast", 1);
  auto* drop = old_form.node("Dropout", {"y"}, {"z"}, "drop");
  set_int(drop, "is_test", 1);
  set_float(drop, "ratio", 0.25f);
  old_form.output("z");

  ModelBuilder new_form = model(11);
  set_int(new_form.node("Gemm", {"a", "b", "c"}, {"g"}), "transB", 1);
  new_form.node("Add", {"g", "c"}, {"y"});
  set_float(new_form.node("Dropout", {"y"}, {"z"}), "ratio", 0.25f);
  new_form.output("z");

  // a @ b^T = [[-2, 4], [-2, 13]] for a = 1..6, plus c twice.
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({2, 3})});
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{18, 44, 18, 53}));
}

// Dropout-7's mask has the data's type; in inference it is all ones.
TEST(OpsetConversion, Dropout7MaskHasTheDataType) {
  ModelBuilder old_form(7);
  old_form.input("x", TensorProto::FLOAT, {3});
  old_form.node("Dropout", {"x"}, {"y", "mask"}, "drop");
  old_form.output("y");
  old_form.output("mask", TensorProto::FLOAT, {3});

  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {3});
  new_form.node("Dropout", {"x"}, {"y", "bool_mask"});
  set_int(new_form.node("Cast", {"bool_mask"}, {"mask"}), "to", TensorProto::FLOAT);
  new_form.output("y");
  new_form.output("mask", TensorProto::FLOAT, {3});

  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({3})});
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{1, 1, 1}));
}

TEST(OpsetConversion, BroadcastFromAnAxisIsRefused) {
  ModelBuilder m(7);
  m.input("a", TensorProto::FLOAT, {2, 3});
  m.initializer_f32("b", {2}, {1, 2});
  auto* add = m.node("Add", {"a", "b"}, {"y"}, "add");
  set_int(add, "broadcast", 1);
  set_int(add, "axis", 0);
  m.output("y");
  EXPECT_EQ(import_error(m),
            "m.onnx: Add 'add' (opset 7): attribute 'axis' (broadcasting from an axis) was removed "
            "in opset 7, where inputs broadcast as in numpy; re-export the model");
}

// ---- Forms tessel's ops already read at opset 11 ---------------------------------------------

// Softmax before opset 13 normalises X coerced to 2-D at `axis` (default 1): over C*H*W here.
TEST(OpsetConversion, Softmax9KeepsItsCoercionTo2D) {
  ModelBuilder old_form(9);
  old_form.input("x", TensorProto::FLOAT, {2, 2, 3});
  old_form.node("Softmax", {"x"}, {"y"}, "softmax");
  old_form.output("y");
  ModelBuilder new_form(11);
  new_form.input("x", TensorProto::FLOAT, {2, 2, 3});
  new_form.node("Softmax", {"x"}, {"y"});
  new_form.output("y");

  const Tensor x = iota_f32({2, 2, 3}, 0);
  std::vector<Tensor> y = expect_converts_to(old_form, new_form, {x});
  for (int64_t b = 0; b < 2; ++b) {
    double sum = 0;
    for (int64_t i = 0; i < 6; ++i) sum += std::exp(x.get_f64(b * 6 + i));
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_NEAR(y[0].get_f64(b * 6 + i), std::exp(x.get_f64(b * 6 + i)) / sum, 1e-6);
  }
}

// Split's `split`, Squeeze's and Unsqueeze's `axes`, ReduceMean's `axes` are attributes up to
// opset 12 (17 for the reductions), and pools before opset 10 lack dilations and ceil_mode
// (their defaults): all are opset-11 forms already.
TEST(OpsetConversion, AttributeFormsOfOpset11AreKept) {
  auto model = [](int64_t opset) {
    ModelBuilder m(opset);
    m.input("x", TensorProto::FLOAT, {1, 4, 2, 2});
    auto* split = m.node("Split", {"x"}, {"s0", "s1"});
    set_int(split, "axis", 1);
    set_ints(split, "split", {1, 3});
    set_ints(m.node("Squeeze", {"s0"}, {"sq"}), "axes", {1});
    set_ints(m.node("Unsqueeze", {"sq"}, {"u"}), "axes", {0});
    auto* mean = m.node("ReduceMean", {"s1"}, {"r"});
    set_ints(mean, "axes", {1});
    set_int(mean, "keepdims", 0);
    auto* pool = m.node("MaxPool", {"s1"}, {"p"});
    set_ints(pool, "kernel_shape", {2, 2});
    auto* avg = m.node("AveragePool", {"s1"}, {"a"});
    set_ints(avg, "kernel_shape", {2, 1});
    set_ints(avg, "pads", {0, 0, 1, 0});
    set_int(avg, "count_include_pad", 1);
    for (const char* out : {"u", "r", "p", "a"}) m.output(out);
    return m;
  };
  std::vector<Tensor> y = expect_converts_to(model(7), model(11), {iota_f32({1, 4, 2, 2})});
  EXPECT_EQ(y[0].type_str(), "f32[1,1,2,2]");
  EXPECT_EQ(y[0].to_f32_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(y[1].to_f32_vector(), (std::vector<float>{9, 10, 11, 12}));  // mean of channels 1-3
  EXPECT_EQ(y[2].to_f32_vector(), (std::vector<float>{8, 12, 16}));
  EXPECT_EQ(y[3].type_str(), "f32[1,3,2,2]");
}

// A name the conversion would give a new constant is already the model's: it gets a suffix.
TEST(OpsetConversion, NewNamesAvoidTheModels) {
  ModelBuilder m(10);
  m.input("x", TensorProto::FLOAT, {2});
  set_ints(m.node("Pad", {"x"}, {"pad.pads"}, "pad"), "pads", {1, 0});
  m.output("pad.pads");
  const ir::Graph g = import(m);
  const ir::Node& pad = only_node(g, "Pad");
  EXPECT_EQ(g.value(pad.inputs[1]).name, "pad.pads_1");
  EXPECT_EQ(g.value(pad.outputs[0]).name, "pad.pads");
}

// ---- Opsets 19-22 ----------------------------------------------------------------------------

TEST(OpsetConversion, QuantizeLinear21OutputDtypeBecomesAZeroPoint) {
  ModelBuilder old_form(21);
  old_form.input("x", TensorProto::FLOAT, {4});
  old_form.initializer_f32("scale", {}, {0.5f});
  set_int(old_form.node("QuantizeLinear", {"x", "scale"}, {"y"}, "q"), "output_dtype",
          TensorProto::INT8);
  old_form.output("y");

  ModelBuilder new_form(21);
  new_form.input("x", TensorProto::FLOAT, {4});
  new_form.initializer_f32("scale", {}, {0.5f});
  initializer_scalar(new_form, "zp", TensorProto::INT8, 0);
  new_form.node("QuantizeLinear", {"x", "scale", "zp"}, {"y"});
  new_form.output("y");

  std::vector<Tensor> y =
      expect_converts_to(old_form, new_form, {Tensor::from_vector<float>({4}, {-1, 0.2f, 3, -70})});
  EXPECT_EQ(y[0].type_str(), "i8[4]");
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{-2, 0, 6, -128}));
}

TEST(OpsetConversion, QuantizeLinear21OutputDtypeErrors) {
  auto model = [](int output_dtype, bool constant_scale, int zero_point_type) {
    ModelBuilder m(21);
    m.input("x", TensorProto::FLOAT, {4});
    if (constant_scale)
      m.initializer_f32("scale", {}, {0.5f});
    else
      m.input("scale", TensorProto::FLOAT, {});
    std::vector<std::string> inputs = {"x", "scale"};
    if (zero_point_type) {
      initializer_scalar(m, "zp", zero_point_type, 0);
      inputs.push_back("zp");
    }
    set_int(m.node("QuantizeLinear", inputs, {"y"}, "q"), "output_dtype", output_dtype);
    m.output("y");
    return m;
  };
  EXPECT_EQ(import_error(model(TensorProto::UINT16, true, 0)),
            "m.onnx: QuantizeLinear 'q' (opset 21): output_dtype UINT16 is not an element type "
            "tessel supports");
  EXPECT_EQ(import_error(model(TensorProto::INT8, false, 0)),
            "m.onnx: QuantizeLinear 'q' (opset 21): output_dtype i8 without a y_zero_point needs "
            "a constant y_scale (tessel gives the output its type through a zero point of "
            "y_scale's shape)");
  EXPECT_EQ(import_error(model(TensorProto::INT8, true, TensorProto::UINT8)),
            "m.onnx: QuantizeLinear 'q' (opset 21): output_dtype is i8 but y_zero_point is u8; "
            "they must agree");
}

// MaxPool and AveragePool honour opset 22's ceil_mode rule themselves (pool_ops.cc): a last
// window that would start in the end padding is dropped; up to opset 21 it is kept. The model
// keeps its opset and its form.
TEST(OpsetConversion, Pool22DropsAWindowStartingInTheEndPad) {
  auto model = [](int64_t opset, const char* op) {
    ModelBuilder m(opset);
    m.input("x", TensorProto::FLOAT, {1, 1, 1, 4});
    auto* pool = m.node(op, {"x"}, {"y"}, "pool");
    set_ints(pool, "kernel_shape", {1, 2});
    set_ints(pool, "strides", {1, 2});
    set_ints(pool, "pads", {0, 0, 0, 1});
    set_int(pool, "ceil_mode", 1);
    m.output("y");
    return m;
  };
  const Tensor x = iota_f32({1, 1, 1, 4});
  const ir::Graph g21 = import(model(21, "MaxPool"));
  const ir::Graph g22 = import(model(22, "MaxPool"));
  EXPECT_EQ(g22.opset, 22);
  EXPECT_EQ(g22.nodes.at(0).attrs.size(), 4u);
  EXPECT_EQ(runtime::cpu::run_graph(g21, {x})[0].type_str(), "f32[1,1,1,3]");
  EXPECT_EQ(runtime::cpu::run_graph(g22, {x})[0].to_f32_vector(), (std::vector<float>{2, 4}));
  EXPECT_EQ(runtime::cpu::run_graph(import(model(22, "AveragePool")), {x})[0].to_f32_vector(),
            (std::vector<float>{1.5, 3.5}));
}

// Changes after opset 18 that tessel's ops refuse themselves, with one line.
TEST(OpsetConversion, NewerFormsTesselLacksAreRefused) {
  ModelBuilder wrap(19);
  wrap.input("x", TensorProto::FLOAT, {2});
  initializer_i64(wrap, "pads", {1, 1});
  set_string(wrap.node("Pad", {"x", "pads"}, {"y"}, "pad"), "mode", "wrap");
  wrap.output("y");
  EXPECT_EQ(import_error(wrap),
            "m.onnx: Pad 'pad': mode 'wrap' is not supported (constant, reflect, edge)");

  ModelBuilder blocked(21);
  blocked.input("x", TensorProto::INT8, {2, 4});
  TensorProto* scale = blocked.initializer("scale", TensorProto::FLOAT, {2, 2});
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) scale->add_float_data(v);
  auto* dq = blocked.node("DequantizeLinear", {"x", "scale"}, {"y"}, "dq");
  set_int(dq, "axis", 1);
  set_int(dq, "block_size", 2);
  blocked.output("y");
  EXPECT_EQ(import_error(blocked),
            "m.onnx: DequantizeLinear 'dq': blocked quantization (block_size, opset 21) is not "
            "supported");
}

// float8 quantization (opset 19+): a float8 zero point, a QuantizeLinear-21 output_dtype of
// float8, a DequantizeLinear of a float8 input; each refused in one line naming the type.
TEST(OpsetConversion, Float8QuantizationIsRefused) {
  // onnx::TensorProto's codes, spelt out: the onnx headers tessel builds with may predate them.
  constexpr int kFloat8E4M3FN = 17, kFloat8E5M2 = 19;
  ModelBuilder zero_point(19);
  zero_point.input("x", TensorProto::FLOAT, {4});
  zero_point.initializer_f32("scale", {}, {0.5f});
  zero_point.initializer("zp", kFloat8E4M3FN, {})->add_int32_data(0);
  zero_point.node("QuantizeLinear", {"x", "scale", "zp"}, {"y"}, "q");
  zero_point.output("y");
  EXPECT_EQ(import_error(zero_point),
            "m.onnx: initializer 'zp': element type FLOAT8E4M3FN is not supported (tessel supports "
            "FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8, UINT8, INT32, INT64, BOOL)");

  ModelBuilder output_dtype(21);
  output_dtype.input("x", TensorProto::FLOAT, {4});
  output_dtype.initializer_f32("scale", {}, {0.5f});
  set_int(output_dtype.node("QuantizeLinear", {"x", "scale"}, {"y"}, "q"), "output_dtype",
          kFloat8E5M2);
  output_dtype.output("y");
  EXPECT_EQ(import_error(output_dtype),
            "m.onnx: QuantizeLinear 'q' (opset 21): output_dtype FLOAT8E5M2 is not an element type "
            "tessel supports");

  ModelBuilder input(19);
  input.input("x", kFloat8E4M3FN, {4});
  input.initializer_f32("scale", {}, {0.5f});
  input.node("DequantizeLinear", {"x", "scale"}, {"y"}, "dq");
  input.output("y");
  EXPECT_EQ(import_error(input),
            "m.onnx: graph input 'x': element type FLOAT8E4M3FN is not supported (tessel supports "
            "FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8, UINT8, INT32, INT64, BOOL)");
}

// ---- LpNormalization -> ReduceL1 / ReduceL2 and Div ------------------------------------------

// x / ||x|| along the axis: L2 over the channels at opset 13 (axes an attribute), L1 over the
// last axis at opset 18 (axes an input). p = 3 does not exist.
TEST(OpsetConversion, LpNormalizationDividesByTheNorm) {
  for (const int64_t opset : {13, 18}) {
    SCOPED_TRACE(opset);
    const int64_t p = opset == 13 ? 2 : 1, axis = opset == 13 ? 1 : -1;
    ModelBuilder old_form(opset);
    old_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
    NodeProto* lp = old_form.node("LpNormalization", {"x"}, {"y"}, "lp");
    set_int(lp, "p", p);
    set_int(lp, "axis", axis);
    old_form.output("y");

    ModelBuilder new_form(opset);
    new_form.input("x", TensorProto::FLOAT, {1, 2, 1, 2});
    NodeProto* reduce = nullptr;
    if (opset >= 18) {
      new_form.initializer("axes", TensorProto::INT64, {1})->add_int64_data(axis);
      reduce = new_form.node(p == 1 ? "ReduceL1" : "ReduceL2", {"x", "axes"}, {"norm"});
    } else {
      reduce = new_form.node(p == 1 ? "ReduceL1" : "ReduceL2", {"x"}, {"norm"});
      set_ints(reduce, "axes", {axis});
    }
    set_int(reduce, "keepdims", 1);
    new_form.node("Div", {"x", "norm"}, {"y"});
    new_form.output("y");

    // x = [[1, 2]], [[3, 4]] over the channels (one pixel row of two).
    std::vector<Tensor> y = expect_converts_to(old_form, new_form, {iota_f32({1, 2, 1, 2})});
    const std::vector<float> got = y[0].to_f32_vector();
    const std::vector<double> want =
        p == 2 ? std::vector<double>{1 / std::sqrt(10.0), 2 / std::sqrt(20.0), 3 / std::sqrt(10.0),
                                     4 / std::sqrt(20.0)}
               : std::vector<double>{1 / 3.0, 2 / 3.0, 3 / 7.0, 4 / 7.0};
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  }
  ModelBuilder p3(13);
  p3.input("x", TensorProto::FLOAT, {1, 2});
  set_int(p3.node("LpNormalization", {"x"}, {"y"}, "lp"), "p", 3);
  p3.output("y");
  EXPECT_EQ(import_error(p3), "m.onnx: LpNormalization 'lp' (opset 13): p = 3 (1 or 2 expected)");
}

}  // namespace
}  // namespace tessel::onnx::testing
