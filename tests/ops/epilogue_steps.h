// Epilogue step lists for the tests of the epilogue folds (ops/tessel_epilogue.h), and the
// reference arithmetic that runs one: apply_epilogue_step over the steps in order.
#pragma once

#include <vector>

#include "ops/tessel_epilogue.h"

namespace tessel::ops::testing {

using K = EpilogueKind;
using Steps = std::vector<EpilogueStep>;

inline EpilogueStep q(double s) { return {K::kQuantize, s}; }
inline EpilogueStep mul(double s) { return {K::kMul, s}; }
inline EpilogueStep relu() { return {K::kRelu}; }
inline EpilogueStep clip(double lo, double hi) { return {K::kClip, lo, hi}; }
inline EpilogueStep scaled_residual(double s) { return {K::kAddScaledResidual, s}; }
inline EpilogueStep round(double s) { return {K::kRound, s}; }
inline EpilogueStep quantize_unit(double lo, double hi) { return {K::kQuantizeUnit, lo, hi}; }

inline double run(const Steps& steps, double v, double residual) {
  for (const EpilogueStep& st : steps) v = apply_epilogue_step(st, v, residual);
  return v;
}

}  // namespace tessel::ops::testing
