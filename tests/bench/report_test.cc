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

Int8Result int8_result(const std::string& name, Measurement library, Measurement fp16) {
  Int8Result r;
  r.op = "conv2d";
  r.name = name;
  r.flops = 4e9;
  r.library = std::move(library);
  r.library.output = r.library.ran ? "int8" : "";
  r.fp16_library = std::move(fp16);
  r.tessel.description = "no int8 kernel yet";
  return r;
}

TEST(BenchReport, Int8SpeedupAndRatio) {
  Int8Result r = int8_result("a", ran(10, 0, true), ran(25, 1e-4, true));
  EXPECT_DOUBLE_EQ(r.int8_speedup(), 2.5);
  EXPECT_DOUBLE_EQ(r.tflops(r.library), 400.0);  // 4e9 ops in 10 us
  EXPECT_EQ(r.ratio(), 0.0);                     // no tessel int8 time
  r.tessel = ran(8, 0, true);
  EXPECT_DOUBLE_EQ(r.ratio(), 1.25);
  r.library.output = "int32";  // a fallback's time is not int8's
  EXPECT_EQ(r.int8_speedup(), 0.0);
  r.library.output = "int8";
  r.library.correct = false;  // nor is a wrong one
  EXPECT_EQ(r.int8_speedup(), 0.0);
}

TEST(BenchReport, Int8TableShowsBothLibrariesAndAnEmptyTesselColumn) {
  Measurement refused;
  refused.description = "cuDNN int8: refused: ci=3 is not a multiple of 4";
  Int8Result fallback = int8_result("fallback", ran(12, 0, true), ran(20, 1e-4, true));
  fallback.library.output = "int32";
  fallback.library.variant = "conv(int8 x, int8 w; int32 acc) -> int32";
  Measurement wrong = ran(5, 0.1, false);
  wrong.mismatches = 7;
  std::vector<Int8Result> results = {int8_result("l1", ran(10, 0, true), ran(20, 1e-4, true)),
                                     int8_result("stem", refused, ran(30, 1e-4, true)), fallback,
                                     int8_result("broken", wrong, ran(20, 1e-4, true))};
  std::ostringstream os;
  print_int8_table(os, results);
  std::istringstream lines(os.str());
  std::string header, l1, stem, fb, broken, footer;
  for (std::string* line : {&header, &l1, &stem, &fb, &broken, &footer}) std::getline(lines, *line);
  for (const char* column :
       {"int8 lib us", "fp16 lib us", "fp16/int8", "tessel int8 us", "lib/tessel"})
    EXPECT_NE(header.find(column), std::string::npos) << header;
  // 10 us int8, 20 us fp16: 2.00x, 400 TOPS; tessel's column empty, with the reason.
  EXPECT_NE(l1.find("10.0"), std::string::npos) << l1;
  EXPECT_NE(l1.find("20.0"), std::string::npos) << l1;
  EXPECT_NE(l1.find("2.00"), std::string::npos) << l1;
  EXPECT_NE(l1.find("400.0"), std::string::npos) << l1;
  EXPECT_NE(l1.find("tessel: no int8 kernel yet"), std::string::npos) << l1;
  EXPECT_NE(stem.find("cuDNN int8: refused: ci=3 is not a multiple of 4"), std::string::npos)
      << stem;
  EXPECT_NE(fb.find("library wrote int32: conv(int8 x, int8 w; int32 acc) -> int32"),
            std::string::npos)
      << fb;
  EXPECT_NE(broken.find("library WRONG"), std::string::npos) << broken;
  EXPECT_NE(broken.find("7 beyond tolerance"), std::string::npos) << broken;
  // Only l1 counts: the fallback computed less than int8 out, and the others have no time.
  EXPECT_NE(footer.find("over 1 of 4 workloads: 2.000"), std::string::npos) << footer;
  EXPECT_NE(footer.find("int8 library/tessel over 0: 0.000"), std::string::npos) << footer;
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
