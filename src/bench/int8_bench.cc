// The int8 benchmark (bench.h: run_int8): the int8 library baseline and tessel's int8 kernel
// on int8 operands, checked on the host against the CPU reference, and the fp16 library
// baseline of the same workload alongside.
#include <optional>

#include "bench/bench.h"
#include "bench/int8_reference.h"
#include "bench/measure.h"

namespace tessel::bench {
namespace {

namespace rt = device;

// An int8 library set up for one workload.
struct Int8Setup {
  Enqueue enqueue;
  Int8Output output = Int8Output::kInt8;
  std::string variant, algorithm, search;
};

// One int8 library candidate of a workload.
struct Int8Library {
  std::string name;                    // "cuDNN int8", "cuBLASLt int8 as GEMM (1x1)"
  std::optional<std::string> refusal;  // why it does not take the workload
  std::function<Int8Setup(const Operands&)> setup;
};

// One workload in int8, whatever its op.
struct Int8Problem {
  std::string op, name, shape;
  double flops = 0;
  size_t a_bytes = 0, b_bytes = 0, out_elems = 0;
  int64_t channels = 1;  // the output's innermost dimension, which the epilogue is per
  Int8Epilogue epilogue;
  std::function<std::vector<int32_t>(const int8_t* a, const int8_t* b)> reference;
  std::vector<Int8Library> libraries;
};

// Set 0's output checked against the CPU reference, in whichever type it was written.
class Expected {
 public:
  Expected(std::vector<int32_t> acc, const Int8Problem& p)
      : acc_(std::move(acc)),
        int8_(apply_int8_epilogue(acc_, p.channels, p.epilogue)),
        float_(apply_float_epilogue(acc_, p.channels, p.epilogue)) {}

  void check(Measurement& m, Int8Output out, const OperandSets& sets) const {
    const uint64_t c = sets[0].c;
    Int8Comparison cmp;
    switch (out) {
      case Int8Output::kInt8: {
        std::vector<int8_t> got(int8_.size());
        rt::copy_to_host(got.data(), c, got.size());
        cmp = compare_int8(got.data(), int8_);
        break;
      }
      case Int8Output::kFloat: {
        std::vector<float> got(float_.size());
        rt::copy_to_host(got.data(), c, got.size() * sizeof(float));
        cmp = compare_float(got.data(), float_);
        break;
      }
      case Int8Output::kInt32: {
        std::vector<int32_t> got(acc_.size());
        rt::copy_to_host(got.data(), c, got.size() * sizeof(int32_t));
        cmp = compare_int32(got.data(), acc_);
        break;
      }
    }
    m.rel_l2 = cmp.rel_l2;
    m.max_abs = cmp.max_abs;
    m.nonfinite = cmp.nonfinite;
    m.mismatches = cmp.mismatches;
    m.correct = cmp.ok();
  }

