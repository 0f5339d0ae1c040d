// Tests of the quantized op family. Expected values are hand-computed, taken from ONNX's
// operator documentation, or computed by onnxruntime 1.20 (noted where so).
#include <gtest/gtest.h>

#include <functional>

#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::expect_user_error;
using I64s = std::vector<int64_t>;

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }
Tensor u8(Shape s, std::vector<uint8_t> v) { return Tensor::from_vector<uint8_t>(std::move(s), v); }
Tensor i8(Shape s, std::vector<int8_t> v) { return Tensor::from_vector<int8_t>(std::move(s), v); }
Tensor i32(Shape s, std::vector<int32_t> v) {
  return Tensor::from_vector<int32_t>(std::move(s), v);
}

// Values i * mul % mod - offset in dtype t.
Tensor pattern(DType t, Shape s, int64_t mul, int64_t mod, int64_t offset) {
  Tensor r(t, s);
  for (int64_t i = 0; i < r.numel(); ++i) r.set_i64(i, i * mul % mod - offset);
  return r;
}


// ---- QuantizeLinear -------------------------------------------------------------------------

TEST(QuantizeLinear, f32_to_u8_rounds_ties_to_even_and_saturates) {
  Tensor x = f32({8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300, -300});
  Tensor y = run_op("QuantizeLinear", {x, f32({}, {1}), u8({}, {10})})[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{10, 12, 12, 10, 8, 8, 255, 0}));
}

TEST(QuantizeLinear, f32_to_i8_takes_dtype_from_zero_point) {
  Tensor x = f32({8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300, -300});
  Tensor y = run_op("QuantizeLinear", {x, f32({}, {1}), i8({}, {-3})})[0];
  ASSERT_EQ(y.dtype(), DType::kI8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{-3, -1, -1, -3, -5, -5, 127, -128}));
}

TEST(QuantizeLinear, f32_without_zero_point_is_u8) {
  Tensor y = run_op("QuantizeLinear", {f32({4}, {0.5, 1.5, -1, 200}), f32({}, {0.5})})[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{1, 3, 0, 255}));
}

TEST(QuantizeLinear, f32_quotient_rounds_in_f32_before_the_tie_break) {
  // 0.7f / 0.2f is exactly 3.5 in f32 (ONNX's reference and onnxruntime round it to 4) but
  // 3.4999999 in double.
  Tensor y = run_op("QuantizeLinear", {f32({1}, {0.7f}), f32({}, {0.2f}), u8({}, {0})})[0];
  EXPECT_EQ(y.to_i64_vector(), (I64s{4}));
}

TEST(QuantizeLinear, f32_per_axis_scales_and_zero_points) {
  Tensor x = f32({2, 3}, {4, 4, 4, -8, 8, 8});
  Tensor scale = f32({3}, {1, 2, 4});
  Tensor zp = u8({3}, {0, 10, 20});
  // axis 1 (the default) and its negative spelling.
  for (int64_t axis : {int64_t{1}, int64_t{-1}}) {
    Tensor y = run_op("QuantizeLinear", {x, scale, zp}, {{"axis", axis}})[0];
    EXPECT_EQ(y.to_i64_vector(), (I64s{4, 12, 21, 0, 14, 22})) << axis;
  }
  Tensor y0 =
      run_op("QuantizeLinear", {x, f32({2}, {2, 4}), i8({2}, {1, -1})}, {{"axis", int64_t{0}}})[0];
  EXPECT_EQ(y0.to_i64_vector(), (I64s{3, 3, 3, -3, 1, 1}));
}

TEST(QuantizeLinear, i32_and_f16_inputs) {
  // i32 quotients are exact: -7 / 2 = -3.5 -> -4, 5 / 2 = 2.5 -> 2.
  Tensor x = i32({6}, {-300, -7, 0, 5, 9, 1000});
  EXPECT_EQ(run_op("QuantizeLinear", {x, f32({}, {2}), u8({}, {128})})[0].to_i64_vector(),
            (I64s{0, 124, 128, 130, 132, 255}));
  Tensor h = Tensor::from_doubles(DType::kF16, {3}, {1.5, -2.5, 10});
  EXPECT_EQ(run_op("QuantizeLinear", {h, Tensor::from_doubles(DType::kF16, {}, {0.5}), i8({}, {0})},
                   {}, 1, 19)[0]
                .to_i64_vector(),
            (I64s{3, -5, 20}));
}

