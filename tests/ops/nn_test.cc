// Tests of the nn op family: Conv, ConvTranspose, Gemm, MatMul, BatchNormalization and the
// pools. Expected values are hand-computed, taken from ONNX's operator documentation, computed
// by onnxruntime 1.20 (noted where so), or produced by a direct loop-nest definition of the op
// in this file (naive_conv / naive_conv_transpose) that shares no code with the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::expect_user_error;
using Ints = std::vector<int64_t>;

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }

// Values i * mul % mod - offset: small integers, exact in every float type, not symmetric.
Tensor pattern(DType t, Shape s, int64_t mul, int64_t mod, int64_t offset) {
  Tensor r(t, s);
  for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, static_cast<double>(i * mul % mod - offset));
  return r;
}

Tensor random_tensor(DType t, Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor r(t, std::move(s));
  for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, u(rng));
  return r;
}


struct ConvCfg {
  Ints strides, dilations, pads;  // pads: begins then ends, ONNX order
  int64_t group = 1;
};

ir::Attributes conv_attrs(const ConvCfg& c) {
  return {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads}, {"group", c.group}};
}

// Conv by its definition, in double: for every output element, sum over its window.
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCfg& c) {
  const size_t rank = x.shape().size() - 2;
  const int64_t channels = x.dim(1), out_ch = w.dim(0), cg = channels / c.group;
  Shape out{x.dim(0), out_ch};
  for (size_t d = 0; d < rank; ++d) {
    int64_t dk = (w.dim(2 + d) - 1) * c.dilations[d] + 1;
    out.push_back((x.dim(2 + d) + c.pads[d] + c.pads[rank + d] - dk) / c.strides[d] + 1);
  }
  Tensor y(DType::kF64, out);
  const std::vector<int64_t> ys = strides_of(out), xs = strides_of(x.shape()),
                             ws = strides_of(w.shape());
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t n = i / ys[0], m = i / ys[1] % out_ch;
    double acc = b ? b->get_f64(m) : 0.0;
    const int64_t kcount = w.numel() / (out_ch * cg);
    for (int64_t c_in = 0; c_in < cg; ++c_in) {
      for (int64_t k = 0; k < kcount; ++k) {
        int64_t x_at = n * xs[0] + (m / (out_ch / c.group) * cg + c_in) * xs[1];
        bool inside = true;
        for (size_t d = 0; d < rank; ++d) {
          int64_t o = i / ys[2 + d] % out[2 + d];
          int64_t kd = k / ws[2 + d] % w.dim(2 + d);
          int64_t pos = o * c.strides[d] - c.pads[d] + kd * c.dilations[d];
          inside = inside && pos >= 0 && pos < x.dim(2 + d);
          x_at += pos * xs[2 + d];
        }
        if (inside) acc += x.get_f64(x_at) * w.get_f64(m * ws[0] + c_in * ws[1] + k);
      }
    }
    y.set_f64(i, acc);
  }
  return y;
}

// ConvTranspose by its definition: every input element scatters x * w into the output.
Tensor naive_conv_transpose(const Tensor& x, const Tensor& w, const ConvCfg& c, Ints out_pad) {
  const size_t rank = x.shape().size() - 2;
  const int64_t cg = x.dim(1) / c.group, mg = w.dim(1);
  Shape out{x.dim(0), mg * c.group};
  for (size_t d = 0; d < rank; ++d)
    out.push_back(c.strides[d] * (x.dim(2 + d) - 1) + out_pad[d] +
                  (w.dim(2 + d) - 1) * c.dilations[d] + 1 - c.pads[d] - c.pads[rank + d]);
  Tensor y(DType::kF64, out);
  const std::vector<int64_t> ys = strides_of(out), xs = strides_of(x.shape()),
                             ws = strides_of(w.shape());
  const int64_t kcount = w.numel() / (w.dim(0) * mg);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t n = i / xs[0], c_in = i / xs[1] % x.dim(1), g = c_in / cg;
    for (int64_t m = 0; m < mg; ++m) {
      for (int64_t k = 0; k < kcount; ++k) {
        int64_t y_at = n * ys[0] + (g * mg + m) * ys[1];
        bool inside = true;
        for (size_t d = 0; d < rank; ++d) {
          int64_t pos = i / xs[2 + d] % x.dim(2 + d) * c.strides[d] - c.pads[d] +
                        k / ws[2 + d] % w.dim(2 + d) * c.dilations[d];
          inside = inside && pos >= 0 && pos < out[2 + d];
          y_at += pos * ys[2 + d];
        }
        if (inside)
          y.set_f64(y_at, y.get_f64(y_at) + x.get_f64(i) * w.get_f64(c_in * ws[0] + m * ws[1] + k));
      }
    }
  }
  return y;
}

// ---- Conv -----------------------------------------------------------------------------------

TEST(Conv, f32_3x3_pad1_onnx_doc_example) {
  // ONNX Conv documentation, "conv_with_padding": x = 0..24, all-ones 3x3 kernel.
  Tensor x = pattern(DType::kF32, {1, 1, 5, 5}, 1, 1000, 0);
  Tensor w = pattern(DType::kF32, {1, 1, 3, 3}, 0, 1, -1);
  Tensor y = run_op("Conv", {x, w}, {{"pads", Ints{1, 1, 1, 1}}})[0];
  EXPECT_TRUE(
      all_close(y, f32({1, 1, 5, 5}, {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                      117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84})));
}

TEST(Conv, f32_group2_dilation2x1_stride2_asymmetric_pads_bias) {
  // Expected values computed by onnxruntime 1.20 for the same inputs.
  Tensor x = pattern(DType::kF32, {1, 4, 5, 6}, 7, 11, 5);
  Tensor w = pattern(DType::kF32, {4, 2, 3, 2}, 5, 7, 3);
  Tensor b = f32({4}, {1, -1, 2, -2});
  ConvCfg c{{2, 2}, {2, 1}, {1, 0, 2, 1}, 2};
  Tensor y = run_op("Conv", {x, w, b}, conv_attrs(c))[0];
  EXPECT_TRUE(
      all_close(y, f32({1, 4, 2, 3}, {-4,  -11, 15, -9, 20, -6,  -11, 18, -8,  19, -28, 13,
                                      -24, -27, 14, 24, 22, -13, 20,  18, -17, -2, -24, -2})));
  EXPECT_TRUE(all_close(y, naive_conv(x, w, &b, c)));
}

