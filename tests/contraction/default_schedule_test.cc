// tune/: Schedule::name, the device model, the schedule space and the default pick.
#include "tune/default_schedule.h"

#include <gtest/gtest.h>

#include <set>

#include "contraction/ops_maps.h"
#include "workloads.h"

namespace tessel::tune {
namespace {

using contraction::Contraction;
using contraction::conv2d_nhwc_maps;
using contraction::Conv2dParams;
using contraction::gemm_maps;

// Opt-in shared memory per block as the CUDA runtime reports it.
const DeviceInfoLite kA100{108, 163 * 1024, 8, 0};
const DeviceInfoLite kH100{132, 227 * 1024, 9, 0};
const DeviceInfoLite kA10{72, 99 * 1024, 8, 6};
const DeviceInfoLite kSmallSmem{40, 48 * 1024, 8, 0};  // a device without the opt-in

Contraction contraction_of(const contraction::IndexMaps& maps) {
  contraction::MatchResult r = contraction::match(maps);
  EXPECT_TRUE(r.contraction);
  return r.contraction.value_or(Contraction{});
}

Contraction gemm(int64_t m, int64_t n, int64_t k, const char* layout = "NN") {
  return contraction_of(gemm_maps(m, n, k, *contraction::parse_gemm_layout(layout)));
}

TEST(Schedule, Name) {
  Schedule s;
  EXPECT_EQ(s.name(), "tc_128x128x32_s3_w64x64_sk1_r8");
  EXPECT_EQ(s.threads(), 128);
  s.a_vec = 4;
  s.split_k = 3;
  EXPECT_EQ(s.name(), "tc_128x128x32_s3_w64x64_sk3_r8_v4x8");
  s.instruction = Instruction::kWgmma;
  EXPECT_EQ(s.name().substr(0, 6), "wgmma_");
}

TEST(DeviceModel, ArchFactsPickTheNewestRowAtOrBelow) {
  EXPECT_EQ(arch_facts(kA100).cc, 80);
  EXPECT_EQ(arch_facts({1, 0, 8, 7}).cc, 86);
  EXPECT_EQ(arch_facts({1, 0, 12, 0}).cc, 90);
  EXPECT_EQ(arch_facts({1, 0, 7, 5}).cc, 80);
}

TEST(DeviceModel, ResidentCtas) {
  // A100: 65536 registers, 2048 threads, 164 KiB of shared memory (1 KiB reserved per CTA).
  EXPECT_EQ(resident_ctas(kA100, 128, 224, 48 * 1024), 2);  // registers: 65536 / 28672
  EXPECT_EQ(resident_ctas(kA100, 128, 64, 48 * 1024), 3);   // smem: 164 KiB / 49 KiB
  EXPECT_EQ(resident_ctas(kA100, 256, 128, 96 * 1024), 1);
  EXPECT_EQ(resident_ctas(kA100, 64, 32, 1024), 32);        // the CTA limit
  EXPECT_EQ(resident_ctas(kA100, 128, 64, 164 * 1024), 0);  // above the opt-in maximum
  EXPECT_EQ(resident_ctas(kA10, 512, 32, 1024), 3);         // sm_86: 1536 threads
}

TEST(SmemBytes, OperandPipelines) {
  Schedule s;  // 128x128x32, 3 stages: (128 + 128) * 32 * 2 bytes * 3
  EXPECT_EQ(smem_bytes(gemm(256, 256, 256), s), 49152u);
  Contraction i8 =
      contraction_of(gemm_maps(256, 256, 256, {}, {DType::kI8, DType::kI8, DType::kI32}));
  EXPECT_EQ(smem_bytes(i8, s), 24576u);
}

TEST(Estimate, WavesAndQuantization) {
  // 8192^3 in 128x128 tiles on A100: 4096 tiles, 2 resident per SM -> ceil(4096 / 216) = 19.
  Schedule s;
  s.warp_m = s.warp_n = 64;
  ScheduleEstimate e = estimate(gemm(8192, 8192, 8192), s, kA100);
  EXPECT_EQ(e.tiles, 4096);
  EXPECT_EQ(e.ctas_per_sm, 2);
  EXPECT_EQ(e.waves, 19);
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 4096.0 / (19 * 216));
  EXPECT_DOUBLE_EQ(e.quantization, 1.0);
  EXPECT_DOUBLE_EQ(e.intensity, 64.0);  // 2*128*128 flops per (128+128)*2 bytes
  // Compute bound near the A100's 2048 flops/clk/SM: within 10% of the ideal time.
  double ideal = 2.0 * 8192 * 8192 * 8192 / (108 * 2048.0);
  EXPECT_GT(e.cycles, ideal);
  EXPECT_LT(e.cycles, 1.1 * ideal);

