#include "passes/pass_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/equal.h"
#include "ir/infer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/cpu/executor.h"

namespace tessel::testing {

void expect_same_numerics(const ir::Graph& a, const ir::Graph& b, double rtol, double atol) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<Tensor> inputs;
  for (ir::ValueId v : a.inputs) {
    Tensor t(a.type(v).dtype, a.type(v).shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, uni(rng));
    inputs.push_back(t);
  }
  std::vector<Tensor> ra = runtime::cpu::run_graph(a, inputs);
  std::vector<Tensor> rb = runtime::cpu::run_graph(b, inputs);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t k = 0; k < ra.size(); ++k) {
    ASSERT_EQ(ra[k].shape(), rb[k].shape());
    for (int64_t i = 0; i < ra[k].numel(); ++i) {
      double x = ra[k].get_f64(i), y = rb[k].get_f64(i);
      ASSERT_LE(std::fabs(x - y), atol + rtol * std::fabs(x)) << "output " << k << " element " << i;
    }
  }
}

void expect_pass_result(const std::string& pass, const std::string& before,
                        const std::string& expected, double rtol, double atol) {
  ir::Graph in = ir::parse_graph(before, "before.tir");
  ir::verify(in, ir::OpRegistry::global());
  ir::Graph want = ir::parse_graph(expected, "expected.tir");
  ir::Graph got = passes::run_passes(in, {pass});
  EXPECT_EQ(ir::structural_diff(got, want), "") << "got:\n" << ir::print_graph(got) << "expected:\n"
                                                << expected;
  expect_same_numerics(in, got, rtol, atol);
}

std::string small_ints(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i > 0 ? ", " : "") + std::to_string((i * 5) % 16 - 8);
  return s;
}

std::string int8_conv_head(const std::string& bias, const std::string& scale) {
  return R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %wq : i8[8,3,3,8] = [)" + small_ints(576) + R"(]
  const %b : f32[8] = [)" + bias + R"(]
  const %s : f32[8] = [)" + scale + R"(]
  %xq = QuantizeLinear(%x, %sx, %z) : i8[1,3,3,8] @"qx"
)";
}

}  // namespace tessel::testing