TEST(Conv, f32_matches_definition_across_ranks_groups_and_strides) {
  struct Case {
    Shape x, w;
    ConvCfg cfg;
  };
  const std::vector<Case> cases = {
      {{2, 3, 17}, {4, 3, 3}, {{2}, {3}, {2, 1}, 1}},                   // 1-D
      {{1, 6, 9, 8}, {6, 1, 3, 3}, {{1, 2}, {1, 1}, {1, 1, 1, 1}, 6}},  // depthwise
      {{2, 8, 7, 7}, {6, 8, 1, 1}, {{1, 1}, {1, 1}, {0, 0, 0, 0}, 1}},  // pointwise
      {{1, 4, 7, 7}, {6, 2, 1, 1}, {{2, 2}, {1, 1}, {0, 1, 1, 0}, 2}},  // 1x1 strided
      {{1, 2, 5, 6, 7}, {4, 1, 3, 2, 3}, {{1, 2, 2}, {2, 1, 1}, {1, 0, 2, 1, 1, 0}, 2}},  // 3-D
      // Large enough that the column buffer is filled in several chunks of rows.
      {{1, 16, 120, 100}, {4, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1, 1, 1}, 1}},
  };
  uint32_t seed = 1;
  for (const Case& k : cases) {
    Tensor x = random_tensor(DType::kF32, k.x, seed++);
    Tensor w = random_tensor(DType::kF32, k.w, seed++);
    Tensor b = random_tensor(DType::kF32, {k.w[0]}, seed++);
    Tensor y = run_op("Conv", {x, w, b}, conv_attrs(k.cfg))[0];
    EXPECT_TRUE(all_close(y, naive_conv(x, w, &b, k.cfg), 1e-4, 1e-5)) << shape_str(k.x);
  }
}

TEST(Conv, f32_same_upper_pads_end_same_lower_pads_begin) {
  // x = 0..15 (4x4), all-ones 2x2 kernel, stride 1: the total pad of 1 goes at the end for
  // SAME_UPPER (windows look down-right) and at the beginning for SAME_LOWER (up-left).
  Tensor x = pattern(DType::kF32, {1, 1, 4, 4}, 1, 1000, 0);
  Tensor w = pattern(DType::kF32, {1, 1, 2, 2}, 0, 1, -1);
  Tensor upper = run_op("Conv", {x, w}, {{"auto_pad", std::string("SAME_UPPER")}})[0];
  Tensor lower = run_op("Conv", {x, w}, {{"auto_pad", std::string("SAME_LOWER")}})[0];
  EXPECT_TRUE(all_close(
      upper, f32({1, 1, 4, 4}, {10, 14, 18, 10, 26, 30, 34, 18, 42, 46, 50, 26, 25, 27, 29, 15})));
  EXPECT_TRUE(all_close(
      lower, f32({1, 1, 4, 4}, {0, 1, 3, 5, 4, 10, 14, 18, 12, 26, 30, 34, 20, 42, 46, 50})));
}

TEST(Conv, f32_same_upper_stride2_and_valid_output_shapes) {
  Tensor x = random_tensor(DType::kF32, {1, 2, 7, 8}, 7);
  Tensor w = random_tensor(DType::kF32, {3, 2, 3, 3}, 8);
  ir::Attributes same{{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}};
  Tensor y = run_op("Conv", {x, w}, same)[0];
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 4}));  // ceil(7/2), ceil(8/2)
  // Total pads: (4-1)*2 + 3 - 7 = 2 -> (1, 1); (4-1)*2 + 3 - 8 = 1 -> (0, 1).
  EXPECT_TRUE(all_close(y, naive_conv(x, w, nullptr, {{2, 2}, {1, 1}, {1, 0, 1, 1}}), 1e-5));
  Tensor v = run_op("Conv", {x, w}, {{"auto_pad", std::string("VALID")}})[0];
  EXPECT_EQ(v.shape(), (Shape{1, 3, 5, 6}));
}

TEST(Conv, f64_and_f16_keep_their_dtype) {
  ConvCfg c{{1, 1}, {1, 1}, {1, 1, 1, 1}, 1};
  Tensor x64 = random_tensor(DType::kF64, {1, 3, 6, 6}, 11);
  Tensor w64 = random_tensor(DType::kF64, {2, 3, 3, 3}, 12);
  Tensor y64 = run_op("Conv", {x64, w64}, conv_attrs(c))[0];
  ASSERT_EQ(y64.dtype(), DType::kF64);
  EXPECT_TRUE(all_close(y64, naive_conv(x64, w64, nullptr, c), 1e-12, 1e-12));

  Tensor x16 = x64.cast(DType::kF16), w16 = w64.cast(DType::kF16);
  Tensor y16 = run_op("Conv", {x16, w16}, conv_attrs(c))[0];
  ASSERT_EQ(y16.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(y16, naive_conv(x16, w16, nullptr, c), 2e-3, 2e-3));
}

TEST(Conv, kernel_shape_attribute_is_optional_but_checked) {
  Tensor x = random_tensor(DType::kF32, {1, 2, 5, 5}, 3);
  Tensor w = random_tensor(DType::kF32, {1, 2, 3, 3}, 4);
  EXPECT_EQ(run_op("Conv", {x, w}, {{"kernel_shape", Ints{3, 3}}})[0].shape(), (Shape{1, 1, 3, 3}));
  expect_user_error(
      [&] {
        run_op("Conv", {x, w}, {{"kernel_shape", Ints{2, 2}}});
      },
      "Conv 'node'", "kernel_shape [2,2] does not match");
}

