// BatchClock (src/serve/batch_clock.h): when a pipelined server instance hands itself back to
// Triton's batcher, from the times it measured.
#include "serve/batch_clock.h"

#include <gtest/gtest.h>

namespace tessel::serve {
namespace {

// Nothing measured: at once. Then the submitted run's start, plus its batch size's GPU time,
// less the lead: forming, staging its rows, and the margin.
TEST(BatchClock, FormsTheNextBatchAStagingTimeBeforeTheRunEnds) {
  BatchClock clock(64);
  EXPECT_EQ(clock.form_next_ns(32, 1'000'000), 0u);
  clock.ran(32, 1200);     // us
  clock.staged(32, 64);    // 2 us per row
  clock.formed(100);
  // 1200 - (100 + 32 * 2 + 150) = 886 us after the start.
  EXPECT_EQ(clock.form_next_ns(32, 1'000'000), 1'000'000u + 886'000u);
  // A size not measured, or outside the range: at once.
  EXPECT_EQ(clock.form_next_ns(16, 1'000'000), 0u);
  EXPECT_EQ(clock.form_next_ns(65, 1'000'000), 0u);
  EXPECT_EQ(clock.form_next_ns(-1, 1'000'000), 0u);
}

// A lead as long as the run (staging slower than the GPU): at once.
TEST(BatchClock, AtOnceWhereStagingTakesAsLongAsTheRun) {
  BatchClock clock(8);
  clock.ran(8, 300);
  clock.staged(8, 160);  // 20 us per row: 160 + 150 > 300
  EXPECT_EQ(clock.form_next_ns(8, 5), 0u);
}

// Moving averages: each new measurement weighs a fifth; the wait is capped at 20 ms.
TEST(BatchClock, AveragesAndCapsTheWait) {
  BatchClock clock(4);
  clock.ran(4, 1000);
  clock.ran(4, 2000);  // 0.8 * 1000 + 0.2 * 2000 = 1200
  EXPECT_EQ(clock.form_next_ns(4, 0), (1200u - 150u) * 1000u);
  clock.ran(3, 1e9);
  EXPECT_EQ(clock.form_next_ns(3, 0), 20'000'000u);
}

}  // namespace
}  // namespace tessel::serve
