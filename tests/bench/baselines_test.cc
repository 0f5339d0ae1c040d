// What the int8 baselines refuse before any GPU work, and why; the public workloads they take.
#include "bench/baselines.h"

#include <gtest/gtest.h>

#include <set>

namespace tessel::bench {
namespace {

// The public conv2d workloads (shared/workloads/conv2d.csv, abridged): every distinct channel
// pair, the 3-channel ones included.
constexpr const char* kConvCsv = R"(# name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups
seed_mobilenet_1x1_a,1,56,56,64,128,1,1,1,0,1,1
seed_nhwc_32_56_56_256_3x3_64,32,56,56,256,64,3,3,1,0,1,1
seed_edsr_head_720p,1,720,1280,3,64,3,3,1,1,1,1
seed_edsr_up2_1440p,1,1440,2560,32,64,3,3,1,1,1,1
seed_edsr_tail_4k,1,2880,5120,16,3,3,3,1,1,1,1
resnet50_conv1_b32,32,224,224,3,64,7,7,2,3,1,1
resnet50_l1_3x3_64_64_b32,32,56,56,64,64,3,3,1,1,1,1
resnet50_l4_1x1_2048_512_b32,32,7,7,2048,512,1,1,1,0,1,1
)";

constexpr const char* kGemmCsv = R"(# name,m,n,k,layout
seed_nmt_512_16_512_NN,512,16,512,NN
seed_nmt_512_64_512_TN,512,64,512,TN
resnet50_fc_b1,1,1000,2048,NT
vgg16_fc6_b32,32,4096,25088,NT
)";

TEST(CudnnInt8Refusal, ChannelsNotInWholeVectorsOfFour) {
  std::set<std::string> refused;
  for (const ConvWorkload& w : parse_conv_workloads(kConvCsv, "conv2d.csv")) {
    if (const std::optional<std::string> why = cudnn_int8_refusal(w)) {
      refused.insert(w.name);
      EXPECT_NE(why->find("is not a multiple of 4: cuDNN's int8 convolutions read and write "
                          "NHWC int8 in 4-channel vectors"),
                std::string::npos)
          << *why;
    }
  }
  EXPECT_EQ(refused, (std::set<std::string>{"seed_edsr_head_720p", "seed_edsr_tail_4k",
                                            "resnet50_conv1_b32"}));
  ConvWorkload w;
  w.ci = 3, w.co = 64;
  EXPECT_EQ(cudnn_int8_refusal(w).value_or("").rfind("ci=3 is not a multiple of 4", 0), 0u);
  w.ci = 64, w.co = 6;
  EXPECT_EQ(cudnn_int8_refusal(w).value_or("").rfind("co=6 is not a multiple of 4", 0), 0u);
  w.co = 64, w.groups = 2;
  EXPECT_EQ(cudnn_int8_refusal(w).value_or(""),
            "groups=2: the cuDNN int8 baseline builds ungrouped convolutions only");
  w.groups = 1, w.ci = 4, w.co = 4;
  EXPECT_FALSE(cudnn_int8_refusal(w).has_value());
}

TEST(CublasLtInt8Refusal, DimensionsNotMultiplesOfFour) {
  for (const GemmWorkload& g : parse_gemm_workloads(kGemmCsv, "gemm.csv"))
    EXPECT_FALSE(cublaslt_int8_refusal(g).has_value()) << g.name;
  GemmWorkload g;
  g.m = 3, g.n = 1001, g.k = 64;  // m is free: cuBLAS's n
  EXPECT_EQ(cublaslt_int8_refusal(g).value_or("").rfind("n=1001 is not a multiple of 4", 0), 0u);
  g.n = 1000, g.k = 30;
  EXPECT_EQ(cublaslt_int8_refusal(g).value_or("").rfind("k=30 is not a multiple of 4", 0), 0u);
}

TEST(Int8Output, NamesAndSizes) {
  EXPECT_EQ(int8_output_name(Int8Output::kInt8), "int8");
  EXPECT_EQ(int8_output_name(Int8Output::kFloat), "fp32");
  EXPECT_EQ(int8_output_name(Int8Output::kInt32), "int32");
  EXPECT_EQ(int8_output_bytes(Int8Output::kInt8), 1u);
  EXPECT_EQ(int8_output_bytes(Int8Output::kFloat), 4u);
  EXPECT_EQ(int8_output_bytes(Int8Output::kInt32), 4u);
}

}  // namespace
}  // namespace tessel::bench
