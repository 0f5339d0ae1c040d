// `tessel tune`: measures schedules of a model's contractions on the GPU present and keeps the
// fastest of each in a tuning database (compiler/tuning_db.h), which `compile --db` (and
// explain, predict, bench, profile, run) then use.
//
// Unique workloads only: contraction nodes with the same key (compiler::tuning_key: the
// contraction, and what of its epilogue changes its time) are tuned once. For each, the
// candidates are the cost model's default first, then the schedule space
// (kernels::enumerate_schedules) that the generator takes with the node's epilogue, ranked by
// the estimate times a factor per schedule class learned from earlier tunes
// (kernels::tuning_rank), the best three of each kernel family first (kernels::family_spread_order),
// at most --per-layer (the whole space without it); for a grouped
// conv, the grouped kernels' schedules (kernels::grouped_schedules) in their own order
// instead, or, for wide groups that no grouped kernel takes, the space's schedules of the
// kernel that runs groups as a batch (kernels::runs_groups_as_batch).
//
// The budget is spent in rounds, so that every contraction gets its best-ranked candidates
// before any gets its long tail: each round measures the next 16 candidates of every
// contraction, the first round the default and its 15 best-ranked rivals. Each candidate is
// compiled (in parallel) as the node alone, a one-node engine run on random inputs, checked
// against the default's output (relative L2 within 1e-2: a wrong kernel is never recorded),
// and timed as `tessel profile` times each launch (the median of replays of a graph of
// back-to-back copies, per copy). The database is saved after every contraction's round with
// how far down its candidates the search went (TuningRecord::candidates), so a run cut short
// (or --budget spent) keeps what it measured and the next run goes on from there.
//
//   tessel tune MODEL --db FILE [--budget 5m] [--per-layer N] [--retune] [--log FILE.jsonl]
//   tessel tune MODEL --db FILE --explore N ...   (N candidates per contraction drawn at random
//     from beyond the ranked depth: whether the cost model's order leaves wins at its tail)
//   tessel tune --merge A.json B.json ... -o OUT.json
//   tessel tune MODEL --replay FILE.jsonl [--target sm_90a] [--json OUT] [--relog OUT.jsonl]
//     (no GPU: tune_replay.h)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "cli/progress.h"
#include "cli/tune_replay.h"
#include "compiler/compile_plan.h"
#include "compiler/plan_node.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "core/hash.h"
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

struct Job {
  int node = 0;
  std::string key;                            // the model's contraction key (the record's)
  std::vector<kernels::Schedule> candidates;  // the default first, then the ranked space
  std::vector<double> estimates;              // the cost model's, per candidate (0: none)
  std::vector<size_t> ranks;                  // each candidate's place in the ranked order
  size_t next = 1;                            // the first candidate not yet measured
  size_t end = 0;                             // measure candidates [next, end)
  size_t depth = 0;  // with --explore: the ranked depth to record (the resume point, unchanged)
  // This run's: the default's time (timed in the job's first round), the best and how many
  // candidates ran.
  double default_us = 0, best_us = 0;
  std::string best;
  int measured = 0;
};

// Candidates per contraction and round (the first round's include the default).
constexpr size_t kRound = 16;
// Candidates of each kernel family ahead of the rank order: with at most five families
// (tc, wgmma, tma, halo, simt), the first round holds each one's best three.
constexpr int kPerFamily = 3;

}  // namespace

