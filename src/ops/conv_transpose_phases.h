// ConvTranspose as one stride-1 convolution: the sub-pixel ("phase") decomposition that lets
// convert-layout rewrite a 2-D ConvTranspose into a tessel.Conv whose depth_to_space store
// interleaves the phases, so that transposed convolutions run on the conv kernels.
//
// Per spatial dim, with input extent H, kernel k, stride s, dilation d, begin pad p and output
// extent OH (plan_conv_transpose resolves pads, output_padding, output_shape and auto_pad into
// p and OH), ONNX defines
//   y[oh] = sum of x[ih] * w[kh] over all (ih, kh) with oh = ih*s - p + kh*d.
// Write oh + c = q*s + r, phase r in [0, s), for a crop c >= 0 chosen below, and let
// delta = p - c. Tap kh contributes to phase r exactly when e = r + delta - kh*d is a multiple
// of s, and then reads ih = q + e/s: a fixed offset o = e/s from q. Every tap reaches exactly
// one phase. Over all (r, kh), the offsets lie in [lo, hi] on a grid lo + j*dil' (dil' the gcd
// of their distances to lo; 1 if they are all equal), so
//   conv[q, r] = sum over j of x[q + lo + j*dil'] * w'[r, j],   w'[r, j] = w[kh] for the tap kh
//                                                               at offset lo + j*dil' in phase r,
//                                                               0 where there is none
// is ONE stride-1 convolution with begin pad -lo, dilation dil' and (hi - lo)/dil' + 1 taps,
// whose output channels are the phases. depth_to_space(s) puts conv[q, r] at row q*s + r = oh + c.
//  - c = p - min(p, (k-1)*d): the last tap kh = k-1 reaches phase (kh*d - delta) mod s at an
//    offset <= 0, so lo <= 0 (a pad, never a cut of x). c > 0 only when p exceeds the dilated
//    kernel's reach, (k-1)*d.
//  - The conv must produce Q = ceil((c + OH) / s) rows: H + pb + pe - (hi - lo) = Q gives the
//    end pad pe = Q - H + hi; where that is negative it is 0 and the extra rows are cropped.
// The ConvTranspose's output is then rows [c, c + OH) of the depth_to_space result: a crop (a
// Slice) unless c == 0 and Q*s == OH. For the usual decoder configs there is none: k = s, p = 0
// is a 1x1 conv to s*s*M channels; k = 3, s = 2, p = 1, output_padding = 1 is a 2x2 conv with
// pads [0, 0, 1, 1]; k = 4, s = 2, p = 1 a 3x3 conv with pads [1, 1, 1, 1].
//
// In 2-D the phases (rh, rw) become s*s*M output channels in a depth_to_space order: DCR,
// (rh*s + rw)*M + m, for group 1 (the order whose store writes contiguous vectors); CRD,
// m*s*s + rh*s + rw, for group > 1, where each group's output channels must stay contiguous.
// Strides must be equal in both dims (one depth_to_space block); stride 1 is a plain conv with
// the kernel flipped and transposed, and no store map.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/conv_geometry.h"

namespace tessel::ops {

// One spatial dim of the decomposition.
struct PhaseAxis {
  int64_t stride = 1;     // s: the number of phases
  int64_t kernel = 1;     // taps of the stride-1 conv
  int64_t dilation = 1;   // dil'
  int64_t pad_begin = 0;  // -lo
  int64_t pad_end = 0;
  int64_t conv_out = 0;      // Q: rows the conv produces
  int64_t crop = 0;          // c: rows of the depth_to_space result before the output's first
  int64_t out = 0;           // OH: the ConvTranspose's extent
  std::vector<int64_t> tap;  // [r * kernel + j]: the ConvTranspose's kernel index, or -1

  bool crops() const { return crop != 0 || conv_out * stride != out; }
};

struct PhaseConv {
  PhaseAxis h, w;
  int64_t in_channels = 0;   // C of the ConvTranspose
  int64_t out_channels = 0;  // M of the ConvTranspose
  int64_t group = 1;
  bool dcr = true;  // the depth_to_space order of the phase channels

  int64_t block() const { return h.stride; }
  bool crops() const { return h.crops() || w.crops(); }
  // The conv's output channel of ConvTranspose channel m in phase (rh, rw).
  int64_t channel(int64_t m, int64_t rh, int64_t rw) const;
};

// Why ConvTranspose node `n` of `g` has no tessel.Conv form (without the node's label, as
// plan_node's reasons), or nullopt when convert-layout rewrites it. Malformed attributes are
// UserErrors, as in inference.
std::optional<std::string> conv_transpose_refusal(const ir::Graph& g, const ir::Node& n);

// The decomposition of a 2-D ConvTranspose with equal strides (conv_transpose_refusal says
// nullopt).
PhaseConv plan_phase_conv(const ConvGeometry& geo);

// The stride-1 conv's weights, OHWI [s*s*M, KH', KW', C/group], from the ConvTranspose's
// [C, M/group, KH, KW], in W's dtype (values copied exactly, zeros where a phase has no tap).
Tensor phase_conv_weights(const Tensor& w, const PhaseConv& p);

// The conv's bias [s*s*M]: each of the ConvTranspose's M values once per phase, in b's dtype.
Tensor phase_conv_bias(const Tensor& b, const PhaseConv& p);

}  // namespace tessel::ops