  // M = 49 in 64-row tiles pads to 64.
  Schedule small = s;
  small.block_m = small.block_n = 64;
  small.warp_m = small.warp_n = 32;
  EXPECT_DOUBLE_EQ(estimate(gemm(49, 2048, 512), small, kA100).quantization, 64.0 / 49);
}

TEST(DefaultSchedule, SeedShapes) {
  for (const DeviceInfoLite& device : {kA100, kH100}) {
    SCOPED_TRACE(device.cc_major);
    // NMT 512x16x512: a narrow N tile, not 128 columns of which 112 are padding.
    Schedule narrow = default_schedule(gemm(512, 16, 512), device);
    EXPECT_EQ(narrow.instruction, Instruction::kMmaSync);
    EXPECT_LE(narrow.block_n, 32) << narrow.name();

    // 8192^3: a big tile, swizzled, no split.
    Schedule big = default_schedule(gemm(8192, 8192, 8192), device);
    EXPECT_GE(big.block_m * big.block_n, 128 * 128) << big.name();
    EXPECT_EQ(big.split_k, 1);
    EXPECT_EQ(big.raster, 8);

    // Batch-1 ResNet-50 layer 4, 1x1 512->2048 on 7x7: M = 49.
    Conv2dParams p;
    p.h = p.w = 7;
    p.ci = 512;
    p.co = 2048;
    Contraction l4 = contraction_of(conv2d_nhwc_maps(p));
    ASSERT_EQ(l4.m, 49);
    Schedule s = default_schedule(l4, device);
    EXPECT_TRUE(s.split_k > 1 || s.block_m * s.block_n <= 64 * 64) << s.name();
    EXPECT_LE(s.block_m, 64) << s.name();

    // ResNet-50's classifier at batch 1 (1x1000x2048): 16 N tiles cannot fill the SMs, K is
    // deep, so K is split.
    Schedule fc = default_schedule(gemm(1, 1000, 2048, "NT"), device);
    EXPECT_GT(fc.split_k, 1) << fc.name();
    EXPECT_GE(2048 / fc.split_k, 256);
  }
}

TEST(DefaultSchedule, FallsBackToSimt) {
  Conv2dParams stem;  // ci = 3: no aligned vectors
  stem.h = stem.w = 224;
  stem.ci = 3;
  stem.co = 64;
  stem.kh = stem.kw = 7;
  Contraction c = contraction_of(conv2d_nhwc_maps(stem));
  Schedule s = default_schedule(c, kA100);
  EXPECT_EQ(s.instruction, Instruction::kSimt);
  EXPECT_EQ(s.name(), "simt_64x64x16_s2_w32x16_sk1_r1_v1x1");
  EXPECT_EQ(s.threads(), 256);
  EXPECT_EQ(enumerate_schedules(c, kA100), std::vector<Schedule>{s});
  // mma.sync m16n8k16 needs sm_80.
  Schedule turing = default_schedule(gemm(1024, 1024, 1024), {40, 64 * 1024, 7, 5});
  EXPECT_EQ(turing.instruction, Instruction::kSimt);
}

TEST(EnumerateSchedules, IsTheLegalSpace) {
  Contraction c = gemm(1024, 1024, 4096);
  std::vector<Schedule> space = enumerate_schedules(c, kA100);
  std::set<std::string> names;
  for (const Schedule& s : space) {
    EXPECT_TRUE(names.insert(s.name()).second) << "duplicate " << s.name();
    EXPECT_LE(smem_bytes(c, s), kA100.smem_per_block) << s.name();
    EXPECT_EQ(s.block_m % s.warp_m, 0);
    EXPECT_EQ(s.block_n % s.warp_n, 0);
    EXPECT_GE(s.warps(), 2);
    EXPECT_LE(s.warps(), 8);
    EXPECT_GE(s.stages, 2);
    EXPECT_LE(s.stages, 5);
  }
  // (CTA, warp) pairs with 2..8 warps: 128x256 and 256x128 with 64x64 warps; 128x128 with
  // 64x64, 64x32, 32x64; 128x64 and 64x128 with all four; 64x64 with all but 64x64; 64x32
  // and 32x64 with 32x32: 18. Times 4 stages x 2 rasters x the splits: all 8 for block_k 32
  // (128 K tiles), 7 for block_k 64 (64 K tiles in 12 splits of 6 leave the last empty).
  // Minus the 128x256 / 256x128 pipelines with block_k 64 and 4 or 5 stages, above 163 KiB
  // ((128 + 256) * 64 * 2 bytes = 48 KiB per stage).
  EXPECT_EQ(names.count("tc_128x256x64_s5_w64x64_sk1_r1"), 0u);
  EXPECT_EQ(names.count("tc_128x256x64_s3_w64x64_sk1_r1"), 1u);
  EXPECT_EQ(names.count("tc_32x64x32_s2_w32x32_sk16_r8"), 1u);
  EXPECT_EQ(space.size(), 18u * 4 * 2 * (8 + 7) - 2 * 2 * 2 * 7);

  // Split-K never leaves a split without K: K = 96 in 32-deep tiles allows 1..3.
  std::set<int> splits;
  for (const Schedule& s : enumerate_schedules(gemm(256, 256, 96), kA100))
    if (s.block_k == 32) splits.insert(s.split_k);
  EXPECT_EQ(splits, (std::set<int>{1, 2, 3}));
}

// Every public workload on every device model: the default is legal, fits, and no
// candidate the default considers is predicted more than the tie tolerance faster.
TEST(DefaultSchedule, PropertiesOverAllWorkloads) {
  std::optional<std::string> dir = contraction::testing::workloads_dir();
  if (!dir) GTEST_SKIP() << "shared/workloads not found beside " << TESSEL_SOURCE_DIR;
  std::vector<contraction::testing::Workload> all = contraction::testing::load_workloads(*dir);
  ASSERT_GT(all.size(), 60u);
  for (const DeviceInfoLite& device : {kA100, kH100, kA10, kSmallSmem}) {
    for (const contraction::testing::Workload& w : all) {
      SCOPED_TRACE(w.name + " on sm_" + std::to_string(device.cc_major * 10 + device.cc_minor));
      Contraction c = contraction_of(w.maps);
      Schedule s = default_schedule(c, device);
      ScheduleEstimate e = estimate(c, s, device);
      EXPECT_LE(smem_bytes(c, s), device.smem_per_block) << s.name();
      EXPECT_GE(e.ctas_per_sm, 1) << s.name();
      EXPECT_LE(s.a_vec, c.a_vec);
      EXPECT_LE(s.b_vec, c.b_vec);
      if (s.instruction == Instruction::kSimt) {
        EXPECT_FALSE(contraction::tensor_core_eligible(c)) << "eligible but SIMT";
        continue;
      }
      EXPECT_TRUE(contraction::tensor_core_eligible(c));
      EXPECT_GE(s.stages, 3);  // every device here fits a 3-stage pipeline
      EXPECT_LE(s.stages, 4);
      if (s.split_k > 1) {
        EXPECT_LT(
            c.batch * ((c.m + s.block_m - 1) / s.block_m) * ((c.n + s.block_n - 1) / s.block_n),
            device.sm_count)
            << s.name();
        EXPECT_GE(c.k / s.split_k, 256) << s.name();
      }
      for (const Schedule& other : enumerate_schedules(c, device)) {
        if (other.stages < 3 || other.stages > 4 || other.split_k != 1 || other.raster != 1)
          continue;
        EXPECT_GE(estimate(c, other, device).cycles * 1.02, e.cycles)
            << other.name() << " beats " << s.name();
      }
    }
  }
}

}  // namespace
}  // namespace tessel::tune
