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

// A QDQ MobileNet-v2 block as onnxruntime's quantizer writes it (NCHW, Q/DQ on every conv
// input, int8 weights per output channel), after a 1x1 conv that takes the graph input (it
// stays float: convert-layout's Transpose is its input): a 1x1 expansion conv to 48 channels
// with ReLU6, the 3x3 stride-2 depthwise conv with ReLU6, the 1x1 projection. Scales are powers of
// two and the weights small integers, so that every sum is exact in fp32 and the rewritten graph
// must give the same numbers.
ir::Graph qdq_mobilenet_block() {
  IrWriter w(13);
  w.input("x", "f32[1,8,7,7]");
  auto ints = [](int n, int salt) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string((i * 7 + salt) % 15 - 7);
    return s;
  };
  auto repeat = [](int n, const std::string& v) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + v;
    return s;
  };
  w.literal("const %z : i8[] = [0]");
  w.literal("const %z48 : i8[48] = [" + repeat(48, "0") + "]");
  w.literal("const %z8 : i8[8] = [" + repeat(8, "0") + "]");
  w.literal("const %lo : f32[] = [0.0]");
  w.literal("const %hi : f32[] = [6.0]");
  for (const char* s : {"s0 : f32[] = [0.0625]", "s1 : f32[] = [0.125]", "s2 : f32[] = [0.25]",
                        "s3 : f32[] = [0.125]"})
    w.literal(std::string("const %") + s);
  w.literal("const %w0 : i8[8,8,1,1] = [" + ints(64, 4) + "]");
  w.literal("const %sw0 : f32[8] = [" + repeat(8, "0.125") + "]");
  w.literal("const %w1 : i8[48,8,1,1] = [" + ints(384, 1) + "]");
  w.literal("const %sw1 : f32[48] = [" + repeat(24, "0.0625, 0.03125") + "]");
  w.literal("const %b1 : f32[48] = [" + repeat(16, "0.5, -0.25, 1.0") + "]");
  w.literal("const %wd : i8[48,1,3,3] = [" + ints(432, 2) + "]");
  w.literal("const %swd : f32[48] = [" + repeat(24, "0.125, 0.0625") + "]");
  w.literal("const %bd : f32[48] = [" + repeat(16, "0.25, 0.0, -0.5") + "]");
  w.literal("const %w2 : i8[8,48,1,1] = [" + ints(384, 3) + "]");
  w.literal("const %sw2 : f32[8] = [" + repeat(4, "0.03125, 0.015625") + "]");
  w.literal("const %b2 : f32[8] = [" + repeat(4, "0.5, -0.5") + "]");
  const char* e = "f32[1,48,7,7]";
  const char* d = "f32[1,48,4,4]";
  auto qdq = [&](const std::string& v, const std::string& s, const std::string& type) {
    std::string i8 = type;
    i8.replace(0, 3, "i8");
    w.node("%" + v + "q = QuantizeLinear(%" + v + ", %" + s + ", %z) : " + i8 + " @\"q_" + v +
           "\"");
    w.node("%" + v + "d = DequantizeLinear(%" + v + "q, %" + s + ", %z) : " + type + " @\"dq_" + v +
           "\"");
  };
  auto weight = [&](const std::string& wq, const std::string& type) {
    w.node("%" + wq + "f = DequantizeLinear(%" + wq + ", %s" + wq + ", %z" +
           (wq == "w1" || wq == "wd" ? "48" : "8") + ") {axis = 0} : " + type + " @\"dq_" + wq +
           "\"");
  };
  qdq("x", "s0", "f32[1,8,7,7]");
  weight("w0", "f32[8,8,1,1]");
  w.node("%c = Conv(%xd, %w0f) : f32[1,8,7,7] @\"first\"");
  qdq("c", "s0", "f32[1,8,7,7]");
  weight("w1", "f32[48,8,1,1]");
  w.node(std::string("%e = Conv(%cd, %w1f, %b1) : ") + e + " @\"expand\"");
  w.node(std::string("%er = Clip(%e, %lo, %hi) : ") + e + " @\"expand_relu6\"");
  qdq("er", "s1", e);
  weight("wd", "f32[48,1,3,3]");
  w.node(std::string(
             "%dw = Conv(%erd, %wdf, %bd) {group = 48, pads = [1, 1, 1, 1], strides = [2, 2]} : ") +
         d + " @\"dw\"");
  w.node(std::string("%dr = Clip(%dw, %lo, %hi) : ") + d + " @\"dw_relu6\"");
  qdq("dr", "s2", d);
  weight("w2", "f32[8,48,1,1]");
  w.node("%p = Conv(%drd, %w2f, %b2) : f32[1,8,4,4] @\"project\"");
  qdq("p", "s3", "f32[1,8,4,4]");
  return w.graph("pd");
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
                      "fold-transposes", "integer-readers", "fold-qdq", "choose-precision-fp16",
                      "widen-narrow-groups",
                      "fuse", "fuse-prologue", "fold-quantize-scales", "unit-quantize", "fuse-mul-quantize",
                      "depth-to-space-dcr", "dce",
                      "nest-prefix-concats",
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

// The QDQ block: the expansion conv stores the int8 that the depthwise conv reads (no
// DequantizeLinear between them; the conv's chain ends at its quantize and the ReLU6 on the
// integers), the depthwise conv keeps float weights with X's scale as S, and the numbers are
// the QDQ graph's: exactly in fp32 (every sum exact), within one int8 step of the output in
// fp16 (where the input's fp16 rounding may move a quantized input one step).
TEST(GpuPipeline, QdqMobileNetBlockDepthwiseReadsInt8) {
  const ir::Graph in = qdq_mobilenet_block();
  for (const Precision precision : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precision == Precision::kFp32 ? "fp32" : "fp16");
    const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({.precision = precision}));
    const ir::Node& expand = node_named(out, "expand");
    const ir::Node& dw = node_named(out, "dw");
    EXPECT_EQ(out.type(expand.inputs[1]).dtype, DType::kI8) << "an int8 contraction";
    EXPECT_EQ(out.type(expand.outputs[0]).dtype, DType::kI8);
    EXPECT_EQ(epilogue_of(expand), (std::vector<std::string>{"clip", "quantize"}));
    EXPECT_EQ(dw.inputs[0], expand.outputs[0]);
    EXPECT_EQ(out.type(dw.inputs[0]).dtype, DType::kI8);
    EXPECT_EQ(out.type(dw.inputs[1]).dtype,
              precision == Precision::kFp32 ? DType::kF32 : DType::kF16);
    ASSERT_EQ(dw.inputs.size(), 5u);
    // X's scale 0.125, over the output scale 0.25 that fold-quantize-scales moved into it.
    EXPECT_EQ(out.value(dw.inputs[4]).data->get_f64(0), 0.5);
    EXPECT_EQ(out.type(dw.outputs[0]).dtype, DType::kI8);
    expect_consistent(out);
    if (precision == Precision::kFp32)
      testing::expect_same_numerics(in, out, 0.0, 0.0);
    else
      testing::expect_same_numerics(in, out, 0.0, 0.125);
  }
}

// Each pass leaves its own output alone: a second run of the pipeline is the identity.
TEST(GpuPipeline, SecondRunChangesNothing) {
  for (const ir::Graph& in : {resnet_like(), sr_like(), qdq_mobilenet_block()}) {
    const ir::Graph once = passes::run_passes(in, passes::gpu_pipeline({}));
    const ir::Graph twice = passes::run_passes(once, passes::gpu_pipeline({}));
    EXPECT_EQ(ir::structural_diff(once, twice), "");
  }
}

}  // namespace
}  // namespace tessel
