// tune/ against codegen/: every schedule the tuner may try and every default it picks is one
// the generator can implement (kernels::cuda::can_implement), on the public workloads and on
// representative layouts. tune/ applies the kernels' schedule rules without depending on the
// generator (kernel_rules.h); this is where the two are held to agree.
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/cuda/contraction_kernel.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/contraction/ops_maps.h"
#include "kernels/contraction/workloads.h"
#include "kernels/cuda/contraction_problems.h"
#include "kernels/default_schedule.h"
#include "kernels/test_devices.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;

const device::DeviceInfo kA100 = testing::device_of(108, 163 * 1024, 8, 0);
const device::DeviceInfo kH100 = testing::device_of(132, 227 * 1024, 9, 0);

Contraction matched(const contraction::IndexMaps& maps) {
  contraction::MatchResult r = contraction::match(maps);
  EXPECT_TRUE(r.contraction);
  return r.contraction.value_or(Contraction{});
}

// The plain epilogue: the accumulator cast to the output's type, stored as is.
std::optional<std::string> implementable(const Contraction& c, const Schedule& s) {
  contraction::Epilogue e;
  e.out_dtype = c.maps.c.dtype;
  return kernels::cuda::can_implement(c, e, s);
}

TEST(DefaultScheduleCodegen, EveryDefaultOfThePublicWorkloadsIsImplementable) {
  std::optional<std::string> dir = contraction::testing::workloads_dir();
  if (!dir) GTEST_SKIP() << "shared/workloads not found beside " << TESSEL_SOURCE_DIR;
  std::vector<contraction::testing::Workload> all = contraction::testing::load_workloads(*dir);
  ASSERT_GT(all.size(), 60u);
  int tensor_core = 0, wgmma = 0;
  for (const device::DeviceInfo& device : {kA100, kH100}) {
    for (const contraction::testing::Workload& w : all) {
      SCOPED_TRACE(w.name + " on sm_" + std::to_string(device.cc_major * 10 + device.cc_minor));
      const Contraction c = matched(w.maps);
      const Schedule s = default_schedule(c, device);
      const std::optional<std::string> why = implementable(c, s);
      EXPECT_FALSE(why) << s.name() << ": " << *why;
      tensor_core += s.instruction != Instruction::kSimt;
      wgmma += s.instruction == Instruction::kWgmma;
    }
  }
  // Every public workload is Tensor Core eligible (ci=3 convs with 2-byte loads), and the
  // H100 defaults include wgmma kernels.
  EXPECT_EQ(tensor_core, 2 * static_cast<int>(all.size()));
  EXPECT_GT(wgmma, 0);
}

// The public workloads with int8 operands (C f32: the int32 sums as floats), where the int8
// kernel takes them: Tensor Core eligible (ci = 3 is not: single bytes) and K-major (NHWC
// convs, NT GEMMs). Their default is an mma.sync schedule, or on Hopper possibly the TMA
// kernel's wgmma k32, that the generator implements.
TEST(DefaultScheduleCodegen, EveryInt8DefaultOfTheKMajorPublicWorkloadsIsImplementable) {
  std::optional<std::string> dir = contraction::testing::workloads_dir();
  if (!dir) GTEST_SKIP() << "shared/workloads not found beside " << TESSEL_SOURCE_DIR;
  int taken = 0;
  for (const device::DeviceInfo& device : {kA100, kH100}) {
    for (contraction::testing::Workload& w : contraction::testing::load_workloads(*dir)) {
      SCOPED_TRACE(w.name + " on sm_" + std::to_string(device.cc_major * 10 + device.cc_minor));
      w.maps.a.dtype = w.maps.b.dtype = DType::kI8;
      w.maps.c.dtype = DType::kF32;
      const Contraction c = matched(w.maps);
      if (!contraction::tensor_core_eligible(c) || c.a_major != contraction::Major::kK ||
          c.b_major != contraction::Major::kK)
        continue;
      const Schedule s = default_schedule(c, device);
      const bool tma = s.mainloop == Mainloop::kTma;
      EXPECT_TRUE(s.instruction == Instruction::kMmaSync || (tma && device.cc_major == 9)) << s.name();
      EXPECT_EQ(s.block_k % 64, 0) << s.name();
      const std::optional<std::string> why = implementable(c, s);
      EXPECT_FALSE(why) << s.name() << ": " << *why;
      ++taken;
    }
  }
  EXPECT_GT(taken, 80);
}