TEST(Conv, rejects_bad_inputs_naming_the_node) {
  Tensor x = random_tensor(DType::kF32, {1, 4, 5, 5}, 5);
  Tensor w = random_tensor(DType::kF32, {6, 3, 3, 3}, 6);
  // W has 3 input channels per group, X has 4 channels and group 1.
  expect_user_error(
      [&] {
        run_op("Conv", {x, w});
      },
      "Conv 'node'", "has 3 input channels per group, expected 4");
  Tensor w2 = random_tensor(DType::kF32, {6, 2, 3, 3}, 6);
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2}, {{"group", int64_t{3}}});
      },
      "Conv 'node'", "not divisible by group 3");
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2}, {{"group", int64_t{0}}});
      },
      "Conv 'node'", "group 0 must be >= 1");
  Tensor w_odd = random_tensor(DType::kF32, {5, 2, 3, 3}, 6);
  expect_user_error(
      [&] {
        run_op("Conv", {x, w_odd}, {{"group", int64_t{2}}});
      },
      "Conv 'node'", "5 output channels, not divisible by group 2");
  expect_user_error(
      [&] {
        run_op("Conv", {random_tensor(DType::kF32, {4, 5}, 1), w});
      },
      "Conv 'node'", "expected rank >= 3");
  expect_user_error(
      [&] {
        run_op("Conv", {x, random_tensor(DType::kF32, {6, 4, 3}, 1)});
      },
      "Conv 'node'", "expected rank 4");
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2, random_tensor(DType::kF32, {5}, 1)}, {{"group", int64_t{2}}});
      },
      "Conv 'node'", "bias B has shape [5], expected [6]");
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2}, {{"group", int64_t{2}}, {"strides", Ints{1}}});
      },
      "Conv 'node'", "'strides' has 1 values, expected 2");
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2}, {{"group", int64_t{2}}, {"auto_pad", std::string("SAME")}});
      },
      "Conv 'node'", "auto_pad is 'SAME'");
  expect_user_error(
      [&] {
        run_op("Conv", {x, Tensor(DType::kF32, {6, 4, 0, 3})});
      },
      "Conv 'node'", "expected kernel dims >= 1");
  Tensor big_w = random_tensor(DType::kF32, {1, 4, 7, 7}, 6);
  expect_user_error(
      [&] {
        run_op("Conv", {x, big_w});
      },
      "Conv 'node'", "is larger than spatial dim 0");
  expect_user_error(
      [&] {
        run_op("Conv", {x.cast(DType::kI32), w});
      },
      "Conv 'node'", "input X has dtype i32");
  expect_user_error(
      [&] {
        run_op("Conv", {x, w2.cast(DType::kF64)}, {{"group", int64_t{2}}});
      },
      "Conv 'node'", "input W has dtype f64");
}

// ---- ConvTranspose --------------------------------------------------------------------------

TEST(ConvTranspose, f32_onnx_doc_example) {
  // ONNX ConvTranspose documentation, "convtranspose": x = 0..8 (3x3), all-ones 3x3 kernels
  // for 2 output channels.
  Tensor x = pattern(DType::kF32, {1, 1, 3, 3}, 1, 1000, 0);
  Tensor w = pattern(DType::kF32, {1, 2, 3, 3}, 0, 1, -1);
  Tensor y = run_op("ConvTranspose", {x, w})[0];
  std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> both = plane;
  both.insert(both.end(), plane.begin(), plane.end());
  EXPECT_TRUE(all_close(y, f32({1, 2, 5, 5}, both)));
}

