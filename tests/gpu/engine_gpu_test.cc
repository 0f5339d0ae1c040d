// The whole-model GPU engine against the CPU reference executor: small networks in textual IR
// shaped like the model zoo's (a ResNet stage, the super-resolution net's subpixel tail, a
// MobileNet depthwise block), then the generated small zoo models themselves. Each runs
// Engine::run and runtime::cpu::run_graph on the same random inputs (never zero) and compares
// by relative L2: 2e-2 in fp16, 1e-3 in fp32. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "gpu/gpu_test_util.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"
#include "passes/plan_memory.h"
#include "compiler/cnn_blocks.h"
#include "compiler/plan_node.h"
#include "passes/pipeline.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/default_schedule.h"
#include "compiler/tuning_db.h"
#include "runtime/engine.h"

namespace tessel::runtime {
namespace {

namespace rt = device;

using testing::batch_norm_params;
using testing::bn;
using testing::conv_weight;
using testing::IrWriter;
using testing::random_inputs;
using testing::relative_l2;

// conv-bn-relu, maxpool, a residual block, global pool, flatten, dense; 16 channels so that
// the 3x3 convs and the dense layer are Tensor Core contractions.
ir::Graph resnet_like() {
  IrWriter w(7);
  w.input("x", "f32[2,3,12,10]");
  conv_weight(w, "w1", 16, 3, 3);
  conv_weight(w, "w2", 16, 16, 3);
  conv_weight(w, "w3", 16, 16, 3);
  for (const char* p : {"bn1", "bn2", "bn3"}) batch_norm_params(w, p, 16);
  w.constant("fc_w", {24, 16}, -0.5, 0.5);
  w.constant("fc_b", {24}, -0.1, 0.1);
  const std::string big = "f32[2,16,12,10]", small = "f32[2,16,6,5]";
  w.node("%c1 = Conv(%x, %w1) {pads = [1, 1, 1, 1]} : " + big + " @\"conv1\"");
  w.node(bn("b1", "c1", "bn1", big));
  w.node("%r1 = Relu(%b1) : " + big + " @\"relu1\"");
  w.node("%p = MaxPool(%r1) {kernel_shape = [2, 2], strides = [2, 2]} : " + small + " @\"pool\"");
  w.node("%c2 = Conv(%p, %w2) {pads = [1, 1, 1, 1]} : " + small + " @\"conv2\"");
  w.node(bn("b2", "c2", "bn2", small));
  w.node("%r2 = Relu(%b2) : " + small + " @\"relu2\"");
  w.node("%c3 = Conv(%r2, %w3) {pads = [1, 1, 1, 1]} : " + small + " @\"conv3\"");
  w.node(bn("b3", "c3", "bn3", small));
  w.node("%s = Add(%b3, %p) : " + small + " @\"add\"");
  w.node("%r3 = Relu(%s) : " + small + " @\"relu3\"");
  w.node("%g = GlobalAveragePool(%r3) : f32[2,16,1,1] @\"gap\"");
  w.node("%f = Flatten(%g) {axis = 1} : f32[2,16] @\"flatten\"");
  w.node("%y = Gemm(%f, %fc_w, %fc_b) {transB = 1} : f32[2,24] @\"fc\"");
  return w.graph("y");
}

// The subpixel tail: leaky ReLU and residual epilogues, two depth_to_space CRD stores, a
// 3-channel output conv.
ir::Graph sr_like() {
  IrWriter w(11);
  w.input("x", "f32[1,3,6,10]");
  struct Conv {
    const char* name;
    int64_t co, ci;
  };
  for (const Conv& c : {Conv{"head", 16, 3}, Conv{"body0", 16, 16}, Conv{"body1", 16, 16},
                        Conv{"up", 64, 16}, Conv{"up2", 32, 16}, Conv{"tail", 3, 8}}) {
    conv_weight(w, std::string(c.name) + "_w", c.co, c.ci, 3);
    w.constant(std::string(c.name) + "_b", {c.co}, -0.1, 0.1);
  }
  auto conv = [&](const char* out, const char* in, const char* p, const std::string& type) {
    w.node(std::string("%") + out + " = Conv(%" + in + ", %" + p + "_w, %" + p +
           "_b) {pads = [1, 1, 1, 1]} : " + type + " @\"" + p + "\"");
  };
  conv("h", "x", "head", "f32[1,16,6,10]");
  conv("c0", "h", "body0", "f32[1,16,6,10]");
  w.node("%l = LeakyRelu(%c0) {alpha = 0.1} : f32[1,16,6,10] @\"leaky\"");
  conv("c1", "l", "body1", "f32[1,16,6,10]");
  w.node("%s = Add(%c1, %h) : f32[1,16,6,10] @\"add\"");
  conv("u", "s", "up", "f32[1,64,6,10]");
  w.node("%d = DepthToSpace(%u) {blocksize = 2, mode = \"CRD\"} : f32[1,16,12,20] @\"d2s\"");
  conv("u2", "d", "up2", "f32[1,32,12,20]");
  w.node("%d2 = DepthToSpace(%u2) {blocksize = 2, mode = \"CRD\"} : f32[1,8,24,40] @\"d2s2\"");
  conv("y", "d2", "tail", "f32[1,3,24,40]");
  return w.graph("y");
}

// MobileNetV2's inverted residual: 1x1 expand + BN + ReLU6, depthwise 3x3 stride 1 + BN +
// ReLU6 (a grouped tessel.Conv on the op kernels), 1x1 project + BN, residual add.
ir::Graph depthwise_block() {
  IrWriter w(5);
  w.input("x", "f32[1,16,9,7]");
  conv_weight(w, "we", 48, 16, 1);
  conv_weight(w, "wd", 48, 1, 3);
  conv_weight(w, "wp", 16, 48, 1);
  batch_norm_params(w, "bne", 48);
  batch_norm_params(w, "bnd", 48);
  batch_norm_params(w, "bnp", 16);
  w.constant("lo", {}, 0.0, 0.0);
  w.constant("hi", {}, 6.0, 6.0);
  const std::string wide = "f32[1,48,9,7]", narrow = "f32[1,16,9,7]";
  w.node("%e = Conv(%x, %we) : " + wide + " @\"expand\"");
  w.node(bn("be", "e", "bne", wide));
  w.node("%re = Clip(%be, %lo, %hi) : " + wide + " @\"relu6_e\"");
  w.node("%d = Conv(%re, %wd) {group = 48, pads = [1, 1, 1, 1]} : " + wide + " @\"dw\"");
  w.node(bn("bd", "d", "bnd", wide));
  w.node("%rd = Clip(%bd, %lo, %hi) : " + wide + " @\"relu6_d\"");
  w.node("%p = Conv(%rd, %wp) : " + narrow + " @\"project\"");
  w.node(bn("bp", "p", "bnp", narrow));
  w.node("%y = Add(%bp, %x) : " + narrow + " @\"add\"");
  return w.graph("y");
}

// Compiles `g`, then runs it twice on different inputs (the second run checks that each run
// uploads its inputs and that replays leave nothing behind), each against the CPU.
Session check_model(const ir::Graph& g, Precision precision, double tolerance) {
  Session s = testing::compile_session(g, precision);
  Engine& e = *s.engine();
  testing::expect_engine_matches_cpu(s, g, tolerance);
  // One launch per node, except those plan_node says launch nothing (views, Concats whose
  // producers store into their slices).
  int silent = 0;
  const ir::Graph& compiled = *s.graph();
  const device::DeviceInfo device = rt::device_info();
  for (const ir::Node& n : compiled.nodes)
    silent += compiler::plan_node(compiled, n, {}, device).run == compiler::NodeRun::kNoKernel;
  EXPECT_EQ(e.stats().kernels, static_cast<int>(compiled.nodes.size()) - silent);
  EXPECT_GT(e.stats().arena_bytes, 0);
  return s;
}

class EngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    sm80_ = rt::device_info().cc_major >= 8;
  }
  bool sm80_ = false;  // mma.sync m16n8k16 exists: Tensor Core kernels are expected
};

