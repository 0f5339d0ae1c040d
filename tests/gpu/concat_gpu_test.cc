// Zero-copy concat and views on the GPU engine, against the CPU reference executor: networks in
// ONNX form (NCHW) with channel Concats whose conv branches store straight into their slices of
// the concat buffer (concat_into_slices, plan_memory.h), one whose pool branch is still copied,
// nested Concats (Inception-v3's Mixed_7b), a SqueezeNet fire module, dense layers
// concatenated along the columns, and Flatten / Reshape views that launch nothing. Each runs
// Engine::run and runtime::cpu::run_graph on two different random inputs (a slice nobody
// writes would show the first run's data in the second), fp16 and fp32.
//
// The ConcatLowering tests need no GPU: the contraction plans of the slice producers as the
// engine builds them, the Concat's copy kernel, and every network compiled for sm_90a.
#include <gtest/gtest.h>

#include <map>

#include "kernels/cuda/op_kernels.h"
#include "kernels/contraction/epilogue.h"
#include "gpu/gpu_test_util.h"
#include "ir/infer.h"
#include "ir/ir_writer.h"
#include "ir/op_registry.h"
#include "ir/printer.h"
#include "ops/tessel_epilogue.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"
#include "runtime/engine.h"
#include "compiler/compile_plan.h"
#include "compiler/plan_node.h"

