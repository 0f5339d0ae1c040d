// ops::fold_quantize_scales (ops/tessel_epilogue.h): the step lists each quantize's 1/s moves
// into (Before/Expected), the walks it must leave alone, and its promise on the reference
// arithmetic: every int8 result within one step of the original's, and equal but for values
// within rounding of a tie.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "epilogue_steps.h"
#include "ops/tessel_epilogue.h"

namespace tessel::ops {
namespace {

using namespace ::tessel::ops::testing;  // epilogue_steps.h

void expect_fold(const Steps& before, bool scaled, const Steps& after, double lead) {
  const QuantizeScaleFold f = fold_quantize_scales(before, scaled);
  ASSERT_EQ(f.steps.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(f.steps[i].kind, after[i].kind) << "step " << i;
    EXPECT_DOUBLE_EQ(f.steps[i].alpha, after[i].alpha) << "step " << i;
    EXPECT_DOUBLE_EQ(f.steps[i].beta, after[i].beta) << "step " << i;
  }
  EXPECT_DOUBLE_EQ(f.lead_factor, lead);
}

TEST(FoldQuantizeScales, DivisionsMoveIntoTheMultiplications) {
  const double s1 = 0.04, s2 = 0.0625, a = 0.0391, b = 0.05;
  // A requantized conv: into S and B.
  expect_fold({q(s1)}, true, {q(1.0)}, 1 / s1);
  expect_fold({relu(), q(s1)}, true, {relu(), q(1.0)}, 1 / s1);
  expect_fold({clip(0.0, 6.0), {K::kLeakyRelu, 0.1}, q(s1)}, true,
              {clip(0.0, 6.0 / s1), {K::kLeakyRelu, 0.1}, q(1.0)}, 1 / s1);
  // ResNet's residual epilogue: the first into S and B, the second into the dequantization
  // and the residual's scale.
  expect_fold({q(s1), mul(a), scaled_residual(b), q(s2), relu()}, true,
              {q(1.0), mul(a / s2), scaled_residual(b / s2), q(1.0), relu()}, 1 / s1);
  // Without S (a float conv, or S not constant) the accumulator cannot take it; a mul still can.
  expect_fold({q(s1), mul(a), q(s2)}, false, {q(s1), mul(a / s2), q(1.0)}, 1.0);
}

TEST(FoldQuantizeScales, OtherWalksStay) {
  const double s = 0.04;
  const Steps kept[] = {
      {{K::kSigmoid}, q(s)},        // not homogeneous
      {{K::kAddResidual}, q(s)},    // a float residual has no scale to take the factor
      {q(1.0)},                     // nothing to move
      {q(-s)},                      // not a scale
  };
  for (const Steps& steps : kept) expect_fold(steps, true, steps, 1.0);
  // A quantize reached from another one (no mul between): the integer cannot take it.
  expect_fold({q(s), q(2 * s)}, true, {q(1.0), q(2 * s)}, 1 / s);
  expect_fold({q(s)}, false, {q(s)}, 1.0);
}

// On the reference's arithmetic (lowering's acc * S + B in f64, then the steps), with S and B
// scaled as the pass scales them (each product rounded to f32): every result within one int8
// step, and all but a few equal.
TEST(FoldQuantizeScales, MovesResultsByRoundingOnly) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> scale(0.002, 0.2), unit(-1.0, 1.0);
  int samples = 0, moved = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const double s1 = scale(rng), s2 = scale(rng), sr = scale(rng), sx = scale(rng) * 1e-2;
    const double b = unit(rng) * 10 * s1;
    const Steps chains[] = {
        {relu(), q(s1)},
        {q(s1), mul(s1), scaled_residual(sr), q(s2), relu()},
        {clip(0.0, 6.0), q(s1)},
    };
    for (const Steps& before : chains) {
      const QuantizeScaleFold f = fold_quantize_scales(before, true);
      const double s_after = static_cast<float>(sx * f.lead_factor), b_after = static_cast<float>(b * f.lead_factor);
      for (int i = 0; i < 300; ++i) {
        const double acc = std::round(unit(rng) * 200 * s1 / sx), r = std::round(unit(rng) * 128);
        const double want = run(before, acc * static_cast<float>(sx) + static_cast<float>(b), r);
        const double got = run(f.steps, acc * s_after + b_after, r);
        ASSERT_LE(std::abs(got - want), 1.0) << "trial " << trial << ", acc " << acc;
        moved += got != want;
        ++samples;
      }
    }
  }
  EXPECT_LT(moved, samples / 100) << moved << " of " << samples << " results moved a step";
}

}  // namespace
}  // namespace tessel::ops
