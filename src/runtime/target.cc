// The plan-against-device check.
#include "runtime/target.h"

#include "core/error.h"

namespace tessel::runtime {

void check_plan_device(const EnginePlan& plan, const device::DeviceInfo& device,
                       const std::string& what) {
  // Cubins hold SASS for one architecture (sm_90a code runs on compute capability 9.0 only),
  // and the schedules were chosen for that architecture's shared memory. A different SM count
  // of the same arch (an H100 PCIe running an H100 SXM plan) runs correctly, if not optimally.
  TESSEL_USER_CHECK(plan.target.arch() == device.arch())
      << what << " was compiled for " << plan.target.str() << ", this device is " << device.str()
      << "; recompile it with tessel compile";
  for (const PlanProfile& p : plan.profiles) {
    for (const PlanLaunch& l : p.launches) {
      TESSEL_USER_CHECK(l.smem_bytes <= device.smem_per_block_optin)
          << what << " needs " << l.smem_bytes << " bytes of shared memory per block (node '"
          << l.node << "'), this device (" << device.str() << ") allows "
          << device.smem_per_block_optin << "; recompile it with tessel compile";
    }
  }
  const uint64_t needed = device_bytes(plan);
  TESSEL_USER_CHECK(needed <= device.global_mem)
      << what << " needs " << needed << " bytes of device memory, this device (" << device.str()
      << ") has " << device.global_mem;
}

}  // namespace tessel::runtime
