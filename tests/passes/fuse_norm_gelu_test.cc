// Before/Expected tests of fuse-norm-gelu (passes/fuse_norm_gelu.cc): the decomposed forms
// exporters write, each near miss that must stay as it is, and ConvNeXt's block as
// torch.onnx.export writes it at opset 17. expect_pass_result also runs both graphs on the
// same random inputs with the CPU executor and compares the outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "frontend/onnx/model_builder.h"
#include "ir/equal.h"
#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "runtime/cpu/executor.h"

namespace tessel {
namespace {

// s with the one occurrence of `from` replaced by `to`.
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(s.find(from, at + 1), std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// Expects the pass to leave `graph` as it is.
void expect_unchanged(const std::string& graph) {
  testing::expect_pass_result("fuse-norm-gelu", graph, graph);
}

// ---- LayerNorm ------------------------------------------------------------------------------

// torch.onnx.export of nn.LayerNorm(8) at opset 13 (axes an attribute).
const std::string kTorchLayerNorm = R"(graph @g opset 13 {
  input %x : f32[2,3,8]
  const %two : f32[] = [2.0]
  const %eps : f32[] = [1e-05]
  const %gamma : f32[8] = [0.5, 1.5, -1.0, 2.0, 0.25, 1.0, 0.75, -0.5]
  const %beta : f32[8] = [0.1, -0.2, 0.3, 0.0, -0.5, 0.25, 1.0, -1.0]
  %m = ReduceMean(%x) {axes = [-1]} : f32[2,3,1] @"ln/ReduceMean"
  %d = Sub(%x, %m) : f32[2,3,8] @"ln/Sub"
  %sq = Pow(%d, %two) : f32[2,3,8] @"ln/Pow"
  %v = ReduceMean(%sq) {axes = [-1]} : f32[2,3,1] @"ln/ReduceMean_1"
  %ve = Add(%v, %eps) : f32[2,3,1] @"ln/Add"
  %s = Sqrt(%ve) : f32[2,3,1] @"ln/Sqrt"
  %n = Div(%d, %s) : f32[2,3,8] @"ln/Div"
  %g = Mul(%n, %gamma) : f32[2,3,8] @"ln/Mul"
  %y = Add(%g, %beta) : f32[2,3,8] @"ln/Add_1"
  output %y
})";

TEST(FuseNormGelu, LayerNormAsTorchExportsItBeforeOpset17) {
  testing::expect_pass_result("fuse-norm-gelu", kTorchLayerNorm, R"(graph @g opset 13 {
  input %x : f32[2,3,8]
  const %gamma : f32[8] = [0.5, 1.5, -1.0, 2.0, 0.25, 1.0, 0.75, -0.5]
  const %beta : f32[8] = [0.1, -0.2, 0.3, 0.0, -0.5, 0.25, 1.0, -1.0]
  %y = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 1e-05} : f32[2,3,8] @"ln"
  output %y
})");
}

// Opset 18 (axes as an input, naming the last axis by its index), d * d for the square,
// eps + v, Reciprocal then Mul with the operands swapped; no gamma or beta: Scale is ones.
TEST(FuseNormGelu, LayerNormOpset18MulReciprocalWithoutAffine) {
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 18 {
  input %x : f32[4,6]
  const %axes : i64[1] = [1]
  const %eps : f32[] = [0.001]
  %m = ReduceMean(%x, %axes) : f32[4,1] @"m"
  %d = Sub(%x, %m) : f32[4,6] @"d"
  %sq = Mul(%d, %d) : f32[4,6] @"sq"
  %v = ReduceMean(%sq, %axes) : f32[4,1] @"v"
  %ve = Add(%eps, %v) : f32[4,1] @"ve"
  %s = Sqrt(%ve) : f32[4,1] @"s"
  %r = Reciprocal(%s) : f32[4,1] @"r"
  %y = Mul(%r, %d) : f32[4,6] @"y"
  output %y
})",
                              R"(graph @g opset 18 {
  input %x : f32[4,6]
  const %ones : f32[6] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  %y = LayerNormalization(%x, %ones) {axis = -1, epsilon = 0.001} : f32[4,6] @"y"
  output %y
})");
}

// gamma first in the Mul, a [1,1,8] gamma, no beta.
TEST(FuseNormGelu, LayerNormWithGammaOnly) {
  std::string before =
      replaced(kTorchLayerNorm, "  %y = Add(%g, %beta) : f32[2,3,8] @\"ln/Add_1\"\n", "");
  before = replaced(before, "%g = Mul(%n, %gamma)", "%y = Mul(%gamma, %n)");
  before = replaced(before, "const %gamma : f32[8]", "const %gamma : f32[1,1,8]");
  testing::expect_pass_result("fuse-norm-gelu", before, R"(graph @g opset 13 {
  input %x : f32[2,3,8]
  const %gamma : f32[1,1,8] = [0.5, 1.5, -1.0, 2.0, 0.25, 1.0, 0.75, -0.5]
  %y = LayerNormalization(%x, %gamma) {axis = -1, epsilon = 1e-05} : f32[2,3,8] @"ln"
  output %y
})");
}

