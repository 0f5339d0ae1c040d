// The whole-model GPU engine: a plan (engine_plan.h) instantiated on the GPU, with one
// activation arena and one constant buffer, each profile (batch size) launched as one captured
// CUDA graph. A dynamic-batch engine runs any batch of its range as the profile runs that
// runtime/batch_split.h chooses. The runtime executes plans and compiles nothing: the compiler
// (compiler/compile_plan.h) makes them.
//
//   Engine e = Engine::load(read_engine_file("model.tsl"), "model.tsl");  // modules, memory, graph
//   std::vector<Tensor> y = e.run(x);                                     // upload, replay, download
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/progress.h"
#include "runtime/engine_plan.h"

namespace tessel::runtime {

struct EngineStats {
  int profiles = 1;             // batch sizes compiled (EnginePlan::profiles)
  int kernels = 0;              // launches per run of the opt batch's profile
  int tensor_core_kernels = 0;  // of them, contractions on mma.sync / wgmma
  int64_t arena_bytes = 0;      // activations (MemoryPlan::arena_bytes)
  int64_t constant_bytes = 0;   // weights and other constants, 256-byte aligned each
  int64_t io_bytes = 0;         // the graph inputs' and outputs' own buffers
  int64_t workspace_bytes = 0;  // split-K workspaces and the scratch buffer
  int64_t device_bytes = 0;     // all device memory the engine allocated (device_bytes())
};

class Engine {
 public:
  // Instantiates `plan` on the local GPU: loads its cubins, allocates and fills its regions
  // (inputs and outputs at the largest profile's size), patches every relocation and captures
  // one CUDA graph per profile. `what` names the plan in errors
  // (an engine file's path). UserError without a GPU, and from check_plan_device (target.h)
  // when the plan was compiled for another GPU.
  static Engine load(EnginePlan plan, const std::string& what = "the engine",
                     const ProgressFn& progress = {});

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  // One run: `inputs` in the order and with the types of the graph's inputs (the model's own,
  // f32 NCHW for a CNN), outputs in the graph's output order and types. A dynamic engine takes
  // any batch of its range (the first input's leading extent; every input leads with it).
  // UserError on a mismatched input or a batch outside the range.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // One input of a run given as pieces that, concatenated along the leading (batch) dimension,
  // make the tensor: a batch gathered from several requests (a server's) without assembling it
  // first. `rows` is the piece's leading extent; `device`: `data` is a device address (of any
  // visible GPU, e.g. a Triton client's CUDA shared memory), else host memory.
  struct Rows {
    const void* data = nullptr;
    int64_t rows = 0;
    bool device = false;
  };
  // One run of `batch` items (a static engine's own batch) on inputs given in pieces:
  // inputs[i] are input i's pieces in order. The caller has checked the pieces' element types
  // and trailing dims (Session::run_gathered does); UserError on a batch outside the range or
  // pieces whose rows do not add up to the input's leading extent at that batch. submit() and
  // then collect().
  std::vector<Tensor> run_gathered(const std::vector<std::vector<Rows>>& inputs, int64_t batch);

  // A run in two halves, so that runs pipeline: submit() copies the pieces in (host pieces
  // through page-locked staging, by several threads, each block's upload started as soon as
  // it is staged; device pieces device to device), enqueues the run and returns once the
  // pieces may be freed; collect() waits for that run and returns its outputs. While one run
  // computes, the next one's inputs are staged and uploaded. Up to kPipelineDepth runs are in
  // flight, each in a slot of its own (page-locked staging of the inputs and outputs and a
  // device copy of the inputs, for a whole batch at the range's maximum, made at the slot's
  // first use: runs one at a time make only one); submit() waits while every slot holds a run
  // not yet collected. Runs execute in submit order. One thread at a time submits; another
  // may collect (a server's responder). Other uses of the engine (run_on, time_replays,
  // profile_launches) must not overlap a run not yet collected.
  struct Ticket {
    size_t slot = 0;
    uint64_t serial = 0;
  };
  static constexpr size_t kPipelineDepth = 2;
  Ticket submit(const std::vector<std::vector<Rows>>& inputs, int64_t batch);
  // Every ticket is collected exactly once (else its slot stays taken); errors of the run
  // (a faulting kernel) are thrown here, the slot freed either way.
  std::vector<Tensor> collect(const Ticket& ticket);

  // One run on device memory the caller owns (a PyTorch or CuPy tensor's storage): input i read
  // from inputs[i], output j written to outputs[j], device addresses of the plan's tensors
  // (contiguous, 16-byte aligned). The kernels are enqueued one by one on `stream` (a CUstream;
  // null: the legacy default stream), with the caller's addresses in place of the engine's own
  // input and output buffers, and not waited for: nothing is copied through the host. Runs of
  // one engine share its arena, so they must not overlap: queue them on one stream, or wait
  // between them. `batch` is the batch of the tensors (one of the range; the engine's batch for a
  // static engine). A batch that is a profile, or a chunk of it that is (batch_split.h), runs on
  // the caller's memory; a padded chunk is copied on the device into the engine's buffers and
  // its outputs copied back. UserError on a wrong count, a misaligned address or a batch
  // outside the range.
  void run_on(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
              int64_t batch, void* stream);

  // Device time of one run of `batch` (0: the opt batch) on whatever the input buffers hold
  // (the inputs of the last run): the CUDA graph of its profile, or, for a batch run in several
  // chunks, one graph of all their launches. `warmup` untimed replays, then `reps` timed ones,
  // each bracketed by CUDA events; milliseconds, sorted. UserError for a batch outside the range.
  std::vector<float> time_replays(int warmup, int reps, int64_t batch = 0);

  // Device time of each launch on its own, in plan order, in milliseconds: the median of `reps`
  // replays of a CUDA graph that holds kProfileCopies back-to-back copies of the launch, per
  // copy (so a launch pays the launch-to-launch latency it pays inside the whole graph, not
  // an event pair's). Runs on the buffers' current contents; a later run() recomputes all.
  // The launches of the profile compiled for `batch` (0: the opt batch); UserError where
  // `batch` is no profile.
  static constexpr int kProfileCopies = 8;
  std::vector<float> profile_launches(int reps, int64_t batch = 0);

  const EngineStats& stats() const;
  const EnginePlan& plan() const;
 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::runtime
