// plan_node without a GPU. ConvTranspose: after the pass pipeline a 2-D ConvTranspose is a
// tessel.Conv with a depth_to_space store, planned on Tensor Cores for an H100 (sm_90a); one
// that convert-layout leaves is "not supported" with the reason, which compile_plan reports.
// QDQ: QuantizeLinear and DequantizeLinear are op kernels (the elementwise family), and a QDQ
// block compiles for sm_90a; what they refuse, plan_node reports.
#include "compiler/plan_node.h"

#include <gtest/gtest.h>

#include "compiler/cnn_blocks.h"
#include "compiler/compile_plan.h"
#include "core/error.h"
#include "device/device_info.h"
#include "ir/conv_transpose_nets.h"
#include "ir/infer.h"
#include "ir/ir_writer.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "kernels/contraction/conv_window.h"
#include "ops/tessel_epilogue.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/kernel_rules.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel::compiler {
namespace {

const device::DeviceInfo& h100() { return device::known_device("sm_90a"); }

const ir::Node& node_named(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

// UNet's two upsampling layers (k3 s2 p1 op1 with its ReLU, k2 s2) run on Tensor Cores in
// fp16, their store the depth_to_space of the phases, with the phase conv's extents:
// M = images x input pixels, N = s*s*C_out, K = taps x C_in.
TEST(PlanNodeConvTranspose, UnetUpsamplingOnTensorCoresForSm90a) {
  const ir::Graph g = passes::run_passes(testing::unet_like(), passes::gpu_pipeline({}));
  struct Want {
    const char* name;
    int64_t m, n, k;
  };
  for (const Want& want :
       {Want{"up2", 2 * 4 * 4, 4 * 32, 2 * 2 * 32}, Want{"up1", 2 * 8 * 8, 4 * 16, 32}}) {
    SCOPED_TRACE(want.name);
    const ir::Node& n = node_named(g, want.name);
    EXPECT_EQ(n.op, "tessel.Conv");
    const NodePlan plan = plan_node(g, n, {}, h100());
    ASSERT_EQ(plan.run, NodeRun::kContraction) << plan.summary();
    EXPECT_TRUE(plan.tensor_cores()) << plan.summary();
    EXPECT_EQ(plan.epilogue.store.kind, contraction::StoreMap::Kind::kDepthToSpace);
    EXPECT_EQ(plan.epilogue.store.block, 2);
    EXPECT_TRUE(plan.epilogue.store.dcr);
    const contraction::Contraction& c = *plan.match.contraction;
    EXPECT_EQ(c.m, want.m);
    EXPECT_EQ(c.n, want.n);
    EXPECT_EQ(c.k, want.k);
  }
}

ir::Graph pipelined(const std::string& text) {
  ir::Graph g = ir::parse_graph(text);
  ir::infer_types(g, ir::OpRegistry::global());
  return passes::run_passes(g, passes::gpu_pipeline({}));
}

// A ConvTranspose with a run-time weight keeps its ONNX form; plan_node says why, and so does
// compile_plan's error. (Differing strides and 3-D ones become a conv over the zero-inserted
// input: lower-conv-transpose.)
TEST(PlanNodeConvTranspose, ThoseLeftAloneSayWhy) {
  struct Case {
    const char* graph;
    const char* why;
  };
  const Case cases[] = {
      {R"(graph @g opset 17 {
  input %x : f32[1,8,3,3]
  input %w : f32[8,2,2,2]
  %y = ConvTranspose(%x, %w) {strides = [2, 2]} : f32[1,2,6,6] @"up"
  output %y
})",
       "the weight is not a constant (its taps are rearranged into a stride-1 conv's at compile "
       "time)"},
  };
  for (const Case& c : cases) {
    const ir::Graph g = pipelined(c.graph);
    const ir::Node& n = node_named(g, "up");
    ASSERT_EQ(n.op, "ConvTranspose");
    const NodePlan plan = plan_node(g, n, {}, h100());
    EXPECT_EQ(plan.run, NodeRun::kUnsupported);
    EXPECT_EQ(plan.why, c.why);
    EXPECT_EQ(plan.summary(), std::string("not supported on the GPU: ") + c.why);
    ir::Graph imported = ir::parse_graph(c.graph);
    ir::infer_types(imported, ir::OpRegistry::global());
    try {
      compile_plan(imported, {}, h100());
      ADD_FAILURE() << "compile_plan accepted " << c.graph;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("ConvTranspose 'up': ") + c.why);
    }
  }
}