// beta first in the Add, no gamma: Scale is ones.
TEST(FuseNormGelu, LayerNormWithBetaOnly) {
  std::string before =
      replaced(kTorchLayerNorm, "  %g = Mul(%n, %gamma) : f32[2,3,8] @\"ln/Mul\"\n", "");
  before = replaced(before, "Add(%g, %beta)", "Add(%beta, %n)");
  testing::expect_pass_result("fuse-norm-gelu", before, R"(graph @g opset 13 {
  input %x : f32[2,3,8]
  const %ones : f32[8] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  const %beta : f32[8] = [0.1, -0.2, 0.3, 0.0, -0.5, 0.25, 1.0, -1.0]
  %y = LayerNormalization(%x, %ones, %beta) {axis = -1, epsilon = 1e-05} : f32[2,3,8] @"ln"
  output %y
})");
}

// The normalised value is read elsewhere too: the LayerNorm stops there and the affine
// Mul / Add stay.
TEST(FuseNormGelu, LayerNormWhoseNormalizedValueIsSharedKeepsTheAffineOps) {
  std::string before = replaced(kTorchLayerNorm, "  output %y\n", "  output %y\n  output %n\n");
  testing::expect_pass_result("fuse-norm-gelu", before, R"(graph @g opset 13 {
  input %x : f32[2,3,8]
  const %ones : f32[8] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  const %gamma : f32[8] = [0.5, 1.5, -1.0, 2.0, 0.25, 1.0, 0.75, -0.5]
  const %beta : f32[8] = [0.1, -0.2, 0.3, 0.0, -0.5, 0.25, 1.0, -1.0]
  %n = LayerNormalization(%x, %ones) {axis = -1, epsilon = 1e-05} : f32[2,3,8] @"ln"
  %g = Mul(%n, %gamma) : f32[2,3,8] @"ln/Mul"
  %y = Add(%g, %beta) : f32[2,3,8] @"ln/Add_1"
  output %y
  output %n
})");
}

TEST(FuseNormGelu, LayerNormNearMissesStay) {
  // An intermediate with another reader: d, the mean, the variance.
  expect_unchanged(replaced(kTorchLayerNorm, "  output %y\n", "  output %y\n  output %d\n"));
  expect_unchanged(replaced(kTorchLayerNorm, "  output %y\n", "  output %y\n  output %m\n"));
  expect_unchanged(replaced(kTorchLayerNorm, "  output %y\n", "  output %y\n  output %v\n"));
  // eps with one value per row: not LayerNormalization's scalar epsilon.
  expect_unchanged(
      replaced(kTorchLayerNorm, "const %eps : f32[] = [1e-05]",
               "const %eps : f32[2,3,1] = [1e-05, 2e-05, 1e-05, 1e-05, 1e-05, 1e-05]"));
  // eps computed at run time (kept positive, so that both graphs compute numbers).
  expect_unchanged(replaced(
      replaced(kTorchLayerNorm, "  const %eps : f32[] = [1e-05]\n", "  input %e : f32[]\n"),
      "  %m = ReduceMean", "  %eps = Abs(%e) : f32[] @\"abs\"\n  %m = ReduceMean"));
  // The wrong constant: a fourth power, not a square.
  expect_unchanged(
      replaced(kTorchLayerNorm, "const %two : f32[] = [2.0]", "const %two : f32[] = [4.0]"));
  // Reduced over axis 1, not the last.
  std::string axis1 = R"(graph @g opset 13 {
  input %x : f32[2,8,3]
  const %two : f32[] = [2.0]
  const %eps : f32[] = [1e-05]
  %m = ReduceMean(%x) {axes = [1]} : f32[2,1,3] @"m"
  %d = Sub(%x, %m) : f32[2,8,3] @"d"
  %sq = Pow(%d, %two) : f32[2,8,3] @"sq"
  %v = ReduceMean(%sq) {axes = [1]} : f32[2,1,3] @"v"
  %ve = Add(%v, %eps) : f32[2,1,3] @"ve"
  %s = Sqrt(%ve) : f32[2,1,3] @"s"
  %y = Div(%d, %s) : f32[2,8,3] @"y"
  output %y
})";
  expect_unchanged(axis1);
  // gamma varying along another axis than the last: the Mul is left outside.
  std::string rows = replaced(
      kTorchLayerNorm, "const %gamma : f32[8] = [0.5, 1.5, -1.0, 2.0, 0.25, 1.0, 0.75, -0.5]",
      "const %gamma : f32[3,1] = [0.5, 1.5, -1.0]");
  ir::Graph got = passes::run_passes(ir::parse_graph(rows), {"fuse-norm-gelu"});
  ASSERT_EQ(got.nodes.size(), 3u);
  EXPECT_EQ(got.nodes[0].op, "LayerNormalization");
  EXPECT_EQ(got.nodes[1].op, "Mul");
  testing::expect_same_numerics(ir::parse_graph(rows), got);
}

// ---- GELU -----------------------------------------------------------------------------------

