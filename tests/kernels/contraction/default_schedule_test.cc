// tune/: Schedule, the device model, the cost model, the schedule space and the default pick.
#include "kernels/default_schedule.h"
#include "kernels/test_devices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "kernels/contraction/ops_maps.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/estimate.h"
#include "kernels/rank_fit.h"
#include "workloads.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;
using contraction::conv2d_nhwc_maps;
using contraction::Conv2dParams;
using contraction::gemm_maps;

// Opt-in shared memory per block as the CUDA runtime reports it.
const device::DeviceInfo kA100 = testing::device_of(108, 163 * 1024, 8, 0);
const device::DeviceInfo kH100 = testing::device_of(132, 227 * 1024, 9, 0);
const device::DeviceInfo kA10 = testing::device_of(72, 99 * 1024, 8, 6);
const device::DeviceInfo kSmallSmem = testing::device_of(40, 48 * 1024, 8, 0);  // a device without the opt-in

Contraction contraction_of(const contraction::IndexMaps& maps) {
  contraction::MatchResult r = contraction::match(maps);
  EXPECT_TRUE(r.contraction);
  return r.contraction.value_or(Contraction{});
}

Contraction gemm(int64_t m, int64_t n, int64_t k, const char* layout = "NN") {
  return contraction_of(gemm_maps(m, n, k, *contraction::parse_gemm_layout(layout)));
}

Contraction conv(int64_t n, int64_t hw, int64_t ci, int64_t co, int64_t k, int64_t stride,
                 int64_t pad, contraction::OperandDTypes types = {}) {
  Conv2dParams p;
  p.n = n;
  p.h = p.w = hw;
  p.ci = ci;
  p.co = co;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  return contraction_of(conv2d_nhwc_maps(p, types));
}

TEST(Schedule, NameAndThreads) {
  Schedule s;
  EXPECT_EQ(s.name(), "tc_128x128x32_s3_w64x64_sk1_r8");
  EXPECT_EQ(s.warps(), 4);
  EXPECT_EQ(s.threads(), 128);
  s.a_vec = 4;
  s.split_k = 3;
  EXPECT_EQ(s.name(), "tc_128x128x32_s3_w64x64_sk3_r8_v4x8");

  // wgmma: warp_m x warp_n is a warpgroup's tile. 128x256 in two 64x256 warpgroups is 8 warps,
  // 256 threads: the block size codegen launches it with.
  Schedule wg;
  wg.instruction = Instruction::kWgmma;
  wg.block_m = 128;
  wg.block_n = 256;
  wg.block_k = 64;
  wg.warp_m = 64;
  wg.warp_n = 256;
  wg.stages = 4;
  EXPECT_EQ(wg.name(), "wgmma_128x256x64_s4_w64x256_sk1_r8");
  EXPECT_EQ(wg.warp_tiles(), 2);
  EXPECT_EQ(wg.warps(), 8);
  EXPECT_EQ(wg.threads(), 256);
}

