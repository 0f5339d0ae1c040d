// `tessel tune`: measures schedules of a model's contractions on the GPU present and keeps the
// fastest of each in a tuning database (compiler/tuning_db.h), which `compile --db` (and
// explain, predict, bench, profile, run) then use.
//
// Unique workloads only: contraction nodes with the same key (compiler::tuning_key: the
// contraction, and what of its epilogue changes its time) are tuned once. For each, the
// candidates are the cost model's default first, then the schedule space
// (kernels::enumerate_schedules) ranked by the cost model, those the generator takes with the
// node's epilogue, at most --per-layer; for a grouped conv, the grouped kernels' schedules
// (kernels::grouped_schedules) in their own order instead, or, for wide groups that no grouped
// kernel takes, the space's schedules of the kernel that runs groups as a batch
// (kernels::runs_groups_as_batch). Each candidate is compiled
// (in parallel) as the node alone, a one-node engine run on random inputs, checked against the
// default's output (relative L2 within 1e-2: a wrong kernel is never recorded), and timed as
// `tessel profile` times each launch (the median of replays of a graph of back-to-back copies,
// per copy). The database is saved after every layer, so a run cut short
// (or --budget spent) keeps what it measured and the next run goes on from there.
//
//   tessel tune MODEL --db FILE [--budget 5m] [--per-layer 16] [--retune]
//   tessel tune --merge A.json B.json ... -o OUT.json
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "cli/progress.h"
#include "compiler/compile_plan.h"
#include "compiler/plan_node.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "device/cuda_api.h"
#include "kernels/contraction/grouped.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/default_schedule.h"
#include "kernels/estimate.h"
#include "passes/pipeline.h"
#include "runtime/engine.h"

namespace tessel::cli {
namespace {

using Clock = std::chrono::steady_clock;

// "90s", "5m", "1h", or plain seconds.
double parse_budget_seconds(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  TESSEL_USER_CHECK(used > 0 && scale > 0 && v > 0)
      << "--budget '" << text << "': expected a duration such as 90s, 5m or 1h";
  return v * scale;
}

// Node `n` alone: its non-constant inputs become graph inputs, its constants stay, its output
// is the graph output.
ir::Graph isolate(const ir::Graph& g, const ir::Node& n) {
  ir::Graph h;
  h.name = n.name;
  h.opset = g.opset;
  std::map<ir::ValueId, ir::ValueId> id;
  std::vector<ir::ValueId> inputs;
  for (ir::ValueId v : n.inputs) {
    if (v == ir::kNoValue) {
      inputs.push_back(ir::kNoValue);
      continue;
    }
    auto [it, fresh] = id.try_emplace(v, ir::kNoValue);
    if (fresh) {
      const ir::Value& val = g.value(v);
      if (val.is_constant()) {
        it->second = h.add_constant(val.name, *val.data);
      } else {
        it->second = h.add_value(val.name, val.type);
        h.inputs.push_back(it->second);
      }
    }
    inputs.push_back(it->second);
  }
  std::vector<ir::ValueId> outputs;
  for (ir::ValueId v : n.outputs) {
    outputs.push_back(h.add_value(g.value(v).name + ".out", g.type(v)));
    h.outputs.push_back(outputs.back());
  }
  ir::Node copy = n;
  copy.inputs = inputs;
  copy.outputs = outputs;
  h.nodes.push_back(copy);
  return h;
}

double rel_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.get_f64(i) - b.get_f64(i);
    num += d * d;
    den += b.get_f64(i) * b.get_f64(i);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Job {
  int node = 0;
  std::string key;                    // the model's contraction key (the record's)
  std::vector<kernels::Schedule> candidates;  // the default first
};

struct Measured {
  bool ok = false;
  double us = 0;
  std::string why;
};

}  // namespace

Action add_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tune", "Measure schedules of a model's contractions on this GPU into a tuning database");
  struct Opts {
    ModelOptions model;
    std::string precision = "fp16";
    std::string db;
    std::string budget = "5m";
    int per_layer = 16;
    bool retune = false;
    std::vector<std::string> merge;
    std::string output;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("model", o->model.path, "ONNX model (.onnx) or textual IR (.tir)");
  cmd->add_option("--batch", o->model.batch, "fix a symbolic batch dimension");
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--db", o->db, "the tuning database to extend (created if missing)");
  cmd->add_option("--budget", o->budget, "time to spend measuring: 90s, 5m, 1h (default 5m)");
  cmd->add_option("--per-layer", o->per_layer, "schedules measured per unique contraction")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--retune", o->retune, "measure contractions the database already has again");
  cmd->add_option("--merge", o->merge, "merge these databases (the faster record wins) into -o");
  cmd->add_option("-o,--output", o->output, "the merged database (with --merge)");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    if (!o->merge.empty()) {
      TESSEL_USER_CHECK(!o->output.empty() && o->model.path.empty())
          << "tune --merge A B ... -o OUT: give the databases to merge and -o, no model";
      compiler::TuningDb merged;
      for (const std::string& path : o->merge) merged.merge(compiler::TuningDb::load(path));
      merged.save(o->output);
      std::printf("merged %zu databases: %zu records -> %s\n", o->merge.size(), merged.size(),
                  o->output.c_str());
      return 0;
    }
    TESSEL_USER_CHECK(!o->model.path.empty() && !o->db.empty())
        << "tune MODEL --db FILE: give the model and the database to write";
    const double budget_s = parse_budget_seconds(o->budget);
    compiler::TuningDb db = compiler::TuningDb::load_or_empty(o->db);
    std::string why;
    TESSEL_USER_CHECK(device::cuda_available(&why))
        << "tessel tune measures on the GPU: no CUDA device (" << why << ")";
    const device::DeviceInfo target = device::device_info();
    const std::string device_key = compiler::TuningDb::device_key(target);

