// ops::fold_requantize and ops::ends_quantized (ops/tessel_epilogue.h): the step lists a QDQ
// chain folds to (Before/Expected), the chains it must leave alone, and the fold's promise
// checked on the reference arithmetic: every value through the folded steps equals the value
// through the original ones, over values that reach both saturation limits and every rounding
// of the grid, with dequantization scales rounded to fp16 as an fp16 engine's are.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/half.h"
#include "epilogue_steps.h"
#include "ops/tessel_epilogue.h"

namespace tessel::ops {
namespace {

using namespace ::tessel::ops::testing;  // epilogue_steps.h

// A scale as an fp16 engine's DequantizeLinear holds it.
double f16(double s) { return half_to_float(float_to_half(static_cast<float>(s))); }

TEST(FoldRequantize, SameGridRequantizationsGo) {
  const double s = 0.0584163, s16 = f16(s);
  // ResNet's conv -> Q -> DQ -> Relu -> Q: the relu acts on the integer.
  EXPECT_EQ(fold_requantize({{K::kLeakyRelu, 0.1}, q(s), mul(s16), relu(), q(s)}),
            (Steps{{K::kLeakyRelu, 0.1}, q(s), relu()}));
  // MobileNet's Clip(0, 6): its bounds on the grid of s (6 / s = 102.7 -> 103).
  EXPECT_EQ(fold_requantize({q(s), mul(s16), clip(0.0, 6.0), q(s)}), (Steps{q(s), clip(0.0, 103.0)}));
  // Q -> DQ -> Q, nothing between; and a stem's chain that ends dequantized (an fp16 output).
  EXPECT_EQ(fold_requantize({q(s), mul(s16), q(s)}), (Steps{q(s)}));
  EXPECT_EQ(fold_requantize({q(s), mul(s16), relu(), q(s), mul(s16)}), (Steps{q(s), relu(), mul(s16)}));
  // Two in a row: the quantize meets the second mul once the first pair is gone.
  EXPECT_EQ(fold_requantize({q(s), mul(s16), relu(), q(s), mul(s16), clip(0.0, 6.0), q(s)}),
            (Steps{q(s), relu(), clip(0.0, 103.0)}));
  // The residual block: the first pair is a real dequantization (a residual follows), the
  // second a same-grid requantization after the add.
  const double s2 = 0.0739424;
  EXPECT_EQ(fold_requantize({q(s), mul(s16), {K::kAddScaledResidual, 0.07}, q(s2), mul(f16(s2)), relu(), q(s2)}),
            (Steps{q(s), mul(s16), {K::kAddScaledResidual, 0.07}, q(s2), relu()}));
}

TEST(FoldRequantize, OtherChainsStay) {
  const double s = 0.125;
  const Steps kept[] = {
      {q(s), mul(s), relu(), q(0.0625)},                 // another grid: a real requantization
      {q(s), mul(s * 1.01), q(s)},                       // a dequantization scale 1% off
      {q(s), mul(s), {K::kSigmoid}, q(s)},               // not a clamp
      {q(s), mul(s), {K::kLeakyRelu, 0.1}, q(s)},
      {q(s), mul(s), relu()},                            // no second quantize
      {mul(s), relu(), q(s)},                            // no first one
      {q(s), mul(-s), q(s)},                             // a negative scale
  };
  for (const Steps& steps : kept) EXPECT_EQ(fold_requantize(steps), steps);
}

TEST(FoldRequantize, EndsQuantized) {
  EXPECT_TRUE(ends_quantized({q(0.5)}));
  EXPECT_TRUE(ends_quantized({{K::kSilu}, q(0.5), relu(), clip(-3.0, 90.0)}));
  EXPECT_FALSE(ends_quantized({}));
  EXPECT_FALSE(ends_quantized({q(0.5), mul(0.5)}));
  EXPECT_FALSE(ends_quantized({q(0.5), clip(0.0, 6.5)})) << "a bound off the integers";
  EXPECT_TRUE(ends_quantized({q(0.5), clip(0.0, 200.0)})) << "a bound past int8: the quantize saturated first";
  EXPECT_FALSE(ends_quantized({relu()}));
  // uint8 stores (fuse's QuantizeLinear to uint8: round, clip(0, 255)) need [0, 255].
  const EpilogueStep round{K::kRound, 0.5};
  EXPECT_TRUE(ends_quantized({round, clip(0.0, 255.0)}, DType::kU8));
  EXPECT_TRUE(ends_quantized({q(0.5), relu()}, DType::kU8));
  EXPECT_FALSE(ends_quantized({round, clip(0.0, 255.0)})) << "past int8";
  EXPECT_FALSE(ends_quantized({q(0.5)}, DType::kU8)) << "-128";
  EXPECT_FALSE(ends_quantized({round, relu()}, DType::kU8)) << "no upper bound";
}

// The folded steps give every value the original ones give, on the reference's arithmetic.
TEST(FoldRequantize, ChangesNoValue) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> scale(0.002, 0.2), unit(-1.0, 1.0);
  int folded = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const double s = scale(rng), s16 = f16(s), s2 = scale(rng);
    const double hi = std::abs(unit(rng)) * 140 * s;  // a clip bound inside or past the range
    const Steps chains[] = {
        {{K::kLeakyRelu, 0.1}, q(s), mul(s16), relu(), q(s)},
        {q(s), mul(s16), clip(0.0, hi), q(s)},
        {q(s), mul(s16), clip(-hi, hi), relu(), q(s), mul(s16)},
        {q(s), mul(s16), relu(), q(s), mul(s16), clip(0.0, hi), q(s)},
        {q(s), mul(s16), {K::kAddScaledResidual, s2}, q(s2), mul(f16(s2)), relu(), q(s2)},
    };
    for (const Steps& before : chains) {
      const Steps after = fold_requantize(before);
      ASSERT_LT(after.size(), before.size()) << "trial " << trial;
      ++folded;
      for (int i = 0; i < 400; ++i) {
        // Pre-quantize values over 1.5x the int8 range and exact grid points and ties.
        const double v = i < 300 ? unit(rng) * 200 * s : (i - 350) * 0.5 * s;
        const double r = std::round(unit(rng) * 128);
        ASSERT_EQ(run(after, v, r), run(before, v, r))
            << "trial " << trial << ", v = " << v << ", s = " << s << ", clip bound " << hi;
      }
    }
  }
  EXPECT_EQ(folded, 1000);
}

}  // namespace
}  // namespace tessel::ops
