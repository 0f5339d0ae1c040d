// fuse (fuse.cc) at the graph's edges: the Transpose / Cast after a contraction become its
// store (store = "nchw", out_dtype), the Cast / Transpose / channel Pad before a stem conv its
// input_layout = "nchw". Before / Expected IR; the CPU reference computes identical bits
// before and after (tolerances 0). Then the GPU pipeline on an SR-like and a ResNet-like model.
#include <gtest/gtest.h>

#include <map>

#include "ir/equal.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"

namespace tessel {
namespace {

void expect_exact_fuse(const std::string& before, const std::string& expected) {
  testing::expect_pass_result("fuse", before, expected, 0.0, 0.0);
}

void expect_unchanged(const std::string& before) { expect_exact_fuse(before, before); }

// `text` reading %c2 in place of %c.
std::string with_c2(std::string text) {
  for (size_t at; (at = text.find("(%c)")) != std::string::npos;) text.replace(at, 4, "(%c2)");
  return text;
}

// An fp16 1x1 conv over NHWC [1,2,3,2] with an fp32 bias; `tail` reads its output %c.
std::string f16_conv(const std::string& conv_attrs, const std::string& conv_type,
                     const std::string& tail, const std::string& out = "%y") {
  return R"(graph @g opset 17 {
  input %x : f16[1,2,3,2]
  const %w : f16[4,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0]
  const %b : f32[4] = [0.5, -0.5, 0.125, 1.0]
  %c = tessel.Conv(%x, %w, %b)" +
         std::string(")") + conv_attrs + " : " + conv_type + " @\"conv\"\n" + tail + "  output " + out + "\n}";
}

TEST(FuseEdgeStore, TransposeThenCastBecomeTheStore) {
  expect_exact_fuse(f16_conv("", "f16[1,2,3,4]", R"(  %t = Transpose(%c) {perm = [0, 3, 1, 2]} : f16[1,4,2,3] @"to_nchw"
  %y = Cast(%t) {to = 1} : f32[1,4,2,3] @"to_f32"
)"),
                    f16_conv(R"( {out_dtype = "f32", store = "nchw"})", "f32[1,4,2,3]", "", "%c"));
}

TEST(FuseEdgeStore, CastThenTransposeBecomeTheStore) {
  expect_exact_fuse(f16_conv("", "f16[1,2,3,4]", R"(  %f = Cast(%c) {to = 1} : f32[1,2,3,4] @"to_f32"
  %y = Transpose(%f) {perm = [0, 3, 1, 2]} : f32[1,4,2,3] @"to_nchw"
)"),
                    f16_conv(R"( {out_dtype = "f32", store = "nchw"})", "f32[1,4,2,3]", "", "%c"));
}

// The epilogue comes first; the edge ends the chain (a Relu after the Cast stays).
TEST(FuseEdgeStore, AfterTheEpilogue) {
  expect_exact_fuse(
      f16_conv("", "f16[1,2,3,4]", R"(  %r = Relu(%c) : f16[1,2,3,4] @"relu"
  %t = Transpose(%r) {perm = [0, 3, 1, 2]} : f16[1,4,2,3] @"to_nchw"
  %f = Cast(%t) {to = 1} : f32[1,4,2,3] @"to_f32"
  %y = Relu(%f) : f32[1,4,2,3] @"relu2"
)"),
      f16_conv(
          R"( {epilogue = ["relu"], epilogue_alpha = [0.0], epilogue_beta = [0.0], out_dtype = "f32", store = "nchw"})",
          "f32[1,4,2,3]", "  %y = Relu(%c) : f32[1,4,2,3] @\"relu2\"\n"));
}

// The subpixel tail of an SR net ending the graph: depth_to_space, then NCHW.
TEST(FuseEdgeStore, DepthToSpaceThenTranspose) {
  expect_exact_fuse(f16_conv("", "f16[1,2,3,4]", R"(  %d = tessel.DepthToSpace(%c) {blocksize = 2, mode = "CRD"} : f16[1,4,6,1] @"d2s"
  %y = Transpose(%d) {perm = [0, 3, 1, 2]} : f16[1,1,4,6] @"to_nchw"
)"),
                    f16_conv(R"( {block = 2, mode = "CRD", store = "depth_to_space_nchw"})",
                             "f16[1,1,4,6]", "", "%c"));
}

// A residual is given NHWC in the conv's dtype, the GPU kernel reads it at the stored position
// in the stored dtype: with one, the edge stays. So do a grouped conv's (the window kernel
// stores NHWC in its input's dtype), other permutations, and a Cast whose output is also read
// elsewhere.
TEST(FuseEdgeStore, WhatStays) {
  const std::string residual = R"(graph @g opset 17 {
  input %x : f32[1,2,3,2]
  input %r : f32[1,2,3,2]
  const %w : f32[2,1,1,2] = [1.0, -1.0, 0.5, 2.0]
  %y = tessel.Conv(%x, %w, _, %r) {epilogue = ["add_residual"], epilogue_alpha = [0.0], epilogue_beta = [0.0]} : f32[1,2,3,2] @"conv"
  %t = Transpose(%y) {perm = [0, 3, 1, 2]} : f32[1,2,2,3] @"to_nchw"
  output %t
})";
  expect_unchanged(residual);
  expect_unchanged(R"(graph @g opset 17 {
  input %x : f32[1,2,3,4]
  const %w : f32[4,1,1,2] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0]
  %c = tessel.Conv(%x, %w) {group = 2} : f32[1,2,3,4] @"conv"
  %t = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,4,2,3] @"to_nchw"
  output %t
})");
  expect_unchanged(f16_conv("", "f16[1,2,3,4]",
                            "  %y = Transpose(%c) {perm = [0, 3, 2, 1]} : f16[1,4,3,2] @\"t\"\n"));
  // The Cast is the conv's only reader: it folds; its output has two, so the Transpose stays.
  const std::string shared = R"(  %y = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,4,2,3] @"to_nchw"
  %z = Relu(%c) : f32[1,2,3,4] @"other"
)";
  expect_exact_fuse(
      f16_conv("", "f16[1,2,3,4]", "  %c2 = Cast(%c) {to = 1} : f32[1,2,3,4] @\"to_f32\"\n" + with_c2(shared),
               "%y\n  output %z"),
      f16_conv(R"( {out_dtype = "f32"})", "f32[1,2,3,4]", shared, "%y\n  output %z"));
}