// int8 convs outside the benchmark lists: odd and half-row channel counts, K of one 64-byte row
// and of 8 k-tiles (the 1x1 rules), 5x5 and dilated taps, strides, batch 1 to 256 (grouped
// int8 convs stay float: fold-qdq refuses them).
// Whatever default the rules and the ranking give (the TMA kernel's cooperative 256x64 and
// one-wave 128x128 among them), the generator implements it.
TEST(DefaultScheduleCodegen, Int8ConvDefaultsOverASweepAreImplementable) {
  int taken = 0, tma = 0, coop_256x64 = 0, tile_128x128 = 0, half_row_k = 0;
  for (int64_t n : {1, 8, 32, 256})
    for (int64_t hw : {7, 17, 56})
      for (int64_t ci : {32, 48, 64, 72, 192, 256, 1024})
        for (int64_t co : {24, 64, 136, 192, 256})
          for (int64_t k : {1, 3, 5})
            for (int64_t stride : {1, 2})
              for (int64_t dilation : {1, 2}) {
                  if (k == 1 && dilation == 2) continue;
                  const contraction::Conv2dParams p =
                      cuda::testing::conv_params(n, hw, hw, ci, co, k, stride, dilation * (k / 2), dilation);
                  const Contraction c =
                      matched(contraction::conv2d_nhwc_maps(p, {DType::kI8, DType::kI8, DType::kF32}));
                  if (!contraction::tensor_core_eligible(c)) continue;
                  const Schedule s = default_schedule(c, kH100);
                  SCOPED_TRACE(s.name());
                  const std::optional<std::string> why = implementable(c, s);
                  EXPECT_FALSE(why) << "n" << n << " " << hw << "x" << hw << " " << ci << " -> " << co
                                    << " k" << k << " s" << stride << " d" << dilation
                                    << ": " << *why;
                  ++taken;
                  tma += s.mainloop == Mainloop::kTma;
                  coop_256x64 += s.name().rfind("tma_256x64", 0) == 0;
                  tile_128x128 += s.name().rfind("tma_128x128x128_s4", 0) == 0;
                  half_row_k += k == 1 && s.name().rfind("tma_256x128x64", 0) == 0;
                }
  EXPECT_GT(taken, 1000);
  EXPECT_GT(tma, 200);
  EXPECT_GT(coop_256x64, 0);
  EXPECT_GT(tile_128x128, 0);
  EXPECT_GT(half_row_k, 0);
  std::printf("%d int8 convs: %d on the TMA kernel, %d on the cooperative 256x64, %d on the 128x128 s4, "
              "%d 1x1 on the 256x128 in 64-byte k-tiles\n",
              taken, tma, coop_256x64, tile_128x128, half_row_k);
}

TEST(DefaultScheduleCodegen, TheWholeSpaceIsImplementable) {
  // GEMM in the three layouts (K-major and MN-major operands), a padded strided conv (gather),
  // ci=3 (2-byte loads), ci=4 (8-byte loads) and a grouped conv (batch of channel slices).
  std::vector<contraction::IndexMaps> problems;
  for (const char* layout : {"NN", "NT", "TN"})
    problems.push_back(
        contraction::gemm_maps(512, 384, 1024, *contraction::parse_gemm_layout(layout)));
  for (int64_t ci : {64, 3, 4}) {
    contraction::Conv2dParams p;
    p.n = 2;
    p.h = p.w = 28;
    p.ci = ci;
    p.co = 128;
    p.kh = p.kw = 3;
    p.stride_h = p.stride_w = 2;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    problems.push_back(contraction::conv2d_nhwc_maps(p));
  }
  contraction::Conv2dParams grouped;
  grouped.h = grouped.w = 14;
  grouped.ci = grouped.co = 256;
  grouped.kh = grouped.kw = 3;
  grouped.pad_top = grouped.pad_left = grouped.pad_bottom = grouped.pad_right = 1;
  grouped.groups = 4;
  problems.push_back(contraction::conv2d_nhwc_maps(grouped));

  for (const contraction::IndexMaps& maps : problems) {
    const Contraction c = matched(maps);
    SCOPED_TRACE(c.str());
    ASSERT_TRUE(contraction::tensor_core_eligible(c));
    const std::vector<Schedule> space = enumerate_schedules(c, kH100);
    ASSERT_GT(space.size(), 100u);
    int rejected = 0;
    for (const Schedule& s : space) {
      const std::optional<std::string> why = implementable(c, s);
      if (why && ++rejected <= 5) ADD_FAILURE() << s.name() << ": " << *why;
    }
    EXPECT_EQ(rejected, 0) << "of " << space.size();
  }
}

}  // namespace
}  // namespace tessel::kernels
