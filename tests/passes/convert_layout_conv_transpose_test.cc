// ConvTranspose through the GPU pipeline (convert-layout's rewrite into the stride-1
// tessel.Conv of its phases, ops/conv_transpose_phases.h): the rewritten graph, run on the CPU
// executor, computes what the ONNX ConvTranspose computes, over many random configurations in
// fp32 and in the fp16 pipeline; and the shape of the rewrite for the usual decoder configs.
// (The Before/Expected IR of the rewrite is in convert_layout_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "ir/conv_transpose_nets.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ir/printer.h"
#include "ops/conv_geometry.h"
#include "ops/conv_transpose_phases.h"
#include "ops/tessel_epilogue.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

using Ints = std::vector<int64_t>;

struct Config {
  int64_t batch = 1, ci = 8, co = 8, h = 4, w = 4;
  Ints kernel = {2, 2}, strides = {2, 2}, dilations = {1, 1}, pads = {0, 0, 0, 0};
  Ints output_padding = {0, 0};
  Ints output_shape;  // when not empty: the attribute, which fixes the output extents
  int64_t group = 1;
  std::string auto_pad;  // when not empty: the attribute
  bool bias = true;

  std::string str() const {
    std::ostringstream os;
    auto ints = [&](const char* k, const Ints& v) {
      os << " " << k << "=[";
      for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
      os << "]";
    };
    os << "x[" << batch << "," << ci << "," << h << "," << w << "] co=" << co;
    ints("k", kernel);
    ints("s", strides);
    ints("d", dilations);
    ints("pads", pads);
    ints("op", output_padding);
    if (!output_shape.empty()) ints("output_shape", output_shape);
    if (!auto_pad.empty()) os << " auto_pad=" << auto_pad;
    os << " group=" << group << (bias ? " bias" : "");
    return os.str();
  }
};

Tensor random_tensor(Shape s, std::mt19937& rng, double bound) {
  std::uniform_real_distribution<double> uni(-bound, bound);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& e : v) e = uni(rng);
  return Tensor::from_doubles(DType::kF32, std::move(s), v);
}

// x -> ConvTranspose -> y, types inferred.
ir::Graph conv_transpose_graph(const Config& c, unsigned seed) {
  std::mt19937 rng(seed);
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF32, {c.batch, c.ci, c.h, c.w}});
  g.inputs.push_back(x);
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.ci / c.group * c.kernel[0]));
  std::vector<ir::ValueId> ins = {
      x, g.add_constant(
             "w", random_tensor({c.ci, c.co / c.group, c.kernel[0], c.kernel[1]}, rng, bound))};
  if (c.bias) ins.push_back(g.add_constant("b", random_tensor({c.co}, rng, 0.5)));
  ir::Attributes attrs = {
      {"strides", c.strides}, {"dilations", c.dilations}, {"output_padding", c.output_padding}};
  if (c.auto_pad.empty()) {
    attrs["pads"] = c.pads;
  } else {
    attrs["auto_pad"] = c.auto_pad;
  }
  if (!c.output_shape.empty()) attrs["output_shape"] = c.output_shape;
  if (c.group != 1) attrs["group"] = c.group;
  const ir::ValueId y = g.add_value("y", {});
  g.add_node("ConvTranspose", "up", ins, {y}, std::move(attrs));
  g.outputs.push_back(y);
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

std::map<std::string, int> op_counts(const ir::Graph& g) {
  std::map<std::string, int> r;
  for (const ir::Node& n : g.nodes) ++r[n.op];
  return r;
}

const ir::Node& only(const ir::Graph& g, const std::string& op) {
  for (const ir::Node& n : g.nodes)
    if (n.op == op) return n;
  ADD_FAILURE() << "no " << op;
  return g.nodes.front();
}

