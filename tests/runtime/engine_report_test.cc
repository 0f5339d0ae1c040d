// What `tessel bench` and `tessel profile` compute from measured times, on made-up times whose
// statistics and rates are worked out by hand in the comments.
#include "runtime/engine_report.h"

#include <gtest/gtest.h>

namespace tessel::runtime {
namespace {

// Sorted: 1 2 3 4 5. Median 3; p90 is the ceil(0.9 * 5) = 5th smallest. Batch 8 at 3 ms:
// 8 / 0.003 s = 2666.67 items/s.
TEST(LatencyStats, OddCount) {
  const LatencyStats s = latency_stats({5, 1, 3, 2, 4}, 8);
  EXPECT_DOUBLE_EQ(s.median_ms, 3);
  EXPECT_DOUBLE_EQ(s.p90_ms, 5);
  EXPECT_NEAR(s.throughput_per_s, 8000.0 / 3.0, 1e-9);
  EXPECT_EQ(s.reps, 5);
}

// 20 replays of 1..20 ms: median (10 + 11) / 2 = 10.5; p90 the 18th smallest, 18.
TEST(LatencyStats, EvenCount) {
  std::vector<float> ms;
  for (int i = 20; i >= 1; --i) ms.push_back(static_cast<float>(i));
  const LatencyStats s = latency_stats(ms, 1);
  EXPECT_DOUBLE_EQ(s.median_ms, 10.5);
  EXPECT_DOUBLE_EQ(s.p90_ms, 18);
  EXPECT_NEAR(s.throughput_per_s, 1000.0 / 10.5, 1e-9);
  const LatencyStats one = latency_stats({0.25f}, 4);
  EXPECT_DOUBLE_EQ(one.median_ms, 0.25);
  EXPECT_DOUBLE_EQ(one.p90_ms, 0.25);
  EXPECT_DOUBLE_EQ(one.throughput_per_s, 16000);
}

PlanLaunch launch(const char* node, const char* op, int64_t flops, int64_t bytes,
                  const char* instruction) {
  PlanLaunch l;
  l.node = node;
  l.op = op;
  l.flops = flops;
  l.bytes = bytes;
  l.instruction = instruction;
  return l;
}

// Against the H100 SXM's 989.4 TFLOP/s (Tensor Cores) and 66.9 (SIMT):
//  conv: 9.894e10 FLOPs in 100 us = 989.4 TFLOP/s = 100% of the Tensor Core peak; 4e8 bytes in
//        100 us = 4000 GB/s.
//  pool: 6.69e8 FLOPs in 20 us = 33.45 TFLOP/s = 50% of the SIMT peak.
//  cast: no FLOPs, 8e6 bytes in 80 us = 100 GB/s.
// Total 200 us: 50%, 10%, 40%; laid end to end from 0, 100 and 120 us.
TEST(ProfileReport, RatesSharesAndPeaks) {
  PlanProfile plan;
  plan.launches = {launch("conv1", "tessel.Conv", 98'940'000'000, 400'000'000, "wgmma"),
                   launch("pool", "tessel.MaxPool", 669'000'000, 1000, "SIMT"),
                   launch("out.to_f32", "Cast", 0, 8'000'000, "SIMT")};
  plan.launches[0].schedule = "wgmma_128x128x64_s4_w64x128_sk1_r8";
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  const ProfileReport r = make_profile_report(plan, {0.1f, 0.02f, 0.08f}, 0.19, h100);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_NEAR(r.total_us, 200, 1e-3);
  EXPECT_NEAR(r.replay_us, 190, 1e-9);
  EXPECT_EQ(r.total_flops, 98'940'000'000 + 669'000'000);
  EXPECT_NEAR(r.rows[0].tflops, 989.4, 1e-2);
  EXPECT_NEAR(*r.rows[0].percent_of_peak, 100, 1e-3);
  EXPECT_NEAR(r.rows[0].gbps, 4000, 1e-2);
  EXPECT_NEAR(r.rows[0].percent, 50, 1e-3);
  EXPECT_NEAR(r.rows[1].tflops, 33.45, 1e-3);
  EXPECT_NEAR(*r.rows[1].percent_of_peak, 50, 1e-3);
  EXPECT_NEAR(r.rows[1].start_us, 100, 1e-3);
  EXPECT_NEAR(r.rows[2].start_us, 120, 1e-3);
  EXPECT_NEAR(r.rows[2].gbps, 100, 1e-3);
  EXPECT_NEAR(r.rows[2].percent, 40, 1e-3);

  const std::string table = format_profile(r);
  EXPECT_EQ(table.rfind("% of peak against the NVIDIA H100 SXM datasheet (sm_90a): Tensor Cores "
                        "989.4 TFLOP/s (dense fp16), 1978.9 TOP/s (dense int8), SIMT 66.9 TFLOP/s "
                        "(fp32)\n",
                        0),
            0u)
      << table;
  EXPECT_NE(table.find("conv1"), std::string::npos);
  EXPECT_NE(table.find("wgmma wgmma_128x128x64_s4_w64x128_sk1_r8"), std::string::npos) << table;
  EXPECT_NE(table.find("   100.00         -   50.0    98.94G   989.40   100.0"), std::string::npos) << table;
  EXPECT_NE(table.find("sum of the 3 kernels' own times 200.00 us; one replay of the whole CUDA "
                       "graph 190.00 us\n"),
            std::string::npos)
      << table;
  // Header, column names, three rows, the total, the comparison.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 7) << table;
}

// Predicted 110, 10 and 80 us against measured 100, 20 and 80: errors 10%, 50% and 0%
// (median 10%, two within 10%), 200 us predicted in all against 200 measured.
TEST(ProfileReport, PredictedAgainstMeasured) {
  PlanProfile plan;
  plan.launches = {launch("conv1", "tessel.Conv", 1000, 1000, "mma.sync"),
                   launch("pool", "tessel.MaxPool", 1000, 1000, "SIMT"),
                   launch("cast", "Cast", 0, 1000, "SIMT"),
                   launch("unpredicted", "Relu", 0, 1000, "SIMT")};
  plan.launches[0].predicted_us = 110;
  plan.launches[1].predicted_us = 10;
  plan.launches[2].predicted_us = 80;
  const ProfileReport r =
      make_profile_report(plan, {0.1f, 0.02f, 0.08f, 0.01f}, 0.21, device::DeviceInfo{});
  const PredictionError e = prediction_error(r);
  EXPECT_EQ(e.kernels, 3);
  EXPECT_NEAR(e.median, 0.1, 1e-6);
  EXPECT_EQ(e.within_10_percent, 2);
  EXPECT_NEAR(e.total_predicted_us, 200, 1e-9);
  const std::string table = format_profile(r);
  EXPECT_NE(table.find("   100.00    110.00"), std::string::npos) << table;
  EXPECT_NE(table.find("predicted (tessel predict): 200.00 us in all, -4.8% of the measured sum; "
                       "per kernel median error 10.0%, 2 of 3 within 10%\n"),
            std::string::npos)
      << table;
}

// An int8 contraction (operand dtype i8, or u8: onnxruntime's QUInt8 activations) is measured
// against the int8 Tensor Core peak, twice the fp16 one on the H100: 1.9789e11 ops in 100 us
// are 100% of it (200% of the fp16 one), as an fp16 contraction's 9.894e10 FLOPs in 100 us are
// of its own.
TEST(ProfileReport, Int8ContractionsAgainstTheInt8Peak) {
  PlanProfile plan;
  plan.launches = {launch("qconv", "tessel.Conv", 197'890'000'000, 1000, "wgmma"),
                   launch("uconv", "tessel.Conv", 197'890'000'000, 1000, "mma.sync"),
                   launch("conv", "tessel.Conv", 98'940'000'000, 1000, "wgmma")};
  plan.launches[0].operand_dtype = "i8";
  plan.launches[1].operand_dtype = "u8";
  plan.launches[2].operand_dtype = "f16";
  const ProfileReport r =
      make_profile_report(plan, {0.1f, 0.1f, 0.1f}, 0.3, device::known_device("sm_90a"));
  EXPECT_NEAR(*r.rows[0].percent_of_peak, 100, 1e-3);
  EXPECT_NEAR(*r.rows[1].percent_of_peak, 100, 1e-3);
  EXPECT_NEAR(*r.rows[2].percent_of_peak, 100, 1e-3);
}

TEST(ProfileReport, UnknownDeviceHasNoPeak) {
  PlanProfile plan;
  plan.launches = {launch("relu", "Relu", 1000, 8000, "SIMT")};
  const ProfileReport r = make_profile_report(plan, {0.001f}, 0.001, device::DeviceInfo{});
  EXPECT_FALSE(r.rows[0].percent_of_peak);
  const std::string table = format_profile(r);
  EXPECT_EQ(table.rfind("% of peak: no peak is known for this device\n", 0), 0u) << table;
}

}  // namespace
}  // namespace tessel::runtime
