// compile_plan: the pass pipeline, the memory plan, the kernels, and the relocations that tie
// each launch's parameters to the regions of engine_plan.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "kernels/cuda/templates/tessel_params.cuh"
#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/flops.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "compiler/compile_plan.h"

#include <cmath>

#include "compiler/predict.h"
#include "compiler/lowering.h"
#include "compiler/node_kernels.h"

namespace tessel::compiler {
namespace {

namespace cg = kernels::cuda;
using runtime::EnginePlan;
using runtime::kMaxParamWords;
using runtime::PlanLaunch;
using runtime::Region;
using runtime::Relocation;

constexpr int64_t kAlign = passes::MemoryPlan::kAlignment;

// The op kernels' parameter block (op_kernels.h): struct OpParams { in[8]; out[4]; }.
constexpr int kOpInputs = cg::kOpKernelInputs;
constexpr int kOpOutputs = cg::kOpKernelOutputs;
static_assert(kOpInputs + kOpOutputs <= kMaxParamWords);

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

uint64_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  const ir::TensorType& t = g.type(v);
  return static_cast<uint64_t>(numel(t.shape)) * dtype_size(t.dtype);
}

// The constants the kernels read, packed 256-byte aligned into one image. A contraction's bias
// is read as an f32 vector whatever its stored dtype, so it gets an f32 copy when needed.
class ConstantImage {
 public:
  Relocation add(const ir::Graph& g, ir::ValueId v, bool as_f32) {
    const Tensor& data = *g.value(v).data;
    const Tensor t = as_f32 && data.dtype() != DType::kF32 ? data.cast(DType::kF32) : data;
    auto [it, fresh] = offsets_.try_emplace({v, as_f32}, 0);
    if (fresh) {
      it->second = static_cast<int64_t>(bytes_.size());
      bytes_.resize(static_cast<size_t>(align_up(it->second + static_cast<int64_t>(t.nbytes()))));
      if (t.nbytes() != 0) std::memcpy(bytes_.data() + it->second, t.raw(), t.nbytes());
    }
    return {Region::kConstants, 0, static_cast<uint64_t>(it->second), t.nbytes()};
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::map<std::pair<ir::ValueId, bool>, int64_t> offsets_;
  std::string bytes_;
};

// Builds the plan's regions and relocations from the compiled graph, its memory plan and its
// compiled kernels.
class PlanAssembler {
 public:
  PlanAssembler(const ir::Graph& g, const passes::MemoryPlan& memory, EnginePlan& plan)
      : g_(g), memory_(memory), plan_(plan), profile_(plan.profiles.at(0)) {}

  void add_graph_io();
  // `predicted_us`: compiler::predict's time for the node (recorded for `tessel profile`).
  void add_launch(const ir::Node& n, const NodeKernel& k, double predicted_us);
  void finish() { plan_.constants = image_.take(); }

 private:
  // Where the node's input (or output) `i` lives; null for an omitted optional input.
  Relocation operand(const ir::Node& n, size_t i, bool is_input, bool bias);
  uint32_t cubin_of(const void* kernel, const std::string& cubin);
  Relocation workspace_of(const cg::CompiledContraction& k);

