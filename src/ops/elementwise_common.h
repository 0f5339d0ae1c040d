// What the elementwise op files (elementwise.cc, elementwise_math.cc) share: the f16/bf16
// widening convention and the broadcasting binary loop.
//
// The host has no 16-bit float arithmetic: f16/bf16 inputs are widened to f32, the kernel runs
// in f32 and the result is rounded once on store, as numpy and onnxruntime do.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"
#include "ops/broadcast.h"

namespace tessel::ops {

inline bool is_16bit_float(DType t) { return t == DType::kF16 || t == DType::kBF16; }

// `t` as f32 when it is f16/bf16, else `t` itself.
inline Tensor widened(const Tensor& t) {
  return is_16bit_float(t.dtype()) ? t.cast(DType::kF32) : t;
}

// Runs body(y) with y the output in its widened dtype, then rounds it into `out` once.
template <typename Body>
void store_widened(Tensor& out, Body&& body) {
  if (!is_16bit_float(out.dtype())) {
    body(out);
    return;
  }
  Tensor wide(DType::kF32, out.shape());
  body(wide);
  out = wide.cast(out.dtype());
}

// The widening convention for a node's whole kernel: body(ins, out) sees every input widened
// (an undefined Tensor for an omitted one) and output 0 in its widened dtype.
template <typename Body>
void compute_widened(ir::KernelContext& ctx, Body&& body) {
  std::vector<Tensor> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? widened(ctx.input(i)) : Tensor());
  store_widened(ctx.output(0), [&](Tensor& out) { body(ins, out); });
}

// out = op(a, b) elementwise with numpy broadcasting; out has the broadcast shape. op's result
// is converted to TO. `out` may alias `a` or `b` when that operand has the output's shape:
// every element is read before it is overwritten at the same offset.
template <typename TA, typename TB, typename TO, typename Op>
void broadcast_binary(const Tensor& a, const Tensor& b, Tensor& out, const Op& op) {
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = out.data<TO>();
  const auto f = [&op](TA x, TB y) { return static_cast<TO>(op(x, y)); };
  const BroadcastRuns<2> runs(out.shape(), {&a.shape(), &b.shape()});
  runs.for_each([&](int64_t o, int64_t n, const auto& off, const auto& step) {
    const TA* x = pa + off[0];
    const TB* y = pb + off[1];
    TO* z = po + o;
    // Separate loops per broadcast pattern (steps are 1 or 0) so that the compiler
    // vectorises each.
    if (step[0] && step[1]) {
      for (int64_t j = 0; j < n; ++j) z[j] = f(x[j], y[j]);
    } else if (step[0]) {
      const TB c = *y;
      for (int64_t j = 0; j < n; ++j) z[j] = f(x[j], c);
    } else if (step[1]) {
      const TA c = *x;
      for (int64_t j = 0; j < n; ++j) z[j] = f(c, y[j]);
    } else {
      const TO v = f(*x, *y);
      for (int64_t j = 0; j < n; ++j) z[j] = v;
    }
  });
}

// broadcast_binary with one element type throughout.
template <typename T, typename Op>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, const Op& op) {
  broadcast_binary<T, T, T>(a, b, out, op);
}

}  // namespace tessel::ops
