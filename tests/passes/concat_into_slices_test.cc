// concat_into_slices (zero-copy concat) as Before / Expected IR: which Concat inputs are marked
// in_place and which stay copied, with the CPU executor computing the same result before and
// after (the pass only annotates). Then the whole GPU pipeline on an ONNX-form Inception block,
// whose memory plan must place the conv branches inside the concat's buffer.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "ir/equal.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

namespace tessel {
namespace {

using testing::conv_weight;
using testing::IrWriter;

// Replaces the one occurrence of `from` in `text`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// OHWI weights [co, k, k, ci] for tessel.Conv.
void ohwi(IrWriter& w, const std::string& name, int64_t co, int64_t ci, int64_t k) {
  w.constant(name, {co, k, k, ci}, -0.5, 0.5);
}

// An Inception-v3 "A" block in the GPU form (NHWC tessel ops, after fuse): a 1x1 branch, a
// 1x1 -> 3x3 branch, a 1x1 -> 3x3 -> 3x3 branch and a max-pool branch, concatenated along the
// channels and read by the next layer's conv.
IrWriter inception_block(const std::string& concat_line) {
  IrWriter w(3);
  w.input("x", "f32[1,5,5,8]");
  ohwi(w, "w1", 8, 8, 1);
  w.constant("bias1", {8}, -0.1, 0.1);
  ohwi(w, "w2a", 8, 8, 1);
  ohwi(w, "w2b", 16, 8, 3);
  ohwi(w, "w3a", 8, 8, 1);
  ohwi(w, "w3b", 8, 8, 3);
  ohwi(w, "w3c", 8, 8, 3);
  ohwi(w, "wy", 8, 40, 1);
  const std::string relu =
      R"({epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0]})";
  w.node("%b1 = tessel.Conv(%x, %w1, %bias1) " + relu + " : f32[1,5,5,8] @\"branch1x1\"");
  w.node("%b2a = tessel.Conv(%x, %w2a) " + relu + " : f32[1,5,5,8] @\"branch3x3_1\"");
  w.node("%b2 = tessel.Conv(%b2a, %w2b) {pads = [1, 1, 1, 1]} : f32[1,5,5,16] @\"branch3x3_2\"");
  w.node("%b3a = tessel.Conv(%x, %w3a) : f32[1,5,5,8] @\"dbl_1\"");
  w.node("%b3b = tessel.Conv(%b3a, %w3b) {pads = [1, 1, 1, 1]} : f32[1,5,5,8] @\"dbl_2\"");
  w.node("%b3 = tessel.Conv(%b3b, %w3c) {pads = [1, 1, 1, 1]} : f32[1,5,5,8] @\"dbl_3\"");
  w.node(
      "%p = tessel.MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,5,5,8] "
      "@\"pool\"");
  w.node(concat_line);
  w.node("%y = tessel.Conv(%c, %wy) : f32[1,5,5,8] @\"next\"");
  return w;
}

// The three conv branches store into their channels [0, 8), [8, 24), [24, 32); the pool branch,
// which no contraction writes, stays a copy.
TEST(ConcatIntoSlices, InceptionConvBranchesStoreInPlace) {
  const std::string before =
      inception_block("%c = Concat(%b1, %b2, %b3, %p) {axis = 3} : f32[1,5,5,40] @\"concat\"")
          .text("y");
  const std::string expected =
      replaced(before, "{axis = 3}", "{axis = 3, in_place = [1, 1, 1, 0]}");
  testing::expect_pass_result("concat-into-slices", before, expected);
}

// Inception-v3's Mixed_7b: the 1x3 and 3x1 convs of a branch are concatenated, and that Concat
// is concatenated again with the other branches. The inner Concat then has nothing to copy, so
// it is itself stored in place: both convs store straight into the outer buffer, at channels
// 8 + 0 and 8 + 8 of its 32.
TEST(ConcatIntoSlices, NestedConcatsStoreIntoTheOuterBuffer) {
  IrWriter w(4);
  w.input("x", "f32[1,3,3,8]");
  ohwi(w, "w1", 8, 8, 1);
  w.constant("wa", {8, 1, 3, 8}, -0.5, 0.5);
  w.constant("wb", {8, 3, 1, 8}, -0.5, 0.5);
  ohwi(w, "wy", 8, 32, 1);
  w.node("%b1 = tessel.Conv(%x, %w1) : f32[1,3,3,8] @\"branch1x1\"");
  w.node("%a = tessel.Conv(%x, %wa) {pads = [0, 1, 0, 1]} : f32[1,3,3,8] @\"branch3x3_2a\"");
  w.node("%b = tessel.Conv(%x, %wb) {pads = [1, 0, 1, 0]} : f32[1,3,3,8] @\"branch3x3_2b\"");
  w.node("%inner = Concat(%a, %b) {axis = 3} : f32[1,3,3,16] @\"cat3x3\"");
  w.node(
      "%p = tessel.AveragePool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,3,3,8] "
      "@\"pool\"");
  w.node("%c = Concat(%b1, %inner, %p) {axis = 3} : f32[1,3,3,32] @\"concat\"");
  w.node("%y = tessel.Conv(%c, %wy) : f32[1,3,3,8] @\"next\"");
  const std::string before = w.text("y");
  std::string expected =
      replaced(before, "%a, %b) {axis = 3}", "%a, %b) {axis = 3, in_place = [1, 1]}");
  expected = replaced(expected, "%p) {axis = 3}", "%p) {axis = 3, in_place = [1, 1, 0]}");
  testing::expect_pass_result("concat-into-slices", before, expected);

  const ir::Graph g = ir::parse_graph(expected);
  const ir::ValueId outer = g.find_value("c");
  for (const auto& [name, offset] : {std::pair{"b1", 0}, {"a", 8}, {"b", 16}, {"inner", 8}}) {
    SCOPED_TRACE(name);
    const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, g.find_value(name));
    ASSERT_TRUE(slice);
    EXPECT_EQ(slice->base, outer);
    EXPECT_EQ(slice->channel_offset, offset);
    EXPECT_EQ(slice->channels, 32);
  }
  EXPECT_FALSE(passes::channel_slice_of(g, g.find_value("p")));
  const passes::MemoryPlan plan = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, plan), "");
  EXPECT_EQ(plan.buffers[static_cast<size_t>(g.find_value("b"))].alias_of, outer);
  EXPECT_EQ(plan.buffers[static_cast<size_t>(g.find_value("b"))].channel_offset, 16);
}