  const ir::Graph& g_;
  const passes::MemoryPlan& memory_;
  EnginePlan& plan_;
  runtime::PlanProfile& profile_;
  ConstantImage image_;
  std::map<ir::ValueId, uint32_t> input_index_, output_index_;
  std::map<const void*, uint32_t> cubins_;
  std::map<const cg::CompiledContraction*, uint32_t> workspaces_;
};

void PlanAssembler::add_graph_io() {
  for (ir::ValueId v : g_.inputs) {
    input_index_.try_emplace(v, static_cast<uint32_t>(profile_.inputs.size()));
    profile_.inputs.push_back({g_.value(v).name, g_.type(v).dtype, g_.type(v).shape, {}});
  }
  for (ir::ValueId v : g_.outputs) {
    const uint32_t j = static_cast<uint32_t>(profile_.outputs.size());
    const uint64_t bytes = value_bytes(g_, v);
    Relocation source{Region::kOutput, j, 0, bytes};
    if (auto in = input_index_.find(v); in != input_index_.end()) {
      source = {Region::kInput, in->second, 0, bytes};
    } else if (g_.value(v).is_constant()) {
      source = image_.add(g_, v, false);
    } else if (auto earlier = output_index_.find(v); earlier != output_index_.end()) {
      source.index = earlier->second;
    } else {
      output_index_.emplace(v, j);
    }
    profile_.outputs.push_back({g_.value(v).name, g_.type(v).dtype, g_.type(v).shape, source});
  }
}

Relocation PlanAssembler::operand(const ir::Node& n, size_t i, bool is_input, bool bias) {
  const ir::ValueId v = is_input ? n.inputs[i] : n.outputs[i];
  if (v == ir::kNoValue) return {};
  const uint64_t bytes = value_bytes(g_, v);
  if (auto it = input_index_.find(v); it != input_index_.end())
    return {Region::kInput, it->second, 0, bytes};
  if (auto it = output_index_.find(v); it != output_index_.end())
    return {Region::kOutput, it->second, 0, bytes};
  if (is_input && g_.value(v).is_constant()) return image_.add(g_, v, bias);
  const int64_t offset = memory_.buffers[v].offset;
  // A node output nobody reads (a Split's unused piece) is not in the memory plan; its writes
  // go to a scratch buffer that is never read.
  if (offset < 0) {
    plan_.scratch_bytes = std::max(plan_.scratch_bytes, bytes);
    return {Region::kScratch, 0, 0, bytes};
  }
  return {Region::kArena, 0, static_cast<uint64_t>(offset), bytes};
}

uint32_t PlanAssembler::cubin_of(const void* kernel, const std::string& cubin) {
  auto [it, fresh] = cubins_.try_emplace(kernel, static_cast<uint32_t>(plan_.cubins.size()));
  if (fresh) plan_.cubins.push_back(cubin);
  return it->second;
}

// A split-K workspace per distinct kernel, zeroed once at load: a launch leaves its own tile
// counters zero for the next launch of the same kernel (contraction_kernel.h), and the nodes
// sharing a kernel run one after another on one stream. Another kernel could place its
// counters where this one leaves partial sums, so kernels do not share.
Relocation PlanAssembler::workspace_of(const cg::CompiledContraction& k) {
  const uint64_t bytes = k.source.workspace_bytes;
  if (bytes == 0) return {};
  auto [it, fresh] =
      workspaces_.try_emplace(&k, static_cast<uint32_t>(plan_.workspace_bytes.size()));
  if (fresh) plan_.workspace_bytes.push_back(bytes);
  return {Region::kWorkspace, it->second, 0, bytes};
}

void PlanAssembler::add_launch(const ir::Node& n, const NodeKernel& k, double predicted_us) {
  PlanLaunch l;
  // In whole nanoseconds, as the engine file stores it.
  l.predicted_us = std::round(predicted_us * 1000.0) / 1000.0;
  l.analytical_us = std::round(k.prediction.analytical_us * 1000.0) / 1000.0;
  l.node = n.name;
  l.op = n.op;
  l.flops = ops::node_flops(g_, n);
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue) l.bytes += static_cast<int64_t>(value_bytes(g_, v));
  for (ir::ValueId v : n.outputs) l.bytes += static_cast<int64_t>(value_bytes(g_, v));