TEST_F(EngineGpu, ResNetLikeFp16) {
  const Session s = check_model(resnet_like(), Precision::kFp16, 2e-2);
  const Engine& e = *s.engine();
  // conv1 (channels padded to 8), conv2, conv3 and the dense layer.
  if (sm80_) {
    EXPECT_GE(e.stats().tensor_core_kernels, 3);
  }
}

TEST_F(EngineGpu, ResNetLikeFp32) {
  const Session s = check_model(resnet_like(), Precision::kFp32, 1e-3);
  const Engine& e = *s.engine();
  EXPECT_EQ(e.stats().tensor_core_kernels, 0);  // f32 operands: SIMT
}

TEST_F(EngineGpu, SuperResolutionLikeFp16) {
  const Session s = check_model(sr_like(), Precision::kFp16, 2e-2);
  const Engine& e = *s.engine();
  if (sm80_) {
    EXPECT_GE(e.stats().tensor_core_kernels, 5);
  }
}

TEST_F(EngineGpu, DepthwiseBlockFp16) {
  const Session s = check_model(depthwise_block(), Precision::kFp16, 2e-2);
  int grouped = 0;
  for (const ir::Node& n : s.graph()->nodes)
    grouped += n.op == "tessel.Conv" && n.get_int("group", 1) > 1;
  EXPECT_EQ(grouped, 1);
}

