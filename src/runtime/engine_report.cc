// latency_stats, make_profile_report and the profile table.
#include "runtime/engine_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tessel::runtime {
namespace {

// 25.6M, 4.10G: three significant digits are all a profile needs.
std::string si(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (std::abs(v) >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

LatencyStats latency_stats(std::vector<float> replay_ms, int64_t batch) {
  TESSEL_ICHECK(!replay_ms.empty()) << "latency_stats of no replays";
  std::sort(replay_ms.begin(), replay_ms.end());
  const size_t n = replay_ms.size();
  LatencyStats s;
  s.reps = static_cast<int>(n);
  s.median_ms = n % 2 ? replay_ms[n / 2] : (replay_ms[n / 2 - 1] + replay_ms[n / 2]) / 2.0;
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90_ms = replay_ms[std::max<size_t>(rank, 1) - 1];
  s.throughput_per_s = s.median_ms > 0 ? static_cast<double>(batch) * 1e3 / s.median_ms : 0;
  return s;
}

ProfileReport make_profile_report(const PlanProfile& plan, const std::vector<float>& launch_ms,
                                  double replay_ms, const device::DeviceInfo& device) {
  TESSEL_ICHECK(launch_ms.size() == plan.launches.size())
      << launch_ms.size() << " times for " << plan.launches.size() << " launches";
  ProfileReport r;
  r.device = device;
  r.replay_us = replay_ms * 1e3;
  for (float ms : launch_ms) r.total_us += ms * 1e3;
  double start = 0;
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const PlanLaunch& l = plan.launches[i];
    KernelRow row;
    row.index = static_cast<int>(i);
    row.launch = &l;
    row.start_us = start;
    row.us = launch_ms[i] * 1e3;
    start += row.us;
    row.percent = r.total_us > 0 ? 100.0 * row.us / r.total_us : 0;
    row.predicted_us = l.predicted_us;
    if (row.us > 0) {
      row.tflops = static_cast<double>(l.flops) / (row.us * 1e6);
      row.gbps = static_cast<double>(l.bytes) / (row.us * 1e3);
    }
    const std::optional<DType> operands = dtype_from_name(l.operand_dtype);
    const bool int8 = operands && is_int8_operand(*operands);
    const double peak = l.instruction == "SIMT" ? device.peak_simt_tflops
                        : int8                  ? device.peak_tensor_int8_tops
                                                : device.peak_tensor_tflops;
    if (peak > 0) row.percent_of_peak = 100.0 * row.tflops / peak;
    r.total_flops += l.flops;
    r.total_bytes += l.bytes;
    r.rows.push_back(row);
  }
  return r;
}

PredictionError prediction_error(const ProfileReport& r) {
  PredictionError e;
  std::vector<double> errors;
  for (const KernelRow& row : r.rows) {
    if (row.predicted_us <= 0 || row.us <= 0) continue;
    const double rel = std::abs(row.predicted_us - row.us) / row.us;
    errors.push_back(rel);
    e.within_10_percent += rel <= 0.1;
    e.total_predicted_us += row.predicted_us;
  }
  e.kernels = static_cast<int>(errors.size());
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    e.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2.0;
  }
  return e;
}

std::string format_profile(const ProfileReport& r) {
  std::string out;
  char line[512];
  if (r.device.peak_tensor_tflops > 0 && r.device.peak_simt_tflops > 0) {
    std::snprintf(line, sizeof line,
                  "%% of peak against the %s datasheet (%s): Tensor Cores %.1f TFLOP/s (dense "
                  "fp16), %.1f TOP/s (dense int8), SIMT %.1f TFLOP/s (fp32)\n",
                  r.device.name.c_str(), r.device.arch().c_str(), r.device.peak_tensor_tflops,
                  r.device.peak_tensor_int8_tops, r.device.peak_simt_tflops);
  } else {
    std::snprintf(line, sizeof line, "%% of peak: no peak is known for this device\n");
  }
  out += line;
  const char* row_format = "%-4s %-28s %-20s %9s %9s %6s %9s %8s %7s %9s %8s  %s\n";
  std::snprintf(line, sizeof line, row_format, "#", "node", "op", "time us", "pred us", "%",
                "FLOPs", "TFLOP/s", "% peak", "bytes", "GB/s", "instruction");
  out += line;
  for (const KernelRow& row : r.rows) {
    const PlanLaunch& l = *row.launch;
    const std::string peak = row.percent_of_peak ? fixed(*row.percent_of_peak, 1) : "-";
    std::snprintf(line, sizeof line, row_format, std::to_string(row.index).c_str(), l.node.c_str(),
                  l.op.c_str(), fixed(row.us, 2).c_str(),
                  row.predicted_us > 0 ? fixed(row.predicted_us, 2).c_str() : "-",
                  fixed(row.percent, 1).c_str(),
                  si(static_cast<double>(l.flops)).c_str(), fixed(row.tflops, 2).c_str(),
                  peak.c_str(), si(static_cast<double>(l.bytes)).c_str(),
                  fixed(row.gbps, 1).c_str(),
                  (l.instruction + (l.schedule.empty() ? "" : " " + l.schedule)).c_str());
    out += line;
  }
  const double tflops =
      r.total_us > 0 ? static_cast<double>(r.total_flops) / (r.total_us * 1e6) : 0;
  const double gbps = r.total_us > 0 ? static_cast<double>(r.total_bytes) / (r.total_us * 1e3) : 0;
  const PredictionError pe = prediction_error(r);
  std::snprintf(line, sizeof line, "%-4s %-28s %-20s %9s %9s %6s %9s %8s %7s %9s %8s\n", "", "total",
                "", fixed(r.total_us, 2).c_str(),
                pe.kernels > 0 ? fixed(pe.total_predicted_us, 2).c_str() : "-", "100.0",
                si(static_cast<double>(r.total_flops)).c_str(), fixed(tflops, 2).c_str(), "",
                si(static_cast<double>(r.total_bytes)).c_str(), fixed(gbps, 1).c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "sum of the %zu kernels' own times %.2f us; one replay of the whole CUDA graph "
                "%.2f us\n",
                r.rows.size(), r.total_us, r.replay_us);
  out += line;
  if (pe.kernels > 0) {
    std::snprintf(line, sizeof line,
                  "predicted (tessel predict): %.2f us in all, %+.1f%% of the measured sum; per "
                  "kernel median error %.1f%%, %d of %d within 10%%\n",
                  pe.total_predicted_us, 100.0 * (pe.total_predicted_us - r.total_us) / r.total_us,
                  100.0 * pe.median, pe.within_10_percent, pe.kernels);
    out += line;
  }
  return out;
}

}  // namespace tessel::runtime