// The whole UNet, and the ConvTransposes at the graph's edges (an NCHW read and store, a
// crop, a depthwise one), cross-compile for sm_90a with NVRTC: one launch per node but views.
TEST(PlanNodeConvTranspose, NetworksCompileForSm90a) {
  for (const auto& [name, g] : {std::pair{"unet_like", testing::unet_like()},
                                {"conv_transpose_edges", testing::conv_transpose_edges()}}) {
    SCOPED_TRACE(name);
    const CompiledPlan c = compile_plan(g, {}, h100());
    size_t launching = 0;
    int tensor_core = 0;
    for (const ir::Node& n : c.graph.nodes) {
      EXPECT_NE(n.op, "ConvTranspose");
      const NodePlan plan = plan_node(c.graph, n, {}, h100());
      launching += plan.run != NodeRun::kNoKernel;
      tensor_core += plan.tensor_cores();
    }
    EXPECT_EQ(c.plan.profiles[0].launches.size(), launching);
    // UNet: all eight convs; the edges: the two group-1 ones, stems that read the f32 NCHW
    // input (the halo kernel); the depthwise one runs on the grouped-conv kernel.
    EXPECT_EQ(tensor_core, std::string(name) == "unet_like" ? 8 : 2);
  }
}

// Grayscale stems (MNIST-like nets, medical and document models): a conv over one input
// channel runs on the halo kernel after the fp16 pipeline, as an RGB stem does, not as an fp32
// SIMT conv: the f32 NCHW input read by the conv itself, its one channel padded to an 8-channel
// chunk (3x3/1) or to a tap pairs' 4-channel slot (7x7/2); an NHWC input keeps its pixels, its
// alignment Pad dropped (3x3/2). The pipeline keeps the CPU reference's numbers, and each
// compiles for sm_90a.
TEST(PlanNodeStem, GrayscaleStemsRunOnTheHaloKernel) {
  struct Case {
    const char* name;
    const char* input;
    int64_t co, k, stride;
    const char* out;
    bool nchw_input, tap_pairs;
  };
  const Case cases[] = {
      {"mnist_3x3", "f32[8,1,28,28]", 32, 3, 1, "f32[8,32,28,28]", true, false},
      {"xray_7x7s2", "f32[8,1,256,256]", 64, 7, 2, "f32[8,64,128,128]", true, true},
      {"nhwc_3x3s2", "f32[8,256,256,1]", 32, 3, 2, "f32[8,32,128,128]", false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    testing::IrWriter w(11);
    w.input("x", c.input);
    testing::conv_weight(w, "w", c.co, 1, c.k);
    w.constant("b", {c.co}, -0.2, 0.2);
    std::string x = "%x";
    if (!c.nchw_input) {
      w.node(R"(%t = Transpose(%x) {perm = [0, 3, 1, 2]} : f32[8,1,256,256] @"to_nchw")");
      x = "%t";
    }
    const std::string pad = std::to_string(c.k / 2), stride = std::to_string(c.stride);
    w.node("%c = Conv(" + x + ", %w, %b) {pads = [" + pad + ", " + pad + ", " + pad + ", " + pad +
           "], strides = [" + stride + ", " + stride + "]} : " + c.out + " @\"stem\"");
    w.node(std::string("%y = Relu(%c) : ") + c.out + " @\"relu\"");
    const ir::Graph in = w.graph("y");
    const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
    for (const ir::Node& n : g.nodes) EXPECT_NE(n.op, "Pad") << n.label();
    const ir::Node& stem = node_named(g, "stem");
    const NodePlan plan = plan_node(g, stem, {}, h100());
    ASSERT_EQ(plan.run, NodeRun::kContraction) << plan.summary();
    ASSERT_EQ(plan.schedule.mainloop, kernels::Mainloop::kHalo) << plan.summary();
    const std::optional<kernels::HaloLayout> l =
        kernels::halo_layout(*plan.match.contraction, plan.schedule);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->window.channels, 1);
    EXPECT_EQ(l->window.nchw_input, c.nchw_input);
    EXPECT_EQ(l->tap_pairs, c.tap_pairs);
    EXPECT_EQ(l->channels_padded, c.tap_pairs ? 4 : 8);
    testing::expect_same_numerics(in, g, 2e-2, 2e-2);
    const CompiledPlan compiled = compile_plan(in, {}, h100());
    EXPECT_FALSE(compiled.plan.profiles[0].launches.empty());
  }
}

