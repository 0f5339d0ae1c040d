// conv_window(): which contractions the halo kernel can take, read back from the index maps.
#include <gtest/gtest.h>

#include "kernels/contraction/conv_window.h"
#include "kernels/contraction/ops_maps.h"

namespace tessel::contraction {
namespace {

Conv2dParams conv(int64_t n, int64_t h, int64_t w, int64_t ci, int64_t co, int64_t kh, int64_t kw,
                  int64_t stride = 1, int64_t pad_t = 1, int64_t pad_l = 1, int64_t dilation = 1,
                  int64_t groups = 1) {
  Conv2dParams p;
  p.n = n, p.h = h, p.w = w, p.ci = ci, p.co = co, p.kh = kh, p.kw = kw;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = pad_t;
  p.pad_left = p.pad_right = pad_l;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

Contraction matched(const IndexMaps& maps) { return *match(maps).contraction; }

TEST(ConvWindow, ReadsTheGeometryOfAStride1NhwcConv) {
  const auto w = conv_window(matched(conv2d_nhwc_maps(conv(2, 30, 40, 64, 96, 3, 5, 1, 1, 2))));
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->nchw_input);
  EXPECT_EQ(w->images, 2);
  EXPECT_EQ(w->in_h, 30);
  EXPECT_EQ(w->in_w, 40);
  EXPECT_EQ(w->channels, 64);
  EXPECT_EQ(w->out_h, 30);  // 30 + 1 + 1 - 3 + 1
  EXPECT_EQ(w->out_w, 40);  // 40 + 2 + 2 - 5 + 1
  EXPECT_EQ(w->out_channels, 96);
  EXPECT_EQ(w->kernel_h, 3);
  EXPECT_EQ(w->kernel_w, 5);
  EXPECT_EQ(w->pad_top, 1);
  EXPECT_EQ(w->pad_left, 2);
}

// X as a channel slice of a wider buffer (DenseNet's nested Concats: channels [0, 64) or
// [32, 96) of rows of 128) is no plain window: the halo kernel, which addresses X with its own
// channel count, must not take it; the GEMM kernels read it through the index maps.
TEST(ConvWindow, XInsideAWiderBufferHasNoWindow) {
  Conv2dParams p = conv(2, 14, 14, 64, 32, 3, 3);
  p.x_channels = 128;
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(p))));
  p.x_channel_offset = 32;
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(p))));
  p.x_channels = 64;
  p.x_channel_offset = 0;
  EXPECT_TRUE(conv_window(matched(conv2d_nhwc_maps(p))));
}

TEST(ConvWindow, BatchOneAndOneTallKernelsWithoutPaddingStayNhwc) {
  // Extent-1 dims drop out of the maps: A[0, oh, ow + kw, ci] also reads like NCHW's A[0, c, ...].
  const auto w = conv_window(matched(conv2d_nhwc_maps(conv(1, 16, 32, 16, 8, 1, 3, 1, 0, 1))));
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->nchw_input);
  EXPECT_EQ(w->kernel_h, 1);
  EXPECT_EQ(w->kernel_w, 3);
  EXPECT_EQ(w->images, 1);
  EXPECT_EQ(w->channels, 16);
}

TEST(ConvWindow, ReadsAnNchwStemInput) {
  const auto w = conv_window(matched(conv2d_nchw_input_maps(conv(1, 720, 1280, 3, 64, 3, 3, 1, 2, 1),
                                                            {DType::kF32, DType::kF16, DType::kF16})));
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->nchw_input);
  EXPECT_EQ(w->channels, 3);
  EXPECT_EQ(w->in_h, 720);
  EXPECT_EQ(w->in_w, 1280);
  EXPECT_EQ(w->out_channels, 64);
  EXPECT_EQ(w->pad_top, 2);
  EXPECT_EQ(w->pad_left, 1);
  EXPECT_EQ(w->out_h, 722);
}

