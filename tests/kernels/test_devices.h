// Devices for schedule tests, described by the few facts the schedule chooser reads.
#pragma once

#include <cstddef>

#include "device/device_info.h"

namespace tessel::kernels::testing {

inline device::DeviceInfo device_of(int sm_count, size_t smem_per_block_optin, int cc_major,
                                    int cc_minor) {
  device::DeviceInfo d;
  d.sm_count = sm_count;
  d.smem_per_block_optin = smem_per_block_optin;
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  return d;
}

}  // namespace tessel::kernels::testing