// torch.onnx.export of nn.GELU() before opset 20: (x * (1 + erf(x / sqrt(2)))) * 0.5.
const std::string kTorchGelu = R"(graph @g opset 17 {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %z = Div(%x, %sqrt2) : f32[2,8] @"gelu/Div"
  %e = Erf(%z) : f32[2,8] @"gelu/Erf"
  %h = Add(%e, %one) : f32[2,8] @"gelu/Add"
  %p = Mul(%x, %h) : f32[2,8] @"gelu/Mul"
  %y = Mul(%p, %half) : f32[2,8] @"gelu/Mul_1"
  output %y
})";

const std::string kGelu = R"(graph @g opset 17 {
  input %x : f32[2,8]
  %y = Gelu(%x) : f32[2,8] @"gelu"
  output %y
})";

TEST(FuseNormGelu, GeluErfAsTorchExportsIt) {
  testing::expect_pass_result("fuse-norm-gelu", kTorchGelu, kGelu);
}

// 0.5 * x first, then times (1 + erf(x * 1/sqrt(2))), constants on the left.
TEST(FuseNormGelu, GeluErfOtherOrders) {
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 17 {
  input %x : f32[2,8]
  const %c : f32[] = [0.70710677]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %hx = Mul(%half, %x) : f32[2,8] @"hx"
  %z = Mul(%c, %x) : f32[2,8] @"z"
  %e = Erf(%z) : f32[2,8] @"e"
  %h = Add(%one, %e) : f32[2,8] @"h"
  %y = Mul(%hx, %h) : f32[2,8] @"y"
  output %y
})",
                              kGelu);
  // x * (0.5 * (1 + erf)), with a constant within the tolerance of sqrt(2).
  testing::expect_pass_result(
      "fuse-norm-gelu",
      replaced(
          replaced(kTorchGelu, "%p = Mul(%x, %h) : f32[2,8] @\"gelu/Mul\"\n  %y = Mul(%p, %half)",
                   "%p = Mul(%half, %h) : f32[2,8] @\"gelu/Mul\"\n  %y = Mul(%x, %p)"),
          "[1.4142135]", "[1.41421]"),
      kGelu);
}

// torch.onnx.export of nn.GELU(approximate="tanh") before opset 20.
TEST(FuseNormGelu, GeluTanhAsTorchExportsIt) {
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 17 {
  input %x : f32[2,8]
  const %beta : f32[] = [0.7978846]
  const %kappa : f32[] = [0.044715]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %xx = Mul(%x, %x) : f32[2,8] @"xx"
  %cube = Mul(%x, %xx) : f32[2,8] @"cube"
  %k = Mul(%kappa, %cube) : f32[2,8] @"k"
  %w = Add(%x, %k) : f32[2,8] @"w"
  %u = Mul(%beta, %w) : f32[2,8] @"u"
  %t = Tanh(%u) : f32[2,8] @"t"
  %h = Add(%one, %t) : f32[2,8] @"h"
  %p = Mul(%x, %h) : f32[2,8] @"p"
  %y = Mul(%half, %p) : f32[2,8] @"y"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f32[2,8]
  %y = Gelu(%x) {approximate = "tanh"} : f32[2,8] @"gelu"
  output %y
})");
}

// HuggingFace's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))), in
// f16 with the coefficients as f16 holds them (1e-4 relative is tighter than f16's spacing).
TEST(FuseNormGelu, GeluTanhWithPowInF16) {
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 17 {
  input %x : f16[2,8]
  const %three : f16[] = [3.0]
  const %beta : f16[] = [0.7978516]
  const %kappa : f16[] = [0.04470825]
  const %one : f16[] = [1.0]
  const %half : f16[] = [0.5]
  %hx = Mul(%half, %x) : f16[2,8] @"hx"
  %cube = Pow(%x, %three) : f16[2,8] @"cube"
  %k = Mul(%cube, %kappa) : f16[2,8] @"k"
  %w = Add(%k, %x) : f16[2,8] @"w"
  %u = Mul(%w, %beta) : f16[2,8] @"u"
  %t = Tanh(%u) : f16[2,8] @"t"
  %h = Add(%t, %one) : f16[2,8] @"h"
  %y = Mul(%hx, %h) : f16[2,8] @"y"
  output %y
})",
                              R"(graph @g opset 17 {
  input %x : f16[2,8]
  %y = Gelu(%x) {approximate = "tanh"} : f16[2,8] @"gelu"
  output %y
})",
                              /*rtol=*/4e-3, /*atol=*/1e-3);
}

