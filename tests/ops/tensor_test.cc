// Tests of the tensor op family (ops/tensor.cc, ops/tensor_indexing.cc, ops/resize_ops.cc).
// Expected values are hand-computed unless a comment says they come from onnxruntime 1.20 or
// ONNX's reference implementation (onnx.reference, onnx 1.17).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <numeric>
#include <string>

#include "ir/infer.h"
#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run_op;
using testing::run1;
using testing::user_error;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor f32(Shape shape, const std::vector<float>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor i64(Shape shape, const std::vector<int64_t>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor i64s(const std::vector<int64_t>& v) { return i64({static_cast<int64_t>(v.size())}, v); }
// 0, 1, 2, ... in the given shape.
Tensor iota_f32(Shape shape) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return f32(std::move(shape), v);
}
std::vector<float> values(const Tensor& t) { return t.to_f32_vector(); }



// ---- Shape, Flatten, Reshape, Squeeze, Unsqueeze ---------------------------------------------

TEST(Shape, StartAndEndOfOpset15) {
  Tensor x(DType::kF32, {2, 3, 4});
  EXPECT_EQ(run1("Shape", {x}).to_i64_vector(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(run1("Shape", {x}, {{"start", int64_t{-1}}}).to_i64_vector(),
            (std::vector<int64_t>{4}));
  EXPECT_EQ(run1("Shape", {x}, {{"end", int64_t{-1}}}).to_i64_vector(),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(run1("Shape", {x}, {{"start", int64_t{1}}, {"end", int64_t{2}}}).to_i64_vector(),
            (std::vector<int64_t>{3}));
  // Out-of-range values clamp; an empty range gives an empty shape.
  EXPECT_EQ(run1("Shape", {x}, {{"start", int64_t{-10}}, {"end", int64_t{10}}}).to_i64_vector(),
            (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(run1("Shape", {x}, {{"start", int64_t{2}}, {"end", int64_t{1}}}).shape(), (Shape{0}));
}

TEST(Flatten, AxisSplitsTheShape) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor y = run1("Flatten", {x}, {{"axis", int64_t{0}}});
  EXPECT_EQ(y.shape(), (Shape{1, 24}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(run1("Flatten", {x}).shape(), (Shape{2, 12}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", int64_t{-1}}}).shape(), (Shape{6, 4}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", int64_t{3}}}).shape(), (Shape{24, 1}));
}

TEST(Reshape, ZeroCopiesAndMinusOneInfers) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor y = run1("Reshape", {x, i64s({0, -1})});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(run1("Reshape", {x, i64s({-1, 0, 2})}).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(run1("Reshape", {iota_f32({1}), i64s({})}).shape(), (Shape{}));
}

TEST(Reshape, AllowzeroKeepsZeros) {
  Tensor empty(DType::kF32, {0, 3});
  // allowzero=1: a 0 is a real extent of 0.
  EXPECT_EQ(run1("Reshape", {empty, i64s({3, 0})}, {{"allowzero", int64_t{1}}}).shape(),
            (Shape{3, 0}));
  // allowzero=0: the 0 copies input dim 1 (3), and -1 resolves to 0 elements / 3.
  EXPECT_EQ(run1("Reshape", {empty, i64s({-1, 0})}).shape(), (Shape{0, 3}));
  std::string msg = user_error([&] {
    run1("Reshape", {empty, i64s({0, -1})}, {{"allowzero", int64_t{1}}});
  });
  EXPECT_CONTAINS(msg, "Reshape 'node'");
}

TEST(Reshape, TwoWildcardsAreUserError) {
  std::string msg = user_error([] { run1("Reshape", {iota_f32({2, 3}), i64s({-1, -1})}); });
  EXPECT_CONTAINS(msg, "Reshape 'node'");
  EXPECT_CONTAINS(msg, "more than one -1");
}

TEST(Reshape, ElementCountMismatchIsUserError) {
  std::string msg = user_error([] { run1("Reshape", {iota_f32({2, 3}), i64s({4, 2})}); });
  EXPECT_CONTAINS(msg, "Reshape 'node'");
  EXPECT_CONTAINS(msg, "[4,2]");
}

TEST(Squeeze, AxesAttributeBeforeOpset13AndInputSince) {
  Tensor x = iota_f32({1, 3, 1, 2});
  EXPECT_EQ(run1("Squeeze", {x}, {{"axes", std::vector<int64_t>{0}}}, 11).shape(),
            (Shape{3, 1, 2}));
  EXPECT_EQ(run1("Squeeze", {x, i64s({-2})}, {}, 13).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(run1("Squeeze", {x}, {}, 13).shape(), (Shape{3, 2}));
  EXPECT_CONTAINS(user_error([&] { run1("Squeeze", {x, i64s({1})}, {}, 13); }), "axis 1");
  EXPECT_CONTAINS(user_error([&] {
                    run1("Squeeze", {x, i64s({0})}, {}, 11);
                  }),
                  "attribute before opset 13");
}

TEST(Unsqueeze, AxesRefersToTheOutput) {
  Tensor x = iota_f32({3, 4});
  EXPECT_EQ(run1("Unsqueeze", {x}, {{"axes", std::vector<int64_t>{0, 3}}}, 11).shape(),
            (Shape{1, 3, 4, 1}));
  // Negative axes count from the back of the output; order does not matter.
  EXPECT_EQ(run1("Unsqueeze", {x, i64s({-1, 1})}, {}, 13).shape(), (Shape{3, 1, 4, 1}));
  EXPECT_CONTAINS(user_error([&] { run1("Unsqueeze", {x, i64s({1, 1})}, {}, 13); }), "repeated");
}

// ---- Transpose, DepthToSpace, SpaceToDepth ----------------------------------------------------

TEST(Transpose, DefaultReversesDimensions) {
  Tensor y = run1("Transpose", {iota_f32({2, 3})});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Transpose, NchwToNhwcAndIntegers) {
  // out[n][h][w][c] = x[n][c][h][w] = ((n*3 + c)*2 + h)*2 + w.
  Tensor y =
      run1("Transpose", {iota_f32({2, 3, 2, 2})}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  ASSERT_EQ(y.shape(), (Shape{2, 2, 2, 3}));
  std::vector<float> want;
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w)
        for (int c = 0; c < 3; ++c)
          want.push_back(static_cast<float>(((n * 3 + c) * 2 + h) * 2 + w));
  EXPECT_EQ(values(y), want);
  Tensor b = Tensor::from_vector<int8_t>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run1("Transpose", {b}).to_i64_vector(), (std::vector<int64_t>{1, 3, 2, 4}));
}

TEST(Transpose, BadPermIsUserErrorNamingNode) {
  std::string msg = user_error([] {
    run1("Transpose", {iota_f32({2, 3, 4})}, {{"perm", std::vector<int64_t>{0, 0, 1}}});
  });
  EXPECT_CONTAINS(msg, "Transpose 'node'");
  EXPECT_CONTAINS(msg, "perm [0,0,1]");
  EXPECT_CONTAINS(
      user_error([] {
        run1("Transpose", {iota_f32({2, 3})}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
      }),
      "not a permutation");
}

TEST(DepthToSpace, DcrAndCrdOrderChannelsDifferently) {
  // x[0][c][0][0] = c for c < 8, blocksize 2 -> [1,2,2,2].
  Tensor x = iota_f32({1, 8, 1, 1});
  // DCR: out[c][i][j] = x[(i*2 + j)*2 + c].
  Tensor dcr = run1("DepthToSpace", {x}, {{"blocksize", int64_t{2}}, {"mode", std::string("DCR")}});
  EXPECT_EQ(dcr.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(values(dcr), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  // CRD: out[c][i][j] = x[c*4 + i*2 + j].
  Tensor crd = run1("DepthToSpace", {x}, {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}});
  EXPECT_EQ(values(crd), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  // DCR is the default.
  EXPECT_TRUE(bitwise_equal(run1("DepthToSpace", {x}, {{"blocksize", int64_t{2}}}), dcr));
}

TEST(SpaceToDepth, InvertsDepthToSpaceDcr) {
  Tensor x = iota_f32({2, 3, 4, 6});
  Tensor s = run1("SpaceToDepth", {x}, {{"blocksize", int64_t{2}}});
  EXPECT_EQ(s.shape(), (Shape{2, 12, 2, 3}));
  // out[0][(bh*2 + bw)*3 + c][h][w] = x[0][c][h*2 + bh][w*2 + bw]: channel 4 is (bh 0, bw 1, c 1).
  EXPECT_EQ(s.data<float>()[4 * 6], x.data<float>()[1 * 24 + 0 * 6 + 1]);
  EXPECT_TRUE(bitwise_equal(run1("DepthToSpace", {s}, {{"blocksize", int64_t{2}}}), x));
  EXPECT_CONTAINS(user_error([&] {
                    run1("SpaceToDepth", {x}, {{"blocksize", int64_t{4}}});
                  }),
                  "SpaceToDepth 'node'");
}

// ---- Gather, Concat, Split ----------------------------------------------------------------------

TEST(Gather, AnyAxisWithNegativeIndices) {
  Tensor x = iota_f32({3, 4});
  Tensor rows = run1("Gather", {x, i64({2}, {-1, 0})});
  EXPECT_EQ(rows.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(rows), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  Tensor idx = Tensor::from_vector<int32_t>({2, 1}, {3, -3});
  Tensor cols = run1("Gather", {x, idx}, {{"axis", int64_t{1}}});
  EXPECT_EQ(cols.shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(values(cols), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  // A scalar index drops the axis.
  EXPECT_EQ(run1("Gather", {x, i64({}, {1})}, {{"axis", int64_t{1}}}).shape(), (Shape{3}));
}

TEST(Gather, OutOfRangeIndexIsUserError) {
  std::string msg = user_error([] { run1("Gather", {iota_f32({3}), i64({1}, {3})}); });
  EXPECT_CONTAINS(msg, "Gather 'node'");
  EXPECT_CONTAINS(msg, "index 3");
}

TEST(Concat, JoinsAlongAxis) {
  Tensor a = iota_f32({2, 1}), b = f32({2, 2}, {10, 11, 12, 13});
  Tensor y = run1("Concat", {a, b}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{0, 10, 11, 1, 12, 13}));
  Tensor u = Tensor::from_vector<uint8_t>({1, 2}, {7, 8});
  EXPECT_EQ(run1("Concat", {u, u, u}, {{"axis", int64_t{0}}}).to_i64_vector(),
            (std::vector<int64_t>{7, 8, 7, 8, 7, 8}));
}

TEST(Concat, MismatchedShapesAreUserError) {
  std::string msg = user_error([] {
    run1("Concat", {iota_f32({2, 2}), iota_f32({3, 2})}, {{"axis", int64_t{1}}});
  });
  EXPECT_CONTAINS(msg, "Concat 'node'");
  EXPECT_CONTAINS(msg, "input 1");
}

TEST(Split, AttributeBeforeOpset13) {
  std::vector<Tensor> y =
      run_op("Split", {iota_f32({5})}, {{"split", std::vector<int64_t>{2, 3}}}, 2, 11);
  EXPECT_EQ(values(y[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(values(y[1]), (std::vector<float>{2, 3, 4}));
}

TEST(Split, InputSinceOpset13AndEqualParts) {
  Tensor x = iota_f32({2, 4});
  std::vector<Tensor> y = run_op("Split", {x, i64s({1, 3})}, {{"axis", int64_t{1}}}, 2, 13);
  EXPECT_EQ(values(y[0]), (std::vector<float>{0, 4}));
  EXPECT_EQ(values(y[1]), (std::vector<float>{1, 2, 3, 5, 6, 7}));
  std::vector<Tensor> halves = run_op("Split", {x}, {{"axis", int64_t{1}}}, 2, 13);
  EXPECT_EQ(values(halves[1]), (std::vector<float>{2, 3, 6, 7}));
  EXPECT_CONTAINS(user_error([&] {
                    run_op("Split", {x}, {{"axis", int64_t{1}}}, 3, 13);
                  }),
                  "does not split evenly");
}

TEST(Split, NumOutputsOfOpset18GivesASmallerLastPart) {
  std::vector<Tensor> y = run_op("Split", {iota_f32({5})}, {{"num_outputs", int64_t{3}}}, 3, 18);
  EXPECT_EQ(y[0].shape(), (Shape{2}));
  EXPECT_EQ(y[1].shape(), (Shape{2}));
  EXPECT_EQ(values(y[2]), (std::vector<float>{4}));
}

TEST(Split, SizesMustSumToTheAxis) {
  std::string msg = user_error([] { run_op("Split", {iota_f32({5}), i64s({2, 2})}, {}, 2, 13); });
  EXPECT_CONTAINS(msg, "Split 'node'");
  EXPECT_CONTAINS(msg, "sum to the axis extent 5");
}

// ---- Slice ------------------------------------------------------------------------------------

TEST(Slice, StepsAndAxes) {
  Tensor x = iota_f32({3, 4});
  Tensor y = run1("Slice", {x, i64s({1, 0}), i64s({3, 4}), i64s({0, 1}), i64s({1, 2})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{4, 6, 8, 10}));
  // Negative axes; omitted axes are taken whole.
  Tensor z = run1("Slice", {x, i64s({-2}), i64s({kMax}), i64s({-1})});
  EXPECT_EQ(values(z), (std::vector<float>{2, 3, 6, 7, 10, 11}));
}

TEST(Slice, NegativeStepsWalkBackwards) {
  Tensor x = iota_f32({5});
  // The whole axis reversed: start -1, end INT64_MIN (clamped to -1, i.e. before element 0).
  EXPECT_EQ(values(run1("Slice", {x, i64s({-1}), i64s({kMin}), i64s({0}), i64s({-1})})),
            (std::vector<float>{4, 3, 2, 1, 0}));
  // start 3 down to (not including) 0 in steps of 2: 3, 1.
  EXPECT_EQ(values(run1("Slice", {x, i64s({3}), i64s({0}), i64s({0}), i64s({-2})})),
            (std::vector<float>{3, 1}));
  // start beyond the end clamps to extent-1 for a negative step.
  EXPECT_EQ(values(run1("Slice", {x, i64s({100}), i64s({2}), i64s({0}), i64s({-1})})),
            (std::vector<float>{4, 3}));
}

TEST(Slice, ClampingAndEmptyResults) {
  Tensor x = iota_f32({5});
  EXPECT_EQ(values(run1("Slice", {x, i64s({-100}), i64s({100})})),
            (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run1("Slice", {x, i64s({4}), i64s({2})}).shape(), (Shape{0}));
  EXPECT_EQ(run1("Slice", {x, i64s({10}), i64s({20})}).shape(), (Shape{0}));
  EXPECT_EQ(run1("Slice", {x, i64s({1}), i64s({3}), i64s({0}), i64s({-1})}).shape(), (Shape{0}));
  EXPECT_CONTAINS(user_error([&] {
                    run1("Slice", {x, i64s({0}), i64s({3}), i64s({0}), i64s({0})});
                  }),
                  "step 0");
}

// ---- Pad --------------------------------------------------------------------------------------

TEST(Pad, ConstantWithValue) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor y = run1("Pad", {x, i64s({0, 1, 1, 0}), f32({}, {9})});
  EXPECT_EQ(y.shape(), (Shape{3, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9}));
  // Omitted constant_value: 0.
  EXPECT_EQ(values(run1("Pad", {f32({1}, {5}), i64s({1, 1})})), (std::vector<float>{0, 5, 0}));
}

TEST(Pad, ReflectAndEdge) {
  Tensor x = f32({3}, {1, 2, 3});
  ir::Attributes reflect = {{"mode", std::string("reflect")}};
  EXPECT_EQ(values(run1("Pad", {x, i64s({2, 2})}, reflect)),
            (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  // Wider than the axis: the mirror repeats, as numpy.pad(..., 'reflect') does:
  // np.pad([1,2,3], 5, 'reflect') = [2,1,2,3,2,1,2,3,2,1,2,3,2] (computed with numpy).
  EXPECT_EQ(values(run1("Pad", {x, i64s({5, 5})}, reflect)),
            (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(values(run1("Pad", {x, i64s({2, 1})}, {{"mode", std::string("edge")}})),
            (std::vector<float>{1, 1, 1, 2, 3, 3}));
  // 2-D reflect, the ONNX spec's example 2.
  Tensor m = f32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  EXPECT_TRUE(all_close(
      run1("Pad", {m, i64s({0, 2, 0, 0})}, reflect),
      f32({3, 4}, {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f})));
}

TEST(Pad, NegativePadsCrop) {
  Tensor x = iota_f32({2, 4});
  Tensor y = run1("Pad", {x, i64s({0, -1, 1, 2})});
  EXPECT_EQ(y.shape(), (Shape{3, 5}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 2, 3, 0, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_CONTAINS(user_error([&] { run1("Pad", {x, i64s({0, -3, 0, -2})}); }), "Pad 'node'");
}

TEST(Pad, AxesInputOfOpset18) {
  Tensor x = Tensor::from_vector<int32_t>({2, 2}, {1, 2, 3, 4});
  Tensor y =
      run1("Pad", {x, i64s({1, 0}), Tensor::from_vector<int32_t>({}, {-1}), i64s({-1})}, {}, 18);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{-1, 1, 2, -1, 3, 4}));
  EXPECT_CONTAINS(user_error([&] {
                    run1("Pad", {x, i64s({1, 0}), Tensor(), i64s({1})}, {}, 13);
                  }),
                  "opset 18");
}

TEST(Pad, UnknownModeIsUserError) {
  std::string msg = user_error([] {
    run1("Pad", {iota_f32({2}), i64s({1, 1})}, {{"mode", std::string("wrap")}});
  });
  EXPECT_CONTAINS(msg, "Pad 'node'");
  EXPECT_CONTAINS(msg, "'wrap'");
}

// ---- Resize, Upsample -------------------------------------------------------------------------

Tensor resize(const Tensor& x, const Tensor& roi, const Tensor& scales, const Tensor& sizes,
              ir::Attributes attrs, int64_t opset = 18) {
  return run1("Resize", {x, roi, scales, sizes}, std::move(attrs), opset);
}

TEST(Resize, NearestCoordinateAndRoundingModes) {
  // [1,2,3,4] resized to 7 along the last axis. Expected values from onnxruntime 1.20, which
  // agree with ONNX's reference implementation.
  const Tensor x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  const Tensor sizes = i64s({1, 1, 1, 7});
  struct Case {
    const char* coord;
    const char* nearest;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"half_pixel", "round_prefer_floor", {1, 1, 2, 2, 3, 4, 4}},
      {"half_pixel", "round_prefer_ceil", {1, 1, 2, 3, 3, 4, 4}},
      {"half_pixel", "floor", {1, 1, 1, 2, 3, 3, 4}},
      {"half_pixel", "ceil", {1, 2, 2, 3, 4, 4, 4}},
      {"align_corners", "round_prefer_floor", {1, 1, 2, 2, 3, 3, 4}},
      {"align_corners", "round_prefer_ceil", {1, 2, 2, 3, 3, 4, 4}},
      {"asymmetric", "floor", {1, 1, 2, 2, 3, 3, 4}},
      {"asymmetric", "ceil", {1, 2, 3, 3, 4, 4, 4}},
      {"pytorch_half_pixel", "round_prefer_ceil", {1, 1, 2, 3, 3, 4, 4}},
      {"half_pixel_symmetric", "floor", {1, 1, 1, 2, 3, 3, 4}},
  };
  for (const Case& c : cases) {
    Tensor y = resize(x, Tensor(), Tensor(), sizes,
                      {{"mode", std::string("nearest")},
                       {"coordinate_transformation_mode", std::string(c.coord)},
                       {"nearest_mode", std::string(c.nearest)}});
    EXPECT_EQ(values(y), c.want) << c.coord << " " << c.nearest;
  }
}

// tf_half_pixel_for_nn (opsets 11-12) moves a resized axis by half a pixel; the batch and
// channel axes, scaled by 1, stay where they are. Expected values from onnxruntime 1.20: 2
// images of 2 channels, each row of 2 resized to 4 by scale 2.
TEST(Resize, TfHalfPixelForNnLeavesUnresizedAxes) {
  const Tensor x = f32({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor y = resize(x, f32({0}, {}), f32({4}, {1, 1, 1, 2}), Tensor(),
                    {{"mode", std::string("nearest")},
                     {"coordinate_transformation_mode", std::string("tf_half_pixel_for_nn")},
                     {"nearest_mode", std::string("round_prefer_ceil")}},
                    11);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 1, 4}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7, 8, 8, 8}));
}

TEST(Resize, LinearCoordinateModes) {
  // [[1,2],[3,4]] to 3x4. Expected values from onnxruntime 1.20 (agreeing with ONNX's reference).
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor sizes = i64s({1, 1, 3, 4});
  struct Case {
    const char* coord;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"half_pixel", {1, 1.25f, 1.75f, 2, 2, 2.25f, 2.75f, 3, 3, 3.25f, 3.75f, 4}},
      {"align_corners",
       {1, 1.3333333f, 1.6666667f, 2, 2, 2.3333333f, 2.6666667f, 3, 3, 3.3333333f, 3.6666665f, 4}},
      {"asymmetric",
       {1, 1.5f, 2, 2, 2.3333333f, 2.8333335f, 3.3333335f, 3.3333335f, 3, 3.5f, 4, 4}},
      {"pytorch_half_pixel", {1, 1.25f, 1.75f, 2, 2, 2.25f, 2.75f, 3, 3, 3.25f, 3.75f, 4}},
  };
  for (const Case& c : cases) {
    Tensor y = resize(x, Tensor(), Tensor(), sizes,
                      {{"mode", std::string("linear")},
                       {"coordinate_transformation_mode", std::string(c.coord)}});
    EXPECT_TRUE(all_close(y, f32({1, 1, 3, 4}, c.want))) << c.coord;
  }
}

TEST(Resize, ScalesFloorTheOutputExtent) {
  // 3x3 by scales (0.6, 1.5) -> floor(1.8) x floor(4.5) = 1x4. Expected values from
  // onnxruntime 1.20, agreeing with ONNX's reference.
  const Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor scales = f32({4}, {1, 1, 0.6f, 1.5f});
  Tensor nearest = resize(x, Tensor(), scales, Tensor(), {{"mode", std::string("nearest")}});
  EXPECT_EQ(values(nearest), (std::vector<float>{1, 1, 2, 3}));
  Tensor linear = resize(x, Tensor(), scales, Tensor(), {{"mode", std::string("linear")}});
  EXPECT_TRUE(all_close(linear, f32({1, 1, 1, 4}, {2, 2.5f, 3.1666665f, 3.833333f})));
}

TEST(Resize, TfCropAndResizeExtrapolates) {
  // x[r][c] = 3r + c + 1. roi rows [0.4, 1.2], cols [0.6, 1.7] of a 3x3 input -> source rows
  // 0.8, 1.6, 2.4 and columns 1.2, 2.3, 3.4; anything beyond 2 is the extrapolation value 10.
  // Linear: 3*0.8 + 1.2 + 1 = 4.6 and 3*1.6 + 1.2 + 1 = 7 (x is linear in r and c). Nearest
  // rounds (0.8, 1.2) to (1, 1) -> 5 and (1.6, 1.2) to (2, 1) -> 8. ONNX's reference agrees.
  const Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor roi = f32({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  const Tensor sizes = i64s({1, 1, 3, 3});
  ir::Attributes attrs = {{"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                          {"extrapolation_value", 10.0}};
  attrs["mode"] = std::string("linear");
  EXPECT_TRUE(all_close(resize(x, roi, Tensor(), sizes, attrs),
                        f32({1, 1, 3, 3}, {4.6f, 10, 10, 7, 10, 10, 10, 10, 10})));
  attrs["mode"] = std::string("nearest");
  EXPECT_EQ(values(resize(x, roi, Tensor(), sizes, attrs)),
            (std::vector<float>{5, 10, 10, 8, 10, 10, 10, 10, 10}));
}

TEST(Resize, AxesAndKeepAspectRatioOfOpset18) {
  // Expected values from onnxruntime 1.20 (agreeing with ONNX's reference).
  const Tensor x = f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  // sizes (W 9, H 4) with not_larger: scale min(9/3, 4/2) = 2 -> 4x6.
  Tensor y = resize(x, Tensor(), Tensor(), i64s({9, 4}),
                    {{"axes", std::vector<int64_t>{3, 2}},
                     {"keep_aspect_ratio_policy", std::string("not_larger")}});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 6}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3,
                                           4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6}));
  Tensor z = resize(x, Tensor(), f32({2}, {2, 1}), Tensor(),
                    {{"axes", std::vector<int64_t>{3, 2}}, {"mode", std::string("linear")}});
  EXPECT_TRUE(all_close(
      z, f32({1, 1, 2, 6}, {1, 1.25f, 1.75f, 2.25f, 2.75f, 3, 4, 4.25f, 4.75f, 5.25f, 5.75f, 6})));
}

TEST(Resize, NearestMovesIntegersExactly) {
  // From onnxruntime 1.20.
  Tensor x = Tensor::from_vector<int8_t>({1, 1, 2, 2}, {-5, 7, 100, -128});
  Tensor y = resize(x, Tensor(), f32({4}, {1, 1, 1.5f, 1.5f}), Tensor(), {});
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{-5, -5, 7, -5, -5, 7, 100, 100, -128}));
}

TEST(Resize, Opset10IsUpsampleWithCeilWhenDownsampling) {
  // ONNX 1.5's test_resize_downsample_nearest (opset 10): scales 0.6 give [[1, 3]].
  Tensor y =
      run1("Resize", {f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), f32({4}, {1, 1, 0.6f, 0.6f})},
           {}, 10);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 3}));
}

TEST(Resize, Opset11TakesEmptyScalesWithSizes) {
  Tensor y = run1("Resize", {f32({1, 2}, {1, 2}), f32({0}, {}), f32({0}, {}), i64s({1, 4})},
                  {{"coordinate_transformation_mode", std::string("asymmetric")}}, 11);
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 2, 2}));
}

// [1, 2, 4, 8] to 7 along the last axis, cubic. Expected values from ONNX 1.17's reference
// implementation (onnx.reference, op_resize.py).
TEST(Resize, CubicCoordinateModesAndCoefficient) {
  const Tensor x = f32({1, 1, 1, 4}, {1, 2, 4, 8});
  const Tensor sizes = i64s({1, 1, 1, 7});
  struct Case {
    ir::Attributes attrs;
    std::vector<float> want;
  };
  auto cubic = [](const char* coord) -> ir::Attributes {
    return {{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string(coord)}};
  };
  ir::Attributes outside = cubic("half_pixel");
  outside["cubic_coeff_a"] = -0.5;
  outside["exclude_outside"] = int64_t{1};
  const std::vector<Case> cases = {
      {cubic("half_pixel"),
       {0.90078354f, 1.2177478f, 1.8504009f, 2.71875f, 4.321246f, 6.7600217f, 8.396866f}},
      {cubic("align_corners"), {1, 1.3125f, 2, 2.71875f, 4, 6.1875f, 8}},
      {cubic("asymmetric"),
       {1, 1.3702624f, 2.2682216f, 3.0787172f, 5.2740526f, 7.542274f, 8.4198246f}},
      {outside, {0.92067307f, 1.2256916f, 1.8932921f, 2.8125f, 4.2425013f, 6.868149f, 8.317307f}},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(all_close(resize(x, Tensor(), Tensor(), sizes, cases[i].attrs),
                          f32({1, 1, 1, 7}, cases[i].want)))
        << "case " << i;
}

// Cubic is separable: a 2-D resize is the product of the 1-D taps (ONNX's reference agrees).
TEST(Resize, Cubic2D) {
  Tensor y = resize(f32({1, 1, 2, 2}, {1, 2, 3, 4}), Tensor(), Tensor(), i64s({1, 1, 3, 3}),
                    {{"mode", std::string("cubic")}});
  EXPECT_TRUE(all_close(y, f32({1, 1, 3, 3}, {0.7395833f, 1.3263888f, 1.9131944f, 1.9131944f, 2.5f,
                                              3.0868056f, 3.0868056f, 3.6736112f, 4.2604165f})));
}

// Opset 18's antialias widens the linear and cubic filters by 1 / scale when downsampling
// (8 -> 3 here) and changes nothing when upsampling. From ONNX 1.17's reference.
TEST(Resize, AntialiasDownsampling) {
  const Tensor x = f32({1, 1, 1, 8}, {1, 2, 4, 8, 16, 8, 4, 2});
  const Tensor sizes = i64s({1, 1, 1, 3});
  auto aa = [](const char* mode, int64_t exclude) -> ir::Attributes {
    return {{"mode", std::string(mode)}, {"antialias", int64_t{1}}, {"exclude_outside", exclude}};
  };
  EXPECT_TRUE(all_close(resize(x, Tensor(), Tensor(), sizes, aa("linear", 0)),
                        f32({1, 1, 1, 3}, {2.4651163f, 9.571428f, 4.9302325f})));
  EXPECT_TRUE(all_close(resize(x, Tensor(), Tensor(), sizes, aa("cubic", 0)),
                        f32({1, 1, 1, 3}, {1.8779986f, 10.615078f, 4.9600039f})));
  EXPECT_TRUE(all_close(resize(x, Tensor(), Tensor(), sizes, aa("cubic", 1)),
                        f32({1, 1, 1, 3}, {1.9400847f, 10.282807f, 5.1693153f})));
  const Tensor up = f32({1, 1, 1, 4}, {1, 2, 4, 8});
  EXPECT_TRUE(bitwise_equal(
      resize(up, Tensor(), Tensor(), i64s({1, 1, 1, 7}), aa("linear", 0)),
      resize(up, Tensor(), Tensor(), i64s({1, 1, 1, 7}), {{"mode", std::string("linear")}})));
}

TEST(Resize, UnsupportedModesAreUserErrors) {
  const Tensor x = iota_f32({1, 1, 2, 2});
  const Tensor scales = f32({4}, {1, 1, 2, 2});
  EXPECT_CONTAINS(user_error([&] {
                    resize(x, Tensor(), scales, Tensor(), {{"mode", std::string("area")}});
                  }),
                  "Resize 'node': mode 'area' is not supported (nearest, linear, cubic)");
  // Cubic came with Resize-11.
  EXPECT_CONTAINS(user_error([&] {
                    run1("Resize", {x, scales}, {{"mode", std::string("cubic")}}, 10);
                  }),
                  "Resize 'node': mode 'cubic' is not supported (nearest, linear)");
  EXPECT_CONTAINS(user_error([&] {
                    resize(x, Tensor(), scales, Tensor(),
                           {{"mode", std::string("nearest")}, {"antialias", int64_t{1}}});
                  }),
                  "antialias applies to linear and cubic modes, not nearest");
  EXPECT_CONTAINS(user_error([&] {
                    resize(x, Tensor(), scales, i64s({1, 1, 4, 4}), {});
                  }),
                  "exactly one of 'scales' and 'sizes'");
}

TEST(Upsample, NearestAndLinearOfOpset9) {
  // From onnxruntime 1.20: asymmetric coordinates; nearest rounds down.
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor n =
      run1("Upsample", {x, f32({4}, {1, 1, 2, 1.5f})}, {{"mode", std::string("nearest")}}, 9);
  EXPECT_EQ(n.shape(), (Shape{1, 1, 4, 3}));
  EXPECT_EQ(values(n), (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4}));
  Tensor l = run1("Upsample", {x, f32({4}, {1, 1, 2, 2})}, {{"mode", std::string("linear")}}, 9);
  EXPECT_TRUE(all_close(
      l, f32({1, 1, 4, 4}, {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4})));
}

// ---- static shape inference ----------------------------------------------------------------

TEST(StaticInference, ShapeChainsFoldIntoReshapeTargets) {
  // Flatten all but the batch the way exporters write it:
  //   Reshape(x, Concat(Slice(Shape(x), [0], [1]), [-1]))
  // Shape inference folds the chain with the reference kernels, and the same infer() code that
  // the executor runs reads the folded target with require_value.
  ir::Graph g;
  g.opset = 17;
  ir::ValueId x = g.add_value("x", {DType::kF32, {2, 3, 4}});
  g.inputs.push_back(x);
  auto value = [&](const char* name) { return g.add_value(name, {}); };
  ir::ValueId shape = value("shape"), batch = value("batch"), target = value("target"),
              y = value("y");
  g.add_node("Shape", "shape", {x}, {shape});
  g.add_node("Slice", "slice",
             {shape, g.add_constant("zero", i64s({0})), g.add_constant("one", i64s({1}))}, {batch});
  g.add_node("Concat", "concat", {batch, g.add_constant("rest", i64s({-1}))}, {target},
             {{"axis", int64_t{0}}});
  g.add_node("Reshape", "reshape", {x, target}, {y});
  g.outputs.push_back(y);
  ir::infer_types(g, ir::OpRegistry::global());
  EXPECT_EQ(g.type(y), (ir::TensorType{DType::kF32, {2, 12}}));
  EXPECT_EQ(g.type(target), (ir::TensorType{DType::kI64, {2}}));
}

TEST(StaticInference, UnknownShapeOperandIsUserErrorNamingNode) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", {DType::kF32, {2, 3}});
  ir::ValueId s = g.add_value("s", {DType::kI64, {1}});
  g.inputs = {x, s};
  ir::ValueId y = g.add_value("y", {});
  g.add_node("Reshape", "r", {x, s}, {y});
  g.outputs.push_back(y);
  std::string msg = user_error([&] { ir::infer_types(g, ir::OpRegistry::global()); });
  EXPECT_CONTAINS(msg, "Reshape 'r'");
  EXPECT_CONTAINS(msg, "shape");
}

}  // namespace
}  // namespace tessel
