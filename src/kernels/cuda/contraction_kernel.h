// Generated contraction kernels: from (Contraction, Epilogue, Schedule) to CUDA C++ source,
// and from source to a launchable kernel.
//
// Generated code instantiates a few hand-checked templates (kernels/*.cuh, embedded into the
// binary at build time); the emitter only writes the problem-specific parts: compile-time
// extents, the index arithmetic of the operand gathers, the epilogue steps and the store map.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/contraction/contraction.h"
#include "kernels/contraction/epilogue.h"
#include "device/cuda_api.h"
#include "device/tensor_map.h"
#include "kernels/schedule.h"

namespace tessel::kernels::cuda {

// Why `schedule` cannot implement the problem (empty when it can). Cheap: no compile. The
// tuner prunes with it; the default-schedule chooser must only return schedules that pass.
// Instructions: kMmaSync (sm_80+; warp_m x warp_n is a warp's tile), kWgmma (sm_90a only;
// warp_m x warp_n is a warpgroup's tile, 4 warps: m a multiple of 64, n 64/128/256, block_k
// a multiple of 64, 3-5 stages), kSimt (any f16/bf16/f32 operands; no split-K).
std::optional<std::string> can_implement(const contraction::Contraction& c,
                                         const contraction::Epilogue& e,
                                         const kernels::Schedule& s);

struct KernelSource {
  std::string name;    // entry point, extern "C"
  std::string source;  // complete translation unit, readable
  std::vector<std::pair<std::string, std::string>> headers;  // template headers it includes
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;
  size_t workspace_bytes = 0;  // split-K partials
  // TMA kernels: the descriptors of their second parameter (TensorMaps in tessel_params.cuh),
  // to encode over the parameter word each names (TensorMapSpec::operand: kParamWordA,
  // kParamWordB, kParamWordC or the residual's kParamWordExtra + i) once its address is known.
  std::vector<device::TensorMapSpec> tensor_maps;
  // The entry begins with grid_dependency_wait (tessel_ptx.cuh), so the kernel may be launched
  // as a programmatic dependent of the one before it (device::LaunchConfig::programmatic).
  bool grid_dependent = false;
};

// Throws InternalError if can_implement() says no.
KernelSource emit(const contraction::Contraction& c, const contraction::Epilogue& e,
                  const kernels::Schedule& s);

// The launch emit() would write (grid, threads, shared memory, split-K workspace) from the same
// kernel plan, without writing its source: what the predictor needs. Throws InternalError if
// can_implement() says no.
struct LaunchDims {
  uint64_t grid_x = 0;
  int threads = 0;
  unsigned smem_bytes = 0;
  size_t workspace_bytes = 0;
};
LaunchDims launch_dims(const contraction::Contraction& c, const contraction::Epilogue& e,
                       const kernels::Schedule& s);

// Device pointers of one launch, each 16-byte aligned. `extra` holds epilogue operands in
// EpilogueStep::operand order: scale and bias are f32 vectors indexed by output channel (the
// output's innermost index, so a grouped conv's g*cog + n), the residual has the output's
// dtype and layout (store map included). `workspace` (split-K only) holds
// KernelSource::workspace_bytes and must be zeroed once before the first launch: its tile
// counters are left zero by every launch, so it can be reused without clearing, though not by
// two launches in flight at once.
struct KernelArgs {
  uint64_t a = 0, b = 0, c = 0;
  std::vector<uint64_t> extra;
  uint64_t workspace = 0;
};

// The same parameter block as 64-bit words (KernelParams in kernels/tessel_params.cuh, checked
// against it in contraction_kernel.cc), for launchers that fill it word by word: a serialized
// engine stores each launch's parameters this way.
inline constexpr int kParamWordA = 0;
inline constexpr int kParamWordB = 1;
inline constexpr int kParamWordC = 2;
inline constexpr int kParamWordWorkspace = 3;
inline constexpr int kParamWordExtra = 4;  // extra[i] is word kParamWordExtra + i
inline constexpr int kParamWords = 8;

// A kernel compiled for `arch` but not loaded: what a serialized engine stores. Compiling needs
// NVRTC only, so this works on a machine without a GPU (cross-compiling for another one).
struct CompiledContraction {
  KernelSource source;
  std::string cubin;
};

// UserError for a wgmma schedule on an arch other than sm_90a.
CompiledContraction compile_contraction(const contraction::Contraction& c,
                                        const contraction::Epilogue& e, const kernels::Schedule& s,
                                        const std::string& arch);

// A compiled, loaded kernel. build() throws what compile_contraction() throws, and a UserError
// where no CUDA device exists (Module::load).
class ContractionKernel {
 public:
  static std::unique_ptr<ContractionKernel> build(const contraction::Contraction& c,
                                                  const contraction::Epilogue& e,
                                                  const kernels::Schedule& s,
                                                  const std::string& arch);
  void launch(const KernelArgs& args, void* stream) const;
  const KernelSource& source() const { return compiled_.source; }
  const std::string& cubin() const { return compiled_.cubin; }

 private:
  CompiledContraction compiled_;
  std::shared_ptr<device::Module> module_;
  void* function_ = nullptr;
};

}  // namespace tessel::kernels::cuda
