// build_node_kernels: the choice of generator and schedule per node (serial, cheap, where every
// user-facing error is raised), then compilation on a thread pool.
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
#include "runtime/cuda_engine/lowering.h"
#include "tune/default_schedule.h"

namespace tessel::runtime::cuda_engine {
namespace {

namespace rt = runtime::cuda;
namespace cg = codegen::cuda;

// A contraction to build: the generator's three inputs.
struct ContractionJob {
  contraction::Contraction c;
  contraction::Epilogue e;
  tune::Schedule s;
};

tune::DeviceInfoLite lite(const rt::DeviceInfo& d) {
  tune::DeviceInfoLite r;
  r.sm_count = d.sm_count;
  r.smem_per_block = d.smem_per_block_optin;
  r.cc_major = d.cc_major;
  r.cc_minor = d.cc_minor;
  return r;
}

std::string remarks_text(const contraction::MatchResult& m) {
  std::string r;
  for (const contraction::Remark& x : m.remarks) r += (r.empty() ? "" : "; ") + x.text;
  return r.empty() ? "no reason given" : r;
}

// Runs every job on min(hardware_concurrency, jobs) threads; rethrows the first failure in job
// order once all have finished, so the error does not depend on thread timing.
void run_parallel(const std::vector<std::function<void()>>& jobs) {
  std::vector<std::exception_ptr> errors(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        jobs[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
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
  if (!plan.match.contraction) {
    plan.error = "cannot be lowered to a contraction kernel: " + remarks_text(plan.match);
    return plan;
  }
  const contraction::Contraction& c = *plan.match.contraction;
  if (!options.tensor_cores)
    plan.simt_reason = "Tensor Cores turned off (EngineOptions::tensor_cores)";
  else if (!plan.match.tensor_cores)
    plan.simt_reason = plan.match.remarks.empty() ? "no reason given" : plan.match.remarks[0].text;
  plan.schedule = plan.simt_reason.empty() ? tune::default_schedule(c, device) : tune::simt_schedule(c);
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
                                           const rt::DeviceInfo& device) {
  const tune::DeviceInfoLite dev = lite(device);
  const std::string arch = device.arch();
  std::vector<NodeKernel> kernels(g.nodes.size());

  // Distinct kernels, keyed by what determines their generated code, and the nodes using each.
  std::map<std::string, std::pair<ContractionJob, std::vector<int>>> contractions;
  std::map<std::string, std::pair<cg::OpKernelSource, std::vector<int>>> ops;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    NodeKernel& k = kernels[i];
    k.node = static_cast<int>(i);
    if (lowered_as_contraction(n)) {
      ContractionPlan plan = plan_contraction(g, n, options, dev);
      TESSEL_USER_CHECK(!plan.error) << n.label() << ": " << *plan.error;
      k.operands_swapped = plan.match.contraction->operands_swapped;
      k.extra_inputs = std::move(plan.extra_inputs);
      k.tensor_cores = plan.schedule.instruction != tune::Instruction::kSimt;
      ContractionJob job{*plan.match.contraction, std::move(plan.epilogue), plan.schedule};
      const std::string key = job.c.key() + "|" + job.e.str() + "|" +
                              std::string(dtype_name(job.e.out_dtype)) + "|" + job.s.name();
      auto [it, fresh] = contractions.try_emplace(key, std::move(job), std::vector<int>{});
      it->second.second.push_back(static_cast<int>(i));
    } else {
      const std::optional<std::string> why = cg::can_emit_op(g, n);
      TESSEL_USER_CHECK(!why) << n.label() << ": no GPU kernel: " << *why;
      cg::OpKernelSource ks = cg::emit_op(g, n);
      for (int d = 0; d < 3; ++d) k.config.grid[d] = ks.grid[d], k.config.block[d] = ks.block[d];
      k.config.smem_bytes = ks.smem_bytes;
      const std::string key = ks.name;  // a hash of the source (op_kernels.cc)
      auto [it, fresh] = ops.try_emplace(key, std::move(ks), std::vector<int>{});
      it->second.second.push_back(static_cast<int>(i));
    }
  }

  std::vector<std::function<void()>> jobs;
  for (auto& [key, entry] : contractions) {
    jobs.push_back([&entry = entry, &kernels, &arch] {
      const ContractionJob& job = entry.first;
      std::shared_ptr<const cg::ContractionKernel> built =
          cg::ContractionKernel::build(job.c, job.e, job.s, arch);
      for (int node : entry.second) kernels[node].contraction = built;
    });
  }
  for (auto& [key, entry] : ops) {
    jobs.push_back([&entry = entry, &kernels, &arch] {
      const cg::OpKernelSource& ks = entry.first;
      rt::CompileOptions copts;
      copts.arch = arch;
      copts.headers = ks.headers;
      std::shared_ptr<rt::Module> module =
          rt::Module::load(rt::compile(ks.source, ks.name + ".cu", copts).cubin);
      void* function = module->function(ks.name);
      for (int node : entry.second) {
        kernels[node].module = module;
        kernels[node].function = function;
      }
    });
  }
  run_parallel(jobs);
  return kernels;
}

}  // namespace tessel::runtime::cuda_engine