  if (k.contraction) {
    const cg::KernelSource& src = k.contraction->source;
    l.cubin = cubin_of(k.contraction.get(), k.contraction->cubin);
    l.entry = src.name;
    std::copy(src.grid, src.grid + 3, l.grid.begin());
    std::copy(src.block, src.block + 3, l.block.begin());
    l.smem_bytes = src.smem_bytes;
    l.grid_dependent = src.grid_dependent;
    l.instruction = kernels::instruction_name(k.schedule.instruction);
    l.schedule = k.schedule.name();
    l.epilogue = k.epilogue;
    l.operand_dtype = k.prediction.operand_dtype;
    l.tensor_maps = src.tensor_maps;
    TESSEL_ICHECK(k.extra_inputs.size() <= static_cast<size_t>(kMaxEpilogueOperands))
        << n.label() << ": " << k.extra_inputs.size() << " epilogue operands";
    l.params.resize(cg::kParamWords);
    const Relocation x = operand(n, 0, true, false), w = operand(n, 1, true, false);
    l.params[cg::kParamWordA] = k.operands_swapped ? w : x;
    l.params[cg::kParamWordB] = k.operands_swapped ? x : w;
    l.params[cg::kParamWordC] = operand(n, 0, false, false);
    l.params[cg::kParamWordWorkspace] = workspace_of(*k.contraction);
    for (size_t e = 0; e < k.extra_inputs.size(); ++e) {
      const int input = k.extra_inputs[e];
      const ir::ValueId v = n.inputs.at(input);
      const bool bias = input == kBiasInput;
      TESSEL_USER_CHECK(!bias || g_.type(v).dtype == DType::kF32 || g_.value(v).is_constant())
          << n.label() << ": a bias B of dtype " << dtype_name(g_.type(v).dtype)
          << " that is not a constant; the GPU epilogue reads an f32 bias";
      l.params[cg::kParamWordExtra + e] = operand(n, static_cast<size_t>(input), true, bias);
    }
  } else {
    const cg::OpKernelSource& src = k.op->source;
    TESSEL_USER_CHECK(n.inputs.size() <= kOpInputs && n.outputs.size() <= kOpOutputs)
        << n.label() << ": " << n.inputs.size() << " inputs and " << n.outputs.size()
        << " outputs; GPU op kernels take at most " << kOpInputs << " and " << kOpOutputs;
    l.cubin = cubin_of(k.op.get(), k.op->cubin);
    l.entry = src.name;
    std::copy(src.grid, src.grid + 3, l.grid.begin());
    std::copy(src.block, src.block + 3, l.block.begin());
    l.smem_bytes = src.smem_bytes;
    l.grid_dependent = src.grid_dependent;
    l.instruction = "SIMT";
    l.params.resize(kOpInputs + kOpOutputs);
    for (size_t j = 0; j < n.inputs.size(); ++j) l.params[j] = operand(n, j, true, false);
    for (size_t j = 0; j < n.outputs.size(); ++j)
      l.params[kOpInputs + j] = operand(n, j, false, false);
  }
  profile_.launches.push_back(std::move(l));
}

// Items per run, for throughput: the leading extent of the first input (1 without one).
int64_t batch_of(const ir::Graph& g) {
  if (g.inputs.empty() || g.type(g.inputs[0]).shape.empty()) return 1;
  return std::max<int64_t>(1, g.type(g.inputs[0]).shape[0]);
}

}  // namespace

CompiledPlan compile_lowered(ir::Graph g, const Options& options,
                             const device::DeviceInfo& target) {
  const auto start = std::chrono::steady_clock::now();
  CompiledPlan result;
  ir::infer_types(g, ir::OpRegistry::global());
  ir::verify(g, ir::OpRegistry::global());

  const passes::MemoryPlan memory = passes::plan_memory(g);
  const std::string bad_memory = passes::verify_plan(g, memory);
  TESSEL_ICHECK(bad_memory.empty()) << "memory plan: " << bad_memory;

  const std::vector<NodeKernel> kernels = build_node_kernels(g, options, target);

  EnginePlan& plan = result.plan;
  plan.target = runtime::recorded_target(target);
  plan.precision = options.precision;
  const int64_t batch = batch_of(g);
  plan.batch = {batch, batch, batch};
  plan.profiles.emplace_back().batch = batch;
  plan.arena_bytes = static_cast<uint64_t>(memory.arena_bytes);
  PlanAssembler assembler(g, memory, plan);
  assembler.add_graph_io();
  // The launches' predictions, calibrated on the tuning database's measurements as predict()
  // does for the whole model.
  ModelPrediction prediction;
  for (const NodeKernel& k : kernels)
    if (k.launches()) prediction.nodes.push_back(k.prediction);
  calibrate(prediction);
  size_t next = 0;
  for (const NodeKernel& k : kernels)
    if (k.launches())
      assembler.add_launch(g.nodes[static_cast<size_t>(k.node)], k,
                           prediction.nodes.at(next++).microseconds);
  assembler.finish();
  const std::optional<std::string> bad_plan = runtime::check_plan(plan);
  TESSEL_ICHECK(!bad_plan) << "engine plan: " << *bad_plan;

  result.graph = std::move(g);
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CompiledPlan compile_plan(const ir::Graph& imported, const Options& options,
                          const device::DeviceInfo& target) {
  const auto start = std::chrono::steady_clock::now();
  const ProgressFn& progress = options.progress;
  ir::Graph g = imported;
  ir::infer_types(g, ir::OpRegistry::global());
  const std::vector<std::string> pipeline = passes::gpu_pipeline({.precision = options.precision});
  const int passes_total = static_cast<int>(pipeline.size());
  for (int i = 0; i < passes_total; ++i) {
    if (progress) progress("running passes", i, passes_total);
    g = passes::run_passes(std::move(g), {pipeline[static_cast<size_t>(i)]});
  }
  if (progress) progress("running passes", passes_total, passes_total);
  CompiledPlan result = compile_lowered(std::move(g), options, target);
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessel::compiler