Action add_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tune", "Measure schedules of a model's contractions on this GPU into a tuning database");
  struct Opts {
    ModelOptions model;
    std::string precision = "fp16";
    std::string db;
    std::string budget = "5m";
    std::string log;
    int per_layer = 0;  // 0: the whole space
    int explore = 0;    // random candidates per contraction from beyond the ranked depth
    bool retune = false;
    std::vector<std::string> merge;
    std::string output;
    ReplayOptions replay;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("model", o->model.path, "ONNX model (.onnx) or textual IR (.tir)");
  cmd->add_option("--batch", o->model.batch, "fix a symbolic batch dimension");
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--db", o->db, "the tuning database to extend (created if missing)");
  cmd->add_option("--budget", o->budget, "time to spend measuring: 90s, 5m, 1h (default 5m)");
  cmd->add_option("--per-layer", o->per_layer,
                  "schedules measured per unique contraction, at most (default: all, as the "
                  "budget allows)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--log", o->log,
                  "append every measurement here, one JSON object per line (key, node, schedule, "
                  "rank, microseconds, estimate_us), for bench/rank_fit.py");
  cmd->add_option("--explore", o->explore,
                  "instead of going on down the ranked order, measure this many candidates per "
                  "contraction drawn at random from the rest of its space (a check of the cost "
                  "model's order: what the ranking would reach last)")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--retune", o->retune, "measure contractions the database already has again");
  cmd->add_option("--merge", o->merge, "merge these databases (the faster record wins) into -o");
  cmd->add_option("-o,--output", o->output, "the merged database (with --merge)");
  cmd->add_option("--replay", o->replay.log,
                  "no measuring: the model's default picks against a --log of an earlier tune (what "
                  "each default measured there, and the fastest)");
  cmd->add_option("--target", o->replay.target,
                  "with --replay: plan for this GPU, sm_90a (H100) or sm_80 (A100); default: the GPU "
                  "present, else sm_90a");
  cmd->add_option("--json", o->replay.json, "with --replay: also write its rows and totals as JSON here");
  cmd->add_option("--relog", o->replay.relog,
                  "with --replay: also write the log's lines of this model with estimate_us as this tessel "
                  "estimates them (for bench/rank_fit.py after a cost-model change)");
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
    if (!o->replay.log.empty()) {
      TESSEL_USER_CHECK(!o->model.path.empty() && o->db.empty())
          << "tune MODEL --replay LOG: give the model and the log, no --db (nothing is measured)";
      return replay_tune_log(o->model, o->precision, o->replay);
    }
    TESSEL_USER_CHECK(o->replay.target.empty() && o->replay.json.empty() && o->replay.relog.empty())
        << "tune: --target, --json and --relog go with --replay";
    TESSEL_USER_CHECK(!o->model.path.empty() && !o->db.empty())
        << "tune MODEL --db FILE: give the model and the database to write";
    TESSEL_USER_CHECK(o->explore == 0 || (o->per_layer == 0 && !o->retune))
        << "tune: --explore goes with neither --per-layer nor --retune";
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
    int cached = 0;
    size_t to_measure = 0;
    for (const UniqueContraction& u : unique_contractions(planned, target)) {
      const compiler::NodePlan& plan = u.plan;
      const contraction::Contraction& c = *plan.match.contraction;
      const std::string& key = u.key;
      Job job;
      job.node = u.node;
      job.key = key;
      job.candidates = {plan.schedule};
      struct Ranked {
        double rank, estimate;  // kernels::tuning_rank, the estimate it scales
        kernels::Schedule s;
      };
      std::vector<Ranked> ranked;
      // A grouped conv: the grouped kernels' schedules in their own order (the cost model
      // does not rank the halo kernel); anything else: the space ranked by the cost model.
      std::vector<kernels::Schedule> space = kernels::grouped_schedules(c, target);
      const bool grouped = !space.empty();
      if (!grouped) space = kernels::enumerate_schedules(c, target);
      const bool dense_groups = !grouped && contraction::grouped_layout(c).has_value();
      const int64_t read_bytes = contraction::read_bytes_per_output(plan.epilogue);
      const int math = contraction::transcendentals_per_output(plan.epilogue);
      for (const kernels::Schedule& s : space) {
        if (s.name() == plan.schedule.name()) continue;
        if (dense_groups && !kernels::runs_groups_as_batch(s)) continue;
        if (kernels::cuda::can_implement(c, plan.epilogue, s)) continue;
        if (grouped) {
          ranked.push_back({0, 0, s});
          continue;
        }
        const kernels::ScheduleEstimate e = kernels::estimate(c, s, target);
        ranked.push_back({e.microseconds * kernels::learned_factor(c, s, e, target, read_bytes, math),
                          e.microseconds, s});
      }
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const Ranked& a, const Ranked& b) { return a.rank < b.rank; });
      // The first round's rivals span the kernel families (kernels::family_spread_order).
      std::vector<kernels::Schedule> by_rank;
      for (const Ranked& r : ranked) by_rank.push_back(r.s);
      job.estimates = {grouped ? 0 : kernels::estimate(c, plan.schedule, target).microseconds};
      for (size_t i : kernels::family_spread_order(by_rank, kPerFamily)) {
        job.candidates.push_back(ranked[i].s);
        job.estimates.push_back(ranked[i].estimate);
      }
      for (size_t k = 0; k < job.candidates.size(); ++k) job.ranks.push_back(k);
      job.end = o->per_layer > 0 ? std::min<size_t>(o->per_layer, job.candidates.size())
                                 : job.candidates.size();
      // Resume where an earlier run stopped (the order is tuning_rank's, so the same tessel
      // ranks the same candidates first; another tessel may rank them otherwise).
      const compiler::TuningRecord* r = db.find(key, device_key);
      if (r && !o->retune) job.next = std::max<size_t>(1, r->candidates);
      job.depth = job.next;
      if (o->explore > 0 && job.next < job.end) {
        // The rest of the space in an order of its own (seeded by the key, so that a run is
        // repeatable), of which the first --explore are measured; the record keeps the ranked
        // depth, so that a later run resumes the ranked order where it was.
        std::mt19937_64 shuffle(fnv1a64(key));
        std::shuffle(job.ranks.begin() + static_cast<std::ptrdiff_t>(job.next), job.ranks.end(), shuffle);
        const std::vector<kernels::Schedule> in_rank_order = std::move(job.candidates);
        const std::vector<double> estimates = std::move(job.estimates);
        job.candidates.clear();
        job.estimates.clear();
        for (size_t r : job.ranks) {
          job.candidates.push_back(in_rank_order[r]);
          job.estimates.push_back(estimates[r]);
        }
        job.end = std::min(job.end, job.next + static_cast<size_t>(o->explore));
      }
      if (job.next >= job.end) {
        ++cached;
        continue;
      }
      to_measure += job.end - job.next;
      jobs.push_back(std::move(job));
    }
    std::printf("tune %s on %s: %zu unique contractions to tune (%d done in %s), %zu "
                "schedules to measure (%s per contraction), budget %.0f s\n",
                o->model.path.c_str(), target.name.c_str(), jobs.size(), cached, o->db.c_str(),
                to_measure,
                o->explore > 0     ? ("up to " + std::to_string(o->explore) + " at random").c_str()
                : o->per_layer > 0 ? ("up to " + std::to_string(o->per_layer)).c_str()
                                   : "the whole space",
                budget_s);
    std::fflush(stdout);

    std::unique_ptr<std::FILE, int (*)(std::FILE*)> log(nullptr, &std::fclose);
    if (!o->log.empty()) {
      log.reset(std::fopen(o->log.c_str(), "a"));
      TESSEL_USER_CHECK(log != nullptr) << o->log << ": cannot open for appending";
    }
    const Clock::time_point start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    ProgressBar progress;
    size_t consumed = 0;
    // One round of `job`: the default (the reference output; timed in the job's first round
    // of this run) and the next candidates, compiled in parallel, each checked and timed.
    auto measure_round = [&](Job& job, bool first) {
      const ir::Node& n = g.nodes[static_cast<size_t>(job.node)];
      const ir::Graph alone = isolate(g, n);
      const compiler::NodePlan alone_plan =
          compiler::plan_node(alone, alone.nodes[0], options, target);
      TESSEL_ICHECK(alone_plan.run == compiler::NodeRun::kContraction) << n.label() << " alone";
      const std::string alone_key =
          compiler::tuning_key(*alone_plan.match.contraction, alone_plan.epilogue);
      std::vector<size_t> round = {0};
      for (size_t k = job.next; k < job.end && round.size() < kRound + (job.next > 1); ++k)
        round.push_back(k);
      // Compile every candidate (NVRTC, in parallel), the node alone with the candidate as its
      // tuning record.
      std::vector<std::future<std::optional<compiler::CompiledPlan>>> builds;
      for (size_t k : round) {
        const kernels::Schedule s = job.candidates[k];
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
      size_t next = job.next;
      for (size_t j = 0; j < round.size(); ++j) {
        const size_t k = round[j];
        std::optional<compiler::CompiledPlan> built = builds[j].get();
        if (k > 0 && elapsed() > budget_s) continue;  // not measured: the next run's
        if (k > 0) next = k + 1;
        if (!built) continue;  // refused by the generator: passed over
        try {
          runtime::Engine engine = runtime::Engine::load(std::move(built->plan), n.name);
          const Tensor out = engine.run(inputs).at(0);
          if (k == 0) reference = out;
          // (Written so that a NaN anywhere, a kernel that left an output unwritten, fails.)
          else if (!reference || !(relative_l2_error(out, *reference) <= 1e-2)) continue;
          if (k == 0 && !first) continue;  // the reference alone
          // Timed as `tessel profile` times a launch (copies of it back to back in a graph,
          // per copy), so that a record is the kernel's time in an engine: a one-launch
          // graph's replay also holds the graph's own launch latency, about 2 us.
          const double us = 1e3 * engine.profile_launches(/*reps=*/15).at(0);
          ++job.measured;
          if (log) {
            const nlohmann::json line = {{"key", job.key},
                                         {"node", n.name},
                                         {"schedule", job.candidates[k].name()},
                                         {"rank", job.ranks[k]},
                                         {"microseconds", us},
                                         {"estimate_us", job.estimates[k]}};
            std::fprintf(log.get(), "%s\n", line.dump().c_str());
            std::fflush(log.get());
          }
          if (k == 0) job.default_us = us;
          if (job.best.empty() || us < job.best_us) job.best_us = us, job.best = job.candidates[k].name();
        } catch (const Error&) {
          continue;  // a candidate that fails to load or run is not recorded
        }
      }
      consumed += next - job.next;
      job.next = next;
      if (!job.best.empty()) {
        const size_t depth = o->explore > 0 ? job.depth : job.next;
        db.add({job.key, device_key, job.best, job.best_us, static_cast<int>(depth)});
        db.save(o->db);
      }
    };

    int rounds = 0, tuned = 0;
    for (bool more = !jobs.empty(); more && elapsed() <= budget_s; ++rounds) {
      more = false;
      int improved = 0;
      for (size_t i = 0; i < jobs.size() && elapsed() <= budget_s; ++i) {
        Job& job = jobs[i];
        if (job.next >= job.end) continue;
        const bool first = rounds == 0;
        const std::string before = job.best;
        const double before_us = job.best_us;
        measure_round(job, first);
        more |= job.next < job.end;
        tuned += first;
        const double t = elapsed();
        progress.update("tuning", static_cast<int>(consumed), static_cast<int>(to_measure));
        const double eta = std::min(budget_s - t, t / std::max<size_t>(consumed, 1) *
                                                      static_cast<double>(to_measure - consumed));
        const ir::Node& n = g.nodes[static_cast<size_t>(job.node)];
        if (first) {
          std::printf("[%zu/%zu] %-28s best %s %.1f us of %d measured (default %s %.1f us); "
                      "%.0f s, ETA %.0f s\n",
                      i + 1, jobs.size(), n.name.c_str(), job.best.c_str(), job.best_us,
                      job.measured, job.candidates[0].name().c_str(), job.default_us, t,
                      std::max(0.0, eta));
        } else if (job.best != before) {
          ++improved;
          std::printf("  round %d: %-28s best %s %.1f us (was %s %.1f us), %zu of %zu "
                      "candidates; %.0f s, ETA %.0f s\n",
                      rounds + 1, n.name.c_str(), job.best.c_str(), job.best_us, before.c_str(),
                      before_us, job.next, job.candidates.size(), t, std::max(0.0, eta));
        }
        std::fflush(stdout);
      }
      if (rounds > 0)
        std::printf("round %d done: %d contractions faster; %zu of %zu schedules measured, "
                    "%.0f s\n",
                    rounds + 1, improved, consumed, to_measure, elapsed());
    }
    db.save(o->db);
    double default_us = 0, best_us = 0;
    int measured = 0, whole = 0;
    for (const Job& job : jobs) {
      measured += job.measured;
      whole += job.next >= job.end;
      if (job.default_us > 0) default_us += job.default_us, best_us += job.best_us;
    }
    std::printf("tuned %d of %zu contractions in %.0f s, %d rounds (%d schedules measured; the "
                "candidates exhausted for %d): %.1f us with the defaults -> %.1f us tuned "
                "(%.1f%% faster); %zu records in %s\n",
                tuned, jobs.size(), elapsed(), rounds, measured, whole, default_us, best_us,
                default_us > 0 ? 100.0 * (default_us - best_us) / default_us : 0.0, db.size(),
                o->db.c_str());
    return 0;
  };
}

}  // namespace tessel::cli
