// The benchmark's device side: the reference kernels against a float64 CPU computation, the
// cuDNN and cuBLASLt baselines (fp16 and int8) against the references (which checks their
// layout mapping), and the driver end to end. Skipped, with the reason, where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <vector>

#include "bench/baselines.h"
#include "bench/bench.h"
#include "bench/int8_reference.h"
#include "bench/reference.h"
#include "bench/report.h"
#include "core/half.h"
#include "device/cuda_api.h"

namespace tessel::bench {
namespace {

namespace rt = device;

class BenchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!rt::cuda_available(&reason)) GTEST_SKIP() << "no CUDA device: " << reason;
  }
};

// A device buffer of `n` random fp16 values and its host copy as floats.
struct Input {
  rt::DeviceBuffer buf;
  std::vector<float> host;
  Input(size_t n, uint64_t seed) : buf(n * 2), host(n) {
    fill_uniform_f16(buf.ptr(), n, seed, nullptr);
    std::vector<uint16_t> bits(n);
    buf.download(bits.data(), n * 2);
    for (size_t i = 0; i < n; ++i) host[i] = half_to_float(bits[i]);
  }
};

std::vector<float> download_f32(const rt::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}

// Direct float64 conv2d, NHWC / (co,kh,kw,ci/g), written independently of the kernel.
std::vector<double> cpu_conv(const ConvWorkload& c, const std::vector<float>& x,
                             const std::vector<float>& w) {
  const int64_t cig = c.ci / c.groups, cog = c.co / c.groups;
  std::vector<double> y(c.y_elems(), 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t oh = 0; oh < c.oh(); ++oh)
      for (int64_t ow = 0; ow < c.ow(); ++ow)
        for (int64_t co = 0; co < c.co; ++co) {
          double acc = 0;
          for (int64_t r = 0; r < c.kh; ++r)
            for (int64_t s = 0; s < c.kw; ++s)
              for (int64_t ci = 0; ci < cig; ++ci) {
                const int64_t ih = oh * c.stride - c.pad + r * c.dilation;
                const int64_t iw = ow * c.stride - c.pad + s * c.dilation;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const int64_t g = co / cog;
                acc += double(x[((n * c.h + ih) * c.w + iw) * c.ci + g * cig + ci]) *
                       w[((co * c.kh + r) * c.kw + s) * cig + ci];
              }
          y[((n * c.oh() + oh) * c.ow() + ow) * c.co + co] = acc;
        }
  return y;
}

std::vector<double> cpu_gemm(const GemmWorkload& g, const std::vector<float>& a,
                             const std::vector<float>& b) {
  std::vector<double> c(g.c_elems(), 0.0);
  for (int64_t m = 0; m < g.m; ++m)
    for (int64_t n = 0; n < g.n; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < g.k; ++k) {
        const float av = g.layout == GemmLayout::kTN ? a[k * g.m + m] : a[m * g.k + k];
        const float bv = g.layout == GemmLayout::kNT ? b[n * g.k + k] : b[k * g.n + n];
        acc += double(av) * bv;
      }
      c[m * g.n + n] = acc;
    }
  return c;
}

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0, scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / scale);
  return worst;
}

ConvWorkload conv(int64_t n, int64_t h, int64_t w, int64_t ci, int64_t co, int64_t k,
                  int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  ConvWorkload c;
  c.name = "test";
  c.n = n, c.h = h, c.w = w, c.ci = ci, c.co = co, c.kh = k, c.kw = k;
  c.stride = stride, c.pad = pad, c.dilation = dilation, c.groups = groups;
  return c;
}

GemmWorkload gemm(int64_t m, int64_t n, int64_t k, GemmLayout layout) {
  GemmWorkload g;
  g.name = "test";
  g.m = m, g.n = n, g.k = k, g.layout = layout;
  return g;
}

TEST_F(BenchGpu, FillIsSeededUniformAndNonZero) {
  Input a(1 << 16, 1), b(1 << 16, 1), c(1 << 16, 2);
  EXPECT_EQ(a.host, b.host);
  EXPECT_NE(a.host, c.host);
  double sum = 0;
  int zeros = 0;
  for (float v : a.host) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LE(v, 1.0f);  // 1 - 2^-24 rounds to 1 in fp16
    sum += v;
    zeros += v == 0;
  }
  EXPECT_NEAR(sum / a.host.size(), 0.0, 0.01);  // the mean of U(-1, 1); sd 0.0023 here
  EXPECT_LT(zeros, 10);
}

