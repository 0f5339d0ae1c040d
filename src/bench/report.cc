// Benchmark reports: the terminal table and the JSON file.
#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

namespace tessel::bench {
namespace {

constexpr size_t kNoteWidth = 70;  // the table keeps one line per workload; JSON has it all

std::string first_line(const std::string& s, size_t width) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > width) line = line.substr(0, width - 3) + "...";
  return line;
}

std::string fixed(double v, int precision) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(precision) << v;
  return os.str();
}

std::string scientific(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1e", v);
  return buf;
}

std::string wrong(const Measurement& m) {
  std::ostringstream os;
  os << "WRONG: rel_l2 " << scientific(m.rel_l2);
  if (m.nonfinite) os << ", " << m.nonfinite << " NaN/Inf";
  if (m.mismatches) os << ", " << m.mismatches << " beyond tolerance";
  return os.str();
}

std::string note(const BenchResult& r) {
  std::vector<std::string> parts;
  if (!r.tessel.ran) parts.push_back(r.tessel.description);
  if (r.tessel.ran && !r.tessel.correct) parts.push_back(wrong(r.tessel));
  if (!r.library.ran) parts.push_back("library: " + r.library.description);
  if (r.library.ran && !r.library.correct) parts.push_back("library " + wrong(r.library));
  // A side whose graph capture failed was timed with events: its overhead is in its time.
  if (r.tessel.ran && r.library.ran && r.tessel.timing != r.library.timing) {
    parts.push_back("timed differently: tessel " + std::string(timing_name(r.tessel.timing)) +
                    ", library " + std::string(timing_name(r.library.timing)));
  }
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "; ") + p;
  return first_line(s, kNoteWidth);
}

nlohmann::json measurement_json(const BenchResult& r, const Measurement& m, double peak) {
  nlohmann::json j;
  j["ran"] = m.ran;
  j["description"] = m.description;
  if (!m.ran) return j;
  j["correct"] = m.correct;
  j["median_us"] = m.median_us;
  j["min_us"] = m.min_us;
  j["tflops"] = r.tflops(m);
  j["percent_of_peak"] = peak > 0 ? 100 * r.tflops(m) / peak : 0.0;
  j["rel_l2"] = m.rel_l2;
  j["max_abs_err"] = m.max_abs;
  j["nonfinite"] = m.nonfinite;
  j["timing"] = timing_name(m.timing);
  if (m.timing == Timing::kGraph) j["launches_per_graph"] = m.launches_per_graph;
  if (!m.search.empty()) j["search"] = m.search;
  return j;
}

// The device, libraries and options of a run.
nlohmann::json header_json(const Bench& bench) {
  const device::DeviceInfo& d = bench.device();
  nlohmann::json j;
  j["device"] = {{"name", d.name},           {"arch", d.arch()},
                 {"sm_count", d.sm_count},   {"l2_bytes", d.l2_bytes},
                 {"clock_khz", d.clock_khz}, {"global_mem", d.global_mem}};
  j["libraries"] = {{"cudnn", cudnn_version()},
                    {"cublaslt", cublaslt_version()},
                    {"nvrtc", device::nvrtc_version()}};
  const BenchOptions& o = bench.options();
  j["options"] = {{"warmup", o.warmup},
                  {"reps", o.reps},
                  {"tolerance", o.tolerance},
                  {"seed", o.seed},
                  {"timing", timing_name(o.timing)}};
  return j;
}

void write_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  TESSEL_USER_CHECK(out) << "cannot write benchmark results to '" << path << "'";
}

double geomean(const std::vector<double>& ratios) {
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  return ratios.empty() ? 0 : std::exp(log_sum / static_cast<double>(ratios.size()));
}

std::vector<double> int8_speedups(const std::vector<Int8Result>& results) {
  std::vector<double> v;
  for (const Int8Result& r : results)
    if (r.int8_speedup() > 0) v.push_back(r.int8_speedup());
  return v;
}

std::vector<double> int8_ratios(const std::vector<Int8Result>& results) {
  std::vector<double> v;
  for (const Int8Result& r : results)
    if (r.ratio() > 0 && r.tessel.correct) v.push_back(r.ratio());
  return v;
}

