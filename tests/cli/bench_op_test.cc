// `tessel bench-op --int8`'s command line, and its one-line errors before any GPU work; on a
// machine without a GPU, the one about the GPU.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_util.h"

namespace tessel::testing {
namespace {

bool has_gpu() {
  return run_tessel("run --device cuda /nonexistent.tir").out.find("no CUDA device") ==
         std::string::npos;
}

std::string conv_csv() {
  return write_file("int8_conv.csv",
                    "name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups\n"
                    "l1_3x3,1,14,14,64,64,3,3,1,1,1,1\n"
                    "stem,1,32,32,3,16,7,7,2,3,1,1\n");
}

std::string gemm_csv() {
  return write_file("int8_gemm.csv", "name,m,n,k,layout\nfc,32,1000,2048,NT\n");
}

TEST(BenchOpCli, HelpNamesInt8) {
  const Result r = run_tessel("bench-op --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--int8"), std::string::npos) << r.out;
}

TEST(BenchOpCli, Int8NeedsWorkloadsThatParse) {
  expect_user_error("bench-op --int8", "give at least one --conv2d or --gemm workload file");
  const std::string bad = write_file("int8_bad.csv", "l1,1,14,14,64\n");
  expect_user_error("bench-op --int8 --conv2d " + bad, bad + ":1:");
}

TEST(BenchOpCli, Int8RefusesNoTensorCores) {
  expect_user_error("bench-op --int8 --no-tensor-cores --conv2d " + conv_csv(),
                    "bench-op: --no-tensor-cores chooses tessel's fp16 SIMT kernels; --int8 runs "
                    "Tensor Cores only");
}

TEST(BenchOpCli, Int8WithoutGpuIsOneLineError) {
  if (has_gpu()) GTEST_SKIP() << "a CUDA device is present";
  expect_user_error("bench-op --int8 --conv2d " + conv_csv(), "error: no CUDA device: ");
  expect_user_error("bench-op --int8 --gemm " + gemm_csv() + " --json /tmp/never.json",
                    "error: no CUDA device: ");
  expect_user_error("bench-op --int8 --conv2d " + conv_csv() + " --filter stem",
                    "error: no CUDA device: ");
}

}  // namespace
}  // namespace tessel::testing
