// The driver layer as seen from a machine with or without a GPU. Runs in the CPU suite: where
// no device exists it checks the refusal; where one does, that the device is described sanely.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "device/cuda_api.h"

namespace tessel::device {
namespace {

TEST(Driver, AvailabilityIsReportedWithAReason) {
  std::string reason;
  if (cuda_available(&reason)) {
    EXPECT_EQ(reason, "");
    DeviceInfo info = device_info(0);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GE(info.cc_major, 7) << "tessel's Tensor Core paths need sm_70+";
    EXPECT_GT(info.sm_count, 0);
    EXPECT_GE(info.max_threads_per_block, 1024);
    EXPECT_GE(info.smem_per_block_optin, 48u * 1024);
    EXPECT_GT(info.l2_bytes, 0u);
    EXPECT_GT(info.global_mem, size_t{1} << 30);
    EXPECT_TRUE(std::regex_match(info.arch(), std::regex(R"(sm_\d+a?)"))) << info.arch();
    EXPECT_THROW(device_info(1000), UserError);
    return;
  }
  EXPECT_FALSE(reason.empty());
  // cuda_available(nullptr) is the same answer without the reason.
  EXPECT_FALSE(cuda_available());
}

TEST(Driver, DeviceWorkWithoutADeviceIsAUserError) {
  std::string reason;
  if (cuda_available(&reason)) GTEST_SKIP() << "a GPU is present; tests/gpu covers device work";
  // Each entry point that needs a device refuses with the same explanation.
  auto expect_refusal = [&](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " worked without a device";
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()), "no CUDA device: " + reason) << what;
    }
  };
  expect_refusal([] { device_info(0); }, "device_info");
  expect_refusal([] { DeviceScope scope(0); }, "DeviceScope");
  EXPECT_EQ(gpu_count(), 0);
  EXPECT_EQ(current_gpu(), 0);
  expect_refusal([] { DeviceBuffer b(256); }, "DeviceBuffer");
  expect_refusal([] { synchronize(); }, "synchronize");
  expect_refusal([] { Module::load("\177ELF"); }, "Module::load");
  expect_refusal([] { time_with_events([](void*) {}, 1, 1); }, "time_with_events");
  int calls = 0;
  expect_refusal([&] { CapturedGraph g([&](void*) { ++calls; }, 4); }, "CapturedGraph");
  EXPECT_EQ(calls, 0) << "nothing is captured without a device";
  // Nothing to free, so a default or empty buffer needs no device.
  DeviceBuffer empty(0);
  EXPECT_EQ(empty.ptr(), 0u);
}

TEST(DeviceInfo, ArchNamesTheSassTarget) {
  DeviceInfo d;
  d.cc_major = 9;
  d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_90a");  // Hopper: wgmma needs the arch-specific target
  d.cc_major = 8;
  d.cc_minor = 6;
  EXPECT_EQ(d.arch(), "sm_86");
  d.cc_major = 8;
  d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_80");
  d.cc_major = 10;
  d.cc_minor = 0;
  EXPECT_EQ(d.arch(), "sm_100");
}

}  // namespace
}  // namespace tessel::device