TEST_F(BenchGpu, ConvReferenceMatchesFloat64) {
  for (const ConvWorkload& c : {
           conv(2, 7, 6, 4, 6, 3, 2, 1, 2, 2),    // groups, dilation
           conv(1, 9, 9, 8, 5, 3, 1, 1, 1, 1),    // odd co
           conv(3, 5, 5, 16, 16, 1, 1, 0, 1, 16)  // depthwise 1x1
       }) {
    Input x(c.x_elems(), 3), w(c.w_elems(), 4);
    rt::DeviceBuffer y(c.y_elems() * sizeof(float));
    conv2d_reference(c, x.buf.ptr(), w.buf.ptr(), y.ptr(), nullptr);
    EXPECT_LT(max_rel_diff(download_f32(y, c.y_elems()), cpu_conv(c, x.host, w.host)), 1e-6)
        << c.shape();
  }
}

TEST_F(BenchGpu, GemmReferenceMatchesFloat64InEveryLayout) {
  for (GemmLayout l : {GemmLayout::kNN, GemmLayout::kNT, GemmLayout::kTN}) {
    const GemmWorkload g = gemm(5, 7, 33, l);
    Input a(g.a_elems(), 5), b(g.b_elems(), 6);
    rt::DeviceBuffer c(g.c_elems() * sizeof(float));
    gemm_reference(g, a.buf.ptr(), b.buf.ptr(), c.ptr(), nullptr);
    EXPECT_LT(max_rel_diff(download_f32(c, g.c_elems()), cpu_gemm(g, a.host, b.host)), 1e-6)
        << layout_name(l);
  }
}

TEST_F(BenchGpu, CompareMeasuresRelativeL2AndNaNs) {
  // ref = (3, 4, 0, 0): ||ref|| = 5. out = (3, 4.5, 0, NaN): error 0.5 on the finite part.
  const std::vector<float> ref = {3, 4, 0, 0};
  const std::vector<uint16_t> out = {float_to_half(3), float_to_half(4.5f), float_to_half(0),
                                     0xffff};
  rt::DeviceBuffer r(16), o(8);
  r.upload(ref.data(), 16);
  o.upload(out.data(), 8);
  Comparison c = compare_f16(o.ptr(), r.ptr(), 4);
  EXPECT_DOUBLE_EQ(c.rel_l2, 0.1);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.nonfinite, 1u);
}

TEST_F(BenchGpu, CudnnMatchesTheReference) {
  for (const ConvWorkload& c :
       {conv(2, 14, 14, 64, 32, 3, 1, 1, 1, 1), conv(1, 15, 17, 32, 64, 3, 2, 1, 1, 1),
        conv(2, 8, 8, 32, 32, 3, 1, 2, 2, 4), conv(1, 32, 32, 3, 16, 7, 2, 3, 1, 1)}) {
    Input x(c.x_elems(), 7), w(c.w_elems(), 8);
    rt::DeviceBuffer y(c.y_elems() * 2), ref(c.y_elems() * sizeof(float));
    conv2d_reference(c, x.buf.ptr(), w.buf.ptr(), ref.ptr(), nullptr);
    const Operands ops{x.buf.ptr(), w.buf.ptr(), y.ptr()};
    CudnnConv cudnn(c, ops);
    y.fill_bytes(0xff);
    cudnn.enqueue(ops, nullptr);
    Comparison cmp = compare_f16(y.ptr(), ref.ptr(), c.y_elems());
    EXPECT_EQ(cmp.nonfinite, 0u) << c.shape();
    EXPECT_LT(cmp.rel_l2, 2e-3) << c.shape() << " " << cudnn.algorithm();
  }
}