TEST(QuantizeLinear, rejects_bad_parameters) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_user_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({3}, {1, 1, 1})}, {}, 1, 11);
      },
      "QuantizeLinear 'node'", "per-axis quantization needs opset 13");
  expect_user_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({2}, {1, 1})});
      },
      "QuantizeLinear 'node'", "expected a scalar or [3]");
  expect_user_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({}, {1}), i32({}, {0})});
      },
      "QuantizeLinear 'node'", "y_zero_point has dtype i32, expected u8 or i8");
  expect_user_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({}, {1}), u8({1, 1}, {0})});
      },
      "QuantizeLinear 'node'", "zero point y_zero_point has shape [1,1]");
  expect_user_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({3}, {1, 1, 1})}, {{"axis", int64_t{2}}});
      },
      "QuantizeLinear 'node'", "axis 2 out of range");
}

TEST(QuantizeLinear, single_values_may_mix_rank_0_and_rank_1) {
  // onnxruntime's quantizer writes a bias's DequantizeLinear at opset 10-12 with a scale of [1]
  // and a zero point of []; both spell one value, and onnxruntime runs it.
  Tensor y = run_op("DequantizeLinear", {i32({2}, {-3, 4}), f32({1}, {0.5}), i32({}, {0})}, {}, 1,
                    11)[0];
  EXPECT_TRUE(all_close(y, f32({2}, {-1.5, 2})));
  Tensor q = run_op("QuantizeLinear", {f32({2}, {1, -1}), f32({}, {0.5}), i8({1}, {1})})[0];
  EXPECT_EQ(q.to_i64_vector(), (I64s{3, -1}));
  // Per-axis scales need per-axis zero points (onnxruntime refuses a scalar one too).
  expect_user_error(
      [&] {
        run_op("DequantizeLinear", {i8({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {1, 1, 1}),
                                    i8({}, {0})});
      },
      "DequantizeLinear 'node'", "zero point x_zero_point has shape [], expected the shape of");
}

// ---- DequantizeLinear -----------------------------------------------------------------------

TEST(DequantizeLinear, u8_per_tensor_and_i32_without_zero_point) {
  Tensor y =
      run_op("DequantizeLinear", {u8({4}, {0, 3, 128, 255}), f32({}, {2}), u8({}, {128})})[0];
  ASSERT_EQ(y.dtype(), DType::kF32);
  EXPECT_TRUE(all_close(y, f32({4}, {-256, -250, 0, 254})));
  EXPECT_TRUE(all_close(run_op("DequantizeLinear", {i32({2}, {-300, 5}), f32({}, {0.5})})[0],
                        f32({2}, {-150, 2.5})));
}

TEST(DequantizeLinear, i8_per_axis_and_f16_scale) {
  Tensor x = i8({2, 2}, {-128, 0, 127, 10});
  Tensor y = run_op("DequantizeLinear", {x, f32({2}, {0.5, 2}), i8({2}, {0, 10})},
                    {{"axis", int64_t{0}}})[0];
  EXPECT_TRUE(all_close(y, f32({2, 2}, {-64, 0, 234, 0})));
  // Opset 19: the output takes the scale's dtype.
  Tensor h =
      run_op("DequantizeLinear", {x, Tensor::from_doubles(DType::kF16, {}, {0.25})}, {}, 1, 19)[0];
  ASSERT_EQ(h.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(h, Tensor::from_doubles(DType::kF16, {2, 2}, {-32, 0, 31.75, 2.5})));
}

TEST(DequantizeLinear, rejects_bad_inputs) {
  expect_user_error(
      [&] {
        run_op("DequantizeLinear", {u8({2}, {1, 2}), f32({}, {1}), i8({}, {0})});
      },
      "DequantizeLinear 'node'", "x_zero_point has dtype i8, expected the dtype of x (u8)");
  expect_user_error(
      [&] {
        run_op("DequantizeLinear", {f32({2}, {1, 2}), f32({}, {1})});
      },
      "DequantizeLinear 'node'", "input x has dtype f32, expected u8, i8 or i32");
  expect_user_error(
      [&] {
        run_op("DequantizeLinear", {u8({2}, {1, 2}), i32({}, {1})});
      },
      "DequantizeLinear 'node'", "input x_scale has dtype i32");
}

// ---- tessel.MulQuantizeLinear and tessel.QLinearReduceMean ----------------------------------

TEST(MulQuantizeLinear, float_operands_and_int8_features) {
  // Float, zero point 1: 0.3 * 2 / 0.1 = 6 (the f32 roundings stay near it) -> 7; -1.25 * 1
  // times 1 / 0.1 (10 in f32) = -12.5 -> -12 (even) -> -11.
  Tensor y = run_op("tessel.MulQuantizeLinear", {f32({2}, {0.3f, -1.25f}), f32({2}, {2, 1}), f32({}, {0.1f}),
                                                  i8({}, {1})})[0];
  EXPECT_EQ(y.to_i64_vector(), (I64s{7, -11}));
  // int8 a [1,2,2] (zero point 3) times a per-row gate [1,2,1], a_scale / y_scale = 0.25:
  // (7 - 3) * 1 * 0.25 = 1; (9 - 3) * 1 * 0.25 = 1.5 -> 2; (-5 - 3) * 0.5 * 0.25 = -1;
  // (13 - 3) * 0.5 * 0.25 = 1.25 -> 1; u8 without y's zero point: -1 saturated at 0.
  const Tensor a = i8({1, 2, 2}, {7, 9, -5, 13});
  y = run_op("tessel.MulQuantizeLinear",
             {a, f32({1, 2, 1}, {1, 0.5}), f32({}, {0.2f}), i8({}, {0}), f32({}, {0.05f}), i8({}, {3})})[0];
  ASSERT_EQ(y.dtype(), DType::kI8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{1, 2, -1, 1}));
  y = run_op("tessel.MulQuantizeLinear", {a, f32({1, 2, 1}, {1, 0.5}), f32({}, {0.2f}), Tensor(), f32({}, {0.05f}),
                                          i8({}, {3})})[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{1, 2, 0, 1}));
  expect_user_error([&] { run_op("tessel.MulQuantizeLinear", {a, f32({1}, {1}), f32({}, {0.2f}), i8({}, {0}),
                                                             f32({}, {0.05f}), u8({}, {3})}); },
                    "tessel.MulQuantizeLinear 'node'", "a_zero_point has dtype u8, expected the dtype of a (i8)");
  expect_user_error([&] { run_op("tessel.MulQuantizeLinear", {f32({1}, {1}), f32({1}, {1}), f32({}, {0.2f}),
                                                             i8({}, {0}), f32({}, {0.05f})}); },
                    "tessel.MulQuantizeLinear 'node'", "input a has dtype f32");
}