// Random configurations: strides 1-3 (equal in both dims), kernels 1-5 (square or not),
// dilations 1-2, pads 0-5 (asymmetric; crops at either end), output_padding below the stride,
// sometimes output_shape or auto_pad instead, groups 1, 2 or depthwise, batch 1-2, odd channel
// counts, with or without bias. Configurations whose output would be empty are skipped.
std::vector<Config> random_configs(int count) {
  std::mt19937 rng(2024);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<Config> r;
  while (static_cast<int>(r.size()) < count) {
    Config c;
    c.batch = pick(1, 2);
    const int64_t s = pick(1, 3);
    c.strides = {s, s};
    c.kernel = {pick(1, 5), pick(1, 5)};
    c.dilations = pick(0, 4) == 0 ? Ints{pick(1, 2), pick(1, 2)} : Ints{1, 1};
    c.h = pick(1, 6);
    c.w = pick(1, 6);
    const int64_t grouping = pick(0, 5);
    if (grouping == 0) {  // depthwise
      c.group = c.ci = c.co = pick(2, 5);
    } else if (grouping == 1) {
      c.group = 2;
      c.ci = 2 * pick(1, 4);
      c.co = 2 * pick(1, 3);
    } else {
      const Ints ci = {1, 3, 5, 8, 9, 16}, co = {1, 2, 3, 5, 8};
      c.ci = ci[static_cast<size_t>(pick(0, 5))];
      c.co = co[static_cast<size_t>(pick(0, 4))];
    }
    for (int64_t& p : c.pads) p = pick(0, 3) == 0 ? pick(0, 5) : pick(0, 2);
    c.output_padding = {pick(0, s - 1), pick(0, s - 1)};
    c.bias = pick(0, 3) != 0;
    const int64_t variant = pick(0, 9);
    if (variant == 0) {
      c.auto_pad = std::vector<std::string>{"SAME_UPPER", "SAME_LOWER", "VALID"}[pick(0, 2)];
    } else if (variant == 1) {
      c.output_shape = {c.h * s + pick(-2, 2), c.w * s + pick(-2, 2)};
      if (c.output_shape[0] < 1 || c.output_shape[1] < 1) continue;
    }
    // The unpadded extent minus the pads must leave something.
    bool empty = false;
    for (size_t d = 0; d < 2 && c.auto_pad.empty() && c.output_shape.empty(); ++d) {
      const int64_t in = d == 0 ? c.h : c.w;
      const int64_t full =
          s * (in - 1) + c.output_padding[d] + (c.kernel[d] - 1) * c.dilations[d] + 1;
      empty |= full - c.pads[d] - c.pads[d + 2] < 1;
    }
    if (!empty) r.push_back(c);
  }
  return r;
}

// The rewritten graph: one tessel.Conv (a depth_to_space store for stride > 1), a Slice exactly
// where plan_phase_conv says the phases overhang the output, no ConvTranspose left.
void expect_rewritten(const ir::Graph& out, const Config& c) {
  const std::map<std::string, int> ops = op_counts(out);
  EXPECT_EQ(ops.count("ConvTranspose"), 0u);
  ASSERT_EQ(ops.count("tessel.Conv"), 1u);
  const ir::Node& conv = only(out, "tessel.Conv");
  // (The graph output's Transpose back to NCHW may be the store's too: fuse.)
  const ops::StoreMap store = ops::read_store(conv);
  EXPECT_EQ(store.depth_to_space(), c.strides[0] > 1);
  if (store.depth_to_space()) {
    EXPECT_EQ(store.block, c.strides[0]);
    EXPECT_EQ(store.dcr, c.group == 1);
  }
  EXPECT_EQ(conv.get_int("group", 1), c.group);
  const ir::Graph in = conv_transpose_graph(c, 1);
  const ir::Node& ct = in.nodes[0];
  const ops::ConvGeometry geo =
      ops::plan_conv_transpose(ct, in.type(ct.inputs[0]).shape, in.type(ct.inputs[1]).shape);
  EXPECT_EQ(ops.count("Slice"), ops::plan_phase_conv(geo).crops() ? 1u : 0u);
}

TEST(ConvTransposeRewrite, RandomConfigsMatchTheOnnxOpFp32) {
  int cropped = 0, grouped = 0;
  const std::vector<Config> configs = random_configs(240);
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    SCOPED_TRACE(c.str());
    const ir::Graph in = conv_transpose_graph(c, static_cast<unsigned>(i));
    const ir::Graph out =
        passes::run_passes(in, passes::gpu_pipeline({.precision = Precision::kFp32}));
    expect_rewritten(out, c);
    cropped += op_counts(out).count("Slice") > 0;
    grouped += c.group > 1;
    testing::expect_same_numerics(in, out, 1e-4, 1e-5);
    if (::testing::Test::HasFailure()) return;  // one configuration's report is enough
  }
  // The sweep reaches both kinds of output and grouped convs.
  EXPECT_GT(cropped, 20);
  EXPECT_LT(cropped, static_cast<int>(configs.size()) - 20);
  EXPECT_GT(grouped, 20);
}