// A classifier head: the fp16 Gemm stores the fp32 graph output.
TEST(FuseEdgeStore, GemmTakesTheCast) {
  const char* head = R"(graph @g opset 17 {
  input %a : f16[2,3]
  const %w : f16[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  const %b : f32[2] = [0.5, -0.5]
)";
  expect_exact_fuse(std::string(head) + R"(  %c = tessel.Gemm(%a, %w, %b) : f16[2,2] @"fc"
  %y = Cast(%c) {to = 1} : f32[2,2] @"to_f32"
  output %y
})",
                    std::string(head) + R"(  %y = tessel.Gemm(%a, %w, %b) {out_dtype = "f32"} : f32[2,2] @"fc"
  output %y
})");
}

// ---- Stems ----------------------------------------------------------------------------------

// The fp16 stem as convert-layout and choose-precision leave it: Cast, Transpose to NHWC, the
// RGB channels padded to 8 (weights too, with zeros), then a 3x3 conv. `conv_attrs` go on the
// conv; `channels` is the unpadded count.
std::string stem(const std::string& conv_attrs, int channels = 3) {
  const int padded = (channels + 7) / 8 * 8;
  std::string w;
  for (int i = 0; i < 2 * 9 * padded; ++i) {
    const bool real = i % padded < channels;
    w += std::string(w.empty() ? "" : ", ") + (real ? std::to_string((i * 7 % 11 - 5) / 4.0) : "0.0");
  }
  const std::string c = std::to_string(channels), p = std::to_string(padded);
  return R"(graph @g opset 17 {
  input %x : f32[1,)" + c + R"(,5,6]
  const %w : f16[2,3,3,)" + p + "] = [" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, )" + std::to_string(padded - channels) + R"(]
  %h = Cast(%x) {to = 10} : f16[1,)" + c + R"(,5,6] @"x.to_f16"
  %t = Transpose(%h) {perm = [0, 2, 3, 1]} : f16[1,5,6,)" + c + R"(] @"x.to_nhwc"
  %p = Pad(%t, %pads) : f16[1,5,6,)" + p + R"(] @"x.align_channels"
  %y = tessel.Conv(%p, %w, %b) {pads = [1, 1, 1, 1])" + conv_attrs + R"(} : f16[1,5,6,2] @"head"
  output %y
})";
}

