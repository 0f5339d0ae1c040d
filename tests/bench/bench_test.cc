// The benchmark driver's decisions that need no GPU: how many launches a timing graph holds,
// and which library candidate a result reports.
#include "bench/bench.h"

#include <gtest/gtest.h>

namespace tessel::bench {
namespace {

TEST(LaunchesPerGraph, AboutTwoHundredMicrosecondsOfRunsUpToFifty) {
  EXPECT_EQ(launches_per_graph(10, 1), 20);  // 200 / 10
  EXPECT_EQ(launches_per_graph(7, 1), 29);   // ceil(28.6)
  EXPECT_EQ(launches_per_graph(199, 1), 2);  // ceil(1.005)
  EXPECT_EQ(launches_per_graph(200, 1), 1);
  EXPECT_EQ(launches_per_graph(2800, 1), 1);  // a long kernel alone in its replay
  EXPECT_EQ(launches_per_graph(3, 1), 50);    // ceil(66.7), capped
  EXPECT_EQ(launches_per_graph(0, 1), 50);    // an estimate of nothing: the cap, not a crash
  EXPECT_EQ(launches_per_graph(-1, 1), 50);
}

TEST(LaunchesPerGraph, WholePassesOverTheOperandSets) {
  EXPECT_EQ(launches_per_graph(10, 2), 20);  // already 10 passes over 2 sets
  EXPECT_EQ(launches_per_graph(3, 3), 51);   // 50 rounded up to 17 passes of 3
  EXPECT_EQ(launches_per_graph(7, 4), 32);   // 29 rounded up to 8 passes of 4
  EXPECT_EQ(launches_per_graph(3, 86), 86);  // more sets than launches: one full pass
  EXPECT_EQ(launches_per_graph(2800, 5), 5);
  EXPECT_EQ(launches_per_graph(3, 256), 256);
  EXPECT_THROW(launches_per_graph(10, 0), InternalError);
}

Measurement ran(const std::string& what, double median_us, bool correct) {
  Measurement m;
  m.ran = true;
  m.correct = correct;
  m.median_us = median_us;
  m.description = what;
  return m;
}

Measurement failed(const std::string& what) {
  Measurement m;
  m.description = what;
  return m;
}

TEST(PickLibrary, TheFastestCorrectCandidate) {
  // resnet50_l3_1x1_512_256_b32 as seen on an H100: cuDNN's pick 319 us, the GEMM 13.5 us.
  const Measurement slow = ran("cuDNN: IMPLICIT_GEMM default-math", 319, true);
  const Measurement fast = ran("cuBLASLt as GEMM (1x1): algo 66", 13.5, true);
  EXPECT_EQ(pick_library({slow, fast}).description, fast.description);
  EXPECT_EQ(pick_library({fast, slow}).description, fast.description);
  EXPECT_DOUBLE_EQ(pick_library({slow, fast}).median_us, 13.5);
  EXPECT_EQ(pick_library({slow}).description, slow.description);
}

TEST(PickLibrary, CorrectBeatsFastAndRanBeatsFailed) {
  const Measurement right = ran("cuDNN: IMPLICIT_PRECOMP_GEMM tensor-op", 20, true);
  const Measurement wrong = ran("cuBLASLt as GEMM (1x1): algo 66", 5, false);
  EXPECT_EQ(pick_library({wrong, right}).description, right.description);
  // Both wrong: the faster is reported (and flagged WRONG by the table).
  const Measurement wrong_slow = ran("cuDNN: GEMM default-math", 50, false);
  EXPECT_EQ(pick_library({wrong_slow, wrong}).description, wrong.description);
  // A failed candidate never wins over one that ran, even a wrong one.
  const Measurement none = failed("cuDNN: cuDNN has no forward algorithm");
  EXPECT_EQ(pick_library({none, wrong}).description, wrong.description);
  EXPECT_TRUE(pick_library({none, wrong}).ran);
}

TEST(PickLibrary, NoneRanListsEveryFailure) {
  const Measurement m =
      pick_library({failed("cuDNN: no algorithm"), failed("cuBLASLt as GEMM (1x1): no algorithm")});
  EXPECT_FALSE(m.ran);
  EXPECT_EQ(m.description, "cuDNN: no algorithm; cuBLASLt as GEMM (1x1): no algorithm");
  EXPECT_FALSE(pick_library({}).ran);
  EXPECT_EQ(pick_library({}).description, "no library baseline");
}

TEST(Timing, Names) {
  EXPECT_EQ(timing_name(Timing::kGraph), "graph");
  EXPECT_EQ(timing_name(Timing::kEvents), "events");
  EXPECT_EQ(BenchOptions{}.timing, Timing::kGraph);
}

}  // namespace
}  // namespace tessel::bench