// Every QuantizeLinear / DequantizeLinear the pipeline leaves in a QDQ block runs as an op
// kernel, per channel along NHWC's axis 3 where it was per channel along NCHW's axis 1; the
// u8 graph output goes back to NCHW through a u8 Transpose; nothing is unsupported, and the
// whole graph compiles for sm_90a, in either precision.
TEST(PlanNodeQdq, QuantizeAndDequantizeAreOpKernelsAndCompileForSm90a) {
  for (Precision p : {Precision::kFp16, Precision::kFp32}) {
    SCOPED_TRACE(precision_name(p));
    Options options;
    options.precision = p;
    const CompiledPlan c = compile_plan(testing::qdq_residual_block(), options, h100());
    int quantization = 0, int8_transposes = 0;
    for (const ir::Node& n : c.graph.nodes) {
      const NodePlan plan = plan_node(c.graph, n, options, h100());
      EXPECT_NE(plan.run, NodeRun::kUnsupported) << n.label() << ": " << plan.why;
      if (n.op == "QuantizeLinear" || n.op == "DequantizeLinear") {
        ++quantization;
        EXPECT_EQ(plan.run, NodeRun::kOpKernel) << n.label() << ": " << plan.summary();
        EXPECT_EQ(plan.summary(), "CUDA kernel");
        if (n.name == "q_a" || n.name == "dq_a") {
          EXPECT_EQ(n.get_int("axis", 1), 3) << n.label();
        }
      }
      if (n.op == "Transpose" && c.graph.type(n.outputs[0]).dtype == DType::kU8) {
        ++int8_transposes;
        EXPECT_EQ(plan.run, NodeRun::kOpKernel) << plan.summary();
      }
    }
    // q_x, dq_x, q_a, dq_a, q_out, dq_out (the weights' DQs fold into constants); conv_b's
    // per-tensor asymmetric pair q_b -> dq_b is its epilogue (fuse's fake quantization), q_a's
    // per-channel one stays.
    EXPECT_EQ(quantization, 6);
    EXPECT_EQ(ops::read_epilogue(node_named(c.graph, "conv_b")).at(0).kind, ops::EpilogueKind::kRound);
    EXPECT_EQ(int8_transposes, 1);
  }
}

// What the quantization kernels refuse, plan_node says (and compile_plan reports): QuantizeLinear
// of i32 (the reference divides in double) and f64 scales; and int8 tensors reach no kernel
// other than Q/DQ and the data-movement copies.
TEST(PlanNodeQdq, RefusalsSayWhy) {
  struct Case {
    const char* graph;
    const char* node;
    const char* why;
  };
  const Case cases[] = {
      {R"(graph @g opset 17 {
  input %x : i32[4]
  const %s : f32[] = [2.0]
  const %zp : u8[] = [128]
  %y = QuantizeLinear(%x, %s, %zp) : u8[4] @"q"
  output %y
})",
       "q",
       "input x of dtype i32 has no GPU kernel (f32, f16, bf16; the reference divides i32 in "
       "double)"},
      {R"(graph @g opset 17 {
  input %x : i8[4]
  const %s : f64[] = [2.0]
  %y = DequantizeLinear(%x, %s) : f64[4] @"dq"
  output %y
})",
       "dq", "input dtype f64 has no GPU kernel (f32, f16, bf16, i64, i32, i8, u8, bool)"},
      {R"(graph @g opset 17 {
  input %x : f32[4]
  %y = Cast(%x) {to = 3} : i8[4] @"cast"
  output %y
})",
       "cast",
       "Cast of i8/u8 tensors has no GPU kernel (only QuantizeLinear, DequantizeLinear, data "
       "movement, and a Cast from them take them)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.node);
    ir::Graph g = ir::parse_graph(c.graph);
    ir::infer_types(g, ir::OpRegistry::global());
    const NodePlan plan = plan_node(g, node_named(g, c.node), {}, h100());
    EXPECT_EQ(plan.run, NodeRun::kUnsupported);
    EXPECT_EQ(plan.why, c.why);
    try {
      compile_plan(g, {}, h100());
      ADD_FAILURE() << "compile_plan accepted " << c.graph;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()), node_named(g, c.node).label() + ": " + c.why);
    }
  }
}

