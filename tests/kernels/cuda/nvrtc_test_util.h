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

}  // namespace tessel::kernels::cuda::testing