namespace tessel::runtime {
namespace {

namespace rt = device;
using testing::conv_weight;
using testing::IrWriter;
using testing::random_inputs;
using testing::relative_l2;

// "%out = Relu(Conv(%in, %w)) : type" as two lines, the conv named `name`.
void conv_relu(IrWriter& w, const std::string& out, const std::string& in,
               const std::string& weight, const std::string& attrs, const std::string& type) {
  w.node("%" + out + "_c = Conv(%" + in + ", %" + weight + ") " + attrs + " : " + type + " @\"" +
         out + "\"");
  w.node("%" + out + " = Relu(%" + out + "_c) : " + type + " @\"" + out + "_relu\"");
}

// Inception-v3's Mixed_5b ("A"): 1x1, 1x1 -> 3x3, 1x1 -> 3x3 -> 3x3, and avg pool -> 1x1
// branches; every branch ends in a conv, so the Concat has nothing left to copy.
ir::Graph inception_a() {
  IrWriter w(31);
  w.input("x", "f32[1,16,7,7]");
  conv_weight(w, "w1", 8, 16, 1);
  conv_weight(w, "w2a", 8, 16, 1);
  conv_weight(w, "w2b", 16, 8, 3);
  conv_weight(w, "w3a", 8, 16, 1);
  conv_weight(w, "w3b", 8, 8, 3);
  conv_weight(w, "w3c", 8, 8, 3);
  conv_weight(w, "wp", 8, 16, 1);
  conv_weight(w, "wy", 8, 40, 1);
  const std::string t8 = "f32[1,8,7,7]", pad = "{pads = [1, 1, 1, 1]}";
  conv_relu(w, "b1", "x", "w1", "", t8);
  conv_relu(w, "b2a", "x", "w2a", "", t8);
  conv_relu(w, "b2", "b2a", "w2b", pad, "f32[1,16,7,7]");
  conv_relu(w, "b3a", "x", "w3a", "", t8);
  conv_relu(w, "b3b", "b3a", "w3b", pad, t8);
  conv_relu(w, "b3", "b3b", "w3c", pad, t8);
  w.node(
      "%pool = AveragePool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,16,7,7] "
      "@\"pool\"");
  conv_relu(w, "bp", "pool", "wp", "", t8);
  w.node("%c = Concat(%b1, %b2, %b3, %bp) {axis = 1} : f32[1,40,7,7] @\"concat\"");
  w.node("%y = Conv(%c, %wy) : f32[1,8,7,7] @\"next\"");
  return w.graph("y");
}

// Mixed_6a ("B", a reduction): a stride-2 3x3 branch, a 1x1 -> 3x3 -> stride-2 3x3 tower, and a
// stride-2 max pool of the input, which no contraction writes: the Concat copies that one.
ir::Graph inception_b() {
  IrWriter w(32);
  w.input("x", "f32[2,16,9,9]");
  conv_weight(w, "w1", 24, 16, 3);
  conv_weight(w, "w2a", 8, 16, 1);
  conv_weight(w, "w2b", 16, 8, 3);
  conv_weight(w, "w2c", 16, 16, 3);
  conv_weight(w, "wy", 8, 56, 1);
  conv_relu(w, "b1", "x", "w1", "{strides = [2, 2]}", "f32[2,24,4,4]");
  conv_relu(w, "b2a", "x", "w2a", "", "f32[2,8,9,9]");
  conv_relu(w, "b2b", "b2a", "w2b", "{pads = [1, 1, 1, 1]}", "f32[2,16,9,9]");
  conv_relu(w, "b2", "b2b", "w2c", "{strides = [2, 2]}", "f32[2,16,4,4]");
  w.node("%pool = MaxPool(%x) {kernel_shape = [3, 3], strides = [2, 2]} : f32[2,16,4,4] @\"pool\"");
  w.node("%c = Concat(%b1, %b2, %pool) {axis = 1} : f32[2,56,4,4] @\"concat\"");
  w.node("%y = Conv(%c, %wy) : f32[2,8,4,4] @\"next\"");
  return w.graph("y");
}

// Mixed_7b ("E"): two branches end in a Concat of a 1x3 and a 3x1 conv, concatenated again with
// the 1x1 and pool branches. The inner Concats copy nothing, so all six convs store into the
// outer buffer.
ir::Graph inception_e() {
  IrWriter w(33);
  w.input("x", "f32[1,16,5,5]");
  conv_weight(w, "w1", 8, 16, 1);
  conv_weight(w, "w2", 8, 16, 1);
  w.constant("w2a", {8, 8, 1, 3}, -0.5, 0.5);
  w.constant("w2b", {8, 8, 3, 1}, -0.5, 0.5);
  conv_weight(w, "w3", 8, 16, 1);
  w.constant("w3a", {16, 8, 1, 3}, -0.5, 0.5);
  w.constant("w3b", {8, 8, 3, 1}, -0.5, 0.5);
  conv_weight(w, "wp", 8, 16, 1);
  conv_weight(w, "wy", 16, 56, 1);
  const std::string t8 = "f32[1,8,5,5]", h = "{pads = [0, 1, 0, 1]}", v = "{pads = [1, 0, 1, 0]}";
  conv_relu(w, "b1", "x", "w1", "", t8);
  conv_relu(w, "b2", "x", "w2", "", t8);
  conv_relu(w, "b2a", "b2", "w2a", h, t8);
  conv_relu(w, "b2b", "b2", "w2b", v, t8);
  w.node("%cat2 = Concat(%b2a, %b2b) {axis = 1} : f32[1,16,5,5] @\"cat2\"");
  conv_relu(w, "b3", "x", "w3", "", t8);
  conv_relu(w, "b3a", "b3", "w3a", h, "f32[1,16,5,5]");
  conv_relu(w, "b3b", "b3", "w3b", v, t8);
  w.node("%cat3 = Concat(%b3a, %b3b) {axis = 1} : f32[1,24,5,5] @\"cat3\"");
  w.node(
      "%pool = AveragePool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,16,5,5] "
      "@\"pool\"");
  conv_relu(w, "bp", "pool", "wp", "", t8);
  w.node("%c = Concat(%b1, %cat2, %cat3, %bp) {axis = 1} : f32[1,56,5,5] @\"concat\"");
  w.node("%y = Conv(%c, %wy) : f32[1,16,5,5] @\"next\"");
  return w.graph("y");
}

// SqueezeNet's fire module: squeeze 1x1, expand 1x1 and 3x3, concatenated.
ir::Graph fire() {
  IrWriter w(34);
  w.input("x", "f32[1,32,10,6]");
  conv_weight(w, "ws", 8, 32, 1);
  conv_weight(w, "we1", 16, 8, 1);
  conv_weight(w, "we3", 16, 8, 3);
  conv_weight(w, "wy", 8, 32, 1);
  conv_relu(w, "s", "x", "ws", "", "f32[1,8,10,6]");
  conv_relu(w, "e1", "s", "we1", "", "f32[1,16,10,6]");
  conv_relu(w, "e3", "s", "we3", "{pads = [1, 1, 1, 1]}", "f32[1,16,10,6]");
  w.node("%c = Concat(%e1, %e3) {axis = 1} : f32[1,32,10,6] @\"concat\"");
  w.node("%y = Conv(%c, %wy) : f32[1,8,10,6] @\"next\"");
  return w.graph("y");
}

// Views and dense layers: conv, global pool, Flatten and a Reshape round trip (views: no
// launch), two Gemms concatenated along the columns into a third.
ir::Graph dense_heads() {
  IrWriter w(35);
  w.input("x", "f32[4,24,3,3]");
  conv_weight(w, "wc", 32, 24, 3);
  w.constant("wa", {16, 32}, -0.3, 0.3);
  w.constant("ba", {16}, -0.1, 0.1);
  w.constant("wb", {8, 32}, -0.3, 0.3);
  w.constant("wy", {8, 24}, -0.3, 0.3);
  w.node("const %shape : i64[3] = [4, 4, 8]");
  w.node("const %flat : i64[2] = [4, 32]");
  conv_relu(w, "f", "x", "wc", "{pads = [1, 1, 1, 1]}", "f32[4,32,3,3]");
  w.node("%g = GlobalAveragePool(%f) : f32[4,32,1,1] @\"gap\"");
  w.node("%v = Flatten(%g) {axis = 1} : f32[4,32] @\"flatten\"");
  w.node("%r = Reshape(%v, %shape) : f32[4,4,8] @\"reshape\"");
  w.node("%v2 = Reshape(%r, %flat) : f32[4,32] @\"reshape_back\"");
  w.node("%a = Gemm(%v2, %wa, %ba) {transB = 1} : f32[4,16] @\"fc_a\"");
  w.node("%b = Gemm(%v2, %wb) {transB = 1} : f32[4,8] @\"fc_b\"");
  w.node("%c = Concat(%a, %b) {axis = 1} : f32[4,24] @\"concat\"");
  w.node("%y = Gemm(%c, %wy) {transB = 1} : f32[4,8] @\"fc_y\"");
  return w.graph("y");
}

// A QDQ dense block (onnxruntime's form, symmetric int8): features a and b of scales of their
// own, concatenated and requantized, then a pre-activation norm (scale, shift, ReLU, quantized)
// for conv c, whose feature joins them in a second concat, requantized for conv d. fold-qdq
// keeps each concat's integers (a depthwise conv requantizes it), so the features store int8
// into one buffer; the first concat's requantization becomes the prologue of the norm's
// depthwise conv (fuse-prologue), which reads the concat where it lies: rows of 24 channels,
// 8-byte vectors.
ir::Graph qdq_dense_block() {
  IrWriter w(36);
  w.input("x", "f32[2,16,6,6]");
  conv_weight(w, "wa", 8, 16, 3);
  conv_weight(w, "wb", 8, 16, 1);
  conv_weight(w, "wc", 8, 16, 3);
  conv_weight(w, "wd", 8, 24, 1);
  w.constant("na", {1, 16, 1, 1}, 0.5, 1.5);
  w.constant("nb", {1, 16, 1, 1}, -0.3, 0.3);
  w.literal("const %z : i8[] = [0]");
  w.literal("const %sw : f32[] = [0.002]");
  // Scales as a calibration gives them: no two in a simple ratio. (With 0.03 and 0.04, a
  // quarter of the requantized integers q * 0.75 fall on rounding ties, which the reference
  // breaks by the f32 error of q * 0.03 / 0.04 and the kernels, multiplying by the folded
  // 0.75, to even: one step apart, 1e-2 rel L2.)
  for (const auto& [name, scale] : {std::pair{"sx", "0.0078125"}, {"sa", "0.0297"}, {"sb", "0.0213"},
                                    {"sc", "0.0251"}, {"t1", "0.0353"}, {"t2", "0.0407"}, {"sn", "0.0189"}})
    w.literal(std::string("const %") + name + " : f32[] = [" + scale + "]");
  auto qdq = [&](const std::string& v, const std::string& s, const std::string& shape) {
    w.node("%" + v + "_q = QuantizeLinear(%" + v + ", %" + s + ", %z) : i8" + shape + " @\"" + v + "_q\"");
    w.node("%" + v + "_d = DequantizeLinear(%" + v + "_q, %" + s + ", %z) : f32" + shape + " @\"" + v + "_dq\"");
  };
  for (const auto& [name, shape] : {std::pair{"wa", "[8,16,3,3]"}, {"wb", "[8,16,1,1]"},
                                    {"wc", "[8,16,3,3]"}, {"wd", "[8,24,1,1]"}})
    qdq(name, "sw", shape);
  const std::string t8 = "[2,8,6,6]", pad = "{pads = [1, 1, 1, 1]} ";
  qdq("x", "sx", "[2,16,6,6]");
  w.node("%a = Conv(%x_d, %wa_d) " + pad + ": f32" + t8 + " @\"conv_a\"");
  qdq("a", "sa", t8);
  w.node("%b = Conv(%x_d, %wb_d) : f32" + t8 + " @\"conv_b\"");
  qdq("b", "sb", t8);
  w.node("%c1 = Concat(%a_d, %b_d) {axis = 1} : f32[2,16,6,6] @\"cat1\"");
  qdq("c1", "t1", "[2,16,6,6]");
  w.node("%n1 = Mul(%c1_d, %na) : f32[2,16,6,6] @\"norm.scale\"");
  w.node("%n2 = Add(%n1, %nb) : f32[2,16,6,6] @\"norm\"");
  w.node("%n = Relu(%n2) : f32[2,16,6,6] @\"relu\"");
  qdq("n", "sn", "[2,16,6,6]");
  w.node("%c = Conv(%n_d, %wc_d) " + pad + ": f32" + t8 + " @\"conv_c\"");
  qdq("c", "sc", t8);
  w.node("%c2 = Concat(%a_d, %b_d, %c_d) {axis = 1} : f32[2,24,6,6] @\"cat2\"");
  qdq("c2", "t2", "[2,24,6,6]");
  w.node("%y = Conv(%c2_d, %wd_d) : f32" + t8 + " @\"conv_d\"");
  return w.graph("y");
}

// in_place flags of each Concat of the compiled graph, by node name.
std::map<std::string, std::vector<int64_t>> concat_flags(const ir::Graph& g) {
  std::map<std::string, std::vector<int64_t>> r;
  for (const ir::Node& n : g.nodes)
    if (n.op == "Concat") r[n.name] = n.get_ints(passes::kInPlaceAttr, {});
  return r;
}

// The nodes that launch nothing: views, and Concats with every input stored in place.
int silent_nodes(const ir::Graph& g) {
  int r = 0;
  for (const ir::Node& n : g.nodes)
    r += passes::is_view_alias(g, n) ||
         (n.op == "Concat" && passes::in_place_inputs(g, n).size() == n.inputs.size());
  return r;
}

class ConcatGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }

  // Compiles g for both precisions, checks the Concats' flags and the launch count, and runs
  // it twice against the CPU.
  void check(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& flags,
             int silent) {
    for (Precision precision : {Precision::kFp16, Precision::kFp32}) {
      const bool half = precision == Precision::kFp16;
      SCOPED_TRACE(half ? "fp16" : "fp32");
      Session s = testing::compile_session(g, precision);
      Engine& e = *s.engine();
      const ir::Graph& compiled = *s.graph();
      EXPECT_EQ(concat_flags(compiled), flags);
      EXPECT_EQ(silent_nodes(compiled), silent);
      EXPECT_EQ(e.stats().kernels, static_cast<int>(compiled.nodes.size()) - silent);
      EXPECT_EQ(passes::verify_plan(compiled, passes::plan_memory(compiled)), "");
      for (unsigned seed : {1u, 2u}) {
        const std::vector<Tensor> inputs = random_inputs(g, seed);
        const Tensor want = cpu::run_graph(g, inputs)[0];
        const Tensor got = e.run(inputs)[0];
        EXPECT_LE(relative_l2(got, want), half ? 2e-2 : 1e-3) << "seed " << seed;
      }
    }
  }
};

// No GPU needed: each slice producer's contraction stores into its channels of the concat
// buffer (ld = the buffer's channels), and only those.
TEST(ConcatLowering, SliceProducersGetTheChannelSliceStore) {
  ir::Graph g = passes::run_passes(inception_b(), passes::gpu_pipeline({}));
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  std::map<std::string, std::pair<int64_t, int64_t>> slices;  // conv name -> (offset, ld)
  for (const ir::Node& n : g.nodes) {
    if (!compiler::lowered_as_contraction(n)) continue;
    const compiler::NodePlan plan = compiler::plan_node(g, n, {}, h100);
    ASSERT_EQ(plan.run, compiler::NodeRun::kContraction) << n.label() << ": " << plan.why;
    const contraction::StoreMap& store = plan.epilogue.store;
    if (store.kind == contraction::StoreMap::Kind::kChannelSlice)
      slices[n.name] = {store.channel_offset, store.ld};
  }
  // Mixed_6a: b1's 24 channels at 0, b2's 16 at 24, of 56; the pool's 16 are copied at 40.
  EXPECT_EQ(slices, (std::map<std::string, std::pair<int64_t, int64_t>>{{"b1", {0, 56}},
                                                                        {"b2", {24, 56}}}));
}

