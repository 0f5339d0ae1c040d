// Building blocks of CNNs beyond the ResNet/VGG/MobileNet set, as textual-IR graphs with random
// weights, the way torch.onnx.export writes them: shared by the compiler tests (every node has a
// GPU path, the layout stays NHWC) and the GPU engine tests (numbers against the CPU).
#pragma once

#include <string>

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

}  // namespace tessel::testing