// A QDQ depthwise conv (MobileNet's form: Q/DQ around it, ReLU6 as Clip between a DQ and a Q)
// stays float (fold-qdq takes group 1 only) but reads and stores int8: fold-qdq gives it the
// integers of its input (and the pointwise conv before it stores them), fuse the chain after
// it; it runs the depthwise kernel, and explain says so.
TEST(PlanNodeQdq, DepthwiseConvComputesFloatAndReadsAndStoresInt8) {
  ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[2,16,8,8]
  const %sx : f32[] = [0.05]
  const %sw : f32[16] = [0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02]
  const %sy : f32[] = [0.1]
  const %sz : f32[] = [0.05]
  const %z : i8[] = [0]
  const %zw : i8[16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
  const %wq : i8[16,1,3,3] = [-4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0, -4, 1, -3, 2, -2, 3, -1, 4, 0]
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  const %w1q : i8[16,16,1,1] = [-3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1, 2, -2, 1, -3, 0, 3, -1]
  const %sp : f32[] = [0.1]
  %xq = QuantizeLinear(%x, %sx, %z) : i8[2,16,8,8] @"qx"
  %xd = DequantizeLinear(%xq, %sx, %z) : f32[2,16,8,8] @"dqx"
  %w1d = DequantizeLinear(%w1q, %sw, %zw) {axis = 0} : f32[16,16,1,1] @"dqw1"
  %p = Conv(%xd, %w1d) : f32[2,16,8,8] @"pw"
  %pq = QuantizeLinear(%p, %sp, %z) : i8[2,16,8,8] @"qp"
  %pd = DequantizeLinear(%pq, %sp, %z) : f32[2,16,8,8] @"dqp"
  %wd = DequantizeLinear(%wq, %sw, %zw) {axis = 0} : f32[16,1,3,3] @"dqw"
  %y = Conv(%pd, %wd) {group = 16, pads = [1, 1, 1, 1]} : f32[2,16,8,8] @"dw"
  %yq = QuantizeLinear(%y, %sy, %z) : i8[2,16,8,8] @"qy"
  %yd = DequantizeLinear(%yq, %sy, %z) : f32[2,16,8,8] @"dqy"
  %c = Clip(%yd, %lo, %hi) : f32[2,16,8,8] @"relu6"
  %cq = QuantizeLinear(%c, %sz, %z) : i8[2,16,8,8] @"qz"
  output %cq
})");
  ir::infer_types(g, ir::OpRegistry::global());
  Options options;
  options.precision = Precision::kFp16;
  const CompiledPlan c = compile_plan(g, options, h100());
  int convs = 0;
  for (const ir::Node& n : c.graph.nodes) {
    EXPECT_NE(n.op, "Clip") << "the Clip joined the conv's epilogue";
    if (n.op != "tessel.Conv") continue;
    EXPECT_EQ(c.graph.type(n.outputs[0]).dtype, DType::kI8) << n.label();
    if (n.get_int("group", 1) == 1) continue;
    ++convs;
    EXPECT_EQ(c.graph.type(n.inputs[0]).dtype, DType::kI8);
    const NodePlan plan = plan_node(c.graph, n, options, h100());
    EXPECT_EQ(plan.run, NodeRun::kOpKernel) << plan.why;
    EXPECT_NE(plan.why.find("float math, int8 input and output: grouped convolution"),
              std::string::npos)
        << plan.why;
  }
  EXPECT_EQ(convs, 1);
}

}  // namespace
}  // namespace tessel::compiler
