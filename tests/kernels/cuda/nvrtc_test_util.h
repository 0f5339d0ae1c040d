// NVRTC called straight from the codegen tests, so that they see the PTX of a generated kernel
// (the runtime's wrapper, device/cuda_api.h, returns only the cubin).
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

#include "kernels/cuda/contraction_kernel.h"

namespace tessel::kernels::cuda::testing {

struct Compiled {
  bool ok = false;
  std::string log, ptx, cubin;
};

// `Source`: a KernelSource or an OpKernelSource (name, source, headers).
template <typename Source>
Compiled nvrtc_compile(const Source& ks, const std::string& arch) {
  Compiled out;
  std::vector<const char*> names, texts;
  for (const auto& [n, t] : ks.headers) {
    names.push_back(n.c_str());
    texts.push_back(t.c_str());
  }
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, ks.source.c_str(), (ks.name + ".cu").c_str(),
                         static_cast<int>(names.size()), texts.data(), names.data()) != NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "-std=c++17", "-default-device"};
  out.ok = nvrtcCompileProgram(prog, 3, opts) == NVRTC_SUCCESS;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  out.log.resize(n);
  nvrtcGetProgramLog(prog, out.log.data());
  if (out.ok) {
    nvrtcGetPTXSize(prog, &n);
    out.ptx.resize(n);
    nvrtcGetPTX(prog, out.ptx.data());
    nvrtcGetCUBINSize(prog, &n);
    out.cubin.resize(n);
    nvrtcGetCUBIN(prog, out.cubin.data());
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

// Where a kernel's PTX breaks the programmatic-dependent-launch contract (grid_dependency_wait,
// tessel_ptx.cuh), "" where it keeps it: for sm_90 and up, the entry's first memory access
// beyond its parameters comes after `griddepcontrol.wait`, and no `launch_dependents` lets the
// next grid in early; below sm_90, neither instruction appears.
inline std::string grid_dependency_problem(const std::string& ptx, bool sm90) {
  const size_t entry = ptx.find(".entry");
  if (entry == std::string::npos) return "no .entry in the PTX";
  const size_t wait = ptx.find("griddepcontrol.wait", entry);
  if (ptx.find("griddepcontrol.launch_dependents") != std::string::npos) return "launch_dependents";
  if (!sm90) return wait == std::string::npos ? "" : "griddepcontrol below sm_90";
  if (wait == std::string::npos) return "no griddepcontrol.wait";
  for (const char* access : {"ld.global", "st.global", "cp.async", "red.", "atom.", "ld.volatile.global"}) {
    const size_t at = ptx.find(access, entry);
    if (at != std::string::npos && at < wait) return std::string(access) + " before griddepcontrol.wait";
  }
  return "";
}

}  // namespace tessel::kernels::cuda::testing
