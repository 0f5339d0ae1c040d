// The op benchmark behind `tessel bench-op`: for each conv2d or GEMM workload it runs tessel's
// kernel and the library baselines (cuDNN, cuBLASLt) on the same seeded random fp16 operands,
// checks each against a naive fp32-accumulating reference computed on the device, and times
// each the same way.
//
// Method:
//  - inputs are uniform in [-1, 1), seeded, never zeros; outputs are poisoned with NaN before
//    the checked run, so an unwritten element fails the check;
//  - a result is correct when it has no NaN/Inf and its relative L2 error against the fp32
//    reference is within the tolerance (1e-2 for fp16 outputs);
//  - when one operand set fits in L2, runs rotate over enough sets to exceed twice the L2
//    size, so no side is timed on a warm cache;
//  - timing (Timing::kGraph, the default): a few runs, outside any capture (so modules load
//    and libraries set up lazily there), are timed with events, and the least of them is the
//    run's length T. Then L = clamp(ceil(200 µs / T), 1, 50) consecutive runs, rounded up to
//    a whole number of passes over the operand sets (so the rotation carries on seamlessly
//    from one replay to the next), are captured into a CUDA graph on a stream of their own.
//    The checked run is the graph's first replay (set 0's output, poisoned before it): what
//    is timed is what was checked. Then `warmup` replays, and `reps` replays each between
//    events; a replay's time / L is one per-launch sample, and median and min are over those
//    samples. Per-run event timing counts several µs of launch and event overhead, as much
//    as a small kernel; replays leave only the launch-to-launch latency inside a graph. Both
//    sides are captured the same way (cuDNN and cuBLASLt run on the capturing stream). Where
//    capture fails, the implementation is timed with events instead, its description says
//    why, and the table flags the workload;
//  - timing (Timing::kEvents): the checked run is a plain run on set 0, then `warmup` runs and
//    the median of `reps` runs, each between its own events (runtime/cuda time_with_events);
//  - "% of peak" is relative to the fp16 Tensor Core rate measured once per process on an
//    8192^3 cuBLASLt GEMM, not the datasheet.
//
// The library side of a workload is the faster of its candidates: cuDNN's best algorithm for
// a conv2d, and for a 1x1 stride-1 unpadded ungrouped conv (a plain GEMM, see as_gemm) also
// cuBLASLt on the same buffers; cuBLASLt for a GEMM. Each candidate is checked and timed on
// its own, and all of them are reported.
//
// tessel's side comes in as a callable so that this library does not depend on the code
// generator: the caller turns a workload into a TesselKernel.
//
// int8 (run_int8, `tessel bench-op --int8`): the same workload as int8 (int8_reference.h says
// what is computed: int32 accumulation, then scale, bias, ReLU and a rounded, saturated int8
// output for a conv; alpha and an int8 output for a GEMM), with inputs uniform in [-127, 127]
// drawn on the host, and set 0's output checked on the host against the CPU reference: correct
// when no int8 output is more than one step off (a rounding tie broken the other way). The
// library side is cuDNN's int8 graph or cuBLASLt's int8 matmul, each checked against the part
// of the epilogue it computed (baselines.h: Int8Output). Alongside, the fp16 library baseline
// of the workload runs as in run() (tessel's fp16 kernel does not), so that the report gives
// the int8/fp16 speedup the libraries reach; and tessel's int8 kernel where the caller has one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/baselines.h"
#include "bench/workloads.h"
#include "device/cuda_api.h"