TEST_F(BenchGpu, CublasLtMatchesTheReferenceInEveryLayout) {
  for (GemmLayout l : {GemmLayout::kNN, GemmLayout::kNT, GemmLayout::kTN}) {
    // Non-square and distinct m, n, k, so that any transposition mix-up changes the result
    // or the shapes.
    const GemmWorkload g = gemm(72, 40, 136, l);
    Input a(g.a_elems(), 9), b(g.b_elems(), 10);
    rt::DeviceBuffer c(g.c_elems() * 2), ref(g.c_elems() * sizeof(float));
    gemm_reference(g, a.buf.ptr(), b.buf.ptr(), ref.ptr(), nullptr);
    CublasLtGemm lt(g);
    c.fill_bytes(0xff);
    lt.enqueue({a.buf.ptr(), b.buf.ptr(), c.ptr()}, nullptr);
    Comparison cmp = compare_f16(c.ptr(), ref.ptr(), g.c_elems());
    EXPECT_EQ(cmp.nonfinite, 0u) << layout_name(l);
    EXPECT_LT(cmp.rel_l2, 2e-3) << layout_name(l) << " " << lt.algorithm();
  }
}

TEST_F(BenchGpu, DriverChecksAndTimesBothSides) {
  BenchOptions o;
  o.warmup = 2;
  o.reps = 5;
  Bench bench(o);
  const GemmWorkload g = gemm(256, 128, 64, GemmLayout::kNT);

  // cuBLASLt standing in for tessel: correct, and about as fast as itself.
  BenchResult same = bench.run(g, [](const GemmWorkload& w) {
    auto lt = std::make_shared<CublasLtGemm>(w);
    return TesselKernel{[lt](const Operands& ops, void* s) { lt->enqueue(ops, s); }, "lt", {}};
  });
  EXPECT_TRUE(same.library.ran) << same.library.description;
  EXPECT_TRUE(same.library.correct);
  EXPECT_EQ(same.library.description.rfind("cuBLASLt: algo ", 0), 0u) << same.library.description;
  ASSERT_EQ(same.library_candidates.size(), 1u);
  EXPECT_EQ(same.library_candidates[0].description, same.library.description);
  EXPECT_TRUE(same.tessel.ran) << same.tessel.description;
  EXPECT_TRUE(same.tessel.correct);
  EXPECT_EQ(same.tessel.description, "lt");
  EXPECT_GT(same.ratio(), 0.5);
  EXPECT_LT(same.ratio(), 2.0);
  // 256*128*64*2 B of operands and outputs fit L2 many times: rotation is on.
  EXPECT_GE(same.buffer_sets, 2);
  // Both sides timed by graph replays of whole passes over the operand sets.
  for (const Measurement* m : {&same.tessel, &same.library}) {
    EXPECT_EQ(m->timing, Timing::kGraph) << m->description;
    EXPECT_GE(m->launches_per_graph, same.buffer_sets);
    EXPECT_EQ(m->launches_per_graph % same.buffer_sets, 0);
  }

  // A kernel that writes nothing leaves the NaN poison: every output is flagged.
  BenchResult lazy = bench.run(g, [](const GemmWorkload&) {
    return TesselKernel{[](const Operands&, void*) {}, "no-op", {}};
  });
  EXPECT_TRUE(lazy.tessel.ran);
  EXPECT_FALSE(lazy.tessel.correct);
  EXPECT_EQ(lazy.tessel.nonfinite, g.c_elems());

  BenchResult unsupported = bench.run(g, [](const GemmWorkload&) {
    return TesselKernel{nullptr, "k=64 too small", {}};
  });
  EXPECT_FALSE(unsupported.tessel.ran);
  EXPECT_EQ(unsupported.tessel.description, "k=64 too small");
  EXPECT_TRUE(unsupported.library.ran);

  BenchResult throws =
      bench.run(g, [](const GemmWorkload&) -> TesselKernel { throw InternalError("codegen bug"); });
  EXPECT_FALSE(throws.tessel.ran);
  EXPECT_EQ(throws.tessel.description, "failed to build: codegen bug");

  // The JSON carries the library's candidates and how each side was timed.
  const nlohmann::json j = to_json(bench, {same}, 0);
  EXPECT_EQ(j["options"]["timing"], "graph");
  const nlohmann::json& w = j["workloads"][0];
  EXPECT_EQ(w["library_candidates"].size(), 1u);
  EXPECT_EQ(w["library"]["timing"], "graph");
  EXPECT_EQ(w["tessel"]["launches_per_graph"], same.tessel.launches_per_graph);

  const double peak = Bench::measured_peak_tflops();
  EXPECT_GT(peak, 50.0);    // any Tensor Core GPU tessel targets
  EXPECT_LT(peak, 5000.0);  // and no GPU yet
  EXPECT_EQ(Bench::measured_peak_tflops(), peak) << "measured once per process";
}