// No GPU needed: the Concat's own kernel copies only the input not stored in place (the pool
// branch, input 2); the conv branches' channels are their producers' to write.
TEST(ConcatLowering, ConcatKernelCopiesOnlyTheOtherInputs) {
  const ir::Graph g = passes::run_passes(inception_b(), passes::gpu_pipeline({}));
  for (const ir::Node& n : g.nodes) {
    if (n.op != "Concat") continue;
    const kernels::cuda::OpKernelSource ks = kernels::cuda::emit_op(g, n);
    EXPECT_NE(ks.source.find("static_cast<const f16*>(p.in[2])"), std::string::npos) << ks.source;
    EXPECT_EQ(ks.source.find("p.in[0]"), std::string::npos) << ks.source;
    EXPECT_EQ(ks.source.find("p.in[1]"), std::string::npos) << ks.source;
  }
}

// No GPU needed: in the QDQ dense block, the norm's depthwise conv reads the first concat
// requantized, as the prefix of the second one's buffer (24 channels a row), staged in copies
// of 8 int8 (the rows' alignment; its own 16 channels would take 16), and the depthwise conv
// that requantizes the second concat reads its own buffer.
TEST(ConcatLowering, DepthwiseConvReadsAConcatPrefixWhereItLies) {
  const ir::Graph g = passes::run_passes(qdq_dense_block(), passes::gpu_pipeline({}));
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  std::map<std::string, std::string> sources;
  for (const ir::Node& n : g.nodes) {
    if (!ops::is_depthwise_conv(g, n)) continue;
    const compiler::NodePlan plan = compiler::plan_node(g, n, {}, h100);
    ASSERT_EQ(plan.run, compiler::NodeRun::kOpKernel) << n.label() << ": " << plan.why;
    EXPECT_EQ(g.type(n.inputs[0]).dtype, DType::kI8) << n.label();
    EXPECT_EQ(ops::read_out_dtype(n), DType::kI8) << n.label();
    sources[n.name] = kernels::cuda::emit_op(g, n, plan.slices).source;
    EXPECT_EQ(ops::read_prologue(n).has_value(), n.name == "norm") << n.label();
    if (n.name == "norm") {
      ASSERT_TRUE(plan.slices.x) << n.label();
      EXPECT_EQ(plan.slices.x->channel_offset, 0);
      EXPECT_EQ(plan.slices.x->channels, 24);
    } else {
      EXPECT_FALSE(plan.slices.x) << n.label();
    }
  }
  ASSERT_EQ(sources.size(), 2u) << ir::print_graph(g);
  EXPECT_NE(sources["norm"].find("kXLd = 24, kXOffset = 0;"), std::string::npos);
  EXPECT_NE(sources["norm"].find("kW = 6, kC = 16;"), std::string::npos);
  EXPECT_NE(sources["norm"].find("kStageVec = 8;"), std::string::npos);
  EXPECT_NE(sources["norm"].find("kRequantize = true;"), std::string::npos);
  EXPECT_NE(sources["cat2_dequantize"].find("kRequantize = false;"), std::string::npos);
  EXPECT_NE(sources["cat2_dequantize"].find("kXLd = 24, kXOffset = 0;"), std::string::npos);
  EXPECT_NE(sources["cat2_dequantize"].find("kStageVec = 8;"), std::string::npos);
}

