// Building blocks of CNNs beyond the ResNet/VGG/MobileNet set, as textual-IR graphs with random
// weights, the way torch.onnx.export writes them: shared by the compiler tests (every node has a
// GPU path, the layout stays NHWC) and the GPU engine tests (numbers against the CPU).
#pragma once

#include <string>
#include <vector>

#include "ir/ir_writer.h"

namespace tessel::testing {

// ConvNeXt's block (torchvision CNBlock, channels C): depthwise 7x7, permute to channels-last,
// LayerNorm over C, Linear C -> 4C, GELU (erf), Linear 4C -> C, permute back, layer scale
// ([C, 1, 1], as torchvision applies it to the channels-first result), residual add. With
// `scale_channels_last`, the layer scale ([C]) comes before the permute back instead.
inline ir::Graph convnext_block(int64_t n = 1, int64_t c = 16, int64_t hw = 7,
                                bool scale_channels_last = false) {
  IrWriter w(11);
  const std::string nchw = "f32[" + std::to_string(n) + "," + std::to_string(c) + "," +
                           std::to_string(hw) + "," + std::to_string(hw) + "]";
  const std::string nhwc = "f32[" + std::to_string(n) + "," + std::to_string(hw) + "," +
                           std::to_string(hw) + "," + std::to_string(c) + "]";
  const std::string wide = "f32[" + std::to_string(n) + "," + std::to_string(hw) + "," +
                           std::to_string(hw) + "," + std::to_string(4 * c) + "]";
  w.input("x", nchw);
  conv_weight(w, "wd", c, 1, 7);
  w.constant("bd", {c}, -0.1, 0.1);
  w.constant("ln_s", {c}, 0.5, 1.5);
  w.constant("ln_b", {c}, -0.2, 0.2);
  w.constant("w1", {c, 4 * c}, -0.25, 0.25);
  w.constant("b1", {4 * c}, -0.1, 0.1);
  w.constant("w2", {4 * c, c}, -0.15, 0.15);
  w.constant("b2", {c}, -0.1, 0.1);
  if (scale_channels_last) w.constant("gamma", {c}, 0.5, 1.0);
  else w.constant("gamma", {c, 1, 1}, 0.5, 1.0);
  w.node("%d = Conv(%x, %wd, %bd) {group = " + std::to_string(c) +
         ", pads = [3, 3, 3, 3]} : " + nchw + " @\"dwconv\"");
  w.node("%p = Transpose(%d) {perm = [0, 2, 3, 1]} : " + nhwc + " @\"permute\"");
  w.node("%l = LayerNormalization(%p, %ln_s, %ln_b) {axis = -1, epsilon = 1e-06} : " + nhwc +
         " @\"norm\"");
  w.node("%m1 = MatMul(%l, %w1) : " + wide + " @\"pwconv1\"");
  w.node("%a1 = Add(%m1, %b1) : " + wide + " @\"pwconv1.bias\"");
  w.node("%g = Gelu(%a1) : " + wide + " @\"gelu\"");
  w.node("%m2 = MatMul(%g, %w2) : " + nhwc + " @\"pwconv2\"");
  w.node("%a2 = Add(%m2, %b2) : " + nhwc + " @\"pwconv2.bias\"");
  if (scale_channels_last) {
    w.node("%s = Mul(%a2, %gamma) : " + nhwc + " @\"layer_scale\"");
    w.node("%q = Transpose(%s) {perm = [0, 3, 1, 2]} : " + nchw + " @\"permute_back\"");
  } else {
    w.node("%t = Transpose(%a2) {perm = [0, 3, 1, 2]} : " + nchw + " @\"permute_back\"");
    w.node("%q = Mul(%gamma, %t) : " + nchw + " @\"layer_scale\"");
  }
  w.node("%y = Add(%q, %x) : " + nchw + " @\"residual\"");
  return w.graph("y");
}

// DenseNet's dense layer pair: two convs concatenated, then the pre-activation batch norm of
// the next layer (which follows a Concat and cannot fold), ReLU, 1x1 conv.
inline ir::Graph dense_block(int64_t n = 1) {
  IrWriter w(12);
  const std::string ns = std::to_string(n);
  w.input("x", "f32[" + ns + ",16,8,8]");
  conv_weight(w, "wa", 16, 16, 3);
  conv_weight(w, "wb", 16, 16, 3);
  conv_weight(w, "wc", 24, 32, 1);
  batch_norm_params(w, "bn", 32);
  w.node("%a = Conv(%x, %wa) {pads = [1, 1, 1, 1]} : f32[" + ns + ",16,8,8] @\"conv_a\"");
  w.node("%b = Conv(%x, %wb) {pads = [1, 1, 1, 1]} : f32[" + ns + ",16,8,8] @\"conv_b\"");
  w.node("%c = Concat(%a, %b) {axis = 1} : f32[" + ns + ",32,8,8] @\"cat\"");
  w.node(bn("n", "c", "bn", "f32[" + ns + ",32,8,8]"));
  w.node("%r = Relu(%n) : f32[" + ns + ",32,8,8] @\"relu\"");
  w.node("%y = Conv(%r, %wc) : f32[" + ns + ",24,8,8] @\"conv_c\"");
  return w.graph("y");
}

// A DenseNet dense block as torchvision writes it: a stem conv and a max pool give the block
// input b; layer i concatenates b and every feature before it (torch.cat of the list), then
// BN + ReLU (pre-activation, unfoldable), 1x1 conv to 4*growth, BN + ReLU, padded 3x3 conv to
// `growth` channels: feature f_i. The block ends with the Concat of all and a last BN + ReLU.
// Without `pre_activation`, the 1x1 convs read the Concats directly (no BN + ReLU between).
inline ir::Graph dense_block_chain(int64_t n = 2, int64_t c0 = 16, int64_t growth = 8,
                                   int layers = 3, int64_t hw = 6, bool pre_activation = true) {
  IrWriter w(17);
  auto type = [&](int64_t c) {
    return "f32[" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(hw) + "," +
           std::to_string(hw) + "]";
  };
  w.input("x", type(8));
  conv_weight(w, "w_stem", c0, 8, 3);
  w.node("%s = Conv(%x, %w_stem) {pads = [1, 1, 1, 1]} : " + type(c0) + " @\"conv0\"");
  w.node("%b = MaxPool(%s) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]} : " +
         type(c0) + " @\"pool0\"");
  std::vector<std::string> feats = {"b"};
  int64_t c = c0;
  for (int i = 0; i <= layers; ++i) {
    const std::string l = std::to_string(i);
    std::string in = "b";
    if (i > 0) {
      std::string list;
      for (const std::string& f : feats) list += (list.empty() ? "%" : ", %") + f;
      w.node("%cat" + l + " = Concat(" + list + ") {axis = 1} : " + type(c) + " @\"cat" + l + "\"");
      in = "cat" + l;
    }
    batch_norm_params(w, "bn1_" + l, c);
    w.node(bn("n1_" + l, in, "bn1_" + l, type(c)));
    w.node("%r1_" + l + " = Relu(%n1_" + l + ") : " + type(c) + " @\"relu1_" + l + "\"");
    if (i == layers) return w.graph("r1_" + l);  // norm5 + relu after the block
    const std::string x1 = pre_activation ? "r1_" + l : in;
    conv_weight(w, "w1_" + l, 4 * growth, c, 1);
    conv_weight(w, "w2_" + l, growth, 4 * growth, 3);
    batch_norm_params(w, "bn2_" + l, 4 * growth);
    w.node("%c1_" + l + " = Conv(%" + x1 + ", %w1_" + l + ") : " + type(4 * growth) + " @\"conv1_" + l + "\"");
    w.node(bn("n2_" + l, "c1_" + l, "bn2_" + l, type(4 * growth)));
    w.node("%r2_" + l + " = Relu(%n2_" + l + ") : " + type(4 * growth) + " @\"relu2_" + l + "\"");
    w.node("%f" + l + " = Conv(%r2_" + l + ", %w2_" + l + ") {pads = [1, 1, 1, 1]} : " + type(growth) +
           " @\"conv2_" + l + "\"");
    feats.push_back("f" + l);
    c += growth;
  }
  return w.graph("b");  // not reached
}

// A pre-activation residual unit (ResNet-v2) after a stem conv and a pooling: BN + ReLU on the
// unit's input, read by a padded 3x3 conv and a strided 1x1 projection; the 3x3's output goes
// through BN + ReLU again into a second padded 3x3. c channels (c % 8 == 0 for the Tensor Core
// prologue), hw x hw pixels. (The stem keeps the unit off the graph's input edge, whose
// layout-agnostic ops convert-layout leaves in NCHW before the edge Transpose.)
inline ir::Graph preact_block(int64_t n = 2, int64_t c = 32, int64_t hw = 10) {
  IrWriter w(13);
  const std::string ns = std::to_string(n), cs = std::to_string(c), c2 = std::to_string(2 * c);
  const std::string full = "f32[" + ns + "," + cs + "," + std::to_string(hw) + "," + std::to_string(hw) + "]";
  const std::string half = "f32[" + ns + "," + c2 + "," + std::to_string(hw / 2) + "," +
                           std::to_string(hw / 2) + "]";
  w.input("x", full);
  batch_norm_params(w, "bn1", c);
  batch_norm_params(w, "bn2", c);
  conv_weight(w, "w0", c, c, 1);
  conv_weight(w, "w1", c, c, 3);
  conv_weight(w, "w2", c, c, 3);
  conv_weight(w, "wp", 2 * c, c, 1);
  w.node("%s = Conv(%x, %w0) : " + full + " @\"stem\"");
  w.node("%u = AveragePool(%s) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]} : " +
         full + " @\"pool\"");
  w.node(bn("n1", "u", "bn1", full));
  w.node("%r1 = Relu(%n1) : " + full + " @\"relu1\"");
  w.node("%c1 = Conv(%r1, %w1) {pads = [1, 1, 1, 1]} : " + full + " @\"conv1\"");
  w.node(bn("n2", "c1", "bn2", full));  // folds into conv1 (a BN after a conv)
  w.node("%r2 = Relu(%n2) : " + full + " @\"relu2\"");
  w.node("%c2 = Conv(%r2, %w2) {pads = [1, 1, 1, 1]} : " + full + " @\"conv2\"");
  w.node("%p = Conv(%r1, %wp) {strides = [2, 2]} : " + half + " @\"proj\"");
  return w.graph(std::vector<std::string>{"c2", "p"});
}

// A QDQ model's residual block as onnxruntime's quantizer writes it, before any Q/DQ folding:
// x (NCHW f32) quantized per tensor (i8) and dequantized; two 1x1 convs over it, their int8
// weights dequantized per output channel (axis 0); conv a's output quantized per channel (u8
// zero points along axis 1), conv b's per tensor (i8); both dequantized, added, Relu,
// quantized to u8 (graph output q: NHWC codes the edge transposes back to NCHW as u8) and
// dequantized again (graph output y). As textual IR (the CLI tests write it to a file).
inline std::string qdq_residual_block_tir(int64_t n = 2, int64_t c = 16, int64_t hw = 6) {
  IrWriter w(21);
  const std::string dims = "[" + std::to_string(n) + "," + std::to_string(c) + "," +
                           std::to_string(hw) + "," + std::to_string(hw) + "]";
  auto list = [](int64_t count, auto value) {
    std::string r;
    for (int64_t i = 0; i < count; ++i) r += (i ? ", " : "") + std::to_string(value(i));
    return "[" + r + "]";
  };
  const std::string cs = "[" + std::to_string(c) + "]";
  const std::string ws = "[" + std::to_string(c) + "," + std::to_string(c) + ",1,1]";
  w.input("x", "f32" + dims);
  w.literal("const %sx : f32[] = [0.03125]");
  w.literal("const %zx : i8[] = [3]");
  w.literal("const %sb : f32[] = [0.05]");
  w.literal("const %zb : i8[] = [-2]");
  w.literal("const %so : f32[] = [0.0625]");
  w.literal("const %zo : u8[] = [5]");
  // Weight codes in [-127, 127] without zeros; per-channel weight scales; conv a's output
  // scales and u8 zero points per channel.
  for (const char* name : {"wa", "wb"})
    w.literal(std::string("const %") + name + " : i8" + ws + " = " +
              list(c * c, [step = name[1] == 'a' ? 37 : 53](int64_t i) {
                return (i * step % 127 + 1) * (i % 2 ? -1 : 1);
              }));
  w.literal("const %sw : f32" + cs + " = " + list(c, [](int64_t i) { return 0.001 + 0.0001 * i; }));
  w.literal("const %zw : i8" + cs + " = " + list(c, [](int64_t) { return 0; }));
  w.literal("const %sa : f32" + cs + " = " + list(c, [](int64_t i) { return 0.02 + 0.002 * i; }));
  w.literal("const %za : u8" + cs + " = " + list(c, [](int64_t i) { return 100 + 3 * i; }));
  const std::string f = "f32" + dims, u8 = "u8" + dims, i8 = "i8" + dims;
  w.node("%qx = QuantizeLinear(%x, %sx, %zx) : " + i8 + " @\"q_x\"");
  w.node("%dx = DequantizeLinear(%qx, %sx, %zx) : " + f + " @\"dq_x\"");
  w.node("%fwa = DequantizeLinear(%wa, %sw, %zw) {axis = 0} : f32" + ws + " @\"dq_wa\"");
  w.node("%fwb = DequantizeLinear(%wb, %sw, %zw) {axis = 0} : f32" + ws + " @\"dq_wb\"");
  w.node("%a = Conv(%dx, %fwa) {kernel_shape = [1, 1]} : " + f + " @\"conv_a\"");
  w.node("%b = Conv(%dx, %fwb) {kernel_shape = [1, 1]} : " + f + " @\"conv_b\"");
  w.node("%qa = QuantizeLinear(%a, %sa, %za) {axis = 1} : " + u8 + " @\"q_a\"");
  w.node("%da = DequantizeLinear(%qa, %sa, %za) {axis = 1} : " + f + " @\"dq_a\"");
  w.node("%qb = QuantizeLinear(%b, %sb, %zb) : " + i8 + " @\"q_b\"");
  w.node("%db = DequantizeLinear(%qb, %sb, %zb) : " + f + " @\"dq_b\"");
  w.node("%s = Add(%da, %db) : " + f + " @\"add\"");
  w.node("%r = Relu(%s) : " + f + " @\"relu\"");
  w.node("%q = QuantizeLinear(%r, %so, %zo) : " + u8 + " @\"q_out\"");
  w.node("%y = DequantizeLinear(%q, %so, %zo) : " + f + " @\"dq_out\"");
  return w.text(std::vector<std::string>{"q", "y"});
}

inline ir::Graph qdq_residual_block() {
  ir::Graph g = ir::parse_graph(qdq_residual_block_tir());
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

}  // namespace tessel::testing
