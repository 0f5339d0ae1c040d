// The latency predictor (`tessel predict`, and the predicted column of `tessel profile`): for
// each node of a compiled graph, the time of the kernel plan_node gives it on a GPU, without
// running anything, and for the whole engine the time of one replay of its CUDA graph and its
// device memory.
//
// A launch is first timed analytically:
//   contraction (mma.sync, wgmma, TMA, SIMT): kernels::estimate, the cost model the default
//     schedule is ranked by (kernels/estimate.h), with the epilogue's stores at the dtype it
//     stores (an int8 contraction's C is f32; the ranking charges that);
//   halo contraction and op kernels: the larger of their DRAM traffic (every input, constants
//     included, and output once) at the device's bandwidth and their arithmetic at its
//     CUDA-core (op kernels) or Tensor Core (halo) rate, plus one launch;
//   views and in-place Concats: nothing.
// Then a learned correction (predict_fit.h, fitted by bench/predictor_fit.py to kernels
// measured by `tessel profile`; the held-out check is bench/predictor_split.json's) maps that
// time to the time the kernel takes: a factor e^(sum of regression trees) on the launch's
// shape (bytes, flops, CTAs, threads, shared memory in the target's units; flops at the Tensor
// Core rate of the operands' dtype), its kernel family and kind (op kernels by kind, grouped
// contractions, int8 ones), a contraction's fused work (prologue, residual, transcendental
// steps, store map, output dtype) and its schedule's tile. A replay of the graph is the sum of
// its launches plus a fitted gap per launch (launch_gap_us).
// With a tuning database (Options::tuning), a contraction it measured on this GPU with the
// schedule the node runs is predicted by that measurement, and the median ratio of measured
// to cost-model time over those contractions scales the cost model's prediction of the
// others (a per-model calibration: what the database teaches the cost model so far).
// The device is the architecture table's (kernels/arch.h), so a GPU that is not present (an
// A100 from an H100) is predicted the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/options.h"
#include "device/device_info.h"
#include "ir/graph.h"

namespace tessel::kernels::cuda {
struct OpKernelSource;
}

namespace tessel::compiler {

struct NodePrediction {
  int node = 0;            // index in the graph
  double microseconds = 0;  // 0 for nodes that launch nothing
  int64_t flops = 0;       // ops::node_flops
  int64_t bytes = 0;       // inputs (constants included) and outputs
  std::string model;       // "cost model", "cost model, calibrated", "measured", "bandwidth",
                           // "none"
  double estimated_us = 0;  // "measured": the prediction it replaced, which calibration compares
  double analytical_us = 0;  // the cost model's or roofline's time, before the learned correction
  // A contraction's operand dtype ("f16", "bf16", "i8": A's, which a Tensor Core contraction
  // shares with B); empty for op kernels.
  std::string operand_dtype;
  bool contraction = false;  // a contraction kernel (launch_gap_us)
  // The launch, as `tessel profile --trace` records it and bench/predictor_fit.py reads it (the
  // kernel's source is generated, not compiled): CTAs, threads and shared memory per CTA; its
  // kind within its learned group (an op kernel's, "grouped", an int8 contraction's
  // "<group>_i8", or none); a contraction's schedule and epilogue (kernels::Schedule::name,
  // contraction::Epilogue::str), an op kernel's entry point.
  struct Launch {
    double ctas = 1, threads = 1, smem_bytes = 0;
    std::string kind, schedule, epilogue, entry;
  };
  Launch launch;  // none for nodes that launch nothing
};

struct ModelPrediction {
  std::vector<NodePrediction> nodes;
  double microseconds = 0;  // one replay of the engine's CUDA graph: launches + gaps
  int64_t arena_bytes = 0;  // activations (the memory plan)
  int64_t constant_bytes = 0;
  int64_t workspace_bytes = 0;  // split-K partials
  double calibration = 1.0;     // measured / cost model over the tuned contractions
  int calibrated_from = 0;      // how many (0: no tuning records matched)
  bool cold_weights = false;    // cold_weights(constant_bytes, the target)
  int64_t device_bytes() const { return arena_bytes + constant_bytes + workspace_bytes; }
};

// `g` is a graph after the GPU pipeline (passes::gpu_pipeline); every node must have a GPU
// path (a UserError names the first that has none).
ModelPrediction predict(const ir::Graph& g, const Options& options, const device::DeviceInfo& target);

// One node's prediction, given plan_node's decision for it; with `tuning`, a contraction it
// measured on `target` with the plan's schedule is predicted by the measurement. An op kernel's
// launch is read from `op`, its emitted source, where the caller has it (compile does), else
// emitted here.
NodePrediction predict_node(const ir::Graph& g, int node, const struct NodePlan& plan,
                            const device::DeviceInfo& target, const TuningDb* tuning = nullptr,
                            const kernels::cuda::OpKernelSource* op = nullptr);

// The measured / cost-model ratio over the "measured" nodes (median), applied to the "cost
// model" ones; sets m.calibration and m.calibrated_from. (predict() then sets m.microseconds to
// the launches' sum plus launch_gap_us() per launch.)
void calibrate(ModelPrediction& m);

// Whether a replay of an engine with `constant_bytes` of constants reads its weights from DRAM:
// they exceed half of the target's L2 cache. (A kernel timed alone, as `tessel profile` times
// it and the fit measured it, reads them from L2: each of its copies reads the same.)
bool cold_weights(int64_t constant_bytes, const device::DeviceInfo& target);

// What a launch predicted to take `predicted_us` adds to a replay of a CUDA graph beyond that
// (fitted, for contractions and op kernels apart: about half a us for a large kernel, about 0 or
// below for a small one, whose launch latency hides under its predecessor's tail; and for a
// contraction whose weights are cold, the time to bring them from DRAM).
double launch_gap_us(double predicted_us, bool contraction, bool cold_weights);

}  // namespace tessel::compiler
