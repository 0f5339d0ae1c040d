// A small pre-activation ONNX model (a dense block in miniature) for the tests of
// `tessel quantize`'s QDQ placement: the writer's (tests/frontend) and what the GPU pipeline
// makes of its output (tests/passes).
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/model_builder.h"

namespace tessel::onnx::testing {

// A dense block in miniature, pre-activation as DenseNet's, and a post-activation layer at the
// end (x: 1x8x4x4):
//   c0: Conv(x) -> Relu = p            c1: Conv(Relu(BN(p))) = y1
//   k = Concat(p, y1)                  c2: Conv(Relu(Add(Mul(k, s), t))) = y2
//   c3: Conv(Relu(BN(y2)))             (the norm folds into c2: nothing upstream)
//   feat = Relu(Concat(p, y1, c3))     (the output: a float reader of a concat of quantized
//                                       values and a layer's output, as DenseNet's block
//                                       output before its final norm)
inline ModelBuilder dense_block_model() {
  ModelBuilder m;
  m.input("x", ::onnx::TensorProto::FLOAT, {1, 8, 4, 4});
  auto values = [](int64_t n, float lo, float hi, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = lo + (hi - lo) * static_cast<float>((i * 37 + seed * 11) % 17) / 16.0f;
    return v;
  };
  auto norm = [&](const std::string& name, int64_t c, int seed) {
    m.initializer_f32(name + "_s", {c}, values(c, 0.5f, 1.5f, seed));
    m.initializer_f32(name + "_b", {c}, values(c, -0.3f, 0.3f, seed + 1));
    m.initializer_f32(name + "_m", {c}, values(c, -0.2f, 0.2f, seed + 2));
    m.initializer_f32(name + "_v", {c}, values(c, 0.5f, 2.0f, seed + 3));
    return std::vector<std::string>{name + "_s", name + "_b", name + "_m", name + "_v"};
  };
  m.initializer_f32("w0", {8, 8, 1, 1}, values(64, -0.5f, 0.5f, 1));
  m.initializer_f32("w1", {8, 8, 1, 1}, values(64, -0.5f, 0.5f, 2));
  m.initializer_f32("w2", {8, 16, 1, 1}, values(128, -0.4f, 0.4f, 3));
  m.initializer_f32("w3", {4, 8, 1, 1}, values(32, -0.5f, 0.5f, 4));
  m.initializer_f32("s", {16, 1, 1}, values(16, 0.5f, 1.5f, 5));
  m.initializer_f32("t", {1, 16, 1, 1}, values(16, -0.5f, 0.5f, 6));
  m.node("Conv", {"x", "w0"}, {"y0"}, "c0");
  m.node("Relu", {"y0"}, {"p"}, "r0");
  std::vector<std::string> n1{"p"};
  for (const auto& v : norm("n1", 8, 7)) n1.push_back(v);
  m.node("BatchNormalization", n1, {"b1"}, "n1");
  m.node("Relu", {"b1"}, {"a1"}, "r1");
  m.node("Conv", {"a1", "w1"}, {"y1"}, "c1");
  auto* cat = m.node("Concat", {"p", "y1"}, {"k"}, "cat");
  add_attr(cat, "axis", ::onnx::AttributeProto::INT)->set_i(1);
  m.node("Mul", {"k", "s"}, {"ks"}, "scale");
  m.node("Add", {"ks", "t"}, {"kt"}, "shift");
  m.node("Relu", {"kt"}, {"a2"}, "r2");
  m.node("Conv", {"a2", "w2"}, {"y2"}, "c2");
  std::vector<std::string> n3{"y2"};
  for (const auto& v : norm("n3", 8, 11)) n3.push_back(v);
  m.node("BatchNormalization", n3, {"b3"}, "n3");
  m.node("Relu", {"b3"}, {"a3"}, "r3");
  m.node("Conv", {"a3", "w3"}, {"out"}, "c3");
  auto* tail = m.node("Concat", {"p", "y1", "out"}, {"f"}, "tail");
  add_attr(tail, "axis", ::onnx::AttributeProto::INT)->set_i(1);
  m.node("Relu", {"f"}, {"feat"}, "tail_relu");
  m.output("feat", ::onnx::TensorProto::FLOAT, {1, 20, 4, 4});
  return m;
}


}  // namespace tessel::onnx::testing
