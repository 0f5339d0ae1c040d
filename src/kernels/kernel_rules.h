// What the generated contraction kernels (kernels/cuda/templates/tessel_{mma,wgmma,simt}.cuh)
// accept as a schedule, and the shared memory each instantiation takes. The schedule space,
// the default pick and the cost model use these; codegen's can_implement() applies the same
// rules plus those that depend on the whole problem (index maps, epilogue, store map), so a
// schedule rejected here is rejected there too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "kernels/contraction/contraction.h"
#include "kernels/contraction/conv_window.h"
#include "device/tensor_map.h"
#include "kernels/schedule.h"

namespace tessel::kernels {

// Why the kernel templates cannot instantiate `s` for `c` (empty when they can). The rules:
//  - tiles: positive, warp tiles dividing the CTA tile, at most 1024 threads;
//  - mma.sync: warp tiles multiples of 16 (m16n8k16, B fragments two n8 tiles at a time),
//    block_k a multiple of 32 (two k16 steps per k-tile for register double-buffering),
//    2..5 stages;
//  - int8 (both operands i8, int32 accumulators): mma.sync m16n8k32 or the TMA kernel's wgmma
//    k32 (the cp.async wgmma, halo and SIMT kernels take 16-bit or f32 operands), block_k a
//    multiple of 64 (two k32 steps),
//    both operands K-major (ldmatrix .trans moves 16-bit elements), vectors of at least 2
//    elements, no packed groups; split-K sums int32 partials;
//  - wgmma: warpgroup tiles of m a multiple of 64 and n 64, 128 or 256 with at most 128 fp32
//    accumulators per thread, block_k a multiple of 64 (128-byte swizzle rows), 3..5 stages;
//  - TMA (mainloop kTma, sm_90a): the warpgroup tile is the CTA tile, or its half along M
//    (cooperative: both consumer warpgroups on each tile), with wgmma's rules above,
//    block_k one 128-byte row (64 f16/bf16, 128 int8: wgmma k32 with int32 accumulators),
//    2..8 stages, no split-K, operands that tma_layout maps;
//  - SIMT: float4 thread tiles (warp 16x32 or 32x16 multiples), no split-K;
//  - operand loads: vectors of 1, 2, 4 or 8 elements (16 of int8), no wider than the
//    contraction's (a_vec/b_vec), each thread on one column of the shared-memory tile with at
//    most 32 rows, Tensor Core tiles swizzled (rows a multiple of 128 bytes, or 64 bytes for
//    mma.sync); an MN-major operand needs a single K dim;
//  - split-K: every split gets at least one k-tile;
//  - packed groups (groups_per_tile > 0, contraction/grouped.h): a grouped contraction on
//    mma.sync without split-K, output channels per group a multiple of 8, block_n that many
//    whole groups, warp tiles nesting with the groups, block_k whole taps of the (padded)
//    channels per group, A vectors inside a group; A's tile is every group's k-tile side by
//    side (block_k * groups_per_tile columns).
// The shared memory limit is the device's: see smem_bytes and resident_ctas.
std::optional<std::string> check_schedule(const contraction::Contraction& c, const Schedule& s);

// The widest vector, in elements, a loader moves of an operand of dtype `t`: 16 bytes of
// int8, else 8 elements (16 bytes of 16-bit types; the SIMT loader's own rule bounds f32).
int max_vector_elements(DType t);

// Dynamic shared memory of the kernel: the operand pipeline (A (block_m, block_k, stages) --
// block_k * groups_per_tile columns for packed groups -- and B (block_n, block_k, stages), in
// bytes of the operands' dtypes: 1 for int8) or,
// when larger, the epilogue's fp32 staging (one 16-row slab
// per warp); plus the wgmma swizzle-atom alignment (1 KiB) and the split-K arrival flag.
// SIMT kernels: double-buffered fp32 tiles, and per-warp staging of the whole warp tile.
size_t smem_bytes(const contraction::Contraction& c, const Schedule& s);

// The shared-memory layout of a kHalo kernel (kernels/cuda/templates/tessel_halo.cuh), the one
// definition the rules, the generator and the estimate use. Channels are padded to 8 (one
// 16-byte chunk); K runs over (tap, chunk) pairs, two per k16 step of mma.sync, so a stride-1
// 3-channel 3x3 stem spends 72 of its padded K on 27 real values instead of 144 (an even-stride
// stem pairs its taps instead: tap_pairs below). Halo pixels and weight rows
// are padded to an odd number of 16-byte chunks: the 8 rows one ldmatrix phase reads (8
// consecutive pixels of a window, or 8 output channels) then fall on 8 distinct bank quads,
// whatever pixel the window starts at.
//
// Grouped (Schedule::groups_per_tile > 0, contraction::grouped_conv_geometry): a CTA computes
// `groups_per_tile` whole groups (block_n = groups_per_tile * group_n channels) of one of
// `slices` channel slices, and its halo holds those groups' input channels; each n8 fragment
// multiplies its own group's channels, so no mma computes the zeros of a block-diagonal
// weight. A dense conv is one group of all channels, in one slice.
struct HaloLayout {
  contraction::ConvWindow window;  // a grouped conv's: one group's channels
  // A stem of at most 4 channels, NCHW or NHWC, and an even horizontal stride (halo_tap_pairs):
  // pixels of 4 channels (8 bytes, zeros past the image's) in plain column order, and K over
  // (kernel row, pair of adjacent taps) halves, whose 16 bytes are two neighbouring pixels
  // (ResNet's 7x7/2 stem: 7 x 4 halves, K 224, where 8-channel pixels and (tap, chunk) halves
  // made it 49 x 8 = 392). Both layouts are staged through registers: an NHWC pixel of 3
  // channels (6 bytes) is no cp.async size.
  bool tap_pairs = false;
  int groups_per_tile = 1;
  int group_c = 0;              // input channels per group (dense: channels_padded)
  int group_n = 0;              // output channels per group (dense: block_n)
  int64_t slices = 1;           // ceil(groups / groups_per_tile)
  int channels_padded = 0;      // channels of a halo pixel: groups_per_tile * group_c, 8-padded
  int halo_h = 0, halo_w = 0;   // (tile - 1) * stride + (kernel - 1) * dilation + 1
  int pixel_pitch = 0;          // bytes per halo pixel
  int halo_bytes =
      0;  // the input pixels of one tile (rows of whole stride phases), 128-byte rounded
  // One of the buffers: a tile's pixels, then (once every warp has read them) the epilogue's
  // staging slabs, while the other buffer (if any) receives the next tile's pixels.
  int buffer_bytes = 0;
  int k_padded = 0;             // halo_k_padded(window)
  int weight_pitch = 0;         // bytes per weight row (output channel)
  int weight_bytes = 0;         // block_n rows
  int epilogue_bytes = 0;       // one 16-row fp32 staging slab per warp
  int64_t tiles = 0;            // images x ceil(out_h / tile_h) x ceil(out_w / tile_w) (per slice)
  // The CTAs of each slice (the grid is slices x this): Schedule::ctas / slices, at least 1 and
  // at most `tiles`; every tile its own CTA where ctas is 0. CTA j of a slice walks tiles j,
  // j + ctas_per_slice, ...
  int64_t ctas_per_slice = 0;
  // 2 where a CTA walks several tiles (the next one's pixels load while this one computes); 1
  // where each computes one tile: nothing to prefetch, and half the shared memory lets more
  // CTAs share an SM, whose loads then overlap another's mmas instead.
  int buffers = 2;
  size_t smem_bytes() const { return size_t(weight_bytes) + size_t(buffers) * size_t(buffer_bytes); }
};

// Whether a halo kernel stages window `w` as tap pairs (HaloLayout::tap_pairs): a stem of at
// most 4 channels (NCHW, or NHWC whole pixels) whose horizontal stride is even (a pair's second
// pixel then starts 16 bytes after its first, and a lane's first at a 16-byte boundary) and
// dilation 1.
bool halo_tap_pairs(const contraction::ConvWindow& w);
// The K a halo kernel computes over, rounded up to 16 (the weights are zero beyond the real K):
// kernel_h * kernel_w * channels rounded up to 8, or with tap pairs kernel_h * ceil(kernel_w /
// 2) * 8.
int halo_k_padded(const contraction::ConvWindow& w);

// The layout of a kHalo schedule for `c`, or why there is none (also when `c` has no
// conv_window -- a stride-1 NHWC convolution or a stem --, or for groups_per_tile > 0 no grouped
// NHWC convolution, or `s` is not kHalo).
std::optional<HaloLayout> halo_layout(const contraction::Contraction& c, const Schedule& s,
                                      std::string* why = nullptr);

// How a kTma kernel (kernels/cuda/templates/tessel_tma.cuh) reads its operands: the tensor
// maps (their boxes sized for the schedule) and the walk over K, tap by tap in 64-channel
// chunks. A is a plain K-major matrix (a GEMM, a 1x1 stride-1 conv: a tiled map {K, M}) or
// an NHWC convolution's input (any stride, dilation, padding and channel slice: an im2col map
// {C, W, H, N}); B is K-major, as [N, taps, channels] (a GEMM: one tap of K channels), or a
// GEMM's 16-bit B stored (K, N) (MN-major: a tiled map {N, K}, boxes of 64 columns, read by
// wgmma transposed).
struct TmaLayout {
  bool a_im2col = false;
  // Schedule::row_windows: A a tiled map over the NHWC input, one box per (kernel row, k-tile)
  // of the M tile's pixel run plus the window's width (a_box_rows rows); a_im2col stays true
  // (A is the conv's gather either way).
  bool a_row_windows = false;
  int64_t a_box_rows = 0;
  bool b_mn_major = false;
  contraction::ConvWindow window;  // a_im2col: the convolution
  int64_t taps = 1, kernel_w = 1;  // B's taps (kernel_h * kernel_w) and the window's width
  int64_t channels = 0;            // K per tap
  int64_t chunks = 0;              // k-tiles per tap: channels / block_k, rounded up
  device::TensorMapSpec a, b;
};

// The TMA layout of `s` (a kTma schedule) for `c`, or why there is none.
std::optional<TmaLayout> tma_layout(const contraction::Contraction& c, const Schedule& s,
                                    std::string* why = nullptr);

}  // namespace tessel::kernels
