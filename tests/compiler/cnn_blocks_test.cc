// Blocks of ConvNeXt and DenseNet through the GPU pipeline and plan_node for an H100, without a
// GPU: every node has a GPU path, the layout stays NHWC through the model's own permutes, the
// dense layers run on Tensor Cores, and the whole graph compiles with NVRTC.
#include "compiler/cnn_blocks.h"

#include <gtest/gtest.h>

#include <map>

#include "compiler/compile_plan.h"
#include "compiler/plan_node.h"
#include "ir/ir_writer.h"
#include "ir/printer.h"
#include "kernels/cuda/op_kernels.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

std::map<std::string, int> op_counts(const ir::Graph& g) {
  std::map<std::string, int> ops;
  for (const ir::Node& n : g.nodes) ++ops[n.op];
  return ops;
}

// Every node of the compiled graph runs on the GPU; returns how many on Tensor Cores.
int check_every_node_runs(const ir::Graph& g) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  int tensor_cores = 0;
  for (const ir::Node& n : g.nodes) {
    const NodePlan p = plan_node(g, n, {}, h100);
    EXPECT_NE(p.run, NodeRun::kUnsupported) << n.label() << ": " << p.why;
    tensor_cores += p.tensor_cores();
  }
  return tensor_cores;
}

// Both orders of the layer scale (torchvision's, on the channels-first result, and before the
// permute back): the model's permutes cancel against the layout's or alias their input, so
// only the graph-edge layout changes remain; the GELU, the layer scale (folded into the second
// Linear's weights) and the residual add are the Linear layers' epilogues.
TEST(CnnBlocks, ConvNeXtBlockIsNhwcThroughoutWithDenseLayersOnTensorCores) {
  for (bool scale_channels_last : {false, true}) {
    SCOPED_TRACE(scale_channels_last);
    const ir::Graph in = testing::convnext_block(1, 16, 7, scale_channels_last);
    const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
    const std::map<std::string, int> ops = op_counts(g);
    EXPECT_LE(ops.count("Transpose") ? ops.at("Transpose") : 0, 2) << ir::print_graph(g);
    EXPECT_EQ(ops.count("MatMul"), 0u);
    EXPECT_EQ(ops.count("Gelu"), 0u) << ir::print_graph(g);
    EXPECT_EQ(ops.count("Mul"), 0u) << ir::print_graph(g);
    EXPECT_EQ(ops.count("Add"), 0u) << ir::print_graph(g);
    EXPECT_EQ(ops.at("tessel.Gemm"), 2);
    EXPECT_EQ(ops.at("LayerNormalization"), 1);
    EXPECT_GE(check_every_node_runs(g), 2);  // the two Linear layers
    // The same numbers on the CPU before and after the pipeline (fp16 storage: loose).
    testing::expect_same_numerics(in, g, 2e-2, 2e-2);
  }
}