// ConvNeXt's block: LayerNorm, GELU and the Linear layers (tessel.Gemm) on the GPU, NHWC
// through the model's permutes; batch 1 and 2.
TEST_F(EngineGpu, ConvNeXtBlockFp16) {
  for (int64_t n : {1, 2}) {
    SCOPED_TRACE(n);
    const Session s = check_model(testing::convnext_block(n, 16, 7, n == 2), Precision::kFp16, 2e-2);
    if (sm80_) {
      EXPECT_GE(s.engine()->stats().tensor_core_kernels, 2);
    }
  }
}

// DenseNet's pre-activation batch norm after a Concat: a per-channel scale and shift.
TEST_F(EngineGpu, DenseBlockFp16AndFp32) {
  check_model(testing::dense_block(2), Precision::kFp16, 2e-2);
  check_model(testing::dense_block(1), Precision::kFp32, 1e-3);
}

// BN + ReLU fused into the A loads of a padded 3x3 (zero padding must stay zero), a strided
// 1x1 and DenseNet's 1x1 after a Concat: mma.sync in fp16 (several k-tiles in flight), the
// SIMT kernel in fp32.
TEST_F(EngineGpu, PreActivationPrologueFp16AndFp32) {
  check_model(testing::preact_block(2, 32, 10), Precision::kFp16, 2e-2);
  check_model(testing::preact_block(1, 64, 15), Precision::kFp16, 2e-2);
  check_model(testing::preact_block(2, 16, 6), Precision::kFp32, 1e-3);
}

// DenseNet's block: nested Concats in one buffer (the 1x1 convs read channel prefixes of it,
// the first Concat copies the block input into it), BN + ReLU prologues.
TEST_F(EngineGpu, DenseBlockChainFp16AndFp32) {
  check_model(testing::dense_block_chain(2, 16, 8, 3, 6), Precision::kFp16, 2e-2);
  check_model(testing::dense_block_chain(1, 32, 16, 4, 9), Precision::kFp16, 2e-2);
  check_model(testing::dense_block_chain(1, 16, 8, 2, 5), Precision::kFp32, 1e-3);
  // The 1x1 convs read the Concat prefixes without a prologue (any GEMM kernel may take them:
  // mma.sync or wgmma read A through the same gathers).
  check_model(testing::dense_block_chain(8, 64, 32, 3, 14, false), Precision::kFp16, 2e-2);
}