// No GPU needed either: every network lowers and compiles for an H100 with NVRTC, with one
// launch per node that moves data.
TEST(ConcatLowering, NetworksCompileForSm90a) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  for (const auto& [name, g] : {std::pair{"inception_a", inception_a()},
                                {"inception_b", inception_b()},
                                {"inception_e", inception_e()},
                                {"fire", fire()},
                                {"dense_heads", dense_heads()},
                                {"qdq_dense_block", qdq_dense_block()}}) {
    SCOPED_TRACE(name);
    const compiler::CompiledPlan c = compiler::compile_plan(g, {}, h100);
    EXPECT_EQ(c.plan.profiles[0].launches.size(),
              c.graph.nodes.size() - static_cast<size_t>(silent_nodes(c.graph)));
  }
}

TEST_F(ConcatGpu, InceptionABranchesAllInPlace) {
  check(inception_a(), {{"concat", {1, 1, 1, 1}}}, 1);
}

TEST_F(ConcatGpu, InceptionBPoolBranchCopied) { check(inception_b(), {{"concat", {1, 1, 0}}}, 0); }

TEST_F(ConcatGpu, InceptionENestedConcats) {
  check(inception_e(), {{"cat2", {1, 1}}, {"cat3", {1, 1}}, {"concat", {1, 1, 1, 1}}}, 3);
}

TEST_F(ConcatGpu, QdqDenseBlockOfInt8Features) {
  check(qdq_dense_block(), {{"cat1", {1, 1}}, {"cat2", {1, 1}}}, 2);
}

TEST_F(ConcatGpu, FireModule) { check(fire(), {{"concat", {1, 1}}}, 1); }

// Flatten and both Reshapes are views; the dense layers store into the Concat's columns.
TEST_F(ConcatGpu, ViewsAndDenseColumns) { check(dense_heads(), {{"concat", {1, 1}}}, 4); }

}  // namespace
}  // namespace tessel::runtime
