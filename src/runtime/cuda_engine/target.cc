// Known targets and the plan-against-device check.
#include "runtime/cuda_engine/target.h"

#include "core/error.h"

namespace tessel::runtime::cuda_engine {

const std::vector<KnownTarget>& known_targets() {
  // Shared memory is the opt-in maximum per CTA (cudaDevAttrMaxSharedMemoryPerBlockOptin).
  // Peaks from the datasheets, dense (no sparsity), SXM boards: H100 989.4 TFLOP/s fp16 Tensor
  // Core and 66.9 fp32; A100 312 and 19.5.
  static const std::vector<KnownTarget> targets = {
      {{"sm_90a", "NVIDIA H100 SXM", 132, 227 * 1024, 9, 0}, 989.4, 66.9},
      {{"sm_80", "NVIDIA A100 SXM", 108, 163 * 1024, 8, 0}, 312.0, 19.5},
  };
  return targets;
}

const KnownTarget* find_known_target(const std::string& arch) {
  for (const KnownTarget& t : known_targets())
    if (t.info.arch == arch) return &t;
  return nullptr;
}

TargetInfo target_for_arch(const std::string& arch) {
  if (const KnownTarget* t = find_known_target(arch)) return t->info;
  std::string known;
  for (const KnownTarget& t : known_targets())
    known += (known.empty() ? "" : ", ") + t.info.arch + " (" + t.info.device_name + ")";
  TESSEL_USER_ERROR() << "unknown target '" << arch << "': tessel compiles for " << known;
  return {};
}

TargetInfo target_of_device(const runtime::cuda::DeviceInfo& device) {
  TargetInfo t;
  t.arch = device.arch();
  t.device_name = device.name;
  t.sm_count = device.sm_count;
  t.smem_per_block = device.smem_per_block_optin;
  t.cc_major = device.cc_major;
  t.cc_minor = device.cc_minor;
  return t;
}

void check_plan_device(const EnginePlan& plan, const runtime::cuda::DeviceInfo& device,
                       const std::string& what) {
  const TargetInfo here = target_of_device(device);
  // Cubins hold SASS for one architecture (sm_90a code runs on compute capability 9.0 only),
  // and the schedules were chosen for that architecture's shared memory. A different SM count
  // of the same arch (an H100 PCIe running an H100 SXM plan) runs correctly, if not optimally.
  TESSEL_USER_CHECK(plan.target.arch == here.arch)
      << what << " was compiled for " << plan.target.str() << ", this device is " << here.str()
      << "; recompile it with tessel compile";
  for (const PlanLaunch& l : plan.launches) {
    TESSEL_USER_CHECK(l.smem_bytes <= device.smem_per_block_optin)
        << what << " needs " << l.smem_bytes << " bytes of shared memory per block (node '"
        << l.node << "'), this device (" << here.str() << ") allows " << device.smem_per_block_optin
        << "; recompile it with tessel compile";
  }
  const uint64_t needed = device_bytes(plan);
  TESSEL_USER_CHECK(needed <= device.global_mem)
      << what << " needs " << needed << " bytes of device memory, this device (" << here.str()
      << ") has " << device.global_mem;
}

}  // namespace tessel::runtime::cuda_engine
