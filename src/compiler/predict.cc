#include "compiler/predict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <string>

#include "compiler/plan_node.h"
#include "compiler/predict_fit.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "kernels/arch.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/estimate.h"
#include "ops/flops.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

int64_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  const ir::TensorType& t = g.type(v);
  return numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
}

// DRAM traffic against arithmetic, the slower wins; one launch on top.
double roofline_us(int64_t bytes, int64_t flops, double flops_per_clk,
                   const device::DeviceInfo& target) {
  const kernels::ArchFacts& f = kernels::arch_facts(target);
  const double sms = target.sm_count;
  const double dram = static_cast<double>(bytes) / (f.dram_bytes_per_clk * sms);
  const double math = flops_per_clk > 0 ? static_cast<double>(flops) / (flops_per_clk * sms) : 0;
  return (kernels::launch_cycles(target) + std::max(dram, math)) / f.clock_mhz;
}

using LaunchShape = NodePrediction::Launch;

// The learned correction's group of a launch (bench/predictor_fit.py's `group`; the kind,
// its `op_kind`, is Launch::kind).
const char* learned_group(const NodePlan& plan) {
  if (plan.run != NodeRun::kContraction) return "op";
  switch (plan.schedule.mainloop) {
    case kernels::Mainloop::kHalo:
      return "halo";
    case kernels::Mainloop::kTma:
      return "tma";
    default:
      break;
  }
  switch (plan.schedule.instruction) {
    case kernels::Instruction::kWgmma:
      return "wgmma";
    case kernels::Instruction::kSimt:
      return "simt";
    default:
      return "mma";
  }
}

// int8 operands (contraction::int8_operands: W i8, A i8 or u8): mma.sync m16n8k32 or wgmma k32
// at twice the 16-bit rate, on k-tiles of twice the elements, with the int8 epilogues
// (kernels::fitted_class's rule). No kernel takes one int8 operand alone (kernel_rules'
// check_int8), so the fit reads A's dtype, which the trace carries, as this.
bool int8_operands(const NodePlan& plan) {
  return plan.run == NodeRun::kContraction && contraction::int8_operands(*plan.match.contraction);
}

template <typename Source>
LaunchShape shape_of(const Source& k) {
  LaunchShape s;
  s.ctas = static_cast<double>(k.grid[0]) * k.grid[1] * k.grid[2];
  s.threads = static_cast<double>(k.block[0]) * k.block[1] * k.block[2];
  s.smem_bytes = static_cast<double>(k.smem_bytes);
  return s;
}

// An op kernel's kind from its entry point, tessel_op_<kind>_<16 hex digits> ("op:pool").
std::string op_kind(const std::string& entry) {
  const std::string prefix = "tessel_op_";
  if (entry.rfind(prefix, 0) != 0 || entry.size() < prefix.size() + 17) return "";
  return "op:" + entry.substr(prefix.size(), entry.size() - prefix.size() - 17);
}

LaunchShape launch_shape(const ir::Graph& g, const ir::Node& n, const NodePlan& plan,
                         const kernels::cuda::OpKernelSource* op) {
  if (plan.run == NodeRun::kContraction) {
    const kernels::cuda::LaunchDims d =
        kernels::cuda::launch_dims(*plan.match.contraction, plan.epilogue, plan.schedule);
    LaunchShape s;
    s.ctas = static_cast<double>(d.grid_x);
    s.threads = static_cast<double>(d.threads);
    s.smem_bytes = static_cast<double>(d.smem_bytes);
    s.schedule = plan.schedule.name();
    s.epilogue = plan.epilogue.str();
    if (plan.schedule.groups_per_tile > 0) s.kind = "grouped";  // 16-bit only
    if (int8_operands(plan)) s.kind = std::string(learned_group(plan)) + "_i8";
    return s;
  }
  auto shape = [](const kernels::cuda::OpKernelSource& k) {
    LaunchShape s = shape_of(k);
    s.kind = op_kind(k.name);
    s.entry = k.name;
    return s;
  };
  return op ? shape(*op) : shape(kernels::cuda::emit_op(g, n, plan.slices));
}

