// compiler::predict: the analytical time of each launch, the learned correction on top of it
// (predict_fit.h), and the whole replay's sum with the per-launch gaps.
#include "compiler/predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "compiler/cnn_blocks.h"
#include "compiler/plan_node.h"
#include "compiler/predict_fit.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/estimate.h"
#include "passes/pipeline.h"

namespace tessel::compiler {
namespace {

ir::Graph gpu_graph(const ir::Graph& g) { return passes::run_passes(g, passes::gpu_pipeline({})); }

// Every launch has an analytical time and a corrected one; none is predicted below the least
// kernel time of the fit; the replay is the launches plus launch_gap_us for each. Each launch
// says what it is as a trace records it: a contraction its schedule and epilogue, an op kernel
// its entry point.
TEST(Predict, EveryLaunchIsCorrectedAndTheReplayAddsTheGaps) {
  for (const ir::Graph& g : {gpu_graph(testing::preact_block()), gpu_graph(testing::convnext_block()),
                             gpu_graph(testing::dense_block())}) {
    const ModelPrediction m = predict(g, {}, device::known_device("sm_90a"));
    double replay = 0;
    int launches = 0;
    for (const NodePrediction& p : m.nodes) {
      if (p.model == "none") {
        EXPECT_EQ(p.microseconds, 0.0);
        continue;
      }
      ++launches;
      EXPECT_GT(p.analytical_us, 0.0) << g.nodes[static_cast<size_t>(p.node)].label();
      EXPECT_GE(p.microseconds, fit::kMinKernelUs) << g.nodes[static_cast<size_t>(p.node)].label();
      EXPECT_TRUE(std::isfinite(p.microseconds));
      EXPECT_GT(p.launch.ctas, 0.0);
      EXPECT_GT(p.launch.threads, 0.0);
      const ir::Node& n = g.nodes[static_cast<size_t>(p.node)];
      if (p.contraction) {
        const NodePlan plan = plan_node(g, n, {}, device::known_device("sm_90a"));
        EXPECT_EQ(p.launch.schedule, plan.schedule.name()) << n.label();
        EXPECT_EQ(p.launch.epilogue, plan.epilogue.str()) << n.label();
        EXPECT_EQ(p.launch.entry, "") << n.label();
      } else {
        EXPECT_EQ(p.launch.entry.rfind("tessel_op_", 0), 0u) << n.label() << ": " << p.launch.entry;
        EXPECT_EQ(p.launch.kind.rfind("op:", 0), 0u) << n.label() << ": " << p.launch.kind;
        EXPECT_EQ(p.launch.schedule, "") << n.label();
      }
      replay += p.microseconds + launch_gap_us(p.microseconds, p.contraction, m.cold_weights);
    }
    EXPECT_GT(launches, 0);
    EXPECT_FALSE(m.cold_weights);  // a block's weights fit in the L2 cache
    EXPECT_NEAR(m.microseconds, replay, 1e-9);
  }
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs, false, false), fit::kOpLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs - 0.01, false, false), fit::kSmallOpLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs, true, false), fit::kLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs - 0.01, true, false), fit::kSmallLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs, false, true), fit::kOpLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs, true, true),
            fit::kLaunchGapUs + fit::kColdWeightsGapUs);
}