TEST(QLinearReduceMean, means_of_the_integers_requantized) {
  // [1,2,2,2] over H and W (axes 1, 2): channel 0 codes 1, 2, 4, 6 (zero point 1): mean of
  // 0, 1, 3, 5 = 2.25, times 0.1 / 0.05 = 2 is 4.5 -> 4 (even), plus y's zero point -1 = 3;
  // channel 1 codes -3, 7, 9, 11: mean of -4, 6, 8, 10 = 5 -> 10 - 1 = 9.
  const Tensor x = i8({1, 2, 2, 2}, {1, -3, 2, 7, 4, 9, 6, 11});
  Tensor y = run_op("tessel.QLinearReduceMean", {x, f32({}, {0.1f}), i8({}, {1}), f32({}, {0.05f}), i8({}, {-1})},
                    {{"axes", I64s{1, 2}}, {"keepdims", int64_t{1}}})[0];
  ASSERT_EQ(y.dtype(), DType::kI8);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(y.to_i64_vector(), (I64s{3, 9}));
  // Without zero points and keepdims 0: means 3.25 and 6, times 1.5 / 0.5 = 9.75 -> 10 and
  // 18, u8 (no y zero point); a negative mean saturates at 0.
  y = run_op("tessel.QLinearReduceMean", {x, f32({}, {1.5f}), Tensor(), f32({}, {0.5f})},
             {{"axes", I64s{-3, -2}}, {"keepdims", int64_t{0}}})[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_EQ(y.to_i64_vector(), (I64s{10, 18}));
  y = run_op("tessel.QLinearReduceMean", {i8({1, 2}, {-7, -9}), f32({}, {1}), Tensor(), f32({}, {1})},
             {{"axes", I64s{1}}})[0];
  EXPECT_EQ(y.to_i64_vector(), (I64s{0}));
  expect_user_error([&] { run_op("tessel.QLinearReduceMean", {x, f32({}, {1}), Tensor(), f32({}, {1})}); },
                    "tessel.QLinearReduceMean 'node'", "the 'axes' attribute is required");
  expect_user_error([&] { run_op("tessel.QLinearReduceMean", {f32({2}, {1, 2}), f32({}, {1}), Tensor(), f32({}, {1})},
                                 {{"axes", I64s{0}}}); },
                    "tessel.QLinearReduceMean 'node'", "input x has dtype f32");
}

// ---- ConvInteger and QLinearConv ------------------------------------------------------------

TEST(ConvInteger, u8_onnx_doc_examples) {
  // ONNX ConvInteger documentation: x = 2..10 (3x3), all-ones 2x2 kernel, x_zero_point 1.
  Tensor x = pattern(DType::kU8, {1, 1, 3, 3}, 1, 100, -2);
  Tensor w = pattern(DType::kU8, {1, 1, 2, 2}, 0, 1, -1);
  Tensor y = run_op("ConvInteger", {x, w, u8({}, {1})}, {}, 1, 10)[0];
  ASSERT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.to_i64_vector(), (I64s{12, 16, 24, 28}));
  Tensor p = run_op("ConvInteger", {x, w, u8({}, {1})}, {{"pads", I64s{1, 1, 1, 1}}}, 1, 10)[0];
  EXPECT_EQ(p.to_i64_vector(), (I64s{1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9}));
}

