// The whole GPU pipeline on two small networks shaped like the model zoo's: a ResNet stage
// (conv-bn-relu, maxpool, residual block, global pool, flatten, dense) and the super-resolution
// net's structure (conv, leaky relu, residual, depth_to_space CRD x2, 3-channel tail conv).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "ir/equal.h"
#include "ir/infer.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "ops/tessel_epilogue.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

namespace tessel {
namespace {

using testing::batch_norm_params;
using testing::bn;
using testing::conv_weight;
using testing::IrWriter;

ir::Graph resnet_like() {
  IrWriter w(7);
  w.input("x", "f32[1,3,8,8]");
  conv_weight(w, "w1", 8, 3, 3);
  conv_weight(w, "w2", 8, 8, 3);
  conv_weight(w, "w3", 8, 8, 3);
  batch_norm_params(w, "bn1", 8);
  batch_norm_params(w, "bn2", 8);
  batch_norm_params(w, "bn3", 8);
  w.constant("fc_w", {4, 8}, -0.8, 0.8);
  w.constant("fc_b", {4}, -0.1, 0.1);
  const char* big = "f32[1,8,8,8]";
  const char* small = "f32[1,8,4,4]";
  w.node(std::string("%c1 = Conv(%x, %w1) {pads = [1, 1, 1, 1]} : ") + big + " @\"conv1\"");
  w.node(bn("b1", "c1", "bn1", big));
  w.node(std::string("%r1 = Relu(%b1) : ") + big + " @\"relu1\"");
  w.node(std::string("%p = MaxPool(%r1) {kernel_shape = [2, 2], strides = [2, 2]} : ") + small +
         " @\"maxpool\"");
  w.node(std::string("%c2 = Conv(%p, %w2) {pads = [1, 1, 1, 1]} : ") + small + " @\"conv2\"");
  w.node(bn("b2", "c2", "bn2", small));
  w.node(std::string("%r2 = Relu(%b2) : ") + small + " @\"relu2\"");
  w.node(std::string("%c3 = Conv(%r2, %w3) {pads = [1, 1, 1, 1]} : ") + small + " @\"conv3\"");
  w.node(bn("b3", "c3", "bn3", small));
  w.node(std::string("%s = Add(%b3, %p) : ") + small + " @\"add\"");
  w.node(std::string("%r3 = Relu(%s) : ") + small + " @\"relu3\"");
  w.node("%g = GlobalAveragePool(%r3) : f32[1,8,1,1] @\"avgpool\"");
  w.node("%f = Flatten(%g) {axis = 1} : f32[1,8] @\"flatten\"");
  w.node("%y = Gemm(%f, %fc_w, %fc_b) {transB = 1} : f32[1,4] @\"fc\"");
  return ir::parse_graph(w.text("y"));
}

ir::Graph sr_like() {
  IrWriter w(11);
  w.input("x", "f32[1,3,4,6]");
  struct Conv {
    const char* name;
    int64_t co, ci;
  };
  for (const Conv& c : {Conv{"head", 8, 3}, Conv{"body0", 8, 8}, Conv{"body1", 8, 8},
                        Conv{"up", 32, 8}, Conv{"up2", 32, 8}, Conv{"tail", 3, 8}}) {
    conv_weight(w, std::string(c.name) + "_w", c.co, c.ci, 3);
    w.constant(std::string(c.name) + "_b", {c.co}, -0.1, 0.1);
  }
  auto conv = [&](const char* out, const char* in, const char* p, const char* type) {
    w.node(std::string("%") + out + " = Conv(%" + in + ", %" + p + "_w, %" + p +
           "_b) {pads = [1, 1, 1, 1]} : " + type + " @\"" + p + "\"");
  };
  conv("h", "x", "head", "f32[1,8,4,6]");
  conv("c0", "h", "body0", "f32[1,8,4,6]");
  w.node("%l = LeakyRelu(%c0) {alpha = 0.1} : f32[1,8,4,6] @\"leaky\"");
  conv("c1", "l", "body1", "f32[1,8,4,6]");
  w.node("%s = Add(%c1, %h) : f32[1,8,4,6] @\"add\"");
  conv("u", "s", "up", "f32[1,32,4,6]");
  w.node("%d = DepthToSpace(%u) {blocksize = 2, mode = \"CRD\"} : f32[1,8,8,12] @\"d2s\"");
  conv("u2", "d", "up2", "f32[1,32,8,12]");
  w.node("%d2 = DepthToSpace(%u2) {blocksize = 2, mode = \"CRD\"} : f32[1,8,16,24] @\"d2s2\"");
  conv("y", "d2", "tail", "f32[1,3,16,24]");
  return ir::parse_graph(w.text("y"));
}

std::map<std::string, int> op_counts(const ir::Graph& g) {
  std::map<std::string, int> r;
  for (const ir::Node& n : g.nodes) ++r[n.op];
  return r;
}

const ir::Node& node_named(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

std::vector<std::string> epilogue_of(const ir::Node& n) {
  std::vector<std::string> r;
  for (const ops::EpilogueStep& s : ops::read_epilogue(n))
    r.emplace_back(ops::epilogue_name(s.kind));
  return r;
}

// Every declared type is the inferred one, and the memory plan of the result is valid.
void expect_consistent(const ir::Graph& g) {
  ir::Graph inferred = g;
  ir::infer_types(inferred, ir::OpRegistry::global());
  for (size_t v = 0; v < g.values.size(); ++v)
    EXPECT_EQ(g.values[v].type.str(), inferred.values[v].type.str()) << g.values[v].name;
  EXPECT_EQ(passes::verify_plan(g, passes::plan_memory(g)), "");
}

TEST(GpuPipeline, NamesAreRegisteredPasses) {
  const std::vector<std::string> fp16 = passes::gpu_pipeline({});
  EXPECT_EQ(fp16, (std::vector<std::string>{
                      "canonicalize", "fold-constants", "fuse-norm-gelu", "fold-batch-norm",
                      "lower-batch-norm", "lift-1d", "lower-conv-transpose", "lower-3d", "convert-layout",
                      "fold-transposes", "fold-qdq", "choose-precision-fp16", "widen-narrow-groups",
                      "fuse", "fuse-prologue", "fold-quantize-scales", "depth-to-space-dcr", "dce", "nest-prefix-concats",
                      "split-wide-concats", "concat-into-slices"}));
  for (const std::string& name : fp16) EXPECT_NE(passes::find_pass(name), nullptr) << name;
  const std::vector<std::string> fp32 =
      passes::gpu_pipeline({.precision = Precision::kFp32});
  EXPECT_EQ(std::count(fp32.begin(), fp32.end(), "choose-precision-fp16"), 0);
  EXPECT_EQ(std::count(fp32.begin(), fp32.end(), "widen-narrow-groups"), 0);
  EXPECT_EQ(fp32.size(), fp16.size() - 2);
}

// After the pipeline: BN folded, every conv a tessel.Conv with its ReLU / residual in the
// epilogue, pools NHWC, the flatten reading NHWC directly; no layout node at the edges: the
// 3x3 stride-1 RGB stem reads the fp32 NCHW input itself, the classifier stores fp32. fp16
// results stay within 2e-2 of the fp32 model.
TEST(GpuPipeline, ResNetLikeFp16) {
  const ir::Graph in = resnet_like();
  const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_EQ(op_counts(out), (std::map<std::string, int>{{"Flatten", 1},
                                                        {"tessel.Conv", 3},
                                                        {"tessel.Gemm", 1},
                                                        {"tessel.GlobalAveragePool", 1},
                                                        {"tessel.MaxPool", 1}}));
  EXPECT_EQ(node_named(out, "conv1").get_string("input_layout", ""), "nchw");
  EXPECT_EQ(node_named(out, "fc").get_string("out_dtype", ""), "f32");
  EXPECT_EQ(epilogue_of(node_named(out, "conv1")), (std::vector<std::string>{"relu"}));
  EXPECT_EQ(epilogue_of(node_named(out, "conv2")), (std::vector<std::string>{"relu"}));
  EXPECT_EQ(epilogue_of(node_named(out, "conv3")),
            (std::vector<std::string>{"add_residual", "relu"}));
  // Biases (from the folded BN) stay fp32 beside fp16 weights, which have the input's 3
  // channels (no Tensor Core padding: the stem reads NCHW).
  const ir::Node& conv1 = node_named(out, "conv1");
  EXPECT_EQ(out.type(conv1.inputs[1]).str(), "f16[8,3,3,3]");
  EXPECT_EQ(out.type(conv1.inputs[2]).dtype, DType::kF32);
  expect_consistent(out);
  testing::expect_same_numerics(in, out, 2e-2, 2e-2);
}

TEST(GpuPipeline, ResNetLikeFp32) {
  const ir::Graph in = resnet_like();
  const ir::Graph out =
      passes::run_passes(in, passes::gpu_pipeline({.precision = Precision::kFp32}));
  EXPECT_EQ(op_counts(out)["Cast"], 0);
  EXPECT_EQ(op_counts(out)["tessel.Conv"], 3);
  expect_consistent(out);
  testing::expect_same_numerics(in, out, 1e-4, 1e-5);
}

// The subpixel tail: both DepthToSpace become conv stores (no standalone DepthToSpace and no
// transpose around them), the residual and the leaky ReLU are epilogues, the 3-channel tail
// conv keeps Co = 3 (predicated in the kernel), and the edges are the convs' own: the head
// reads the fp32 NCHW input, the tail stores the fp32 NCHW output.
TEST(GpuPipeline, SuperResolutionLikeFp16) {
  const ir::Graph in = sr_like();
  const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_EQ(op_counts(out), (std::map<std::string, int>{{"tessel.Conv", 6}}));
  EXPECT_EQ(node_named(out, "head").get_string("input_layout", ""), "nchw");
  EXPECT_EQ(node_named(out, "tail").get_string("store", ""), "nchw");
  EXPECT_EQ(node_named(out, "tail").get_string("out_dtype", ""), "f32");
  EXPECT_EQ(epilogue_of(node_named(out, "body0")), (std::vector<std::string>{"leaky_relu"}));
  EXPECT_EQ(epilogue_of(node_named(out, "body1")), (std::vector<std::string>{"add_residual"}));
  for (const char* name : {"up", "up2"}) {
    const ir::Node& up = node_named(out, name);
    EXPECT_EQ(up.get_string("store", ""), "depth_to_space") << name;
    // depth-to-space-dcr permuted the weights: the model's CRD shuffle is stored as DCR.
    EXPECT_EQ(up.get_string("mode", ""), "DCR") << name;
    EXPECT_EQ(up.get_int("block", 0), 2) << name;
  }
  EXPECT_EQ(out.type(node_named(out, "tail").inputs[1]).str(), "f16[3,3,3,8]");
  expect_consistent(out);
  testing::expect_same_numerics(in, out, 2e-2, 2e-2);
}

// Each pass leaves its own output alone: a second run of the pipeline is the identity.
TEST(GpuPipeline, SecondRunChangesNothing) {
  for (const ir::Graph& in : {resnet_like(), sr_like()}) {
    const ir::Graph once = passes::run_passes(in, passes::gpu_pipeline({}));
    const ir::Graph twice = passes::run_passes(once, passes::gpu_pipeline({}));
    EXPECT_EQ(ir::structural_diff(once, twice), "");
  }
}

}  // namespace
}  // namespace tessel