// tessel.Gemm outputs concatenated along the columns (axis -1 is the last axis too).
TEST(ConcatIntoSlices, GemmColumns) {
  const std::string before = R"(graph @g opset 17 {
  input %x : f32[3,4]
  const %wa : f32[2,4] = [0.5, -1.0, 0.25, 2.0, 1.0, 0.5, -0.5, 0.75]
  const %wb : f32[1,4] = [1.5, -0.25, 0.5, -1.0]
  %a = tessel.Gemm(%x, %wa) : f32[3,2] @"fc_a"
  %b = tessel.Gemm(%x, %wb) : f32[3,1] @"fc_b"
  %c = Concat(%a, %b, %x) {axis = -1} : f32[3,7] @"concat"
  %y = Relu(%c) : f32[3,7] @"relu"
  output %y
})";
  testing::expect_pass_result("concat-into-slices", before,
                              replaced(before, "{axis = -1}", "{axis = -1, in_place = [1, 1, 0]}"));
}

// Each graph breaks one condition; the pass leaves it as it is.
TEST(ConcatIntoSlices, WhatStaysACopy) {
  std::string weights;
  for (int i = 0; i < 64; ++i) weights += (i ? ", " : "") + std::to_string((i % 7 - 3) * 0.125);
  const std::string head = R"(graph @g opset 17 {
  input %x : f32[1,2,2,8]
  input %r : f32[1,2,2,8]
  input %x2 : f32[1,4,4,2]
  const %wg : f32[8,1,1,1] = [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0]
  const %w : f32[8,1,1,8] = [)" +
                           weights + "]\n";
  const std::string conv = "  %a = tessel.Conv(%x, %w) : f32[1,2,2,8] @\"conv\"\n";
  const std::string concat = "  %c = Concat(%a, %x) {axis = 3} : f32[1,2,2,16] @\"concat\"\n";
  const std::string relu = "  %y = Relu(%c) : f32[1,2,2,16] @\"relu\"\n";
  const struct Case {
    const char* why;
    std::string body;
  } cases[] = {
      {"the conv's output has a second reader",
       conv + concat + relu + "  %z = Relu(%a) : f32[1,2,2,8] @\"r2\"\n  output %y\n  output %z\n"},
      {"the conv's output is a graph output", conv + concat + relu + "  output %y\n  output %a\n"},
      {"the Concat's output is a graph output", conv + concat + "  output %c\n"},
      {"the same value twice",
       conv + "  %c = Concat(%a, %a) {axis = 3} : f32[1,2,2,16] @\"concat\"\n" + relu +
           "  output %y\n"},
      {"a residual add reads R at the store index",
       R"(  %a = tessel.Conv(%x, %w, _, %r) {epilogue = ["add_residual"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[1,2,2,8] @"conv"
)" + concat +
           relu + "  output %y\n"},
      {"a depth_to_space store",
       R"(  %a = tessel.Conv(%x, %w) {block = 2, mode = "DCR", store = "depth_to_space"} : f32[1,4,4,2] @"conv"
  %c = Concat(%a, %x2) {axis = 3} : f32[1,4,4,4] @"concat"
  %y = Relu(%c) : f32[1,4,4,4] @"relu"
  output %y
)"},
      {"a grouped conv runs on the op kernels",
       "  %a = tessel.Conv(%x, %wg) {group = 8} : f32[1,2,2,8] @\"conv\"\n" + concat + relu +
           "  output %y\n"},
      {"a concat along H", conv + "  %c = Concat(%a, %x) {axis = 1} : f32[1,4,2,8] @\"concat\"\n" +
                               "  %y = Relu(%c) : f32[1,4,2,8] @\"relu\"\n  output %y\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    const std::string text = head + c.body + "}";
    testing::expect_pass_result("concat-into-slices", text, text);
  }
}

