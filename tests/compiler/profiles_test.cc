// Dynamic batch in the compiler (compiler/profiles.h): the profile set of a range, and single-
// batch plans merged into one engine sharing constants, cubins and memory. Without a GPU.
#include "compiler/profiles.h"

#include <gtest/gtest.h>

namespace tessel::compiler {
namespace {

using runtime::EnginePlan;
using runtime::PlanLaunch;
using runtime::PlanProfile;
using runtime::Region;

TEST(Profiles, BatchesAreTheEndsTheOptAndPowersOfTwo) {
  EXPECT_EQ(profile_batches({1, 64, 32}), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(profile_batches({1, 64, 24}), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 64}));
  EXPECT_EQ(profile_batches({3, 20, 20}), (std::vector<int64_t>{3, 4, 8, 16, 20}));
  EXPECT_EQ(profile_batches({8, 8, 8}), (std::vector<int64_t>{8}));
  // Every batch of a range is at most twice a profile below it.
  for (int64_t b = 1; b <= 1000; ++b) {
    const std::vector<int64_t> p = profile_batches({1, 1000, 1000});
    const auto above = std::lower_bound(p.begin(), p.end(), b);
    ASSERT_NE(above, p.end());
    EXPECT_LT(*above, 2 * b) << b;
  }
}

TEST(Profiles, EveryMultipleOfAStepToo) {
  EXPECT_EQ(profile_batches({1, 64, 64}, 8),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}));
  EXPECT_EQ(profile_batches({3, 20, 20}, 6), (std::vector<int64_t>{3, 4, 6, 8, 12, 16, 18, 20}));
  EXPECT_EQ(profile_batches({1, 64, 32}, 0), profile_batches({1, 64, 32}));
  // A batch between profiles is padded by fewer than `every` rows above the powers of two.
  const std::vector<int64_t> p = profile_batches({1, 256, 256}, 16);
  for (int64_t b = 16; b <= 256; ++b) {
    const auto above = std::lower_bound(p.begin(), p.end(), b);
    ASSERT_NE(above, p.end());
    EXPECT_LT(*above - b, 16) << b;
  }
}

// A plan for batch b: one cubin per b, a weight shared by every b, a bias that is not, a
// workspace, and an arena growing with b.
EnginePlan plan_at(int64_t b) {
  EnginePlan p;
  p.target = runtime::recorded_target(device::known_device("sm_90a"));
  p.batch = {b, b, b};
  p.cubins = {"shared kernel", "kernel for batch " + std::to_string(b)};
  p.arena_bytes = 1024 * static_cast<uint64_t>(b);
  p.scratch_bytes = 64 * static_cast<uint64_t>(b);
  p.workspace_bytes = {4096};
  // [weight: 256 bytes of 'w'][per-batch bias: 16 bytes]
  p.constants = std::string(256, 'w') + std::string(16, static_cast<char>('0' + b));
  PlanProfile& q = p.profiles.emplace_back();
  q.batch = b;
  q.inputs = {{"x", DType::kF32, {b, 4}, {}}};
  q.outputs = {{"y", DType::kF32, {b, 4}, {Region::kOutput, 0, 0, 16 * static_cast<uint64_t>(b)}}};
  PlanLaunch l;
  l.entry = "k";
  l.cubin = 1;
  l.params = {{Region::kInput, 0, 0, 16 * static_cast<uint64_t>(b)},
              {Region::kConstants, 0, 0, 256},
              {Region::kConstants, 0, 256, 16},
              {Region::kWorkspace, 0, 0, 4096},
              {Region::kOutput, 0, 0, 16 * static_cast<uint64_t>(b)}};
  PlanLaunch shared = l;
  shared.cubin = 0;
  q.launches = {shared, l};
  return p;
}

TEST(Profiles, MergingSharesWhatIsEqual) {
  const EnginePlan m = merge_profiles({plan_at(1), plan_at(2), plan_at(4)}, 2);
  ASSERT_EQ(runtime::check_plan(m), std::nullopt);
  EXPECT_EQ(m.batch, (runtime::BatchRange{1, 4, 2}));
  ASSERT_EQ(m.profiles.size(), 3u);
  // The weight once and three biases (each block 256-byte aligned).
  EXPECT_EQ(m.constants.size(), 256u * 3 + 16);
  // The shared kernel once, and one per batch.
  EXPECT_EQ(m.cubins.size(), 4u);
  EXPECT_EQ(m.arena_bytes, 4096u);
  EXPECT_EQ(m.scratch_bytes, 256u);
  EXPECT_EQ(m.workspace_bytes.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const PlanProfile& q = m.profiles[k];
    const char digit = static_cast<char>('0' + q.batch);
    EXPECT_EQ(m.cubins[q.launches[0].cubin], "shared kernel");
    EXPECT_EQ(m.cubins[q.launches[1].cubin], "kernel for batch " + std::to_string(q.batch));
    const runtime::Relocation& w = q.launches[1].params[1];
    const runtime::Relocation& bias = q.launches[1].params[2];
    EXPECT_EQ(m.constants.substr(w.offset, w.bytes), std::string(256, 'w'));
    EXPECT_EQ(m.constants.substr(bias.offset, bias.bytes), std::string(16, digit));
    EXPECT_EQ(bias.offset % 256, 0u);
    // Each profile keeps a workspace of its own.
    EXPECT_EQ(q.launches[1].params[3].index, k);
  }
}

}  // namespace
}  // namespace tessel::compiler