namespace tessel::bench {

// Enqueues one run of an implementation on `operands` (addresses of fp16 device buffers
// shaped as the workload says) on `stream` (a CUstream; nullptr is the default stream).
using Enqueue = std::function<void(const Operands& operands, void* stream)>;

// tessel's implementation of one workload: an enqueue function and what it is (the kernel's
// schedule), or, with `enqueue` empty, why tessel has none ("ci=3 is not a multiple of 8").
struct TesselKernel {
  Enqueue enqueue;
  std::string description;
  // Called once per operand set before anything is checked, timed or captured, where tessel's
  // engine stores an operand in another form than the workload's (a narrow grouped conv's
  // widened weights); empty where it does not.
  std::function<void(const Operands& operands)> prepare;
};
using ConvProvider = std::function<TesselKernel(const ConvWorkload&)>;
using GemmProvider = std::function<TesselKernel(const GemmWorkload&)>;

enum class Timing { kGraph, kEvents };   // see the method above
std::string_view timing_name(Timing t);  // "graph", "events"

struct BenchOptions {
  int warmup = 10;          // untimed runs, or graph replays
  int reps = 100;           // timed runs, or graph replays
  double tolerance = 1e-2;  // relative L2 error allowed against the fp32 reference
  uint64_t seed = 1;
  Timing timing = Timing::kGraph;
  bool libraries = true;  // false: tessel alone (sweeps of its schedules)
};

// One implementation on one workload.
struct Measurement {
  bool ran = false;                  // false: unsupported or failed; `description` says which
  bool correct = false;              // no NaN/Inf, relative L2 error within tolerance
  double median_us = 0, min_us = 0;  // per launch
  double rel_l2 = 0, max_abs = 0;
  uint64_t nonfinite = 0;
  uint64_t mismatches = 0;  // int8 runs: outputs beyond the tolerance
  std::string output;       // int8 libraries: what was written and checked, "int8", "fp32", "int32"
  std::string variant;      // int8 libraries: the graph or matmul that ran
  std::string description;  // kernel or algorithm; or why it did not run
  Timing timing = Timing::kGraph;  // how it was timed (events where capture failed)
  int launches_per_graph = 0;      // with Timing::kGraph
  std::string search;              // a library's algorithm search results, for the JSON
};

// Graph timing's launches per replay for runs of `run_us` each, rotating over `buffer_sets`
// operand sets: clamp(ceil(200 / run_us), 1, 50), rounded up to a multiple of buffer_sets.
int launches_per_graph(double run_us, int buffer_sets);

// The library measurement a result reports, among the candidates: the fastest correct one;
// failing that, the fastest that ran; failing that, one that did not run, whose description
// lists every candidate's failure.
Measurement pick_library(const std::vector<Measurement>& candidates);

struct BenchResult {
  std::string op;     // "conv2d" or "gemm"
  std::string name;   // the workload's
  std::string shape;  // e.g. "n1 56x56x64 -> 128 k1x1 s1 p0 d1 g1"
  double flops = 0;
  int buffer_sets = 1;  // operand sets rotated through while timing
  Measurement tessel;
  Measurement library;  // pick_library(library_candidates)
  // cuDNN, or cuBLASLt, and for a conv that is a GEMM also cuBLASLt: each checked and timed.
  std::vector<Measurement> library_candidates;

  // library time / tessel time (> 1: tessel is faster); 0 unless both ran.
  double ratio() const;
  // Achieved TFLOP/s of a measurement (0 if it did not run).
  double tflops(const Measurement& m) const;
};

// One workload in int8 (see above). Times are comparable across the three sides: the same
// method, the same number of operand sets per byte of L2.
struct Int8Result {
  std::string op, name, shape;
  double flops = 0;
  int buffer_sets = 1;  // int8 operand sets rotated through while timing
  Measurement tessel;   // tessel's int8 kernel, or why there is none
  // The int8 library's pick (pick_library among the candidates that wrote int8, if any did):
  // cuDNN int8 or cuBLASLt int8, and for a 1x1 stride-1 conv also cuBLASLt int8 as a GEMM
  // with the same per-channel epilogue; or why none ran (a refusal). Its `output` says what
  // it wrote and was checked as.
  Measurement library;
  std::vector<Measurement> library_candidates;
  Measurement fp16_library;  // the fp16 baseline's pick, as BenchResult::library
  std::vector<Measurement> fp16_candidates;

  // fp16 library time / int8 library time: the speedup int8 gives the library (0 unless both
  // ran and were correct, and the int8 library wrote int8, not a fallback's wider output).
  double int8_speedup() const;
  // int8 library time / tessel int8 time (> 1: tessel faster); 0 unless both ran.
  double ratio() const;
  double tflops(const Measurement& m) const;  // TOPS for the int8 sides
};

class Bench {
 public:
  // Throws UserError "no CUDA device: ..." where there is none.
  explicit Bench(BenchOptions options = {});

  BenchResult run(const ConvWorkload& w, const ConvProvider& tessel);
  BenchResult run(const GemmWorkload& w, const GemmProvider& tessel);

  // The workload in int8 (see above). `tessel_int8` gives tessel's int8 kernel; its operands
  // are int8, with the epilogue constants in Operands::scale and Operands::bias.
  Int8Result run_int8(const ConvWorkload& w, const ConvProvider& tessel_int8);
  Int8Result run_int8(const GemmWorkload& w, const GemmProvider& tessel_int8);

  // The fp16 Tensor Core rate (dense, fp32 accumulation) that cuBLASLt reaches on an 8192^3
  // GEMM here, in TFLOP/s. Measured on the first call, then remembered for the process.
  static double measured_peak_tflops();

  const device::DeviceInfo& device() const { return device_; }
  const BenchOptions& options() const { return options_; }

 private:
  BenchOptions options_;
  device::DeviceInfo device_;
};

}  // namespace tessel::bench