TEST(FuseNormGelu, GeluNearMissesStay) {
  // An intermediate with another reader.
  expect_unchanged(replaced(kTorchGelu, "  output %y\n", "  output %y\n  output %e\n"));
  expect_unchanged(replaced(kTorchGelu, "  output %y\n", "  output %y\n  output %p\n"));
  // Wrong constants: x / 1.5, 1.415 (0.06% off sqrt(2)), 0.45 * ..., 2 + erf.
  expect_unchanged(replaced(kTorchGelu, "[1.4142135]", "[1.5]"));
  expect_unchanged(replaced(kTorchGelu, "[1.4142135]", "[1.415]"));
  expect_unchanged(replaced(kTorchGelu, "%half : f32[] = [0.5]", "%half : f32[] = [0.45]"));
  expect_unchanged(replaced(kTorchGelu, "%one : f32[] = [1.0]", "%one : f32[] = [2.0]"));
  // A non-scalar coefficient, even with equal elements.
  expect_unchanged(replaced(kTorchGelu, "const %half : f32[] = [0.5]",
                            "const %half : f32[8] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]"));
  // The erf of another value than the one multiplied.
  expect_unchanged(replaced(replaced(kTorchGelu, "%z = Div(%x, %sqrt2)", "%z = Div(%w, %sqrt2)"),
                            "  input %x : f32[2,8]\n",
                            "  input %x : f32[2,8]\n  input %w : f32[2,8]\n"));
  // A tanh form whose cube coefficient is wrong.
  const std::string tanh_pow = R"(graph @g opset 17 {
  input %x : f32[2,8]
  const %three : f32[] = [3.0]
  const %beta : f32[] = [0.7978846]
  const %kappa : f32[] = [0.047715]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %cube = Pow(%x, %three) : f32[2,8] @"cube"
  %k = Mul(%kappa, %cube) : f32[2,8] @"k"
  %w = Add(%x, %k) : f32[2,8] @"w"
  %u = Mul(%beta, %w) : f32[2,8] @"u"
  %t = Tanh(%u) : f32[2,8] @"t"
  %h = Add(%one, %t) : f32[2,8] @"h"
  %p = Mul(%x, %h) : f32[2,8] @"p"
  %y = Mul(%half, %p) : f32[2,8] @"y"
  output %y
})";
  expect_unchanged(tanh_pow);
  expect_unchanged(replaced(replaced(tanh_pow, "[0.047715]", "[0.044715]"), "[3.0]", "[2.0]"));
}

// ---- together ------------------------------------------------------------------------------

// A transformer-style MLP: LayerNorm, Linear, GELU, Linear as torch writes them at opset 13;
// both patterns are rewritten and the numbers stay.
TEST(FuseNormGelu, LayerNormThenGeluInOneGraph) {
  ir::Graph in = ir::parse_graph(R"(graph @g opset 13 {
  input %x : f32[3,4]
  const %two : f32[] = [2.0]
  const %eps : f32[] = [1e-06]
  const %w1 : f32[4,2] = [0.5, -1.0, 1.5, 0.25, -0.75, 1.0, 2.0, -0.5]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %m = ReduceMean(%x) {axes = [-1]} : f32[3,1] @"m"
  %d = Sub(%x, %m) : f32[3,4] @"d"
  %sq = Pow(%d, %two) : f32[3,4] @"sq"
  %v = ReduceMean(%sq) {axes = [-1]} : f32[3,1] @"v"
  %ve = Add(%v, %eps) : f32[3,1] @"ve"
  %s = Sqrt(%ve) : f32[3,1] @"s"
  %n = Div(%d, %s) : f32[3,4] @"n"
  %a = MatMul(%n, %w1) : f32[3,2] @"fc"
  %z = Div(%a, %sqrt2) : f32[3,2] @"z"
  %e = Erf(%z) : f32[3,2] @"e"
  %h = Add(%e, %one) : f32[3,2] @"h"
  %p = Mul(%a, %h) : f32[3,2] @"p"
  %y = Mul(%p, %half) : f32[3,2] @"y"
  output %y
})");
  ir::Graph out = passes::run_passes(in, {"fuse-norm-gelu"});
  ASSERT_EQ(out.nodes.size(), 3u);
  EXPECT_EQ(out.nodes[0].op, "LayerNormalization");
  EXPECT_EQ(out.nodes[1].op, "MatMul");
  EXPECT_EQ(out.nodes[2].op, "Gelu");
  testing::expect_same_numerics(in, out);
  // A second run finds nothing left to do.
  EXPECT_EQ(ir::structural_diff(passes::run_passes(out, {"fuse-norm-gelu"}), out), "");
}

// ---- ConvNeXt's block -----------------------------------------------------------------------

// torchvision's CNBlock (dim C) as torch.onnx.export writes it at opset 17, node for node:
// depthwise 7x7 Conv, Transpose to NHWC, LayerNormalization over C (eps 1e-6), Linear as MatMul
// + Add(bias, .), GELU as Div / Erf / Add / Mul / Mul, Linear, Transpose back, layer scale
// ([C,1,1]) times the block, plus the input.
struct CnBlock {
  static constexpr int64_t kC = 8, kHidden = 4 * kC, kH = 6, kW = 5;
  std::vector<float> dw_w, dw_b, gamma, beta, w1, b1, w2, b2, layer_scale;  // torch layouts

