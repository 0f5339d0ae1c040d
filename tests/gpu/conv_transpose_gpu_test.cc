// ConvTranspose on the GPU: convert-layout makes each one the stride-1 tessel.Conv of its
// phases with a depth_to_space store (ops/conv_transpose_phases.h), which runs on the conv
// kernels. A small UNet (k3 s2 p1 op1 with a ReLU, k2 s2; both with bias, batch 2) and the
// ConvTransposes at the graph's edges (NCHW read and store, a crop, a depthwise one), each
// compiled for the GPU present and run against runtime::cpu::run_graph on two random inputs:
// relative L2 2e-2 in fp16, 1e-3 in fp32. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include "device/cuda_api.h"
#include "gpu/gpu_test_util.h"
#include "ir/conv_transpose_nets.h"
#include "runtime/cpu/executor.h"
#include "runtime/engine.h"

namespace tessel::runtime {
namespace {


class ConvTransposeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    sm80_ = device::device_info().cc_major >= 8;
  }

  // Compiles `g`, checks that no ConvTranspose is left, and runs it on seeds 1 and 2.
  Session check(const ir::Graph& g, Precision precision, double tolerance) {
    Session s = testing::compile_session(g, precision);
    for (const ir::Node& n : s.graph()->nodes) EXPECT_NE(n.op, "ConvTranspose") << n.label();
    testing::expect_engine_matches_cpu(s, g, tolerance);
    return s;
  }

  bool sm80_ = false;  // mma.sync m16n8k16 exists: Tensor Core kernels are expected
};

TEST_F(ConvTransposeGpu, UnetFp16) {
  const Session s = check(testing::unet_like(), Precision::kFp16, 2e-2);
  if (sm80_) {
    EXPECT_GE(s.engine()->stats().tensor_core_kernels, 8);  // all eight convs
  }
}

TEST_F(ConvTransposeGpu, UnetFp32) { check(testing::unet_like(), Precision::kFp32, 1e-3); }

TEST_F(ConvTransposeGpu, EdgesCropsAndGroupsFp16) {
  check(testing::conv_transpose_edges(), Precision::kFp16, 2e-2);
}

TEST_F(ConvTransposeGpu, EdgesCropsAndGroupsFp32) {
  check(testing::conv_transpose_edges(), Precision::kFp32, 1e-3);
}

}  // namespace
}  // namespace tessel::runtime
