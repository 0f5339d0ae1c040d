// compile_contraction: emit -> NVRTC (with the embedded kernel templates) -> cubin;
// ContractionKernel: that cubin loaded as a module, and launched.
#include "kernels/cuda/contraction_kernel.h"

#include <cstddef>
#include <cstring>

#include "kernels/cuda/templates/tessel_params.cuh"
#include "device/tensor_map.h"
#include "core/error.h"

namespace tessel::kernels::cuda {

static_assert(sizeof(KernelParams) == kParamWords * sizeof(uint64_t),
              "KernelParams is kParamWords 64-bit words");
static_assert(offsetof(KernelParams, a) == kParamWordA * sizeof(uint64_t) &&
                  offsetof(KernelParams, b) == kParamWordB * sizeof(uint64_t) &&
                  offsetof(KernelParams, c) == kParamWordC * sizeof(uint64_t) &&
                  offsetof(KernelParams, workspace) == kParamWordWorkspace * sizeof(uint64_t) &&
                  offsetof(KernelParams, extra) == kParamWordExtra * sizeof(uint64_t) &&
                  kParamWordExtra + kMaxEpilogueOperands == kParamWords,
              "the kParamWord* indices follow KernelParams");
static_assert(sizeof(TensorMaps) == sizeof(device::TensorMapParam) && alignof(TensorMaps) == 64 &&
                  kParamWordA == 0 && kParamWordB == 1 && kParamWordC == 2 &&
                  kParamWords == device::kMaxTensorMapOperand + 1,
              "TensorMaps is the encoded TensorMapParam; TensorMapSpec::operand is a parameter word");

CompiledContraction compile_contraction(const contraction::Contraction& c,
                                        const contraction::Epilogue& e, const kernels::Schedule& s,
                                        const std::string& arch) {
  TESSEL_USER_CHECK(s.instruction != kernels::Instruction::kWgmma || arch == "sm_90a")
      << "wgmma kernels need sm_90a (Hopper), not " << arch;
  CompiledContraction k;
  k.source = emit(c, e, s);
  device::CompileOptions options;
  options.arch = arch;
  options.headers = k.source.headers;
  k.cubin = device::compile(k.source.source, k.source.name + ".cu", options).cubin;
  return k;
}

std::unique_ptr<ContractionKernel> ContractionKernel::build(const contraction::Contraction& c,
                                                            const contraction::Epilogue& e,
                                                            const kernels::Schedule& s,
                                                            const std::string& arch) {
  std::unique_ptr<ContractionKernel> k(new ContractionKernel());
  k->compiled_ = compile_contraction(c, e, s, arch);
  k->module_ = device::Module::load(k->compiled_.cubin);
  k->function_ = k->module_->function(k->compiled_.source.name);
  return k;
}

void ContractionKernel::launch(const KernelArgs& args, void* stream) const {
  const KernelSource& src = compiled_.source;
  TESSEL_ICHECK(args.extra.size() <= static_cast<size_t>(kMaxEpilogueOperands))
      << "kernel " << src.name << " takes at most " << kMaxEpilogueOperands
      << " epilogue operands, got " << args.extra.size();
  TESSEL_ICHECK(src.workspace_bytes == 0 || args.workspace != 0)
      << "kernel " << src.name << " needs a split-K workspace of " << src.workspace_bytes
      << " bytes";
  auto ptr = [](uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  KernelParams params{};
  params.a = ptr(args.a);
  params.b = ptr(args.b);
  params.c = ptr(args.c);
  params.workspace = ptr(args.workspace);
  for (size_t i = 0; i < args.extra.size(); ++i) params.extra[i] = ptr(args.extra[i]);
  // A TMA kernel's descriptors, encoded on the host for these addresses (a microsecond's
  // work): the driver copies them with the parameters, also into a graph node under capture.
  device::TensorMapParam maps;
  if (!src.tensor_maps.empty()) {
    static_assert(sizeof(KernelParams) == sizeof(uint64_t[kParamWords]), "KernelParams is its words");
    uint64_t words[kParamWords];
    std::memcpy(words, &params, sizeof(words));
    maps = device::encode_tensor_maps(src.tensor_maps, words, kParamWords);
  }
  void* kernel_args[] = {&params, &maps};
  device::LaunchConfig config;
  for (int i = 0; i < 3; ++i) {
    config.grid[i] = src.grid[i];
    config.block[i] = src.block[i];
  }
  config.smem_bytes = src.smem_bytes;
  config.stream = stream;
  config.programmatic = src.grid_dependent;
  device::launch(function_, config, kernel_args);
}

}  // namespace tessel::kernels::cuda