TEST(ConvInteger, per_channel_weight_zero_points_with_groups) {
  // Pointwise, 2 groups of one channel: y[m] = (x[m] - 3) * (w[m] - w_zp[m]).
  Tensor x = u8({1, 2, 1, 2}, {3, 5, 10, 0});
  Tensor w = u8({2, 1, 1, 1}, {7, 7});
  Tensor y = run_op("ConvInteger", {x, w, u8({}, {3}), u8({2}, {4, 9})}, {{"group", int64_t{2}}}, 1,
                    10)[0];
  EXPECT_EQ(y.to_i64_vector(), (I64s{0, 6, -14, 6}));
  // i8 operands, no zero points: 2x2 kernel of [[1, -1], [-2, 2]] over [[-3, 4], [5, -6]].
  Tensor yi = run_op("ConvInteger",
                     {i8({1, 1, 2, 2}, {-3, 4, 5, -6}), i8({1, 1, 2, 2}, {1, -1, -2, 2})})[0];
  EXPECT_EQ(yi.to_i64_vector(), (I64s{-3 - 4 - 10 - 12}));
}

TEST(ConvInteger, rejects_bad_inputs) {
  Tensor x = pattern(DType::kU8, {1, 2, 3, 3}, 1, 100, 0);
  Tensor w = pattern(DType::kU8, {3, 2, 2, 2}, 1, 100, 0);
  expect_user_error(
      [&] {
        run_op("ConvInteger", {x, w, u8({2}, {1, 2})});
      },
      "ConvInteger 'node'", "x_zero_point has shape [2], expected a scalar");
  expect_user_error(
      [&] {
        run_op("ConvInteger", {x, w, u8({}, {1}), u8({2}, {1, 2})});
      },
      "ConvInteger 'node'", "expected a scalar or [3] (one value per output channel)");
  expect_user_error(
      [&] {
        run_op("ConvInteger", {x.cast(DType::kF32), w});
      },
      "ConvInteger 'node'", "input x has dtype f32, expected u8 or i8");
  expect_user_error(
      [&] {
        run_op("ConvInteger", {x, pattern(DType::kU8, {3, 1, 2, 2}, 1, 9, 0)});
      },
      "ConvInteger 'node'", "has 1 input channels per group, expected 2");
}

