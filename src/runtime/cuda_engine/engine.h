// The whole-model GPU engine: an imported graph, run through the GPU pass pipeline, lowered to
// one generated kernel per node (contractions on Tensor Cores where match() allows, every other
// node through codegen/cuda/op_kernels.h), over one activation arena and one constant buffer,
// and launched as one captured CUDA graph.
//
//   Engine e = Engine::compile(graph, {});       // passes, plan, NVRTC (parallel), capture
//   std::vector<Tensor> y = e.run(x);            // upload, replay, download
//
// Graph inputs and outputs live in buffers of their own rather than in their arena slots:
// the CUDA layer copies whole buffers only (DeviceBuffer::upload/download), and the dedicated
// buffers keep run() to one copy per tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "passes/options.h"

namespace tessel::runtime::cuda_engine {

struct EngineOptions {
  passes::Precision precision = passes::Precision::kFp16;
  // false: every contraction takes the SIMT schedule (a baseline, and a way around a Tensor
  // Core kernel suspected of a bug).
  bool tensor_cores = true;
};

struct EngineStats {
  int kernels = 0;               // launches per run, one per node of the compiled graph
  int tensor_core_kernels = 0;   // of them, contractions on mma.sync / wgmma
  int64_t arena_bytes = 0;       // activations (MemoryPlan::arena_bytes)
  int64_t constant_bytes = 0;    // weights and other constants, 256-byte aligned each
  int64_t io_bytes = 0;          // the graph inputs' and outputs' own buffers
  double compile_ms = 0;         // Engine::compile, wall clock
};

class Engine {
 public:
  // UserError "no CUDA device: <reason>" without a GPU; a UserError naming the node for any
  // node that cannot be lowered, with the reason.
  static Engine compile(const ir::Graph& imported, const EngineOptions& options = {});

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

  const EngineStats& stats() const;
  const ir::Graph& graph() const;  // the compiled graph (after the pass pipeline)

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::runtime::cuda_engine
