// build_node_kernels: the choice of generator and schedule per node (serial, cheap, where every
// user-facing error is raised), then compilation to cubins on a thread pool.
#include "runtime/cuda_engine/node_kernels.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <thread>

#include "codegen/cuda/op_kernels.h"
#include "contraction/contraction.h"
#include "core/error.h"
#include "passes/plan_memory.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/lowering.h"
#include "tune/default_schedule.h"

namespace tessel::runtime::cuda_engine {
namespace {

namespace cg = codegen::cuda;

// A contraction to build: the generator's three inputs.
struct ContractionJob {
  contraction::Contraction c;
  contraction::Epilogue e;
  tune::Schedule s;
};

std::string remarks_text(const contraction::MatchResult& m) {
  std::string r;
  for (const contraction::Remark& x : m.remarks) r += (r.empty() ? "" : "; ") + x.text;
  return r.empty() ? "no reason given" : r;
}

// Runs every job on min(hardware_concurrency, jobs) threads, reporting each one finished
// through `progress`; rethrows the first failure in job order once all have finished, so the
// error does not depend on thread timing.
void run_parallel(const std::vector<std::function<void()>>& jobs, const ProgressFn& progress) {
  std::vector<std::exception_ptr> errors(jobs.size());
  std::atomic<size_t> next{0};
  std::atomic<int> done{0};
  const int total = static_cast<int>(jobs.size());
  if (progress) progress("compiling kernels", 0, total);
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        jobs[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
      const int finished = ++done;
      if (progress) progress("compiling kernels", finished, total);
    }
  };
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

// Grouped convolutions go to the op kernels: the Tensor Core generator declines them (their
// contiguous channel is a batch dim), and the SIMT contraction is slower than the direct
// grouped kernel for the few channels per group of depthwise layers.
bool lowered_as_contraction(const ir::Node& n) {
  return is_contraction_op(n) && (n.op == "tessel.Gemm" || n.get_int("group", 1) == 1);
}

// Picks the schedule: the cost model's default on Tensor Cores where match() allows, else
// SIMT. A Tensor Core schedule the generator refuses falls back to SIMT rather than failing.
ContractionPlan plan_contraction(const ir::Graph& g, const ir::Node& n,
                                 const EngineOptions& options, const tune::DeviceInfoLite& device) {
  ContractionSpec spec = contraction_of(g, n);
  ContractionPlan plan;
  plan.match = contraction::match(spec.maps);
  plan.epilogue = std::move(spec.epilogue);
  plan.extra_inputs = std::move(spec.extra_inputs);
  // concat_into_slices: the output goes straight into its channels of the Concat's buffer, which
  // the memory plan gives it as its address (plan_memory.h, channel slices).
  if (const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, n.outputs.at(0))) {
    const bool residual = std::find(plan.extra_inputs.begin(), plan.extra_inputs.end(),
                                    kResidualInput) != plan.extra_inputs.end();
    if (plan.epilogue.store.kind != contraction::StoreMap::Kind::kPlain || residual) {
      plan.error = "its output is marked in_place in a Concat, but a depth_to_space store or a "
                   "residual add cannot store into a channel slice";
      return plan;
    }
    plan.epilogue.store.kind = contraction::StoreMap::Kind::kChannelSlice;
    plan.epilogue.store.channel_offset = slice->channel_offset;
    plan.epilogue.store.ld = slice->channels;
  }
  if (!plan.match.contraction) {
    plan.error = "cannot be lowered to a contraction kernel: " + remarks_text(plan.match);
    return plan;
  }
  const contraction::Contraction& c = *plan.match.contraction;
  // default_schedule is SIMT where match() says no, except where the halo kernel takes what
  // the GEMM kernels cannot (a stem's f32 NCHW input, converted while staged).
  if (!options.tensor_cores) {
    plan.simt_reason = "Tensor Cores turned off (EngineOptions::tensor_cores)";
    plan.schedule = tune::simt_schedule(c);
  } else {
    plan.schedule = tune::default_schedule(c, device);
    if (plan.schedule.instruction == tune::Instruction::kSimt)
      plan.simt_reason = plan.match.remarks.empty() ? "no reason given" : plan.match.remarks[0].text;
  }
  std::optional<std::string> why = cg::can_implement(c, plan.epilogue, plan.schedule);
  if (why && plan.schedule.instruction != tune::Instruction::kSimt) {
    plan.simt_reason = "the Tensor Core generator refuses " + plan.schedule.name() + ": " + *why;
    plan.schedule = tune::simt_schedule(c);
    why = cg::can_implement(c, plan.epilogue, plan.schedule);
  }
  if (why) plan.error = "cannot be lowered to a contraction kernel: " + *why;
  return plan;
}

std::vector<NodeKernel> build_node_kernels(const ir::Graph& g, const EngineOptions& options,
                                           const TargetInfo& target) {
  const tune::DeviceInfoLite dev = target.lite();
  const std::string& arch = target.arch;
  std::vector<NodeKernel> kernels(g.nodes.size());

  // Distinct kernels, keyed by what determines their generated code, and the nodes using each.
  std::map<std::string, std::pair<ContractionJob, std::vector<int>>> contractions;
  std::map<std::string, std::pair<cg::OpKernelSource, std::vector<int>>> ops;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    NodeKernel& k = kernels[i];
    k.node = static_cast<int>(i);
    // Nodes that move no data get a NodeKernel with neither a contraction nor an op function,
    // which the engine does not launch: views (the memory plan makes their output their input's
    // bytes) and Concats whose inputs are all stored in place by their producers.
    if (passes::is_view_alias(g, n)) continue;
    if (n.op == "Concat") {
      const std::vector<passes::ChannelSlice> slices = passes::in_place_inputs(g, n);
      for (const passes::ChannelSlice& s : slices) {
        const ir::Node& p = *std::find_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& m) {
          return std::find(m.outputs.begin(), m.outputs.end(), s.value) != m.outputs.end();
        });
        // (A Concat producer has all its inputs in place, in_place_inputs checked: their
        // producers store into this Concat's buffer.)
        TESSEL_USER_CHECK(lowered_as_contraction(p) || p.op == "Concat")
            << n.label() << ": input " << s.input << " is marked in_place, but its producer "
            << p.label() << " is no contraction (tessel.Conv with group 1, tessel.Gemm): only "
            << "those store into a channel slice";
      }
      if (!slices.empty() && slices.size() == n.inputs.size()) continue;
    }
    if (lowered_as_contraction(n)) {
      ContractionPlan plan = plan_contraction(g, n, options, dev);
      TESSEL_USER_CHECK(!plan.error) << n.label() << ": " << *plan.error;
      k.operands_swapped = plan.match.contraction->operands_swapped;
      k.extra_inputs = std::move(plan.extra_inputs);
      k.schedule = plan.schedule;
      ContractionJob job{*plan.match.contraction, std::move(plan.epilogue), plan.schedule};
      const std::string key = job.c.key() + "|" + job.e.str() + "|" +
                              std::string(dtype_name(job.e.out_dtype)) + "|" + job.s.name();
      auto [it, fresh] = contractions.try_emplace(key, std::move(job), std::vector<int>{});
      it->second.second.push_back(static_cast<int>(i));
    } else {
      const std::optional<std::string> why = cg::can_emit_op(g, n);
      TESSEL_USER_CHECK(!why) << n.label() << ": no GPU kernel: " << *why;
      cg::OpKernelSource ks = cg::emit_op(g, n);
      const std::string key = ks.name;  // a hash of the source (op_kernels.cc)
      auto [it, fresh] = ops.try_emplace(key, std::move(ks), std::vector<int>{});
      it->second.second.push_back(static_cast<int>(i));
    }
  }

  std::vector<std::function<void()>> jobs;
  for (auto& [key, entry] : contractions) {
    jobs.push_back([&entry = entry, &kernels, &arch] {
      const ContractionJob& job = entry.first;
      auto built = std::make_shared<const cg::CompiledContraction>(
          cg::compile_contraction(job.c, job.e, job.s, arch));
      for (int node : entry.second) kernels[node].contraction = built;
    });
  }
  for (auto& [key, entry] : ops) {
    jobs.push_back([&entry = entry, &kernels, &arch] {
      cg::OpKernelSource& ks = entry.first;
      runtime::cuda::CompileOptions copts;
      copts.arch = arch;
      copts.headers = ks.headers;
      std::string cubin = runtime::cuda::compile(ks.source, ks.name + ".cu", copts).cubin;
      auto built = std::make_shared<const CompiledOpKernel>(
          CompiledOpKernel{std::move(ks), std::move(cubin)});
      for (int node : entry.second) kernels[node].op = built;
    });
  }
  run_parallel(jobs, options.progress);
  return kernels;
}

}  // namespace tessel::runtime::cuda_engine
