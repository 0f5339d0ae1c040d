// Tests of LayerNormalization (ops/layer_norm_ops.cc). Expected values are hand-computed or come
// from naive_layer_norm below: the ONNX definition written as plain loops in double over
// multi-indices, sharing no code with the kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::expect_user_error;
using testing::run_op;

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }

Tensor random_tensor(DType t, Shape s, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor r(t, std::move(s));
  for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, u(rng));
  return r;
}

struct Expected {
  Tensor y, mean, inv_std;  // f64
};

// The element of `t` that numpy broadcasting pairs with X's multi-index `coord`.
double broadcast_at(const Tensor& t, const std::vector<int64_t>& coord) {
  const size_t offset = coord.size() - t.shape().size();
  int64_t at = 0;
  for (size_t d = 0; d < t.shape().size(); ++d)
    at = at * t.dim(static_cast<int64_t>(d)) +
         (t.dim(static_cast<int64_t>(d)) == 1 ? 0 : coord[offset + d]);
  return t.get_f64(at);
}

// For every row (the multi-index of the dims before axis), mean and variance over the
// elements whose leading coordinates are that row.
Expected naive_layer_norm(const Tensor& x, const Tensor& scale, const Tensor* bias, int64_t axis,
                          double eps) {
  const Shape& s = x.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  if (axis < 0) axis += rank;
  Shape stats(s.begin(), s.begin() + axis);
  stats.resize(s.size(), 1);
  Expected e{Tensor(DType::kF64, s), Tensor(DType::kF64, stats), Tensor(DType::kF64, stats)};
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : cols) *= s[static_cast<size_t>(d)];
  auto coord_of = [&](int64_t flat) {
    std::vector<int64_t> c(s.size());
    for (int64_t d = rank - 1; d >= 0; --d) {
      c[static_cast<size_t>(d)] = flat % s[static_cast<size_t>(d)];
      flat /= s[static_cast<size_t>(d)];
    }
    return c;
  };
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x.get_f64(r * cols + c) / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c)
      var += std::pow(x.get_f64(r * cols + c) - mean, 2) / static_cast<double>(cols);
    const double inv_std = 1 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const std::vector<int64_t> coord = coord_of(i);
      double y = (x.get_f64(i) - mean) * inv_std * broadcast_at(scale, coord);
      if (bias) y += broadcast_at(*bias, coord);
      e.y.set_f64(i, y);
    }
    e.mean.set_f64(r, mean);
    e.inv_std.set_f64(r, inv_std);
  }
  return e;
}

ir::Attributes ln_attrs(int64_t axis, double eps) {
  return {{"axis", axis}, {"epsilon", static_cast<double>(static_cast<float>(eps))}};
}

TEST(LayerNormalization, f32_hand_computed_last_axis) {
  // Row [1, 2, 3, 4]: mean 2.5, variance 1.25, so y = (x - 2.5) / sqrt(1.25) * scale + B.
  const double k = 1 / std::sqrt(1.25);
  std::vector<Tensor> out =
      run_op("LayerNormalization",
             {f32({1, 4}, {1, 2, 3, 4}), f32({4}, {1, 2, 1, 0.5f}), f32({4}, {0, 0, 1, -1})},
             {{"epsilon", 0.0}}, 3);
  EXPECT_TRUE(all_close(
      out[0],
      f32({1, 4}, {static_cast<float>(-1.5 * k), static_cast<float>(-0.5 * 2 * k),
                   static_cast<float>(0.5 * k + 1), static_cast<float>(1.5 * 0.5 * k - 1)})));
  EXPECT_TRUE(all_close(out[1], f32({1, 1}, {2.5f})));
  EXPECT_TRUE(all_close(out[2], f32({1, 1}, {static_cast<float>(k)})));
}

TEST(LayerNormalization, f32_every_axis_with_and_without_bias) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 5}, 1);
  for (int64_t axis : {0, 1, 2, -1, -2, -3}) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const Shape normalized(x.shape().begin() + a, x.shape().end());
    const Tensor scale = random_tensor(DType::kF32, normalized, 2);
    const Tensor bias = random_tensor(DType::kF32, normalized, 3);
    for (bool with_bias : {false, true}) {
      const Expected e = naive_layer_norm(x, scale, with_bias ? &bias : nullptr, axis, 1e-5);
      std::vector<Tensor> out = run_op(
          "LayerNormalization", {x, scale, with_bias ? bias : Tensor()}, ln_attrs(axis, 1e-5), 3);
      EXPECT_TRUE(all_close(out[0], e.y)) << "axis " << axis << " bias " << with_bias;
      EXPECT_TRUE(all_close(out[1], e.mean)) << "axis " << axis;
      EXPECT_TRUE(all_close(out[2], e.inv_std)) << "axis " << axis;
      EXPECT_EQ(out[1].dtype(), DType::kF32);
    }
  }
}

TEST(LayerNormalization, f32_default_axis_and_epsilon) {
  // axis -1, epsilon 1e-5 (ONNX's defaults); a 4-D NHWC tensor as in ConvNeXt's blocks.
  const Tensor x = random_tensor(DType::kF32, {2, 3, 3, 8}, 4);
  const Tensor scale = random_tensor(DType::kF32, {8}, 5);
  const Expected e = naive_layer_norm(x, scale, nullptr, -1, 1e-5);
  EXPECT_TRUE(all_close(run_op("LayerNormalization", {x, scale})[0], e.y));
}

