#include "kernels/contraction/conv_window.h"

#include <utility>
#include <vector>

#include "kernels/contraction/grouped.h"
#include "ops/tessel_epilogue.h"

namespace tessel::contraction {
namespace {

// The (dim, coefficient) terms of an index, over dims of extent > 1 (an extent-1 dim is always
// 0 and belongs to no group).
std::vector<std::pair<int, int64_t>> terms(const AffineIndex& ix, const std::vector<IterDim>& dims) {
  std::vector<std::pair<int, int64_t>> t;
  for (size_t j = 0; j < ix.coeffs.size() && j < dims.size(); ++j)
    if (ix.coeffs[j] != 0 && dims[j].extent > 1) t.emplace_back(static_cast<int>(j), ix.coeffs[j]);
  return t;
}

// The dim an index reads with coefficient 1 and offset 0 (-1: a constant 0, legal only for a
// tensor dim of extent 1); nothing when it is anything else.
std::optional<int> plain(const AffineIndex& ix, const std::vector<IterDim>& dims, int64_t extent) {
  const auto t = terms(ix, dims);
  if (ix.offset != 0) return std::nullopt;
  if (t.empty()) return extent == 1 ? std::optional<int>(-1) : std::nullopt;
  if (t.size() != 1 || t[0].second != 1) return std::nullopt;
  return t[0].first;
}

// An input spatial index stride*out + dilation*k - pad: its dims (each -1 when absent) and
// coefficients (1 where absent).
struct WindowIndex {
  int out = -1, k = -1;
  int64_t stride = 1, dilation = 1;
};
std::optional<WindowIndex> window(const AffineIndex& ix, const std::vector<IterDim>& dims,
                                  bool general) {
  WindowIndex w;
  for (auto [j, coeff] : terms(ix, dims)) {
    if (coeff < 1 || (coeff != 1 && !general)) return std::nullopt;  // strided or dilated
    int& slot = dims[j].reduction ? w.k : w.out;
    if (slot >= 0) return std::nullopt;
    slot = j;
    (dims[j].reduction ? w.dilation : w.stride) = coeff;
  }
  if (ix.offset > 0) return std::nullopt;  // a window that starts inside the image
  return w;
}

int64_t extent(const std::vector<IterDim>& dims, int j) { return j < 0 ? 1 : dims[j].extent; }

std::optional<ConvWindow> window_of(const Contraction& c, bool nchw, bool general) {
  const auto& dims = c.maps.dims;
  const Access &a = c.maps.a, &b = c.maps.b, &out = c.maps.c;
  if (!c.batch_dims.empty() || c.operands_swapped) return std::nullopt;
  if (a.shape.size() != 4 || b.shape.size() != 4 || out.shape.size() != 4) return std::nullopt;
  if (a.index.size() != 4 || b.index.size() != 4 || out.index.size() != 4) return std::nullopt;

  // C[img, oh, ow, co].
  const auto img = plain(out.index[0], dims, out.shape[0]);
  const auto oh = plain(out.index[1], dims, out.shape[1]);
  const auto ow = plain(out.index[2], dims, out.shape[2]);
  const auto co = plain(out.index[3], dims, out.shape[3]);
  if (!img || !oh || !ow || !co) return std::nullopt;
  // A[img, oh + kh - pt, ow + kw - pl, ci], or A[img, ci, oh + kh - pt, ow + kw - pl].
  const int y = nchw ? 2 : 1, x = nchw ? 3 : 2, ch = nchw ? 1 : 3;
  const auto a_img = plain(a.index[0], dims, a.shape[0]);
  const auto wy = window(a.index[y], dims, general);
  const auto wx = window(a.index[x], dims, general);
  // The channel: ci, or ci + offset inside wider pixels (general only). A grayscale stem's ci,
  // of extent 1, drops out of the terms: A (and below, B) then reads channel 0 of one-channel
  // pixels (plain's -1). That is a window of one channel, which the halo kernel pads as RGB's.
  AffineIndex channel = a.index[ch];
  const int64_t channel_offset = channel.offset;
  channel.offset = 0;
  const auto ci = plain(channel, dims, a.shape[ch]);
  if (!a_img || *a_img != *img || !wy || !wx || !ci || wy->out != *oh || wx->out != *ow)
    return std::nullopt;
  if (*ci >= 0 && !dims[*ci].reduction) return std::nullopt;
  if (general ? channel_offset < 0 || channel_offset + extent(dims, *ci) > a.shape[ch]
              : channel_offset != 0 || extent(dims, *ci) != a.shape[ch])
    return std::nullopt;
  const int kh = wy->k, kw = wx->k;
  // B[co, kh, kw, ci], dense.
  const auto b_co = plain(b.index[0], dims, b.shape[0]);
  const auto b_kh = plain(b.index[1], dims, b.shape[1]);
  const auto b_kw = plain(b.index[2], dims, b.shape[2]);
  const auto b_ci = plain(b.index[3], dims, b.shape[3]);
  if (!b_co || !b_kh || !b_kw || !b_ci || *b_co != *co || *b_kh != kh || *b_kw != kw || *b_ci != *ci)
    return std::nullopt;

  ConvWindow w;
  w.images = extent(dims, *img);
  w.nchw_input = nchw;
  w.in_h = a.shape[y];
  w.in_w = a.shape[x];
  w.channels = extent(dims, *ci);
  w.channel_pitch = a.shape[ch];
  w.channel_offset = channel_offset;
  w.stride_h = wy->stride;
  w.stride_w = wx->stride;
  w.dilation_h = wy->dilation;
  w.dilation_w = wx->dilation;
  w.out_h = extent(dims, *oh);
  w.out_w = extent(dims, *ow);
  w.out_channels = extent(dims, *co);
  w.kernel_h = extent(dims, kh);
  w.kernel_w = extent(dims, kw);
  w.pad_top = -a.index[y].offset;
  w.pad_left = -a.index[x].offset;
  if (w.images != a.shape[0] || w.images != out.shape[0] || w.out_h != out.shape[1] ||
      w.out_w != out.shape[2] || w.out_channels != out.shape[3] || w.out_channels != b.shape[0] ||
      w.kernel_h != b.shape[1] || w.kernel_w != b.shape[2] || w.channels != b.shape[3])
    return std::nullopt;
  return w;
}

}  // namespace

std::optional<ConvWindow> conv_window(const Contraction& c) {
  // NHWC first: a 1-tall kernel without padding reads A[img, oh, ...], which looks like a
  // channel index too.
  if (auto w = window_of(c, false, false)) return w;
  // A strided or dilated NHWC stem over few channels: whole pixels (the halo kernel stages them
  // in slots of ops::kStemSlotChannels, tap_pairs), not a slice of wider ones.
  if (std::optional<ConvWindow> w = window_of(c, false, true);
      w && w->channels <= ops::kStemSlotChannels && w->channel_offset == 0 &&
      w->channel_pitch == w->channels)
    return w;
  // NCHW: a stem reading the graph's input, strided or dilated too (the halo kernel stages its
  // pixels by stride phase), all of its channels.
  std::optional<ConvWindow> w = window_of(c, true, true);
  if (!w || w->channel_offset != 0 || w->channel_pitch != w->channels) return std::nullopt;
  return w;
}

std::optional<ConvWindow> conv_geometry(const Contraction& c) { return window_of(c, false, true); }

std::optional<ConvWindow> grouped_conv_geometry(const Contraction& c) {
  const std::optional<GroupedLayout> l = grouped_layout(c);
  if (!l) return std::nullopt;
  // One group: g of extent 1 drops out of every index (terms() skips extent-1 dims), and B's
  // rows and C's channels are that group's. A keeps its whole pixel, read as a slice at 0.
  Contraction one = c;
  one.batch_dims.clear();
  one.maps.dims[l->group_dim].extent = 1;
  if (one.maps.b.shape.size() != 4 || one.maps.c.shape.size() != 4) return std::nullopt;
  one.maps.b.shape[0] = l->n_per_group;
  one.maps.c.shape[3] = l->n_per_group;
  std::optional<ConvWindow> w = window_of(one, false, true);
  if (!w || w->channel_offset != 0 || w->channel_pitch != l->groups * l->ci_per_group)
    return std::nullopt;
  return w;
}

}  // namespace tessel::contraction
