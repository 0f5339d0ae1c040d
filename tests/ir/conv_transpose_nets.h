// Small networks in textual IR for the tests of ConvTranspose's rewrite into a tessel.Conv
// (passes/convert_layout.cc, ops/conv_transpose_phases.h). Header-only: shared by the pass,
// compiler and GPU tests.
#pragma once

#include <string>

#include "ir/ir_writer.h"

namespace tessel::testing {

// A small UNet: two encoder levels (3x3 conv + ReLU, then a 2x2 max pool and a 3x3 stride-2
// conv to go down), and two decoder levels, each a ConvTranspose up, a Concat with the skip
// connection and a 3x3 conv + ReLU; a 1x1 conv head. The ConvTransposes are the usual decoder
// configs: k = 3, s = 2, p = 1, output_padding = 1 followed by batch norm and a ReLU ("up2"),
// and k = 2, s = 2 ("up1"), both with bias. Input x f32[batch, 3, 16, 16], output y f32[batch, 2, 16, 16].
inline ir::Graph unet_like(int64_t batch = 2) {
  IrWriter w(23);
  const std::string n = std::to_string(batch);
  auto type = [&](int64_t c, int64_t hw) {
    return "f32[" + n + "," + std::to_string(c) + "," + std::to_string(hw) + "," +
           std::to_string(hw) + "]";
  };
  w.input("x", type(3, 16));
  conv_weight(w, "w_e1", 16, 3, 3);
  conv_weight(w, "w_e2", 32, 16, 3);
  conv_weight(w, "w_down", 32, 32, 3);
  conv_weight(w, "w_d2", 32, 64, 3);
  conv_weight(w, "w_d1", 16, 32, 3);
  conv_weight(w, "w_head", 2, 16, 1);
  // ConvTranspose weights are [C_in, C_out, k, k].
  conv_weight(w, "w_up2", 32, 32, 3);
  w.constant("b_up2", {32}, -0.1, 0.1);
  batch_norm_params(w, "bn_up2", 32);
  conv_weight(w, "w_up1", 32, 16, 2);
  w.constant("b_up1", {16}, -0.1, 0.1);
  const std::string pad = "{pads = [1, 1, 1, 1]}";
  w.node("%e1c = Conv(%x, %w_e1) " + pad + " : " + type(16, 16) + " @\"e1\"");
  w.node("%e1 = Relu(%e1c) : " + type(16, 16) + " @\"e1_relu\"");
  w.node("%p1 = MaxPool(%e1) {kernel_shape = [2, 2], strides = [2, 2]} : " + type(16, 8) +
         " @\"pool\"");
  w.node("%e2c = Conv(%p1, %w_e2) " + pad + " : " + type(32, 8) + " @\"e2\"");
  w.node("%e2 = Relu(%e2c) : " + type(32, 8) + " @\"e2_relu\"");
  w.node("%dc = Conv(%e2, %w_down) {pads = [1, 1, 1, 1], strides = [2, 2]} : " + type(32, 4) +
         " @\"down\"");
  w.node("%d = Relu(%dc) : " + type(32, 4) + " @\"down_relu\"");
  w.node(
      "%u2c = ConvTranspose(%d, %w_up2, %b_up2) {output_padding = [1, 1], pads = [1, 1, 1, 1], "
      "strides = [2, 2]} : " +
      type(32, 8) + " @\"up2\"");
  w.node(bn("u2b", "u2c", "bn_up2", type(32, 8)));
  w.node("%u2 = Relu(%u2b) : " + type(32, 8) + " @\"up2_relu\"");
  w.node("%c2 = Concat(%u2, %e2) {axis = 1} : " + type(64, 8) + " @\"cat2\"");
  w.node("%f2c = Conv(%c2, %w_d2) " + pad + " : " + type(32, 8) + " @\"d2\"");
  w.node("%f2 = Relu(%f2c) : " + type(32, 8) + " @\"d2_relu\"");
  w.node("%u1 = ConvTranspose(%f2, %w_up1, %b_up1) {strides = [2, 2]} : " + type(16, 16) +
         " @\"up1\"");
  w.node("%c1 = Concat(%u1, %e1) {axis = 1} : " + type(32, 16) + " @\"cat1\"");
  w.node("%f1c = Conv(%c1, %w_d1) " + pad + " : " + type(16, 16) + " @\"d1\"");
  w.node("%f1 = Relu(%f1c) : " + type(16, 16) + " @\"d1_relu\"");
  w.node("%y = Conv(%f1, %w_head) : " + type(2, 16) + " @\"head\"");
  return w.graph("y");
}

// ConvTransposes where the rewrite meets the rest of the pipeline:
//  - "rgb_up": k = 2, s = 2 with bias over the 3-channel graph input to the graph output; the
//    conv reads the NCHW input itself and stores the NCHW output (fuse's edge folds);
//  - "crop_up": k = 3, s = 2, p = 1 without output_padding, 16x16 -> 31x31: the phases make
//    32x32, a Slice crops them, a ReLU follows; batch 2;
//  - "dw_up": depthwise (group 8) k = 4, s = 2, p = 1: a grouped conv with a CRD
//    depth_to_space store, on the grouped-conv kernel.
inline ir::Graph conv_transpose_edges() {
  IrWriter w(29);
  w.input("x1", "f32[1,3,16,16]");
  w.input("x2", "f32[2,16,16,16]");
  w.input("x3", "f32[1,8,4,4]");
  conv_weight(w, "w1", 3, 4, 2);
  w.constant("b1", {4}, -0.1, 0.1);
  conv_weight(w, "w2", 16, 8, 3);
  w.constant("b2", {8}, -0.1, 0.1);
  conv_weight(w, "w3", 8, 1, 4);
  w.node("%y1 = ConvTranspose(%x1, %w1, %b1) {strides = [2, 2]} : f32[1,4,32,32] @\"rgb_up\"");
  w.node(
      "%c2 = ConvTranspose(%x2, %w2, %b2) {pads = [1, 1, 1, 1], strides = [2, 2]} : "
      "f32[2,8,31,31] @\"crop_up\"");
  w.node("%y2 = Relu(%c2) : f32[2,8,31,31] @\"crop_relu\"");
  w.node(
      "%y3 = ConvTranspose(%x3, %w3) {group = 8, pads = [1, 1, 1, 1], strides = [2, 2]} : "
      "f32[1,8,8,8] @\"dw_up\"");
  return w.graph({"y1", "y2", "y3"});
}

}  // namespace tessel::testing
