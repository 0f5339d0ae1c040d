// The GPU Resize kernel (kernels/cuda/op_resize.cc) against the CPU reference executor: one-node
// NHWC Resize graphs (the form convert-layout gives them: scales [1, sh, sw, 1]) run by
// runtime::cpu::run_graph and by the generated kernel on the same random inputs (never zero),
// with the output poisoned (0xff bytes: NaN for floats, -1 for integers) before the launch so
// that an element the kernel never writes fails. Then a small network with an upsample, compiled
// without a GPU (ResizeLowering) and run through the whole engine. The GPU tests skip where no
// CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cuda/op_kernels.h"
#include "ir/infer.h"
#include "ir/ir_writer.h"
#include "ir/op_registry.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"
#include "runtime/engine.h"
#include "compiler/compile_plan.h"
#include "gpu_test_util.h"

namespace tessel {
namespace {

namespace rt = device;

// Floats in ±[0.25, 2]; integers in ±[1, 100].
Tensor random_tensor(const ir::TensorType& t, std::mt19937& rng) {
  std::uniform_real_distribution<double> mag(0.25, 2.0);
  std::uniform_int_distribution<int> whole(1, 100);
  std::bernoulli_distribution neg(0.5);
  std::vector<double> v(static_cast<size_t>(numel(t.shape)));
  for (double& x : v) x = (neg(rng) ? -1 : 1) * (is_float(t.dtype) ? mag(rng) : whole(rng));
  return Tensor::from_doubles(t.dtype, t.shape, v);
}

// Largest |got - want| / max(1, |want|); NaN (an unwritten element) is infinite.
double max_error(const Tensor& got, const Tensor& want) {
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    if (std::isnan(a)) return INFINITY;
    worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
  }
  return worst;
}

struct Resize {
  ir::Attributes attrs;
  std::vector<double> scales = {};
  std::vector<int64_t> sizes = {};
  std::vector<double> roi = {};
};

// Runs Resize(x) on the CPU and with its generated kernel; the largest relative error.
void check_resize(const ir::TensorType& x, const Resize& r) {
  std::string why;
  if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  ir::Graph g;
  std::vector<ir::ValueId> ins = {g.add_value("x", x)};
  g.inputs.push_back(ins[0]);
  auto floats = [](const std::vector<double>& v) {
    return Tensor::from_doubles(DType::kF32, {static_cast<int64_t>(v.size())}, v);
  };
  ins.push_back(r.roi.empty() ? ir::kNoValue : g.add_constant("roi", floats(r.roi)));
  ins.push_back(r.scales.empty() ? ir::kNoValue : g.add_constant("scales", floats(r.scales)));
  if (!r.sizes.empty())
    ins.push_back(g.add_constant(
        "sizes", Tensor::from_vector<int64_t>({static_cast<int64_t>(r.sizes.size())}, r.sizes)));
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("Resize", "resize", ins, {y}, r.attrs);
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  std::mt19937 rng(99);
  const Tensor input = random_tensor(x, rng);
  const Tensor want = runtime::cpu::run_graph(g, {input})[0];

  const std::optional<std::string> cannot = kernels::cuda::can_emit_op(g, g.nodes[0]);
  ASSERT_FALSE(cannot) << *cannot;
  const kernels::cuda::OpKernelSource ks = kernels::cuda::emit_op(g, g.nodes[0]);
  // roi, scales and sizes are compiled in: only X is passed.
  const Tensor got = ::tessel::testing::OpKernelRun(ks).run({input}, {want}, 0xff)[0];
  // Nearest moves elements: exact. Linear and cubic: fp32 arithmetic against the reference's
  // double, each rounded once to the storage type, so they may differ by an f16 ulp (2^-10
  // relative).
  const bool nearest = std::get<std::string>(r.attrs.at("mode")) == "nearest";
  const double tol = nearest ? 0 : x.dtype == DType::kF16 ? 2e-3 : 1e-5;
  EXPECT_LE(max_error(got, want), tol) << ks.source;
}

ir::Attributes modes(const std::string& mode, const std::string& coord,
                     const std::string& nearest = "round_prefer_floor") {
  return {{"mode", mode}, {"coordinate_transformation_mode", coord}, {"nearest_mode", nearest}};
}

TEST(ResizeGpu, NearestAsymmetricFloorX2) {
  check_resize({DType::kF16, {1, 5, 7, 16}},
               {modes("nearest", "asymmetric", "floor"), {1, 2, 2, 1}});
  check_resize({DType::kF32, {2, 5, 7, 4}},
               {modes("nearest", "asymmetric", "floor"), {1, 2, 2, 1}});
}

TEST(ResizeGpu, LinearHalfPixelX2) {
  check_resize({DType::kF16, {1, 6, 5, 8}}, {modes("linear", "half_pixel"), {1, 2, 2, 1}});
  check_resize({DType::kF32, {2, 5, 7, 3}}, {modes("linear", "half_pixel"), {1, 2, 2, 1}});
}

TEST(ResizeGpu, LinearAlignCorners) {
  check_resize({DType::kF16, {1, 5, 6, 8}}, {modes("linear", "align_corners"), {}, {1, 9, 11, 8}});
  check_resize({DType::kF32, {1, 4, 4, 12}}, {modes("linear", "align_corners"), {1, 2, 2, 1}});
}

TEST(ResizeGpu, Downsample) {
  check_resize({DType::kF16, {1, 8, 10, 8}}, {modes("nearest", "half_pixel"), {1, 0.5, 0.5, 1}});
  check_resize({DType::kF32, {1, 9, 11, 4}},
               {modes("linear", "pytorch_half_pixel"), {}, {1, 4, 5, 4}});
}

// in * scale not whole: 7 x 1.5 -> 10, 9 x 1.7 -> 15 (floor), and the half_pixel_symmetric
// correction for the rounding.
TEST(ResizeGpu, NonIntegerScale) {
  check_resize({DType::kF16, {1, 7, 9, 8}}, {modes("linear", "half_pixel"), {1, 1.5, 1.7, 1}});
  check_resize({DType::kF32, {1, 7, 9, 8}},
               {modes("linear", "half_pixel_symmetric"), {1, 1.5, 1.7, 1}});
  check_resize({DType::kF16, {1, 7, 9, 8}},
               {modes("nearest", "tf_half_pixel_for_nn", "round_prefer_ceil"), {1, 1.5, 1.7, 1}});
}

// Odd extents everywhere; a resized innermost dimension (one element per item); ceil rounding.
TEST(ResizeGpu, OddSizes) {
  check_resize({DType::kF32, {2, 7, 9, 5}}, {modes("nearest", "half_pixel", "ceil"), {1, 3, 3, 1}});
  check_resize({DType::kF16, {3, 5}}, {modes("linear", "half_pixel"), {}, {3, 8}});
  check_resize({DType::kI32, {1, 3, 5, 6}}, {modes("nearest", "asymmetric"), {1, 2, 3, 1}});
}

// Cubic (4 taps per resized dimension, nested loops): upsampling, sizes with exclude_outside
// and another coefficient, and a resized innermost dimension.
TEST(ResizeGpu, Cubic) {
  check_resize({DType::kF32, {1, 5, 7, 4}}, {modes("cubic", "half_pixel"), {1, 2, 2, 1}});
  check_resize({DType::kF16, {2, 6, 5, 8}}, {modes("cubic", "align_corners"), {1, 1.5, 2.5, 1}});
  Resize outside{modes("cubic", "asymmetric"), {}, {1, 11, 9, 4}};
  outside.attrs["exclude_outside"] = int64_t{1};
  outside.attrs["cubic_coeff_a"] = -0.5;
  check_resize({DType::kF32, {1, 4, 6, 4}}, outside);
  check_resize({DType::kF32, {3, 5}}, {modes("cubic", "pytorch_half_pixel"), {}, {3, 12}});
}

// Opset 18's antialias: downsampling linear and cubic filters as wide as 1 / scale.
TEST(ResizeGpu, AntialiasDownsample) {
  Resize linear{modes("linear", "half_pixel"), {}, {1, 5, 3, 8}};
  linear.attrs["antialias"] = int64_t{1};
  check_resize({DType::kF16, {1, 16, 8, 8}}, linear);
  Resize cubic{modes("cubic", "half_pixel"), {1, 0.3, 0.5, 1}};
  cubic.attrs["antialias"] = int64_t{1};
  check_resize({DType::kF32, {2, 20, 12, 4}}, cubic);
  cubic.attrs["exclude_outside"] = int64_t{1};
  check_resize({DType::kF32, {2, 20, 12, 4}}, cubic);
}

TEST(ResizeGpu, CropAndResizeExtrapolates) {
  Resize r{
      modes("linear", "tf_crop_and_resize"), {}, {1, 5, 6, 4}, {0, 0.2, 0.1, 0, 1, 1.3, 1.2, 1}};
  r.attrs["extrapolation_value"] = 7.5;
  check_resize({DType::kF32, {1, 6, 7, 4}}, r);
}

// A resized innermost dimension whose output extent takes 16-byte runs (NCHW's width, as an
// upsample into a graph output runs): each item interpolates a run of 4 (f32) or 8 (f16)
// outputs, with the shared outer taps; nearest copies; extrapolated elements inside a run.
TEST(ResizeGpu, RunsAlongAResizedInnermostDimension) {
  check_resize({DType::kF32, {2, 3, 7, 9}},
               {modes("linear", "pytorch_half_pixel"), {}, {2, 3, 28, 36}});
  check_resize({DType::kF16, {1, 5, 6, 7}}, {modes("linear", "half_pixel"), {}, {1, 5, 12, 16}});
  check_resize({DType::kF32, {1, 4, 5, 6}}, {modes("linear", "align_corners"), {}, {1, 4, 40, 48}});
  check_resize({DType::kF16, {1, 3, 4, 5}},
               {modes("nearest", "asymmetric", "floor"), {}, {1, 3, 8, 24}});
  check_resize({DType::kI32, {1, 2, 3, 3}}, {modes("nearest", "half_pixel"), {}, {1, 2, 6, 8}});
  check_resize({DType::kF32, {3, 5}}, {modes("linear", "half_pixel"), {}, {3, 12}});
  Resize crop{
      modes("linear", "tf_crop_and_resize"), {}, {1, 2, 5, 8}, {0, 0, 0.1, -0.2, 1, 1, 1.3, 1.4}};
  crop.attrs["extrapolation_value"] = -3.25;
  check_resize({DType::kF32, {1, 2, 6, 7}}, crop);
}

// conv -> relu -> bilinear x2 upsample -> conv, in ONNX form (NCHW).
// `mode`: "linear" (bilinear) or "cubic" (bicubic).
ir::Graph upsample_net(const std::string& mode = "linear") {
  testing::IrWriter w(21);
  w.input("x", "f32[1,24,6,5]");
  testing::conv_weight(w, "w1", 16, 24, 3);
  testing::conv_weight(w, "w2", 8, 16, 3);
  w.node("const %scales : f32[4] = [1.0, 1.0, 2.0, 2.0]");
  w.node("%c1 = Conv(%x, %w1) {pads = [1, 1, 1, 1]} : f32[1,16,6,5] @\"conv1\"");
  w.node("%r1 = Relu(%c1) : f32[1,16,6,5] @\"relu\"");
  w.node(
      "%up = Resize(%r1, _, %scales) {coordinate_transformation_mode = \"half_pixel\", "
      "mode = \"" +
      mode + "\"} : f32[1,16,12,10] @\"upsample\"");
  w.node("%y = Conv(%up, %w2) {pads = [1, 1, 1, 1]} : f32[1,8,12,10] @\"conv2\"");
  return w.graph("y");
}

// No GPU needed: the network lowers and compiles for an H100, the Resize as a kernel of its own
// between the two convs, with no layout change around it.
TEST(ResizeLowering, UpsampleNetworkCompilesForSm90a) {
  for (const char* mode : {"linear", "cubic"}) {
    const compiler::CompiledPlan c =
        compiler::compile_plan(upsample_net(mode), {}, device::known_device("sm_90a"));
    const ir::Graph& out = c.graph;
    const std::vector<int> producers = out.producers();
    const std::vector<std::vector<int>> users = out.users();
    int resizes = 0;
    for (const ir::Node& n : out.nodes) {
      if (n.op != "Resize") continue;
      ++resizes;
      EXPECT_EQ(out.type(n.inputs[0]).shape, (Shape{1, 6, 5, 16}));  // NHWC
      EXPECT_EQ(out.nodes[static_cast<size_t>(producers[n.inputs[0]])].op, "tessel.Conv");
      for (int u : users[n.outputs[0]])
        EXPECT_EQ(out.nodes[static_cast<size_t>(u)].op, "tessel.Conv");
    }
    EXPECT_EQ(resizes, 1);
    EXPECT_EQ(c.plan.profiles[0].launches.size(), out.nodes.size());
  }
}

// conv -> bilinear x4 upsample as the graph's output (a segmentation net's head, 10 classes).
ir::Graph upsample_head(const std::string& out_shape = "f32[2,10,24,32]") {
  testing::IrWriter w(21);
  w.input("x", "f32[2,16,6,8]");
  testing::conv_weight(w, "w1", 10, 16, 1);
  w.node("const %scales : f32[4] = [1.0, 1.0, 4.0, 4.0]");
  w.node("%c1 = Conv(%x, %w1) : f32[2,10,6,8] @\"classifier\"");
  w.node(
      "%y = Resize(%c1, _, %scales) {coordinate_transformation_mode = \"pytorch_half_pixel\", "
      "mode = \"linear\"} : " +
      out_shape + " @\"upsample\"");
  return w.graph("y");
}

// No GPU needed: the upsample writes the graph output itself, in NCHW and fp32; what converts
// layout and precision (the Transpose, the Cast) moves its 16x smaller input.
TEST(ResizeLowering, UpsampleIntoTheOutputWritesNchwFp32) {
  const compiler::CompiledPlan c =
      compiler::compile_plan(upsample_head(), {}, device::known_device("sm_90a"));
  const ir::Graph& out = c.graph;
  int resizes = 0;
  for (const ir::Node& n : out.nodes) {
    if (n.op == "Resize") {
      ++resizes;
      EXPECT_EQ(out.type(n.inputs[0]).shape, (Shape{2, 10, 6, 8}));
      EXPECT_EQ(out.type(n.inputs[0]).dtype, DType::kF32);
      EXPECT_EQ(n.outputs[0], out.outputs[0]);
      continue;
    }
    // Everything else is no larger than the Resize's input.
    for (ir::ValueId v : n.outputs)
      EXPECT_LE(numel(out.type(v).shape), 2 * 10 * 6 * 8) << n.label();
  }
  EXPECT_EQ(resizes, 1);
}

// The same network through the engine against the CPU.
TEST(ResizeGpu, UpsampleInANetwork) {
  std::string why;
  if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  for (const char* mode : {"linear", "cubic"}) {
    const ir::Graph g = upsample_net(mode);
    for (Precision precision : {Precision::kFp16, Precision::kFp32}) {
      Session s = testing::compile_session(g, precision);
      runtime::Engine& e = *s.engine();
      std::mt19937 rng(5);
      const Tensor input = random_tensor(g.type(g.inputs[0]), rng);
      const Tensor want = runtime::cpu::run_graph(g, {input})[0];
      const Tensor got = e.run({input})[0];
      double num = 0, den = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        num += (got.get_f64(i) - want.get_f64(i)) * (got.get_f64(i) - want.get_f64(i));
        den += want.get_f64(i) * want.get_f64(i);
      }
      EXPECT_LE(std::sqrt(num / den), precision == Precision::kFp16 ? 2e-2 : 1e-3) << mode;
    }
  }
}

TEST(ResizeGpu, UpsampleIntoTheOutputInANetwork) {
  std::string why;
  if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const ir::Graph g = upsample_head();
  for (Precision precision : {Precision::kFp16, Precision::kFp32}) {
    Session s = testing::compile_session(g, precision);
    std::mt19937 rng(6);
    const Tensor input = random_tensor(g.type(g.inputs[0]), rng);
    const Tensor want = runtime::cpu::run_graph(g, {input})[0];
    const Tensor got = s.engine()->run({input})[0];
    ASSERT_EQ(got.shape(), want.shape());
    double num = 0, den = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      ASSERT_FALSE(std::isnan(got.get_f64(i))) << i;
      num += (got.get_f64(i) - want.get_f64(i)) * (got.get_f64(i) - want.get_f64(i));
      den += want.get_f64(i) * want.get_f64(i);
    }
    EXPECT_LE(std::sqrt(num / den), precision == Precision::kFp16 ? 5e-3 : 1e-5);
  }
}

}  // namespace
}  // namespace tessel