// An in_place attribute the pass did not compute (or no longer holds) is recomputed.
TEST(ConcatIntoSlices, StaleFlagsAreRecomputed) {
  const std::string before = R"(graph @g opset 17 {
  input %x : f32[2,4]
  const %w : f32[4,4] = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
  %a = tessel.Gemm(%x, %w) : f32[2,4] @"fc"
  %s = Sigmoid(%x) : f32[2,4] @"sigmoid"
  %c = Concat(%s, %a) {axis = 1, in_place = [1, 0]} : f32[2,8] @"concat"
  %y = Relu(%c) : f32[2,8] @"relu"
  output %y
})";
  testing::expect_pass_result("concat-into-slices", before,
                              replaced(before, "in_place = [1, 0]", "in_place = [0, 1]"));
  const std::string none = replaced(before, "%a = tessel.Gemm(%x, %w)", "%a = Tanh(%x)");
  testing::expect_pass_result("concat-into-slices", none,
                              replaced(none, "{axis = 1, in_place = [1, 0]}", "{axis = 1}"));
}

// The ONNX form of an Inception-v3 reduction block (Mixed_6a: a stride-2 3x3 conv, a 1x1 ->
// 3x3 -> stride-2 3x3 tower, a stride-2 max pool) through the whole GPU pipeline: the Concat
// keeps the pool branch as its only copy, the memory plan places both conv branches as channel
// slices of its buffer, and the CPU executor computes the model's result from the compiled
// graph.
TEST(ConcatIntoSlices, GpuPipelineOnAnInceptionReductionBlock) {
  IrWriter w(9);
  w.input("x", "f32[1,8,9,9]");
  conv_weight(w, "w1", 16, 8, 3);
  conv_weight(w, "w2a", 8, 8, 1);
  conv_weight(w, "w2b", 8, 8, 3);
  conv_weight(w, "w2c", 8, 8, 3);
  conv_weight(w, "wy", 8, 32, 1);
  w.node("%c1 = Conv(%x, %w1) {strides = [2, 2]} : f32[1,16,4,4] @\"branch3x3\"");
  w.node("%r1 = Relu(%c1) : f32[1,16,4,4] @\"relu1\"");
  w.node("%c2a = Conv(%x, %w2a) : f32[1,8,9,9] @\"dbl_1\"");
  w.node("%r2a = Relu(%c2a) : f32[1,8,9,9] @\"relu2a\"");
  w.node("%c2b = Conv(%r2a, %w2b) {pads = [1, 1, 1, 1]} : f32[1,8,9,9] @\"dbl_2\"");
  w.node("%r2b = Relu(%c2b) : f32[1,8,9,9] @\"relu2b\"");
  w.node("%c2c = Conv(%r2b, %w2c) {strides = [2, 2]} : f32[1,8,4,4] @\"dbl_3\"");
  w.node("%r2c = Relu(%c2c) : f32[1,8,4,4] @\"relu2c\"");
  w.node("%p = MaxPool(%x) {kernel_shape = [3, 3], strides = [2, 2]} : f32[1,8,4,4] @\"pool\"");
  w.node("%c = Concat(%r1, %r2c, %p) {axis = 1} : f32[1,32,4,4] @\"concat\"");
  w.node("%y = Conv(%c, %wy) : f32[1,8,4,4] @\"next\"");
  const ir::Graph in = ir::parse_graph(w.text("y"));
  for (Precision precision : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precision == Precision::kFp16 ? "fp16" : "fp32");
    const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({.precision = precision}));
    const ir::Node* concat = nullptr;
    for (const ir::Node& n : out.nodes)
      if (n.op == "Concat") concat = &n;
    ASSERT_NE(concat, nullptr);
    EXPECT_EQ(concat->get_ints(passes::kInPlaceAttr), (std::vector<int64_t>{1, 1, 0}));
    const std::vector<passes::ChannelSlice> slices = passes::in_place_inputs(out, *concat);
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(slices[0].channel_offset, 0);
    EXPECT_EQ(slices[1].channel_offset, 16);
    // The flags survive the textual IR (tessel opt --print-after-all, then a file).
    EXPECT_EQ(ir::structural_diff(ir::parse_graph(ir::print_graph(out)), out), "");
    const passes::MemoryPlan plan = passes::plan_memory(out);
    EXPECT_EQ(passes::verify_plan(out, plan), "");
    for (const passes::ChannelSlice& s : slices) {
      const passes::BufferPlan& b = plan.buffers[static_cast<size_t>(s.value)];
      EXPECT_EQ(b.alias_of, concat->outputs[0]);
      EXPECT_EQ(b.channel_offset, s.channel_offset);
      EXPECT_EQ(b.offset, plan.buffers[static_cast<size_t>(concat->outputs[0])].offset);
    }
    const bool half = precision == Precision::kFp16;
    testing::expect_same_numerics(in, out, half ? 2e-2 : 1e-5, half ? 2e-2 : 1e-5);
  }
}

