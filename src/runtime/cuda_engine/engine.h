// The whole-model GPU engine: an imported graph, run through the GPU pass pipeline, lowered to
// one generated kernel per node (contractions on Tensor Cores where match() allows, every other
// node through codegen/cuda/op_kernels.h), over one activation arena and one constant buffer,
// and launched as one captured CUDA graph.
//
// Compiling and loading are two steps with a plan between them (engine_plan.h):
//   CompiledPlan c = compile_plan(graph, {}, target);  // passes, NVRTC (parallel); no GPU needed
//   write_engine_file(c.plan, "model.tsl");             // engine_file.h
//   Engine e = Engine::load(read_engine_file("model.tsl"), "model.tsl");  // modules, memory, graph
//   std::vector<Tensor> y = e.run(x);                   // upload, replay, download
// Engine::compile(graph) does both steps for the local GPU.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "passes/options.h"
#include "runtime/cuda_engine/engine_plan.h"

namespace tessel::runtime::cuda_engine {

// Progress of a long step, for a progress bar: `done` of `total` units of `step` ("compiling
// kernels"). Called with done = 0 when a step starts and done = total when it ends, and from
// several threads at once while kernels compile.
using ProgressFn = std::function<void(std::string_view step, int done, int total)>;

struct EngineOptions {
  passes::Precision precision = passes::Precision::kFp16;
  // false: every contraction takes the SIMT schedule (a baseline, and a way around a Tensor
  // Core kernel suspected of a bug).
  bool tensor_cores = true;
  ProgressFn progress = nullptr;  // optional
};

struct EngineStats {
  int kernels = 0;              // launches per run
  int tensor_core_kernels = 0;  // of them, contractions on mma.sync / wgmma
  int64_t arena_bytes = 0;      // activations (MemoryPlan::arena_bytes)
  int64_t constant_bytes = 0;   // weights and other constants, 256-byte aligned each
  int64_t io_bytes = 0;         // the graph inputs' and outputs' own buffers
  int64_t workspace_bytes = 0;  // split-K workspaces and the scratch buffer
  int64_t device_bytes = 0;     // all device memory the engine allocated (device_bytes())
  double compile_ms = 0;        // Engine::compile, wall clock; 0 for a loaded plan
};

// A plan and what it was compiled from.
struct CompiledPlan {
  EnginePlan plan;
  ir::Graph graph;  // the compiled graph (after the pass pipeline)
  double compile_ms = 0;
};

// The pass pipeline, the memory plan and every kernel compiled by NVRTC for `target`: needs no
// GPU. A UserError naming the node for any node that cannot be lowered, with the reason.
CompiledPlan compile_plan(const ir::Graph& imported, const EngineOptions& options,
                          const TargetInfo& target);

class Engine {
 public:
  // compile_plan for the local GPU, then load. UserError "no CUDA device: <reason>" without one.
  static Engine compile(const ir::Graph& imported, const EngineOptions& options = {});

  // Instantiates `plan` on the local GPU: loads its cubins, allocates and fills its regions,
  // patches every relocation and captures the CUDA graph. `what` names the plan in errors
  // (an engine file's path). UserError without a GPU, and from check_plan_device (target.h)
  // when the plan was compiled for another GPU.
  static Engine load(EnginePlan plan, const std::string& what = "the engine",
                     const ProgressFn& progress = {});

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  // One run: `inputs` in the order and with the types of the graph's inputs (the model's own,
  // f32 NCHW for a CNN), outputs in the graph's output order and types. UserError on a
  // mismatched input.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // Device time of one replay of the captured graph on the inputs of the last run (or on
  // whatever the input buffers hold): `warmup` untimed replays, then `reps` timed ones, each
  // bracketed by CUDA events; milliseconds, sorted.
  std::vector<float> time_replays(int warmup, int reps);

  // Device time of each launch on its own, in plan order, in milliseconds: the median of `reps`
  // replays of a CUDA graph that holds kProfileCopies back-to-back copies of the launch, per
  // copy (so a launch pays the launch-to-launch latency it pays inside the whole graph, not
  // an event pair's). Runs on the buffers' current contents; a later run() recomputes all.
  static constexpr int kProfileCopies = 8;
  std::vector<float> profile_launches(int reps);

  const EngineStats& stats() const;
  const EnginePlan& plan() const;
  // The compiled graph, for an engine made by compile(); one loaded from a plan has none.
  const ir::Graph& graph() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::runtime::cuda_engine
