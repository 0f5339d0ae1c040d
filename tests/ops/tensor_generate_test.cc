// Tests of Expand, Tile, ConstantOfShape, Range, Size, GatherElements and CumSum
// (ops/tensor_generate.cc). Expected values are hand-computed; the GatherElements and CumSum
// cases include the examples of the ONNX spec.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::run1;
using testing::user_error;
using I64s = std::vector<int64_t>;

template <typename T>
Tensor t(Shape shape, const std::vector<T>& v) {
  return Tensor::from_vector<T>(std::move(shape), v);
}
Tensor f32(Shape shape, const std::vector<float>& v) { return t<float>(std::move(shape), v); }
Tensor i64(Shape shape, const std::vector<int64_t>& v) { return t<int64_t>(std::move(shape), v); }
I64s ints_of(const Tensor& x) { return x.to_i64_vector(); }



// ---- Expand ---------------------------------------------------------------------------------

TEST(Expand, BroadcastsBothWays) {
  // (3,1) against shape (2,1,4): the 1 in 'shape' keeps the input's 3.
  const Tensor y = run1("Expand", {f32({3, 1}, {1, 2, 3}), i64({3}, {2, 1, 4})});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.get_f64(i), 1 + (i / 4) % 3) << i;
  // A shape of lower rank than the input leaves it unchanged.
  EXPECT_TRUE(all_close(run1("Expand", {f32({2, 2}, {1, 2, 3, 4}), i64({1}, {1})}),
                        f32({2, 2}, {1, 2, 3, 4})));
  // A scalar, and an extent of 0.
  EXPECT_EQ(ints_of(run1("Expand", {t<int8_t>({}, {-3}), i64({2}, {1, 2})})), (I64s{-3, -3}));
  EXPECT_EQ(run1("Expand", {f32({2, 1}, {1, 2}), i64({2}, {2, 0})}).shape(), (Shape{2, 0}));
}

TEST(Expand, Errors) {
  const Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_CONTAINS(user_error([&] {
                    run1("Expand", {x, i64({2}, {4, 2})});
                  }),
                  "Expand 'node': shapes [3,2] and [4,2] do not broadcast");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Expand", {x, i64({2}, {-1, 2})});
                  }),
                  "Expand 'node': 'shape' [-1,2] has the negative value -1");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Expand", {x, f32({2}, {3, 2})});
                  }),
                  "Expand 'node': 'shape' has dtype f32");
}

// ---- Tile -----------------------------------------------------------------------------------

TEST(Tile, RepeatsEachAxis) {
  const Tensor y = run1("Tile", {t<int32_t>({2, 2}, {1, 2, 3, 4}), i64({2}, {2, 3})});
  ASSERT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(ints_of(y), (I64s{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,  //
                              1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(run1("Tile", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2}, {0, 2})}).shape(),
            (Shape{0, 6}));
}

TEST(Tile, Errors) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_CONTAINS(user_error([&] {
                    run1("Tile", {x, i64({1}, {2})});
                  }),
                  "Tile 'node': 'repeats' [2] has 1 values, expected one per input dimension (2)");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Tile", {x, i64({2}, {1, -2})});
                  }),
                  "Tile 'node': 'repeats' [1,-2] has the negative value -2");
}

// ---- ConstantOfShape and Size ---------------------------------------------------------------

TEST(ConstantOfShape, FillsWithTheValueDtype) {
  const Tensor zeros = run1("ConstantOfShape", {i64({2}, {2, 3})});
  EXPECT_TRUE(all_close(zeros, f32({2, 3}, {0, 0, 0, 0, 0, 0})));
  const Tensor sevens = run1("ConstantOfShape", {i64({1}, {3})}, {{"value", i64({1}, {-7})}});
  EXPECT_EQ(sevens.dtype(), DType::kI64);
  EXPECT_EQ(ints_of(sevens), (I64s{-7, -7, -7}));
  Tensor truth(DType::kBool, {1});
  truth.data<bool>()[0] = true;
  EXPECT_EQ(ints_of(run1("ConstantOfShape", {i64({2}, {1, 2})}, {{"value", truth}})), (I64s{1, 1}));
  // An empty shape gives a scalar, a 0 extent an empty tensor.
  const Tensor scalar = run1("ConstantOfShape", {i64({0}, {})},
                             {{"value", Tensor::from_doubles(DType::kF64, {1}, {2.5})}});
  EXPECT_EQ(scalar.shape(), Shape{});
  EXPECT_EQ(scalar.get_f64(0), 2.5);
  EXPECT_EQ(run1("ConstantOfShape", {i64({2}, {4, 0})}).shape(), (Shape{4, 0}));
}

