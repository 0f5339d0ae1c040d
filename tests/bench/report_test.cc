// Benchmark reports from hand-made results, and the reference kernels' CUDA source compiled
// for every target arch: both without a GPU.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "bench/reference.h"
#include "device/cuda_api.h"

namespace tessel::bench {
namespace {

Measurement ran(double median_us, double rel_l2, bool correct) {
  Measurement m;
  m.ran = true;
  m.correct = correct;
  m.median_us = median_us;
  m.min_us = median_us;
  m.rel_l2 = rel_l2;
  return m;
}

BenchResult result(const std::string& name, Measurement tessel, Measurement library) {
  BenchResult r;
  r.op = "gemm";
  r.name = name;
  r.flops = 2e9;
  r.tessel = std::move(tessel);
  r.library = std::move(library);
  return r;
}

TEST(BenchReport, RatioAndThroughput) {
  BenchResult r = result("a", ran(10, 1e-4, true), ran(20, 1e-4, true));
  EXPECT_DOUBLE_EQ(r.ratio(), 2.0);
  EXPECT_DOUBLE_EQ(r.tflops(r.tessel), 200.0);  // 2e9 flop in 10 us
  EXPECT_DOUBLE_EQ(r.tflops(r.library), 100.0);
  r.tessel.ran = false;
  EXPECT_EQ(r.ratio(), 0.0);
  EXPECT_EQ(r.tflops(r.tessel), 0.0);
}

TEST(BenchReport, GeomeanCountsOnlyCorrectResultsOfBothSides) {
  Measurement unsupported;
  unsupported.description = "ci=3 is not a multiple of 8";
  std::vector<BenchResult> results = {
      result("fast", ran(10, 1e-4, true), ran(40, 1e-4, true)),  // 4
      result("slow", ran(40, 1e-4, true), ran(10, 1e-4, true)),  // 1/4
      result("even", ran(10, 1e-4, true), ran(10, 1e-4, true)),  // 1
      result("wrong", ran(1, 0.5, false), ran(10, 1e-4, true)),  // excluded
      result("unsupported", unsupported, ran(10, 1e-4, true)),   // excluded
  };
  EXPECT_DOUBLE_EQ(geomean_ratio(results), 1.0);
  results.resize(1);
  EXPECT_DOUBLE_EQ(geomean_ratio(results), 4.0);
  EXPECT_EQ(geomean_ratio({}), 0.0);
}

TEST(BenchReport, TableShowsNumbersAndWhyNot) {
  Measurement unsupported;
  unsupported.description = "ci=3 is not a multiple of 8; SIMT kernel used";
  Measurement wrong = ran(5, 0.25, false);
  wrong.nonfinite = 12;
  Measurement library_failed;
  library_failed.description = "cuDNN has no forward algorithm";
  std::vector<BenchResult> results = {
      result("resnet_fc", ran(10, 3e-4, true), ran(15, 2e-4, true)),
      result("stem", unsupported, ran(10, 1e-4, true)),
      result("broken", wrong, ran(10, 1e-4, true)),
      result("nolib", ran(10, 3e-4, true), library_failed),
  };
  std::ostringstream os;
  print_table(os, results, /*peak_tflops=*/400);
  const std::string table = os.str();
  std::istringstream lines(table);
  std::string header, fc, stem, broken, nolib, footer;
  std::getline(lines, header);
  std::getline(lines, fc);
  std::getline(lines, stem);
  std::getline(lines, broken);
  std::getline(lines, nolib);
  std::getline(lines, footer);
  EXPECT_NE(header.find("tessel us"), std::string::npos) << table;
  // 10 us tessel vs 15 us library: ratio 1.50, 200 TFLOP/s = 50% of 400.
  EXPECT_NE(fc.find("10.0"), std::string::npos) << fc;
  EXPECT_NE(fc.find("15.0"), std::string::npos) << fc;
  EXPECT_NE(fc.find("1.50"), std::string::npos) << fc;
  EXPECT_NE(fc.find("200.0"), std::string::npos) << fc;
  EXPECT_NE(fc.find("50.0"), std::string::npos) << fc;
  EXPECT_NE(fc.find("3.0e-04"), std::string::npos) << fc;
  EXPECT_NE(stem.find("ci=3 is not a multiple of 8; SIMT kernel used"), std::string::npos) << stem;
  EXPECT_NE(broken.find("WRONG: rel_l2 2.5e-01, 12 NaN/Inf"), std::string::npos) << broken;
  EXPECT_NE(nolib.find("library: cuDNN has no forward algorithm"), std::string::npos) << nolib;
  // Only resnet_fc counts: the others are unsupported, wrong, or lack a library time.
  EXPECT_NE(footer.find("over 1 of 4 workloads: 1.500"), std::string::npos) << footer;
  EXPECT_NE(footer.find("measured fp16 peak 400.0 TFLOP/s"), std::string::npos) << footer;
}

TEST(BenchReport, TableFlagsSidesTimedDifferently) {
  Measurement events = ran(12, 1e-4, true);
  events.timing = Timing::kEvents;  // its graph capture failed
  std::vector<BenchResult> results = {result("mixed", ran(10, 1e-4, true), events),
                                      result("same", ran(10, 1e-4, true), ran(12, 1e-4, true))};
  std::ostringstream os;
  print_table(os, results, /*peak_tflops=*/0);
  std::istringstream lines(os.str());
  std::string header, mixed, same;
  std::getline(lines, header);
  std::getline(lines, mixed);
  std::getline(lines, same);
  EXPECT_NE(mixed.find("timed differently: tessel graph, library events"), std::string::npos)
      << mixed;
  EXPECT_EQ(same.find("timed differently"), std::string::npos) << same;
}

// The device helpers must build for every arch tessel targets, on a machine without a GPU.
TEST(BenchReference, SourceCompilesForSm80AndSm90a) {
  device::set_cache_dir("");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    device::CompileOptions o;
    o.arch = arch;
    device::CompiledKernel k =
        device::compile(kReferenceSource, "bench_reference", o);
    for (const char* entry :
         {"fill_uniform_f16", "conv2d_nhwc_reference", "gemm_reference", "compare_f16"})
      EXPECT_NE(k.cubin.find(entry), std::string::npos) << arch << " lacks " << entry;
  }
}

}  // namespace
}  // namespace tessel::bench
