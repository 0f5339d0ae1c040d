// The benchmark driver: operands, reference, correctness check and timing of each side.
#include "bench/bench.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "bench/reference.h"

namespace tessel::bench {
namespace {

namespace rt = runtime::cuda;

// More sets than this would only matter for operands of a few hundred KiB, which 256 sets
// already spread over far more than L2.
constexpr int kMaxBufferSets = 256;
constexpr size_t kSetAlignment = 256;  // every operand starts 256-byte aligned, like cudaMalloc
constexpr size_t kHalf = 2;

// One workload, whatever its op: operand sizes, its reference, its library baseline.
struct Problem {
  std::string op, name, shape;
  double flops = 0;
  size_t elems[3] = {0, 0, 0};  // fp16 elements of a, b, c
  std::function<void(const Operands&, uint64_t ref_f32)> reference;
  // Sets up the baseline (it may search algorithms on, and overwrite, the operands given).
  std::function<std::pair<Enqueue, std::string>(const Operands&)> library;
};

// `count` copies of a problem's operands, each in its own slice of three device buffers.
class OperandSets {
 public:
  OperandSets(const size_t elems[3], int count) : count_(count) {
    for (int i = 0; i < 3; ++i) {
      stride_[i] = (elems[i] * kHalf + kSetAlignment - 1) / kSetAlignment * kSetAlignment;
      buffers_[i] = rt::DeviceBuffer(stride_[i] * static_cast<size_t>(count));
    }
  }
  int count() const { return count_; }
  Operands operator[](int s) const {
    const auto at = [&](int i) { return buffers_[i].ptr() + stride_[i] * static_cast<size_t>(s); };
    return {at(0), at(1), at(2)};
  }
  // Random inputs, a different draw for every set and operand; outputs poisoned.
  void fill(uint64_t seed) {
    for (int s = 0; s < count_; ++s) {
      for (int i = 0; i < 2; ++i) {
        const uint64_t draw = (seed << 32) + 2 * static_cast<uint64_t>(s) + i;
        fill_uniform_f16(buffers_[i].ptr() + stride_[i] * s, stride_[i] / kHalf, draw, nullptr);
      }
    }
    poison_outputs();
  }
  // 0xffff is a NaN in fp16: an output element that a kernel fails to write stays NaN.
  void poison_outputs() { buffers_[2].fill_bytes(0xff); }