TEST_F(BenchGpu, EventTimingIsStillAvailable) {
  BenchOptions o;
  o.warmup = 2;
  o.reps = 5;
  o.timing = Timing::kEvents;
  Bench bench(o);
  const GemmWorkload g = gemm(128, 64, 256, GemmLayout::kNN);
  BenchResult r = bench.run(g, [](const GemmWorkload& w) {
    auto lt = std::make_shared<CublasLtGemm>(w);
    return TesselKernel{[lt](const Operands& ops, void* s) { lt->enqueue(ops, s); }, "lt", {}};
  });
  for (const Measurement* m : {&r.tessel, &r.library}) {
    EXPECT_TRUE(m->ran && m->correct) << m->description;
    EXPECT_EQ(m->timing, Timing::kEvents);
    EXPECT_EQ(m->launches_per_graph, 0);
    EXPECT_GT(m->median_us, 0.0);
  }
}

// cuDNN is timed through graphs: cudnnConvolutionForward must be captured on the stream set
// on its handle, and compute the conv only when replayed.
TEST_F(BenchGpu, CudnnCallsAreCapturedAndReplayed) {
  const ConvWorkload c = conv(2, 14, 14, 64, 32, 3, 1, 1, 1, 1);
  Input x(c.x_elems(), 13), w(c.w_elems(), 14);
  rt::DeviceBuffer y(c.y_elems() * 2), ref(c.y_elems() * sizeof(float));
  conv2d_reference(c, x.buf.ptr(), w.buf.ptr(), ref.ptr(), nullptr);
  const Operands ops{x.buf.ptr(), w.buf.ptr(), y.ptr()};
  CudnnConv cudnn(c, ops);
  EXPECT_NE(cudnn.search().find("Find with"), std::string::npos) << cudnn.search();
  cudnn.enqueue(ops, nullptr);  // first run outside capture, as the benchmark does
  {
    y.fill_bytes(0xff);
    rt::CapturedGraph graph([&](void* stream) { cudnn.enqueue(ops, stream); }, 2);
    EXPECT_GE(graph.node_count(), 2u);
    EXPECT_EQ(compare_f16(y.ptr(), ref.ptr(), c.y_elems()).nonfinite, c.y_elems())
        << "capturing ran the conv";
    graph.replay();
    graph.synchronize();
    const Comparison cmp = compare_f16(y.ptr(), ref.ptr(), c.y_elems());
    EXPECT_EQ(cmp.nonfinite, 0u);
    EXPECT_LT(cmp.rel_l2, 2e-3) << cudnn.algorithm();
  }
  // cuDNN's handle still names the graph's stream, destroyed with the graph; a new search
  // must not trip on it.
  CudnnConv again(c, ops);
  y.fill_bytes(0xff);
  again.enqueue(ops, nullptr);
  EXPECT_EQ(compare_f16(y.ptr(), ref.ptr(), c.y_elems()).nonfinite, 0u);
}

// A 1x1 stride-1 conv has two library candidates, cuDNN and cuBLASLt on the same buffers as a
// GEMM; both are checked and timed, and the faster correct one is the library's time.
TEST_F(BenchGpu, OneByOneConvsAlsoRunCublasLtAsAGemm) {
  BenchOptions o;
  o.warmup = 2;
  o.reps = 5;
  Bench bench(o);
  const ConvWorkload c = conv(2, 14, 14, 64, 32, 1, 1, 0, 1, 1);
  // tessel's stand-in is the GEMM too, built independently here from the conv's shape.
  BenchResult r = bench.run(c, [](const ConvWorkload& w) {
    GemmWorkload g = gemm(w.n * w.h * w.w, w.co, w.ci, GemmLayout::kNT);
    auto lt = std::make_shared<CublasLtGemm>(g);
    return TesselKernel{[lt](const Operands& ops, void* s) { lt->enqueue(ops, s); }, "lt", {}};
  });
  EXPECT_TRUE(r.tessel.ran && r.tessel.correct) << r.tessel.description;
  // cuDNN's three fastest by its search (those it ran), then cuBLASLt.
  ASSERT_EQ(r.library_candidates.size(), 4u);
  const Measurement& cudnn = r.library_candidates[0];
  const Measurement& gemm = r.library_candidates[3];
  EXPECT_EQ(cudnn.description.rfind("cuDNN: ", 0), 0u) << cudnn.description;
  EXPECT_EQ(r.library_candidates[1].description.rfind("cuDNN (search's #2): ", 0), 0u)
      << r.library_candidates[1].description;
  EXPECT_EQ(gemm.description.rfind("cuBLASLt as GEMM (1x1): algo ", 0), 0u) << gemm.description;
  const Measurement* fastest = nullptr;
  for (const Measurement& m : r.library_candidates) {
    if (!m.ran) continue;  // a search that ran fewer than three algorithms
    EXPECT_TRUE(m.correct) << m.description;
    EXPECT_LT(m.rel_l2, 2e-3) << m.description;
    if (!fastest || m.median_us < fastest->median_us) fastest = &m;
  }
  EXPECT_TRUE(cudnn.ran && gemm.ran);
  EXPECT_NE(cudnn.search.find("Find with"), std::string::npos) << cudnn.search;
  ASSERT_NE(fastest, nullptr);
  EXPECT_EQ(r.library.description, fastest->description);
  EXPECT_DOUBLE_EQ(r.library.median_us, fastest->median_us);

  // Any other conv has cuDNN alone.
  BenchResult three = bench.run(conv(1, 8, 8, 16, 16, 3, 1, 1, 1, 1), [](const ConvWorkload&) {
    return TesselKernel{nullptr, "not here", {}};
  });
  ASSERT_EQ(three.library_candidates.size(), 3u);
  EXPECT_EQ(three.library.description.rfind("cuDNN", 0), 0u) << three.library.description;
}

