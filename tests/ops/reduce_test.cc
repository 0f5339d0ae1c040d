// Tests of the reduce op family: Softmax and LogSoftmax (whose axis changed meaning at opset
// 13) and ReduceMean (whose axes moved from attribute to input at opset 18). Expected values
// are hand-computed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::expect_user_error;
using Ints = std::vector<int64_t>;

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }

Tensor log_of(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, std::log(t.get_f64(i)));
  return r;
}


// x (1, 2, 2) = [[0, ln 3], [ln 2, ln 2]], so exp(x) = [[1, 3], [2, 2]].
Tensor softmax_input() {
  return f32({1, 2, 2}, {0, std::log(3.0f), std::log(2.0f), std::log(2.0f)});
}

TEST(Softmax, f32_opset13_axis1_normalises_one_axis) {
  // Along axis 1 only: columns [1, 2] and [3, 2].
  Tensor y = run_op("Softmax", {softmax_input()}, {{"axis", int64_t{1}}}, 1, 13)[0];
  EXPECT_TRUE(all_close(y, f32({1, 2, 2}, {1.f / 3, 3.f / 5, 2.f / 3, 2.f / 5})));
}

TEST(Softmax, f32_opset11_axis1_coerces_to_2d) {
  // Dims [1, 3) flattened: one row [1, 3, 2, 2] with sum 8.
  Tensor y = run_op("Softmax", {softmax_input()}, {{"axis", int64_t{1}}}, 1, 11)[0];
  EXPECT_TRUE(all_close(y, f32({1, 2, 2}, {1.f / 8, 3.f / 8, 2.f / 8, 2.f / 8})));
}

TEST(Softmax, f32_default_axis_is_1_before_opset13_and_minus1_since) {
  Tensor x = softmax_input();
  EXPECT_TRUE(all_close(run_op("Softmax", {x}, {}, 1, 11)[0],
                        f32({1, 2, 2}, {1.f / 8, 3.f / 8, 2.f / 8, 2.f / 8})));
  // Rows [1, 3] and [2, 2].
  EXPECT_TRUE(all_close(run_op("Softmax", {x}, {}, 1, 13)[0],
                        f32({1, 2, 2}, {1.f / 4, 3.f / 4, 1.f / 2, 1.f / 2})));
  // Opset 12 still coerces: axis -1 covers only the last dim there as well.
  EXPECT_TRUE(all_close(run_op("Softmax", {x}, {{"axis", int64_t{-1}}}, 1, 12)[0],
                        f32({1, 2, 2}, {1.f / 4, 3.f / 4, 1.f / 2, 1.f / 2})));
  // Opset 11, axis 0: the whole tensor is one row.
  EXPECT_TRUE(all_close(run_op("Softmax", {x}, {{"axis", int64_t{0}}}, 1, 11)[0],
                        f32({1, 2, 2}, {1.f / 8, 3.f / 8, 2.f / 8, 2.f / 8})));
}

TEST(Softmax, f32_large_inputs_do_not_overflow) {
  Tensor y = run_op("Softmax", {f32({1, 2}, {1000, 1001})})[0];
  const double e = std::exp(1.0);
  EXPECT_TRUE(all_close(
      y, f32({1, 2}, {static_cast<float>(1 / (1 + e)), static_cast<float>(e / (1 + e))})));
}

TEST(Softmax, f16_and_f64_keep_their_dtype) {
  Tensor x64 = softmax_input().cast(DType::kF64);
  Tensor y64 = run_op("Softmax", {x64}, {{"axis", int64_t{1}}}, 1, 13)[0];
  ASSERT_EQ(y64.dtype(), DType::kF64);
  EXPECT_TRUE(all_close(
      y64, Tensor::from_doubles(DType::kF64, {1, 2, 2}, {1.0 / 3, 3.0 / 5, 2.0 / 3, 2.0 / 5}),
      1e-7));
  Tensor y16 = run_op("Softmax", {x64.cast(DType::kF16)}, {{"axis", int64_t{1}}}, 1, 13)[0];
  ASSERT_EQ(y16.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(y16, y64, 2e-3, 1e-3));
}

TEST(LogSoftmax, f32_opset11_vs_opset13_axis_semantics) {
  Tensor x = softmax_input();
  ir::Attributes axis1{{"axis", int64_t{1}}};
  EXPECT_TRUE(all_close(run_op("LogSoftmax", {x}, axis1, 1, 13)[0],
                        log_of(f32({1, 2, 2}, {1.f / 3, 3.f / 5, 2.f / 3, 2.f / 5}))));
  EXPECT_TRUE(all_close(run_op("LogSoftmax", {x}, axis1, 1, 11)[0],
                        log_of(f32({1, 2, 2}, {1.f / 8, 3.f / 8, 2.f / 8, 2.f / 8}))));
  // Stable for large inputs: log(1 / (1 + e)) = -log(1 + e).
  Tensor y = run_op("LogSoftmax", {f32({2}, {1000, 1001})})[0];
  const double l = std::log(1 + std::exp(1.0));
  EXPECT_TRUE(all_close(y, f32({2}, {static_cast<float>(-l), static_cast<float>(1 - l)})));
}