TEST(ConvTranspose, f32_matches_definition_with_groups_strides_dilations_pads) {
  struct Case {
    Shape x, w;
    ConvCfg cfg;
    Ints out_pad;
  };
  const std::vector<Case> cases = {
      {{2, 4, 4, 5}, {4, 3, 3, 2}, {{2, 3}, {1, 2}, {1, 0, 0, 2}, 2}, {1, 1}},
      {{1, 2, 6}, {2, 2, 3}, {{2}, {1}, {1, 1}, 1}, {0}},
      {{1, 2, 3, 3, 2}, {2, 2, 2, 3, 2}, {{2, 1, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 1}, {1, 0, 0}},
      {{1, 3, 4, 4}, {3, 1, 3, 3}, {{1, 1}, {2, 2}, {2, 2, 2, 2}, 3}, {0, 0}},  // depthwise
  };
  uint32_t seed = 100;
  for (const Case& k : cases) {
    Tensor x = random_tensor(DType::kF32, k.x, seed++);
    Tensor w = random_tensor(DType::kF32, k.w, seed++);
    ir::Attributes a = conv_attrs(k.cfg);
    a["output_padding"] = k.out_pad;
    Tensor y = run_op("ConvTranspose", {x, w}, a)[0];
    EXPECT_TRUE(all_close(y, naive_conv_transpose(x, w, k.cfg, k.out_pad), 1e-4, 1e-5))
        << shape_str(k.x);
  }
}

TEST(ConvTranspose, f32_auto_pad_and_output_shape_split_pads_per_spec) {
  // 1-D: x = [1, 2], kernel [1, 1, 1], stride 2. Unpadded output: [1, 1, 3, 2, 2].
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = f32({1, 1, 3}, {1, 1, 1});
  ir::Attributes s2{{"strides", Ints{2}}};
  EXPECT_TRUE(all_close(run_op("ConvTranspose", {x, w}, s2)[0], f32({1, 1, 5}, {1, 1, 3, 2, 2})));
  // SAME_*: output 2 * 2 = 4, total pad 1: at the end for SAME_UPPER, at the start otherwise.
  ir::Attributes upper = s2, lower = s2, shape4 = s2;
  upper["auto_pad"] = std::string("SAME_UPPER");
  lower["auto_pad"] = std::string("SAME_LOWER");
  shape4["output_shape"] = Ints{4};
  EXPECT_TRUE(all_close(run_op("ConvTranspose", {x, w}, upper)[0], f32({1, 1, 4}, {1, 1, 3, 2})));
  EXPECT_TRUE(all_close(run_op("ConvTranspose", {x, w}, lower)[0], f32({1, 1, 4}, {1, 3, 2, 2})));
  EXPECT_TRUE(all_close(run_op("ConvTranspose", {x, w}, shape4)[0], f32({1, 1, 4}, {1, 3, 2, 2})));
  // output_shape past the unpadded extent leaves the tail at the bias.
  ir::Attributes shape6 = s2;
  shape6["output_shape"] = Ints{6};
  EXPECT_TRUE(all_close(run_op("ConvTranspose", {x, w, f32({1}, {10})}, shape6)[0],
                        f32({1, 1, 6}, {11, 11, 13, 12, 12, 10})));
}

TEST(ConvTranspose, f64_keeps_dtype_and_rejects_bad_inputs) {
  ConvCfg c{{2, 2}, {1, 1}, {0, 0, 0, 0}, 1};
  Tensor x = random_tensor(DType::kF64, {1, 2, 3, 4}, 21);
  Tensor w = random_tensor(DType::kF64, {2, 3, 3, 3}, 22);
  Tensor y = run_op("ConvTranspose", {x, w}, conv_attrs(c))[0];
  ASSERT_EQ(y.dtype(), DType::kF64);
  EXPECT_TRUE(all_close(y, naive_conv_transpose(x, w, c, {0, 0}), 1e-12, 1e-12));

  expect_user_error(
      [&] {
        run_op("ConvTranspose", {x, random_tensor(DType::kF64, {3, 3, 3, 3}, 1)});
      },
      "ConvTranspose 'node'", "has 3 input channels, expected 2");
  expect_user_error(
      [&] {
        run_op("ConvTranspose", {x, w}, {{"output_shape", Ints{1, 2, 7, 9}}});
      },
      "ConvTranspose 'node'", "output_shape [1,2,7,9] has 4 values, expected 2");
  expect_user_error(
      [&] {
        run_op("ConvTranspose", {x, w}, {{"pads", Ints{3, 3, 3, 3}}});
      },
      "ConvTranspose 'node'", "output spatial dim 0 would be -1");
}

// ---- Gemm -----------------------------------------------------------------------------------

TEST(Gemm, f32_transposes_alpha_beta_and_column_bias) {
  // A^T = [[1, 2], [3, 4]], B^T = [[1, 0, 1], [0, 1, 1]]: A'B' = [[1, 2, 3], [3, 4, 7]].
  Tensor a = f32({2, 2}, {1, 3, 2, 4});
  Tensor b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor c = f32({2, 1}, {10, 20});  // broadcasts along columns
  ir::Attributes attrs{
      {"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}};
  EXPECT_TRUE(all_close(run_op("Gemm", {a, b, c}, attrs)[0], f32({2, 3}, {7, 9, 11, 16, 18, 24})));
}

TEST(Gemm, f32_bias_broadcasts_scalar_row_and_full) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  Tensor b = f32({2, 2}, {1, 0, 0, 1});  // identity
  EXPECT_TRUE(all_close(run_op("Gemm", {a, b, f32({}, {1})})[0], f32({2, 2}, {2, 3, 4, 5})));
  EXPECT_TRUE(all_close(run_op("Gemm", {a, b, f32({2}, {1, 2})})[0], f32({2, 2}, {2, 4, 4, 6})));
  EXPECT_TRUE(
      all_close(run_op("Gemm", {a, b, f32({2, 2}, {1, 2, 3, 4})})[0], f32({2, 2}, {2, 4, 6, 8})));
  // No C (optional since opset 11).
  EXPECT_TRUE(all_close(run_op("Gemm", {a, b}, {}, 1, 11)[0], a));
}

TEST(Gemm, f16_and_f64_and_errors) {
  Tensor a = random_tensor(DType::kF64, {5, 7}, 31), b = random_tensor(DType::kF64, {7, 3}, 32);
  Tensor y64 = run_op("Gemm", {a, b})[0];
  Tensor y16 = run_op("Gemm", {a.cast(DType::kF16), b.cast(DType::kF16)})[0];
  Tensor ref = run_op("MatMul", {a, b})[0];
  EXPECT_EQ(y64.dtype(), DType::kF64);
  EXPECT_TRUE(all_close(y64, ref, 1e-12, 1e-12));
  EXPECT_EQ(y16.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(y16, ref, 1e-2, 1e-2));
  expect_user_error(
      [&] {
        run_op("Gemm", {a, a});
      },
      "Gemm 'node'", "different contraction dims (7 vs 5)");
  expect_user_error(
      [&] {
        run_op("Gemm", {a, b, random_tensor(DType::kF64, {2, 3}, 1)});
      },
      "Gemm 'node'", "C has shape [2,3], which does not broadcast to the output [5,3]");
  expect_user_error(
      [&] {
        run_op("Gemm", {random_tensor(DType::kF64, {1, 5, 7}, 1), b});
      },
      "Gemm 'node'", "must both have rank 2");
}

// ---- MatMul ---------------------------------------------------------------------------------

TEST(MatMul, f32_promotes_1d_operands_like_numpy) {
  Tensor m = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = f32({3}, {1, 0, -1});
  EXPECT_TRUE(all_close(run_op("MatMul", {m, v})[0], f32({2}, {-2, -2})));
  EXPECT_TRUE(all_close(run_op("MatMul", {f32({2}, {1, -1}), m})[0], f32({3}, {-3, -3, -3})));
  EXPECT_TRUE(all_close(run_op("MatMul", {v, v})[0], f32({}, {2})));
}

TEST(MatMul, f32_broadcasts_batch_dims) {
  // a (2, 1, 2, 3) x b (3, 3, 2) -> (2, 3, 2, 2); every product checked against its 2-D matmul.
  Tensor a = random_tensor(DType::kF32, {2, 1, 2, 3}, 41);
  Tensor b = random_tensor(DType::kF32, {3, 3, 2}, 42);
  Tensor y = run_op("MatMul", {a, b})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          double ref = 0;
          for (int64_t k = 0; k < 3; ++k)
            ref += a.get_f64((i * 2 + r) * 3 + k) * b.get_f64((j * 3 + k) * 2 + c);
          EXPECT_NEAR(y.get_f64(((i * 3 + j) * 2 + r) * 2 + c), ref, 1e-5);
        }
}

TEST(MatMul, f32_large_blocked_product_matches_double) {
  // Exceeds every cache block of the gemm (K > 256, N > 1024 is not needed: M and K suffice).
  Tensor a = random_tensor(DType::kF32, {3, 70, 300}, 43);
  Tensor b = random_tensor(DType::kF32, {300, 130}, 44);
  Tensor y = run_op("MatMul", {a, b})[0];
  Tensor ref = run_op("MatMul", {a.cast(DType::kF64), b.cast(DType::kF64)})[0];
  EXPECT_TRUE(all_close(y, ref, 1e-4, 1e-4));
  // Double against the definition at a few points.
  for (int64_t at : {int64_t{0}, int64_t{12345}, y.numel() - 1}) {
    int64_t row = at / 130, col = at % 130;
    double s = 0;
    for (int64_t k = 0; k < 300; ++k) s += a.get_f64(row * 300 + k) * b.get_f64(k * 130 + col);
    EXPECT_NEAR(ref.get_f64(at), s, 1e-12);
  }
}

TEST(MatMul, integers_and_errors) {
  Tensor a = Tensor::from_vector<int32_t>({2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::from_vector<int32_t>({2, 1}, {100000, -1});
  Tensor y = run_op("MatMul", {a, b})[0];
  ASSERT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{99998, 299996}));
  expect_user_error(
      [&] {
        run_op("MatMul", {a, Tensor::from_vector<int32_t>({3}, {1, 2, 3})});
      },
      "MatMul 'node'", "different contraction dims (2 vs 3)");
  expect_user_error(
      [&] {
        run_op("MatMul", {Tensor::from_vector<int32_t>({}, {1}), a});
      },
      "MatMul 'node'", "must have rank >= 1");
  expect_user_error(
      [&] {
        run_op("MatMul", {random_tensor(DType::kF32, {2, 2, 3}, 1),
                          random_tensor(DType::kF32, {3, 3, 1}, 1)});
      },
      "MatMul 'node'", "do not broadcast");
  expect_user_error(
      [&] {
        run_op("MatMul", {a, b.cast(DType::kI64)});
      },
      "MatMul 'node'", "input B has dtype i64");
}

// ---- BatchNormalization ---------------------------------------------------------------------

TEST(BatchNormalization, f32_inference_per_channel) {
  // y = (x - mean) / sqrt(var + eps) * scale + B with var + eps = 4 and 0.25 (eps = 0).
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 5, 7});
  Tensor y = run_op("BatchNormalization",
                    {x, f32({2}, {2, 1}), f32({2}, {1, -1}), f32({2}, {1, 5}), f32({2}, {4, 0.25})},
                    {{"epsilon", 0.0}}, 1, 15)[0];
  EXPECT_TRUE(all_close(y, f32({1, 2, 1, 2}, {1, 3, -1, 3})));
}