TEST(ConvTransposeRewrite, RandomConfigsMatchTheOnnxOpFp16) {
  const std::vector<Config> configs = random_configs(120);
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    SCOPED_TRACE(c.str());
    const ir::Graph in = conv_transpose_graph(c, static_cast<unsigned>(i) + 1000);
    const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
    expect_rewritten(out, c);
    const ir::Node& conv = only(out, "tessel.Conv");
    EXPECT_EQ(out.type(conv.inputs[1]).dtype, DType::kF16);
    if (c.bias) {
      EXPECT_EQ(out.type(conv.inputs[2]).dtype, DType::kF32);
    }
    testing::expect_same_numerics(in, out, 2e-2, 2e-2);
    if (::testing::Test::HasFailure()) return;
  }
}

// The rewrite of each decoder config on its own: the conv's kernel, pads and channels.
struct RewrittenConv {
  Ints kernel, pads, dilations;
  Shape weight;
};

RewrittenConv rewritten_conv(const Config& c) {
  const ir::Graph out = passes::run_passes(conv_transpose_graph(c, 7),
                                           passes::gpu_pipeline({.precision = Precision::kFp32}));
  const ir::Node& conv = only(out, "tessel.Conv");
  const Shape& w = out.type(conv.inputs[1]).shape;
  EXPECT_EQ(op_counts(out).count("Slice"), 0u) << c.str();
  return {{w[1], w[2]}, conv.get_ints("pads", {0, 0, 0, 0}), conv.get_ints("dilations", {1, 1}), w};
}

TEST(ConvTransposeRewrite, DecoderConfigsNeedNoCrop) {
  Config c;  // x [1, 8, 4, 4], M = 8
  c.kernel = {2, 2};
  RewrittenConv r = rewritten_conv(c);  // k2 s2: 1x1 conv to 4*8 channels
  EXPECT_EQ(r.weight, (Shape{32, 1, 1, 8}));
  EXPECT_EQ(r.pads, (Ints{0, 0, 0, 0}));
  c.kernel = {3, 3};
  c.pads = {1, 1, 1, 1};
  c.output_padding = {1, 1};
  r = rewritten_conv(c);  // k3 s2 p1 op1: 2x2 conv, pads at the end
  EXPECT_EQ(r.weight, (Shape{32, 2, 2, 8}));
  EXPECT_EQ(r.pads, (Ints{0, 0, 1, 1}));
  c.kernel = {4, 4};
  c.output_padding = {0, 0};
  r = rewritten_conv(c);  // k4 s2 p1 (DCGAN): 3x3 conv, pads 1
  EXPECT_EQ(r.weight, (Shape{32, 3, 3, 8}));
  EXPECT_EQ(r.pads, (Ints{1, 1, 1, 1}));
  c.strides = {1, 1};
  c.kernel = {3, 3};
  c.dilations = {2, 2};
  c.pads = {0, 0, 0, 0};
  r = rewritten_conv(c);  // stride 1: the dilated conv itself, pads (k-1)*d
  EXPECT_EQ(r.weight, (Shape{8, 3, 3, 8}));
  EXPECT_EQ(r.pads, (Ints{4, 4, 4, 4}));
  EXPECT_EQ(r.dilations, (Ints{2, 2}));
}

// Stride 1 is the conv with the kernel flipped and in and out channels swapped:
// W'[m, j, l, c] = W[c, m, k-1-j, k-1-l].
TEST(ConvTransposeRewrite, StrideOneFlipsAndTransposesTheKernel) {
  Config c;
  c.ci = 8;
  c.co = 2;
  c.strides = {1, 1};
  c.kernel = {3, 2};
  c.bias = false;
  const ir::Graph in = conv_transpose_graph(c, 3);
  const ir::Graph out = passes::run_passes(in, {"convert-layout"});
  const ir::Node& conv = only(out, "tessel.Conv");
  const Tensor& w = *in.value(in.nodes[0].inputs[1]).data;  // [8, 2, 3, 2]
  const Tensor& wp = *out.value(conv.inputs[1]).data;       // [2, 3, 2, 8]
  ASSERT_EQ(wp.shape(), (Shape{2, 3, 2, 8}));
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t l = 0; l < 2; ++l)
        for (int64_t ch = 0; ch < 8; ++ch)
          EXPECT_EQ(wp.get_f64(((m * 3 + j) * 2 + l) * 8 + ch),
                    w.get_f64(((ch * 2 + m) * 3 + (2 - j)) * 2 + (1 - l)));
  EXPECT_EQ(conv.get_ints("pads"), (Ints{2, 1, 2, 1}));
}

