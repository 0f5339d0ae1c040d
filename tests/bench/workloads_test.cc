// Parsing the benchmark's workload CSV files.
#include "bench/workloads.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tessel::bench {
namespace {

// The first lines of shared/workloads/conv2d.csv, with its comment header.
constexpr const char* kConvCsv =
    "# Public conv2d workloads. Semantics: input NHWC (n,h,w,ci), weight (co,kh,kw,ci/groups), "
    "output NHWC.\n"
    "# name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups\n"
    "seed_mobilenet_1x1_a,1,56,56,64,128,1,1,1,0,1,1\n"
    "seed_nhwc_32_56_56_256_3x3_64,32,56,56,256,64,3,3,1,0,1,1\n"
    "resnet50_conv1_b1,1,224,224,3,64,7,7,2,3,1,1\n";

TEST(ConvWorkloads, ParsesTheSharedFormat) {
  std::vector<ConvWorkload> w = parse_conv_workloads(kConvCsv, "conv2d.csv");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].name, "seed_mobilenet_1x1_a");
  EXPECT_EQ(w[0].n, 1);
  EXPECT_EQ(w[0].h, 56);
  EXPECT_EQ(w[0].w, 56);
  EXPECT_EQ(w[0].ci, 64);
  EXPECT_EQ(w[0].co, 128);
  EXPECT_EQ(w[0].kh, 1);
  EXPECT_EQ(w[0].kw, 1);
  EXPECT_EQ(w[0].stride, 1);
  EXPECT_EQ(w[0].pad, 0);
  EXPECT_EQ(w[0].dilation, 1);
  EXPECT_EQ(w[0].groups, 1);
  EXPECT_EQ(w[0].oh(), 56);
  // 3x3 without padding: 56 - 2.
  EXPECT_EQ(w[1].oh(), 54);
  EXPECT_EQ(w[1].y_elems(), 32u * 54 * 54 * 64);
  // ResNet-50's stem: (224 + 2*3 - 7) / 2 + 1 = 112.
  const ConvWorkload& stem = w[2];
  EXPECT_EQ(stem.oh(), 112);
  EXPECT_EQ(stem.ow(), 112);
  EXPECT_EQ(stem.x_elems(), 224u * 224 * 3);
  EXPECT_EQ(stem.w_elems(), 64u * 7 * 7 * 3);
  // 2 * (112*112 outputs) * 64 channels * (7*7*3) taps = 236,027,904.
  EXPECT_DOUBLE_EQ(stem.flops(), 236027904.0);
  EXPECT_EQ(stem.shape(), "n1 224x224x3 -> 64 k7x7 s2 p3 d1 g1");
}

TEST(ConvWorkloads, GroupsAndDilation) {
  std::vector<ConvWorkload> w = parse_conv_workloads("dw,2,9,10,32,64,3,3,2,2,2,32\n", "x.csv");
  ASSERT_EQ(w.size(), 1u);
  // (9 + 4 - 2*2 - 1) / 2 + 1 = 5 and (10 + 4 - 5) / 2 + 1 = 5.
  EXPECT_EQ(w[0].oh(), 5);
  EXPECT_EQ(w[0].ow(), 5);
  EXPECT_EQ(w[0].w_elems(), 64u * 3 * 3 * 1);  // ci/groups = 1
  EXPECT_DOUBLE_EQ(w[0].flops(), 2.0 * 2 * 5 * 5 * 64 * 3 * 3 * 1);
}

TEST(ConvWorkloads, BlanksCommentsHeaderAndCrlfAreSkipped) {
  std::vector<ConvWorkload> w = parse_conv_workloads(
      "\r\n   # indented comment\r\n"
      "name, n, h, w, ci, co, kh, kw, stride, pad, dilation, groups\r\n"
      " a , 1, 8, 8, 16, 16, 3, 3, 1, 1, 1, 1 \r\n"
      "\n",
      "x.csv");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].name, "a");
  EXPECT_EQ(w[0].groups, 1);
}

// The message of the UserError that parsing `text` raises.
std::string conv_error(const std::string& text) {
  try {
    parse_conv_workloads(text, "bad.csv");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConvWorkloads, MalformedLinesNameFileAndLine) {
  EXPECT_EQ(conv_error("# header\na,1,8,8,16,16,3,3,1,1,1\n"),
            "bad.csv:2: expected 12 comma-separated fields "
            "(name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups), got 11");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,1,1,1,7\n"),
            "bad.csv:1: expected 12 comma-separated fields "
            "(name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups), got 13");
  EXPECT_EQ(conv_error("a,1,8,8,sixteen,16,3,3,1,1,1,1\n"),
            "bad.csv:1: ci is 'sixteen', expected an integer in [1, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,-1,1,1\n"),
            "bad.csv:1: pad is '-1', expected an integer in [0, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,0,1,1,1\n"),
            "bad.csv:1: stride is '0', expected an integer in [1, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,1,1,1.5\n"),
            "bad.csv:1: groups is '1.5', expected an integer in [1, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,1,1,\n"),
            "bad.csv:1: groups is '', expected an integer in [1, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,1,1,4294967297\n"),
            "bad.csv:1: groups is '4294967297', expected an integer in [1, 2147483647]");
  EXPECT_EQ(conv_error("a,1,8,8,16,24,3,3,1,1,1,16\n"),
            "bad.csv:1: ci=16 and co=24 must both be divisible by groups=16");
  EXPECT_EQ(conv_error("a,1,2,8,16,16,5,3,1,1,1,1\n"),
            "bad.csv:1: a 5x3 kernel with dilation 1 does not fit the 2x8 input padded by 1");
  EXPECT_EQ(conv_error("a,1,8,8,16,16,3,3,1,1,1,1\n\na,1,8,8,16,16,1,1,1,0,1,1\n"),
            "bad.csv:3: workload 'a' is defined twice");
  EXPECT_EQ(conv_error(",1,8,8,16,16,3,3,1,1,1,1\n"), "bad.csv:1: empty workload name");
  EXPECT_EQ(conv_error("# only comments\n\n"), "bad.csv: no conv2d workloads");
}

