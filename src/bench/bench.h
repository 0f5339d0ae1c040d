// The op benchmark behind `tessel bench-op`: for each conv2d or GEMM workload it runs tessel's
// kernel and the library baseline (cuDNN, cuBLASLt) on the same seeded random fp16 operands,
// checks both against a naive fp32-accumulating reference computed on the device, and times
// both with CUDA events.
//
// Method (see also runtime/cuda time_with_events):
//  - inputs are uniform in [-1, 1), seeded, never zeros; outputs are poisoned with NaN before
//    the checked run, so an unwritten element fails the check;
//  - a result is correct when it has no NaN/Inf and its relative L2 error against the fp32
//    reference is within the tolerance (1e-2 for fp16 outputs);
//  - timing: warm-up runs, then the median of `reps` event-timed runs; when one operand set
//    fits in L2, runs rotate over enough sets to exceed twice the L2 size, so neither side is
//    timed on a warm cache;
//  - "% of peak" is relative to the fp16 Tensor Core rate measured once per process on an
//    8192^3 cuBLASLt GEMM, not the datasheet.
//
// tessel's side comes in as a callable so that this library does not depend on the code
// generator: the caller turns a workload into a TesselKernel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/baselines.h"
#include "bench/workloads.h"
#include "runtime/cuda/cuda_api.h"

namespace tessel::bench {

// Enqueues one run of an implementation on `operands` (addresses of fp16 device buffers
// shaped as the workload says) on `stream` (a CUstream; nullptr is the default stream).
using Enqueue = std::function<void(const Operands& operands, void* stream)>;

// tessel's implementation of one workload: an enqueue function and what it is (the kernel's
// schedule), or, with `enqueue` empty, why tessel has none ("ci=3 is not a multiple of 8").
struct TesselKernel {
  Enqueue enqueue;
  std::string description;
};
using ConvProvider = std::function<TesselKernel(const ConvWorkload&)>;
using GemmProvider = std::function<TesselKernel(const GemmWorkload&)>;

struct BenchOptions {
  int warmup = 10;
  int reps = 100;
  double tolerance = 1e-2;  // relative L2 error allowed against the fp32 reference
  uint64_t seed = 1;
};

// One implementation on one workload.
struct Measurement {
  bool ran = false;      // false: unsupported or failed; `description` says which
  bool correct = false;  // no NaN/Inf, relative L2 error within tolerance
  double median_us = 0, min_us = 0;
  double rel_l2 = 0, max_abs = 0;
  uint64_t nonfinite = 0;
  std::string description;  // kernel or algorithm; or why it did not run
};

struct BenchResult {
  std::string op;     // "conv2d" or "gemm"
  std::string name;   // the workload's
  std::string shape;  // e.g. "n1 56x56x64 -> 128 k1x1 s1 p0 d1 g1"
  double flops = 0;
  int buffer_sets = 1;  // operand sets rotated through while timing
  Measurement tessel, library;

  // library time / tessel time (> 1: tessel is faster); 0 unless both ran.
  double ratio() const;
  // Achieved TFLOP/s of a measurement (0 if it did not run).
  double tflops(const Measurement& m) const;
};

class Bench {
 public:
  // Throws UserError "no CUDA device: ..." where there is none.
  explicit Bench(BenchOptions options = {});

  BenchResult run(const ConvWorkload& w, const ConvProvider& tessel);
  BenchResult run(const GemmWorkload& w, const GemmProvider& tessel);

  // The fp16 Tensor Core rate (dense, fp32 accumulation) that cuBLASLt reaches on an 8192^3
  // GEMM here, in TFLOP/s. Measured on the first call, then remembered for the process.
  static double measured_peak_tflops();

  const runtime::cuda::DeviceInfo& device() const { return device_; }
  const BenchOptions& options() const { return options_; }

 private:
  BenchOptions options_;
  runtime::cuda::DeviceInfo device_;
};

}  // namespace tessel::bench