 private:
  std::vector<int32_t> acc_;
  std::vector<int8_t> int8_;
  std::vector<float> float_;
};

Int8Result run_int8_problem(const Int8Problem& p, BenchResult fp16,
                            const std::function<TesselKernel()>& make_tessel, const BenchOptions& o,
                            size_t l2_bytes) {
  Int8Result r;
  r.op = p.op;
  r.name = p.name;
  r.shape = p.shape;
  r.flops = p.flops;
  r.fp16_library = std::move(fp16.library);
  r.fp16_candidates = std::move(fp16.library_candidates);
  r.buffer_sets = buffer_sets(p.a_bytes + p.b_bytes + p.out_elems, l2_bytes);

  // Outputs get room for 4 bytes each: a library's fallback writes fp32 or int32.
  const size_t bytes[3] = {p.a_bytes, p.b_bytes, p.out_elems * 4};
  OperandSets sets(bytes, r.buffer_sets);
  std::vector<int8_t> a0, b0;
  sets.fill_i8(o.seed, &a0, &b0);
  sets.set_constants(p.epilogue.scale, p.epilogue.bias);
  const Expected expected(p.reference(a0.data(), b0.data()), p);
  const auto bed = [&](Int8Output out) {
    // 0x80: int8 -128 (below anything ReLU leaves) and an int32 beyond any accumulator here;
    // 0xff: a NaN in fp32.
    return Bed{sets, static_cast<uint8_t>(out == Int8Output::kFloat ? 0xff : 0x80),
               [&expected, &sets, out](Measurement& m) { expected.check(m, out, sets); }};
  };

  std::vector<Measurement> wrote_int8;
  for (const Int8Library& lib : p.libraries) {
    Measurement m;
    if (lib.refusal) {
      m.description = lib.name + ": refused: " + *lib.refusal;
    } else {
      try {
        const Int8Setup setup = lib.setup(sets[0]);
        m = measure(setup.enqueue, bed(setup.output), o, lib.name + ": " + setup.algorithm);
        m.search = setup.search;
        m.output = int8_output_name(setup.output);
        m.variant = setup.variant;
      } catch (const Error& e) {  // nothing built for the shape, or out of memory for its search
        m.description = lib.name + ": " + e.what();
      }
    }
    if (m.ran && m.output == "int8") wrote_int8.push_back(m);
    r.library_candidates.push_back(std::move(m));
  }
  // A fallback's wider output computed less: it is the pick only where nothing wrote int8.
  r.library = pick_library(wrote_int8.empty() ? r.library_candidates : wrote_int8);

  const std::optional<TesselKernel> ready = ready_tessel(make_tessel, sets, &r.tessel.description);
  if (!ready) return r;
  const TesselKernel& tessel = *ready;
  r.tessel = measure(tessel.enqueue, bed(Int8Output::kInt8), o, tessel.description);
  return r;
}

TesselKernel fp16_not_run() {
  return {nullptr, "not run (--int8 measures the fp16 library only)", nullptr};
}

}  // namespace

double Int8Result::int8_speedup() const {
  if (!library.ran || !library.correct || library.output != "int8" || !fp16_library.ran ||
      !fp16_library.correct || library.median_us <= 0)
    return 0;
  return fp16_library.median_us / library.median_us;
}

double Int8Result::ratio() const {
  if (!tessel.ran || !library.ran || tessel.median_us <= 0) return 0;
  return library.median_us / tessel.median_us;
}

double Int8Result::tflops(const Measurement& m) const {
  if (!m.ran || m.median_us <= 0) return 0;
  return flops / (m.median_us * 1e-6) / 1e12;
}

Int8Result Bench::run_int8(const ConvWorkload& w, const ConvProvider& tessel_int8) {
  BenchResult fp16 = run(w, [](const ConvWorkload&) { return fp16_not_run(); });
  Int8Problem p;
  p.op = "conv2d";
  p.name = w.name;
  p.shape = w.shape();
  p.flops = w.flops();
  p.a_bytes = w.x_elems();
  p.b_bytes = w.w_elems();
  p.out_elems = w.y_elems();
  p.channels = w.co;
  p.epilogue = random_conv_epilogue(w, options_.seed);
  p.reference = [&w](const int8_t* x, const int8_t* wt) { return conv2d_int8_reference(w, x, wt); };
  p.libraries.push_back({"cuDNN int8", cudnn_int8_refusal(w), [&w](const Operands& ops) {
                           auto conv = std::make_shared<CudnnInt8Conv>(w, ops);
                           return Int8Setup{
                               [conv](const Operands& o, void* s) { conv->enqueue(o, s); },
                               conv->output(), conv->variant(), conv->algorithm(), conv->search()};
                         }});
  if (const std::optional<GemmWorkload> g = as_gemm(w)) {
    // x, w and y as they lie are A (n*h*w, ci), B (co, ci) and C (n*h*w, co): the int8 GEMM's
    // own layout, with the conv's scale and bias per column.
    p.libraries.push_back(
        {"cuBLASLt int8 as GEMM (1x1)", cublaslt_int8_refusal(*g), [g = *g](const Operands&) {
           auto gemm = std::make_shared<CublasLtInt8Gemm>(g, CublasLtInt8Gemm::PerChannel{});
           return Int8Setup{[gemm](const Operands& o, void* s) { gemm->enqueue(o, s); },
                            gemm->output(), gemm->variant(), gemm->algorithm(), ""};
         }});
  }
  return run_int8_problem(
      p, std::move(fp16), [&] { return tessel_int8(w); }, options_, device_.l2_bytes);
}

Int8Result Bench::run_int8(const GemmWorkload& w, const GemmProvider& tessel_int8) {
  BenchResult fp16 = run(w, [](const GemmWorkload&) { return fp16_not_run(); });
  Int8Problem p;
  p.op = "gemm";
  p.name = w.name;
  p.shape = w.shape();
  p.flops = w.flops();
  p.a_bytes = w.a_elems();
  p.b_bytes = w.b_elems();
  p.out_elems = w.c_elems();
  p.channels = w.n;
  p.epilogue = gemm_epilogue(w);
  p.reference = [&w](const int8_t* a, const int8_t* b) { return gemm_int8_reference(w, a, b); };
  const float alpha = p.epilogue.scale[0];
  p.libraries.push_back({"cuBLASLt int8", cublaslt_int8_refusal(w), [&w, alpha](const Operands&) {
                           auto gemm = std::make_shared<CublasLtInt8Gemm>(w, alpha);
                           return Int8Setup{
                               [gemm](const Operands& o, void* s) { gemm->enqueue(o, s); },
                               gemm->output(), gemm->variant(), gemm->algorithm(), ""};
                         }});
  return run_int8_problem(
      p, std::move(fp16), [&] { return tessel_int8(w); }, options_, device_.l2_bytes);
}

}  // namespace tessel::bench