 private:
  int count_;
  rt::DeviceBuffer buffers_[3];
  size_t stride_[3] = {0, 0, 0};
};

// Enough sets that, cycling through them, a set's data has left L2 (at least `l2` bytes of
// other operands touched) before it comes round again.
int buffer_sets(size_t set_bytes, size_t l2) {
  if (set_bytes >= l2) return 1;
  const size_t sets = (2 * l2 + set_bytes - 1) / set_bytes;
  return static_cast<int>(std::clamp<size_t>(sets, 2, kMaxBufferSets));
}

// Checks and times one implementation. Any tessel::Error (a library call, the driver, a
// kernel that fails to build) is reported in the measurement rather than ending the run.
Measurement measure(const Enqueue& enqueue, const OperandSets& sets, uint64_t ref, size_t out_elems,
                    const BenchOptions& o) {
  Measurement m;
  try {
    enqueue(sets[0], nullptr);
    const Comparison c = compare_f16(sets[0].c, ref, out_elems);
    m.rel_l2 = c.rel_l2;
    m.max_abs = c.max_abs;
    m.nonfinite = c.nonfinite;
    m.correct = c.nonfinite == 0 && c.rel_l2 <= o.tolerance;

    int next = 0;
    const std::vector<float> ms = rt::time_with_events(
        [&](void* stream) { enqueue(sets[next++ % sets.count()], stream); }, o.warmup, o.reps);
    m.median_us = 1e3 * ms[ms.size() / 2];
    m.min_us = 1e3 * ms.front();
    m.ran = true;
  } catch (const Error& e) {
    m = Measurement{};
    m.description = std::string("failed: ") + e.what();
  }
  return m;
}

BenchResult run_problem(const Problem& p, const std::function<TesselKernel()>& make_tessel,
                        const BenchOptions& o, size_t l2_bytes) {
  BenchResult r;
  r.op = p.op;
  r.name = p.name;
  r.shape = p.shape;
  r.flops = p.flops;
  r.buffer_sets = buffer_sets((p.elems[0] + p.elems[1] + p.elems[2]) * kHalf, l2_bytes);

  OperandSets sets(p.elems, r.buffer_sets);
  sets.fill(o.seed);
  rt::DeviceBuffer ref(p.elems[2] * sizeof(float));
  p.reference(sets[0], ref.ptr());

  try {
    auto [enqueue, algorithm] = p.library(sets[0]);
    sets.poison_outputs();  // the algorithm search wrote the output
    r.library = measure(enqueue, sets, ref.ptr(), p.elems[2], o);
    if (r.library.ran) r.library.description = algorithm;
  } catch (const Error& e) {  // no algorithm for the shape, or out of memory for its search
    r.library.description = e.what();
  }

  TesselKernel tessel;
  try {
    tessel = make_tessel();
  } catch (const Error& e) {
    tessel.description = std::string("failed to build: ") + e.what();
  }
  if (!tessel.enqueue) {
    r.tessel.description = tessel.description.empty() ? "not supported" : tessel.description;
    return r;
  }
  sets.poison_outputs();
  r.tessel = measure(tessel.enqueue, sets, ref.ptr(), p.elems[2], o);
  if (r.tessel.ran) r.tessel.description = tessel.description;
  return r;
}

}  // namespace

double BenchResult::ratio() const {
  if (!tessel.ran || !library.ran || tessel.median_us <= 0) return 0;
  return library.median_us / tessel.median_us;
}

double BenchResult::tflops(const Measurement& m) const {
  if (!m.ran || m.median_us <= 0) return 0;
  return flops / (m.median_us * 1e-6) / 1e12;
}

Bench::Bench(BenchOptions options) : options_(options), device_(rt::device_info(0)) {
  TESSEL_USER_CHECK(options_.warmup >= 0 && options_.reps >= 1)
      << "benchmark needs warmup >= 0 and reps >= 1, got " << options_.warmup << " and "
      << options_.reps;
}

BenchResult Bench::run(const ConvWorkload& w, const ConvProvider& tessel) {
  Problem p;
  p.op = "conv2d";
  p.name = w.name;
  p.shape = w.shape();
  p.flops = w.flops();
  p.elems[0] = w.x_elems();
  p.elems[1] = w.w_elems();
  p.elems[2] = w.y_elems();
  p.reference = [&](const Operands& o, uint64_t ref) {
    conv2d_reference(w, o.a, o.b, ref, nullptr);
  };
  p.library = [&](const Operands& o) {
    auto conv = std::make_shared<CudnnConv>(w, o);
    Enqueue enqueue = [conv](const Operands& ops, void* stream) { conv->enqueue(ops, stream); };
    return std::make_pair(enqueue, conv->algorithm());
  };
  const auto make_tessel = [&] { return tessel(w); };
  return run_problem(p, make_tessel, options_, device_.l2_bytes);
}

BenchResult Bench::run(const GemmWorkload& w, const GemmProvider& tessel) {
  Problem p;
  p.op = "gemm";
  p.name = w.name;
  p.shape = w.shape();
  p.flops = w.flops();
  p.elems[0] = w.a_elems();
  p.elems[1] = w.b_elems();
  p.elems[2] = w.c_elems();
  p.reference = [&](const Operands& o, uint64_t ref) { gemm_reference(w, o.a, o.b, ref, nullptr); };
  p.library = [&](const Operands&) {
    auto gemm = std::make_shared<CublasLtGemm>(w);
    Enqueue enqueue = [gemm](const Operands& ops, void* stream) { gemm->enqueue(ops, stream); };
    return std::make_pair(enqueue, gemm->algorithm());
  };
  const auto make_tessel = [&] { return tessel(w); };
  return run_problem(p, make_tessel, options_, device_.l2_bytes);
}

double Bench::measured_peak_tflops() {
  static const double peak = [] {
    GemmWorkload g;
    g.name = "fp16_peak_8192";
    g.m = g.n = g.k = 8192;
    const size_t elems[3] = {g.a_elems(), g.b_elems(), g.c_elems()};
    OperandSets sets(elems, 1);  // 384 MiB: far beyond L2 already
    sets.fill(/*seed=*/7);
    CublasLtGemm gemm(g);
    const std::vector<float> ms = rt::time_with_events(
        [&](void* stream) { gemm.enqueue(sets[0], stream); }, /*warmup=*/5, /*reps=*/20);
    return g.flops() / (ms[ms.size() / 2] * 1e-3) / 1e12;
  }();
  return peak;
}

}  // namespace tessel::bench