// stem()'s weights [2, 3, 3, 8] cut back to their `channels` real ones (3: RGB), as the stem
// rewrites leave them.
std::string unpadded_weights(int channels) {
  std::string w;
  for (int i = 0; i < 2 * 9 * 8; ++i)
    if (i % 8 < channels)
      w += std::string(w.empty() ? "" : ", ") + std::to_string((i * 7 % 11 - 5) / 4.0);
  return w;
}
std::string unpadded_rgb_weights() { return unpadded_weights(3); }

// Read NCHW fp32 straight from the graph input; the weights lose their 5 zero channels.
TEST(FuseEdgeStem, CastTransposePadBecomeTheInputLayout) {
  const std::string w = unpadded_rgb_weights();
  expect_exact_fuse(stem(""), R"(graph @g opset 17 {
  input %x : f32[1,3,5,6]
  const %w : f16[2,3,3,3] = [)" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Conv(%x, %w, %b) {input_layout = "nchw", pads = [1, 1, 1, 1]} : f16[1,5,6,2] @"head"
  output %y
})");
}

// fp32 pipelines have no Cast; 8 channels need no Pad.
TEST(FuseEdgeStem, WithoutCastOrPad) {
  const char* before = R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,1,1,8] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0]
  %t = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,8] @"x.to_nhwc"
  %y = tessel.Conv(%t, %w) : f32[1,2,2,1] @"head"
  output %y
})";
  expect_exact_fuse(before, R"(graph @g opset 17 {
  input %x : f32[1,8,2,2]
  const %w : f32[1,1,1,8] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25, 1.5, -2.0]
  %y = tessel.Conv(%x, %w) {input_layout = "nchw"} : f32[1,2,2,1] @"head"
  output %y
})");
}

// Strided and dilated stems (ResNet's 7x7/2, MobileNet's 3x3/2) read NCHW too, the halo
// kernel staging their input by stride phase, where their output has 2^17 pixels or more (a
// batch of 8 images of 256x256 at stride 2); fewer keep their layout nodes (WhatStays).
std::string large_stem(const std::string& conv_attrs, const std::string& out_type) {
  std::string t = stem(conv_attrs);
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at; (at = t.find(from)) != std::string::npos;) t.replace(at, from.size(), to);
  };
  replace_all("f16[1,5,6,2]", out_type);
  replace_all("[1,3,5,6]", "[8,3,256,256]");
  replace_all("[1,5,6,", "[8,256,256,");
  return t;
}

TEST(FuseEdgeStem, StridedAndDilatedStemsFold) {
  const std::string w = unpadded_rgb_weights();
  for (const bool strided : {true, false}) {
    const std::string out_type = strided ? "f16[8,128,128,2]" : "f16[8,254,254,2]";
    const std::string conv_attrs = strided
        ? R"(input_layout = "nchw", pads = [1, 1, 1, 1], strides = [2, 2])"
        : R"(dilations = [2, 2], input_layout = "nchw", pads = [1, 1, 1, 1])";
    expect_exact_fuse(large_stem(strided ? ", strides = [2, 2]" : ", dilations = [2, 2]", out_type),
                      R"(graph @g opset 17 {
  input %x : f32[8,3,256,256]
  const %w : f16[2,3,3,3] = [)" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Conv(%x, %w, %b) {)" + conv_attrs + R"(} : )" + out_type + R"( @"head"
  output %y
})");
  }
}

