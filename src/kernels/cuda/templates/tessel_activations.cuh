// The activation functions of fused epilogues, in fp32, shared by the contraction kernels'
// epilogues (tessel_epilogue.cuh, kernels/cuda/emit.cc) and the op kernels' fused steps
// (depthwise and grouped convs, normalizations: op_window.cc's epilogue_step_code), so that each
// activation's arithmetic is written once on the device side. The references are
// ops/tessel_epilogue.cc's apply_epilogue_step (in double).
#pragma once

namespace tessel {

// Divisions by __fdividef (MUFU.RCP and a multiply): an IEEE `1.0f / d` has a slow-path call
// for extreme divisors, and the branch around it kept the compiler from hoisting the next
// elements' bias loads past it, so each output waited on its own load (EfficientNet-b0's
// 16 -> 96 expansion, K = 16: 120 us with bias + SiLU, 38 us with bias alone). Within 2 ulp;
// d = 1 + e^-v >= 1, and where e^-v overflows (v < -88) the quotient is 0, as it rounds to.
__device__ __forceinline__ float sigmoid_f(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }
__device__ __forceinline__ float silu_f(float v) { return __fdividef(v, 1.0f + __expf(-v)); }
__device__ __forceinline__ float hardswish_f(float v) {
  return v * fminf(fmaxf(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
}
// GELU in the epilogue: 1 + erf(z) with erff, about half the instructions of erfcf (which
// the standalone Gelu kernel uses to avoid cancelling for very negative v): there the result
// is within an ulp of 0 either way, an absolute error far below the f16/bf16 output's. The
// tanh form as 0.5 * (1 + tanh(u)) = 1 / (1 + e^-2u).
__device__ __forceinline__ float gelu_f(float v) {
  return 0.5f * v * (1.0f + erff(0.70710678118f * v));
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
