// The GPU a plan is compiled for, and the check that a plan fits the GPU it is loaded on.
//
// Compiling needs NVRTC and the few facts the schedule chooser uses (tune::DeviceInfoLite),
// not a GPU: a known target supplies those facts by arch, so `tessel compile --target sm_90a`
// works on a machine without one (a CI runner), and the engine file runs on the GPU later.
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/engine_plan.h"

namespace tessel::runtime::cuda_engine {

// A GPU tessel can compile for without having it, with its datasheet peaks for `tessel
// profile`'s "% of peak".
struct KnownTarget {
  TargetInfo info;
  double tensor_core_tflops = 0;  // dense fp16 inputs, fp32 accumulation, on Tensor Cores
  double simt_tflops = 0;         // fp32 FMA on CUDA cores
};

// sm_90a (H100 SXM) and sm_80 (A100 SXM).
const std::vector<KnownTarget>& known_targets();
// The known target of `arch`, or null.
const KnownTarget* find_known_target(const std::string& arch);
// The known target of `arch`; a UserError naming the known ones for any other.
TargetInfo target_for_arch(const std::string& arch);
// The facts of a GPU present (runtime::cuda::device_info()).
TargetInfo target_of_device(const runtime::cuda::DeviceInfo& device);

// UserError when `plan` cannot run on `device`: compiled for another arch, more shared memory
// per block than the device allows, or more device memory than it has. `what` names the plan
// in the message (the engine file's path). Pure: tested with a made-up DeviceInfo.
void check_plan_device(const EnginePlan& plan, const runtime::cuda::DeviceInfo& device,
                       const std::string& what);

}  // namespace tessel::runtime::cuda_engine