  explicit CnBlock(uint32_t seed) {
    std::mt19937 rng(seed);
    auto fill = [&](std::vector<float>& v, size_t n, double lo, double hi) {
      std::uniform_real_distribution<double> u(lo, hi);
      for (size_t i = 0; i < n; ++i) v.push_back(static_cast<float>(u(rng)));
    };
    fill(dw_w, kC * 49, -0.3, 0.3);
    fill(dw_b, kC, -0.5, 0.5);
    fill(gamma, kC, 0.5, 1.5);
    fill(beta, kC, -0.5, 0.5);
    fill(w1, kHidden * kC, -0.5, 0.5);  // nn.Linear weight [out, in]
    fill(b1, kHidden, -0.5, 0.5);
    fill(w2, kC * kHidden, -0.3, 0.3);
    fill(b2, kC, -0.5, 0.5);
    // torchvision initialises it to 1e-6, which would hide the block behind the residual.
    fill(layer_scale, kC, 0.5, 1.5);
  }

  std::string onnx() const {
    using ::onnx::AttributeProto;
    using ::onnx::TensorProto;
    onnx::testing::ModelBuilder m(17);
    m.input("input", TensorProto::FLOAT, {1, kC, kH, kW});
    m.initializer_f32("dw.weight", {kC, 1, 7, 7}, dw_w);
    m.initializer_f32("dw.bias", {kC}, dw_b);
    m.initializer_f32("norm.weight", {kC}, gamma);
    m.initializer_f32("norm.bias", {kC}, beta);
    std::vector<float> w1t, w2t;  // MatMul takes the weights transposed: [in, out]
    for (int64_t i = 0; i < kC; ++i)
      for (int64_t o = 0; o < kHidden; ++o) w1t.push_back(w1[static_cast<size_t>(o * kC + i)]);
    for (int64_t i = 0; i < kHidden; ++i)
      for (int64_t o = 0; o < kC; ++o) w2t.push_back(w2[static_cast<size_t>(o * kHidden + i)]);
    m.initializer_f32("onnx::MatMul_1", {kC, kHidden}, w1t);
    m.initializer_f32("fc1.bias", {kHidden}, b1);
    m.initializer_f32("onnx::MatMul_2", {kHidden, kC}, w2t);
    m.initializer_f32("fc2.bias", {kC}, b2);
    m.initializer_f32("layer_scale", {kC, 1, 1}, layer_scale);
    m.initializer_f32("sqrt2", {}, {1.4142135381698608f});
    m.initializer_f32("one", {}, {1.0f});
    m.initializer_f32("half", {}, {0.5f});
    auto ints = [](::onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
      auto* a = onnx::testing::add_attr(n, name, AttributeProto::INTS);
      for (int64_t e : v) a->add_ints(e);
    };
    auto* conv = m.node("Conv", {"input", "dw.weight", "dw.bias"}, {"c"}, "/block/block.0/Conv");
    onnx::testing::add_attr(conv, "group", AttributeProto::INT)->set_i(kC);
    ints(conv, "kernel_shape", {7, 7});
    ints(conv, "pads", {3, 3, 3, 3});
    ints(conv, "strides", {1, 1});
    ints(conv, "dilations", {1, 1});
    ints(m.node("Transpose", {"c"}, {"t"}, "/block/block.1/Transpose"), "perm", {0, 2, 3, 1});
    auto* ln = m.node("LayerNormalization", {"t", "norm.weight", "norm.bias"}, {"ln"},
                      "/block/block.2/LayerNormalization");
    onnx::testing::add_attr(ln, "axis", AttributeProto::INT)->set_i(-1);
    onnx::testing::add_attr(ln, "epsilon", AttributeProto::FLOAT)->set_f(1e-6f);
    m.node("MatMul", {"ln", "onnx::MatMul_1"}, {"mm1"}, "/block/block.3/MatMul");
    m.node("Add", {"fc1.bias", "mm1"}, {"fc1"}, "/block/block.3/Add");
    m.node("Div", {"fc1", "sqrt2"}, {"z"}, "/block/block.4/Div");
    m.node("Erf", {"z"}, {"e"}, "/block/block.4/Erf");
    m.node("Add", {"e", "one"}, {"h"}, "/block/block.4/Add");
    m.node("Mul", {"fc1", "h"}, {"p"}, "/block/block.4/Mul");
    m.node("Mul", {"p", "half"}, {"g"}, "/block/block.4/Mul_1");
    m.node("MatMul", {"g", "onnx::MatMul_2"}, {"mm2"}, "/block/block.5/MatMul");
    m.node("Add", {"fc2.bias", "mm2"}, {"fc2"}, "/block/block.5/Add");
    ints(m.node("Transpose", {"fc2"}, {"back"}, "/block/block.6/Transpose"), "perm", {0, 3, 1, 2});
    m.node("Mul", {"layer_scale", "back"}, {"scaled"}, "/Mul");
    m.node("Add", {"scaled", "input"}, {"output"}, "/Add");
    m.output("output", TensorProto::FLOAT, {1, kC, kH, kW});
    return m.bytes();
  }