// A model whose constants exceed half of the L2 cache reads its weights from DRAM in every
// replay; a kernel timed alone (as the fit measured them) reads them from L2. The replay adds
// kColdWeightsGapUs per contraction launch, and the fit found that time positive.
TEST(Predict, WeightsThatDoNotFitInL2AreReadFromDramInEachReplay) {
  EXPECT_GT(fit::kColdWeightsGapUs, 0.0);
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  EXPECT_FALSE(cold_weights(int64_t{25} << 20, h100));
  EXPECT_TRUE(cold_weights((int64_t{25} << 20) + 1, h100));
  EXPECT_TRUE(cold_weights(int64_t{21} << 20, device::known_device("sm_80")));  // 40 MiB of L2
  device::DeviceInfo small_l2 = h100;
  small_l2.l2_bytes = 16 << 10;
  const ir::Graph g = gpu_graph(testing::preact_block());
  const ModelPrediction m = predict(g, {}, small_l2);
  ASSERT_TRUE(m.cold_weights) << m.constant_bytes << " bytes of constants";
  double replay = 0;
  int contractions = 0;
  for (const NodePrediction& p : m.nodes) {
    if (p.model == "none") continue;
    contractions += p.contraction;
    replay += p.microseconds + launch_gap_us(p.microseconds, p.contraction, false);
  }
  EXPECT_GT(contractions, 0);
  EXPECT_NEAR(m.microseconds, replay + contractions * fit::kColdWeightsGapUs, 1e-9);
}

// A layer large enough to be past the floors is predicted slower on the A100 than on the H100,
// and a larger one slower than a smaller one.
TEST(Predict, LargerWorkAndSlowerGpusArePredictedSlower) {
  const ir::Graph small = gpu_graph(testing::preact_block(8, 64, 28));
  const ir::Graph large = gpu_graph(testing::preact_block(32, 64, 56));
  const double h100_small = predict(small, {}, device::known_device("sm_90a")).microseconds;
  const double h100_large = predict(large, {}, device::known_device("sm_90a")).microseconds;
  const double a100_large = predict(large, {}, device::known_device("sm_80")).microseconds;
  EXPECT_GT(h100_large, 2.0 * h100_small);
  EXPECT_GT(a100_large, 1.5 * h100_large);
}

// Three 1x1 convs as onnxruntime's quantizer writes them, symmetric int8 Q/DQ around each (zero
// points 0, weights per output channel): 64 -> 64 over the input, then 64 -> 256 int8 into int8
// and 256 -> 64 int8 into the f32 graph output.
ir::Graph qdq_conv_chain(int64_t n = 8, int64_t hw = 56) {
  testing::IrWriter w(13);
  auto act = [&](int64_t c, const char* dtype) {
    return std::string(dtype) + "[" + std::to_string(n) + "," + std::to_string(c) + "," +
           std::to_string(hw) + "," + std::to_string(hw) + "]";
  };
  w.input("x", act(64, "f32"));
  w.literal("const %s : f32[] = [0.03125]");
  w.literal("const %z : i8[] = [0]");
  w.node("%q0 = QuantizeLinear(%x, %s, %z) : " + act(64, "i8") + " @\"q_x\"");
  w.node("%d0 = DequantizeLinear(%q0, %s, %z) : " + act(64, "f32") + " @\"dq_x\"");
  const int64_t channels[] = {64, 64, 256, 64};
  for (int i = 0; i < 3; ++i) {
    const std::string c(1, static_cast<char>('a' + i));
    const std::string in = std::to_string(i), out = std::to_string(i + 1);
    const int64_t ci = channels[i], co = channels[i + 1];
    const std::string ws = "[" + std::to_string(co) + "," + std::to_string(ci) + ",1,1]";
    std::string codes, scales, zeros;
    for (int64_t k = 0; k < co * ci; ++k)
      codes += (k ? ", " : "") + std::to_string((k * 37 % 127 + 1) * (k % 2 ? -1 : 1));
    for (int64_t k = 0; k < co; ++k) {
      scales += k ? ", 0.002" : "0.002";
      zeros += k ? ", 0" : "0";
    }
    w.literal("const %w" + c + " : i8" + ws + " = [" + codes + "]");
    w.literal("const %sw" + c + " : f32[" + std::to_string(co) + "] = [" + scales + "]");
    w.literal("const %zw" + c + " : i8[" + std::to_string(co) + "] = [" + zeros + "]");
    w.node("%f" + c + " = DequantizeLinear(%w" + c + ", %sw" + c + ", %zw" + c +
           ") {axis = 0} : f32" + ws + " @\"dq_w" + c + "\"");
    w.node("%c" + c + " = Conv(%d" + in + ", %f" + c +
           ") {kernel_shape = [1, 1]} : " + act(co, "f32") + " @\"conv_" + c + "\"");
    w.node("%q" + out + " = QuantizeLinear(%c" + c + ", %s, %z) : " + act(co, "i8") + " @\"q_" + c +
           "\"");
    w.node("%d" + out + " = DequantizeLinear(%q" + out + ", %s, %z) : " + act(co, "f32") +
           " @\"dq_" + c + "\"");
  }
  return w.graph("d3");
}