TEST(BatchNormalization, f16_and_f64_and_rank2) {
  Tensor x = random_tensor(DType::kF64, {4, 3}, 51);
  std::vector<Tensor> p = {random_tensor(DType::kF64, {3}, 52), random_tensor(DType::kF64, {3}, 53),
                           random_tensor(DType::kF64, {3}, 54),
                           f32({3}, {0.5, 1, 2}).cast(DType::kF64)};
  Tensor y = run_op("BatchNormalization", {x, p[0], p[1], p[2], p[3]})[0];
  ASSERT_EQ(y.dtype(), DType::kF64);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = i % 3;
    double ref =
        (x.get_f64(i) - p[2].get_f64(c)) / std::sqrt(p[3].get_f64(c) + 1e-5) * p[0].get_f64(c) +
        p[1].get_f64(c);
    EXPECT_NEAR(y.get_f64(i), ref, 1e-12);
  }
  Tensor y16 = run_op("BatchNormalization",
                      {x.cast(DType::kF16), p[0].cast(DType::kF16), p[1].cast(DType::kF16),
                       p[2].cast(DType::kF16), p[3].cast(DType::kF16)})[0];
  ASSERT_EQ(y16.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(y16, y, 1e-2, 1e-2));
}

TEST(BatchNormalization, rejects_training_mode_and_bad_parameters) {
  Tensor x = random_tensor(DType::kF32, {2, 3, 4}, 61);
  Tensor c3 = f32({3}, {1, 1, 1});
  expect_user_error(
      [&] {
        run_op("BatchNormalization", {x, c3, c3, c3, c3}, {{"training_mode", int64_t{1}}}, 3, 15);
      },
      "BatchNormalization 'node'", "training mode not supported");
  expect_user_error(
      [&] {
        run_op("BatchNormalization", {x, c3, c3, c3, c3}, {}, 3, 9);
      },
      "BatchNormalization 'node'", "only Y is supported");
  expect_user_error(
      [&] {
        run_op("BatchNormalization", {x, c3, c3, f32({2}, {1, 1}), c3});
      },
      "BatchNormalization 'node'", "input input_mean has shape [2], expected [3]");
}

// ---- Pools ----------------------------------------------------------------------------------

