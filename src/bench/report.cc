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

}  // namespace

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
  std::ofstream out(path);
  out << to_json(bench, results, peak_tflops).dump(2) << "\n";
  out.close();
  TESSEL_USER_CHECK(out) << "cannot write benchmark results to '" << path << "'";
}

}  // namespace tessel::bench