// The pre-activation BN + ReLU after the Concat becomes the 1x1 conv's A prologue: no
// elementwise node is left between the Concat and the conv.
TEST(CnnBlocks, DenseNetPreActivationBatchNormIsTheConvsPrologue) {
  const ir::Graph in = testing::dense_block();
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  const std::map<std::string, int> ops = op_counts(g);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u) << ir::print_graph(g);
  for (const char* op : {"Mul", "Add", "Relu"}) EXPECT_EQ(ops.count(op), 0u) << op << "\n" << ir::print_graph(g);
  EXPECT_EQ(ops.at("tessel.Conv"), 3);
  int prologues = 0;
  for (const ir::Node& n : g.nodes) prologues += n.get_string("prologue", "") == "affine_relu";
  EXPECT_EQ(prologues, 1);
  check_every_node_runs(g);
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// DenseNet's growing Concats nest into one buffer per block: the features are stored in place
// by their 3x3 convs, every inner Concat is a channel prefix read where it lies by its 1x1 conv
// (with the BN + ReLU prologue), and only the block input is copied, once.
TEST(CnnBlocks, DenseBlockConcatsShareOneBuffer) {
  const ir::Graph in = testing::dense_block_chain();
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  int concat_kernels = 0, concats = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op != "Concat") continue;
    ++concats;
    const NodePlan p = plan_node(g, n, {}, h100);
    concat_kernels += p.run == NodeRun::kOpKernel;
    EXPECT_LE(n.inputs.size(), 2u) << n.label();
  }
  EXPECT_EQ(concats, 3) << ir::print_graph(g);
  EXPECT_EQ(concat_kernels, 1) << ir::print_graph(g);
  int prologues = 0;
  for (const ir::Node& n : g.nodes) prologues += n.get_string("prologue", "") == "affine_relu";
  EXPECT_EQ(prologues, 3) << ir::print_graph(g);
  check_every_node_runs(g);
  EXPECT_EQ(passes::verify_plan(g, passes::plan_memory(g)), "");
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// ResNet-v2's unit: the input's BN + ReLU is the prologue of both its readers (a padded 3x3
// and a strided 1x1, each on Tensor Cores), the second BN folds into conv1 and its ReLU is
// conv1's epilogue.
TEST(CnnBlocks, PreActivationBatchNormIsThePrologueOfEveryReader) {
  const ir::Graph in = testing::preact_block();
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  const std::map<std::string, int> ops = op_counts(g);
  for (const char* op : {"Mul", "Add", "Relu"}) EXPECT_EQ(ops.count(op), 0u) << op << "\n" << ir::print_graph(g);
  int prologues = 0;
  for (const ir::Node& n : g.nodes) prologues += n.get_string("prologue", "") == "affine_relu";
  EXPECT_EQ(prologues, 2) << ir::print_graph(g);
  EXPECT_EQ(check_every_node_runs(g), 4);
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// ResNeXt's grouped 3x3 (32 groups of 4 channels): widened to 16 groups of 8 with
// block-diagonal weights (the same numbers), then on Tensor Cores with 4 groups per N tile.
TEST(CnnBlocks, NarrowGroupedConvRunsOnTensorCores) {
  testing::IrWriter w(13);
  w.input("x", "f32[1,128,8,8]");
  testing::conv_weight(w, "wg", 128, 4, 3);
  w.node("%y = Conv(%x, %wg) {group = 32, pads = [1, 1, 1, 1]} : f32[1,128,8,8] @\"conv2\"");
  const ir::Graph in = w.graph("y");
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  int found = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv") continue;
    EXPECT_EQ(n.get_int("group", 1), 16);
    const NodePlan p = plan_node(g, n, {}, device::known_device("sm_90a"));
    EXPECT_EQ(p.run, NodeRun::kContraction) << p.summary();
    EXPECT_TRUE(p.tensor_cores()) << p.summary();
    EXPECT_EQ(p.schedule.groups_per_tile, 4) << p.summary();
    ++found;
  }
  EXPECT_EQ(found, 1);
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// Groups neither grouped kernel takes: wide ones (40 channels each: no warp tile nests with
// them in the packed kernel) run as a batch of dense GEMMs on Tensor Cores; narrow ones (12
// output channels: an n8 fragment would straddle two groups, and 5 groups do not pair up to
// be widened) stay on the direct grouped kernel, and explain says why; depthwise convs say they run
// the depthwise kernel.
TEST(CnnBlocks, GroupedConvSaysWhyNotOnTensorCores) {
  testing::IrWriter w(13);
  w.input("x", "f32[1,80,8,8]");
  testing::conv_weight(w, "wg", 80, 40, 3);
  testing::conv_weight(w, "wn", 60, 16, 3);
  testing::conv_weight(w, "wd", 60, 1, 3);
  w.node("%y = Conv(%x, %wg) {group = 2, pads = [1, 1, 1, 1]} : f32[1,80,8,8] @\"wide\"");
  w.node("%u = Conv(%y, %wn) {group = 5, pads = [1, 1, 1, 1]} : f32[1,60,8,8] @\"narrow\"");
  w.node("%z = Conv(%u, %wd) {group = 60, pads = [1, 1, 1, 1]} : f32[1,60,8,8] @\"depthwise\"");
  const ir::Graph in = w.graph("z");
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  std::map<std::string, NodePlan> plans;
  for (const ir::Node& n : g.nodes)
    if (n.op == "tessel.Conv") plans[n.name] = plan_node(g, n, {}, device::known_device("sm_90a"));
  ASSERT_EQ(plans.size(), 3u);
  const NodePlan& wide = plans["wide"];
  EXPECT_EQ(wide.run, NodeRun::kContraction);
  EXPECT_EQ(wide.schedule.instruction, kernels::Instruction::kMmaSync) << wide.summary();
  EXPECT_EQ(wide.schedule.groups_per_tile, 0) << wide.summary();
  EXPECT_EQ(wide.summary(),
            "Tensor Cores (mma.sync) " + wide.schedule.name() +
                " (groups as a batch of dense GEMMs; 40 output channels per group: no warp tile "
                "of 16, 32, 48 or 64 channels nests with the groups)");
  EXPECT_EQ(plans["narrow"].run, NodeRun::kOpKernel);
  EXPECT_EQ(plans["narrow"].summary(),
            "CUDA kernel: grouped convolution (5 groups of 16 to 12 channels): 12 output channels "
            "per group (the packed-groups kernel gives each mma n8 fragment one group: a multiple "
            "of 8); the direct grouped kernel runs it on CUDA cores");
  EXPECT_EQ(plans["depthwise"].run, NodeRun::kOpKernel);
  EXPECT_EQ(plans["depthwise"].summary(),
            "CUDA kernel: depthwise convolution: the tiled depthwise kernel (memory-bound, CUDA "
            "cores)");
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// A video net's (R(2+1)D-style) block: a 3x3x3 stem with batch norm, a max pool over H and W,
// a (2+1)D pair (1x3x3 then 3x1x1) with a residual add, the global pool and a classifier. Every
// node has a GPU path after lower-3d, the four convs on Tensor Cores, the whole graph compiles
// with NVRTC, and the numbers match the 3-D ops' on the CPU.
TEST(CnnBlocks, VideoBlockRunsOnTheGpuAsConvsOverFrames) {
  testing::IrWriter w(17);
  w.input("x", "f32[2,3,4,12,12]");
  w.constant("w1", {16, 3, 3, 3, 3}, -0.3, 0.3);
  w.constant("bn_s", {16}, 0.5, 1.5);
  w.constant("bn_b", {16}, -0.5, 0.5);
  w.constant("bn_m", {16}, -0.5, 0.5);
  w.constant("bn_v", {16}, 0.5, 1.5);
  w.constant("ws", {16, 16, 1, 3, 3}, -0.2, 0.2);
  w.constant("wt", {16, 16, 3, 1, 1}, -0.2, 0.2);
  w.constant("fc", {10, 16}, -0.5, 0.5);
  w.node(
      "%c1 = Conv(%x, %w1) {pads = [1, 1, 1, 1, 1, 1], strides = [1, 2, 2]} : f32[2,16,4,6,6] "
      "@\"stem\"");
  w.node("%b1 = BatchNormalization(%c1, %bn_s, %bn_b, %bn_m, %bn_v) : f32[2,16,4,6,6] @\"bn\"");
  w.node("%r1 = Relu(%b1) : f32[2,16,4,6,6] @\"relu\"");
  w.node(
      "%p1 = MaxPool(%r1) {kernel_shape = [1, 2, 2], strides = [1, 2, 2]} : f32[2,16,4,3,3] "
      "@\"pool\"");
  w.node("%s = Conv(%p1, %ws) {pads = [0, 1, 1, 0, 1, 1]} : f32[2,16,4,3,3] @\"spatial\"");
  w.node("%sr = Relu(%s) : f32[2,16,4,3,3] @\"relu_s\"");
  w.node("%t = Conv(%sr, %wt) {pads = [1, 0, 0, 1, 0, 0]} : f32[2,16,4,3,3] @\"temporal\"");
  w.node("%a = Add(%t, %p1) : f32[2,16,4,3,3] @\"residual\"");
  w.node("%g = GlobalAveragePool(%a) : f32[2,16,1,1,1] @\"gap\"");
  w.node("%f = Flatten(%g) : f32[2,16] @\"flatten\"");
  w.node("%y = Gemm(%f, %fc) {transB = 1} : f32[2,10] @\"fc\"");
  const ir::Graph in = w.graph("y");
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_GE(check_every_node_runs(g), 4);  // three convs and the classifier at least
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
  const CompiledPlan c = compile_plan(in, {}, device::known_device("sm_90a"));
  EXPECT_GE(runtime::tensor_core_launches(c.plan.profiles[0]), 4);
}

// An audio decoder's upsampling: a 1-D transposed conv of stride 4 (lifted to strides [1, 4],
// which the phase decomposition cannot store) then a 1-D conv. Every node has a GPU path, both
// convs on Tensor Cores.
TEST(CnnBlocks, OneDimensionalTransposedConvRunsOnTheGpu) {
  testing::IrWriter w(19);
  w.input("x", "f32[2,32,50]");
  w.constant("wt", {32, 16, 8}, -0.2, 0.2);
  w.constant("bt", {16}, -0.5, 0.5);
  w.constant("wc", {16, 16, 3}, -0.2, 0.2);
  w.node("%u = ConvTranspose(%x, %wt, %bt) {strides = [4], pads = [2, 2]} : f32[2,16,200] @\"up\"");
  w.node("%r = Relu(%u) : f32[2,16,200] @\"relu\"");
  w.node("%y = Conv(%r, %wc) {pads = [1, 1]} : f32[2,16,200] @\"conv\"");
  const ir::Graph in = w.graph("y");
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_GE(check_every_node_runs(g), 2);
  testing::expect_same_numerics(in, g, 2e-2, 2e-2);
}

// The pass layer's Concat limit is the op kernels' input count.
TEST(CnnBlocks, ConcatLimitIsTheOpKernelAbi) {
  EXPECT_EQ(passes::kMaxConcatInputs, kernels::cuda::kOpKernelInputs);
}

TEST(CnnBlocks, BothCompileForSm90a) {
  for (const ir::Graph& g :
       {testing::convnext_block(), testing::dense_block(), testing::preact_block(),
        testing::dense_block_chain()}) {
    const CompiledPlan c = compile_plan(g, {}, device::known_device("sm_90a"));
    EXPECT_GT(c.plan.profiles[0].launches.size(), 3u);
    EXPECT_GE(runtime::tensor_core_launches(c.plan.profiles[0]), 2);
  }
}

}  // namespace
}  // namespace tessel::compiler
