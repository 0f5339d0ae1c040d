// The activation functions of fused epilogues, in fp32, shared by the contraction kernels'
// epilogues (tessel_epilogue.cuh, kernels/cuda/emit.cc) and the op kernels' fused steps
// (depthwise and grouped convs, normalizations: op_window.cc's epilogue_step_code), so that each
// activation's arithmetic is written once on the device side. The references are
// ops/tessel_epilogue.cc's apply_epilogue_step (in double).
#pragma once

#include "tessel_ptx.cuh"

namespace tessel {

// Divisions by __fdividef (MUFU.RCP and a multiply): an IEEE `1.0f / d` has a slow-path call
// for extreme divisors, and the branch around it kept the compiler from hoisting the next
// elements' bias loads past it, so each output waited on its own load (EfficientNet-b0's
// 16 -> 96 expansion, K = 16: 120 us with bias + SiLU, 38 us with bias alone). Within 2 ulp;
// d = 1 + e^-v >= 1, and where e^-v overflows (v < -88) the quotient is 0, as it rounds to.
__device__ __forceinline__ float sigmoid_f(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }
__device__ __forceinline__ float silu_f(float v) { return __fdividef(v, 1.0f + __expf(-v)); }
// A SiLU whose gate a QDQ model quantizes to int8 and back: the gate by the reciprocal of its
// scale (as a quantize step; in [0, 127]), times the DequantizeLinear's scale.
__device__ __forceinline__ float silu_qgate_f(float v, float inv_scale, float dequantize_scale) {
  return v * (quantize_s8_f(sigmoid_f(v), inv_scale) * dequantize_scale);
}
__device__ __forceinline__ float hardswish_f(float v) {
  return v * fminf(fmaxf(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
}
// GELU in the epilogue, v (1 + erf(z)) / 2 with z = v / sqrt(2), from erfc(|z|) = t P(t)
// e^(-z^2), t = 1 / (1 + p |z|) (Abramowitz and Stegun 7.1.26, |error| <= 1.5e-7), with the
// approximate reciprocal and exponent (MUFU.RCP, MUFU.EX2; flushing to 0 where e^(-z^2) is
// below FLT_MIN, as erfc is): 1 + erf(z) is 2 - erfc(|z|) for v >= 0 and erfc(|z|) below,
// which does not cancel. About 16 instructions where erff takes about 33 (its two polynomial
// ranges selected coefficient by coefficient, their constants rematerialized where the
// accumulators hold the registers); ConvNeXt's and EfficientNet's GEMMs run GELU on every
// output. Against GELU in double over [-12, 12] in fp32: at most 4.2e-7 absolute (erff's form
// 4.5e-7), within one f16 ulp of the exact value (erff's form 1.4). The tanh form as
// 0.5 * (1 + tanh(u)) = 1 / (1 + e^-2u).
__device__ __forceinline__ float gelu_f(float v) {
  const float a = fabsf(0.70710678118f * v);
  float t, e;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.3275911f, a, 1.0f)));
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-1.44269504089f * a * a));
  const float p = fmaf(fmaf(fmaf(fmaf(1.061405429f, t, -1.453152027f), t, 1.421413741f), t,
                            -0.284496736f), t, 0.254829592f);
  const float erfc = t * p * e;
  return 0.5f * v * (v >= 0.0f ? 2.0f - erfc : erfc);
}
// Mish, x tanh(softplus(x)), the softplus without overflow as the reference.
__device__ __forceinline__ float mish_f(float v) {
  return v * tanhf(v > 0.0f ? v + log1pf(__expf(-v)) : log1pf(__expf(v)));
}
__device__ __forceinline__ float gelu_tanh_f(float v) {
  return __fdividef(v, 1.0f + __expf(-1.5957691216f * (v + 0.044715f * v * v * v)));
}
__device__ __forceinline__ float clip_f(float v, float lo, float hi) {
  return fminf(fmaxf(v, lo), hi);
}
__device__ __forceinline__ float hard_sigmoid_f(float v, float alpha, float beta) {
  return clip_f(alpha * v + beta, 0.0f, 1.0f);
}
__device__ __forceinline__ float elu_f(float v, float alpha) { return v < 0.0f ? alpha * expm1f(v) : v; }

}  // namespace tessel