    PlannedModel planned = lower_for_planning(o->model, o->precision);  // no --db: untuned plans
    const ir::Graph& g = planned.graph;
    const compiler::Options& options = planned.options;

    // The unique Tensor Core contractions left to tune, with their candidates.
    std::vector<Job> jobs;
    std::set<std::string> seen;
    int cached = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const compiler::NodePlan plan = compiler::plan_node(g, g.nodes[i], options, target);
      if (plan.run != compiler::NodeRun::kContraction || !plan.tensor_cores()) continue;
      const contraction::Contraction& c = *plan.match.contraction;
      const std::string key = compiler::tuning_key(c, plan.epilogue);
      if (!seen.insert(key).second) continue;
      if (!o->retune && db.find(key, device_key)) {
        ++cached;
        continue;
      }
      Job job{static_cast<int>(i), key, {plan.schedule}};
      std::vector<std::pair<double, kernels::Schedule>> ranked;
      // A grouped conv: the grouped kernels' schedules in their own order (the cost model
      // does not rank the halo kernel); anything else: the space ranked by the cost model.
      std::vector<kernels::Schedule> space = kernels::grouped_schedules(c, target);
      const bool grouped = !space.empty();
      if (!grouped) space = kernels::enumerate_schedules(c, target);
      const bool dense_groups = !grouped && contraction::grouped_layout(c).has_value();
      for (const kernels::Schedule& s : space) {
        if (s.name() == plan.schedule.name()) continue;
        if (dense_groups && !kernels::runs_groups_as_batch(s)) continue;
        if (kernels::cuda::can_implement(c, plan.epilogue, s)) continue;
        ranked.push_back({grouped ? 0 : kernels::estimate(c, s, target).microseconds, s});
      }
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [us, s] : ranked) {
        if (static_cast<int>(job.candidates.size()) >= o->per_layer) break;
        job.candidates.push_back(s);
      }
      jobs.push_back(std::move(job));
    }
    std::printf("tune %s on %s: %zu unique contractions to tune (%d already in %s), up to %d "
                "schedules each, budget %.0f s\n",
                o->model.path.c_str(), target.name.c_str(), jobs.size(), cached, o->db.c_str(),
                o->per_layer, budget_s);

    const Clock::time_point start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    ProgressBar progress;
    int done = 0, measured = 0;
    double default_us = 0, best_us = 0;
    for (const Job& job : jobs) {
      if (elapsed() > budget_s) break;
      const ir::Node& n = g.nodes[static_cast<size_t>(job.node)];
      const ir::Graph alone = isolate(g, n);
      const compiler::NodePlan alone_plan = compiler::plan_node(alone, alone.nodes[0], options, target);
      TESSEL_ICHECK(alone_plan.run == compiler::NodeRun::kContraction) << n.label() << " alone";
      const std::string alone_key =
          compiler::tuning_key(*alone_plan.match.contraction, alone_plan.epilogue);
      // Compile every candidate (NVRTC, in parallel), the node alone with the candidate as its
      // tuning record.
      std::vector<std::future<std::optional<compiler::CompiledPlan>>> builds;
      for (const kernels::Schedule& s : job.candidates) {
        builds.push_back(std::async(std::launch::async, [&, s]() -> std::optional<compiler::CompiledPlan> {
          compiler::Options opts = options;
          auto one = std::make_shared<compiler::TuningDb>();
          one->add({alone_key, device_key, s.name(), 1.0, 1});
          opts.tuning = one;
          try {
            compiler::CompiledPlan p = compiler::compile_lowered(alone, opts, target);
            const std::vector<runtime::PlanLaunch>& launches = p.plan.profiles.at(0).launches;
            if (launches.size() != 1 || launches[0].schedule != s.name())
              return std::nullopt;
            return p;
          } catch (const Error&) {
            return std::nullopt;
          }
        }));
      }
      std::mt19937_64 rng(job.node + 1);
      std::vector<Tensor> inputs;
      for (ir::ValueId v : alone.inputs) inputs.push_back(random_tensor(alone.type(v), rng));
      std::optional<Tensor> reference;
      double best = 0, default_time = 0;
      std::string best_name;
      int tried = 0;
      for (size_t k = 0; k < builds.size(); ++k) {
        std::optional<compiler::CompiledPlan> built = builds[k].get();
        if (!built || (k > 0 && elapsed() > budget_s)) continue;
        try {
          runtime::Engine engine = runtime::Engine::load(std::move(built->plan), n.name);
          const Tensor out = engine.run(inputs).at(0);
          if (k == 0) reference = out;
          // (Written so that a NaN anywhere, a kernel that left an output unwritten, fails.)
          else if (!reference || !(rel_l2(out, *reference) <= 1e-2)) continue;
          // Timed as `tessel profile` times a launch (copies of it back to back in a graph,
          // per copy), so that a record is the kernel's time in an engine: a one-launch
          // graph's replay also holds the graph's own launch latency, about 2 us.
          const double us = 1e3 * engine.profile_launches(/*reps=*/15).at(0);
          ++tried;
          if (k == 0) default_us += us, default_time = us;
          if (best_name.empty() || us < best) best = us, best_name = job.candidates[k].name();
        } catch (const Error&) {
          continue;  // a candidate that fails to load or run is not recorded
        }
      }
      ++done;
      measured += tried;
      if (!best_name.empty()) {
        best_us += best;
        db.add({job.key, device_key, best_name, best, tried});
        db.save(o->db);
      }
      const double t = elapsed();
      progress.update("tuning", done, static_cast<int>(jobs.size()));
      std::printf(
          "[%d/%zu] %-28s best %s %.1f us of %d measured (default %s %.1f us); %.0f s, "
          "ETA %.0f s\n",
          done, jobs.size(), n.name.c_str(), best_name.c_str(), best, tried,
          job.candidates[0].name().c_str(), default_time, t,
          t / done * (static_cast<double>(jobs.size()) - done));
      std::fflush(stdout);
    }
    db.save(o->db);
    std::printf("tuned %d of %zu contractions in %.0f s (%d schedules measured): %.1f us with "
                "the defaults -> %.1f us tuned (%.1f%% faster); %zu records in %s\n",
                done, jobs.size(), elapsed(), measured, default_us, best_us,
                default_us > 0 ? 100.0 * (default_us - best_us) / default_us : 0.0, db.size(),
                o->db.c_str());
    return 0;
  };
}

}  // namespace tessel::cli