TEST(QLinearConv, u8_x_i8_w_per_channel_scales_bias_pads_stride) {
  // Expected values computed by onnxruntime 1.20 for the same inputs.
  Tensor x = pattern(DType::kU8, {1, 2, 4, 4}, 37, 256, 0);
  Tensor w = pattern(DType::kI8, {3, 2, 2, 2}, 11, 19, 9);
  std::vector<Tensor> in = {x,
                            f32({}, {0.05f}),
                            u8({}, {128}),
                            w,
                            f32({3}, {0.02f, 0.03f, 0.01f}),
                            i8({3}, {0, 0, 0}),
                            f32({}, {0.03f}),
                            u8({}, {100}),
                            i32({3}, {100, -200, 300})};
  Tensor y =
      run_op("QLinearConv", in, {{"pads", I64s{1, 0, 0, 1}}, {"strides", I64s{2, 1}}}, 1, 10)[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 2, 4}));
  EXPECT_EQ(y.to_i64_vector(), (I64s{117, 106, 94, 107, 61,  73,  42,  141, 75,  77,  79, 63,
                                     105, 7,   87, 22,  117, 112, 107, 111, 133, 118, 83, 120}));
}

TEST(QLinearConv, requantizes_with_ties_to_even_and_saturates) {
  // 1x1 kernel, scales chosen so acc * 0.5 lands on ties: acc = (x - 0) * 1.
  Tensor x = u8({1, 1, 1, 5}, {1, 3, 5, 0, 255});
  Tensor w = i8({1, 1, 1, 1}, {1});
  std::vector<Tensor> in = {x,           f32({}, {1}), u8({}, {0}),   w, f32({}, {0.5}),
                            i8({}, {0}), f32({}, {1}), i8({}, {-100})};
  // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 0 -> 0, 127.5 -> 128; plus -100 and saturation to i8.
  EXPECT_EQ(run_op("QLinearConv", in, {}, 1, 10)[0].to_i64_vector(),
            (I64s{-100, -98, -98, -100, 28}));
}

TEST(QLinearConv, rejects_bad_parameters) {
  Tensor x = pattern(DType::kU8, {1, 2, 3, 3}, 1, 100, 0);
  Tensor w = pattern(DType::kI8, {3, 2, 2, 2}, 1, 50, 25);
  auto inputs = [&](Tensor w_scale, Tensor bias) {
    return std::vector<Tensor>{x,           f32({}, {1}), u8({}, {0}), w,   w_scale,
                               i8({}, {0}), f32({}, {1}), u8({}, {0}), bias};
  };
  expect_user_error(
      [&] {
        run_op("QLinearConv", inputs(f32({2}, {1, 1}), i32({3}, {0, 0, 0})));
      },
      "QLinearConv 'node'", "w_scale has shape [2], expected a scalar or [3]");
  expect_user_error(
      [&] {
        run_op("QLinearConv", inputs(f32({}, {1}), f32({3}, {0, 0, 0})));
      },
      "QLinearConv 'node'", "bias B has type f32[3], expected i32[3]");
  std::vector<Tensor> bad_scale = inputs(f32({}, {1}), i32({3}, {0, 0, 0}));
  bad_scale[1] = Tensor::from_doubles(DType::kF64, {}, {1});
  expect_user_error([&] { run_op("QLinearConv", bad_scale); }, "QLinearConv 'node'",
                    "scale x_scale has dtype f64, expected f32");
}

// ---- MatMulInteger and QLinearMatMul --------------------------------------------------------