TEST(ConcatIntoSlices, MalformedFlagsAreUserErrors) {
  auto error = [](const std::string& concat_attrs, const std::string& outputs = "  output %y\n",
                  const std::string& type = "f32[2,8]") {
    const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[2,4]
  %a = Relu(%x) : f32[2,4] @"relu"
  %c = Concat(%a, %x) )" + concat_attrs +
                                        " : " + type + R"( @"concat"
  %y = Tanh(%c) : )" + type + R"( @"tanh"
)" + outputs + "}");
    try {
      passes::plan_memory(g);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("{axis = 1, in_place = [1]}"),
            "Concat 'concat': attribute 'in_place' must hold a 0 or 1 for each of its 2 inputs");
  EXPECT_EQ(error("{axis = 1, in_place = [0, 1]}"),
            "Concat 'concat': input 1 (%x) is marked 'in_place' but is not a node's output");
  EXPECT_EQ(error("{axis = 1, in_place = [1, 0]}", "  output %y\n  output %c\n"),
            "Concat 'concat': a graph output cannot have inputs stored in place");
  EXPECT_EQ(error("{axis = 0, in_place = [1, 0]}", "  output %y\n", "f32[4,4]"),
            "Concat 'concat': inputs stored in place need a concatenation along the last axis");
  EXPECT_EQ(error("{axis = 1, in_place = [1, 0]}"), "no error");
  // A second reader that cannot read the value inside the buffer (Tanh of the Relu's output).
  const ir::Graph shared = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[2,4]
  %a = Relu(%x) : f32[2,4] @"relu"
  %c = Concat(%a, %x) {axis = 1, in_place = [1, 0]} : f32[2,8] @"concat"
  %t = Tanh(%a) : f32[2,4] @"tanh"
  %y = Tanh(%c) : f32[2,8] @"tanh2"
  output %y
  output %t
})");
  try {
    passes::plan_memory(shared);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Concat 'concat': input 0 (%a) is marked 'in_place' but has readers that cannot read "
              "it inside the Concat's buffer");
  }
}