// Stems of 17 input channels (their NCHW gather would be slow) or more output channels than the
// halo kernel's widest tile (no other Tensor Core kernel reads an fp32 NCHW input), strided or
// dilated stems of fewer than 2^17 output pixels (the halo kernel's few tiles leave SMs idle)
// or of fp32 weights (an fp32 engine's SIMT conv, not the halo kernel),
// a 1x1 conv of one channel (unpadded, nothing left to contract), and an edge some other node
// also reads keep their layout nodes.
TEST(FuseEdgeStem, WhatStays) {
  for (const char* attrs : {", strides = [2, 2]", ", dilations = [2, 2]"}) {
    std::string before = stem(attrs);
    const std::string out_type = std::string(attrs).find("strides") != std::string::npos
                                     ? "f16[1,3,3,2]"
                                     : "f16[1,3,4,2]";
    before.replace(before.find("f16[1,5,6,2]"), 12, out_type);
    expect_unchanged(before);
  }
  {
    // A large strided stem of an fp32 pipeline: no Cast, f32 weights.
    std::string fp32 = large_stem(", strides = [2, 2]", "f16[8,128,128,2]");
    const size_t cast = fp32.find("  %h = Cast(");
    fp32.erase(cast, fp32.find('\n', cast) + 1 - cast);
    for (size_t at; (at = fp32.find("f16[")) != std::string::npos;) fp32.replace(at, 4, "f32[");
    for (size_t at; (at = fp32.find("Transpose(%h)")) != std::string::npos;) fp32.replace(at, 13, "Transpose(%x)");
    expect_unchanged(fp32);
  }
  expect_unchanged(stem("", 17));
  {
    // 129 output channels.
    std::string wide = stem("");
    std::string w;
    for (int i = 0; i < 129 * 9 * 8; ++i) w += std::string(w.empty() ? "" : ", ") + (i % 8 < 3 ? "0.5" : "0.0");
    const size_t at = wide.find("const %w : f16[2,3,3,8] = [");
    wide.replace(at, wide.find("]\n", at + 26) - at + 1, "const %w : f16[129,3,3,8] = [" + w + "]");
    wide.replace(wide.find("const %b : f32[2] = [0.5, -0.5]"), 31, "const %b : f32[129] = [" + [] {
      std::string b;
      for (int i = 0; i < 129; ++i) b += std::string(b.empty() ? "" : ", ") + "0.25";
      return b;
    }() + "]");
    wide.replace(wide.find("f16[1,5,6,2]"), 12, "f16[1,5,6,129]");
    expect_unchanged(wide);
  }
  expect_unchanged(R"(graph @g opset 17 {
  input %x : f32[1,1,2,2]
  const %w : f32[2,1,1,8] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 7]
  %t = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[1,2,2,1] @"x.to_nhwc"
  %p = Pad(%t, %pads) : f32[1,2,2,8] @"x.align_channels"
  %y = tessel.Conv(%p, %w) : f32[1,2,2,2] @"head"
  output %y
})");
  std::string shared = stem("");
  shared.replace(shared.find("  output %y"), 11, "  output %y\n  output %t");
  expect_unchanged(shared);
}

// A QDQ model's quantized input (QuantizeLinear -> DequantizeLinear -> layout -> stem): the
// stem reads the int8 X itself and the DequantizeLinear's scale becomes S [Co], applied to the
// accumulator before the bias. A power-of-two scale keeps the reference's bits (s * q exact in
// f16). The DequantizeLinear stays where its zero point is not 0, or another node reads it.
std::string quantized_stem(const std::string& zero_point, const std::string& outputs = "%y") {
  std::string t = stem("");
  auto replace = [&](const std::string& from, const std::string& to) { t.replace(t.find(from), from.size(), to); };
  replace("  %h = Cast(%x) {to = 10} : f16[1,3,5,6] @\"x.to_f16\"\n",
          "  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,5,6] @\"x.q\"\n"
          "  %h = DequantizeLinear(%q, %sh, " + zero_point + ") : f16[1,3,5,6] @\"x.dq\"\n");
  replace("  const %pads", "  const %s : f32[] = [0.03125]\n  const %sh : f16[] = [0.03125]\n"
                          "  const %z : i8[] = [0]\n  const %z3 : i8[] = [3]\n  const %pads");
  replace("  output %y", "  output " + outputs);
  return t;
}

TEST(FuseEdgeStem, AQuantizedInputsDequantizeLinearBecomesTheScale) {
  const std::string w = unpadded_rgb_weights();
  expect_exact_fuse(quantized_stem("%z"), R"(graph @g opset 17 {
  input %x : f32[1,3,5,6]
  const %b : f32[2] = [0.5, -0.5]
  const %s : f32[] = [0.03125]
  const %z : i8[] = [0]
  const %w.unpadded : f16[2,3,3,3] = [)" + w + R"(]
  const %h.dequant_scale : f32[2] = [0.03125, 0.03125]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,5,6] @"x.q"
  %y = tessel.Conv(%q, %w.unpadded, %b, _, %h.dequant_scale) {input_layout = "nchw", pads = [1, 1, 1, 1]} : f16[1,5,6,2] @"head"
  output %y
})");
  for (const auto& [zero_point, outputs] : {std::pair<std::string, std::string>{"%z3", "%y"}, {"%z", "%y\n  output %h"}}) {
    const std::string kept = R"(graph @g opset 17 {
  input %x : f32[1,3,5,6]
  const %b : f32[2] = [0.5, -0.5]
  const %s : f32[] = [0.03125]
  const %sh : f16[] = [0.03125]
  const %z : i8[] = [0]
)" + std::string(zero_point == "%z3" ? "  const %z3 : i8[] = [3]\n" : "") + R"(  const %w.unpadded : f16[2,3,3,3] = [)" + w + R"(]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,5,6] @"x.q"
  %h = DequantizeLinear(%q, %sh, )" + zero_point + R"() : f16[1,3,5,6] @"x.dq"
  %y = tessel.Conv(%h, %w.unpadded, %b) {input_layout = "nchw", pads = [1, 1, 1, 1]} : f16[1,5,6,2] @"head"
  output )" + outputs + R"(
})";
    expect_exact_fuse(quantized_stem(zero_point, outputs), kept);
  }
}

