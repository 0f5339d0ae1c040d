// Internal to the CUDA layer: the table of libcuda entry points, loaded at run time, and the
// checked-call helper. Nothing outside src/runtime/cuda includes this file.
//
// libcuda is opened with dlopen and every entry point is fetched with cuGetProcAddress, so no
// tessel binary has a link-time dependency on the driver: on a machine without one,
// cuda_available() says why and the rest of tessel (NVRTC, the CPU path) still works.
#pragma once

#include <cuda.h>

#include <string>

namespace tessel::device::detail {

// Every driver function tessel calls. The names are the <cuda.h> spellings; where <cuda.h>
// maps a name to a versioned symbol (cuMemAlloc -> cuMemAlloc_v2), the member gets the
// versioned name and type too, while cuGetProcAddress is asked for the base name, which is
// what it expects. Only functions whose signature is unchanged since CUDA 12.0 appear here,
// so a 12.x driver hands back entry points that match these declarations (for graphs that
// means cuGraphInstantiateWithFlags, not cuGraphInstantiate, whose signature changed in 12.0,
// and the moded cuStreamBeginCapture_v2 that <cuda.h> maps cuStreamBeginCapture to).
#define TESSEL_CU_FUNCTIONS(X)   \
  X(cuInit)                      \
  X(cuDriverGetVersion)          \
  X(cuGetErrorName)              \
  X(cuGetErrorString)            \
  X(cuDeviceGetCount)            \
  X(cuDeviceGet)                 \
  X(cuDeviceGetName)             \
  X(cuDeviceGetAttribute)        \
  X(cuDeviceTotalMem)            \
  X(cuDevicePrimaryCtxRetain)    \
  X(cuCtxGetCurrent)             \
  X(cuCtxSetCurrent)             \
  X(cuCtxSynchronize)            \
  X(cuModuleLoadData)            \
  X(cuModuleUnload)              \
  X(cuModuleGetFunction)         \
  X(cuFuncGetAttribute)          \
  X(cuFuncSetAttribute)          \
  X(cuLaunchKernel)              \
  X(cuLaunchKernelEx)            \
  X(cuMemAlloc)                  \
  X(cuMemGetInfo)                \
  X(cuMemFree)                   \
  X(cuMemcpyHtoD)                \
  X(cuMemcpyDtoH)                \
  X(cuMemcpyHtoDAsync)           \
  X(cuMemcpyDtoHAsync)           \
  X(cuMemHostAlloc)              \
  X(cuMemFreeHost)               \
  X(cuMemcpyDtoDAsync)           \
  X(cuMemcpyAsync)               \
  X(cuMemcpy)                    \
  X(cuMemsetD8)                  \
  X(cuStreamCreate)              \
  X(cuStreamDestroy)             \
  X(cuStreamSynchronize)         \
  X(cuStreamBeginCapture)        \
  X(cuStreamEndCapture)          \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphGetNodes)             \
  X(cuGraphLaunch)               \
  X(cuGraphExecDestroy)          \
  X(cuGraphDestroy)              \
  X(cuEventCreate)               \
  X(cuEventDestroy)              \
  X(cuEventRecord)               \
  X(cuEventSynchronize)          \
  X(cuStreamWaitEvent)           \
  X(cuEventElapsedTime)          \
  X(cuTensorMapEncodeTiled)      \
  X(cuTensorMapEncodeIm2col)

struct DriverApi {
#define TESSEL_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
  TESSEL_CU_FUNCTIONS(TESSEL_CU_MEMBER)
#undef TESSEL_CU_MEMBER
};

// The loaded driver, or a UserError "no CUDA device: <reason>" where there is none.
const DriverApi& driver();

// Like driver(), and also makes the primary context of the calling thread's GPU (current_gpu())
// current on it (retained once per process and GPU, never released: modules and buffers may
// outlive any scope).
// Every entry point that allocates, loads or launches goes through this.
const DriverApi& bind_context();

// Launch limits of the calling thread's GPU, read once when its context is bound.
struct LaunchLimits {
  unsigned max_grid[3];
  unsigned max_block[3];
  unsigned max_threads_per_block;
  unsigned smem_per_block_optin;
  // Programmatic dependent launch (compute capability 9.0 and up), and not switched off by
  // TESSEL_PDL=0 (for A/B timing and for isolating a fault).
  bool programmatic_launch;
};
const LaunchLimits& launch_limits();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; safe to call with any value.
std::string describe(CUresult result);

// Throws DriverError naming `call` (the source text of the call) and the result.
void check(CUresult result, const char* call);

}  // namespace tessel::device::detail

// Checks one driver call: TESSEL_CU_CHECK(api.cuMemAlloc(&ptr, bytes));
#define TESSEL_CU_CHECK(call) ::tessel::device::detail::check((call), #call)