TEST(Softmax, rejects_bad_axis_and_dtype) {
  Tensor x = softmax_input();
  expect_user_error(
      [&] {
        run_op("Softmax", {x}, {{"axis", int64_t{3}}}, 1, 13);
      },
      "Softmax 'node'", "axis 3 out of range");
  // Coercion at axis == rank is legal before opset 13 (each element is its own row).
  EXPECT_TRUE(all_close(run_op("Softmax", {x}, {{"axis", int64_t{3}}}, 1, 11)[0],
                        f32({1, 2, 2}, {1, 1, 1, 1})));
  expect_user_error(
      [&] {
        run_op("LogSoftmax", {x}, {{"axis", int64_t{-4}}}, 1, 11);
      },
      "LogSoftmax 'node'", "axis -4 out of range");
  expect_user_error([&] { run_op("Softmax", {x.cast(DType::kI32)}); }, "Softmax 'node'",
                    "input input has dtype i32");
}

// ---- ReduceMean -----------------------------------------------------------------------------

// x (2, 2, 3) = 0..11.
Tensor reduce_input() { return f32({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}); }

TEST(ReduceMean, f32_axes_attribute_before_opset18) {
  Tensor x = reduce_input();
  EXPECT_TRUE(all_close(run_op("ReduceMean", {x}, {{"axes", Ints{1}}}, 1, 13)[0],
                        f32({2, 1, 3}, {1.5, 2.5, 3.5, 7.5, 8.5, 9.5})));
  EXPECT_TRUE(all_close(
      run_op("ReduceMean", {x}, {{"axes", Ints{0, -1}}, {"keepdims", int64_t{0}}}, 1, 13)[0],
      f32({2}, {4, 7})));
  // No axes: everything, keeping rank.
  EXPECT_TRUE(all_close(run_op("ReduceMean", {x}, {}, 1, 11)[0], f32({1, 1, 1}, {5.5})));
}

TEST(ReduceMean, f32_axes_input_since_opset18) {
  Tensor x = reduce_input();
  Tensor axes = Tensor::from_vector<int64_t>({2}, {2, 0});
  EXPECT_TRUE(all_close(run_op("ReduceMean", {x, axes}, {{"keepdims", int64_t{0}}}, 1, 18)[0],
                        f32({2}, {4, 7})));
  // Absent or empty axes reduce everything...
  EXPECT_TRUE(
      all_close(run_op("ReduceMean", {x}, {{"keepdims", int64_t{0}}}, 1, 18)[0], f32({}, {5.5})));
  Tensor none = Tensor::from_vector<int64_t>({0}, {});
  EXPECT_TRUE(all_close(run_op("ReduceMean", {x, none}, {}, 1, 18)[0], f32({1, 1, 1}, {5.5})));
  // ... unless noop_with_empty_axes makes the op the identity.
  EXPECT_TRUE(all_close(
      run_op("ReduceMean", {x, none}, {{"noop_with_empty_axes", int64_t{1}}}, 1, 18)[0], x));
}

TEST(ReduceMean, integer_means_truncate_and_floats_keep_dtype) {
  Tensor x = Tensor::from_vector<int32_t>({2, 2}, {1, 2, -4, -3});
  // Means 1.5 and -3.5 truncate toward zero, as ONNX's reference (numpy astype) does.
  EXPECT_EQ(
      run_op("ReduceMean", {x}, {{"axes", Ints{1}}, {"keepdims", int64_t{0}}})[0].to_i64_vector(),
      (std::vector<int64_t>{1, -3}));
  Tensor h = run_op("ReduceMean", {reduce_input().cast(DType::kF16)}, {{"axes", Ints{2}}})[0];
  ASSERT_EQ(h.dtype(), DType::kF16);
  EXPECT_TRUE(all_close(h, f32({2, 2, 1}, {1, 4, 7, 10})));
  Tensor d = run_op("ReduceMean", {reduce_input().cast(DType::kF64)}, {{"axes", Ints{0, 1}}})[0];
  ASSERT_EQ(d.dtype(), DType::kF64);
  EXPECT_TRUE(all_close(d, f32({1, 1, 3}, {4.5, 5.5, 6.5})));
}

TEST(ReduceMean, rejects_axes_in_the_wrong_place_and_bad_axes) {
  Tensor x = reduce_input();
  Tensor axes = Tensor::from_vector<int64_t>({1}, {1});
  expect_user_error(
      [&] {
        run_op("ReduceMean", {x}, {{"axes", Ints{1}}}, 1, 18);
      },
      "ReduceMean 'node'", "'axes' is input 1 since opset 18");
  expect_user_error(
      [&] {
        run_op("ReduceMean", {x, axes}, {}, 1, 13);
      },
      "ReduceMean 'node'", "'axes' is an attribute before opset 18");
  expect_user_error(
      [&] {
        run_op("ReduceMean", {x}, {{"axes", Ints{1, -2}}}, 1, 13);
      },
      "ReduceMean 'node'", "axis -2 is listed twice");
  expect_user_error(
      [&] {
        run_op("ReduceMean", {x}, {{"axes", Ints{3}}}, 1, 13);
      },
      "ReduceMean 'node'", "axis 3 out of range");
  expect_user_error(
      [&] {
        run_op("ReduceMean", {x, axes.cast(DType::kI32)}, {}, 1, 18);
      },
      "ReduceMean 'node'", "expected a 1-D i64 tensor");
  expect_user_error([&] { run_op("ReduceMean", {x.cast(DType::kU8)}); }, "ReduceMean 'node'",
                    "input data has dtype u8");
}

}  // namespace
}  // namespace tessel