  // The block by its definition, in double, on x [1, C, H, W].
  std::vector<double> reference(const Tensor& x) const {
    auto at = [&](int64_t c, int64_t h, int64_t w) { return x.get_f64((c * kH + h) * kW + w); };
    std::vector<double> y(static_cast<size_t>(kC * kH * kW));
    for (int64_t h = 0; h < kH; ++h) {
      for (int64_t w = 0; w < kW; ++w) {
        std::vector<double> pix(kC);  // the depthwise conv at (h, w), per channel
        for (int64_t c = 0; c < kC; ++c) {
          double acc = dw_b[static_cast<size_t>(c)];
          for (int64_t i = 0; i < 7; ++i)
            for (int64_t j = 0; j < 7; ++j) {
              const int64_t hh = h + i - 3, ww = w + j - 3;
              if (hh >= 0 && hh < kH && ww >= 0 && ww < kW)
                acc += at(c, hh, ww) * dw_w[static_cast<size_t>((c * 7 + i) * 7 + j)];
            }
          pix[static_cast<size_t>(c)] = acc;
        }
        double mean = 0, var = 0;
        for (double v : pix) mean += v / kC;
        for (double v : pix) var += (v - mean) * (v - mean) / kC;
        for (int64_t c = 0; c < kC; ++c) {
          const size_t k = static_cast<size_t>(c);
          pix[k] = (pix[k] - mean) / std::sqrt(var + 1e-6f) * gamma[k] + beta[k];
        }
        std::vector<double> hidden(kHidden);
        for (int64_t o = 0; o < kHidden; ++o) {
          double a = b1[static_cast<size_t>(o)];
          for (int64_t c = 0; c < kC; ++c)
            a += pix[static_cast<size_t>(c)] * w1[static_cast<size_t>(o * kC + c)];
          hidden[static_cast<size_t>(o)] = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
        }
        for (int64_t c = 0; c < kC; ++c) {
          double a = b2[static_cast<size_t>(c)];
          for (int64_t o = 0; o < kHidden; ++o)
            a += hidden[static_cast<size_t>(o)] * w2[static_cast<size_t>(c * kHidden + o)];
          y[static_cast<size_t>((c * kH + h) * kW + w)] =
              layer_scale[static_cast<size_t>(c)] * a + at(c, h, w);
        }
      }
    }
    return y;
  }
};

TEST(FuseNormGelu, ConvNextBlockExportedByTorchImportsAndRuns) {
  const CnBlock block(42);
  ir::Graph g = onnx::import_model_bytes(block.onnx(), "cnblock.onnx", "");
  Tensor x(DType::kF32, {1, CnBlock::kC, CnBlock::kH, CnBlock::kW});
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
  const std::vector<double> want = block.reference(x);
  const Tensor y = runtime::cpu::run_graph(g, {x})[0];
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_NEAR(y.get_f64(i), want[static_cast<size_t>(i)],
                1e-4 * (1 + std::fabs(want[static_cast<size_t>(i)])))
        << "element " << i;

  // The pass turns the decomposed GELU into one node and leaves the LayerNormalization.
  ir::Graph fused = passes::run_passes(g, {"fuse-norm-gelu"});
  int gelus = 0, norms = 0, erfs = 0;
  for (const ir::Node& n : fused.nodes) {
    gelus += n.op == "Gelu";
    norms += n.op == "LayerNormalization";
    erfs += n.op == "Erf";
  }
  EXPECT_EQ(gelus, 1);
  EXPECT_EQ(norms, 1);
  EXPECT_EQ(erfs, 0);
  EXPECT_EQ(fused.nodes.size(), g.nodes.size() - 4);
  testing::expect_same_numerics(g, fused, 1e-5, 1e-5);
}

// Mish as exporters write it before opset 18: x * tanh(softplus(x)), in either Mul order, and
// with softplus spelled ln(1 + e^x). The result feeds the next op as Mish's output.
TEST(FuseNormGelu, MishFromSoftplusOrLogOfExp) {
  const char* kMish = R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  %y = Mish(%x) : f32[1,4,3,3] @"mish"
  %z = Relu(%y) : f32[1,4,3,3] @"relu"
  output %z
})";
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  %s = Softplus(%x) : f32[1,4,3,3] @"sp"
  %t = Tanh(%s) : f32[1,4,3,3] @"th"
  %y = Mul(%x, %t) : f32[1,4,3,3] @"mish"
  %z = Relu(%y) : f32[1,4,3,3] @"relu"
  output %z
})",
                              kMish);
  const char* kLogExp = R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  const %one : f32[] = [1.0]
  %e = Exp(%x) : f32[1,4,3,3] @"exp"
  %a = Add(%one, %e) : f32[1,4,3,3] @"add"
  %s = Log(%a) : f32[1,4,3,3] @"log"
  %t = Tanh(%s) : f32[1,4,3,3] @"th"
  %y = Mul(%t, %x) : f32[1,4,3,3] @"mish"
  %z = Relu(%y) : f32[1,4,3,3] @"relu"
  output %z
})";
  testing::expect_pass_result("fuse-norm-gelu", kLogExp, R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  const %one : f32[] = [1.0]
  %y = Mish(%x) : f32[1,4,3,3] @"mish"
  %z = Relu(%y) : f32[1,4,3,3] @"relu"
  output %z
})");
  const ir::Graph before = ir::parse_graph(kLogExp);
  testing::expect_same_numerics(before, passes::run_passes(before, {"fuse-norm-gelu"}), 1e-6, 1e-6);
}

