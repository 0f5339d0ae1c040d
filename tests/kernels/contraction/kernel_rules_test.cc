// tune/kernel_rules: which schedules the kernel templates can instantiate, one rule at a time.
#include "kernels/kernel_rules.h"

#include <gtest/gtest.h>

#include "kernels/contraction/ops_maps.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;

Contraction matched(const contraction::IndexMaps& maps) {
  contraction::MatchResult r = contraction::match(maps);
  EXPECT_TRUE(r.contraction);
  return r.contraction.value_or(Contraction{});
}

Contraction gemm(int64_t m, int64_t n, int64_t k, const char* layout = "NN") {
  return matched(contraction::gemm_maps(m, n, k, *contraction::parse_gemm_layout(layout)));
}

Contraction stem() {  // ResNet-50's first conv, ci = 3: single-element vectors
  contraction::Conv2dParams p;
  p.h = p.w = 224;
  p.ci = 3;
  p.co = 64;
  p.kh = p.kw = 7;
  p.stride_h = p.stride_w = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 3;
  return matched(contraction::conv2d_nhwc_maps(p));
}

Schedule wgmma_128x256() {
  Schedule s;
  s.instruction = Instruction::kWgmma;
  s.block_m = 128;
  s.block_n = 256;
  s.block_k = 64;
  s.warp_m = 64;
  s.warp_n = 256;
  s.stages = 4;
  return s;
}

// The reason check_schedule gives, or "" when the schedule is legal.
std::string why(const Contraction& c, const Schedule& s) {
  return check_schedule(c, s).value_or("");
}

TEST(CheckSchedule, AcceptsTheKernelsOfTheProbe) {
  const Contraction c = gemm(1024, 1024, 1024);
  EXPECT_EQ(why(c, Schedule{}), "");
  EXPECT_EQ(why(c, wgmma_128x256()), "");
  Schedule small;  // 32x32x64, four 16x16 warps
  small.block_m = small.block_n = 32;
  small.block_k = 64;
  small.warp_m = small.warp_n = 16;
  small.stages = 4;
  EXPECT_EQ(why(c, small), "");
}

TEST(CheckSchedule, TilesAndInstructions) {
  const Contraction c = gemm(1024, 1024, 1024);
  Schedule s;
  s.warp_m = 48;
  EXPECT_EQ(why(c, s), "warp tile 48x64 does not divide block tile 128x128");
  s = Schedule{};
  s.warp_m = s.warp_n = 16;  // 64 warps
  EXPECT_EQ(why(c, s), "2048 threads per CTA (at most 1024)");
  s = Schedule{};
  s.block_m = 120;
  s.warp_m = 24;
  EXPECT_EQ(why(c, s), "warp tile 24x64: mma.sync needs multiples of 16");
  s = Schedule{};
  s.block_k = 16;  // one k16 step per k-tile: no register double-buffering
  EXPECT_EQ(why(c, s), "block_k=16: mma.sync needs a multiple of 32");
  s = Schedule{};
  s.stages = 6;
  EXPECT_EQ(why(c, s), "6 stages (2 to 5)");

  s = wgmma_128x256();
  s.warp_n = 128;
  s.warp_m = 32;
  EXPECT_EQ(why(c, s),
            "warpgroup tile 32x128: wgmma needs m a multiple of 64 and n 64, 128 or 256");
  s = wgmma_128x256();
  s.warp_m = 128;  // 128 * 256 / 128 = 256 accumulators per thread
  EXPECT_EQ(why(c, s), "warpgroup tile 128x256 needs more than 128 accumulators per thread");
  s = wgmma_128x256();
  s.block_k = 32;
  EXPECT_EQ(why(c, s), "block_k=32: wgmma reads k in 64-element rows");
  s = wgmma_128x256();
  s.stages = 2;  // loads run stages - 2 k-tiles ahead
  EXPECT_EQ(why(c, s), "2 stages (3 to 5 for wgmma)");

  s = Schedule{};
  s.instruction = Instruction::kSimt;
  s.block_m = s.block_n = 64;
  s.block_k = 16;
  s.warp_m = 32;
  s.warp_n = 16;
  s.split_k = 2;
  EXPECT_EQ(why(c, s), "the SIMT kernel does not split K");
}

TEST(CheckSchedule, OperandLoads) {
  const Contraction c = gemm(1024, 1024, 1024);
  Schedule s;
  s.a_vec = 3;
  EXPECT_EQ(why(c, s), "a_vec=3 is not 1, 2, 4 or 8");

  // ci = 3: single elements only; 2-byte loads are legal for Tensor Core kernels.
  const Contraction st = stem();
  s = Schedule{};
  EXPECT_EQ(why(st, s), "a_vec=8 exceeds the 1 elements A can be read in");
  s.a_vec = s.b_vec = 1;
  s.block_m = s.block_n = 64;
  s.warp_m = s.warp_n = 32;
  EXPECT_EQ(why(st, s), "");
  // 128x128x32 at one element per load: 128 rows of 32 elements over 128 threads is 32 loads
  // per thread (the limit); 256 rows would be 64.
  s.block_m = s.block_n = 128;
  s.warp_m = s.warp_n = 64;
  EXPECT_EQ(why(st, s), "");
  s.block_m = 256;
  s.warp_n = 128;  // 4 x 1 warps
  EXPECT_EQ(why(st, s), "A tile needs 64 loads per thread per k-tile (at most 32)");

  // 64 threads cannot cover a 32x128 tile's 128 single-element columns.
  s = Schedule{};
  s.a_vec = s.b_vec = 1;
  s.block_m = s.block_n = 32;
  s.block_k = 128;
  s.warp_m = 32;
  s.warp_n = 16;
  EXPECT_EQ(why(st, s), "A tile (32x128, vec 1): 128 vectors per row do not divide 64 threads");

  // TN GEMM: A is MN-major, its shared-memory rows are block_m long: 32 swizzles for
  // mma.sync, not for wgmma (128-byte rows only).
  const Contraction tn = gemm(1024, 1024, 1024, "TN");
  s = Schedule{};
  s.block_m = 32;
  s.block_n = 64;
  s.warp_m = s.warp_n = 32;
  EXPECT_EQ(why(tn, s), "");
  s = wgmma_128x256();
  s.block_m = 64;
  s.warp_m = 64;
  EXPECT_EQ(why(tn, s), "");
}

TEST(CheckSchedule, SplitK) {
  const Contraction c = gemm(256, 256, 96);  // 3 k-tiles of 32
  Schedule s;
  s.split_k = 3;
  EXPECT_EQ(why(c, s), "");
  s.split_k = 4;
  EXPECT_EQ(why(c, s), "split_k=4 with 3 k-tiles");
  const Contraction k320 = gemm(256, 256, 320);  // 10 k-tiles: 4 splits of 3 leave one of 1,
  s.split_k = 4;                                 // 6 splits of 2 leave one empty
  EXPECT_EQ(why(k320, s), "");
  s.split_k = 6;
  EXPECT_EQ(why(k320, s), "split_k=6 over 10 k-tiles leaves a split empty");
}

}  // namespace
}  // namespace tessel::kernels
