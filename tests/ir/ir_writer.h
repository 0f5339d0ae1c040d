// Builds textual-IR test graphs whose weights are too large to write by hand: seeded
// uniform random constants, He-uniform conv weights, batch-norm statistics near identity.
// Header-only: shared by the pass tests and the GPU engine tests.
#pragma once

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/shape.h"
#include "ir/graph.h"
#include "ir/infer.h"
#include "ir/parser.h"

namespace tessel::testing {

class IrWriter {
 public:
  explicit IrWriter(unsigned seed) : rng_(seed) {}

  void input(const std::string& name, const std::string& type) {
    head_ += "  input %" + name + " : " + type + "\n";
  }
  void constant(const std::string& name, const Shape& shape, double lo, double hi) {
    std::uniform_real_distribution<double> uni(lo, hi);
    std::string values;
    char buf[32];
    for (int64_t i = 0; i < numel(shape); ++i) {
      std::snprintf(buf, sizeof buf, "%.6e", uni(rng_));
      values += (i ? ", " : "") + std::string(buf);
    }
    head_ += "  const %" + name + " : f32" + shape_str(shape) + " = [" + values + "]\n";
  }
  // A constant written out: "const %zp : u8[16] = [3, 19, ...]" (integer types included).
  void literal(const std::string& decl) { head_ += "  " + decl + "\n"; }
  void node(const std::string& line) { body_ += "  " + line + "\n"; }

  std::string text(const std::string& output) const {
    return text(std::vector<std::string>{output});
  }
  std::string text(const std::vector<std::string>& outputs) const {
    std::string tail;
    for (const std::string& o : outputs) tail += "  output %" + o + "\n";
    return "graph @g opset 17 {\n" + head_ + body_ + tail + "}\n";
  }
  // Parsed, with every value's type inferred.
  ir::Graph graph(const std::string& output) const {
    return graph(std::vector<std::string>{output});
  }
  ir::Graph graph(const std::vector<std::string>& outputs) const {
    ir::Graph g = ir::parse_graph(text(outputs));
    ir::infer_types(g, ir::OpRegistry::global());
    return g;
  }

 private:
  std::mt19937 rng_;
  std::string head_, body_;
};

inline void conv_weight(IrWriter& w, const std::string& name, int64_t co, int64_t ci, int64_t k) {
  const double bound = std::sqrt(6.0 / static_cast<double>(ci * k * k));
  w.constant(name, {co, ci, k, k}, -bound, bound);
}

inline void batch_norm_params(IrWriter& w, const std::string& p, int64_t c) {
  w.constant(p + "_gamma", {c}, 0.5, 1.5);
  w.constant(p + "_beta", {c}, -0.2, 0.2);
  w.constant(p + "_mean", {c}, -0.2, 0.2);
  w.constant(p + "_var", {c}, 0.5, 1.5);
}

// "%out = BatchNormalization(%in, %p_gamma, %p_beta, %p_mean, %p_var) : type @"out""
inline std::string bn(const std::string& out, const std::string& in, const std::string& p,
                      const std::string& type) {
  return "%" + out + " = BatchNormalization(%" + in + ", %" + p + "_gamma, %" + p + "_beta, %" +
         p + "_mean, %" + p + "_var) : " + type + " @\"" + out + "\"";
}

}  // namespace tessel::testing
