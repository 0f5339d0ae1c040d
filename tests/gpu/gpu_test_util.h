// Helpers shared by the GPU tests: random graph inputs, the relative-L2 comparison of engine
// outputs with the CPU executor's, and parallel builds of generated contraction kernels.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/op_kernels.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "device/cuda_api.h"
#include "runtime/cpu/executor.h"
#include "runtime/engine.h"
#include "tessel/tessel.h"

namespace tessel::testing {

// `g` compiled for the GPU present and loaded: session.engine() runs it, session.graph() is
// the compiled graph.
inline Session compile_session(const ir::Graph& g, Precision precision = Precision::kFp16) {
  Options o;
  o.precision = precision;
  return Session::from_graph(g, o);
}

// One tensor per graph input, magnitudes in [0.25, 1] with random signs: never zero, so an
// unwritten output or a dropped term shows.
inline std::vector<Tensor> random_inputs(const ir::Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  std::bernoulli_distribution neg(0.5);
  std::vector<Tensor> r;
  for (ir::ValueId v : g.inputs) {
    const ir::TensorType& t = g.type(v);
    std::vector<double> x(static_cast<size_t>(numel(t.shape)));
    for (double& e : x) e = (neg(rng) ? -1 : 1) * mag(rng);
    r.push_back(Tensor::from_doubles(t.dtype, t.shape, x));
  }
  return r;
}

// sqrt(sum (a - b)^2 / sum b^2) over tensors of one type; a NaN in `got` (a poisoned,
// unwritten element) gives infinity.
inline double relative_l2(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.type_str(), want.type_str());
  double num = 0, den = 0;
  for (int64_t i = 0; i < std::min(got.numel(), want.numel()); ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    if (std::isnan(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// A device copy of `bytes` (at least 16 bytes, so an empty operand still has an address).
// Runs the session's engine twice on different seeded inputs (the second run checks that each
// run uploads its inputs and that replays leave nothing behind), each against the CPU executor
// on `g`, the graph the session was compiled from.
inline void expect_engine_matches_cpu(const Session& s, const ir::Graph& g, double tolerance) {
  runtime::Engine& e = *s.engine();
  for (unsigned seed : {1u, 2u}) {
    const std::vector<Tensor> inputs = random_inputs(g, seed);
    const std::vector<Tensor> want = runtime::cpu::run_graph(g, inputs);
    const std::vector<Tensor> got = e.run(inputs);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      EXPECT_LE(relative_l2(got[i], want[i]), tolerance) << "output " << i << ", seed " << seed;
  }
}

inline device::DeviceBuffer upload(const std::vector<char>& bytes) {
  device::DeviceBuffer b(std::max<size_t>(bytes.size(), 16));
  b.upload(bytes.data(), bytes.size());
  return b;
}

// Builds every problem's kernel in parallel (NVRTC is the slow part); nullptr and the message
// in `errors` where a build fails.
inline std::vector<std::unique_ptr<kernels::cuda::ContractionKernel>> build_all(
    const std::vector<kernels::cuda::testing::TestProblem>& ps, const std::string& arch,
    std::vector<std::string>& errors) {
  std::vector<std::unique_ptr<kernels::cuda::ContractionKernel>> ks(ps.size());
  errors.assign(ps.size(), "");
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < ps.size();) {
      try {
        ks[i] = kernels::cuda::ContractionKernel::build(ps[i].c, ps[i].e, ps[i].s, arch);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  const unsigned n = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (unsigned t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return ks;
}

// One generated op kernel (kernels/cuda/op_kernels.h), compiled for the GPU present, run on
// host tensors: each input uploaded (the ABI passes constants like inputs), each output
// poisoned with `poison` bytes before the launch and downloaded after it, shaped as `like`.
class OpKernelRun {
 public:
  explicit OpKernelRun(const kernels::cuda::OpKernelSource& ks) : ks_(ks) {
    device::CompileOptions options;
    options.arch = device::device_info().arch();
    options.headers = ks.headers;
    module_ = device::Module::load(device::compile(ks.source, ks.name + ".cu", options).cubin);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& like,
                          uint8_t poison) const {
    struct Params {
      uint64_t in[kernels::cuda::kOpKernelInputs];
      uint64_t out[kernels::cuda::kOpKernelOutputs];
    } params{};
    std::vector<device::DeviceBuffer> in_bufs, out_bufs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      in_bufs.emplace_back(std::max<size_t>(inputs[i].nbytes(), 16));
      in_bufs.back().upload(inputs[i].raw(), inputs[i].nbytes());
      params.in[i] = in_bufs.back().ptr();
    }
    for (size_t j = 0; j < like.size(); ++j) {
      out_bufs.emplace_back(std::max<size_t>(like[j].nbytes(), 16));
      out_bufs.back().fill_bytes(poison);
      params.out[j] = out_bufs.back().ptr();
    }
    void* args[] = {&params};
    device::LaunchConfig config;
    for (int d = 0; d < 3; ++d) config.grid[d] = ks_.grid[d], config.block[d] = ks_.block[d];
    config.smem_bytes = ks_.smem_bytes;
    device::launch(module_->function(ks_.name), config, args);
    device::synchronize();
    std::vector<Tensor> got;
    for (size_t j = 0; j < like.size(); ++j) {
      got.emplace_back(like[j].dtype(), like[j].shape());
      out_bufs[j].download(got.back().raw(), got.back().nbytes());
    }
    return got;
  }

 private:
  kernels::cuda::OpKernelSource ks_;
  std::shared_ptr<device::Module> module_;
};

// cuobjdump where the CUDA toolkit puts it, or "".
inline std::string find_cuobjdump() {
  for (const char* c : {"/usr/local/cuda/bin/cuobjdump", "/usr/bin/cuobjdump"})
    if (std::ifstream(c).good()) return c;
  return "";
}

// `tool --dump-sass` of a cubin ("" when it cannot run).
inline std::string dump_sass(const std::string& tool, const std::string& cubin) {
  char path[] = "/tmp/tessel_sass_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  close(fd);
  std::ofstream(path, std::ios::binary) << cubin;
  std::string out;
  if (FILE* pipe = popen((tool + " --dump-sass " + path + " 2>&1").c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    pclose(pipe);
  }
  std::remove(path);
  return out;
}

}  // namespace tessel::testing