// A strided or dilated stem over NCHW (ResNet's 7x7/2, AlexNet's 11x11/4): the halo kernel
// stages its pixels by stride phase, so conv_window reads the stride and dilation back too.
TEST(ConvWindow, ReadsStridedAndDilatedNchwStems) {
  const OperandDTypes f32_in{DType::kF32, DType::kF16, DType::kF16};
  const auto resnet = conv_window(matched(conv2d_nchw_input_maps(conv(2, 224, 224, 3, 64, 7, 7, 2, 3, 3), f32_in)));
  ASSERT_TRUE(resnet);
  EXPECT_TRUE(resnet->nchw_input);
  EXPECT_EQ(resnet->stride_h, 2);
  EXPECT_EQ(resnet->stride_w, 2);
  EXPECT_EQ(resnet->dilation_h, 1);
  EXPECT_EQ(resnet->out_h, 112);
  EXPECT_EQ(resnet->out_w, 112);
  EXPECT_EQ(resnet->kernel_h, 7);
  EXPECT_EQ(resnet->pad_left, 3);
  EXPECT_EQ(resnet->channel_pitch, 3);
  const auto alexnet = conv_window(matched(conv2d_nchw_input_maps(conv(1, 224, 224, 3, 64, 11, 11, 4, 2, 2), f32_in)));
  ASSERT_TRUE(alexnet);
  EXPECT_EQ(alexnet->stride_w, 4);
  EXPECT_EQ(alexnet->out_w, 55);
  const auto dilated = conv_window(matched(conv2d_nchw_input_maps(conv(1, 20, 24, 3, 16, 3, 3, 1, 2, 2, 2), f32_in)));
  ASSERT_TRUE(dilated);
  EXPECT_EQ(dilated->dilation_h, 2);
  EXPECT_EQ(dilated->dilation_w, 2);
  EXPECT_EQ(dilated->stride_h, 1);
}

// A strided stem over NHWC pixels of at most 4 channels (the one-node ResNet stem of bench-op):
// whole pixels, read with their stride. A channel slice of such pixels, or 8 channels (a stem
// padded to 8), keeps no strided window.
TEST(ConvWindow, ReadsStridedNhwcStemsOfFewChannels) {
  const auto resnet =
      conv_window(matched(conv2d_nhwc_maps(conv(32, 224, 224, 3, 64, 7, 7, 2, 3, 3))));
  ASSERT_TRUE(resnet);
  EXPECT_FALSE(resnet->nchw_input);
  EXPECT_EQ(resnet->channels, 3);
  EXPECT_EQ(resnet->channel_pitch, 3);
  EXPECT_EQ(resnet->stride_h, 2);
  EXPECT_EQ(resnet->stride_w, 2);
  EXPECT_EQ(resnet->out_h, 112);
  EXPECT_EQ(resnet->out_w, 112);
  EXPECT_EQ(resnet->pad_left, 3);
  const auto rgba = conv_window(matched(conv2d_nhwc_maps(conv(1, 33, 47, 4, 16, 3, 3, 2, 1, 1))));
  ASSERT_TRUE(rgba);
  EXPECT_EQ(rgba->channels, 4);
  EXPECT_EQ(rgba->out_w, 24);
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(conv(1, 32, 32, 8, 64, 7, 7, 2, 3, 3)))));
  Conv2dParams slice = conv(1, 32, 32, 3, 64, 3, 3, 2, 1, 1);
  slice.x_channels = 4;
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(slice))));
}

// A grayscale stem (one input channel): ci has extent 1 and drops out of the maps, so A and B
// read channel 0 of one-channel pixels; that is still a window of one channel, NCHW or NHWC,
// strided or not. One channel taken out of wider pixels is not.
TEST(ConvWindow, ReadsOneChannelStems) {
  const OperandDTypes f32_in{DType::kF32, DType::kF16, DType::kF16};
  const auto mnist =
      conv_window(matched(conv2d_nchw_input_maps(conv(8, 28, 28, 1, 32, 3, 3), f32_in)));
  ASSERT_TRUE(mnist);
  EXPECT_TRUE(mnist->nchw_input);
  EXPECT_EQ(mnist->channels, 1);
  EXPECT_EQ(mnist->channel_pitch, 1);
  EXPECT_EQ(mnist->images, 8);
  EXPECT_EQ(mnist->out_h, 28);
  EXPECT_EQ(mnist->out_channels, 32);
  EXPECT_EQ(mnist->kernel_w, 3);
  const auto strided =
      conv_window(matched(conv2d_nchw_input_maps(conv(2, 224, 224, 1, 64, 7, 7, 2, 3, 3), f32_in)));
  ASSERT_TRUE(strided);
  EXPECT_TRUE(strided->nchw_input);
  EXPECT_EQ(strided->channels, 1);
  EXPECT_EQ(strided->stride_w, 2);
  EXPECT_EQ(strided->out_w, 112);
  EXPECT_EQ(strided->pad_top, 3);
  for (const int64_t stride : {1, 2}) {
    const auto nhwc =
        conv_window(matched(conv2d_nhwc_maps(conv(4, 33, 47, 1, 32, 5, 5, stride, 2, 2))));
    ASSERT_TRUE(nhwc) << "stride " << stride;
    EXPECT_FALSE(nhwc->nchw_input);
    EXPECT_EQ(nhwc->channels, 1);
    EXPECT_EQ(nhwc->channel_pitch, 1);
    EXPECT_EQ(nhwc->stride_h, stride);
    EXPECT_EQ(nhwc->kernel_h, 5);
  }
  Conv2dParams slice = conv(1, 32, 32, 1, 16, 3, 3);
  slice.x_channels = 4;
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(slice))));
  slice.x_channel_offset = 2;
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(slice))));
}