// int8 operands drawn on the host, uploaded, and kept for the CPU reference.
struct Int8Input {
  rt::DeviceBuffer buf;
  std::vector<int8_t> host;
  Int8Input(size_t n, uint64_t seed) : buf(n), host(n) {
    fill_uniform_i8(host.data(), n, seed);
    buf.upload(host.data(), n);
  }
};

rt::DeviceBuffer upload_floats(const std::vector<float>& v) {
  if (v.empty()) return {};
  rt::DeviceBuffer b(v.size() * sizeof(float));
  b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

// An int8 baseline's output (int8, fp32 or int32, as it says) against the CPU reference.
Int8Comparison check_int8_output(Int8Output out, const rt::DeviceBuffer& y,
                                 const std::vector<int32_t>& acc, int64_t channels,
                                 const Int8Epilogue& e) {
  switch (out) {
    case Int8Output::kInt8: {
      std::vector<int8_t> got(acc.size());
      y.download(got.data(), got.size());
      return compare_int8(got.data(), apply_int8_epilogue(acc, channels, e));
    }
    case Int8Output::kFloat: {
      std::vector<float> got(acc.size());
      y.download(got.data(), got.size() * sizeof(float));
      return compare_float(got.data(), apply_float_epilogue(acc, channels, e));
    }
    case Int8Output::kInt32: {
      std::vector<int32_t> got(acc.size());
      y.download(got.data(), got.size() * sizeof(int32_t));
      return compare_int32(got.data(), acc);
    }
  }
  return {};
}

TEST_F(BenchGpu, CudnnInt8MatchesTheCpuReference) {
  for (const ConvWorkload& c :
       {conv(2, 14, 14, 64, 32, 3, 1, 1, 1, 1), conv(1, 15, 17, 32, 64, 1, 2, 0, 1, 1)}) {
    Int8Input x(c.x_elems(), 21), w(c.w_elems(), 22);
    const Int8Epilogue e = random_conv_epilogue(c, 23);
    rt::DeviceBuffer scale = upload_floats(e.scale), bias = upload_floats(e.bias);
    rt::DeviceBuffer y(c.y_elems() * 4);  // room for a fallback's fp32 or int32
    const Operands ops{x.buf.ptr(), w.buf.ptr(), y.ptr(), scale.ptr(), bias.ptr()};
    CudnnInt8Conv cudnn(c, ops);
    std::cout << c.shape() << ": " << cudnn.variant() << "; " << cudnn.algorithm() << "\n";
    EXPECT_FALSE(cudnn.search().empty());
    y.fill_bytes(cudnn.output() == Int8Output::kFloat ? 0xff : 0x80);
    cudnn.enqueue(ops, nullptr);
    const Int8Comparison cmp = check_int8_output(
        cudnn.output(), y, conv2d_int8_reference(c, x.host.data(), w.host.data()), c.co, e);
    EXPECT_TRUE(cmp.ok()) << c.shape() << " " << cudnn.variant() << ": " << cmp.mismatches
                          << " mismatches, max " << cmp.max_abs << "\n"
                          << cudnn.search();
  }
}

TEST_F(BenchGpu, CublasLtInt8MatchesTheCpuReference) {
  for (const GemmWorkload& g :
       {gemm(72, 40, 136, GemmLayout::kNN), gemm(3, 1000, 256, GemmLayout::kNT)}) {
    Int8Input a(g.m * g.k, 24), b(g.n * g.k, 25);
    const Int8Epilogue e = gemm_epilogue(g);
    rt::DeviceBuffer scale = upload_floats(e.scale);
    rt::DeviceBuffer c(g.c_elems() * 4);
    CublasLtInt8Gemm lt(g, e.scale[0]);
    std::cout << g.shape() << ": " << lt.variant() << "; " << lt.algorithm() << "\n";
    c.fill_bytes(0x80);
    lt.enqueue({a.buf.ptr(), b.buf.ptr(), c.ptr(), scale.ptr(), 0}, nullptr);
    const Int8Comparison cmp = check_int8_output(
        lt.output(), c, gemm_int8_reference(g, a.host.data(), b.host.data()), g.n, e);
    EXPECT_TRUE(cmp.ok()) << g.shape() << " " << lt.variant() << ": " << cmp.mismatches
                          << " mismatches, max " << cmp.max_abs;
  }
}

// A 1x1 conv as cuBLASLt's int8 GEMM, with the conv's per-channel scale, bias and ReLU.
TEST_F(BenchGpu, CublasLtInt8PerChannelMatchesTheConvReference) {
  const ConvWorkload c = conv(2, 7, 7, 64, 96, 1, 1, 0, 1, 1);
  const GemmWorkload g = *as_gemm(c);
  Int8Input x(c.x_elems(), 26), w(c.w_elems(), 27);
  const Int8Epilogue e = random_conv_epilogue(c, 28);
  rt::DeviceBuffer scale = upload_floats(e.scale), bias = upload_floats(e.bias);
  rt::DeviceBuffer y(c.y_elems());
  CublasLtInt8Gemm lt(g, CublasLtInt8Gemm::PerChannel{});
  std::cout << c.shape() << " as " << g.shape() << ": " << lt.variant() << "; " << lt.algorithm()
            << "\n";
  EXPECT_EQ(lt.output(), Int8Output::kInt8);
  y.fill_bytes(0x80);
  lt.enqueue({x.buf.ptr(), w.buf.ptr(), y.ptr(), scale.ptr(), bias.ptr()}, nullptr);
  const Int8Comparison cmp = check_int8_output(
      Int8Output::kInt8, y, conv2d_int8_reference(c, x.host.data(), w.host.data()), c.co, e);
  EXPECT_TRUE(cmp.ok()) << cmp.mismatches << " mismatches, max " << cmp.max_abs;
}

TEST_F(BenchGpu, DriverRunsInt8BesideTheFp16Library) {
  BenchOptions o;
  o.warmup = 2;
  o.reps = 5;
  Bench bench(o);
  const ConvWorkload c = conv(2, 14, 14, 64, 32, 3, 1, 1, 1, 1);

  const auto no_kernel = [](const ConvWorkload&) {
    return TesselKernel{nullptr, "no int8 kernel yet", nullptr};
  };
  Int8Result r = bench.run_int8(c, no_kernel);
  EXPECT_TRUE(r.library.ran && r.library.correct) << r.library.description;
  EXPECT_EQ(r.library.description.rfind("cuDNN int8: engine ", 0), 0u) << r.library.description;
  EXPECT_FALSE(r.library.variant.empty());
  EXPECT_TRUE(r.fp16_library.ran && r.fp16_library.correct) << r.fp16_library.description;
  // The fastest of cuDNN's first picks by its search (whose order varies between runs).
  const std::string& fp16 = r.fp16_library.description;
  EXPECT_TRUE(fp16.rfind("cuDNN: ", 0) == 0 || fp16.rfind("cuDNN (search's #", 0) == 0) << fp16;
  EXPECT_FALSE(r.tessel.ran);
  EXPECT_EQ(r.tessel.description, "no int8 kernel yet");
  EXPECT_GE(r.buffer_sets, 2);
  EXPECT_EQ(r.library.timing, Timing::kGraph) << r.library.description;
  if (r.library.output == "int8") {
    EXPECT_GT(r.int8_speedup(), 0.0);
    // cuDNN's int8 graph standing in for tessel's int8 kernel: checked as int8, about as fast.
    Int8Result same = bench.run_int8(c, [](const ConvWorkload& w) {
      // Its search runs on operands of its own.
      Int8Input x(w.x_elems(), 31), wt(w.w_elems(), 32);
      const Int8Epilogue e = random_conv_epilogue(w, 33);
      rt::DeviceBuffer scale = upload_floats(e.scale), bias = upload_floats(e.bias);
      rt::DeviceBuffer y(w.y_elems() * 4);
      auto conv = std::make_shared<CudnnInt8Conv>(
          w, Operands{x.buf.ptr(), wt.buf.ptr(), y.ptr(), scale.ptr(), bias.ptr()});
      return TesselKernel{[conv](const Operands& ops, void* s) { conv->enqueue(ops, s); }, "cudnn",
                          nullptr};
    });
    EXPECT_TRUE(same.tessel.ran && same.tessel.correct) << same.tessel.description;
    EXPECT_GT(same.ratio(), 0.5);
    EXPECT_LT(same.ratio(), 2.0);
  }

  // A kernel that writes nothing leaves the -128 poison, below anything ReLU leaves.
  Int8Result lazy = bench.run_int8(c, [](const ConvWorkload&) {
    return TesselKernel{[](const Operands&, void*) {}, "no-op", nullptr};
  });
  EXPECT_TRUE(lazy.tessel.ran);
  EXPECT_FALSE(lazy.tessel.correct);
  EXPECT_EQ(lazy.tessel.mismatches, c.y_elems());

  // Channels cuDNN's int8 convolutions cannot take: refused with the reason; fp16 still runs.
  Int8Result stem = bench.run_int8(conv(1, 32, 32, 3, 16, 7, 2, 3, 1, 1), no_kernel);
  EXPECT_FALSE(stem.library.ran);
  EXPECT_EQ(stem.library.description.rfind("cuDNN int8: refused: ci=3 is not a multiple of 4", 0),
            0u)
      << stem.library.description;
  EXPECT_TRUE(stem.fp16_library.ran && stem.fp16_library.correct);

  // A 1x1 stride-1 conv also runs cuBLASLt's int8 GEMM; the faster correct one is the pick.
  Int8Result one = bench.run_int8(conv(2, 14, 14, 64, 32, 1, 1, 0, 1, 1), no_kernel);
  ASSERT_EQ(one.library_candidates.size(), 2u);
  for (const Measurement& m : one.library_candidates)
    EXPECT_TRUE(m.ran && m.correct) << m.description;
  EXPECT_EQ(one.library_candidates[1].description.rfind("cuBLASLt int8 as GEMM (1x1): algo ", 0),
            0u)
      << one.library_candidates[1].description;
  EXPECT_EQ(one.library.median_us,
            std::min(one.library_candidates[0].median_us, one.library_candidates[1].median_us));

  const GemmWorkload g = gemm(256, 128, 64, GemmLayout::kNN);
  Int8Result fc = bench.run_int8(g, [](const GemmWorkload&) {
    return TesselKernel{nullptr, "none", nullptr};
  });
  EXPECT_TRUE(fc.library.ran && fc.library.correct) << fc.library.description;
  EXPECT_EQ(fc.library.description.rfind("cuBLASLt int8: algo ", 0), 0u) << fc.library.description;
  EXPECT_TRUE(fc.fp16_library.ran && fc.fp16_library.correct) << fc.fp16_library.description;

  const nlohmann::json j = to_json(bench, {r, fc}, 0);
  EXPECT_EQ(j["precision"], "int8");
  const nlohmann::json& w0 = j["workloads"][0];
  EXPECT_EQ(w0["int8_library"]["output"], r.library.output);
  EXPECT_EQ(w0["int8_library"]["mismatches"], 0);
  EXPECT_EQ(w0["tessel_int8"]["ran"], false);
  EXPECT_EQ(w0["tessel_int8"]["description"], "no int8 kernel yet");
  EXPECT_TRUE(w0["fp16_library"]["correct"]);
  EXPECT_EQ(j["workloads"][1]["int8_library"]["output"], fc.library.output);
}

}  // namespace
}  // namespace tessel::bench
