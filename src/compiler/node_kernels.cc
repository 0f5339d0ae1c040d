// build_node_kernels: plan_node per node (serial, cheap, where every user-facing error is
// raised), then compilation to cubins on a thread pool.
#include "compiler/node_kernels.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <thread>

#include "kernels/cuda/op_kernels.h"
#include "core/error.h"
#include "compiler/plan_node.h"
#include "device/cuda_api.h"

namespace tessel::compiler {
namespace {

namespace cg = kernels::cuda;

// A contraction to build: the generator's three inputs.
struct ContractionJob {
  contraction::Contraction c;
  contraction::Epilogue e;
  kernels::Schedule s;
};

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

std::vector<NodeKernel> build_node_kernels(const ir::Graph& g, const Options& options,
                                           const device::DeviceInfo& target) {
  const std::string arch = target.arch();
  std::vector<NodeKernel> kernels(g.nodes.size());

  // Distinct kernels, keyed by what determines their generated code, and the nodes using each.
  std::map<std::string, std::pair<ContractionJob, std::vector<int>>> contractions;
  std::map<std::string, std::pair<cg::OpKernelSource, std::vector<int>>> ops;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    NodeKernel& k = kernels[i];
    k.node = static_cast<int>(i);
    NodePlan plan = plan_node(g, n, options, target);
    TESSEL_USER_CHECK(plan.run != NodeRun::kUnsupported) << n.label() << ": " << plan.why;
    if (plan.run == NodeRun::kNoKernel) continue;  // the engine launches nothing for it
    if (plan.run == NodeRun::kContraction) {
      k.prediction = predict_node(g, static_cast<int>(i), plan, target, options.tuning.get());
      k.operands_swapped = plan.match.contraction->operands_swapped;
      k.extra_inputs = std::move(plan.extra_inputs);
      k.schedule = plan.schedule;
      k.epilogue = plan.epilogue.str();
      ContractionJob job{*plan.match.contraction, std::move(plan.epilogue), plan.schedule};
      const std::string key = job.c.key() + "|" + job.e.str() + "|" +
                              std::string(dtype_name(job.e.out_dtype)) + "|" + job.s.name();
      auto [it, fresh] = contractions.try_emplace(key, std::move(job), std::vector<int>{});
      it->second.second.push_back(static_cast<int>(i));
    } else {
      cg::OpKernelSource ks = cg::emit_op(g, n, plan.slices);
      k.prediction =
          predict_node(g, static_cast<int>(i), plan, target, options.tuning.get(), &ks);
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
      device::CompileOptions copts;
      copts.arch = arch;
      copts.headers = ks.headers;
      std::string cubin = device::compile(ks.source, ks.name + ".cu", copts).cubin;
      auto built = std::make_shared<const CompiledOpKernel>(
          CompiledOpKernel{std::move(ks), std::move(cubin)});
      for (int node : entry.second) kernels[node].op = built;
    });
  }
  run_parallel(jobs, options.progress);
  return kernels;
}

}  // namespace tessel::compiler