TEST(LayerNormalization, f32_scale_and_bias_broadcast_within_normalized_dims) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4}, 6);
  // axis 1 normalises [3, 4]: Scale [4] repeats along the 3, B [3, 1] along the 4, and a
  // Scale of rank 3 with a leading 1 is accepted as numpy broadcasts it.
  const Tensor scale = random_tensor(DType::kF32, {4}, 7);
  const Tensor bias = random_tensor(DType::kF32, {3, 1}, 8);
  const Expected e = naive_layer_norm(x, scale, &bias, 1, 1e-3);
  EXPECT_TRUE(all_close(run_op("LayerNormalization", {x, scale, bias}, ln_attrs(1, 1e-3))[0], e.y));
  const Tensor scale3 = scale.reshaped({1, 1, 4});
  EXPECT_TRUE(
      all_close(run_op("LayerNormalization", {x, scale3, bias}, ln_attrs(1, 1e-3))[0], e.y));
  const Tensor one = f32({1}, {1.5f});
  const Expected e1 = naive_layer_norm(x, one, nullptr, -1, 1e-5);
  EXPECT_TRUE(all_close(run_op("LayerNormalization", {x, one}, ln_attrs(-1, 1e-5))[0], e1.y));
}

TEST(LayerNormalization, two_outputs_give_y_and_mean) {
  const Tensor x = random_tensor(DType::kF32, {3, 6}, 9);
  const Tensor scale = random_tensor(DType::kF32, {6}, 10);
  const Expected e = naive_layer_norm(x, scale, nullptr, -1, 1e-5);
  std::vector<Tensor> out = run_op("LayerNormalization", {x, scale}, ln_attrs(-1, 1e-5), 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(all_close(out[0], e.y));
  EXPECT_TRUE(all_close(out[1], e.mean));
}

TEST(LayerNormalization, f16_bf16_f64_keep_their_dtype_stats_are_f32) {
  const Tensor x64 = random_tensor(DType::kF64, {4, 2, 6}, 11);
  const Tensor s64 = random_tensor(DType::kF64, {2, 6}, 12);
  const Tensor b64 = random_tensor(DType::kF64, {2, 6}, 13);
  struct Case {
    DType dtype;
    double rtol, atol;
  };
  for (const Case& c : {Case{DType::kF64, 1e-12, 1e-12}, Case{DType::kF16, 2e-3, 2e-3},
                        Case{DType::kBF16, 1e-2, 1e-2}}) {
    // The expected values start from the inputs as stored in the tested dtype.
    const Tensor x = x64.cast(c.dtype), s = s64.cast(c.dtype), b = b64.cast(c.dtype);
    const Expected e = naive_layer_norm(x, s, &b, 1, 1e-5);
    std::vector<Tensor> out = run_op("LayerNormalization", {x, s, b}, ln_attrs(1, 1e-5), 3);
    EXPECT_EQ(out[0].dtype(), c.dtype);
    EXPECT_EQ(out[1].dtype(), DType::kF32);
    EXPECT_EQ(out[2].dtype(), DType::kF32);
    EXPECT_TRUE(all_close(out[0], e.y, c.rtol, c.atol)) << dtype_name(c.dtype);
    EXPECT_TRUE(all_close(out[1], e.mean, 1e-6, 1e-7)) << dtype_name(c.dtype);
    EXPECT_TRUE(all_close(out[2], e.inv_std, 1e-6, 1e-7)) << dtype_name(c.dtype);
  }
}

TEST(LayerNormalization, rejects_bad_axis) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4}, 14), s = f32({4}, {1, 1, 1, 1});
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s}, {{"axis", int64_t{3}}});
      },
      "LayerNormalization 'node'", "axis 3 is out of range for rank 3");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s}, {{"axis", int64_t{-4}}});
      },
      "LayerNormalization 'node'", "axis -4 is out of range for rank 3");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {f32({}, {1}), f32({}, {1})});
      },
      "LayerNormalization 'node'", "input X has rank 0 [], expected rank at least 1");
}

TEST(LayerNormalization, rejects_scale_and_bias_that_do_not_fit_the_normalized_shape) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4}, 15);
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, f32({5}, {1, 1, 1, 1, 1})});
      },
      "LayerNormalization 'node'",
      "input Scale has shape [5], which does not broadcast to the normalized shape [4] (X's dims "
      "from axis 2)");
  // [3, 4] matches X's last two dims, but axis -1 normalises only the last: the 3 would
  // broadcast across rows.
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, random_tensor(DType::kF32, {3, 4}, 16)});
      },
      "LayerNormalization 'node'", "input Scale has shape [3,4], which does not broadcast");
  expect_user_error(
      [&] {
        run_op("LayerNormalization",
               {x, f32({4}, {1, 1, 1, 1}), random_tensor(DType::kF32, {1, 2, 3, 4}, 17)});
      },
      "LayerNormalization 'node'", "input B has shape [1,2,3,4], which does not broadcast");
}

TEST(LayerNormalization, rejects_wrong_dtypes_attributes_and_stash_type) {
  const Tensor x = random_tensor(DType::kF32, {2, 4}, 18), s = f32({4}, {1, 1, 1, 1});
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s.cast(DType::kF16)});
      },
      "LayerNormalization 'node'", "input Scale has dtype f16, expected the dtype of X (f32)");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s, s.cast(DType::kF64)});
      },
      "LayerNormalization 'node'", "input B has dtype f64, expected the dtype of X");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x.cast(DType::kI32), s.cast(DType::kI32)});
      },
      "LayerNormalization 'node'", "input X has dtype i32, expected f32, f16, bf16 or f64");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s}, {{"epsilon", std::string("1e-5")}});
      },
      "LayerNormalization 'node'", "attribute 'epsilon' is");
  expect_user_error(
      [&] {
        run_op("LayerNormalization", {x, s}, {{"stash_type", int64_t{16}}});
      },
      "LayerNormalization 'node'",
      "stash_type 16 is not supported; tessel computes and stores Mean and InvStdDev as f32");
}

}  // namespace
}  // namespace tessel