TEST(MaxPool, f32_ceil_mode_onnx_doc_example) {
  // ONNX MaxPool documentation, "maxpool_2d_ceil": x = 1..16 (4x4), 3x3 kernel, stride 2.
  Tensor x = pattern(DType::kF32, {1, 1, 4, 4}, 1, 1000, -1);
  ir::Attributes a{
      {"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}};
  EXPECT_TRUE(all_close(run_op("MaxPool", {x}, a)[0], f32({1, 1, 2, 2}, {11, 12, 15, 16})));
  a["ceil_mode"] = int64_t{0};
  EXPECT_TRUE(all_close(run_op("MaxPool", {x}, a)[0], f32({1, 1, 1, 1}, {11})));
}

TEST(MaxPool, f32_ceil_mode_opset_22_drops_a_window_starting_past_the_data) {
  // ONNX's maxpool_2d_ceil_output_size_reduce_by_one: 2x2 input, 1x1 kernel, stride 2. With
  // ceil_mode the second window along each dim starts at 2, past the data and its (empty) end
  // pad: opsets up to 21 keep it, opset 22 drops it.
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  ir::Attributes a{
      {"kernel_shape", Ints{1, 1}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}};
  EXPECT_EQ(run_op("MaxPool", {x}, a, 1, 21)[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(all_close(run_op("MaxPool", {x}, a, 1, 22)[0], f32({1, 1, 1, 1}, {1})));
  // Without ceil_mode, or with auto_pad, opset 22 changes nothing.
  a["ceil_mode"] = int64_t{0};
  EXPECT_EQ(run_op("MaxPool", {x}, a, 1, 22)[0].shape(), (Shape{1, 1, 1, 1}));
  a["auto_pad"] = std::string("SAME_UPPER");
  EXPECT_EQ(run_op("MaxPool", {x}, a, 1, 22)[0].shape(), (Shape{1, 1, 1, 1}));
}

TEST(AveragePool, f32_ceil_mode_opset_22_drops_a_window_starting_in_the_end_pad) {
  // 4 elements, window 2, stride 2, end pad 1: the third window holds only padding.
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  ir::Attributes a{{"kernel_shape", Ints{2}},
                   {"strides", Ints{2}},
                   {"pads", Ints{0, 1}},
                   {"ceil_mode", int64_t{1}},
                   {"count_include_pad", int64_t{1}}};
  EXPECT_TRUE(all_close(run_op("AveragePool", {x}, a, 1, 21)[0], f32({1, 1, 3}, {1.5, 3.5, 0})));
  EXPECT_TRUE(all_close(run_op("AveragePool", {x}, a, 1, 22)[0], f32({1, 1, 2}, {1.5, 3.5})));
}

TEST(MaxPool, f32_dilation_pads_ceil_mode_with_indices) {
  // Values and indices computed by onnxruntime 1.20.
  Tensor x = pattern(DType::kF32, {1, 1, 4, 5}, 7, 13, 6);
  ir::Attributes a{{"kernel_shape", Ints{2, 2}},
                   {"strides", Ints{2, 2}},
                   {"dilations", Ints{1, 2}},
                   {"pads", Ints{1, 1, 0, 0}},
                   {"ceil_mode", int64_t{1}}};
  std::vector<Tensor> out = run_op("MaxPool", {x}, a, 2);
  EXPECT_TRUE(all_close(out[0], f32({1, 1, 3, 3}, {1, 2, 2, 6, 6, -2, 2, 3, 3})));
  ASSERT_EQ(out[1].dtype(), DType::kI64);
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 3, 3, 11, 11, 8, 16, 18, 18}));
}

TEST(MaxPool, f32_indices_row_major_and_column_major) {
  // Two planes of 2x3; a 2x2 window at stride 1 finds each plane's maximum.
  Tensor x = f32({1, 2, 2, 3}, {0, 1, 2, 3, 9, 5, /**/ 0, 7, 0, 0, 0, 8});
  ir::Attributes a{{"kernel_shape", Ints{2, 2}}};
  std::vector<Tensor> rm = run_op("MaxPool", {x}, a, 2);
  EXPECT_TRUE(all_close(rm[0], f32({1, 2, 1, 2}, {9, 9, 7, 8})));
  // Row-major offsets: (1,1) -> 4; plane 1 adds 6: (0,1) -> 7, (1,2) -> 11.
  EXPECT_EQ(rm[1].to_i64_vector(), (std::vector<int64_t>{4, 4, 7, 11}));
  a["storage_order"] = int64_t{1};
  // Column-major offsets h + w * 2: (1,1) -> 3; (0,1) -> 6 + 2, (1,2) -> 6 + 5.
  EXPECT_EQ(run_op("MaxPool", {x}, a, 2)[1].to_i64_vector(), (std::vector<int64_t>{3, 3, 8, 11}));
}

TEST(MaxPool, f32_same_upper_and_same_lower) {
  Tensor x = pattern(DType::kF32, {1, 1, 4, 4}, 1, 1000, 0);
  ir::Attributes a{{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}};
  EXPECT_TRUE(
      all_close(run_op("MaxPool", {x}, a)[0],
                f32({1, 1, 4, 4}, {5, 6, 7, 7, 9, 10, 11, 11, 13, 14, 15, 15, 13, 14, 15, 15})));
  a["auto_pad"] = std::string("SAME_LOWER");  // windows look up-left: the identity here
  EXPECT_TRUE(all_close(run_op("MaxPool", {x}, a)[0], x));
}

TEST(MaxPool, u8_i8_f16_f64_keep_their_dtype) {
  for (DType t : {DType::kU8, DType::kI8, DType::kF16, DType::kF64}) {
    Tensor x = pattern(t, {1, 1, 3, 3}, 5, 9, t == DType::kU8 ? 0 : 4);
    Tensor y = run_op(
        "MaxPool", {x},
        {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}})[0];
    ASSERT_EQ(y.dtype(), t);
    // x (offset o) = [[0,5,1],[6,2,7],[3,8,4]] - o; windows over the padded 5x5 at stride 2.
    double o = t == DType::kU8 ? 0 : 4;
    EXPECT_TRUE(all_close(y, Tensor::from_doubles(t, {1, 1, 2, 2}, {0 - o, 5 - o, 6 - o, 8 - o})))
        << dtype_name(t);
  }
}