// DenseNet's block after nest-prefix-concats: each Concat is the prefix of the next, and also
// read by a 1x1 conv. The inner Concats are stored in place (the conv reads each where it lies
// in the last one's buffer, rows of 32 channels); the features are stored by their convs; only
// the block input %x is copied, by the first Concat, into the last one's buffer.
TEST(ConcatIntoSlices, DenseBlockPrefixesLiveInTheLastBuffer) {
  IrWriter w(5);
  w.input("x", "f32[1,4,4,8]");
  for (int i = 0; i < 3; ++i) {
    ohwi(w, "wn" + std::to_string(i), 8, 8 * (i + 1), 1);
    ohwi(w, "wf" + std::to_string(i), 8, 8, 3);
  }
  w.node("%n0 = tessel.Conv(%x, %wn0) : f32[1,4,4,8] @\"bottleneck0\"");
  w.node("%f0 = tessel.Conv(%n0, %wf0) {pads = [1, 1, 1, 1]} : f32[1,4,4,8] @\"feat0\"");
  w.node("%c1 = Concat(%x, %f0) {axis = 3} : f32[1,4,4,16] @\"cat1\"");
  w.node("%n1 = tessel.Conv(%c1, %wn1) : f32[1,4,4,8] @\"bottleneck1\"");
  w.node("%f1 = tessel.Conv(%n1, %wf1) {pads = [1, 1, 1, 1]} : f32[1,4,4,8] @\"feat1\"");
  w.node("%c2 = Concat(%c1, %f1) {axis = 3} : f32[1,4,4,24] @\"cat2\"");
  w.node("%n2 = tessel.Conv(%c2, %wn2) : f32[1,4,4,8] @\"bottleneck2\"");
  w.node("%f2 = tessel.Conv(%n2, %wf2) {pads = [1, 1, 1, 1]} : f32[1,4,4,8] @\"feat2\"");
  w.node("%c3 = Concat(%c2, %f2) {axis = 3} : f32[1,4,4,32] @\"cat3\"");
  w.node("%y = Relu(%c3) : f32[1,4,4,32] @\"relu\"");
  const std::string before = w.text("y");
  std::string expected = replaced(before, "%f0) {axis = 3}", "%f0) {axis = 3, in_place = [0, 1]}");
  expected = replaced(expected, "%f1) {axis = 3}", "%f1) {axis = 3, in_place = [1, 1]}");
  expected = replaced(expected, "%f2) {axis = 3}", "%f2) {axis = 3, in_place = [1, 1]}");
  testing::expect_pass_result("concat-into-slices", before, expected);

  const ir::Graph g = ir::parse_graph(expected);
  const ir::ValueId last = g.find_value("c3");
  for (const auto& [name, offset] :
       {std::pair{"c1", 0}, {"c2", 0}, {"f0", 8}, {"f1", 16}, {"f2", 24}}) {
    SCOPED_TRACE(name);
    const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, g.find_value(name));
    ASSERT_TRUE(slice);
    EXPECT_EQ(slice->base, last);
    EXPECT_EQ(slice->channel_offset, offset);
    EXPECT_EQ(slice->channels, 32);
  }
  EXPECT_FALSE(passes::channel_slice_of(g, g.find_value("x")));
  const passes::MemoryPlan plan = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, plan), "");
  // The last buffer is live from the first write into it (feat0's store) to its last reader.
  const passes::BufferPlan& base = plan.buffers[static_cast<size_t>(last)];
  EXPECT_EQ(plan.buffers[static_cast<size_t>(g.find_value("c1"))].alias_of, last);
  EXPECT_GE(base.bytes, 1 * 4 * 4 * 32 * 4);
}

