// How a dynamic engine runs a batch (runtime/batch_split.h), on plans whose profiles carry
// made-up predicted times: exact profiles, padding where one larger run is cheaper, chunks
// where splitting is, and the plans without predictions.
#include "runtime/batch_split.h"

#include <gtest/gtest.h>

namespace tessel::runtime {
namespace {

// A plan with one profile per batch of `batches`, each one launch predicting `us(batch)`.
template <typename Fn>
EnginePlan plan_with(const std::vector<int64_t>& batches, Fn us) {
  EnginePlan p;
  p.batch = {batches.front(), batches.back(), batches.back()};
  for (int64_t b : batches) {
    PlanProfile& q = p.profiles.emplace_back();
    q.batch = b;
    PlanLaunch l;
    l.predicted_us = us(b);
    q.launches.push_back(l);
  }
  return p;
}

// A run costs a fixed 100 us and 20 us per item.
double latency_then_linear(int64_t b) { return 100.0 + 20.0 * static_cast<double>(b); }

int64_t covered(const std::vector<BatchChunk>& chunks) {
  int64_t next = 0;
  for (const BatchChunk& c : chunks) {
    EXPECT_EQ(c.offset, next);
    next += c.items;
  }
  return next;
}

TEST(BatchSplit, AProfileRunsAsItself) {
  const EnginePlan p = plan_with({1, 2, 4, 8, 16, 32, 64}, latency_then_linear);
  for (size_t k = 0; k < p.profiles.size(); ++k)
    EXPECT_EQ(split_batch(p, p.profiles[k].batch),
              (std::vector<BatchChunk>{{k, 0, p.profiles[k].batch}}));
}

TEST(BatchSplit, SmallBatchesPadAndLargeOnesSplit) {
  const EnginePlan p = plan_with({1, 2, 4, 8, 16, 32, 64}, latency_then_linear);
  // 3: one run of 4 (180 us) beats 2 + 1 (140 + 120 us).
  EXPECT_EQ(split_batch(p, 3), (std::vector<BatchChunk>{{2, 0, 3}}));
  // 33: 32 + 1 (740 + 120 us) beats one run of 64 (1380 us).
  EXPECT_EQ(split_batch(p, 33), (std::vector<BatchChunk>{{5, 0, 32}, {0, 32, 1}}));
  // 63: one run of 64 (1380 us) beats 32 + 16 + 8 + 4 + 2 + 1 (1860 us).
  EXPECT_EQ(split_batch(p, 63), (std::vector<BatchChunk>{{6, 0, 63}}));
  for (int64_t b = 1; b <= 64; ++b) {
    const std::vector<BatchChunk> chunks = split_batch(p, b);
    EXPECT_EQ(covered(chunks), b);
    // Never worse than padding up to the next profile.
    double cost = 0, pad = 1e30;
    for (const BatchChunk& c : chunks) cost += predicted_us(p.profiles[c.profile]) + kRunOverheadUs;
    for (const PlanProfile& q : p.profiles)
      if (q.batch >= b) pad = std::min(pad, predicted_us(q) + kRunOverheadUs);
    EXPECT_LE(cost, pad + 1e-9) << "batch " << b;
  }
}

TEST(BatchSplit, WithoutPredictionsPadsToTheNextProfile) {
  const EnginePlan p = plan_with({1, 2, 4, 8}, [](int64_t) { return 0.0; });
  EXPECT_EQ(predicted_us(p.profiles[0]), 0);
  EXPECT_EQ(split_batch(p, 3), (std::vector<BatchChunk>{{2, 0, 3}}));
  EXPECT_EQ(split_batch(p, 5), (std::vector<BatchChunk>{{3, 0, 5}}));
  EXPECT_EQ(split_batch(p, 8), (std::vector<BatchChunk>{{3, 0, 8}}));
}

// A range that does not start at 1: what is left below the smallest profile is padded up.
TEST(BatchSplit, RemaindersBelowTheSmallestProfilePad) {
  // Costs in proportion to the items: 5 runs as 3 + 3 (the second padded, 600 us) rather than as
  // 8 (800 us) or 4 + 3 (700 us).
  const EnginePlan p = plan_with({3, 4, 8}, [](int64_t b) { return 100.0 * static_cast<double>(b); });
  const std::vector<BatchChunk> c = split_batch(p, 5);
  EXPECT_EQ(covered(c), 5);
  EXPECT_EQ(c, (std::vector<BatchChunk>{{0, 0, 3}, {0, 3, 2}}));
}

TEST(BatchSplit, OutOfRangeBatchesAreNamed) {
  const EnginePlan p = plan_with({1, 2, 4}, latency_then_linear);
  EXPECT_EQ(batch_error(p, 4), "");
  EXPECT_EQ(batch_error(p, 5), "batch 5 is outside the engine's batch range 1:4");
  EXPECT_EQ(batch_error(p, 0), "batch 0 is outside the engine's batch range 1:4");
  const EnginePlan s = plan_with({8}, latency_then_linear);
  EXPECT_EQ(batch_error(s, 3),
            "batch 3: the engine is compiled for batch 8 (compile it with --batch A:B for a range)");
  EXPECT_EQ(batch_range_str(s.batch), "8");
  EXPECT_EQ(batch_range_str(p.batch), "1:4");
}

}  // namespace
}  // namespace tessel::runtime
