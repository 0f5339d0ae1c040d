// A compiled engine as pure data: everything a GPU needs to run the model without compiling
// anything, and nothing that exists in one process only (no device handles, no addresses).
// compiler::compile_plan (compiler/compile_plan.h) builds one, compiler::compile_profiles
// (compiler/profiles.h) one for a batch range; Engine::load instantiates it; engine_file.h
// writes it to and reads it from a .tsl file. tessel::Session compiles then loads the same way, so an
// engine compiled in memory and one loaded from a file go through the same instantiation.
//
// Addresses are relocations. Each 64-bit word of a kernel's by-value parameter block is null
// or (region, index, offset), and instantiation patches in the base address of the region it
// allocated. The regions:
//   arena       activations (passes::MemoryPlan)
//   constants   the constant image, uploaded once
//   scratch     node outputs that nothing reads (a Split's unused piece): written, never read
//   workspace i split-K partials and tile counters of one kernel, zeroed once at load
//   input i     graph input i, in a buffer of its own at the largest profile's size (a run
//               uploads the items of its batch)
//   output i    graph output i, likewise (a run downloads the items of its batch)
// A relocation means the same in every profile; inputs' and outputs' sizes are the profile's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "device/device_info.h"
#include "device/tensor_map.h"

namespace tessel::runtime {

// The tessel release: `tessel --version` prints it and engine files record it.
inline constexpr const char* kTesselVersion = "0.1.0";

// The most 64-bit words a kernel's parameter block has (op kernels: 8 inputs + 4 outputs).
inline constexpr int kMaxParamWords = 16;

enum class Region : uint8_t { kNull, kArena, kConstants, kScratch, kWorkspace, kInput, kOutput };
const char* region_name(Region r);  // "arena", "workspace", ...

// `bytes` bytes at `offset` in a region (`index`: which workspace, input or output): the tensor
// a parameter word addresses, so a plan from a file can be checked against its regions' sizes
// before anything is allocated or launched.
struct Relocation {
  Region region = Region::kNull;
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool operator==(const Relocation&) const = default;
};

// The GPU a plan is compiled for, as an engine file records it: name, compute capability (so
// the arch of its cubins), SM count and shared memory per block. recorded_target() keeps just
// those facts of a DeviceInfo, so that a plan compiled here equals the plan read back.
device::DeviceInfo recorded_target(const device::DeviceInfo& device);

struct PlanTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  // Outputs only: where the value is after a run. Its own buffer (kOutput, its own index), an
  // earlier output's buffer (the same value listed twice), a graph input passed through
  // (kInput), or the constant image (a constant output, kConstants).
  Relocation source;
  bool operator==(const PlanTensor&) const = default;
};

struct PlanLaunch {
  uint32_t cubin = 0;  // index into EnginePlan::cubins
  std::string entry;   // the kernel's extern "C" name
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  uint32_t smem_bytes = 0;         // dynamic shared memory
  // The kernel begins with grid_dependency_wait (tessel_ptx.cuh), so the engine launches it as
  // a programmatic dependent of the launch before it (device::LaunchConfig::programmatic).
  bool grid_dependent = false;
  std::vector<Relocation> params;  // the parameter block, word by word

  // What the launch computes, for tools (`tessel profile`).
  std::string node;         // the compiled graph's node name
  std::string op;           // its op, "tessel.Conv"
  int64_t flops = 0;        // ops::node_flops: 2 per multiply-add
  int64_t bytes = 0;        // inputs and outputs, constants included
  std::string instruction;  // "mma.sync", "wgmma" or "SIMT" (op kernels too)
  std::string schedule;     // Schedule::name() of a contraction; empty for op kernels
  // A contraction's fused work, contraction::Epilogue::str(): "A prologue affine(#0) -> relu |
  // bias(#1) -> gelu -> store f16 plain(ld=n)"; empty for op kernels. For the predictor's fit.
  std::string epilogue;
  // A contraction's operand dtype ("f16", "i8"; compiler::NodePrediction::operand_dtype); empty
  // for op kernels. For the predictor's fit, which learns int8 contractions apart.
  std::string operand_dtype;
  double predicted_us = 0;  // the compiler's prediction (compiler/predict.h), 0: none
  double analytical_us = 0;  // its analytical time, before the learned correction (the fit's input)
  // A TMA kernel's descriptors (device/tensor_map.h), encoded at instantiation over the
  // addresses of the parameter words they name and passed as its second parameter.
  std::vector<device::TensorMapSpec> tensor_maps;
  bool operator==(const PlanLaunch&) const = default;
};