// The learned correction's inputs (compiler/predict_fit.h, fitted by bench/predictor_fit.py,
// whose `features` these must equal): the launch's size in the target's units (the analytical
// time, DRAM bytes at its bandwidth, flops at the mma.sync rate of the operands: int8's for an
// int8 contraction, else 16-bit's; CTAs per SM, threads, shared memory), what runs (its group
// and kind), a contraction's fused work and its schedule's tile.
std::array<double, fit::kFeatures> learned_features(double analytical_us, const NodePrediction& p,
                                                    const LaunchShape& launch, const NodePlan& plan,
                                                    const device::DeviceInfo& target) {
  const kernels::ArchFacts& f = kernels::arch_facts(target);
  const double sms = target.sm_count;
  const double bytes_per_us = static_cast<double>(f.dram_bytes_per_clk) * sms * f.clock_mhz;
  const bool int8 = int8_operands(plan);
  const double tc_per_clk = int8 ? f.mma_s8_ops_per_clk : f.mma_flops_per_clk;
  const double flops_per_us = tc_per_clk * sms * f.clock_mhz;
  // predictor_fit.py's feature_names: 6 of size, 6 groups, the kinds, int8, 6 of fused work and
  // 6 of the tile (0 for an op kernel).
  static_assert(fit::kFeatures == 6 + 6 + std::size(fit::kKinds) + 1 + 12,
                "predict_fit.h was written for other features");
  std::array<double, fit::kFeatures> x{};
  size_t i = 0;
  x[i++] = std::log(std::max(analytical_us, 0.5));
  x[i++] = std::log(std::max(static_cast<double>(p.bytes) / bytes_per_us, fit::kFloorUs));
  x[i++] = std::log(std::max(static_cast<double>(p.flops) / flops_per_us, fit::kFloorUs));
  x[i++] = std::log(std::max(launch.ctas / sms, fit::kMinWave));
  x[i++] = std::log(launch.threads / 128.0);
  x[i++] = launch.smem_bytes / 65536.0;
  const std::string group = learned_group(plan);
  for (const char* g : {"halo", "mma", "op", "simt", "tma", "wgmma"}) x[i++] = group == g;
  for (const char* k : fit::kKinds) x[i++] = launch.kind == k;
  x[i++] = int8;
  if (plan.run == NodeRun::kContraction) {
    using contraction::StoreMap;
    const contraction::Epilogue& e = plan.epilogue;
    const kernels::Schedule& s = plan.schedule;
    const bool halo = s.mainloop == kernels::Mainloop::kHalo;
    const bool tma = s.mainloop == kernels::Mainloop::kTma;
    // As the schedule's name spells its tile (kernels::Schedule::name): a halo kernel's output
    // tile in pixels and no K tile, stages or split-K; a TMA kernel's without split-K.
    const double values[] = {
        static_cast<double>(e.a_prologue.has_value()),
        static_cast<double>(contraction::read_bytes_per_output(e) > 0),
        static_cast<double>(contraction::transcendentals_per_output(e) > 0),
        static_cast<double>(e.store.kind == StoreMap::Kind::kChannelSlice),
        static_cast<double>(e.store.kind == StoreMap::Kind::kDepthToSpace ||
                            e.store.kind == StoreMap::Kind::kDepthToSpaceNchw),
        static_cast<double>(e.out_dtype == DType::kF32),
        std::log(halo ? s.tile_h() : s.block_m),
        std::log(halo ? s.tile_w : s.block_n),
        std::log(halo ? 1 : s.block_k),
        halo ? 0.0 : s.stages,
        std::log(halo || tma ? 1 : s.split_k),
        std::log(1 + s.groups_per_tile)};
    for (double v : values) x[i++] = v;
  }
  return x;
}

// The learned correction: the analytical time `analytical_us` times e^(the trees' sum on the
// launch's features), at least kMinKernelUs.
double learned_us(double analytical_us, const NodePrediction& p, const LaunchShape& launch,
                  const NodePlan& plan, const device::DeviceInfo& target) {
  const std::array<double, fit::kFeatures> x = learned_features(analytical_us, p, launch, plan, target);
  constexpr int kSplits = (1 << fit::kDepth) - 1;
  double ln_ratio = 0;
  for (const fit::Tree& t : fit::kTrees) {
    int node = 0;
    for (int level = 0; level < fit::kDepth; ++level) {
      const int f = t.feature[node];
      node = 2 * node + 1 + (f >= 0 && x[static_cast<size_t>(f)] > t.threshold[node] ? 1 : 0);
    }
    ln_ratio += t.leaf[node - kSplits];
  }
  return std::max(fit::kMinKernelUs, std::max(analytical_us, 0.5) * std::exp(ln_ratio));
}

}  // namespace

bool cold_weights(int64_t constant_bytes, const device::DeviceInfo& target) {
  return static_cast<double>(constant_bytes) > static_cast<double>(target.l2_bytes) / 2;
}