// A grouped ConvTranspose keeps its groups; its phases are stored CRD, which keeps each
// group's channels together, and depth-to-space-dcr leaves it so. (2 output channels per
// group: 8 phase channels per group, which widen-narrow-groups leaves alone.)
TEST(ConvTransposeRewrite, GroupedPhasesStayCrd) {
  Config c;
  c.ci = 4;
  c.co = 4;
  c.group = 2;
  const ir::Graph out = passes::run_passes(conv_transpose_graph(c, 5), passes::gpu_pipeline({}));
  const ir::Node& conv = only(out, "tessel.Conv");
  EXPECT_EQ(conv.get_int("group", 1), 2);
  EXPECT_EQ(conv.get_string("mode", ""), "CRD");
  EXPECT_EQ(out.type(conv.inputs[1]).shape, (Shape{16, 1, 1, 2}));
}

// In the UNet, each ConvTranspose is one tessel.Conv with a depth_to_space store; the batch
// norm after "up2" is folded into it and the ReLU is its epilogue; no ConvTranspose,
// BatchNormalization, Slice or standalone depth_to_space is left.
TEST(ConvTransposeRewrite, UnetDecoderIsConvsWithDepthToSpaceStores) {
  const ir::Graph in = testing::unet_like();
  for (Precision p : {Precision::kFp16, Precision::kFp32}) {
    const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({.precision = p}));
    const std::map<std::string, int> ops = op_counts(out);
    EXPECT_EQ(ops.count("ConvTranspose") + ops.count("BatchNormalization") + ops.count("Slice") +
                  ops.count("tessel.DepthToSpace"),
              0u);
    EXPECT_EQ(ops.at("tessel.Conv"), 8);
    for (const ir::Node& n : out.nodes) {
      if (n.name != "up1" && n.name != "up2") continue;
      EXPECT_EQ(n.get_string("store", ""), "depth_to_space") << n.name;
      EXPECT_EQ(n.get_string("mode", ""), "DCR") << n.name;
      const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
      EXPECT_EQ(steps.size(), n.name == "up2" ? 1u : 0u) << n.name;
    }
    testing::expect_same_numerics(in, out, p == Precision::kFp16 ? 3e-2 : 1e-4,
                                  p == Precision::kFp16 ? 3e-2 : 1e-5);
  }
}

// Where the rewrite meets the rest of the pipeline: the RGB ConvTranspose at both graph edges
// reads the fp32 NCHW input and stores the fp32 NCHW output itself (fuse's edge folds; its
// phase conv has stride 1, so it is a stem); the cropped one, a stem too, keeps its Slice,
// with the ReLU after it; the depthwise one stores CRD. Transposes remain for the depthwise
// input and the two outputs that do not come straight from a group-1 conv.
TEST(ConvTransposeRewrite, EdgesCropsAndGroupsInThePipeline) {
  const ir::Graph in = testing::conv_transpose_edges();
  const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_EQ(op_counts(out),
            (std::map<std::string, int>{
                {"Cast", 3}, {"Relu", 1}, {"Slice", 1}, {"Transpose", 3}, {"tessel.Conv", 3}}))
      << ir::print_graph(out);
  for (const ir::Node& n : out.nodes) {
    if (n.name == "rgb_up") {
      EXPECT_EQ(n.get_string("input_layout", ""), "nchw");
      EXPECT_EQ(n.get_string("store", ""), "depth_to_space_nchw");
      EXPECT_EQ(n.get_string("out_dtype", ""), "f32");
    } else if (n.name == "crop_up") {
      EXPECT_EQ(n.get_string("store", ""), "depth_to_space");
      EXPECT_EQ(out.type(n.outputs[0]).shape, (Shape{2, 32, 32, 8}));
    } else if (n.name == "dw_up") {
      EXPECT_EQ(n.get_int("group", 1), 8);
      EXPECT_EQ(n.get_string("mode", ""), "CRD");
    }
  }
  testing::expect_same_numerics(in, out, 2e-2, 2e-2);
}

}  // namespace
}  // namespace tessel
