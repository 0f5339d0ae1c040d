// Recognising a convolution window in a Contraction: the facts a direct (halo-tiled) conv
// kernel needs, read back from the index maps rather than from an op name.
//
// A contraction is a stride-1, dilation-1, group-1 NHWC convolution when its maps are
//   A[img, oh + kh - pad_top, ow + kw - pad_left, ci]   B[co, kh, kw, ci]   C[img, oh, ow, co]
// (dims of extent 1 may be absent: batch 1, a 1-wide kernel, one channel), or with A
// channels first,
//   A[img, ci, oh + kh - pad_top, ow + kw - pad_left]
// as a stem conv reads the graph's NCHW input directly (contraction/ops_maps.h,
// conv2d_nchw_input_maps; such a stem may also be strided or dilated). An NHWC stem over at most
// ops::kStemSlotChannels channels may be strided or dilated too. Such a conv reads each input
// pixel for R*S output pixels; a kernel that stages an input tile plus its halo in shared
// memory once, and lets ldmatrix gather the R*S shifted windows from there, reads it once.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/contraction/contraction.h"

namespace tessel::contraction {

struct ConvWindow {
  int64_t images = 1;
  int64_t in_h = 1, in_w = 1, channels = 1;  // A: [images, in_h, in_w, channels], NHWC
  bool nchw_input = false;                   // A is [images, channels, in_h, in_w] instead
  int64_t out_h = 1, out_w = 1;              // C: [images, out_h, out_w, out_channels]
  int64_t out_channels = 1;                  // N
  int64_t kernel_h = 1, kernel_w = 1;        // B: [out_channels, kernel_h, kernel_w, channels]
  int64_t pad_top = 0, pad_left = 0;         // the window of (oh, ow) starts at -pad
  // conv_geometry, and conv_window's NCHW stems (its NHWC windows have 1s): the window of
  // (oh, ow) starts at (stride_h * oh - pad_top, stride_w * ow - pad_left) and its taps are
  // dilation apart; A's
  // pixels hold channel_pitch elements of which the conv reads channels [channel_offset,
  // channel_offset + channels) (a channel slice of a Concat's buffer).
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t channel_pitch = 0, channel_offset = 0;
};

// The window of `c`, or nothing when `c` is not such a convolution (grouped, batched, another
// layout, a channel slice of A, or a GEMM; an NHWC one of more than ops::kStemSlotChannels channels
// also when strided or dilated, while a stem -- NCHW input, or NHWC of at most that many
// channels -- may be either).
std::optional<ConvWindow> conv_window(const Contraction& c);

// Any group-1 NHWC convolution: strides, dilations and a channel slice of A allowed (never
// the NCHW-input form). Nothing for everything else.
std::optional<ConvWindow> conv_geometry(const Contraction& c);

// A grouped NHWC convolution (contraction/grouped.h, the group as the batch dim): the window
// of one group, strides and dilations allowed. `channels` and `out_channels` are one group's
// (cig, cog); channel_pitch is A's whole pixel (groups * cig). Nothing for everything else,
// also for a channel slice of A.
std::optional<ConvWindow> grouped_conv_geometry(const Contraction& c);

}  // namespace tessel::contraction