TEST(MaxPool, rejects_bad_attributes) {
  Tensor x = random_tensor(DType::kF32, {1, 1, 4, 4}, 71);
  expect_user_error([&] { run_op("MaxPool", {x}); }, "MaxPool 'node'",
                    "missing required attribute 'kernel_shape'");
  expect_user_error(
      [&] {
        run_op("MaxPool", {x}, {{"kernel_shape", Ints{2}}});
      },
      "MaxPool 'node'", "kernel_shape [2] has 1 values, expected 2");
  expect_user_error(
      [&] {
        run_op("MaxPool", {x}, {{"kernel_shape", Ints{2, 2}}, {"storage_order", int64_t{2}}});
      },
      "MaxPool 'node'", "storage_order is 2");
  expect_user_error(
      [&] {
        run_op("MaxPool", {x.cast(DType::kI32)}, {{"kernel_shape", Ints{2, 2}}});
      },
      "MaxPool 'node'", "input X has dtype i32");
  expect_user_error(
      [&] {
        run_op("MaxPool", {random_tensor(DType::kF32, {4, 4}, 1)}, {{"kernel_shape", Ints{2, 2}}});
      },
      "MaxPool 'node'", "expected rank >= 3");
}

TEST(AveragePool, f32_count_include_pad_changes_the_divisor) {
  // 3x3 input of ones with 1 pad all round and a 3x3 kernel: corners see 4 ones.
  Tensor x = pattern(DType::kF32, {1, 1, 3, 3}, 0, 1, -1);
  ir::Attributes a{{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
  EXPECT_TRUE(
      all_close(run_op("AveragePool", {x}, a)[0], pattern(DType::kF32, {1, 1, 3, 3}, 0, 1, -1)));
  a["count_include_pad"] = int64_t{1};
  EXPECT_TRUE(all_close(run_op("AveragePool", {x}, a)[0],
                        f32({1, 1, 3, 3}, {4.f / 9, 6.f / 9, 4.f / 9, 6.f / 9, 1, 6.f / 9, 4.f / 9,
                                           6.f / 9, 4.f / 9})));
}

TEST(AveragePool, f32_ceil_mode_overhang_counts_only_with_count_include_pad) {
  // Values computed by onnxruntime 1.20 (and ONNX's reference). 6x6 input, 3x3 kernel,
  // stride 2, pads 1, ceil_mode: the last window along each dim covers index 5, the end pad 6
  // and an overhang 7. With count_include_pad the divisor is always the kernel size 9; the
  // corner window holds x[5][5] = -1 alone, hence -1 / 9 (and -1 / 1 without).
  Tensor x = pattern(DType::kF32, {1, 1, 6, 6}, 3, 8, 2);
  ir::Attributes a{{"kernel_shape", Ints{3, 3}},
                   {"strides", Ints{2, 2}},
                   {"pads", Ints{1, 1, 1, 1}},
                   {"ceil_mode", int64_t{1}}};
  EXPECT_TRUE(
      all_close(run_op("AveragePool", {x}, a, 1, 11)[0],
                f32({1, 1, 4, 4}, {0.5, 1, 5.f / 3, 2, 13.f / 6, 16.f / 9, 14.f / 9, 1, 5.f / 6,
                                   4.f / 3, 2, 7.f / 3, 1.5, 2.f / 3, 4.f / 3, -1})));
  a["count_include_pad"] = int64_t{1};
  std::vector<float> ninths = {2, 6, 10, 4, 13, 16, 14, 3, 5, 12, 18, 7, 3, 2, 4, -1};
  for (float& v : ninths) v /= 9;
  EXPECT_TRUE(all_close(run_op("AveragePool", {x}, a, 1, 11)[0], f32({1, 1, 4, 4}, ninths)));
}

TEST(AveragePool, f32_same_lower_1d_and_3d) {
  // 1-D, kernel 2, SAME_LOWER: window i covers x[i-1], x[i] (x[-1] is padding, not counted).
  Tensor x = f32({1, 1, 4}, {2, 4, 6, 8});
  EXPECT_TRUE(
      all_close(run_op("AveragePool", {x},
                       {{"kernel_shape", Ints{2}}, {"auto_pad", std::string("SAME_LOWER")}})[0],
                f32({1, 1, 4}, {2, 3, 5, 7})));
  // 3-D, 2x2x2 windows at stride 2 over 0..63: the mean of each block.
  Tensor cube = pattern(DType::kF32, {1, 1, 4, 4, 4}, 1, 1000, 0);
  Tensor y = run_op("AveragePool", {cube},
                    {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 2}}})[0];
  EXPECT_TRUE(all_close(y, f32({1, 1, 2, 2, 2}, {10.5, 12.5, 18.5, 20.5, 42.5, 44.5, 50.5, 52.5})));
}

TEST(AveragePool, f16_keeps_dtype_and_rejects_integers) {
  Tensor x = pattern(DType::kF16, {1, 2, 2, 2}, 1, 100, 0);
  Tensor y = run_op("AveragePool", {x}, {{"kernel_shape", Ints{2, 2}}})[0];
  ASSERT_EQ(y.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(y, Tensor::from_doubles(DType::kF16, {1, 2, 1, 1}, {1.5, 5.5})));
  expect_user_error(
      [&] {
        run_op("AveragePool", {x.cast(DType::kU8)}, {{"kernel_shape", Ints{2, 2}}});
      },
      "AveragePool 'node'", "input X has dtype u8");
  expect_user_error(
      [&] {
        run_op("AveragePool", {x},
               {{"kernel_shape", Ints{2, 2}}, {"count_include_pad", int64_t{3}}});
      },
      "AveragePool 'node'", "count_include_pad is 3");
}

TEST(GlobalPools, average_and_max_per_plane) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 6, -1, -5, -3, -2});
  EXPECT_TRUE(all_close(run_op("GlobalAveragePool", {x})[0], f32({1, 2, 1, 1}, {3, -2.75})));
  EXPECT_TRUE(all_close(run_op("GlobalMaxPool", {x})[0], f32({1, 2, 1, 1}, {6, -1})));
  Tensor x1d = Tensor::from_doubles(DType::kF64, {2, 1, 3}, {1, 2, 4, 0, 0, 3});
  EXPECT_TRUE(all_close(run_op("GlobalAveragePool", {x1d})[0],
                        Tensor::from_doubles(DType::kF64, {2, 1, 1}, {7.0 / 3, 1})));
  expect_user_error(
      [&] {
        run_op("GlobalMaxPool", {f32({2, 2}, {1, 2, 3, 4})});
      },
      "GlobalMaxPool 'node'", "expected rank at least 3");
}