// The same block with a tuning database that gives every conv reading a Concat prefix a wgmma
// schedule (the default picks mma.sync at these sizes): wgmma's loaders read the strided X
// through the same gathers. Also checks that the engine ran the database's schedules.
TEST_F(EngineGpu, ConcatPrefixesReadByTunedWgmmaKernels) {
  const device::DeviceInfo device = rt::device_info();
  if (!kernels::has_wgmma(device)) GTEST_SKIP() << "no wgmma on " << device.arch();
  const ir::Graph in = testing::dense_block_chain(4, 64, 32, 3, 14, false);
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  compiler::TuningDb db;
  std::set<std::string> forced;
  for (const ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv" || !passes::channel_slice_of(g, n.inputs.at(0))) continue;
    const compiler::NodePlan plan = compiler::plan_node(g, n, {}, device);
    const contraction::Contraction& c = *plan.match.contraction;
    for (const kernels::Schedule& s : kernels::enumerate_schedules(c, device)) {
      if (s.instruction != kernels::Instruction::kWgmma || kernels::cuda::can_implement(c, plan.epilogue, s))
        continue;
      db.add({compiler::tuning_key(c, plan.epilogue), compiler::TuningDb::device_key(device),
              s.name(), 1.0, 1});
      forced.insert(s.name());
      break;
    }
  }
  ASSERT_FALSE(forced.empty());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessel_wgmma_prefix_" + std::to_string(getpid()) + ".json")).string();
  db.save(path);
  Options o;
  o.tuning_db = path;
  const Session s = Session::from_graph(in, o);
  testing::expect_engine_matches_cpu(s, in, 2e-2);
  int wgmma = 0;
  for (const runtime::PlanLaunch& l : s.engine()->plan().profiles[0].launches) wgmma += forced.count(l.schedule) > 0;
  EXPECT_GE(wgmma, 1);
  std::filesystem::remove(path);
}

// compute-sanitizer's subset (scripts/gpu_suite.sh): the prologue's in-place rewrite of
// landed shared-memory vectors, between cp.async.wait_group and the barrier.
TEST_F(EngineGpu, SanitizePreActivationPrologue) {
  check_model(testing::preact_block(1, 16, 6), Precision::kFp16, 2e-2);
  check_model(testing::dense_block_chain(1, 16, 8, 2, 5), Precision::kFp16, 2e-2);
}

TEST_F(EngineGpu, WrongInputIsAUserError) {
  Session s = testing::compile_session(depthwise_block());
  Engine& e = *s.engine();
  Tensor bad(DType::kF32, {1, 16, 9, 8});
  EXPECT_THROW(e.run({bad}), UserError);
}

// The generated small zoo (tools/models/gen_models.py --small), where python can make it.
TEST_F(EngineGpu, SmallZooModelsFp16) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel_engine_zoo_" + std::to_string(getpid()));
  const std::string models = "resnet50,mobilenet_v2,vgg16,sr_net";
  const std::string cmd = "python3 " TESSEL_SOURCE_DIR "/tools/models/gen_models.py --out " +
                          dir.string() + " --small --models " + models + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "could not generate the zoo models: " << cmd;
  }
  for (const char* name : {"resnet50", "mobilenet_v2", "vgg16", "sr_net"}) {
    SCOPED_TRACE(name);
    ir::Graph g = onnx::import_model((dir / (std::string(name) + ".onnx")).string());
    ir::infer_types(g, ir::OpRegistry::global());
    const std::vector<Tensor> inputs = random_inputs(g, 3);
    const std::vector<Tensor> want = cpu::run_graph(g, inputs);
    Session s = testing::compile_session(g);
    Engine& e = *s.engine();
    const std::vector<Tensor> got = e.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(relative_l2(got[0], want[0]), 2e-2);
    if (sm80_) {
      EXPECT_GT(e.stats().tensor_core_kernels, 0);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::runtime
