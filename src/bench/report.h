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

}  // namespace tessel::bench