TEST(ConvWindow, RejectsStridedDilatedGroupedConvsAndGemms) {
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(conv(1, 32, 32, 64, 64, 3, 3, 2)))));
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(conv(1, 32, 32, 64, 64, 3, 3, 1, 2, 2, 2)))));
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(conv(1, 32, 32, 64, 64, 3, 3, 1, 1, 1, 1, 2)))));
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(conv(1, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 32)))));
  EXPECT_FALSE(conv_window(matched(gemm_maps(64, 64, 64, {false, true}))));
}

// conv_geometry (the TMA kernel's im2col maps): strides, dilations and channel slices of X are
// read back too; groups, GEMMs and the NCHW stem form are not convolutions it maps.
TEST(ConvGeometry, ReadsStridesDilationsAndChannelSlices) {
  Conv2dParams p = conv(2, 29, 31, 64, 48, 3, 5, 2, 2, 4, 2);
  p.x_channels = 160;
  p.x_channel_offset = 32;
  const auto g = conv_geometry(matched(conv2d_nhwc_maps(p)));
  ASSERT_TRUE(g);
  EXPECT_FALSE(conv_window(matched(conv2d_nhwc_maps(p))));
  EXPECT_EQ(g->stride_h, 2);
  EXPECT_EQ(g->stride_w, 2);
  EXPECT_EQ(g->dilation_h, 2);
  EXPECT_EQ(g->dilation_w, 2);
  EXPECT_EQ(g->channels, 64);
  EXPECT_EQ(g->channel_pitch, 160);
  EXPECT_EQ(g->channel_offset, 32);
  EXPECT_EQ(g->kernel_h, 3);
  EXPECT_EQ(g->kernel_w, 5);
  EXPECT_EQ(g->pad_top, 2);
  EXPECT_EQ(g->pad_left, 4);
  EXPECT_EQ(g->out_h, p.out_h());
  EXPECT_EQ(g->out_w, p.out_w());
  // conv_window's convs are conv_geometry's with unit strides and a dense X.
  const auto w = conv_geometry(matched(conv2d_nhwc_maps(conv(1, 8, 8, 16, 16, 3, 3))));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->channel_pitch, 16);
  EXPECT_EQ(w->stride_h * w->dilation_w, 1);
  EXPECT_FALSE(conv_geometry(matched(conv2d_nhwc_maps(conv(1, 32, 32, 64, 64, 3, 3, 1, 1, 1, 1, 2)))));
  EXPECT_FALSE(conv_geometry(matched(gemm_maps(64, 64, 64, {false, true}))));
  EXPECT_FALSE(conv_geometry(matched(conv2d_nchw_input_maps(conv(1, 32, 32, 3, 64, 7, 7, 2, 3, 3)))));
  // The NCHW stem is conv_window's, strided or not.
  EXPECT_TRUE(conv_window(matched(conv2d_nchw_input_maps(conv(1, 32, 32, 3, 64, 7, 7, 2, 3, 3)))));
}

}  // namespace
}  // namespace tessel::contraction

namespace tessel::contraction {
namespace {

// match() orders K by A's strides; for an NCHW stem that is (ci, kh, kw), while B is
// contiguous along ci: B cannot be read in vectors along k, A can (along kw).
TEST(MatchVectors, NchwStemReadsWeightsElementByElement) {
  const Contraction c = *match(conv2d_nchw_input_maps(conv(1, 64, 64, 8, 32, 3, 3),
                                                      {DType::kF16, DType::kF16, DType::kF16}))
                             .contraction;
  EXPECT_EQ(c.maps.dims[c.k_dims.back()].name, "kw");
  EXPECT_EQ(c.b_vec, 1);
  const Contraction nhwc = *match(conv2d_nhwc_maps(conv(1, 64, 64, 8, 32, 3, 3))).contraction;
  EXPECT_EQ(nhwc.b_vec, 8);
}

}  // namespace
}  // namespace tessel::contraction