// Not Mish: the Tanh of another value's softplus, and a softplus read outside the pattern.
TEST(FuseNormGelu, MishNeedsTheSameInputAndPrivateIntermediates) {
  const char* other = R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  input %w : f32[1,4,3,3]
  %s = Softplus(%w) : f32[1,4,3,3] @"sp"
  %t = Tanh(%s) : f32[1,4,3,3] @"th"
  %y = Mul(%x, %t) : f32[1,4,3,3] @"mul"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", other, other);
  const char* shared = R"(graph @g opset 17 {
  input %x : f32[1,4,3,3]
  %s = Softplus(%x) : f32[1,4,3,3] @"sp"
  %t = Tanh(%s) : f32[1,4,3,3] @"th"
  %y = Mul(%x, %t) : f32[1,4,3,3] @"mul"
  %z = Add(%y, %s) : f32[1,4,3,3] @"add"
  output %z
})";
  testing::expect_pass_result("fuse-norm-gelu", shared, shared);
}

// ---- HardSwish, HardSigmoid -----------------------------------------------------------------

// YOLOv5's x * hardtanh(x + 3, 0, 6) / 6 (Mul, then Div), PyTorch's opset-13 export of
// nn.Hardswish (x * HardSigmoid(x) with alpha 1/6), and x * (min(relu(x + 3), 6) * 1/6): each
// becomes HardSwish, which the epilogue fuses into the conv before it.
TEST(FuseNormGelu, HardSwishAsExportersWriteIt) {
  const char* kHardSwish = R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %zero : f32[] = [0.0]
  const %six : f32[] = [6.0]
  %y = HardSwish(%x) : f32[1,4,3,3] @"div"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %zero : f32[] = [0.0]
  const %six : f32[] = [6.0]
  %a = Add(%x, %three) : f32[1,4,3,3] @"add"
  %c = Clip(%a, %zero, %six) : f32[1,4,3,3] @"clip"
  %m = Mul(%x, %c) : f32[1,4,3,3] @"mul"
  %y = Div(%m, %six) : f32[1,4,3,3] @"div"
  output %y
})",
                              kHardSwish);
  testing::expect_pass_result("fuse-norm-gelu", R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  %h = HardSigmoid(%x) {alpha = 0.1666666716337204, beta = 0.5} : f32[1,4,3,3] @"hsig"
  %y = Mul(%x, %h) : f32[1,4,3,3] @"mul"
  output %y
})",
                              R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  %y = HardSwish(%x) : f32[1,4,3,3] @"mul"
  output %y
})");
  const char* kRelu6 = R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %six : f32[] = [6.0]
  const %sixth : f32[] = [0.16666667]
  %a = Add(%three, %x) : f32[1,4,3,3] @"add"
  %r = Relu(%a) : f32[1,4,3,3] @"relu"
  %c = Min(%r, %six) : f32[1,4,3,3] @"min"
  %h = Mul(%c, %sixth) : f32[1,4,3,3] @"scale"
  %y = Mul(%h, %x) : f32[1,4,3,3] @"mul"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", kRelu6, R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %six : f32[] = [6.0]
  const %sixth : f32[] = [0.16666667]
  %y = HardSwish(%x) : f32[1,4,3,3] @"mul"
  output %y
})");
  const ir::Graph before = ir::parse_graph(kRelu6);
  testing::expect_same_numerics(before, passes::run_passes(before, {"fuse-norm-gelu"}), 1e-6, 1e-6);
}

// relu6(x + 3) / 6 alone (Clip over a Relu, whose lower bound then need only be <= 0), gating
// another value (MobileNet-v3's squeeze-excite): HardSigmoid with alpha 1/6, the gate's Mul
// left as it is.
TEST(FuseNormGelu, HardSigmoidGatingAnotherValue) {
  const char* before = R"(graph @g opset 13 {
  input %x : f32[1,4,1,1]
  input %f : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %lo : f32[] = [-1.0]
  const %six : f32[] = [6.0]
  %a = Add(%x, %three) : f32[1,4,1,1] @"add"
  %r = Relu(%a) : f32[1,4,1,1] @"relu"
  %c = Clip(%r, %lo, %six) : f32[1,4,1,1] @"clip"
  %h = Div(%c, %six) : f32[1,4,1,1] @"div"
  %y = Mul(%f, %h) : f32[1,4,3,3] @"gate"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", before, R"(graph @g opset 13 {
  input %x : f32[1,4,1,1]
  input %f : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %lo : f32[] = [-1.0]
  const %six : f32[] = [6.0]
  %h = HardSigmoid(%x) {alpha = 0.16666666666666666, beta = 0.5} : f32[1,4,1,1] @"div"
  %y = Mul(%f, %h) : f32[1,4,3,3] @"gate"
  output %y
})");
  const ir::Graph g = ir::parse_graph(before);
  testing::expect_same_numerics(g, passes::run_passes(g, {"fuse-norm-gelu"}), 1e-6, 1e-6);
}