// A strided stem whose input is NHWC already (a model with an NHWC input, as tf2onnx writes
// them: convert-layout's Transposes cancel) keeps only convert-layout's channel Pad before it.
// Where the halo kernel takes it (at most 4 channels, an even horizontal stride, dilation 1,
// enough pixels, f16 or bf16), it stages the pixels itself: the Pad goes, the weights are cut
// back to the real channels, and the conv stays NHWC.
std::string nhwc_stem(int channels, const std::string& strides, const std::string& out_type,
                      const std::string& image = "[8,256,256,") {
  std::string w;
  for (int i = 0; i < 2 * 9 * 8; ++i)
    w += std::string(w.empty() ? "" : ", ") + (i % 8 < channels ? std::to_string((i * 7 % 11 - 5) / 4.0) : "0.0");
  const std::string c = std::to_string(channels);
  return R"(graph @g opset 17 {
  input %x : f16)" + image + c + R"(]
  const %w : f16[2,3,3,8] = [)" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, )" + std::to_string(8 - channels) + R"(]
  %p = Pad(%x, %pads) : f16)" + image + R"(8] @"x.align_channels"
  %y = tessel.Conv(%p, %w, %b) {pads = [1, 1, 1, 1], strides = )" + strides + R"(} : )" + out_type + R"( @"head"
  output %y
})";
}

TEST(FuseEdgeStem, NhwcStemsOfFewChannelsLoseTheirPad) {
  const std::string w = unpadded_rgb_weights();
  expect_exact_fuse(nhwc_stem(3, "[2, 2]", "f16[8,128,128,2]"), R"(graph @g opset 17 {
  input %x : f16[8,256,256,3]
  const %w : f16[2,3,3,3] = [)" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2]} : f16[8,128,128,2] @"head"
  output %y
})");
  // The pixels are counted before the store map: a stem that stores NCHW itself (a one-conv
  // model's output, fused) has 8 x 128 x 128 of them here, not 8 x 2 x 128.
  std::string nchw = nhwc_stem(3, "[2, 2]", "f16[8,2,128,128]");
  nchw.replace(nchw.find("strides = [2, 2]}"), 17, "store = \"nchw\", strides = [2, 2]}");
  expect_exact_fuse(nchw, R"(graph @g opset 17 {
  input %x : f16[8,256,256,3]
  const %w : f16[2,3,3,3] = [)" + w + R"(]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], store = "nchw", strides = [2, 2]} : f16[8,2,128,128] @"head"
  output %y
})");
  // A grayscale one: its one channel takes a 4-channel slot of tap pairs as RGB's three do.
  expect_exact_fuse(nhwc_stem(1, "[2, 2]", "f16[8,128,128,2]"), R"(graph @g opset 17 {
  input %x : f16[8,256,256,1]
  const %w : f16[2,3,3,1] = [)" + unpadded_weights(1) + R"(]
  const %b : f32[2] = [0.5, -0.5]
  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2]} : f16[8,128,128,2] @"head"
  output %y
})");
  // No tap pairs: 5 channels, or an odd horizontal stride; too few pixels for the halo kernel.
  expect_unchanged(nhwc_stem(5, "[2, 2]", "f16[8,128,128,2]"));
  expect_unchanged(nhwc_stem(1, "[2, 1]", "f16[8,128,256,2]"));
  expect_unchanged(nhwc_stem(3, "[2, 1]", "f16[8,128,256,2]"));
  expect_unchanged(nhwc_stem(3, "[2, 2]", "f16[1,3,3,2]", "[1,5,6,"));
}

// ---- The GPU pipeline -----------------------------------------------------------------------

std::map<std::string, int> op_counts(const ir::Graph& g) {
  std::map<std::string, int> r;
  for (const ir::Node& n : g.nodes) ++r[n.op];
  return r;
}

