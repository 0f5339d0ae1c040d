#include "cli/tune_replay.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/op_kernels.h"
#include "core/error.h"
#include "kernels/default_schedule.h"
#include "kernels/estimate.h"

namespace tessel::cli {
namespace {

// The fastest time per (key, schedule) in a tune log.
using Measured = std::map<std::string, std::map<std::string, double>>;

Measured read_log(const std::string& path) {
  std::ifstream in(path);
  TESSEL_USER_CHECK(in.good()) << path << ": cannot open file";
  Measured m;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    TESSEL_USER_CHECK(j.is_object() && j.contains("key") && j["key"].is_string() && j.contains("schedule") &&
                      j["schedule"].is_string() && j.contains("microseconds") && j["microseconds"].is_number())
        << path << ":" << number << ": not a tune log line (JSON with key, schedule, microseconds)";
    const double us = j["microseconds"].get<double>();
    if (!(us > 0)) continue;  // a candidate that failed its check or did not run
    auto [it, fresh] = m[j["key"].get<std::string>()].try_emplace(j["schedule"].get<std::string>(), us);
    if (!fresh) it->second = std::min(it->second, us);
  }
  return m;
}

struct Row {
  std::string key, node, schedule, fastest;
  int nodes = 0;              // contraction nodes of the model with this key
  double default_us = -1;     // the default's time in the log; < 0: not timed there
  double fastest_us = -1;     // the log's fastest for the key; < 0: the key is not in the log
};

std::string fmt_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

// Writes `log`'s lines whose key is one of `contractions`' with estimate_us as kernels::estimate
// gives it now (as tune logs it: kernels::estimate without the epilogue's reads; 0 for grouped
// kernels, which tune does not rank). Drops the lines of other keys, and of
// schedules the contraction cannot take by that name or that do not fit the target; prints
// what it wrote and dropped.
void relog(const std::string& log, const std::string& out_path, const std::vector<UniqueContraction>& contractions,
           const device::DeviceInfo& target) {
  std::map<std::string, const contraction::Contraction*> by_key;
  for (const UniqueContraction& u : contractions) by_key.emplace(u.key, &*u.plan.match.contraction);
  std::ifstream in(log);
  TESSEL_USER_CHECK(in.good()) << log << ": cannot open file";
  std::ofstream out(out_path);
  TESSEL_USER_CHECK(out.good()) << out_path << ": cannot write file";
  int written = 0, foreign = 0, unnamed = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line);  // read_log has checked every line
    const auto c = by_key.find(j["key"].get<std::string>());
    if (c == by_key.end()) {
      ++foreign;
      continue;
    }
    const contraction::Contraction& con = *c->second;
    const std::optional<kernels::Schedule> s = kernels::parse_schedule(j["schedule"].get<std::string>(), con);
    if (!s) {
      ++unnamed;
      continue;
    }
    const bool ranked = kernels::grouped_schedules(con, target).empty();
    const double us = ranked ? kernels::estimate(con, *s, target).microseconds : 0.0;
    if (!std::isfinite(us)) {  // the schedule does not fit this target's SM
      ++unnamed;
      continue;
    }
    j["estimate_us"] = us;
    out << j.dump() << "\n";
    ++written;
  }
  std::printf("relog: %d lines re-estimated into %s; dropped %d of keys not in the model, %d of schedules "
              "their contraction does not take here\n",
              written, out_path.c_str(), foreign, unnamed);
}

}  // namespace

int replay_tune_log(const ModelOptions& model, const std::string& precision, const ReplayOptions& o) {
  const Measured measured = read_log(o.log);
  const PlannedModel planned = lower_for_planning(model, precision);
  const device::DeviceInfo target = planning_target(o.target);
  std::vector<Row> rows;
  const std::vector<UniqueContraction> contractions = unique_contractions(planned, target);
  if (!o.relog.empty()) relog(o.log, o.relog, contractions, target);
  for (const UniqueContraction& u : contractions) {
    Row r;
    r.key = u.key;
    r.node = planned.graph.nodes[static_cast<size_t>(u.node)].name;
    r.schedule = u.plan.schedule.name();
    r.nodes = u.nodes;
    if (auto k = measured.find(u.key); k != measured.end()) {
      for (const auto& [s, us] : k->second)
        if (r.fastest_us < 0 || us < r.fastest_us) {
          r.fastest_us = us;
          r.fastest = s;
        }
      if (auto d = k->second.find(r.schedule); d != k->second.end()) r.default_us = d->second;
    }
    rows.push_back(std::move(r));
  }

  std::printf("target %s (%d SMs): the defaults of %zu unique contractions against %s\n", target.arch().c_str(),
              target.sm_count, rows.size(), o.log.c_str());
  std::printf("%-28s %5s  %-36s %9s  %-36s %9s\n", "contraction (first node)", "nodes", "default", "us",
              "fastest in the log", "us");
  double sum_default = 0, sum_fastest = 0;
  int timed = 0, timed_nodes = 0, absent = 0;
  nlohmann::json out_rows = nlohmann::json::array();
  for (const Row& r : rows) {
    const std::string d = r.default_us >= 0 ? fmt_us(r.default_us) : (r.fastest_us >= 0 ? "not timed" : "-");
    const std::string f = r.fastest_us >= 0 ? fmt_us(r.fastest_us) : "not in log";
    std::printf("%-28s %5d  %-36s %9s  %-36s %9s\n", r.node.substr(0, 28).c_str(), r.nodes, r.schedule.c_str(),
                d.c_str(), r.fastest.c_str(), f.c_str());
    if (r.fastest_us < 0) ++absent;
    if (r.default_us >= 0) {
      ++timed;
      timed_nodes += r.nodes;
      sum_default += r.nodes * r.default_us;
      sum_fastest += r.nodes * r.fastest_us;
    }
    nlohmann::json j = {{"key", r.key}, {"node", r.node}, {"nodes", r.nodes}, {"default", r.schedule}};
    j["default_us"] = r.default_us >= 0 ? nlohmann::json(r.default_us) : nlohmann::json(nullptr);
    j["fastest"] = r.fastest_us >= 0 ? nlohmann::json(r.fastest) : nlohmann::json(nullptr);
    j["fastest_us"] = r.fastest_us >= 0 ? nlohmann::json(r.fastest_us) : nlohmann::json(nullptr);
    out_rows.push_back(std::move(j));
  }
  std::printf("defaults timed in the log: %d of %zu contractions (%d nodes); their nodes %.1f us, the log's "
              "fastest %.1f us (defaults / fastest %.3f); %d contractions not in the log\n",
              timed, rows.size(), timed_nodes, sum_default, sum_fastest,
              sum_fastest > 0 ? sum_default / sum_fastest : 0.0, absent);
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    TESSEL_USER_CHECK(f.good()) << o.json << ": cannot write file";
    const nlohmann::json j = {{"target", target.arch()},
                              {"contractions", out_rows},
                              {"timed", timed},
                              {"default_us", sum_default},
                              {"fastest_us", sum_fastest}};
    f << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace tessel::cli
