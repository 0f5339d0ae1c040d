// `tessel bench-op`: tessel's generated kernel against cuDNN / cuBLASLt on the workloads of
// CSV files, in one process, on the same inputs. Prints a table and the geometric mean of the
// speed ratios; writes JSON. With --int8, the workloads in int8: the libraries' int8 baselines
// beside their fp16 ones, and tessel's int8 kernel where it has one.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "bench/bench.h"
#include "bench/report.h"
#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "compiler/lowering.h"
#include "core/error.h"
#include "device/cuda_api.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/default_schedule.h"
#include "ops/tessel_epilogue.h"
#include "passes/group_widening.h"

namespace tessel::cli {
namespace {

// What the enqueue closure keeps alive: a compiled contraction and its split-K workspace, or a
// loaded op kernel (a grouped conv's direct kernel).
struct Prepared {
  std::unique_ptr<kernels::cuda::ContractionKernel> kernel;
  device::DeviceBuffer workspace;
  bool swapped = false;
  std::shared_ptr<device::Module> op_module;
  void* op_function = nullptr;
  device::LaunchConfig op_launch;
  // A narrow grouped conv runs widened (passes/group_widening.h): each operand set's weights,
  // widened once before timing, by the set's weight address.
  std::map<uint64_t, device::DeviceBuffer> widened_b;
  uint64_t b_of(uint64_t b) const {
    const auto it = widened_b.find(b);
    return it == widened_b.end() ? b : it->second.ptr();
  }
};

// Widens each operand set's weights of a conv workload of `groups` groups by f, as
// widen-narrow-groups does the engine's constant weights.
void prepare_widened_weights(bench::TesselKernel& k, const std::shared_ptr<Prepared>& p,
                             const bench::ConvWorkload& w, int64_t f) {
  const Shape shape{w.co, w.kh, w.kw, w.ci / w.groups};
  k.description += " (groups widened " + std::to_string(w.groups) + " -> " +
                   std::to_string(w.groups / f) + ", block-diagonal weights)";
  k.prepare = [p, shape, groups = w.groups, f](const bench::Operands& ops) {
    Tensor narrow(DType::kF16, shape);
    device::copy_to_host(narrow.raw(), ops.b, narrow.nbytes());
    const Tensor wide = passes::widen_group_weights(narrow, groups, f);
    device::DeviceBuffer buffer(wide.nbytes());
    buffer.upload(wide.raw(), wide.nbytes());
    p->widened_b[ops.b] = std::move(buffer);
  };
}

// The contraction kernel of `plan` (its schedule, or `schedule` where one is named: a
// Schedule::name() for sweeps) into p, with its zeroed split-K workspace; or why not.
std::optional<std::string> build_contraction(compiler::NodePlan& plan, const std::string& schedule,
                                             const std::string& arch, Prepared& p) {
  const contraction::Contraction& c = *plan.match.contraction;
  if (!schedule.empty()) {
    const std::optional<kernels::Schedule> s = kernels::parse_schedule(schedule, c);
    if (!s) return schedule + ": not a schedule name for this workload";
    if (auto why = kernels::cuda::can_implement(c, plan.epilogue, *s)) return schedule + ": " + *why;
    plan.schedule = *s;
  }
  p.kernel = kernels::cuda::ContractionKernel::build(c, plan.epilogue, plan.schedule, arch);
  if (size_t ws = p.kernel->source().workspace_bytes) {
    p.workspace = device::DeviceBuffer(ws);
    // Split-K kernels expect their workspace zeroed, and leave it zeroed after every launch.
    p.workspace.fill_bytes(0);
  }
  return std::nullopt;
}

// tessel's kernel for a workload, as plan_node decides it for the workload's node. `schedule`:
// a Schedule::name() to use instead of the default pick (for sweeps); a workload it cannot
// implement reports why instead of a time.
bench::TesselKernel make_kernel(const ir::Graph& g, bool tensor_cores,
                                const std::string& schedule,
                                const bench::ConvWorkload* conv = nullptr) {
  const device::DeviceInfo device = planning_target();
  const std::string arch = device.arch();
  compiler::Options options;
  options.tensor_cores = tensor_cores;
  compiler::NodePlan plan = plan_workload(g, options, device);
  if (plan.run == compiler::NodeRun::kUnsupported) return {{}, plan.why, {}};
  auto p = std::make_shared<Prepared>();
  bench::TesselKernel k;
  if (plan.run == compiler::NodeRun::kOpKernel) {
    const ir::Node& node = g.nodes[0];
    // A depthwise conv takes a tiling name as its schedule; other op kernels have none.
    const std::optional<std::string> tiling =
        schedule.empty() ? kernels::cuda::chosen_depthwise_tiling(g, node) : schedule;
    if (!schedule.empty()) {
      TESSEL_USER_CHECK(kernels::cuda::chosen_depthwise_tiling(g, node))
          << node.label() << ": --schedule applies to contractions and depthwise convolutions; "
          << "this node runs another op kernel";
      if (auto why = kernels::cuda::cannot_tile_depthwise(g, node, schedule)) return {{}, *why, {}};
    }
    const kernels::cuda::OpKernelSource src =
        schedule.empty() ? kernels::cuda::emit_op(g, node)
                         : kernels::cuda::emit_depthwise(g, node, schedule);
    device::CompileOptions copts;
    copts.arch = arch;
    copts.headers = src.headers;
    p->op_module = device::Module::load(device::compile(src.source, src.name + ".cu", copts).cubin);
    p->op_function = p->op_module->function(src.name);
    std::copy(src.grid, src.grid + 3, p->op_launch.grid);
    std::copy(src.block, src.block + 3, p->op_launch.block);
    p->op_launch.smem_bytes = src.smem_bytes;
    p->op_launch.programmatic = src.grid_dependent;
    k.description = "op kernel (" + node.op + ", group " +
                    std::to_string(node.get_int("group", 1)) + (tiling ? ", " + *tiling : "") + ")";
    if (conv && conv->groups != g.nodes[0].get_int("group", 1))
      prepare_widened_weights(k, p, *conv, conv->groups / g.nodes[0].get_int("group", 1));
    k.enqueue = [p](const bench::Operands& ops, void* stream) {
      // The op kernels' parameter block (op_kernels.h): { const void* in[8]; void* out[4]; }.
      std::array<uint64_t, kernels::cuda::kOpKernelInputs + kernels::cuda::kOpKernelOutputs>
          params{};
      params[0] = ops.a;
      params[1] = p->b_of(ops.b);
      params[kernels::cuda::kOpKernelInputs] = ops.c;
      void* args[] = {params.data()};
      device::LaunchConfig launch = p->op_launch;
      launch.stream = stream;
      device::launch(p->op_function, launch, args);
    };
    return k;
  }
  const contraction::Contraction& c = *plan.match.contraction;
  if (auto why = build_contraction(plan, schedule, arch, *p)) return {{}, *why, {}};
  p->swapped = c.operands_swapped;
  k.description = plan.schedule.name();
  if (!plan.tensor_cores() && !plan.why.empty()) k.description += " (" + plan.why + ")";
  if (conv && conv->groups != g.nodes[0].get_int("group", 1))
    prepare_widened_weights(k, p, *conv, conv->groups / g.nodes[0].get_int("group", 1));
  k.enqueue = [p](const bench::Operands& ops, void* stream) {
    kernels::cuda::KernelArgs args;
    const uint64_t b = p->b_of(ops.b);
    args.a = p->swapped ? b : ops.a;
    args.b = p->swapped ? ops.a : b;
    args.c = ops.c;
    args.workspace = p->workspace.ptr();
    p->kernel->launch(args, stream);
  };
  return k;
}

// The schedules of --schedule: names separated by commas, each timed on every workload; one
// empty name (the default pick) when none is given.
std::vector<std::string> schedule_list(const std::string& option) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= option.size()) {
    const size_t end = std::min(option.find(',', start), option.size());
    names.push_back(option.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

// Compiles the kernels of every workload and schedule on all cores into the kernel cache
// first (contractions, and depthwise convs' tilings), so that a sweep of many schedules does
// not wait on one NVRTC at a time (the runs then load them from the cache). Nothing to do
// without a cache or with one schedule.
void precompile(const std::vector<ir::Graph>& graphs, const std::vector<std::string>& schedules,
                bool tensor_cores) {
  if (device::cache_dir().empty() || schedules.size() < 2) return;
  const device::DeviceInfo device = planning_target();
  compiler::Options options;
  options.tensor_cores = tensor_cores;
  std::vector<std::function<void()>> jobs;
  for (const ir::Graph& g : graphs) {
    const compiler::NodePlan plan = plan_workload(g, options, device);
    for (const std::string& s : schedules) {
      if (s.empty()) continue;
      if (plan.run == compiler::NodeRun::kOpKernel) {
        if (kernels::cuda::cannot_tile_depthwise(g, g.nodes[0], s)) continue;
        kernels::cuda::OpKernelSource src = kernels::cuda::emit_depthwise(g, g.nodes[0], s);
        jobs.push_back([src = std::move(src), arch = device.arch()] {
          device::CompileOptions copts;
          copts.arch = arch;
          copts.headers = src.headers;
          device::compile(src.source, src.name + ".cu", copts);
        });
      } else if (plan.run == compiler::NodeRun::kContraction) {
        const contraction::Contraction& c = *plan.match.contraction;
        const std::optional<kernels::Schedule> parsed = kernels::parse_schedule(s, c);
        if (!parsed || kernels::cuda::can_implement(c, plan.epilogue, *parsed)) continue;
        jobs.push_back([c, e = plan.epilogue, sch = *parsed, arch = device.arch()] {
          try {
            kernels::cuda::compile_contraction(c, e, sch, arch);
          } catch (const Error&) {
            // The run reports it.
          }
        });
      }
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) jobs[i]();
  };
  std::vector<std::thread> pool;
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
}

// The command line of bench-op.
struct BenchOpOptions {
  std::vector<std::string> conv_files, gemm_files;
  std::string filter, json;
  int reps = 100, warmup = 10;
  std::string timing = "graph";
  std::string schedule;
  bool no_tensor_cores = false;
  bool no_peak = false;
  bool no_library = false;
  bool int8 = false;
};

// tessel's int8 kernel for a workload: plan_node's decision for the int8 contraction of
// int8_workload_graph (what fold-qdq makes of a QDQ conv), bound to the benchmark's operands
// (bench.h, run_int8): x, w, y int8; the conv's scale and bias per channel; a GEMM's single alpha
// spread over the output columns once per operand set (`prepare`).
// `schedule`: a Schedule::name() instead of the default pick (sweeps), as for fp16.
bench::TesselKernel int8_kernel(ir::Graph g, int64_t gemm_columns, const std::string& schedule) {
  const device::DeviceInfo device = planning_target();
  // The compiler's unit-quantize (ops::fold_unit_quantize): in a model S and B are constants it
  // scales once; here they are each operand set's buffers, scaled once before timing (prepare),
  // and a GEMM without B gets one holding the offset. The check is against the reference's
  // unscaled arithmetic.
  ir::Node& node = g.nodes.at(0);
  const ops::UnitQuantizeFold fold = ops::fold_unit_quantize(ops::read_epilogue(node), /*scaled_accumulator=*/true);
  ops::write_epilogue(node, fold.steps);
  const bool had_bias = node.inputs.at(compiler::kBiasInput) != ir::kNoValue;
  const int64_t channels = g.type(node.inputs.at(compiler::kScaleInput)).shape.at(0);
  if (!had_bias && fold.lead_offset != 0.0) {
    node.inputs[compiler::kBiasInput] = g.add_value("bias", {DType::kF32, {channels}});
    g.inputs.push_back(node.inputs[compiler::kBiasInput]);
  }
  compiler::NodePlan plan = plan_workload(g, compiler::Options{}, device);
  if (plan.run != compiler::NodeRun::kContraction || !plan.tensor_cores())
    return {{}, plan.why.empty() ? plan.summary() : plan.why, {}};
  auto p = std::make_shared<Prepared>();
  if (auto why = build_contraction(plan, schedule, device.arch(), *p)) return {{}, *why, {}};
  bench::TesselKernel k;
  k.description = plan.schedule.name();
  // Each set's scale vector (a GEMM's: its alpha per column) and bias (0 where the workload has
  // none), scaled by the fold, by the set's scale and bias addresses.
  k.prepare = [p, gemm_columns, channels, had_bias, fold](const bench::Operands& ops) {
    std::vector<float> scale(static_cast<size_t>(channels)), bias(static_cast<size_t>(channels), 0.0f);
    if (gemm_columns > 0) {
      float alpha = 0;
      device::copy_to_host(&alpha, ops.scale, sizeof alpha);
      std::fill(scale.begin(), scale.end(), alpha);
    } else {
      device::copy_to_host(scale.data(), ops.scale, scale.size() * sizeof(float));
    }
    if (had_bias) device::copy_to_host(bias.data(), ops.bias, bias.size() * sizeof(float));
    for (float& v : scale) v = static_cast<float>(v * fold.lead_factor);
    for (float& v : bias) v = static_cast<float>(v * fold.lead_factor + fold.lead_offset);
    for (auto [key, values] : {std::pair{ops.scale, &scale}, std::pair{ops.bias, &bias}}) {
      device::DeviceBuffer buffer(values->size() * sizeof(float));
      buffer.upload(values->data(), values->size() * sizeof(float));
      p->widened_b[key] = std::move(buffer);
    }
  };
  const std::vector<int> extra = plan.extra_inputs;
  k.enqueue = [p, extra](const bench::Operands& ops, void* stream) {
    kernels::cuda::KernelArgs args;
    args.a = ops.a;
    args.b = ops.b;
    args.c = ops.c;
    args.workspace = p->workspace.ptr();
    for (int input : extra)
      args.extra.push_back(p->b_of(input == compiler::kScaleInput ? ops.scale : ops.bias));
    p->kernel->launch(args, stream);
  };
  return k;
}

// --int8: every workload through Bench::run_int8. Exit status 1 where a side that ran was wrong.
int run_int8(const BenchOpOptions& o, const std::vector<bench::ConvWorkload>& convs,
             const std::vector<bench::GemmWorkload>& gemms, const bench::BenchOptions& bopts) {
  TESSEL_USER_CHECK(!o.no_tensor_cores)
      << "bench-op: --no-tensor-cores chooses tessel's fp16 SIMT kernels; --int8 runs Tensor "
         "Cores only";
  bench::Bench b(bopts);
  std::vector<bench::Int8Result> results;
  for (const auto& w : convs) {
    results.push_back(b.run_int8(w, [&o](const bench::ConvWorkload& x) {
      if (x.groups != 1) return bench::TesselKernel{{}, "grouped: the int8 kernels take group 1", {}};
      return int8_kernel(int8_workload_graph(x), 0, o.schedule);
    }));
    std::fprintf(stderr, "  %-34s done\n", w.name.c_str());
  }
  for (const auto& w : gemms) {
    results.push_back(b.run_int8(w, [&o](const bench::GemmWorkload& x) {
      return int8_kernel(int8_workload_graph(x), x.n, o.schedule);
    }));
    std::fprintf(stderr, "  %-34s done\n", w.name.c_str());
  }
  const double peak = o.no_peak ? 0.0 : bench::Bench::measured_peak_tflops();
  bench::print_int8_table(std::cout, results);
  if (!o.json.empty()) bench::write_json(o.json, b, results, peak);
  bool all_correct = true;
  for (const auto& r : results)
    for (const bench::Measurement* m : {&r.library, &r.fp16_library, &r.tessel})
      all_correct &= !m->ran || m->correct;
  return all_correct ? 0 : 1;
}

}  // namespace

Action add_bench_op(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench-op", "Time tessel's kernels against cuDNN/cuBLASLt on conv2d and GEMM workloads");
  auto o = std::make_shared<BenchOpOptions>();
  cmd->add_option("--conv2d", o->conv_files,
                  "conv2d workload CSV (shared/workloads/conv2d.csv format)");
  cmd->add_option("--gemm", o->gemm_files, "GEMM workload CSV (shared/workloads/gemm.csv format)");
  cmd->add_option("--filter", o->filter, "only workloads whose name contains this");
  cmd->add_option("--json", o->json, "write all measurements as JSON here");
  cmd->add_option("--reps", o->reps,
                  "timed runs (graph replays) per implementation (median reported)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", o->warmup, "untimed runs (graph replays) first")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timing", o->timing,
                  "graph: replays of a CUDA graph of many launches, per launch (default); "
                  "events: each run between its own events")
      ->check(CLI::IsMember({"graph", "events"}));
  cmd->add_flag("--no-tensor-cores", o->no_tensor_cores, "use the SIMT (CUDA core) generator");
  cmd->add_option("--schedule", o->schedule,
                  "use this schedule (a name as `tessel codegen` prints it, or a depthwise conv's "
                  "tiling as bench-op's description shows it) instead of the default; several, "
                  "separated by commas, are each timed");
  cmd->add_flag("--no-library", o->no_library,
                "time tessel alone, without the cuDNN / cuBLASLt baselines (schedule sweeps)");
  cmd->add_flag("--no-peak", o->no_peak,
                "skip measuring the fp16 peak (the 8192^3 GEMM), e.g. under a profiler");
  cmd->add_flag("--int8", o->int8,
                "the workloads in int8: cuDNN's int8 graph (conv, scale, bias, ReLU, int8 out) "
                "and cuBLASLt's int8 matmul, beside the fp16 libraries, and tessel's int8 kernel");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    TESSEL_USER_CHECK(!o->conv_files.empty() || !o->gemm_files.empty())
        << "bench-op: give at least one --conv2d or --gemm workload file";
    std::vector<bench::ConvWorkload> convs;
    std::vector<bench::GemmWorkload> gemms;
    for (const std::string& f : o->conv_files)
      for (auto& w : bench::read_conv_workloads(f))
        if (w.name.find(o->filter) != std::string::npos) convs.push_back(w);
    for (const std::string& f : o->gemm_files)
      for (auto& w : bench::read_gemm_workloads(f))
        if (w.name.find(o->filter) != std::string::npos) gemms.push_back(w);
    bench::BenchOptions bopts;
    bopts.reps = o->reps;
    bopts.warmup = o->warmup;
    bopts.timing = o->timing == "events" ? bench::Timing::kEvents : bench::Timing::kGraph;
    bopts.libraries = !o->no_library;
    if (o->int8) {
      TESSEL_USER_CHECK(o->schedule.find(',') == std::string::npos && !o->no_library)
          << "bench-op --int8: one --schedule, and the libraries";
      return run_int8(*o, convs, gemms, bopts);
    }
    bench::Bench b(bopts);
    const bool tc = !o->no_tensor_cores;
    const std::vector<std::string> schedules = schedule_list(o->schedule);
    std::vector<ir::Graph> graphs;
    for (const auto& w : convs) graphs.push_back(workload_graph(w));
    for (const auto& w : gemms) graphs.push_back(workload_graph(w));
    precompile(graphs, schedules, tc);
    std::vector<bench::BenchResult> results;
    for (const auto& w : convs) {
      for (const std::string& s : schedules)
        results.push_back(b.run(w, [&](const bench::ConvWorkload& x) {
          return make_kernel(workload_graph(x), tc, s, &x);
        }));
      std::fprintf(stderr, "  %-34s done\n", w.name.c_str());
    }
    for (const auto& w : gemms) {
      for (const std::string& s : schedules)
        results.push_back(b.run(w, [&](const bench::GemmWorkload& x) {
          return make_kernel(workload_graph(x), tc, s);
        }));
      std::fprintf(stderr, "  %-34s done\n", w.name.c_str());
    }
    const double peak = o->no_peak ? 0.0 : bench::Bench::measured_peak_tflops();
    bench::print_table(std::cout, results, peak);
    if (!o->json.empty()) bench::write_json(o->json, b, results, peak);
    bool all_correct = true;
    for (const auto& r : results) all_correct &= r.tessel.ran && r.tessel.correct;
    return all_correct ? 0 : 1;
  };
}

}  // namespace tessel::cli