std::string int8_note(const Int8Result& r) {
  std::vector<std::string> parts;
  if (!r.library.ran) parts.push_back(r.library.description);
  if (r.library.ran && r.library.output != "int8")
    parts.push_back("library wrote " + r.library.output + ": " + r.library.variant);
  if (r.library.ran && !r.library.correct) parts.push_back("library " + wrong(r.library));
  if (!r.fp16_library.ran) parts.push_back("fp16 library: " + r.fp16_library.description);
  if (r.fp16_library.ran && !r.fp16_library.correct)
    parts.push_back("fp16 library " + wrong(r.fp16_library));
  if (!r.tessel.ran) parts.push_back("tessel: " + r.tessel.description);
  if (r.tessel.ran && !r.tessel.correct) parts.push_back("tessel " + wrong(r.tessel));
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "; ") + p;
  return first_line(s, 2 * kNoteWidth);
}

}  // namespace

double geomean_int8_speedup(const std::vector<Int8Result>& results) {
  return geomean(int8_speedups(results));
}

double geomean_int8_ratio(const std::vector<Int8Result>& results) {
  return geomean(int8_ratios(results));
}

void print_int8_table(std::ostream& os, const std::vector<Int8Result>& results) {
  size_t name_width = 8;
  for (const Int8Result& r : results) name_width = std::max(name_width, r.name.size());
  const auto cell = [&](const std::string& s, int width) { os << std::setw(width) << s << "  "; };
  os << std::left << std::setw(static_cast<int>(name_width)) << "workload" << std::right << "  ";
  cell("int8 lib us", 11);
  cell("fp16 lib us", 11);
  cell("fp16/int8", 9);
  cell("int8 TOPS", 9);
  cell("tessel int8 us", 14);
  cell("lib/tessel", 10);
  os << "note\n";
  for (const Int8Result& r : results) {
    os << std::left << std::setw(static_cast<int>(name_width)) << r.name << std::right << "  ";
    cell(r.library.ran ? fixed(r.library.median_us, 1) : "-", 11);
    cell(r.fp16_library.ran ? fixed(r.fp16_library.median_us, 1) : "-", 11);
    cell(r.int8_speedup() > 0 ? fixed(r.int8_speedup(), 2) : "-", 9);
    cell(r.library.ran ? fixed(r.tflops(r.library), 1) : "-", 9);
    cell(r.tessel.ran ? fixed(r.tessel.median_us, 1) : "-", 14);
    cell(r.ratio() > 0 ? fixed(r.ratio(), 2) : "-", 10);
    os << int8_note(r) << "\n";
  }
  os << "geomean fp16/int8 library time over " << int8_speedups(results).size() << " of "
     << results.size() << " workloads: " << fixed(geomean_int8_speedup(results), 3)
     << "; int8 library/tessel over " << int8_ratios(results).size() << ": "
     << fixed(geomean_int8_ratio(results), 3) << " (> 1: tessel faster)\n";
}

nlohmann::json to_json(const Bench& bench, const std::vector<Int8Result>& results,
                       double peak_tflops) {
  nlohmann::json j = header_json(bench);
  j["precision"] = "int8";
  j["peak_fp16_tflops"] = peak_tflops;
  j["geomean_int8_speedup"] = geomean_int8_speedup(results);
  j["geomean_ratio"] = geomean_int8_ratio(results);
  nlohmann::json workloads = nlohmann::json::array();
  for (const Int8Result& r : results) {
    // The fp16 side's JSON reads r as a BenchResult would (FLOPs and peak are the same).
    BenchResult as_fp16;
    as_fp16.flops = r.flops;
    nlohmann::json candidates = nlohmann::json::array();
    for (const Measurement& m : r.fp16_candidates)
      candidates.push_back(measurement_json(as_fp16, m, peak_tflops));
    // An int8 side: TOPS under "tflops", no share of the fp16 peak; what it wrote.
    const auto int8_json = [&](const Measurement& m) {
      nlohmann::json json = measurement_json(as_fp16, m, 0);
      json.erase("percent_of_peak");
      if (m.ran) json["mismatches"] = m.mismatches;
      if (!m.output.empty()) json["output"] = m.output;
      if (!m.variant.empty()) json["variant"] = m.variant;
      return json;
    };
    nlohmann::json int8_candidates = nlohmann::json::array();
    for (const Measurement& m : r.library_candidates) int8_candidates.push_back(int8_json(m));
    workloads.push_back({{"op", r.op},
                         {"name", r.name},
                         {"shape", r.shape},
                         {"flops", r.flops},
                         {"buffer_sets", r.buffer_sets},
                         {"int8_speedup", r.int8_speedup()},
                         {"ratio", r.ratio()},
                         {"int8_library", int8_json(r.library)},
                         {"int8_library_candidates", std::move(int8_candidates)},
                         {"fp16_library", measurement_json(as_fp16, r.fp16_library, peak_tflops)},
                         {"fp16_library_candidates", std::move(candidates)},
                         {"tessel_int8", int8_json(r.tessel)}});
  }
  j["workloads"] = std::move(workloads);
  return j;
}

