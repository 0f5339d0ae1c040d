// ops::fold_unit_quantize (ops/tessel_epilogue.h): the step lists a saturated rounding becomes
// (Before/Expected), the walks it must leave alone, quantize_unit's reference arithmetic, and
// the fold's promise: every int8 result within one step of the original's, and equal but for
// values within the scaled constants' rounding of a tie.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "epilogue_steps.h"
#include "ops/tessel_epilogue.h"

namespace tessel::ops {
namespace {

using namespace ::tessel::ops::testing;  // epilogue_steps.h

void expect_fold(const Steps& before, bool scaled, const Steps& after, double factor, double offset) {
  const UnitQuantizeFold f = fold_unit_quantize(before, scaled);
  ASSERT_EQ(f.steps.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(f.steps[i].kind, after[i].kind) << "step " << i;
    EXPECT_DOUBLE_EQ(f.steps[i].alpha, after[i].alpha) << "step " << i;
    EXPECT_DOUBLE_EQ(f.steps[i].beta, after[i].beta) << "step " << i;
  }
  EXPECT_DOUBLE_EQ(f.lead_factor, factor);
  EXPECT_DOUBLE_EQ(f.lead_offset, offset);
}

TEST(FoldUnitQuantize, RangesMoveIntoTheMultiplications) {
  // A requantized conv: [-128, 127] into S and B, with the offset.
  expect_fold({q(1.0)}, true, {quantize_unit(-128, 127)}, 1.0 / 255, 128.0 / 255);
  // A relu before, or after (fold_requantize's form), or a clip after: narrower, no offset.
  expect_fold({relu(), q(1.0)}, true, {quantize_unit(0, 127)}, 1.0 / 127, 0.0);
  expect_fold({q(1.0), relu()}, true, {quantize_unit(0, 127)}, 1.0 / 127, 0.0);
  expect_fold({q(1.0), clip(0, 6)}, true, {quantize_unit(0, 6)}, 1.0 / 6, 0.0);
  // A scale left by fold_quantize_scales divides too.
  expect_fold({q(0.5), relu()}, true, {quantize_unit(0, 127)}, 1.0 / (0.5 * 127), 0.0);
  // ResNet's residual epilogue: the first into S and B, the second into the dequantization
  // and the residual's scale (no offset: the relu's 0).
  expect_fold({q(1.0), mul(0.3), scaled_residual(0.7), relu(), q(1.0)}, true,
              {quantize_unit(-128, 127), mul(0.3 / 127), scaled_residual(0.7 / 127), quantize_unit(0, 127)},
              1.0 / 255, 128.0 / 255);
  // Through a residual to the accumulator, with the offset (both linear).
  expect_fold({scaled_residual(0.25), q(1.0)}, true, {scaled_residual(0.25 / 255), quantize_unit(-128, 127)},
              1.0 / 255, 128.0 / 255);
  // Through homogeneous steps where lo is 0: a clip's bounds scale.
  expect_fold({mul(0.3), clip(-1, 3), relu(), q(1.0)}, false,
              {mul(0.3 / 127), clip(-1.0 / 127, 3.0 / 127), quantize_unit(0, 127)}, 1.0, 0.0);
  // onnxruntime's uint8: round, clip(0, 255).
  expect_fold({round(0.5), clip(0, 255)}, true, {quantize_unit(0, 255)}, 1.0 / (0.5 * 255), 0.0);
  // A ReLU6 before the quantize (tessel quantize's MobileNet-v2: clip(0, 6 / s), quantize(1)):
  // its bounds rounded as the value, [0, 47] for 6 / s = 46.875 (and 46.5 rounds to even 46).
  expect_fold({clip(0, 46.875), q(1.0)}, true, {quantize_unit(0, 47)}, 1.0 / 47, 0.0);
  expect_fold({clip(0, 46.5), q(1.0)}, true, {quantize_unit(0, 46)}, 1.0 / 46, 0.0);
  // Past the int8 range the quantize's own saturation bounds it.
  expect_fold({clip(-300, 300), q(1.0)}, true, {quantize_unit(-128, 127)}, 1.0 / 255, 128.0 / 255);
}

TEST(FoldUnitQuantize, OtherWalksStay) {
  const Steps kept[] = {
      {{K::kSigmoid}, q(1.0)},             // not homogeneous
      {{K::kAddResidual}, q(1.0)},         // a float residual: no scale to take the factor
      {mul(2.0), q(1.0)},                  // an offset (lo -128) a mul cannot take
      {mul(2.0), relu(), clip(-3, 3), q(1.0)},  // an offset through a clip
      {round(0.5)},                        // a round without a clamp: no range
      {q(-1.0)},                           // not a scale
  };
  for (const Steps& steps : kept) expect_fold(steps, true, steps, 1.0, 0.0);
  // Without S the accumulator takes nothing; a second rounding reaching it neither.
  expect_fold({q(1.0)}, false, {q(1.0)}, 1.0, 0.0);
  expect_fold({relu(), q(1.0), scaled_residual(0.3), q(1.0), relu()}, true,
              {quantize_unit(0, 127), scaled_residual(0.3), q(1.0), relu()}, 1.0 / 127, 0.0);
  // Exact grids (power-of-two scales): S and B on it, or a mul's and a residual's scale over s.
  EXPECT_EQ(fold_unit_quantize({q(1.0)}, true, /*lead_on_grid=*/true).steps, Steps{q(1.0)});
  expect_fold({q(1.0), mul(0.5), scaled_residual(0.25), relu(), q(1.0)}, false,
              {q(1.0), mul(0.5), scaled_residual(0.25), relu(), q(1.0)}, 1.0, 0.0);
  expect_fold({q(1.0), mul(0.5), scaled_residual(0.3), relu(), q(1.0)}, false,
              {q(1.0), mul(0.5 / 127), scaled_residual(0.3 / 127), quantize_unit(0, 127)}, 1.0, 0.0);
  EXPECT_TRUE(on_exact_grid(3 * std::ldexp(1.0, -16)));
  EXPECT_FALSE(on_exact_grid(std::ldexp(1.0, -17)));
  EXPECT_FALSE(on_exact_grid(0.3));
}

// quantize_unit's reference: f32(v) saturated to [0, 1] (NaN to lo), ties to the even integer
// of the result (as the quantize it replaces, whose lo may be odd).
TEST(FoldUnitQuantize, QuantizeUnitArithmetic) {
  const EpilogueStep u = quantize_unit(-3, 90);
  EXPECT_EQ(apply_epilogue_step(u, -0.5, 0), -3);
  EXPECT_EQ(apply_epilogue_step(u, 1.5, 0), 90);
  EXPECT_EQ(apply_epilogue_step(u, std::numeric_limits<double>::quiet_NaN(), 0), -3);
  EXPECT_EQ(apply_epilogue_step(u, 0.0, 0), -3);
  // -3 + 93 w = 2.5 -> 2 (even), 3.5 -> 4: w exact in f32 (11/186 is not; 5.5 / 93 rounds).
  EXPECT_EQ(apply_epilogue_step(quantize_unit(-3, 5), 5.5 / 8, 0), 2);   // -3 + 5.5 = 2.5
  EXPECT_EQ(apply_epilogue_step(quantize_unit(-3, 5), 6.5 / 8, 0), 4);   // -3 + 6.5 = 3.5
  EXPECT_EQ(apply_epilogue_step(quantize_unit(0, 127), 0.5, 0), 64);    // 63.5 -> 64
}

// On the reference's arithmetic (acc * S + B in f64, then the steps), with S and B scaled as
// the pass scales them (each rounded to f32): every result within one int8 step, all but a few
// equal.
TEST(FoldUnitQuantize, MovesResultsByRoundingOnly) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> scale(0.002, 0.2), unit(-1.0, 1.0);
  int samples = 0, moved = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const double s1 = scale(rng), sx = scale(rng) * 1e-2, sr = scale(rng);
    const double b = unit(rng) * 10;
    const Steps chains[] = {
        {relu(), q(1.0)},
        {q(1.0), mul(s1), scaled_residual(sr), relu(), q(1.0)},
        {q(1.0), clip(-20, 100)},
        {q(1.0)},
        {clip(0.0, 1.2 / s1), q(1.0)},
    };
    for (const Steps& before : chains) {
      const UnitQuantizeFold f = fold_unit_quantize(before, true);
      ASSERT_NE(f.steps, before);
      const double s_after = static_cast<float>(static_cast<double>(static_cast<float>(sx)) * f.lead_factor);
      const double b_after = static_cast<float>(static_cast<double>(static_cast<float>(b)) * f.lead_factor + f.lead_offset);
      for (int i = 0; i < 300; ++i) {
        const double acc = std::round(unit(rng) * 200 / sx), r = std::round(unit(rng) * 128);
        const double want = run(before, acc * static_cast<float>(sx) + static_cast<float>(b), r);
        const double got = run(f.steps, acc * s_after + b_after, r);
        ASSERT_LE(std::abs(got - want), 1.0) << "trial " << trial << ", acc " << acc;
        moved += got != want;
        ++samples;
      }
    }
  }
  EXPECT_LT(moved, samples / 1000) << moved << " of " << samples << " results moved a step";
}

}  // namespace
}  // namespace tessel::ops