constexpr const char* kGemmCsv =
    "# Public GEMM workloads. C[m,n] = sum_k A[m,k] * B[k,n]; layout names which operand is "
    "transposed in memory:\n"
    "# name,m,n,k,layout\n"
    "seed_nmt_512_64_512_NN,512,64,512,NN\n"
    "seed_nmt_512_64_512_NT,512,64,512,NT\n"
    "seed_nmt_512_64_512_TN,512,64,512,TN\n";

TEST(GemmWorkloads, ParsesTheSharedFormat) {
  std::vector<GemmWorkload> g = parse_gemm_workloads(kGemmCsv, "gemm.csv");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].name, "seed_nmt_512_64_512_NN");
  EXPECT_EQ(g[0].m, 512);
  EXPECT_EQ(g[0].n, 64);
  EXPECT_EQ(g[0].k, 512);
  EXPECT_EQ(g[0].layout, GemmLayout::kNN);
  EXPECT_EQ(g[1].layout, GemmLayout::kNT);
  EXPECT_EQ(g[2].layout, GemmLayout::kTN);
  EXPECT_DOUBLE_EQ(g[0].flops(), 2.0 * 512 * 64 * 512);
  EXPECT_EQ(g[0].a_elems(), 512u * 512);
  EXPECT_EQ(g[0].b_elems(), 512u * 64);
  EXPECT_EQ(g[0].c_elems(), 512u * 64);
  EXPECT_EQ(g[1].shape(), "512x64x512 NT");
}

std::string gemm_error(const std::string& text) {
  try {
    parse_gemm_workloads(text, "g.csv");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GemmWorkloads, MalformedLinesNameFileAndLine) {
  EXPECT_EQ(gemm_error("a,1,2,3,TT\n"), "g.csv:1: layout is 'TT', expected NN, NT or TN");
  EXPECT_EQ(gemm_error("a,1,2,3,nn\n"), "g.csv:1: layout is 'nn', expected NN, NT or TN");
  EXPECT_EQ(gemm_error("# c\na,1,2,3\n"),
            "g.csv:2: expected 5 comma-separated fields (name,m,n,k,layout), got 4");
  EXPECT_EQ(gemm_error("a,0,2,3,NN\n"),
            "g.csv:1: m is '0', expected an integer in [1, 2147483647]");
  EXPECT_EQ(gemm_error("a,1,2,3x,NN\n"),
            "g.csv:1: k is '3x', expected an integer in [1, 2147483647]");
  EXPECT_EQ(gemm_error(""), "g.csv: no gemm workloads");
}

TEST(ConvWorkloads, OneByOneStrideOneConvsAreGemms) {
  // resnet50_l3_1x1_512_256_b32: x (32*28*28, 512) times the weight (256, 512) transposed.
  std::vector<ConvWorkload> w = parse_conv_workloads(
      "l3,32,28,28,512,256,1,1,1,0,1,1\n"
      "dilated,2,7,9,64,32,1,1,1,0,3,1\n"  // a 1x1 tap is where it is, dilated or not
      "ds,32,28,28,512,1024,1,1,2,0,1,1\n"
      "padded,1,8,8,16,16,1,1,1,1,1,1\n"
      "grouped,1,8,8,16,16,1,1,1,0,1,2\n"
      "3x3,1,8,8,16,16,3,3,1,1,1,1\n"
      "1x3,1,8,8,16,16,1,3,1,0,1,1\n",
      "x.csv");
  ASSERT_EQ(w.size(), 7u);
  const std::optional<GemmWorkload> g = as_gemm(w[0]);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->m, 32 * 28 * 28);
  EXPECT_EQ(g->n, 256);
  EXPECT_EQ(g->k, 512);
  EXPECT_EQ(g->layout, GemmLayout::kNT);
  EXPECT_EQ(g->name, "l3");
  // The same operands and the same work: A is x, B the weight, C is y, element for element.
  EXPECT_EQ(g->a_elems(), w[0].x_elems());
  EXPECT_EQ(g->b_elems(), w[0].w_elems());
  EXPECT_EQ(g->c_elems(), w[0].y_elems());
  EXPECT_DOUBLE_EQ(g->flops(), w[0].flops());

  const std::optional<GemmWorkload> d = as_gemm(w[1]);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->m, 2 * 7 * 9);
  EXPECT_EQ(d->c_elems(), w[1].y_elems());
  for (size_t i = 2; i < w.size(); ++i) EXPECT_FALSE(as_gemm(w[i]).has_value()) << w[i].name;
}

TEST(Workloads, FilesAreReadAndMissingFilesReported) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "tessel_bench_gemm.csv";
  std::ofstream(path) << kGemmCsv;
  EXPECT_EQ(read_gemm_workloads(path.string()).size(), 3u);
  std::filesystem::remove(path);
  try {
    read_gemm_workloads(path.string());
    FAIL() << "read a missing file";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot open workload file '" + path.string() + "'");
  }
  // A file's errors name the file.
  std::ofstream(path) << "x,1,1,1,NN\nx,1,1,1,NN\n";
  try {
    read_gemm_workloads(path.string());
    FAIL() << "accepted a duplicate";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ":2: workload 'x' is defined twice");
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessel::bench