TEST(InstanceNormalization, standardises_each_plane_then_scales_per_channel) {
  // Two planes of [1, 2, 2, 2], scale [2, 0.5], B [0.5, -1], epsilon 1e-5; computed in Python.
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 6, -1, -5, -3, -2});
  Tensor scale = f32({2}, {2, 0.5f}), b = f32({2}, {0.5f, -1});
  EXPECT_TRUE(all_close(run_op("InstanceNormalization", {x, scale, b})[0],
                        f32({1, 2, 2, 2}, {-1.6380869f, -0.5690434f, 0.5f, 3.7071303f, -0.4083934f, -1.7606371f,
                                           -1.0845152f, -0.7464543f})));
  expect_user_error([&] { run_op("InstanceNormalization", {x, f32({3}, {1, 1, 1}), b}); },
                    "InstanceNormalization 'node'", "scale has shape [3], expected [2] (one value per channel)");
  expect_user_error([&] { run_op("InstanceNormalization", {f32({2, 2}, {1, 2, 3, 4}), scale, b}); },
                    "InstanceNormalization 'node'", "expected rank at least 3");
}

TEST(GroupNormalization, standardises_each_group_then_scales_per_group_or_channel) {
  // [1, 4, 2, 2] in 2 groups of 2 channels; numpy on the definition. Opset 18: scale and bias
  // per group; opset 21: per channel.
  Tensor x = f32({1, 4, 2, 2}, {1, 2, 3, 6, -1, -5, -3, -2, 0.5f, 1.5f, -0.5f, 2, 4, -4, 1, 0});
  const ir::Attributes groups = {{"num_groups", int64_t{2}}};
  EXPECT_TRUE(all_close(
      run_op("GroupNormalization", {x, f32({2}, {2, 0.5f}), f32({2}, {0.5f, -1})}, groups, 1, 18)[0],
      f32({1, 4, 2, 2}, {1.025041f, 1.625087f, 2.225134f, 4.025274f, -0.1750524f, -2.575239f, -1.375146f, -0.775099f,
                         -1.014488f, -0.7826774f, -1.246299f, -0.666772f, -0.2031504f, -2.057637f, -0.8985828f,
                         -1.130394f})));
  EXPECT_TRUE(all_close(
      run_op("GroupNormalization", {x, f32({4}, {1, 2, 0.5f, -1}), f32({4}, {0, 0.5f, -1, 2})}, groups, 1, 21)[0],
      f32({1, 4, 2, 2}, {0.2625204f, 0.5625437f, 0.862567f, 1.762637f, -0.1750524f, -2.575239f, -1.375146f, -0.775099f,
                         -1.014488f, -0.7826774f, -1.246299f, -0.666772f, 0.4063008f, 4.115273f, 1.797166f, 2.260787f})));
  expect_user_error([&] { run_op("GroupNormalization", {x, f32({2}, {1, 1}), f32({2}, {0, 0})}, {}, 1, 18); },
                    "GroupNormalization 'node'", "the num_groups attribute is required");
  expect_user_error(
      [&] { run_op("GroupNormalization", {x, f32({3}, {1, 1, 1}), f32({3}, {0, 0, 0})}, {{"num_groups", int64_t{3}}}, 1, 18); },
      "GroupNormalization 'node'", "num_groups 3 does not divide the 4 channels");
  expect_user_error([&] { run_op("GroupNormalization", {x, f32({2}, {1, 1}), f32({2}, {0, 0})}, groups, 1, 21); },
                    "GroupNormalization 'node'", "scale has shape [2], expected [4] (one value per channel at opset 21)");
}

TEST(InstanceNormalization, nhwc_form_applies_fused_activations_and_refuses_other_steps) {
  // tessel.InstanceNormalization (NHWC) with a fused ReLU equals the ONNX op, transposed, then
  // ReLU.
  Tensor x = f32({1, 2, 2, 2}, {1, -1, 2, -5, 3, -3, 6, -2});  // NHWC of the [1, 2, 2, 2] above
  Tensor scale = f32({2}, {2, 0.5f}), b = f32({2}, {0.5f, -1});
  const Tensor got = run_op("tessel.InstanceNormalization", {x, scale, b},
                            {{"epilogue", std::vector<std::string>{"relu"}}})[0];
  // NCHW expectations of the test above, in NHWC order, with ReLU: channel 0 then channel 1.
  EXPECT_TRUE(all_close(got, f32({1, 2, 2, 2}, {0, 0, 0, 0, 0.5f, 0, 3.7071303f, 0})));
  expect_user_error(
      [&] { run_op("tessel.InstanceNormalization", {x, scale, b}, {{"epilogue", std::vector<std::string>{"add_residual"}}}); },
      "tessel.InstanceNormalization 'node'", "epilogue step 'add_residual' (only activations follow a normalization)");
}

TEST(Lrn, sums_squares_over_the_channel_window) {
  // [1, 3, 1, 2], size 3 (one channel each side, clipped at the ends), alpha 0.3, beta 0.75,
  // bias 1: x / (1 + 0.1 * sum of squares)^0.75, computed in Python.
  Tensor x = f32({1, 3, 1, 2}, {1, 2, 3, 4, -1, 0.5f});
  EXPECT_TRUE(all_close(run_op("LRN", {x}, {{"size", int64_t{3}}, {"alpha", 0.3}})[0],
                        f32({1, 3, 1, 2}, {0.59460356f, 0.87738268f, 1.71971621f, 1.74387743f, -0.59460356f,
                                           0.24245047f})));
  expect_user_error([&] { run_op("LRN", {x}); }, "LRN 'node'", "the size attribute is required");
  expect_user_error([&] { run_op("LRN", {x}, {{"size", int64_t{0}}}); }, "LRN 'node'",
                    "size is 0, expected at least 1");
  expect_user_error([&] { run_op("LRN", {f32({2, 2}, {1, 2, 3, 4})}, {{"size", int64_t{3}}}); }, "LRN 'node'",
                    "expected rank at least 3");
}

}  // namespace
}  // namespace tessel
