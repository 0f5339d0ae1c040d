// compiler::predict: the analytical time of each launch, the learned correction on top of it
// (predict_fit.h), and the whole replay's sum with the per-launch gaps.
#include "compiler/predict.h"

#include <gtest/gtest.h>

#include <cmath>

#include "compiler/cnn_blocks.h"
#include "compiler/predict_fit.h"
#include "passes/pipeline.h"

namespace tessel::compiler {
namespace {

ir::Graph gpu_graph(const ir::Graph& g) { return passes::run_passes(g, passes::gpu_pipeline({})); }

// Every launch has an analytical time and a corrected one; none is predicted below the least
// kernel time of the fit; the replay is the launches plus launch_gap_us for each.
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
      replay += p.microseconds + launch_gap_us(p.microseconds);
    }
    EXPECT_GT(launches, 0);
    EXPECT_NEAR(m.microseconds, replay, 1e-9);
  }
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs), fit::kLaunchGapUs);
  EXPECT_EQ(launch_gap_us(fit::kSmallKernelUs - 0.01), fit::kSmallLaunchGapUs);
}

// The correction is a factor on the analytical time (ln A's weight is 1 in every group), so a
// layer large enough to be past the floors is predicted slower on the A100 than on the H100,
// and a larger one slower than a smaller one.
TEST(Predict, LargerWorkAndSlowerGpusArePredictedSlower) {
  EXPECT_EQ(fit::kShared[1], 1.0);
  for (const fit::GroupOffset& o : fit::kGroups) EXPECT_EQ(o.w[1], 0.0) << o.group;
  const ir::Graph small = gpu_graph(testing::preact_block(8, 64, 28));
  const ir::Graph large = gpu_graph(testing::preact_block(32, 64, 56));
  const double h100_small = predict(small, {}, device::known_device("sm_90a")).microseconds;
  const double h100_large = predict(large, {}, device::known_device("sm_90a")).microseconds;
  const double a100_large = predict(large, {}, device::known_device("sm_80")).microseconds;
  EXPECT_GT(h100_large, 2.0 * h100_small);
  EXPECT_GT(a100_large, 1.5 * h100_large);
}

}  // namespace
}  // namespace tessel::compiler