// An int8 contraction's C is f32, but its epilogue stores what follows it: the cost model is
// asked for the store at the epilogue's dtype (an i8 store charged as f32 held ResNet-50 int8's
// 1x1 convs at 2-3x their measured times). Each contraction says its operands' dtype (for the
// trace, PlanLaunch::operand_dtype).
TEST(Predict, ContractionsAreTimedAtTheDtypesTheyStore) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  const ir::Graph g = gpu_graph(qdq_conv_chain());
  const ModelPrediction m = predict(g, {}, h100);
  std::map<std::string, DType> operands;
  for (const NodePrediction& p : m.nodes) {
    const ir::Node& n = g.nodes[static_cast<size_t>(p.node)];
    if (n.op != "tessel.Conv") {
      EXPECT_EQ(p.operand_dtype, "") << n.label();  // op kernels
      continue;
    }
    const NodePlan plan = plan_node(g, n, {}, h100);
    ASSERT_EQ(plan.run, NodeRun::kContraction) << n.label();
    const contraction::Contraction& c = *plan.match.contraction;
    operands[n.name] = c.a_dtype;
    EXPECT_EQ(p.operand_dtype, dtype_name(c.a_dtype)) << n.label();
    const int64_t read = contraction::read_bytes_per_output(plan.epilogue);
    const auto store = static_cast<int64_t>(dtype_size(plan.epilogue.out_dtype));
    EXPECT_DOUBLE_EQ(p.analytical_us,
                     kernels::estimate(c, plan.schedule, h100, read, store).microseconds)
        << n.label();
    if (n.name == "conv_b") {
      EXPECT_EQ(c.maps.c.dtype, DType::kF32);
      EXPECT_EQ(plan.epilogue.out_dtype, DType::kI8);
      EXPECT_LT(p.analytical_us,
                0.75 * kernels::estimate(c, plan.schedule, h100, read).microseconds);
    }
  }
  EXPECT_EQ(operands.size(), 3u);
  EXPECT_EQ(operands["conv_b"], DType::kI8);
  EXPECT_EQ(operands["conv_c"], DType::kI8);
}

// int8 contractions run at times their 16-bit family's kinds do not describe (m16n8k32 and
// wgmma k32 on k-tiles of twice the elements, the int8 epilogues): the fit has a kind of their
// own for each family the int8 kernels run in (mma.sync, TMA; kernel_rules' check_int8), and
// each int8 contraction of the chain is of one of those kinds.
TEST(Predict, Int8ContractionsAreKindsOfTheirOwn) {
  std::map<std::string, int> kinds;
  for (const char* k : fit::kKinds) ++kinds[k];
  EXPECT_EQ(kinds["mma_i8"], 1);
  EXPECT_EQ(kinds["tma_i8"], 1);
  EXPECT_EQ(kinds["wgmma_i8"] + kinds["halo_i8"] + kinds["simt_i8"], 0);
  const ir::Graph g = gpu_graph(qdq_conv_chain());
  int int8 = 0;
  for (const NodePrediction& p : predict(g, {}, device::known_device("sm_90a")).nodes) {
    if (p.operand_dtype != "i8") continue;
    ++int8;
    EXPECT_TRUE(p.launch.kind == "mma_i8" || p.launch.kind == "tma_i8") << p.launch.kind;
  }
  EXPECT_EQ(int8, 2);
}

}  // namespace
}  // namespace tessel::compiler