// The super-resolution net's shape in miniature (RGB head conv, residual body, depth_to_space
// tail, RGB tail conv): after the fp16 pipeline no Transpose, Cast or Pad is left -- the head
// reads the fp32 NCHW input, the tail stores the fp32 NCHW output.
TEST(FuseEdgeLayout, SuperResolutionLikeHasNoLayoutNodes) {
  testing::IrWriter w(3);
  w.input("x", "f32[1,3,4,6]");
  testing::conv_weight(w, "head_w", 8, 3, 3);
  testing::conv_weight(w, "body_w", 8, 8, 3);
  testing::conv_weight(w, "up_w", 32, 8, 3);
  testing::conv_weight(w, "tail_w", 3, 8, 3);
  w.node(R"(%h = Conv(%x, %head_w) {pads = [1, 1, 1, 1]} : f32[1,8,4,6] @"head")");
  w.node(R"(%c = Conv(%h, %body_w) {pads = [1, 1, 1, 1]} : f32[1,8,4,6] @"body")");
  w.node(R"(%s = Add(%c, %h) : f32[1,8,4,6] @"add")");
  w.node(R"(%u = Conv(%s, %up_w) {pads = [1, 1, 1, 1]} : f32[1,32,4,6] @"up")");
  w.node(R"(%d = DepthToSpace(%u) {blocksize = 2, mode = "CRD"} : f32[1,8,8,12] @"d2s")");
  w.node(R"(%y = Conv(%d, %tail_w) {pads = [1, 1, 1, 1]} : f32[1,3,8,12] @"tail")");
  const ir::Graph in = ir::parse_graph(w.text("y"));
  const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_EQ(op_counts(out), (std::map<std::string, int>{{"tessel.Conv", 4}}));
  const ir::Node& head = out.nodes.front();
  EXPECT_EQ(head.name, "head");
  EXPECT_EQ(head.inputs[0], out.inputs[0]);
  EXPECT_EQ(head.get_string("input_layout", ""), "nchw");
  EXPECT_EQ(out.type(head.inputs[1]).str(), "f16[8,3,3,3]");
  const ir::Node& tail = out.nodes.back();
  EXPECT_EQ(tail.name, "tail");
  EXPECT_EQ(tail.outputs[0], out.outputs[0]);
  EXPECT_EQ(tail.get_string("store", ""), "nchw");
  EXPECT_EQ(out.type(out.outputs[0]).str(), "f32[1,3,8,12]");
  testing::expect_same_numerics(in, out, 2e-2, 2e-2);
  // Idempotent: the folded edges are not taken apart and folded again.
  const ir::Graph twice = passes::run_passes(out, passes::gpu_pipeline({}));
  EXPECT_EQ(ir::structural_diff(twice, out), "") << ir::print_graph(twice);
}

// ResNet's stem (7x7, stride 2) at batch 1 of a small image keeps its Transpose and Pad (too
// few output pixels to fill the GPU from NCHW); the fp16 classifier stores fp32.
TEST(FuseEdgeLayout, SmallResNetStemKeepsItsTranspose) {
  testing::IrWriter w(5);
  w.input("x", "f32[1,3,16,16]");
  testing::conv_weight(w, "stem_w", 8, 3, 7);
  w.constant("fc_w", {4, 8}, -0.8, 0.8);
  w.node(R"(%c = Conv(%x, %stem_w) {pads = [3, 3, 3, 3], strides = [2, 2]} : f32[1,8,8,8] @"stem")");
  w.node(R"(%r = Relu(%c) : f32[1,8,8,8] @"relu")");
  w.node(R"(%g = GlobalAveragePool(%r) : f32[1,8,1,1] @"pool")");
  w.node(R"(%f = Flatten(%g) {axis = 1} : f32[1,8] @"flatten")");
  w.node(R"(%y = Gemm(%f, %fc_w) {transB = 1} : f32[1,4] @"fc")");
  const ir::Graph in = ir::parse_graph(w.text("y"));
  const ir::Graph out = passes::run_passes(in, passes::gpu_pipeline({}));
  EXPECT_EQ(op_counts(out), (std::map<std::string, int>{{"Cast", 1},
                                                        {"Flatten", 1},
                                                        {"Pad", 1},
                                                        {"Transpose", 1},
                                                        {"tessel.Conv", 1},
                                                        {"tessel.Gemm", 1},
                                                        {"tessel.GlobalAveragePool", 1}}));
  EXPECT_EQ(out.nodes.back().get_string("out_dtype", ""), "f32");
  testing::expect_same_numerics(in, out, 2e-2, 2e-2);
}

}  // namespace
}  // namespace tessel