TEST(ConstantOfShape, Errors) {
  EXPECT_CONTAINS(user_error([] {
                    run1("ConstantOfShape", {i64({1}, {2})}, {{"value", f32({2}, {1, 2})}});
                  }),
                  "ConstantOfShape 'node': 'value' is f32[2], expected a tensor of one element");
  EXPECT_CONTAINS(user_error([] { run1("ConstantOfShape", {t<int32_t>({1}, {2})}); }),
                  "ConstantOfShape 'node': input has type i32[1], expected a 1-D i64 shape");
  EXPECT_CONTAINS(user_error([] {
                    run1("ConstantOfShape", {i64({2}, {2, -1})});
                  }),
                  "ConstantOfShape 'node': 'input' [2,-1] has the negative value -1");
}

TEST(Size, CountsElements) {
  const Tensor n = run1("Size", {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(n.dtype(), DType::kI64);
  EXPECT_EQ(n.shape(), Shape{});
  EXPECT_EQ(n.get_i64(0), 6);
  EXPECT_EQ(run1("Size", {Tensor(DType::kU8, {4, 0})}).get_i64(0), 0);
  EXPECT_EQ(run1("Size", {t<int8_t>({}, {5})}).get_i64(0), 1);
}

// ---- Range ----------------------------------------------------------------------------------

TEST(Range, FloatAndIntegerSteps) {
  // ceil((5 - 1) / 1.5) = 3 elements.
  EXPECT_TRUE(all_close(run1("Range", {f32({}, {1}), f32({}, {5}), f32({}, {1.5f})}),
                        f32({3}, {1, 2.5f, 4})));
  // Negative float delta: ceil((-1 - 1) / -0.5) = 4.
  EXPECT_TRUE(all_close(run1("Range", {f32({}, {1}), f32({}, {-1}), f32({}, {-0.5f})}),
                        f32({4}, {1, 0.5f, 0, -0.5f})));
  // The ONNX example: range(10, 4, -3) = [10, 7].
  const Tensor i = run1("Range", {t<int32_t>({}, {10}), t<int32_t>({}, {4}), t<int32_t>({}, {-3})});
  EXPECT_EQ(i.dtype(), DType::kI32);
  EXPECT_EQ(ints_of(i), (I64s{10, 7}));
  // A limit behind the start gives an empty range; the extremes of int64 do not overflow.
  EXPECT_EQ(run1("Range", {i64({}, {5}), i64({}, {2}), i64({}, {1})}).shape(), (Shape{0}));
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ints_of(run1("Range", {i64({}, {lo}), i64({}, {hi}), i64({}, {hi})})),
            (I64s{lo, -1, hi - 1}));
}

TEST(Range, Errors) {
  EXPECT_CONTAINS(user_error([] {
                    run1("Range", {i64({}, {0}), i64({}, {4}), i64({}, {0})});
                  }),
                  "Range 'node': delta is 0");
  EXPECT_CONTAINS(user_error([] {
                    run1("Range", {f32({}, {0}), f32({}, {1}), f32({}, {0})});
                  }),
                  "Range 'node': delta is 0, expected a finite non-zero value");
  EXPECT_CONTAINS(user_error([] {
                    run1("Range", {f32({}, {0}), i64({}, {4}), i64({}, {1})});
                  }),
                  "Range 'node': inputs 0 and 1 must have the same dtype");
  EXPECT_CONTAINS(user_error([] {
                    run1("Range", {i64({2}, {0, 1}), i64({}, {4}), i64({}, {1})});
                  }),
                  "Range 'node': 'start' has shape [2], expected a scalar");
  EXPECT_CONTAINS(user_error([] {
                    run1("Range", {t<uint8_t>({}, {0}), t<uint8_t>({}, {4}), t<uint8_t>({}, {1})});
                  }),
                  "Range 'node': input 0 has dtype u8");
}

// ---- GatherElements -------------------------------------------------------------------------

TEST(GatherElements, SpecExamplesAndNegativeIndices) {
  // ONNX example 1: axis 1.
  EXPECT_TRUE(
      all_close(run1("GatherElements", {f32({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 0, 1, 0})},
                     {{"axis", int64_t{1}}}),
                f32({2, 2}, {1, 1, 4, 3})));
  // ONNX example 2: axis 0, indices (2,3) into data (3,3); -1 is the last row.
  const Tensor data = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(all_close(run1("GatherElements", {data, i64({2, 3}, {1, 2, 0, 2, 0, -1})}),
                        f32({2, 3}, {4, 8, 3, 7, 2, 9})));
}

TEST(GatherElements, IndicesSmallerThanDataOffTheAxis) {
  // data (2,3,4) = 0..23, axis -1, indices (1,2,1) of i32: out[0,j,0] = data[0, j, idx].
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = i;
  const Tensor y =
      run1("GatherElements", {t<int32_t>({2, 3, 4}, v), t<int32_t>({1, 2, 1}, {2, -4})},
           {{"axis", int64_t{-1}}});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(ints_of(y), (I64s{2, 4}));
}

TEST(GatherElements, Errors) {
  const Tensor data = f32({2, 2}, {1, 2, 3, 4});
  EXPECT_CONTAINS(
      user_error([&] {
        run1("GatherElements", {data, i64({2, 2}, {0, 2, 1, 0})}, {{"axis", int64_t{1}}});
      }),
      "GatherElements 'node': index 2 is out of range for axis 1 of extent 2");
  EXPECT_CONTAINS(user_error([&] {
                    run1("GatherElements", {data, i64({2}, {0, 1})});
                  }),
                  "GatherElements 'node': indices [2] must have the rank of data [2,2]");
  EXPECT_CONTAINS(user_error([&] {
                    run1("GatherElements", {data, i64({1, 3}, {0, 1, 0})});
                  }),
                  "GatherElements 'node': indices [1,3] exceed data [2,2] along axis 1");
  EXPECT_CONTAINS(user_error([&] {
                    run1("GatherElements", {data, i64({1, 1}, {0})}, {{"axis", int64_t{2}}});
                  }),
                  "GatherElements 'node': axis 2 is out of range for rank 2");
}

// ---- CumSum ---------------------------------------------------------------------------------

TEST(CumSum, ExclusiveAndReverse) {
  const Tensor x = t<double>({5}, {1, 2, 3, 4, 5}), axis = t<int32_t>({}, {0});
  auto run = [&](int64_t exclusive, int64_t reverse) {
    return ints_of(run1("CumSum", {x, axis}, {{"exclusive", exclusive}, {"reverse", reverse}}));
  };
  EXPECT_EQ(run(0, 0), (I64s{1, 3, 6, 10, 15}));
  EXPECT_EQ(run(1, 0), (I64s{0, 1, 3, 6, 10}));
  EXPECT_EQ(run(0, 1), (I64s{15, 14, 12, 9, 5}));
  EXPECT_EQ(run(1, 1), (I64s{14, 12, 9, 5, 0}));
}

TEST(CumSum, AxesOf2dAndDtypes) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(all_close(run1("CumSum", {x, i64({}, {0})}), f32({2, 3}, {1, 2, 3, 5, 7, 9})));
  EXPECT_TRUE(all_close(run1("CumSum", {x, i64({1}, {-1})}), f32({2, 3}, {1, 3, 6, 4, 9, 15})));
  // Integers wrap around like numpy's in-type cumsum.
  const int32_t max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(ints_of(run1("CumSum", {t<int32_t>({2}, {max, 2}), i64({}, {0})})),
            (I64s{max, std::numeric_limits<int32_t>::min() + 1}));
  const Tensor h =
      run1("CumSum", {Tensor::from_doubles(DType::kBF16, {3}, {0.5, 1, 2}), i64({}, {0})});
  EXPECT_TRUE(bitwise_equal(h, Tensor::from_doubles(DType::kBF16, {3}, {0.5, 1.5, 3.5})));
}

TEST(CumSum, Errors) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_CONTAINS(user_error([&] {
                    run1("CumSum", {x, i64({}, {2})});
                  }),
                  "CumSum 'node': axis 2 is out of range for rank 2");
  EXPECT_CONTAINS(user_error([&] {
                    run1("CumSum", {x, i64({2}, {0, 1})});
                  }),
                  "CumSum 'node': 'axis' has shape [2], expected a scalar");
  EXPECT_CONTAINS(user_error([&] {
                    run1("CumSum", {t<int8_t>({1}, {1}), i64({}, {0})});
                  }),
                  "CumSum 'node': input 0 has dtype i8");
}

}  // namespace
}  // namespace tessel