// A QDQ DenseNet's block after fold-qdq and nest-prefix-concats: each int8 Concat is read, as
// well as by the next, by the depthwise conv that requantizes it (group = its channels), which
// reads it where it lies: the inner Concat is stored in place in the outer one. A grouped conv
// of two channels per group cannot: the inner Concat keeps a buffer of its own (its features
// are still stored into it), and the outer one copies it.
TEST(ConcatIntoSlices, DepthwiseReaderOfAPrefixKeepsItInPlace) {
  auto block = [](int64_t group) {
    IrWriter w(6);
    w.input("x", "f32[1,4,4,8]");
    ohwi(w, "wf0", 8, 8, 3);
    ohwi(w, "wf1", 8, 8, 3);
    ohwi(w, "wd", 16, 16 / group, 1);
    w.node("%f0 = tessel.Conv(%x, %wf0) {pads = [1, 1, 1, 1]} : f32[1,4,4,8] @\"feat0\"");
    w.node("%f1 = tessel.Conv(%x, %wf1) {pads = [1, 1, 1, 1]} : f32[1,4,4,8] @\"feat1\"");
    w.node("%c1 = Concat(%f0, %f1) {axis = 3} : f32[1,4,4,16] @\"cat1\"");
    w.node("%d = tessel.Conv(%c1, %wd) {group = " + std::to_string(group) + "} : f32[1,4,4,16] @\"requantize\"");
    w.node("%c2 = Concat(%c1, %x) {axis = 3} : f32[1,4,4,24] @\"cat2\"");
    w.node("%y = Relu(%c2) : f32[1,4,4,24] @\"relu\"");
    return w.text(std::vector<std::string>{"d", "y"});
  };
  const std::string depthwise = block(16);
  std::string expected = replaced(depthwise, "%f1) {axis = 3}", "%f1) {axis = 3, in_place = [1, 1]}");
  expected = replaced(expected, "%x) {axis = 3}", "%x) {axis = 3, in_place = [1, 0]}");
  testing::expect_pass_result("concat-into-slices", depthwise, expected);
  const ir::Graph g = ir::parse_graph(expected);
  const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, g.find_value("c1"));
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->channels, 24);
  EXPECT_EQ(passes::verify_plan(g, passes::plan_memory(g)), "");

  const std::string grouped = block(8);
  testing::expect_pass_result("concat-into-slices", grouped,
                              replaced(grouped, "%f1) {axis = 3}", "%f1) {axis = 3, in_place = [1, 1]}"));
}

}  // namespace
}  // namespace tessel