double launch_gap_us(double predicted_us, bool contraction, bool cold_weights) {
  const bool large = predicted_us >= fit::kSmallKernelUs;
  const double gap = contraction ? (large ? fit::kLaunchGapUs : fit::kSmallLaunchGapUs)
                                 : (large ? fit::kOpLaunchGapUs : fit::kSmallOpLaunchGapUs);
  return gap + (contraction && cold_weights ? fit::kColdWeightsGapUs : 0.0);
}

NodePrediction predict_node(const ir::Graph& g, int node, const NodePlan& plan,
                            const device::DeviceInfo& target, const TuningDb* tuning,
                            const kernels::cuda::OpKernelSource* op) {
  const ir::Node& n = g.nodes.at(static_cast<size_t>(node));
  NodePrediction p;
  p.node = node;
  p.flops = ops::node_flops(g, n);
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue) p.bytes += value_bytes(g, v);
  for (ir::ValueId v : n.outputs) p.bytes += value_bytes(g, v);
  const kernels::ArchFacts& f = kernels::arch_facts(target);
  switch (plan.run) {
    case NodeRun::kUnsupported:
      TESSEL_USER_ERROR() << n.label() << ": " << plan.why;
    case NodeRun::kNoKernel:
      p.model = "none";
      p.bytes = 0;
      return p;
    case NodeRun::kOpKernel:
      p.model = "bandwidth";
      p.analytical_us = roofline_us(p.bytes, p.flops, f.fma_flops_per_clk, target);
      break;
    case NodeRun::kContraction:
      p.operand_dtype = dtype_name(plan.match.contraction->a_dtype);
      if (plan.schedule.mainloop == kernels::Mainloop::kHalo) {
        p.model = "bandwidth";
        p.analytical_us = roofline_us(p.bytes, p.flops, f.mma_flops_per_clk, target);
      } else {
        p.model = "cost model";
        p.analytical_us =
            kernels::estimate(*plan.match.contraction, plan.schedule, target,
                              contraction::read_bytes_per_output(plan.epilogue),
                              static_cast<int64_t>(dtype_size(plan.epilogue.out_dtype)))
                .microseconds;
      }
      break;
  }
  p.contraction = plan.run == NodeRun::kContraction;
  p.launch = launch_shape(g, n, plan, op);
  p.microseconds = learned_us(p.analytical_us, p, p.launch, plan, target);
  if (plan.run != NodeRun::kContraction) return p;
  // A contraction the tuning database measured on this GPU, with the schedule it runs: the
  // measurement is the prediction, and it calibrates the cost model for the others.
  if (const TuningRecord* r = plan.tuned && tuning
                                  ? tuning->find(tuning_key(*plan.match.contraction, plan.epilogue),
                                                 TuningDb::device_key(target))
                                  : nullptr;
      r && p.microseconds > 0) {
    p.estimated_us = p.microseconds;
    p.microseconds = r->microseconds;
    p.model = "measured";
  }
  return p;
}

void calibrate(ModelPrediction& m) {
  std::vector<double> ratios;
  for (const NodePrediction& p : m.nodes)
    if (p.model == "measured") ratios.push_back(p.microseconds / p.estimated_us);
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    m.calibration = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0;
    m.calibrated_from = static_cast<int>(n);
    for (NodePrediction& p : m.nodes) {
      if (p.model != "cost model") continue;
      p.microseconds *= m.calibration;
      p.model = "cost model, calibrated";
    }
  }
}

ModelPrediction predict(const ir::Graph& g, const Options& options, const device::DeviceInfo& target) {
  ModelPrediction m;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodePlan plan = plan_node(g, g.nodes[i], options, target);
    m.nodes.push_back(predict_node(g, static_cast<int>(i), plan, target, options.tuning.get()));
    if (plan.run == NodeRun::kContraction && plan.schedule.split_k > 1)
      m.workspace_bytes += static_cast<int64_t>(
          kernels::cuda::launch_dims(*plan.match.contraction, plan.epilogue, plan.schedule).workspace_bytes);
  }
  calibrate(m);
  m.arena_bytes = passes::plan_memory(g).arena_bytes;
  for (const ir::Value& v : g.values)
    if (v.is_constant()) m.constant_bytes += static_cast<int64_t>(v.data->nbytes());
  m.cold_weights = cold_weights(m.constant_bytes, target);
  for (const NodePrediction& p : m.nodes)
    if (p.model != "none")
      m.microseconds += p.microseconds + launch_gap_us(p.microseconds, p.contraction, m.cold_weights);
  return m;
}

}  // namespace tessel::compiler