// Not HardSwish or HardSigmoid: a bound of 5, an offset of 2, a lower bound of -1 with no Relu
// under it, another value's relu6, and a relu6 read outside the pattern.
TEST(FuseNormGelu, HardSwishNearMissesStay) {
  const std::string kBase = R"(graph @g opset 13 {
  input %x : f32[1,4,3,3]
  input %w : f32[1,4,3,3]
  const %three : f32[] = [3.0]
  const %lo : f32[] = [0.0]
  const %six : f32[] = [6.0]
  %a = Add(%x, %three) : f32[1,4,3,3] @"add"
  %c = Clip(%a, %lo, %six) : f32[1,4,3,3] @"clip"
  %m = Mul(%x, %c) : f32[1,4,3,3] @"mul"
  %y = Div(%m, %six) : f32[1,4,3,3] @"div"
  output %y
})";
  expect_unchanged(replaced(kBase, "%c = Clip(%a, %lo, %six)", "%c = Clip(%a, %lo, %three)"));
  expect_unchanged(replaced(kBase, "const %three : f32[] = [3.0]", "const %three : f32[] = [2.0]"));
  expect_unchanged(replaced(kBase, "const %lo : f32[] = [0.0]", "const %lo : f32[] = [-1.0]"));
  expect_unchanged(replaced(kBase, "%m = Mul(%x, %c)", "%m = Mul(%w, %c)"));
  expect_unchanged(replaced(kBase, "  output %y", "  output %y\n  output %c"));
}

// ---- Pixel shuffles -------------------------------------------------------------------------

// PyTorch's pixel_shuffle before opset 11 (CRD), its DCR twin, and a space-to-depth, each as
// Reshape / Transpose / Reshape: one DepthToSpace or SpaceToDepth node, which the conv before
// it then stores.
TEST(FuseNormGelu, PixelShufflesAsReshapesAndATranspose) {
  const char* kCrd = R"(graph @g opset 9 {
  input %x : f32[1,12,2,3]
  const %s1 : i64[6] = [1, 3, 2, 2, 2, 3]
  const %s2 : i64[4] = [1, 3, 4, 6]
  %a = Reshape(%x, %s1) : f32[1,3,2,2,2,3] @"r1"
  %b = Transpose(%a) {perm = [0, 1, 4, 2, 5, 3]} : f32[1,3,2,2,3,2] @"t"
  %y = Reshape(%b, %s2) : f32[1,3,4,6] @"r2"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", kCrd, R"(graph @g opset 9 {
  input %x : f32[1,12,2,3]
  const %s1 : i64[6] = [1, 3, 2, 2, 2, 3]
  const %s2 : i64[4] = [1, 3, 4, 6]
  %y = DepthToSpace(%x) {blocksize = 2, mode = "CRD"} : f32[1,3,4,6] @"r2"
  output %y
})");
  const char* kDcr = R"(graph @g opset 9 {
  input %x : f32[1,12,2,3]
  const %s1 : i64[6] = [1, 2, 2, 3, 2, 3]
  const %s2 : i64[4] = [1, 3, 4, 6]
  %a = Reshape(%x, %s1) : f32[1,2,2,3,2,3] @"r1"
  %b = Transpose(%a) {perm = [0, 3, 4, 1, 5, 2]} : f32[1,3,2,2,3,2] @"t"
  %y = Reshape(%b, %s2) : f32[1,3,4,6] @"r2"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", kDcr, R"(graph @g opset 9 {
  input %x : f32[1,12,2,3]
  const %s1 : i64[6] = [1, 2, 2, 3, 2, 3]
  const %s2 : i64[4] = [1, 3, 4, 6]
  %y = DepthToSpace(%x) {blocksize = 2, mode = "DCR"} : f32[1,3,4,6] @"r2"
  output %y
})");
  const char* kS2d = R"(graph @g opset 9 {
  input %x : f32[2,3,4,6]
  const %s1 : i64[6] = [2, 3, 2, 2, 3, 2]
  const %s2 : i64[4] = [2, 12, 2, 3]
  %a = Reshape(%x, %s1) : f32[2,3,2,2,3,2] @"r1"
  %b = Transpose(%a) {perm = [0, 3, 5, 1, 2, 4]} : f32[2,2,2,3,2,3] @"t"
  %y = Reshape(%b, %s2) : f32[2,12,2,3] @"r2"
  output %y
})";
  testing::expect_pass_result("fuse-norm-gelu", kS2d, R"(graph @g opset 9 {
  input %x : f32[2,3,4,6]
  const %s1 : i64[6] = [2, 3, 2, 2, 3, 2]
  const %s2 : i64[4] = [2, 12, 2, 3]
  %y = SpaceToDepth(%x) {blocksize = 2} : f32[2,12,2,3] @"r2"
  output %y
})");
  // Other permutations, and a transposed value read outside the pattern, stay.
  expect_unchanged(replaced(kCrd, "perm = [0, 1, 4, 2, 5, 3]} : f32[1,3,2,2,3,2]",
                            "perm = [0, 1, 4, 3, 5, 2]} : f32[1,3,2,2,3,2]"));
  expect_unchanged(replaced(kCrd, "  output %y", "  output %y\n  output %b"));
}

}  // namespace
}  // namespace tessel