void write_json(const std::string& path, const Bench& bench, const std::vector<Int8Result>& results,
                double peak_tflops) {
  write_file(path, to_json(bench, results, peak_tflops));
}

double geomean_ratio(const std::vector<BenchResult>& results) {
  double log_sum = 0;
  int n = 0;
  for (const BenchResult& r : results) {
    if (r.ratio() <= 0 || !r.tessel.correct) continue;
    log_sum += std::log(r.ratio());
    ++n;
  }
  return n ? std::exp(log_sum / n) : 0;
}

void print_table(std::ostream& os, const std::vector<BenchResult>& results, double peak_tflops) {
  size_t name_width = 8;
  for (const BenchResult& r : results) name_width = std::max(name_width, r.name.size());
  const auto cell = [&](const std::string& s, int width) { os << std::setw(width) << s << "  "; };
  os << std::left << std::setw(static_cast<int>(name_width)) << "workload" << std::right << "  ";
  cell("tessel us", 10);
  cell("library us", 10);
  cell("ratio", 6);
  cell("TFLOP/s", 7);
  cell("%peak", 6);
  cell("rel_err", 7);
  os << "note\n";

  int counted = 0;
  for (const BenchResult& r : results) {
    const Measurement& t = r.tessel;
    os << std::left << std::setw(static_cast<int>(name_width)) << r.name << std::right << "  ";
    cell(t.ran ? fixed(t.median_us, 1) : "-", 10);
    cell(r.library.ran ? fixed(r.library.median_us, 1) : "-", 10);
    cell(r.ratio() > 0 ? fixed(r.ratio(), 2) : "-", 6);
    cell(t.ran ? fixed(r.tflops(t), 1) : "-", 7);
    cell(t.ran && peak_tflops > 0 ? fixed(100 * r.tflops(t) / peak_tflops, 1) : "-", 6);
    cell(t.ran ? scientific(t.rel_l2) : "-", 7);
    os << note(r) << "\n";
    if (r.ratio() > 0 && t.correct) ++counted;
  }
  os << "geomean library/tessel time over " << counted << " of " << results.size()
     << " workloads: " << fixed(geomean_ratio(results), 3) << " (> 1: tessel faster)";
  if (peak_tflops > 0) os << "; measured fp16 peak " << fixed(peak_tflops, 1) << " TFLOP/s";
  os << "\n";
}

nlohmann::json to_json(const Bench& bench, const std::vector<BenchResult>& results,
                       double peak_tflops) {
  nlohmann::json j = header_json(bench);
  j["peak_fp16_tflops"] = peak_tflops;
  j["geomean_ratio"] = geomean_ratio(results);
  nlohmann::json workloads = nlohmann::json::array();
  for (const BenchResult& r : results) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const Measurement& m : r.library_candidates)
      candidates.push_back(measurement_json(r, m, peak_tflops));
    workloads.push_back({{"op", r.op},
                         {"name", r.name},
                         {"shape", r.shape},
                         {"flops", r.flops},
                         {"buffer_sets", r.buffer_sets},
                         {"ratio", r.ratio()},
                         {"tessel", measurement_json(r, r.tessel, peak_tflops)},
                         {"library", measurement_json(r, r.library, peak_tflops)},
                         {"library_candidates", std::move(candidates)}});
  }
  j["workloads"] = std::move(workloads);
  return j;
}

void write_json(const std::string& path, const Bench& bench,
                const std::vector<BenchResult>& results, double peak_tflops) {
  write_file(path, to_json(bench, results, peak_tflops));
}

}  // namespace tessel::bench