// tessel tune's candidate order: each family's best few lead, then the rank order.
TEST(Schedule, FamilySpreadOrder) {
  Schedule tc, tma, halo;
  tma.instruction = Instruction::kWgmma;
  tma.mainloop = Mainloop::kTma;
  tma.block_k = 64;
  tma.warp_m = tma.block_m;
  tma.warp_n = tma.block_n;
  halo.mainloop = Mainloop::kHalo;
  halo.tile_w = 16;
  EXPECT_EQ(tc.family(), "tc");
  EXPECT_EQ(tma.family(), "tma");
  EXPECT_EQ(halo.family(), "halo");
  // Ranked: five mma.sync schedules ahead of two TMA ones and a halo one.
  const std::vector<Schedule> ranked = {tc, tc, tc, tc, tc, tma, tma, halo};
  EXPECT_EQ(family_spread_order(ranked, 2), (std::vector<size_t>{0, 1, 5, 6, 7, 2, 3, 4}));
  EXPECT_EQ(family_spread_order(ranked, 0), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(family_spread_order({}, 3).empty());
}

TEST(ArchTable, ArchFactsPickTheNewestRowAtOrBelow) {
  EXPECT_EQ(arch_facts(kA100).cc, 80);
  EXPECT_EQ(arch_facts(testing::device_of(1, 0, 8, 7)).cc, 86);
  EXPECT_EQ(arch_facts(testing::device_of(1, 0, 12, 0)).cc, 90);
  EXPECT_EQ(arch_facts(testing::device_of(1, 0, 7, 5)).cc, 80);
  // wgmma is sm_90a's alone: not on Ampere, not on later architectures.
  EXPECT_TRUE(has_wgmma(kH100));
  EXPECT_FALSE(has_wgmma(kA100));
  EXPECT_FALSE(has_wgmma(testing::device_of(1, 0, 10, 0)));
  EXPECT_EQ(arch_facts(kH100).wgmma_flops_per_clk, 2 * arch_facts(kH100).mma_flops_per_clk);
  // Instruction families and shared memory per CTA, per SM version.
  EXPECT_TRUE(arch_facts(kA100).instructions & kMmaSyncS8);
  EXPECT_FALSE(arch_facts(kA100).instructions & kWgmmaF16);
  EXPECT_TRUE(arch_facts(kH100).instructions & kWgmmaS8);
  EXPECT_EQ(arch_facts(kA100).smem_per_block_kib, 163);
  EXPECT_EQ(arch_facts(kH100).smem_per_block_kib, 227);
  EXPECT_EQ(arch_facts(kA10).smem_per_block_kib, 99);
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

TEST(SmemBytes, PipelineStagingAndExtras) {
  Schedule s;  // 128x128x32, 3 stages: (128 + 128) * 32 * 2 bytes * 3
  EXPECT_EQ(smem_bytes(gemm(256, 256, 256), s), 49152u);
  Contraction i8 =
      contraction_of(gemm_maps(256, 256, 256, {}, {DType::kI8, DType::kI8, DType::kI32}));
  EXPECT_EQ(smem_bytes(i8, s), 24576u);
  s.split_k = 2;  // + the 16-byte arrival flag
  EXPECT_EQ(smem_bytes(gemm(256, 256, 256), s), 49152u + 16);

  // wgmma 128x256x64, 4 stages: 4 * (128 + 256) * 64 * 2 + 1 KiB of atom alignment, the
  // 197632 bytes codegen's plan gives this kernel.
  Schedule wg;
  wg.instruction = Instruction::kWgmma;
  wg.block_m = 128;
  wg.block_n = 256;
  wg.block_k = 64;
  wg.warp_m = 64;
  wg.warp_n = 256;
  wg.stages = 4;
  EXPECT_EQ(smem_bytes(gemm(1024, 1024, 1024), wg), 197632u);

  // SIMT: the per-warp staging of whole warp tiles, 8 warps * 32 * (16 + 4) floats, is more
  // than the operand tiles, 16 * (68 + 68) floats.
  Contraction c = gemm(256, 256, 256);
  EXPECT_EQ(smem_bytes(c, simt_schedule(c)), 8u * 32 * 20 * 4);
}

TEST(Estimate, WavesAndQuantization) {
  // 8192^3 in 128x128 tiles on A100: 4096 tiles, 2 resident per SM (224 registers) ->
  // ceil(4096 / 216) = 19 waves.
  Schedule s;
  ScheduleEstimate e = estimate(gemm(8192, 8192, 8192), s, kA100);
  EXPECT_EQ(e.tiles, 4096);
  EXPECT_EQ(e.regs_per_thread, 32 + 128 + 64);
  EXPECT_EQ(e.ctas_per_sm, 2);
  EXPECT_EQ(e.waves, 19);
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 4096.0 / (19 * 216));
  EXPECT_DOUBLE_EQ(e.quantization, 1.0);
  EXPECT_DOUBLE_EQ(e.intensity, 64.0);  // 2*128*128 flops per (128+128)*2 bytes
  // Compute bound: above the A100's 2048 flops/clk/SM ideal, within 1.5x of it (shared-memory
  // reads of 64x64 warp tiles and the epilogue take the rest), far above the DRAM bound.
  const double ideal = 2.0 * 8192 * 8192 * 8192 / (108 * 2048.0);
  EXPECT_GT(e.cycles, ideal);
  EXPECT_LT(e.cycles, 1.5 * ideal);
  EXPECT_LT(10 * e.dram_cycles, e.cycles);
  EXPECT_NEAR(e.microseconds, 0.83 + e.cycles / 1410, 1e-9);  // launch + cycles at 1410 MHz

  // M = 49 in 64-row tiles pads to 64.
  Schedule small = s;
  small.block_m = small.block_n = 64;
  small.warp_m = small.warp_n = 32;
  EXPECT_DOUBLE_EQ(estimate(gemm(49, 2048, 512), small, kA100).quantization, 64.0 / 49);
}

TEST(Estimate, InstructionRatesAndRegisters) {
  // On the H100, the same 128x256x64 tile is faster with wgmma than with mma.sync (measured:
  // 1948 vs 2725 us at 8192^3), and the model agrees by a clear margin.
  Contraction big = gemm(8192, 8192, 8192);
  Schedule wg;
  wg.instruction = Instruction::kWgmma;
  wg.block_m = 128;
  wg.block_n = 256;
  wg.block_k = 64;
  wg.warp_m = 64;
  wg.warp_n = 256;
  wg.stages = 4;
  Schedule mma = wg;
  mma.instruction = Instruction::kMmaSync;
  mma.block_k = 32;
  mma.warp_m = mma.warp_n = 64;
  mma.stages = 3;
  EXPECT_LT(1.3 * estimate(big, wg, kH100).cycles, estimate(big, mma, kH100).cycles);
  // A warpgroup's 64x256 tile: 64 * 256 / 128 accumulators per thread.
  EXPECT_EQ(estimate_regs(big, wg), 32 + 128);

  // The 2-byte register path holds a k-tile of loads per thread in flight: ci=3, 64x64x32 with
  // 4 warps stages 64*32/128 = 16 elements of A and 16 of B per thread, 4 registers each.
  Contraction stem = conv(32, 224, 3, 64, 7, 2, 3);
  Schedule v1;
  v1.block_m = v1.block_n = 64;
  v1.warp_m = v1.warp_n = 32;
  v1.a_vec = v1.b_vec = 1;
  EXPECT_EQ(estimate_regs(stem, v1), 32 + 16 + 32 + 2 * (8 + 8) + 4 * (16 + 16));
  // ... and costs more per element than 8-byte cp.async vectors of the ci=4 pad.
  Contraction stem4 = conv(32, 224, 4, 64, 7, 2, 3);
  Schedule v4 = v1;
  v4.a_vec = v4.b_vec = 4;
  EXPECT_GT(estimate(stem, v1, kH100).cycles / stem.k, estimate(stem4, v4, kH100).cycles / stem4.k);
}

TEST(Estimate, SplitKPaysForItsPartials) {
  // ResNet-50's classifier at batch 1 (1x1000x2048) in 32x64 tiles: 16 CTAs for 132 SMs.
  // Splitting K by 8 is faster (measured 5.75 vs 9.65 us), splitting by 16 with 128x128
  // tiles is not (the last CTA sums 15 partial tiles of 64 KiB: measured 49.5 us).
  Contraction fc = gemm(1, 1000, 2048, "NT");
  Schedule s;
  s.block_m = 32;
  s.block_n = 64;
  s.block_k = 64;
  s.warp_m = s.warp_n = 32;
  Schedule split8 = s;
  split8.split_k = 8;
  EXPECT_LT(estimate(fc, split8, kH100).cycles, estimate(fc, s, kH100).cycles);
  Schedule big;
  big.stages = 4;
  big.split_k = 16;
  EXPECT_GT(estimate(fc, big, kH100).cycles, 2 * estimate(fc, split8, kH100).cycles);
}

// VGG-16's fc6 at batch 32 streams 205 MB of weights: DRAM bounds every schedule, and what
// separates them is how many of the weights' bytes the resident CTAs keep in flight (H200,
// 2026-11-29, bench-op: cp.async wgmma 64x64 split 2, 128 CTAs, 78.2 us; mma.sync 32x64 split
// 4, 256 CTAs, 56.3 us; cuBLASLt 53.9). At full bandwidth both estimates were the DRAM bound.
TEST(Estimate, AStreamedOperandsBandwidthIsTheBytesInFlight) {
  const Contraction fc6 = gemm(32, 4096, 25088, "NT");
  const Schedule few = *parse_schedule("wgmma_64x64x64_s5_w64x64_sk2_r8", fc6);
  const Schedule many = *parse_schedule("tc_32x64x64_s4_w16x32_sk4_r8", fc6);
  const ScheduleEstimate a = estimate(fc6, few, kH100), b = estimate(fc6, many, kH100);
  EXPECT_GT(a.dram_cycles, 1.2 * b.dram_cycles);
  EXPECT_GT(a.microseconds, 1.2 * b.microseconds);
  EXPECT_NE(default_schedule(fc6, kH100).name(), few.name());
  // A kernel that is not DRAM-bound keeps the full-bandwidth bound (its serial path carries the
  // streaming latency): the classifier at batch 1, 4 MB of weights.
  const Contraction fc = gemm(1, 1000, 2048, "NT");
  const Schedule s = *parse_schedule("tc_32x64x64_s4_w16x32_sk1_r8", fc);
  EXPECT_LT(estimate(fc, s, kH100).dram_cycles, estimate(fc, s, kH100).cycles);
}

TEST(Estimate, TheResidualMovesWithTheEpilogue) {
  // ResNet-50's 56x56 residual conv at batch 32 (64 -> 256, K = 64) on the mma.sync 128x128
  // tile: measured 57-66 us on an H100 (2026-11-28) where the estimate without its residual
  // said 34 us. Reading an f16 residual per output doubles the epilogue's traffic and adds the
  // residual's 51 MB to the DRAM bound.
  const Contraction c = conv(32, 56, 64, 256, 1, 1, 0);
  const Schedule s;  // tc_128x128x32_s3_w64x64
  const ScheduleEstimate plain = estimate(c, s, kH100);
  const ScheduleEstimate residual = estimate(c, s, kH100, /*epilogue_read_bytes=*/2);
  EXPECT_GT(residual.cycles, 1.3 * plain.cycles);
  EXPECT_DOUBLE_EQ(residual.dram_cycles - plain.dram_cycles,
                   plain.dram_cycles * (32.0 * 56 * 56 * 256 * 2) /
                       (32.0 * 56 * 56 * 64 * 2 + 256.0 * 64 * 2 + 32.0 * 56 * 56 * 256 * 2));
  EXPECT_GT(residual.microseconds, 45);
  // A long-K conv's epilogue is a small part of it: the residual changes little.
  const Contraction deep = conv(32, 14, 2304, 256, 1, 1, 0);
  EXPECT_LT(estimate(deep, s, kH100, 2).cycles, 1.1 * estimate(deep, s, kH100).cycles);
}

// The learned correction (rank_fit.h): the estimate times exp(the family's coefficients . its
// features + the class's offset) on the architecture it was fitted on, the estimate elsewhere
// and for families it leaves alone. On ResNet-50's 56x56 stride-2 projection at batch 32
// (256 -> 512), tune measured TMA 128x128 with 4 stages at 15.8 us and mma.sync 128x128x32 at
// 29.4 us (H200, 2026-11-28) while the estimate ranked them the other way: the learned order
// puts TMA first.
TEST(Estimate, LearnedFactorIsTheFittedFunctionOfFamilyShapeAndClass) {
  EXPECT_EQ(rank_class(*parse_schedule("tma_128x128x64_s4_r1_c132", gemm(256, 256, 256))),
            "tma_128x128x64_s4");
  EXPECT_EQ(rank_class(*parse_schedule("tma_128x128x64_s4_r1_c132_w64x128", gemm(256, 256, 256))),
            "tma_128x128x64_s4_w64x128");
  const Contraction c = conv(32, 56, 256, 512, 1, 2, 0);
  const Schedule tma = *parse_schedule("tma_128x128x64_s4_r1_c132", c);
  const Schedule mma = *parse_schedule("tc_128x128x32_s4_w64x64_sk1_r8", c);
  EXPECT_GT(estimate(c, tma, kH100).microseconds, estimate(c, mma, kH100).microseconds);
  EXPECT_LT(tuning_rank(c, tma, kH100), tuning_rank(c, mma, kH100));
  // The factor from the header's numbers and the features counted here: K = 256 in 4 chunks of
  // 64 channels (one tap), 28 x 28 x 32 = 25088 rows in 196 M tiles x 4 N tiles.
  const rank_fit::Family* family = nullptr;
  for (const rank_fit::Family& f : rank_fit::kFamilies)
    if (std::string(f.name) == "tma") family = &f;
  ASSERT_NE(family, nullptr);
  double offset = 0;
  for (const rank_fit::ClassOffset& o : rank_fit::kClasses)
    if (o.schedule_class == rank_class(tma)) offset = o.ln_offset;
  const ScheduleEstimate e = estimate(c, tma, kH100);
  EXPECT_EQ(e.k_steps, 4);
  EXPECT_EQ(e.tiles, 196 * 4);
  auto ln_factor = [&](bool residual, int math) {
    return family->intercept + family->ln_k_steps * std::log(4.0) +
           family->ln_tiles_per_sm * std::log(196.0 * 4 / kH100.sm_count) +
           family->residual * (residual ? 1 : 0) + family->transcendentals * math + offset;
  };
  EXPECT_NEAR(learned_factor(c, tma, e, kH100), std::exp(ln_factor(false, 0)), 1e-12);
  EXPECT_NEAR(learned_factor(c, tma, e, kH100, 2, 1), std::exp(ln_factor(true, 1)), 1e-12);
  EXPECT_DOUBLE_EQ(tuning_rank(c, tma, kH100, 2, 1),
                   e.microseconds * learned_factor(c, tma, e, kH100, 2, 1));
  // A transcendental activation costs the TMA kernel (one warpgroup per tile finishes it) more
  // than the mma.sync kernel, relative to the rest of the contraction's candidates.
  const ScheduleEstimate em = estimate(c, mma, kH100);
  EXPECT_GT(learned_factor(c, tma, e, kH100, 0, 1) / learned_factor(c, mma, em, kH100, 0, 1),
            learned_factor(c, tma, e, kH100) / learned_factor(c, mma, em, kH100));
  // The A100 keeps the estimate; so do the families the fit leaves alone (the halo kernel).
  EXPECT_DOUBLE_EQ(tuning_rank(c, mma, kA100), estimate(c, mma, kA100).microseconds);
  const Contraction k3 = conv(32, 56, 64, 64, 3, 1, 1);
  const Schedule halo = halo_schedule(k3, 16, 16, 64, 32, 1);
  EXPECT_EQ(learned_factor(k3, halo, estimate(k3, halo, kH100), kH100), 1.0);
}

// int8 contractions have families and classes of their own in the fit ("i8_": their k-tiles
// hold twice the elements, so "tc_128x32x64_s3" names another kernel than the 16-bit one), and
// on the fitted architecture their defaults are ranked by it. MobileNet-v2's 14x14 64 -> 384
// expansions, int8 at batch 32 (tune, H200, 2026-11-29): mma.sync 128x32x64 6.0 us, where the
// table's residuals picked the TMA kernel 64x64 (9.5 us; the fastest measured, 5.5).
TEST(Estimate, Int8ContractionsAreRankedByTheInt8Fit) {
  const contraction::OperandDTypes i8 = {DType::kI8, DType::kI8, DType::kF32};
  Conv2dParams p;
  p.n = 32;
  p.h = p.w = 14;
  p.ci = 64;
  p.co = 384;
  p.kh = p.kw = 1;
  const Contraction c = contraction_of(conv2d_nhwc_maps(p, i8));
  ASSERT_EQ(c.key().rfind("i8*i8->f32/i32:b1:m6272:n384:k64:", 0), 0u) << c.key();
  EXPECT_TRUE(has_learned_factor(c, kH100));
  EXPECT_FALSE(has_learned_factor(c, kA100));
  EXPECT_TRUE(has_learned_factor(conv(32, 14, 64, 384, 1, 1, 0), kH100));

  const Schedule tma = *parse_schedule("tma_64x64x128_s8_r1_c132", c);
  EXPECT_EQ(fitted_class(c, tma), "i8_tma_64x64x128_s8");
  EXPECT_EQ(fitted_class(conv(32, 14, 64, 384, 1, 1, 0), tma), "tma_64x64x128_s8");
  // The factor from the header's int8 rows: K = 64 in one chunk of 128 channels.
  const rank_fit::Family* family = nullptr;
  for (const rank_fit::Family& f : rank_fit::kFamilies)
    if (std::string(f.name) == "i8_tma") family = &f;
  ASSERT_NE(family, nullptr);
  double offset = 0;
  int measured = 0;
  for (const rank_fit::ClassOffset& o : rank_fit::kClasses)
    if (o.schedule_class == fitted_class(c, tma)) {
      offset = o.ln_offset;
      measured = o.measurements;
    }
  EXPECT_GT(measured, 0) << "the logs timed the int8 TMA 64x64 kernel";
  const ScheduleEstimate e = estimate(c, tma, kH100);
  EXPECT_EQ(e.k_steps, 1);
  const double tiles_per_sm = static_cast<double>(e.tiles) / kH100.sm_count;
  EXPECT_NEAR(
      learned_factor(c, tma, e, kH100),
      std::exp(family->intercept + family->ln_tiles_per_sm * std::log(tiles_per_sm) + offset),
      1e-12);

  const Schedule pick = default_schedule(c, kH100);
  EXPECT_EQ(pick.name(), "tc_128x32x64_s3_w32x32_sk1_r8_v16x16");
  EXPECT_LT(tuning_rank(c, pick, kH100), tuning_rank(c, tma, kH100));
}

TEST(EnumerateSchedules, IsTheLegalSpace) {
  Contraction c = gemm(1024, 1024, 4096);
  for (const device::DeviceInfo& device : {kA100, kH100}) {
    SCOPED_TRACE(device.cc_major);
    std::vector<Schedule> space = enumerate_schedules(c, device);
    std::set<std::string> names;
    for (const Schedule& s : space) {
      EXPECT_TRUE(names.insert(s.name()).second) << "duplicate " << s.name();
      EXPECT_FALSE(check_schedule(c, s)) << s.name() << ": " << *check_schedule(c, s);
      EXPECT_LE(smem_bytes(c, s), device.smem_per_block_optin) << s.name();
      EXPECT_GE(estimate(c, s, device).ctas_per_sm, 1) << s.name();
      EXPECT_TRUE(s.instruction != Instruction::kWgmma || has_wgmma(device)) << s.name();
    }
    const bool hopper = has_wgmma(device);
    // The measured winners of the tuning probe are members: the small tiles of tiny GEMMs and
    // split-K of batch-1 layers on both devices; wgmma's big tiles on the H100 only.
    EXPECT_EQ(names.count("tc_32x32x64_s4_w16x16_sk1_r8"), 1u);
    EXPECT_EQ(names.count("tc_32x64x64_s3_w16x32_sk5_r8"), 1u);
    EXPECT_EQ(names.count("tc_32x64x128_s3_w32x32_sk4_r8"), 1u);
    EXPECT_EQ(names.count("wgmma_128x256x64_s4_w64x256_sk1_r8"), hopper ? 1u : 0u);
    EXPECT_EQ(names.count("wgmma_256x128x64_s4_w128x128_sk1_r8"), hopper ? 1u : 0u);
    // 4 stages of 128x128x128 (256 KiB) fit neither device; 3 (192 KiB) fit the H100 only.
    EXPECT_EQ(names.count("wgmma_128x128x128_s4_w128x128_sk1_r1"), 0u);
    EXPECT_EQ(names.count("wgmma_128x128x128_s3_w128x128_sk1_r1"), hopper ? 1u : 0u);
    // (128 + 256) * 64 * 2 bytes = 48 KiB per stage: 5 stages (240 KiB) fit nowhere, 4 on H100.
    EXPECT_EQ(names.count("tc_128x256x64_s5_w64x64_sk1_r1"), 0u);
    EXPECT_EQ(names.count("tc_128x256x64_s4_w64x64_sk1_r1"), hopper ? 1u : 0u);
    // 64x64 warps have 2 per 64x128 CTA: too few; 16x16 warps in 128x128 are 64: too many.
    EXPECT_EQ(names.count("tc_64x128x32_s3_w64x64_sk1_r1"), 1u);
    EXPECT_EQ(names.count("tc_128x128x32_s3_w16x16_sk1_r1"), 0u);
  }

  // Split-K never leaves a split without K: K = 96 in 32-deep tiles allows 1..3.
  std::set<int> splits;
  for (const Schedule& s : enumerate_schedules(gemm(256, 256, 96), kA100))
    if (s.block_k == 32) splits.insert(s.split_k);
  EXPECT_EQ(splits, (std::set<int>{1, 2, 3}));
}

// The TMA kernel's tiles, ping-pong (a consumer warpgroup per tile) and cooperative (both on
// each tile, half its rows each), as far as they fit the H100 beside the epilogue's 52 KiB.
TEST(EnumerateSchedules, TmaTilesPingPongAndCooperative) {
  std::set<std::string> names;
  for (const Schedule& s : enumerate_schedules(conv(32, 28, 128, 128, 3, 1, 1), kH100))
    if (s.mainloop == Mainloop::kTma) names.insert(s.name());
  EXPECT_EQ(names.count("tma_128x128x64_s4_r1_c132"), 1u);
  // 256x128 cooperative: 3 stages of 48 KiB fit, 4 do not; 128x256 the same.
  EXPECT_EQ(names.count("tma_256x128x64_s3_r8_c132_w128x128"), 1u);
  EXPECT_EQ(names.count("tma_256x128x64_s4_r8_c132_w128x128"), 0u);
  EXPECT_EQ(names.count("tma_128x256x64_s3_r1_c132_w64x256"), 1u);
  EXPECT_EQ(names.count("tma_128x128x64_s5_r1_c132_w64x128"), 1u);
  // Ping-pong 256x128 would need 256 accumulators per thread.
  EXPECT_EQ(names.count("tma_256x128x64_s3_r8_c132"), 0u);
  // Every one spells itself.
  for (const std::string& n : names) {
    const std::optional<Schedule> s = parse_schedule(n, conv(32, 28, 128, 128, 3, 1, 1));
    ASSERT_TRUE(s) << n;
    EXPECT_EQ(s->name(), n);
  }
}

// The TMA kernel in 64-byte rows is in the space where a tap's channels leave the last
// 128-byte row at most half full (64 int8 channels: ResNet's layer 1), and only there.
// Row windows join the space (tune's candidates) exactly where the conv's output rows are
// whole runs of the tile and the window's box fits: 64- and 128-row tiles over 256-wide
// outputs, no 256-row tile (a box of 258 pixels), nothing over 56-wide ones.
TEST(EnumerateSchedules, RowWindowsWhereTheRunsAllow) {
  int wide = 0;
  for (const Schedule& s : enumerate_schedules(conv(8, 256, 64, 64, 3, 1, 1), kH100)) {
    if (!s.row_windows) continue;
    ++wide;
    EXPECT_LE(s.block_m, 128) << s.name();
    EXPECT_FALSE(check_schedule(conv(8, 256, 64, 64, 3, 1, 1), s)) << s.name();
  }
  EXPECT_GT(wide, 0);
  for (const Schedule& s : enumerate_schedules(conv(32, 56, 64, 64, 3, 1, 1), kH100))
    EXPECT_FALSE(s.row_windows) << s.name();
}

TEST(EnumerateSchedules, TmaHalfRowsWhereTheyHalveTheZeros) {
  const contraction::OperandDTypes i8 = {DType::kI8, DType::kI8, DType::kF32};
  auto half_rows = [](const Contraction& c) {
    int n = 0;
    for (const Schedule& s : enumerate_schedules(c, kH100)) {
      if (s.mainloop != Mainloop::kTma) continue;
      const int row = s.block_k * static_cast<int>(dtype_size(c.a_dtype));
      EXPECT_TRUE(row == 128 || row == 64) << s.name();
      EXPECT_FALSE(check_schedule(c, s)) << s.name();
      n += row == 64;
    }
    return n;
  };
  Conv2dParams p;
  p.n = 32;
  p.h = p.w = 56;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.ci = p.co = 64;
  EXPECT_GT(half_rows(contraction_of(conv2d_nhwc_maps(p, i8))), 0) << "64 int8 channels: half a row";
  p.ci = 192;
  EXPECT_GT(half_rows(contraction_of(conv2d_nhwc_maps(p, i8))), 0) << "192: one and a half rows";
  p.ci = 256;
  EXPECT_EQ(half_rows(contraction_of(conv2d_nhwc_maps(p, i8))), 0) << "256: two full rows";
  EXPECT_EQ(half_rows(conv(32, 56, 64, 64, 3, 1, 1)), 0) << "64 f16 channels: one full row";
  EXPECT_GT(half_rows(conv(32, 56, 32, 64, 3, 1, 1)), 0) << "32 f16 channels: half a row";
  // The defaults take them for convolutions of several taps only (measured: tma_rows).
  for (const int64_t ci : {32, 96, 160}) {
    const Schedule d = default_schedule(conv(32, 14, ci, 576, 1, 1, 0), kH100);
    EXPECT_FALSE(d.mainloop == Mainloop::kTma && d.block_k == 32) << ci << ": " << d.name();
  }
}

TEST(DefaultSchedule, FallsBackToSimt) {
  // f32 operands: no Tensor Cores.
  Contraction f32 =
      contraction_of(gemm_maps(256, 256, 256, {}, {DType::kF32, DType::kF32, DType::kF32}));
  Schedule s = default_schedule(f32, kH100);
  EXPECT_EQ(s.instruction, Instruction::kSimt);
  EXPECT_EQ(s.name(), "simt_64x64x16_s2_w32x16_sk1_r1_v4x4");
  EXPECT_EQ(s.threads(), 256);
  EXPECT_EQ(enumerate_schedules(f32, kH100), std::vector<Schedule>{s});
  // mma.sync m16n8k16 needs sm_80.
  Schedule turing = default_schedule(gemm(1024, 1024, 1024), testing::device_of(40, 64 * 1024, 7, 5));
  EXPECT_EQ(turing.instruction, Instruction::kSimt);
}

// A stem reading the graph's f32 NCHW input has no Tensor Core path but the halo kernel: it
// takes the halo kernel even where the width wastes most of a tile (10 of 16 columns) or the
// tiles are few; the same conv on f16 NHWC input keeps the GEMM kernels there.
TEST(DefaultSchedule, NchwStemsTakeTheHaloKernelWhateverTheirWidth) {
  Conv2dParams p;
  p.n = 2;
  p.h = 6;
  p.w = 10;
  p.ci = 3;
  p.co = 16;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  const Contraction stem =
      contraction_of(conv2d_nchw_input_maps(p, {DType::kF32, DType::kF16, DType::kF16}));
  EXPECT_EQ(default_schedule(stem, kH100).mainloop, Mainloop::kHalo);
  p.ci = 8;
  EXPECT_NE(default_schedule(contraction_of(conv2d_nhwc_maps(p)), kH100).mainloop, Mainloop::kHalo);
}

// A strided stem over NHWC pixels of at most 4 channels with an even stride takes the halo
// kernel's tap pairs where its tiles fill the SMs (batch 32: ResNet's 7x7/2, MobileNet's 3x3/2,
// over grayscale, RGB and RGBA), like its NCHW form; at batch 1, or at stride 1 (no tap pairs,
// channels no multiple of 8), the GEMM kernels keep it.
TEST(DefaultSchedule, StridedNhwcStemsOfFewChannelsPairTheirTaps) {
  for (const auto& [ci, co, k, pad] :
       {std::tuple{3, 64, 7, 3}, std::tuple{3, 32, 3, 1}, std::tuple{4, 32, 3, 1},
        std::tuple{4, 64, 7, 3}, std::tuple{1, 64, 7, 3}, std::tuple{1, 32, 3, 1}}) {
    const Contraction stem = conv(32, 224, ci, co, k, 2, pad);
    SCOPED_TRACE(stem.key());
    const Schedule s = default_schedule(stem, kH100);
    ASSERT_EQ(s.mainloop, Mainloop::kHalo) << s.name();
    const std::optional<HaloLayout> l = halo_layout(stem, s);
    ASSERT_TRUE(l);
    EXPECT_TRUE(l->tap_pairs);
    EXPECT_EQ(s.block_k, k * ((k + 1) / 2) * 8);  // 224 for 7x7, 48 for 3x3
    EXPECT_EQ(s.ctas, l->ctas_per_slice);         // persistent: fewer CTAs than tiles
    EXPECT_LT(s.ctas, l->tiles);
    EXPECT_NE(default_schedule(conv(1, 224, ci, co, k, 2, pad), kH100).mainloop, Mainloop::kHalo);
    EXPECT_NE(default_schedule(conv(32, 224, ci, co, k, 1, pad), kH100).mainloop, Mainloop::kHalo);
  }
  // A width the 16-wide tiles waste 11% of (115 outputs) keeps such a stem there: the GEMM
  // kernels would read its few channels in 2-byte vectors.
  EXPECT_EQ(default_schedule(conv(32, 230, 3, 32, 3, 2, 1), kH100).mainloop, Mainloop::kHalo);
  EXPECT_EQ(default_schedule(conv(32, 230, 1, 32, 3, 2, 1), kH100).mainloop, Mainloop::kHalo);
}

// A grayscale stem over the graph's f32 NCHW input (MNIST-like nets, medical and document
// models): one channel, whose index drops out of the contraction's maps, runs on the halo kernel
// like RGB's, the channel padded to an 8-channel chunk at stride 1 (K = 9 x 8) and to a
// 4-channel slot of tap pairs at stride 2 (K = 7 x 4 x 8); never SIMT.
TEST(DefaultSchedule, OneChannelNchwStemsTakeTheHaloKernel) {
  Conv2dParams p;
  p.n = 8;
  p.h = p.w = 28;
  p.ci = 1;
  p.co = 32;
  p.kh = p.kw = 3;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  const contraction::OperandDTypes f32_in{DType::kF32, DType::kF16, DType::kF16};
  const Contraction mnist = contraction_of(conv2d_nchw_input_maps(p, f32_in));
  const Schedule s = default_schedule(mnist, kH100);
  ASSERT_EQ(s.mainloop, Mainloop::kHalo) << s.name();
  const std::optional<HaloLayout> l = halo_layout(mnist, s);
  ASSERT_TRUE(l);
  EXPECT_FALSE(l->tap_pairs);
  EXPECT_EQ(l->channels_padded, 8);
  EXPECT_EQ(s.block_k, 80);  // 9 taps x 8 channels, whole k16 steps
  p.n = 32;
  p.h = p.w = 224;
  p.co = 64;
  p.kh = p.kw = 7;
  p.stride_h = p.stride_w = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 3;
  const Contraction strided = contraction_of(conv2d_nchw_input_maps(p, f32_in));
  const Schedule t = default_schedule(strided, kH100);
  ASSERT_EQ(t.mainloop, Mainloop::kHalo) << t.name();
  const std::optional<HaloLayout> pairs = halo_layout(strided, t);
  ASSERT_TRUE(pairs);
  EXPECT_TRUE(pairs->tap_pairs);
  EXPECT_EQ(t.block_k, 224);
  EXPECT_EQ(default_schedule(strided, kA100).mainloop, Mainloop::kHalo);
}

// The default against the H100 measurements (see estimate.cc; times of the last run, which
// also timed the previous default): the fastest kernel measured for each of these workloads,
// or one within 3% of it (repeated runs differ by about that much).
TEST(DefaultSchedule, PicksTheMeasuredBestOnH100) {
  // 8192^3 and 4096^3 stored NN: the TMA kernel's cooperative 128x256 tile, B read MN-major
  // (H200: 8192^3 1724 us, cuBLASLt 1657; the cp.async wgmma 256x128 of before 1784; 4096^3
  // 188.7, 181.2, 208.4).
  for (int64_t n : {4096, 8192}) {
    const Schedule big = default_schedule(gemm(n, n, n), kH100);
    EXPECT_EQ(big.name(), "tma_128x256x64_s3_r8_c132_w64x256") << n;
  }
  // Not where 128x256 tiles would fill the SMs less than twice (2048^2: 128 tiles), nor over a
  // K of fewer than 32 k-tiles, nor for a convolution's im2col A.
  for (const Contraction& c : {gemm(2048, 2048, 4096, "NT"), gemm(8192, 8192, 1024, "NT"),
                               conv(32, 56, 256, 256, 3, 1, 1)})
    EXPECT_NE(default_schedule(c, kH100).warp_m * 2, default_schedule(c, kH100).block_m)
        << default_schedule(c, kH100).name();
  // int8: the cooperative 256x128 tile (k-tiles of 128 channels) wherever its tiles fill the
  // SMs twice, whatever K: ResNet-50's batch-32 1x1 convs 56x56 256 -> 128 (392 tiles; H200:
  // 22.9 -> 16.6 us) and 64 -> 256 (K of one half-empty k-tile), 28x28 128 -> 512, the
  // stride-2 downsample 256 -> 512 (20.9 -> 14.1), a large GEMM. Not with fewer tiles (28x28
  // 512 -> 128: 98 tiles, 8.6 -> 10.1 us), nor 64 outputs in 128-wide tiles (9.3 -> 11.7), nor
  // a 3x3 conv of so few tiles, nor at batch 1. A 3x3 conv whose tiles fill the SMs twice takes
  // it too (ResNet-50 at batch 256, tune: 28x28 128 -> 128 48.9 us against the ranked
  // ping-pong 64x128's 55.3; 14x14 256 -> 256 39.2 / 46.5; stride 2 from 56x56 51.9 / 55.9).
  const contraction::OperandDTypes i8 = {DType::kI8, DType::kI8, DType::kF32};
  for (const Contraction& c :
       {conv(32, 56, 256, 128, 1, 1, 0, i8), conv(32, 28, 128, 512, 1, 1, 0, i8),
        conv(32, 56, 256, 512, 1, 2, 0, i8), conv(256, 28, 128, 128, 3, 1, 1, i8),
        conv(256, 14, 256, 256, 3, 1, 1, i8), conv(256, 56, 128, 128, 3, 2, 1, i8)})
    EXPECT_EQ(default_schedule(c, kH100).name(), "tma_256x128x128_s3_r1_c132_w128x128");
  // (B of 64 MB, more than a quarter of L2: raster 8.)
  EXPECT_EQ(default_schedule(contraction_of(gemm_maps(8192, 8192, 8192, *contraction::parse_gemm_layout("NT"), i8)),
                             kH100).name(),
            "tma_256x128x128_s3_r8_c132_w128x128");
  // (ResNet-50's 14x14 256 -> 256 at batch 32, 50 tiles: 128x128 measured fastest, 8.7 us.)
  for (const Contraction& c :
       {conv(32, 28, 512, 128, 1, 1, 0, i8), conv(32, 14, 256, 256, 3, 1, 1, i8),
        conv(1, 56, 256, 128, 1, 1, 0, i8)})
    EXPECT_FALSE(default_schedule(c, kH100).mainloop == Mainloop::kTma &&
                 default_schedule(c, kH100).warp_m * 2 == default_schedule(c, kH100).block_m)
        << default_schedule(c, kH100).name();
  // Where the 256x128 tile does not fill the SMs twice, or N is 64 wide, the ping-pong 128x64 tile
  // in 5 stages (H200, tune logs: 56x56 256 -> 64 7.6 us against mma.sync's 13.1, 28x28 512 ->
  // 128 5.9 against 6.7), with K of a whole k-tile at least, in N tiles wasting at most an eighth,
  // over twice the SMs' tiles: not 56x56 64 -> 64 (K 64), 144 -> 24 (MobileNet-v2: 18.2 us against
  // mma.sync's 10.5), a 3x3 conv, nor batch 1.
  for (const Contraction& c :
       {conv(32, 56, 256, 64, 1, 1, 0, i8), conv(32, 28, 512, 128, 1, 1, 0, i8),
        conv(32, 14, 1024, 512, 1, 1, 0, i8)})
    EXPECT_EQ(default_schedule(c, kH100).name(), "tma_128x64x128_s5_r1_c132");
  // An int8 1x1 conv of 4 k-tiles or more whose cooperative 256-row tiles fill the CTAs' rounds as
  // well as the 128x64's and cover no more outputs per CTA: the 256x128 below twice the SMs' tiles
  // (ResNet-50 at batch 32, H200 tune logs: 7x7 512 -> 2048 112 tiles against 416, 6.2 us against
  // 7.0; the 1024 -> 2048 stride-2 downsample 10.0 / 11.6-12.0), else the 256x64 in 4 stages
  // (14x14 1024 -> 256, 100 tiles against 196: 5.3-5.5 / 6.0-6.1; 28x28 512 -> 256, 392 against
  // 784: 8.6 / 9.1). Not 14x14 1024 -> 512 (the 256x128's 100 tiles fill 0.76 of the SMs, the
  // 128x64's 392 0.99: 8.4 against 8.1 us), nor K of 2 k-tiles (56x56 256 -> 64: 8.0 / 7.7), nor
  // batch 1's 7x7 512 -> 2048 (49 pixels: a 256-row tile would be four fifths rows past M).
  for (const Contraction& c :
       {conv(32, 7, 512, 2048, 1, 1, 0, i8), conv(32, 14, 1024, 2048, 1, 2, 0, i8)})
    EXPECT_EQ(default_schedule(c, kH100).name(), "tma_256x128x128_s3_r1_c132_w128x128");
  // A 1x1 conv whose K is one 64-byte row, more than half of it data: the cooperative 256-row
  // tiles in 64-byte k-tiles (H200 bench-op --int8: 56x56 64 -> 256 16.8 -> 15.0 us, 64 -> 64
  // 9.0 on mma.sync -> 6.4), not 32 channels (half a row of zeros), nor where the tiles fill the
  // SMs less than twice (batch 1).
  EXPECT_EQ(default_schedule(conv(32, 56, 64, 256, 1, 1, 0, i8), kH100).name(),
            "tma_256x128x64_s3_r1_c132_w128x128");
  EXPECT_EQ(default_schedule(conv(32, 56, 64, 64, 1, 1, 0, i8), kH100).name(),
            "tma_256x64x64_s6_r1_c132_w128x64");
  EXPECT_EQ(default_schedule(conv(32, 112, 48, 256, 1, 2, 0, i8), kH100).name(),
            "tma_256x128x64_s3_r1_c132_w128x128");
  for (const Contraction& c :
       {conv(32, 28, 32, 192, 1, 1, 0, i8), conv(1, 56, 64, 256, 1, 1, 0, i8)})
    EXPECT_NE(default_schedule(c, kH100).block_m, 256) << default_schedule(c, kH100).name();
  for (const Contraction& c :
       {conv(32, 14, 1024, 256, 1, 1, 0, i8), conv(32, 28, 512, 256, 1, 1, 0, i8)})
    EXPECT_EQ(default_schedule(c, kH100).name(), "tma_256x64x128_s4_r1_c132_w128x64");
  for (const Contraction& c :
       {conv(32, 14, 1024, 512, 1, 1, 0, i8), conv(32, 56, 256, 64, 1, 1, 0, i8),
        conv(1, 7, 512, 2048, 1, 1, 0, i8)})
    EXPECT_EQ(default_schedule(c, kH100).name().rfind("tma_256", 0), std::string::npos)
        << default_schedule(c, kH100).name();
  for (const Contraction& c : {conv(32, 56, 64, 64, 1, 1, 0, i8), conv(32, 56, 144, 24, 1, 1, 0, i8),
                               conv(32, 28, 128, 128, 3, 1, 1, i8), conv(1, 56, 256, 64, 1, 1, 0, i8)})
    EXPECT_NE(default_schedule(c, kH100).name().rfind("tma_128x64x128_s5", 0), 0u)
        << default_schedule(c, kH100).name();
  // Nor on an A100 (no TMA kernel).
  EXPECT_NE(default_schedule(gemm(8192, 8192, 8192), kA100).mainloop, Mainloop::kTma);
  // An int8 conv of several taps into 64 (or 192) outputs, whose 256x64 tiles fill the SMs twice:
  // the cooperative 256x64 in 6 stages, 64-byte k-tiles where a tap's channels fill half a row
  // (H200, ResNet-50 int8 at batch 32: 56x56 64 -> 64 3x3 15.3 -> 12.2 us; batch 256 117.7 ->
  // 91.9; ResNet-18's with a residual 16.7 -> 14.6; 192 channels leave a half row too). Not on
  // 1x1 convs, 128-multiple outputs (the 256x128's or the ranking's), at batch 8 (98 tiles), nor
  // over 32 channels, half of each 64-byte row zeros (Inception-v3's 147x147 32 -> 64: 82 -> 131
  // us).
  EXPECT_EQ(default_schedule(conv(32, 56, 64, 64, 3, 1, 1, i8), kH100).name(), "tma_256x64x64_s6_r1_c132_w128x64");
  EXPECT_EQ(default_schedule(conv(256, 56, 64, 64, 3, 1, 1, i8), kH100).name(), "tma_256x64x64_s6_r1_c132_w128x64");
  EXPECT_EQ(default_schedule(conv(32, 28, 192, 192, 3, 1, 1, i8), kH100).name(),
            "tma_256x64x64_s6_r1_c132_w128x64");
  for (const Contraction& c : {conv(32, 56, 256, 64, 1, 1, 0, i8), conv(32, 28, 128, 128, 3, 1, 1, i8),
                               conv(8, 56, 64, 64, 3, 1, 1, i8), conv(32, 56, 64, 64, 3, 1, 1),
                               conv(32, 147, 32, 64, 3, 1, 0, i8)})
    EXPECT_NE(default_schedule(c, kH100).name().rfind("tma_256x64", 0), 0u) << default_schedule(c, kH100).name();
  // An int8 conv of several taps over 16 k-tiles or more, whose 64x128 tiles take between one
  // and two waves while 128x128 tiles fit one: the ping-pong 128x128 in 4 stages (ResNet-50 int8
  // at batch 32, 14x14 256 -> 256 3x3 and its stride-2 form: 9.9 -> 8.7 us). Not over 9 k-tiles
  // (28x28 128 -> 128 at batch 16: 196 tiles of 64x128), where 64x128 tiles fit one wave (7x7
  // 512 -> 512 at batch 32), fill three (28x28 128 -> 128 at batch 32), nor on a 1x1 conv.
  EXPECT_EQ(default_schedule(conv(32, 14, 256, 256, 3, 1, 1, i8), kH100).name(), "tma_128x128x128_s4_r1_c132");
  EXPECT_EQ(default_schedule(conv(32, 28, 256, 256, 3, 2, 1, i8), kH100).name(), "tma_128x128x128_s4_r1_c132");
  for (const Contraction& c : {conv(16, 28, 128, 128, 3, 1, 1, i8), conv(32, 7, 512, 512, 3, 1, 1, i8),
                               conv(32, 28, 128, 128, 3, 1, 1, i8), conv(32, 14, 1024, 256, 1, 1, 0, i8)})
    EXPECT_NE(default_schedule(c, kH100).name(), "tma_128x128x128_s4_r1_c132") << default_schedule(c, kH100).name();
  // ResNet-50's stem at batch 32 over NHWC ci=3: the halo kernel with tap pairs (K 224), the
  // kernel its NCHW form runs in the model (64.8 us on an H200); the implicit GEMM with 2-byte
  // loads it ran before took 149.0 us in bench-op (cuDNN 83.0; SIMT on an H100: 308). At batch
  // 1 its 49 halo tiles would leave most SMs idle: the GEMM kernels stay.
  EXPECT_EQ(default_schedule(conv(32, 224, 3, 64, 7, 2, 3), kH100).name(),
            "halo_16x16_n64_w64x32_c264");
  EXPECT_EQ(default_schedule(conv(1, 224, 3, 64, 7, 2, 3), kH100).name(),
            "tc_64x64x32_s3_w32x32_sk1_r8_v1x1");
  // Wider stems (DenseNet-161's 96 outputs; 128) in 64x32 warp tiles, 12 or 16 warps per CTA
  // and one CTA per SM (H200: 81.9 and 104.6 us); 4 warps of 64x64 spilled their accumulators
  // (495 and 507 us), and in the model (its NCHW form) DenseNet-161 b32 went 4.72 -> 4.26 ms.
  EXPECT_EQ(default_schedule(conv(32, 224, 3, 96, 7, 2, 3), kH100).name(),
            "halo_16x16_n96_w64x32_c132");
  EXPECT_EQ(default_schedule(conv(32, 224, 3, 128, 7, 2, 3), kH100).name(),
            "halo_16x16_n128_w64x32_c132");
  // The classifier at batch 1: 4-warp 32x32 tiles, K split by 4 (4.27 us; previous: 5.84).
  EXPECT_EQ(default_schedule(gemm(1, 1000, 2048, "NT"), kH100).name(),
            "tc_32x32x128_s3_w16x16_sk4_r8");
  // ResNet-50 layer 3, 3x3 256 -> 256 at batch 32: the TMA kernel (18.7 us; previous, wgmma
  // with cp.async: 21.6-24.1), 4 stages and raster 1 (H200, bench-op: 16.2 us; 5 stages and
  // raster 8: 16.3; in ResNet-50, operands in L2, its 1x1 neighbours gain 40%).
  EXPECT_EQ(default_schedule(conv(32, 14, 256, 256, 3, 1, 1), kH100).name(),
            "tma_128x128x64_s4_r1_c132");
  // EfficientNet-b0's 112x112 1x1 convs at batch 32: the halo kernel for the 32 -> 16
  // projection (13.6 us, 2.8 TB/s), not for the 16 -> 96 expansion (its 8x16/n128 tile: 162.7
  // us), which ranks the GEMM kernels like any 1x1 conv.
  EXPECT_EQ(default_schedule(conv(32, 112, 32, 16, 1, 1, 0), kH100).name(), "halo_16x16_n16_w64x16_c528");
  const Schedule expansion = default_schedule(conv(32, 112, 16, 96, 1, 1, 0), kH100);
  EXPECT_NE(expansion.mainloop, Mainloop::kHalo) << expansion.name();
  // A 3x3 conv of 64 -> 128 channels at 720p: the TMA kernel, whose 64-channel chunks walk its
  // taps unpadded (the SR net's, tuned on an H200, 2026-11-28: TMA 128x128 with 4 stages
  // 333.9 us, the halo kernel 405.7).
  EXPECT_EQ(default_schedule(conv(1, 720, 64, 128, 3, 1, 1), kH100).name(),
            "tma_128x128x64_s4_r1_c132");
  // Taps of 32 or 96 channels (half 128-byte rows) into 64 or 128 outputs: the cooperative
  // 256-row TMA tile in 64-byte rows (H200, bench-op: 720p 32 -> 64 112.9 -> 108.8 us against
  // the halo kernel, 96 -> 64 276.6 -> 250.9, 32 -> 128 218.4 -> 139.9). 32 outputs keep the
  // halo kernel (127.7 against 233.1 at 1080p), as do strided windows (the ranked defaults)
  // and int8 operands.
  // (720 wide: 5.6 runs of 128 pixels; 768: 6, the ping-pong 128x64 in row windows.)
  EXPECT_EQ(default_schedule(conv(1, 720, 32, 64, 3, 1, 1), kH100).name(), "tma_256x64x32_s6_r1_c132_w128x64");
  EXPECT_EQ(default_schedule(conv(1, 720, 96, 64, 3, 1, 1), kH100).name(), "tma_256x64x32_s6_r1_c132_w128x64");
  EXPECT_EQ(default_schedule(conv(1, 768, 32, 64, 3, 1, 1), kH100).name(), "tma_128x64x32_s6_r1_c132_rw");
  EXPECT_EQ(default_schedule(conv(1, 720, 32, 128, 3, 1, 1), kH100).name(), "tma_256x128x32_s4_r1_c132_w128x128");
  EXPECT_EQ(default_schedule(conv(1, 1080, 32, 32, 3, 1, 1), kH100).mainloop, Mainloop::kHalo);
  for (const Contraction& c : {conv(1, 720, 32, 64, 3, 2, 1), conv(1, 720, 32, 64, 3, 1, 1, i8), conv(1, 720, 8, 64, 3, 1, 1),
                               conv(1, 720, 64, 64, 3, 1, 1), conv(1, 56, 32, 64, 3, 1, 1)}) {
    const Schedule d = default_schedule(c, kH100);
    EXPECT_FALSE(d.mainloop == Mainloop::kTma && d.warp_m * 2 == d.block_m && d.block_k * 2 == 64) << d.name();
  }
  EXPECT_NE(default_schedule(conv(1, 720, 32, 64, 3, 1, 1), kA100).mainloop, Mainloop::kTma);
  // 64 -> 64 3x3 where the output width is whole 128-pixel runs: the ranked TMA 128x64 in row
  // windows, 4 stages (H200, bench-op: 8 x 256^2 82.1 -> 63.4 us; the SR net's 720p 146.8 ->
  // 111.0). Not at 224 wide (VGG's), nor 128-wide tiles, nor a strided window.
  EXPECT_EQ(default_schedule(conv(8, 256, 64, 64, 3, 1, 1), kH100).name(), "tma_128x64x64_s4_r1_c132_rw");
  for (const Contraction& c : {conv(8, 224, 64, 64, 3, 1, 1), conv(1, 512, 128, 128, 3, 1, 1),
                               conv(8, 256, 64, 64, 3, 2, 1)})
    EXPECT_FALSE(default_schedule(c, kH100).row_windows) << default_schedule(c, kH100).name();
  // ResNet-50's batch-32 1x1 convs in the model (tune, H200, 2026-11-28): the TMA kernel for
  // layer 4's 512 -> 2048 with its residual (128x128, 4 stages: 11.9 us; the previous default,
  // mma.sync 128x128x32: 16.0), for layer 4's stride-2 projection 1024 -> 2048 (14.5 us; wgmma
  // 128x256: 22.4), and for layer 3's 256 -> 1024 with its residual (TMA 64x64: 15.5 us in the
  // model; the best mma.sync one in the log 18.0).
  EXPECT_EQ(default_schedule(conv(32, 7, 512, 2048, 1, 1, 0), kH100, false, 2).name(),
            "tma_128x128x64_s4_r1_c132");
  EXPECT_EQ(default_schedule(conv(32, 14, 1024, 2048, 1, 2, 0), kH100).name(),
            "tma_128x128x64_s4_r1_c132");
  EXPECT_EQ(default_schedule(conv(32, 14, 256, 1024, 1, 1, 0), kH100, false, 2).mainloop,
            Mainloop::kTma);
  // Layer 1's 64 -> 256 with its residual, whose DRAM bound (34.8 us) is above every learned
  // score: ranked by the learned scores, not tied under the bound (TMA 64x128 and 128x64 timed
  // 37.8-39.2 us; mma.sync 128x128, the first of the table among the ties, 51.4).
  EXPECT_EQ(default_schedule(conv(32, 56, 64, 256, 1, 1, 0), kH100, false, 2).mainloop,
            Mainloop::kTma);
  // DenseNet-121's 1x1 convs with the BN + ReLU prologue (mma.sync only) at batch 32: a 64x128
  // tile (25088 x 128 x 256: 14.2 us; 256x128x32, the default before, 15.9).
  const Schedule dense = default_schedule(conv(32, 28, 256, 128, 1, 1, 0), kH100, true);
  EXPECT_EQ(dense.block_m * 2, dense.block_n) << dense.name();
  EXPECT_EQ(dense.instruction, Instruction::kMmaSync) << dense.name();
  // On the A100 the large GEMM takes mma.sync's largest tile.
  EXPECT_EQ(default_schedule(gemm(8192, 8192, 8192), kA100).name(),
            "tc_256x128x32_s3_w64x64_sk1_r8");
}

// Every public workload on every device model: the default is legal, fits, uses Tensor
// Cores exactly when the contraction is eligible (wgmma only where it exists), and splits K
// only when the M x N tiles leave SMs idle.
// Beyond the public workloads: convolutions of shapes no fit log nor workload has (odd channel
// counts, 5x5 and dilated windows, strides, groups, batch 1 and 32) under every epilogue the
// learned ranking distinguishes (a residual, a transcendental activation, an A prologue). The
// Hopper default is legal, fits, and is one the generator implements with that epilogue.
TEST(DefaultSchedule, LegalAndImplementedOnShapesOutsideTheLists) {
  struct Shape {
    int64_t n, hw, ci, co, k, stride, dilation, groups;
  };
  const Shape shapes[] = {
      {1, 17, 24, 40, 3, 1, 1, 1},   {32, 17, 24, 40, 3, 1, 1, 1},  {1, 33, 72, 200, 1, 1, 1, 1},
      {32, 9, 120, 8, 1, 1, 1, 1},   {32, 30, 48, 96, 5, 2, 1, 1},  {1, 65, 64, 64, 3, 1, 2, 1},
      {32, 28, 192, 192, 3, 1, 1, 12}, {1, 112, 16, 16, 3, 1, 1, 1}, {32, 7, 1000, 1000, 1, 1, 1, 1},
      {32, 224, 64, 64, 3, 1, 1, 1}, {4, 90, 96, 136, 3, 2, 1, 1},  {32, 14, 2048, 24, 1, 1, 1, 1},
      // Widths of whole 128-pixel runs (row windows, half-row windows): dilation 2, 96 and 32
      // channels, a 5x5, 48 outputs at batch 32, a strided window.
      {1, 256, 64, 64, 3, 1, 2, 1},  {2, 384, 96, 64, 3, 1, 1, 1},  {1, 512, 32, 128, 5, 1, 1, 1},
      {32, 128, 64, 48, 3, 1, 1, 1}, {1, 256, 32, 64, 3, 2, 1, 1},  {1, 256, 160, 64, 3, 1, 1, 1},
  };
  for (const Shape& sh : shapes) {
    Conv2dParams p;
    p.n = sh.n;
    p.h = p.w = sh.hw;
    p.ci = sh.ci;
    p.co = sh.co;
    p.kh = p.kw = sh.k;
    p.stride_h = p.stride_w = sh.stride;
    p.dilation_h = p.dilation_w = sh.dilation;
    p.groups = sh.groups;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = sh.dilation * (sh.k / 2);
    const Contraction c = contraction_of(conv2d_nhwc_maps(p));
    for (int variant = 0; variant < 4; ++variant) {
      contraction::Epilogue e;
      e.steps = {{contraction::EpilogueOpKind::kBias, 0, 0, 0}};
      if (variant == 1) e.steps.push_back({contraction::EpilogueOpKind::kResidualAdd, 0, 0, 1});
      if (variant == 2) e.steps.push_back({contraction::EpilogueOpKind::kSilu});
      if (variant == 3) e.a_prologue = contraction::OperandPrologue{true, 1, sh.ci};
      SCOPED_TRACE(c.key() + " epilogue " + e.str());
      const Schedule s = default_schedule(c, kH100, e.a_prologue.has_value(),
                                          contraction::read_bytes_per_output(e),
                                          contraction::transcendentals_per_output(e));
      EXPECT_FALSE(check_schedule(c, s)) << s.name() << ": " << *check_schedule(c, s);
      EXPECT_LE(smem_bytes(c, s), kH100.smem_per_block_optin) << s.name();
      const std::optional<std::string> why = cuda::can_implement(c, e, s);
      // Where the generator cannot take the pick (an A prologue on a grouped or strided conv),
      // plan_node falls back to SIMT with the reason; the Tensor Core picks must be taken.
      if (s.instruction != Instruction::kSimt && !e.a_prologue) {
        EXPECT_FALSE(why) << s.name() << ": " << *why;
      }
    }
  }
}

TEST(DefaultSchedule, PropertiesOverAllWorkloads) {
  std::optional<std::string> dir = contraction::testing::workloads_dir();
  if (!dir) GTEST_SKIP() << "shared/workloads not found beside " << TESSEL_SOURCE_DIR;
  std::vector<contraction::testing::Workload> all = contraction::testing::load_workloads(*dir);
  ASSERT_GT(all.size(), 60u);
  for (const device::DeviceInfo& device : {kA100, kH100, kA10, kSmallSmem}) {
    for (const contraction::testing::Workload& w : all) {
      SCOPED_TRACE(w.name + " on sm_" + std::to_string(device.cc_major * 10 + device.cc_minor));
      Contraction c = contraction_of(w.maps);
      Schedule s = default_schedule(c, device);
      EXPECT_FALSE(check_schedule(c, s)) << s.name() << ": " << *check_schedule(c, s);
      EXPECT_LE(smem_bytes(c, s), device.smem_per_block_optin) << s.name();
      EXPECT_GE(estimate(c, s, device).ctas_per_sm, 1) << s.name();
      // The loaders' vectors: as wide as the operands allow (a halo schedule has no loaders:
      // its vectors stay at their defaults, schedule.h).
      if (s.mainloop != Mainloop::kHalo) {
        EXPECT_EQ(s.a_vec, c.a_vec);
        EXPECT_EQ(s.b_vec, c.b_vec);
      }
      EXPECT_EQ(s.instruction != Instruction::kSimt, contraction::tensor_core_eligible(c))
          << s.name();
      if (s.instruction == Instruction::kSimt) continue;
      EXPECT_TRUE(s.instruction != Instruction::kWgmma || has_wgmma(device)) << s.name();
      // Raster 1 for the persistent TMA kernel (8 where B outgrows a quarter of L2: tma_raster),
      // 8 for the others.
      const double l2 = device.l2_bytes > 0 ? static_cast<double>(device.l2_bytes) : 50.0 * (1 << 20);
      const bool big_b = static_cast<double>(numel(c.maps.b.shape) * dtype_size(c.b_dtype)) > l2 / 4;
      EXPECT_EQ(s.raster, s.mainloop == Mainloop::kTma && !big_b ? 1 : 8) << s.name();
      if (s.split_k > 1) {
        EXPECT_LT(
            c.batch * ((c.m + s.block_m - 1) / s.block_m) * ((c.n + s.block_n - 1) / s.block_n),
            device.sm_count)
            << s.name();
        EXPECT_GE(c.k / s.split_k, 128) << s.name();
      }
    }
  }
}

}  // namespace
}  // namespace tessel::kernels
