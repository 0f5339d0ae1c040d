// The measuring machinery that the fp16 and int8 benchmarks share (the method is in bench.h):
// operand sets rotated past L2, the checked first run on poisoned outputs, and graph or event
// timing. Internal to src/bench/.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bench/bench.h"

namespace tessel::bench {

// `count` copies of a problem's operands a, b, c, each in its own 256-byte aligned slice of
// three device buffers, plus the epilogue constants (scale, bias) that every set shares.
class OperandSets {
 public:
  OperandSets(const size_t bytes[3], int count);
  int count() const { return count_; }
  Operands operator[](int s) const;
  // Random fp16 inputs in [-1, 1), a different draw for every set and operand.
  void fill_f16(uint64_t seed);
  // Random int8 inputs in [-127, 127], drawn on the host; set 0's a and b are kept in `a0`
  // and `b0` for the CPU reference.
  void fill_i8(uint64_t seed, std::vector<int8_t>* a0, std::vector<int8_t>* b0);
  // Uploads the epilogue constants (fp32); an empty one's address is 0.
  void set_constants(const std::vector<float>& scale, const std::vector<float>& bias);
  // Every byte of every output set = `byte`: 0xff is a NaN in fp16 and fp32, 0x80 an int8 -128
  // and an int32 far outside any accumulator here, so an output left unwritten fails its check.
  void poison_outputs(uint8_t byte) { buffers_[2].fill_bytes(byte); }

 private:
  int count_;
  device::DeviceBuffer buffers_[3];
  size_t stride_[3] = {0, 0, 0};
  device::DeviceBuffer scale_, bias_;
};

// tessel's kernel for a problem, built by `make` and prepared on every operand set, or nothing
// and `*why` (not supported, failed to build or to prepare): the one way both benchmarks get it.
std::optional<TesselKernel> ready_tessel(const std::function<TesselKernel()>& make,
                                         const OperandSets& sets, std::string* why);

// Enough sets that, cycling through them, a set's data has left L2 (at least `l2` bytes of
// other operands touched) before it comes round again.
int buffer_sets(size_t set_bytes, size_t l2);

// What a measurement needs besides the implementation: the operands, the byte the outputs are
// poisoned with before the checked run, and the check of set 0's output (after all work queued
// so far), which sets correct, rel_l2, max_abs, nonfinite and mismatches.
struct Bed {
  OperandSets& sets;
  uint8_t poison;
  std::function<void(Measurement&)> check;
};

// Checks and times one implementation; `what` describes it. Any tessel::Error (a library
// call, the driver, a kernel that fails to build) is reported in the measurement rather than
// ending the run.
Measurement measure(const Enqueue& enqueue, const Bed& bed, const BenchOptions& o,
                    const std::string& what);

}  // namespace tessel::bench
