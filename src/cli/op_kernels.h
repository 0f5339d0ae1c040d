// From a benchmark workload (conv2d or GEMM) to tessel's kernel for it: index maps, the
// matcher's Contraction and remarks, the default schedule, and the compiled kernel. Shared by
// `tessel bench-op` and `tessel codegen`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/workloads.h"
#include "codegen/cuda/contraction_kernel.h"
#include "contraction/contraction.h"
#include "tune/device_model.h"
#include "tune/schedule.h"

namespace tessel::cli {

struct OpPlan {
  contraction::IndexMaps maps;
  contraction::MatchResult match;
  contraction::Epilogue epilogue;
  tune::Schedule schedule;
  bool tensor_cores = false;  // the schedule uses Tensor Cores
  std::vector<std::string> notes;  // why not, when not
};

contraction::IndexMaps conv_maps(const bench::ConvWorkload& w);
contraction::IndexMaps gemm_maps(const bench::GemmWorkload& w);

// Matches the maps and picks the default schedule for `device` (SIMT when the contraction
// does not qualify for Tensor Cores or `allow_tensor_cores` is false). UserError if the maps
// are not a contraction at all.
OpPlan plan_op(const contraction::IndexMaps& maps, const tune::DeviceInfoLite& device,
               bool allow_tensor_cores);

// The device the plans are made for: the GPU present, or the known sm_90a target (an H100,
// runtime/cuda_engine/target.h) when there is none, so `tessel codegen` works without a GPU.
tune::DeviceInfoLite target_device(std::string* arch);

}  // namespace tessel::cli
