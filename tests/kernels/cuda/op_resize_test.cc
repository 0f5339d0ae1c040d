// The GPU Resize kernel (kernels/cuda/op_resize.cc) without a GPU: the sampling tables it
// embeds (hand-computed from ONNX's coordinate transforms), its fragment width, which nodes it
// declines and why, and that each variant compiles with NVRTC for sm_80 and sm_90a. The results
// against the CPU reference run in tests/gpu/resize_gpu_test.cc.
#include <gtest/gtest.h>

#include "kernels/cuda/op_kernels.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "device/cuda_api.h"

namespace tessel::kernels::cuda {
namespace {

// Resize(X, roi?, scales?, sizes?) over an input value X; the given operands are constants.
ir::Graph resize(const ir::TensorType& x, ir::Attributes attrs, const std::vector<double>& scales,
                 const std::vector<int64_t>& sizes = {}, const std::vector<double>& roi = {}) {
  ir::Graph g;
  std::vector<ir::ValueId> ins = {g.add_value("x", x)};
  g.inputs.push_back(ins[0]);
  auto floats = [](const std::vector<double>& v) {
    return Tensor::from_doubles(DType::kF32, {static_cast<int64_t>(v.size())}, v);
  };
  ins.push_back(roi.empty() ? ir::kNoValue : g.add_constant("roi", floats(roi)));
  ins.push_back(scales.empty() ? ir::kNoValue : g.add_constant("scales", floats(scales)));
  if (!sizes.empty())
    ins.push_back(g.add_constant(
        "sizes", Tensor::from_vector<int64_t>({static_cast<int64_t>(sizes.size())}, sizes)));
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("Resize", "up", ins, {y}, std::move(attrs));
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

ir::Attributes modes(const std::string& mode, const std::string& coord,
                     const std::string& nearest = "round_prefer_floor") {
  return {{"mode", mode}, {"coordinate_transformation_mode", coord}, {"nearest_mode", nearest}};
}

// Emits, checks the source for each of `expect`, compiles for sm_80 and sm_90a.
OpKernelSource emit_and_compile(const ir::Graph& g, const std::vector<std::string>& expect) {
  const ir::Node& n = g.nodes[0];
  const std::optional<std::string> why = can_emit_op(g, n);
  EXPECT_FALSE(why) << *why;
  OpKernelSource ks = emit_op(g, n);
  for (const std::string& e : expect)
    EXPECT_NE(ks.source.find(e), std::string::npos) << e << "\n" << ks.source;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    device::CompileOptions options;
    options.arch = arch;
    options.headers = ks.headers;
    EXPECT_FALSE(device::compile(ks.source, ks.name + ".cu", options).cubin.empty())
        << arch << "\n"
        << ks.source;
  }
  return ks;
}

class OpResizeTest : public ::testing::Test {
 protected:
  void SetUp() override { device::set_cache_dir(""); }
};

// x2 nearest, asymmetric, floor: output o reads input floor(o / 2). N and C are not resized:
// no table; C = 16 f16 moves as two 16-byte fragments per pixel.
TEST_F(OpResizeTest, f16_nhwc_nearest_asymmetric_floor_x2) {
  const OpKernelSource ks = emit_and_compile(
      resize({DType::kF16, {1, 5, 7, 16}}, modes("nearest", "asymmetric", "floor"), {1, 2, 2, 1}),
      {"kIndex1[10] = {\n    0, 0, 1, 1, 2, 2, 3, 3,\n    4, 4};",
       "kIndex2[14] = {\n    0, 0, 1, 1, 2, 2, 3, 3,\n    4, 4, 5, 5, 6, 6};",
       "static constexpr int kVec = 8;", "static constexpr i64 kItems = 280;", "f.load(x);"});
  EXPECT_EQ(ks.source.find("kIndex0"), std::string::npos);
  EXPECT_EQ(ks.source.find("kIndex3"), std::string::npos);
  EXPECT_EQ(ks.source.find("acc["), std::string::npos);  // a copy: no arithmetic
}

// x2 linear, half_pixel, 3 -> 6 rows: x = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, ..., 2.25; taps
// floor(x) and floor(x) + 1 clamped to [0, 2], weights 1 - frac and frac.
TEST_F(OpResizeTest, f32_nhwc_linear_half_pixel_x2) {
  emit_and_compile(
      resize({DType::kF32, {1, 3, 4, 4}}, modes("linear", "half_pixel"), {1, 2, 2, 1}),
      {"kLerp1[6] = {\n    {0, 0, 0.25f, 0.75f}, {0, 1, 0.75f, 0.25f}, {0, 1, 0.25f, 0.75f}, "
       "{1, 2, 0.75f, 0.25f},\n    {1, 2, 0.25f, 0.75f}, {2, 2, 0.75f, 0.25f}};",
       "static constexpr int kVec = 4;", "const float w = t1.w1 * t2.w1;"});
}

// align_corners 3 -> 5: x = o * 2 / 4 = 0, 0.5, 1, 1.5, 2. Whole coordinates read one tap.
TEST_F(OpResizeTest, f16_nhwc_linear_align_corners_sizes) {
  emit_and_compile(
      resize({DType::kF16, {2, 3, 3, 8}}, modes("linear", "align_corners"), {}, {2, 5, 5, 8}),
      {"kLerp1[5] = {\n    {0, 0, 1.0f, 0.0f}, {0, 1, 0.5f, 0.5f}, {1, 1, 1.0f, 0.0f}, "
       "{1, 2, 0.5f, 0.5f},\n    {2, 2, 1.0f, 0.0f}};"});
}

// Downsample by 2 along W, half_pixel nearest: x = 2o + 0.5 rounds (prefer floor) to 2o. H is
// untouched, and linear on whole coordinates is a gather too: 7 -> 3 with align_corners reads
// 0, 3, 6.
TEST_F(OpResizeTest, f16_nhwc_downsample_gathers) {
  emit_and_compile(
      resize({DType::kF16, {1, 4, 8, 8}}, modes("nearest", "half_pixel"), {1, 1, 0.5, 1}),
      {"kIndex2[4] = {\n    0, 2, 4, 6};"});
  const OpKernelSource ks = emit_and_compile(
      resize({DType::kF32, {1, 7, 7, 4}}, modes("linear", "align_corners"), {}, {1, 3, 3, 4}),
      {"kIndex1[3] = {\n    0, 3, 6};"});
  EXPECT_EQ(ks.source.find("Lerp"), std::string::npos);
}

// A resized innermost dimension whose output extent takes runs of 16 bytes (5 -> 8 f32
// columns, a non-integer scale of 1.6): an item interpolates a run of 4 outputs, each with its
// own taps, and stores them at once. An odd extent (5 -> 7) moves one element per item.
TEST_F(OpResizeTest, f32_innermost_resized_runs_and_odd_sizes) {
  emit_and_compile(
      resize({DType::kF32, {3, 5}}, modes("linear", "pytorch_half_pixel"), {}, {3, 8}),
      {"static constexpr int kVec = 4;", "static constexpr i64 kItems = 6;", "kLerp1[8]",
       "const Lerp tl = kLerp1[v * 2 + q];", "const i64 o1 = q * 4;", "f.store(y);"});
  emit_and_compile(
      resize({DType::kF32, {3, 5}}, modes("linear", "pytorch_half_pixel"), {}, {3, 7}),
      {"static constexpr int kVec = 1;", "static constexpr i64 kItems = 21;", "kLerp1[7]"});
}

// NCHW bilinear x8 in f16 (a segmentation head's upsample into the output): runs of 8 along the
// width, the row's taps shared by the run; nearest copies with its runs.
TEST_F(OpResizeTest, f16_nchw_runs_along_the_width) {
  emit_and_compile(
      resize({DType::kF16, {2, 21, 28, 28}}, modes("linear", "half_pixel"), {1, 1, 8, 8}),
      {"static constexpr int kVec = 8;", "const Lerp t2 = kLerp2[o2];",
       "const Lerp tl = kLerp3[v * 28 + q];", "in run-major order (28 runs of 8)",
       "t2.w1 * tl.w1"});
  emit_and_compile(
      resize({DType::kF16, {1, 3, 4, 4}}, modes("nearest", "asymmetric", "floor"), {1, 1, 2, 4}),
      {"static constexpr int kVec = 8;", "const int tl = kIndex3[v * 2 + q];",
       "f.v[v] = x[i64(tl)];"});
}

// tf_crop_and_resize outside the roi writes the extrapolation value; the index marks it.
TEST_F(OpResizeTest, f32_tf_crop_and_resize_extrapolates) {
  ir::Attributes a = modes("nearest", "tf_crop_and_resize");
  a["extrapolation_value"] = 2.5;
  emit_and_compile(
      resize({DType::kF32, {1, 4, 4, 2}}, a, {}, {1, 3, 3, 2}, {0, 0, 0, 0, 1, 1.5, 1.5, 1}),
      {"kIndex1[3] = {\n    0, 2, -1};", "tf_crop_and_resize: outside the input",
       "convert<T>(2.5f)"});
}

// Nearest moves whole elements, so integer tensors have a kernel too.
TEST_F(OpResizeTest, i32_nearest_is_a_copy) {
  emit_and_compile(
      resize({DType::kI32, {1, 2, 3, 4}}, modes("nearest", "asymmetric"), {1, 3, 2, 1}),
      {"using T = i32;", "kIndex1[6]"});
}

TEST_F(OpResizeTest, UnsupportedResizesSayWhy) {
  auto reason = [](const ir::Graph& g) { return can_emit_op(g, g.nodes[0]).value_or(""); };
  EXPECT_EQ(
      reason(resize({DType::kI32, {1, 2, 2, 4}}, modes("linear", "half_pixel"), {1, 2, 2, 1})),
      "Resize 'up': linear Resize of i32 has no GPU kernel (f32, f16, bf16)");
  // Scales computed at run time: the kernel needs them at compile time.
  ir::Graph g = resize({DType::kF32, {1, 2, 2, 4}}, modes("nearest", "asymmetric"), {1, 2, 2, 1});
  const ir::ValueId s = g.add_value("s", g.type(g.nodes[0].inputs[2]));
  g.inputs.push_back(s);
  g.nodes[0].inputs[2] = s;
  EXPECT_EQ(reason(g), "Resize 'up': roi, scales and sizes must be constants");
  EXPECT_EQ(
      reason(resize({DType::kF16, {1, 2, 40000, 8}}, modes("nearest", "asymmetric"), {1, 1, 2, 1})),
      "Resize 'up': output extent 80000 of dimension 2 exceeds the 32768 entries of a GPU "
      "sampling table");
  EXPECT_EQ(reason(resize({DType::kI32, {1, 2, 2, 4}}, modes("cubic", "half_pixel"), {1, 2, 2, 1})),
            "Resize 'up': cubic Resize of i32 has no GPU kernel (f32, f16, bf16)");
  // Cubic antialias downsampling 64 -> 2 reads 2 * 2 * 32 = 128 taps per output element.
  ir::Attributes wide = modes("cubic", "half_pixel");
  wide["antialias"] = int64_t{1};
  EXPECT_EQ(reason(resize({DType::kF32, {1, 1, 64, 4}}, wide, {}, {1, 1, 2, 4})),
            "Resize 'up': dimension 2 reads 128 input elements per output element (antialias "
            "downsampling 64 to 2); the GPU kernel reads at most 64");
}

// Cubic x2, half_pixel, 3 -> 6: output 0 samples x = -0.25 = -1 + 0.75, taps -2..1 (clamped to
// 0, 0, 0, 1) weighted by Keys' cubic (a = -0.75) at distances 1.75, 0.75, 0.25 and 1.25:
// -0.03515625, 0.26171875, 0.87890625, -0.10546875. Both H and W are 4-tap tables summed in
// nested loops.
TEST_F(OpResizeTest, f32_nhwc_cubic_half_pixel_x2) {
  emit_and_compile(
      resize({DType::kF32, {1, 3, 3, 4}}, modes("cubic", "half_pixel"), {1, 2, 2, 1}),
      {"struct Taps4 {\n  int i[4];\n  float w[4];\n};",
       "kTaps1[6] = {\n    {{0, 0, 0, 1}, {-0.03515625f, 0.26171875f, 0.87890625f, -0.10546875f}},",
       "kTaps2[6]", "for (int a1 = 0; a1 < 4; ++a1) {", "for (int a2 = 0; a2 < 4; ++a2) {",
       "const float w = t1.w[a1] * t2.w[a2];", "static constexpr int kVec = 4;"});
}

// Antialias downsampling 8 -> 3 (scale 0.375) along W: linear reads 2 * ceil(1 / 0.375) = 6
// taps; H grows by 2 with 2 taps, summed as a 2-tap table in the same nested loops. f16.
TEST_F(OpResizeTest, f16_nhwc_linear_antialias_downsample) {
  ir::Attributes a = modes("linear", "half_pixel");
  a["antialias"] = int64_t{1};
  emit_and_compile(resize({DType::kF16, {1, 2, 8, 8}}, a, {}, {1, 4, 3, 8}),
                   {"struct Taps2 {", "struct Taps6 {", "kTaps1[4]", "kTaps2[3]",
                    "for (int a2 = 0; a2 < 6; ++a2) {", "static constexpr int kVec = 8;"});
}

}  // namespace
}  // namespace tessel::kernels::cuda
