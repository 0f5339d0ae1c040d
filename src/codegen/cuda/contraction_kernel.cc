// ContractionKernel: emit -> NVRTC (with the embedded kernel templates) -> module -> launch.
#include "codegen/cuda/contraction_kernel.h"

#include "codegen/cuda/kernels/tessel_params.cuh"
#include "core/error.h"

namespace tessel::codegen::cuda {

static_assert(sizeof(KernelParams) == 8 * sizeof(uint64_t), "KernelParams is eight 64-bit words");

std::unique_ptr<ContractionKernel> ContractionKernel::build(const contraction::Contraction& c,
                                                            const contraction::Epilogue& e,
                                                            const tune::Schedule& s,
                                                            const std::string& arch) {
  TESSEL_USER_CHECK(s.instruction != tune::Instruction::kWgmma || arch == "sm_90a")
      << "wgmma kernels need sm_90a (Hopper), not " << arch;
  std::unique_ptr<ContractionKernel> k(new ContractionKernel());
  k->source_ = emit(c, e, s);
  runtime::cuda::CompileOptions options;
  options.arch = arch;
  options.headers = k->source_.headers;
  k->cubin_ = runtime::cuda::compile(k->source_.source, k->source_.name + ".cu", options).cubin;
  k->module_ = runtime::cuda::Module::load(k->cubin_);
  k->function_ = k->module_->function(k->source_.name);
  return k;
}

void ContractionKernel::launch(const KernelArgs& args, void* stream) const {
  TESSEL_ICHECK(args.extra.size() <= static_cast<size_t>(kMaxEpilogueOperands))
      << "kernel " << source_.name << " takes at most " << kMaxEpilogueOperands
      << " epilogue operands, got " << args.extra.size();
  TESSEL_ICHECK(source_.workspace_bytes == 0 || args.workspace != 0)
      << "kernel " << source_.name << " needs a split-K workspace of " << source_.workspace_bytes
      << " bytes";
  auto ptr = [](uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  KernelParams params{};
  params.a = ptr(args.a);
  params.b = ptr(args.b);
  params.c = ptr(args.c);
  params.workspace = ptr(args.workspace);
  for (size_t i = 0; i < args.extra.size(); ++i) params.extra[i] = ptr(args.extra[i]);
  void* kernel_args[] = {&params};
  runtime::cuda::LaunchConfig config;
  for (int i = 0; i < 3; ++i) {
    config.grid[i] = source_.grid[i];
    config.block[i] = source_.block[i];
  }
  config.smem_bytes = source_.smem_bytes;
  config.stream = stream;
  runtime::cuda::launch(function_, config, kernel_args);
}

}  // namespace tessel::codegen::cuda