TEST(MatMulInteger, u8_onnx_doc_example) {
  Tensor a = u8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = u8({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor y = run_op("MatMulInteger", {a, b, u8({}, {12}), u8({}, {0})}, {}, 1, 10)[0];
  ASSERT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.to_i64_vector(), (I64s{-38, -83, -44, -98, -50, -113, -56, -128}));
}

TEST(MatMulInteger, per_row_and_per_column_zero_points) {
  // A - [1, 2] per row = [[0, 1], [1, 2]]; B - [4, 8] per column = [[1, -2], [3, 0]].
  Tensor a = u8({2, 2}, {1, 2, 3, 4});
  Tensor b = u8({2, 2}, {5, 6, 7, 8});
  Tensor y = run_op("MatMulInteger", {a, b, u8({2}, {1, 2}), u8({2}, {4, 8})})[0];
  EXPECT_EQ(y.to_i64_vector(), (I64s{3, 0, 7, -2}));
  // Batched A (2, 1, 2) with zero points of shape (2, 1, 1): one per matrix row.
  Tensor ab = i8({2, 1, 2}, {1, 2, 3, 4});
  Tensor yb = run_op("MatMulInteger", {ab, i8({2, 1}, {1, 2}), i8({2, 1, 1}, {1, 3})})[0];
  EXPECT_EQ(yb.shape(), (Shape{2, 1, 1}));
  EXPECT_EQ(yb.to_i64_vector(), (I64s{2, 2}));
  // Mixed u8 x i8.
  Tensor ym = run_op("MatMulInteger", {u8({1, 2}, {200, 100}), i8({2, 1}, {-128, 127})})[0];
  EXPECT_EQ(ym.to_i64_vector(), (I64s{200 * -128 + 100 * 127}));
}

TEST(MatMulInteger, rejects_bad_zero_points) {
  Tensor a = u8({4, 3}, std::vector<uint8_t>(12, 1));
  Tensor b = u8({3, 2}, std::vector<uint8_t>(6, 1));
  expect_user_error(
      [&] {
        run_op("MatMulInteger", {a, b, u8({3}, {1, 2, 3})});
      },
      "MatMulInteger 'node'",
      "a_zero_point has shape [3], expected a scalar or per-row values broadcastable to [4,1]");
  expect_user_error(
      [&] {
        run_op("MatMulInteger", {a, b, u8({}, {1}), i8({}, {1})});
      },
      "MatMulInteger 'node'", "b_zero_point has dtype i8, expected the dtype of b (u8)");
  expect_user_error(
      [&] {
        run_op("MatMulInteger", {a, a});
      },
      "MatMulInteger 'node'", "different contraction dims (3 vs 4)");
}

TEST(QLinearMatMul, u8_onnx_doc_example_2d_and_3d) {
  Tensor a = u8({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29});
  Tensor b = u8({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
  std::vector<Tensor> in = {a,
                            f32({}, {0.0066f}),
                            u8({}, {113}),
                            b,
                            f32({}, {0.00705f}),
                            u8({}, {114}),
                            f32({}, {0.0107f}),
                            u8({}, {118})};
  Tensor y = run_op("QLinearMatMul", in, {}, 1, 10)[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  EXPECT_EQ(y.to_i64_vector(), (I64s{168, 115, 255, 1, 66, 151}));
  // The same matrices stacked twice on a batch dim give the same products twice.
  Tensor a3 = u8({2, 2, 4}, {208, 236, 0, 238, 3, 214, 255, 29, 208, 236, 0, 238, 3, 214, 255, 29});
  in[0] = a3;
  EXPECT_EQ(run_op("QLinearMatMul", in, {}, 1, 10)[0].to_i64_vector(),
            (I64s{168, 115, 255, 1, 66, 151, 168, 115, 255, 1, 66, 151}));
}

TEST(QLinearMatMul, per_column_scales_of_i8_b) {
  // Expected values computed by onnxruntime 1.20 for the same inputs.
  Tensor a = u8({2, 3}, {0, 29, 58, 87, 116, 145});
  Tensor b = i8({3, 4}, {-15, -2, 11, -7, 6, -12, 1, 14, -4, 9, -9, 4});
  std::vector<Tensor> in = {a,
                            f32({}, {0.1f}),
                            u8({}, {120}),
                            b,
                            f32({4}, {0.05f, 0.1f, 0.2f, 0.4f}),
                            i8({4}, {0, 0, 0, 0}),
                            f32({}, {0.5f}),
                            u8({}, {10})};
  EXPECT_EQ(run_op("QLinearMatMul", in, {}, 1, 10)[0].to_i64_vector(),
            (I64s{25, 25, 0, 0, 14, 17, 0, 32}));
}

TEST(QLinearMatMul, rejects_bad_parameters) {
  Tensor a = u8({2, 3}, std::vector<uint8_t>(6, 1));
  Tensor b = u8({3, 4}, std::vector<uint8_t>(12, 1));
  std::vector<Tensor> in = {a,           f32({}, {1}), u8({}, {0}), b, f32({3}, {1, 1, 1}),
                            u8({}, {0}), f32({}, {1}), u8({}, {0})};
  expect_user_error(
      [&] { run_op("QLinearMatMul", in); }, "QLinearMatMul 'node'",
      "b_scale has shape [3], expected a scalar or per-column values broadcastable to [1,4]");
  in[4] = f32({}, {1});
  in[6] = f32({2}, {1, 1});
  expect_user_error([&] { run_op("QLinearMatMul", in); }, "QLinearMatMul 'node'",
                    "y_scale has shape [2], expected a scalar");
}

}  // namespace
}  // namespace tessel
