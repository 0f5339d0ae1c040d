// Index maps of the contraction-shaped ops (conv2d NHWC, GEMM, MatMul), as pure functions of
// extents: no IR dependency, so ops/, the tests and the benchmarks build identical maps.
//
// Preconditions (extents >= 1, groups dividing the channels, a window that fits) are checked
// with TESSEL_ICHECK: ops/ validates the user's attributes first and reports them with the
// node's label, so a violation here is a compiler bug.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/contraction/index_map.h"

namespace tessel::contraction {

// Element types of the two inputs and of the stored output.
struct OperandDTypes {
  DType a = DType::kF16;
  DType b = DType::kF16;
  DType c = DType::kF16;
};

// Output extent of a convolution window along one axis (ONNX Conv, explicit pads):
// floor((in + pad_begin + pad_end - dilation*(kernel-1) - 1) / stride) + 1, and 0 when the
// dilated kernel is larger than the padded input. Requires kernel, stride, dilation >= 1.
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation);

// conv2d, input NHWC (n, h, w, ci), weights (co, kh, kw, ci / groups), output NHWC.
struct Conv2dParams {
  int64_t n = 1, h = 1, w = 1, ci = 1, co = 1, kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  // X as channels [x_channel_offset, x_channel_offset + ci) of rows of x_channels elements
  // (0: ci, a dense X): a channel slice of a Concat's buffer, read where it lies.
  int64_t x_channels = 0, x_channel_offset = 0;

  int64_t out_h() const;
  int64_t out_w() const;
};

// Dims (g, b, oh, ow, co, kh, kw, ci), where co and ci count channels per group and g is
// present only when groups > 1:
//   A[b, s_h*oh + d_h*kh - pad_top, s_w*ow + d_w*kw - pad_left, cig*g + ci]
//   B[cog*g + co, kh, kw, ci]
//   C[b, oh, ow, cog*g + co]
// Groups are a batch dim over channel slices: match() gives batch = groups, M = n*oh*ow,
// N = co/groups, K = kh*kw*ci/groups, with C's channel split into the batch offset cog*g and
// n (likewise A's and B's). Depthwise (groups = ci = co) is a contraction with N = 1 and
// K = kh*kw per group; its A is contiguous along g, a batch dim, so it is not Tensor Core
// eligible.
IndexMaps conv2d_nhwc_maps(const Conv2dParams& p, OperandDTypes types = {});

// conv2d_nhwc_maps with A read channels first, as the graph's NCHW input of a stem conv
// (ops/tessel_epilogue.h, input_layout = "nchw"): dims, B and C as there, and
//   A[b, cig*g + ci, s_h*oh + d_h*kh - pad_top, s_w*ow + d_w*kw - pad_left]
// A's contiguous dim is indexed by ow and kw: with dilation 1 match() reads it K-major along
// kw, in vectors no wider than the kernel width allows. An fp32 A (a graph input read as it
// is) is no Tensor Core operand: the SIMT kernel takes it.
IndexMaps conv2d_nchw_input_maps(const Conv2dParams& p, OperandDTypes types = {});

// GEMM C[m, n] = sum_k A[m, k] B[k, n], each input stored as is ('N') or transposed ('T'):
// NN: A (m, k), B (k, n); NT: B stored (n, k); TN: A stored (k, m). ONNX Gemm's transA and
// transB are exactly these flags.
struct GemmLayout {
  bool trans_a = false;
  bool trans_b = false;
};
// "NN", "NT", "TN", "TT"; nullopt for anything else.
std::optional<GemmLayout> parse_gemm_layout(std::string_view name);
std::string gemm_layout_name(GemmLayout layout);

// Dims (m, n, k).
IndexMaps gemm_maps(int64_t m, int64_t n, int64_t k, GemmLayout layout, OperandDTypes types = {});

// numpy/ONNX MatMul with batch broadcasting: a is [..., M, K] (or [K]), b is [..., K, N]
// (or [K]); the batch dims broadcast as numpy does. Dims (b0, b1, ..., m, n, k): one per
// output batch dim; an input broadcast along a batch dim (extent 1 there) indexes it with
// coefficient 0. A 1-D a has no M (m has extent 1 and indexes nothing), likewise b and N.
// Requires equal K and broadcastable batch shapes.
IndexMaps matmul_maps(const Shape& a_shape, const Shape& b_shape, OperandDTypes types = {});

}  // namespace tessel::contraction
