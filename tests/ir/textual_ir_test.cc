#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/equal.h"
#include "ir/infer.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace tessel::ir {
namespace {

const char* kConvRelu = R"(graph @main opset 17 {
  input %x : f32[1,2,4,4]
  const %w : f32[3,2,1,1] = [0.5, -1.25, 2.0, 1e-07, 3.0, -0.0]
  const %"onnx::b" : f32[3] = [1.0, nan, -inf]
  %y = Conv(%x, %w, %"onnx::b") {group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0]} : f32[1,3,4,4] @"conv"
  %z = LeakyRelu(%y) {alpha = 0.1} : f32[1,3,4,4] @"act"
  output %z
}
)";

TEST(TextualIr, PrintParseRoundTripIsExact) {
  Graph g = parse_graph(kConvRelu);
  EXPECT_EQ(print_graph(g), kConvRelu);
  Graph again = parse_graph(print_graph(g));
  EXPECT_EQ(structural_diff(g, again), "");
}

TEST(TextualIr, AttributeKindsSurviveRoundTrip) {
  const char* text = R"(graph @g opset 13 {
  input %x : f32[2]
  %y = Custom(%x, _) {f = 1.0, fs = [1.5, 2.0], i = 1, is = [1, -2], s = "CRD", ss = ["a", "b\"c"], t = tensor<i64[2] [3, 4]>} : f32[2] @"n"
  output %y
}
)";
  Graph g = parse_graph(text);
  const Node& n = g.nodes[0];
  EXPECT_TRUE(std::holds_alternative<double>(n.attrs.at("f")));
  EXPECT_TRUE(std::holds_alternative<int64_t>(n.attrs.at("i")));
  EXPECT_TRUE(std::holds_alternative<std::vector<double>>(n.attrs.at("fs")));
  EXPECT_EQ(std::get<std::vector<std::string>>(n.attrs.at("ss"))[1], "b\"c");
  EXPECT_EQ(n.inputs[1], kNoValue);
  EXPECT_EQ(print_graph(g), text);
}

TEST(TextualIr, StructuralEqualityIgnoresNamesButNotStructure) {
  Graph a = parse_graph(kConvRelu);
  std::string renamed = kConvRelu;
  for (auto [from, to] : {std::pair{"%y", "%t0"}, std::pair{"\"act\"", "\"relu_9\""}}) {
    for (size_t p; (p = renamed.find(from)) != std::string::npos;)
      renamed.replace(p, std::string(from).size(), to);
  }
  EXPECT_EQ(structural_diff(a, parse_graph(renamed)), "");

  std::string other_alpha = kConvRelu;
  other_alpha.replace(other_alpha.find("alpha = 0.1"), 11, "alpha = 0.2");
  EXPECT_NE(structural_diff(a, parse_graph(other_alpha)).find("attribute 'alpha'"),
            std::string::npos);

  std::string other_const = kConvRelu;
  other_const.replace(other_const.find("0.5"), 3, "0.6");
  EXPECT_NE(structural_diff(a, parse_graph(other_const)), "");
}

void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    parse_graph(text, "t.tir");
    FAIL() << "no error for:\n" << text;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TextualIr, ParseErrorsNameLineAndColumn) {
  expect_parse_error("graph @g opset 17 {\n  output %nope\n}\n", "t.tir:2:10: use of undefined value %nope");
  expect_parse_error("graph @g opset 17 {\n  input %x : q7[1]\n}\n", "t.tir:2:14: unknown dtype 'q7'");
  expect_parse_error("graph @g opset 17 {\n  const %c : f32[3] = [1.0, 2.0]\n}\n", "2 elements given for f32[3]");
  expect_parse_error("graph @g opset 17 {\n  input %x : f32[1]\n  input %x : f32[1]\n}\n", "defined twice");
  expect_parse_error("graph @g opset 17 {\n  const %c : f32[99] = [...]\n}\n", "elided constant");
  expect_parse_error("graph @g opset 17 {\n  input %x : f32[1]\n", "expected a statement");
  expect_parse_error("graph @g opset 17 {\n  input %x : f32[1073741824,1073741824,1024]\n}\n", "2^40");
}

TEST(TextualIr, ElidedPrintIsForReadingOnly) {
  Graph g = parse_graph(kConvRelu);
  PrintOptions opts;
  opts.elide_constants_over = 4;
  std::string text = print_graph(g, opts);
  EXPECT_NE(text.find("const %w : f32[3,2,1,1] = [...]"), std::string::npos);
  EXPECT_NE(text.find("[1.0, nan, -inf]"), std::string::npos);
}

}  // namespace
}  // namespace tessel::ir
