// Reporting benchmark results: a compact table for the terminal and a JSON file with every
// number, for docs/ tables and for tracking performance across commits.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace tessel::bench {

// Geometric mean of library/tessel time over the workloads where both ran and tessel's
// result was correct (a wrong kernel's speed does not count); 0 when there are none.
double geomean_ratio(const std::vector<BenchResult>& results);

// One line per workload: tessel and library median µs, ratio, tessel's TFLOP/s and % of
// `peak_tflops`, its error, and a note (why it did not run, WRONG, the library's failure,
// sides timed by different methods);
// then the geometric mean of the ratios.
void print_table(std::ostream& os, const std::vector<BenchResult>& results, double peak_tflops);

// Everything about a run: device, library versions, options, peak, each workload's
// measurements of both sides (the library's pick, and every library candidate with its own
// times), and the geometric mean.
nlohmann::json to_json(const Bench& bench, const std::vector<BenchResult>& results,
                       double peak_tflops);

// Writes to_json() to `path` (pretty-printed); UserError if the file cannot be written.
void write_json(const std::string& path, const Bench& bench,
                const std::vector<BenchResult>& results, double peak_tflops);

// int8 runs (Bench::run_int8). Geometric mean of fp16 library / int8 library time over the
// workloads where both ran and were correct; 0 when there are none.
double geomean_int8_speedup(const std::vector<Int8Result>& results);
// Of int8 library / tessel int8 time, where both ran and tessel was correct; 0 when none.
double geomean_int8_ratio(const std::vector<Int8Result>& results);

// One line per workload: the int8 library's and the fp16 library's median µs and their ratio
// (what int8 buys the library), tessel's int8 µs and the int8 library/tessel ratio ("-" where
// tessel has no int8 kernel), the int8 library's TOPS, and a note (what the library wrote where
// not int8, a refusal, WRONG, why tessel did not run); then the geometric means.
void print_int8_table(std::ostream& os, const std::vector<Int8Result>& results);

// As to_json, with "precision": "int8" and per workload the int8 library's pick and candidates
// (each with the output it wrote, the graph or matmul it ran, and its mismatches), the fp16
// library's pick and candidates, tessel's int8 kernel, int8_speedup and ratio.
nlohmann::json to_json(const Bench& bench, const std::vector<Int8Result>& results,
                       double peak_tflops);
void write_json(const std::string& path, const Bench& bench, const std::vector<Int8Result>& results,
                double peak_tflops);

}  // namespace tessel::bench
