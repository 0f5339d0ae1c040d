// The check that a plan fits the GPU it is loaded on.
#pragma once

#include <string>

#include "device/device_info.h"
#include "runtime/engine_plan.h"

namespace tessel::runtime {

// UserError when `plan` cannot run on `device`: compiled for another arch, more shared memory
// per block than the device allows, or more device memory than it has. `what` names the plan
// in the message (the engine file's path). Pure: tested with a made-up DeviceInfo.
void check_plan_device(const EnginePlan& plan, const device::DeviceInfo& device,
                       const std::string& what);

}  // namespace tessel::runtime