// One batch size of an engine: its launches and the graph's inputs and outputs at that batch.
// A static engine has one profile; a dynamic-batch engine (`tessel compile --batch 1:64`) one
// per batch of profile_batches(), each the plan a static compile for that batch would make.
// Profiles share everything else of the EnginePlan: cubins, the constant image, the arena
// (sized for the largest), the scratch buffer and the workspaces, and never run at once.
struct PlanProfile {
  int64_t batch = 1;  // leading dimension of the first input: items per run, for throughput
  std::vector<PlanLaunch> launches;  // in execution order
  std::vector<PlanTensor> inputs, outputs;
  bool operator==(const PlanProfile&) const = default;
};

// The batch sizes an engine runs. A static engine's range is its one batch; a dynamic
// engine runs any batch in [min, max] (runtime/batch_split.h), and `opt` is the batch that
// `tessel bench` and `profile` run when none is named.
struct BatchRange {
  int64_t min = 1, max = 1, opt = 1;
  bool dynamic() const { return min != max; }
  bool operator==(const BatchRange&) const = default;
};

struct EnginePlan {
  device::DeviceInfo target;  // recorded_target() of the device compiled for
  Precision precision = Precision::kFp16;
  std::string tessel_version = kTesselVersion;
  BatchRange batch;

  std::vector<std::string> cubins;  // distinct kernels of every profile
  uint64_t arena_bytes = 0;         // the largest profile's activations
  uint64_t scratch_bytes = 0;
  std::vector<uint64_t> workspace_bytes;  // of every profile's split-K kernels
  std::string constants;                  // the constant image, one for every profile
  std::vector<PlanProfile> profiles;      // ascending batch; at least one
  bool operator==(const EnginePlan&) const = default;

  // The profile compiled for exactly `batch`, or null.
  const PlanProfile* profile_for(int64_t batch) const;
};

// The size of a region as `profile` addresses it: of workspace, input or output number `index`
// for those (0 where there is no such one, or where an output has no buffer of its own).
uint64_t region_bytes(const EnginePlan& plan, const PlanProfile& profile, Region region,
                      uint32_t index);

// The bytes Engine::load allocates for input or output buffer `index` (kInput or kOutput):
// the largest profile's, so that every profile runs in the same buffers.
uint64_t io_buffer_bytes(const EnginePlan& plan, Region region, uint32_t index);

// Bytes of one tensor; nothing when its shape is malformed or absurdly large.
std::optional<uint64_t> tensor_bytes(DType dtype, const Shape& shape);

// Every region is allocated as at least this many bytes: cuMemAlloc refuses zero bytes, and an
// empty tensor still needs a valid address to pass.
inline constexpr uint64_t kMinAllocation = 256;

// The device memory Engine::load allocates for `plan`: each region that exists, rounded up to
// kMinAllocation (outputs without a buffer of their own take none), inputs and outputs at the
// largest profile's size.
uint64_t device_bytes(const EnginePlan& plan);

// Launches on Tensor Cores (instruction mma.sync or wgmma).
int tensor_core_launches(const PlanProfile& profile);

// Why `plan` is inconsistent, or nothing: every index in range, every relocation inside its
// region, launch dimensions within CUDA's limits, parameter blocks within kMaxParamWords;
// profiles in ascending batch order covering the batch range's ends and its opt batch, all
// with the same inputs and outputs (names, types, ranks), and in a dynamic engine every input
// and output leading with the profile's batch.
// Everything instantiation relies on, so a plan read from a file is checked with it before
// anything is allocated. Pure: no device needed.
std::optional<std::string> check_plan(const EnginePlan& plan);

}  // namespace tessel::runtime
