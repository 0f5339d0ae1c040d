// Device-side helpers of the benchmark: seeded random fills, naive fp32-accumulating conv2d
// and GEMM references, and the error measure between an fp16 result and an fp32 reference.
//
// The references are one thread per output with plain loops, written to be obviously right,
// not fast; they check workloads whose CPU reference would take minutes (a 4K conv, an
// 8192^3 GEMM) in well under a second. They are CUDA C++ compiled with NVRTC for the device
// on first use (and kept in the kernel cache). Pointers are device addresses (CUdeviceptr);
// fp16 values are raw IEEE half bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/workloads.h"

namespace tessel::bench {

// The CUDA source of all of the above (compiled for the device on first use; the CPU tests
// compile it for every target arch).
extern const char* const kReferenceSource;

// Fills `count` fp16 values at `ptr` with uniform values in [-1, 1). Element i depends only
// on (seed, i): the same seed gives the same tensor whatever the launch shape.
void fill_uniform_f16(uint64_t ptr, size_t count, uint64_t seed, void* stream);

// y (NHWC, fp32) = conv2d(x (NHWC fp16), w ((co,kh,kw,ci/groups) fp16)), fp32 accumulation.
void conv2d_reference(const ConvWorkload& c, uint64_t x, uint64_t w, uint64_t y_f32, void* stream);

// c (m,n row-major, fp32) = A B with the operand layouts of `g`, fp32 accumulation.
void gemm_reference(const GemmWorkload& g, uint64_t a, uint64_t b, uint64_t c_f32, void* stream);

struct Comparison {
  double rel_l2 = 0;       // ||out - ref||_2 / ||ref||_2 over the finite outputs
  double max_abs = 0;      // largest |out - ref| over the finite outputs
  uint64_t nonfinite = 0;  // NaN or Inf outputs; a poisoned output left unwritten counts here
};

// Compares `count` fp16 outputs with their fp32 reference. Waits for the device (it runs
// after all work queued on the default stream) and returns the result.
Comparison compare_f16(uint64_t out, uint64_t ref_f32, size_t count);

}  // namespace tessel::bench
