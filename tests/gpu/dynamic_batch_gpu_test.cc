// A dynamic-batch engine on the GPU (compiler/profiles.h, runtime/batch_split.h): compiled once
// for batch 1:8 from an ONNX model with a symbolic batch, run at batch 1, 3 (between profiles:
// padded or split), 5 and 8 against the CPU reference at the same batch; at a profile batch its
// outputs equal a static engine's for that batch bit for bit (the same kernels); device tensors
// in and out at a profile batch (in place) and between profiles (through the engine's padded
// buffers); pipelined runs of host and device pieces; batches outside the range refused; a
// session on each GPU has its engine on that GPU.
// Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda_api.h"
#include "frontend/onnx/model_builder.h"
#include "gpu/gpu_test_util.h"
#include "runtime/batch_split.h"

namespace tessel {
namespace {

// x[N,16,8,8] -> Conv 3x3 (pad 1) + bias -> Relu (output r) -> Conv 1x1 -> y[N,32,8,8]: two
// outputs, both leading with the batch.
std::string write_model(const std::filesystem::path& dir) {
  onnx::testing::ModelBuilder m;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-0.25f, 0.25f);
  auto values = [&](size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = u(rng);
    return v;
  };
  m.input("x", ::onnx::TensorProto::FLOAT, {"N", 16, 8, 8});
  m.initializer_f32("wa", {16, 16, 3, 3}, values(16 * 16 * 9));
  m.initializer_f32("ba", {16}, values(16));
  m.initializer_f32("wb", {32, 16, 1, 1}, values(32 * 16));
  auto* conv = m.node("Conv", {"x", "wa", "ba"}, {"a"}, "conv_a");
  auto* pads = onnx::testing::add_attr(conv, "pads", ::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.node("Relu", {"a"}, {"r"}, "relu");
  m.node("Conv", {"r", "wb"}, {"y"}, "conv_b");
  m.output("y", ::onnx::TensorProto::FLOAT, {"N", 32, 8, 8});
  m.output("r", ::onnx::TensorProto::FLOAT, {"N", 16, 8, 8});
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "dyn.onnx").string();
  std::ofstream(path, std::ios::binary) << m.bytes();
  return path;
}

std::vector<Tensor> inputs_at(int64_t batch, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  std::vector<double> x(static_cast<size_t>(batch * 16 * 64));
  for (double& e : x) e = (rng() % 2 ? -1 : 1) * mag(rng);
  return {Tensor::from_doubles(DType::kF32, {batch, 16, 8, 8}, x)};
}

Tensor download(const DeviceTensor& t) {
  Tensor h(t.dtype(), t.shape());
  device::copy_to_host(h.raw(), t.address(), h.nbytes());
  return h;
}

class DynamicBatchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    dir_ = std::filesystem::temp_directory_path() /
           ("tessel_dynamic_gpu_" + std::to_string(::getpid()));
    model_ = write_model(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string model_;
};

TEST_F(DynamicBatchGpu, AnyBatchOfTheRangeMatchesTheCpu) {
  Options o;
  o.batch_range = {1, 8, 4};
  Session s = Session::open(model_, o);
  EXPECT_EQ(s.profiles(), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(s.inputs()[0].shape, (Shape{kDynamicBatch, 16, 8, 8}));
  Options cpu;
  cpu.device = Device::kCpu;
  cpu.batch_range = {1, 8, 0};
  Session reference = Session::open(model_, cpu);
  for (int64_t batch : {1, 3, 5, 8, 3}) {
    SCOPED_TRACE(batch);
    const std::vector<Tensor> x = inputs_at(batch, static_cast<unsigned>(batch));
    const std::vector<Tensor> got = s.run(x);
    const std::vector<Tensor> want = reference.run(x);
    ASSERT_EQ(got.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(got[j].shape()[0], batch);
      EXPECT_LE(testing::relative_l2(got[j], want[j]), 1e-2) << "output " << j;
    }
  }
  EXPECT_EQ(onnx::testing::user_error_of([&] { s.run(inputs_at(9, 1)); }),
            "engine run: input 0 'x': batch 9 is outside the engine's batch range 1:8");
  // Timing a batch between profiles times all its chunks.
  EXPECT_GT(s.engine()->time_replays(1, 3, 5)[0], 0);
}

// At a profile batch the dynamic engine runs the static engine's kernels: the same bits.
TEST_F(DynamicBatchGpu, AProfileBatchEqualsTheStaticEngine) {
  Options o;
  o.batch_range = {1, 8, 8};
  Session dynamic = Session::open(model_, o);
  for (int64_t batch : {1, 8}) {
    Options fixed;
    fixed.batch = batch;
    Session s = Session::open(model_, fixed);
    const std::vector<Tensor> x = inputs_at(batch, 7);
    const std::vector<Tensor> a = dynamic.run(x), b = s.run(x);
    for (size_t j = 0; j < 2; ++j)
      EXPECT_EQ(std::memcmp(a[j].raw(), b[j].raw(), a[j].nbytes()), 0)
          << "batch " << batch << " output " << j;
  }
}

// A batch gathered from pieces (a server's requests) runs as their concatenation: the same
// bits, at batches between profiles (whose chunks the pieces straddle) and at a profile.
TEST_F(DynamicBatchGpu, GatheredPiecesRunAsTheirConcatenation) {
  Options o;
  o.batch_range = {1, 8, 8};
  Session s = Session::open(model_, o);
  for (const std::vector<int64_t>& rows :
       {std::vector<int64_t>{3, 1, 3}, {2, 3}, {1, 1, 1, 1, 1, 1, 1, 1}, {6}}) {
    int64_t batch = 0;
    for (int64_t r : rows) batch += r;
    SCOPED_TRACE(batch);
    const std::vector<Tensor> x = inputs_at(batch, static_cast<unsigned>(rows.size()));
    std::vector<Piece> pieces;
    const size_t row_bytes = x[0].nbytes() / static_cast<size_t>(batch);
    int64_t at = 0;
    for (int64_t r : rows) {
      pieces.push_back({x[0].raw() + static_cast<size_t>(at) * row_bytes, DType::kF32,
                        {r, 16, 8, 8}});
      at += r;
    }
    const std::vector<Tensor> got = s.run_gathered({pieces}), want = s.run(x);
    ASSERT_EQ(got.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      ASSERT_EQ(got[j].shape(), want[j].shape());
      EXPECT_EQ(std::memcmp(got[j].raw(), want[j].raw(), got[j].nbytes()), 0) << "output " << j;
    }
  }
  const std::vector<Tensor> x = inputs_at(2, 3);
  EXPECT_EQ(onnx::testing::user_error_of([&] {
              s.run_gathered({{{x[0].raw(), DType::kF32, {2, 16, 8, 4}}}});
            }),
            "input 'x': a piece is f32[2,16,8,4], expected f32[rows,16,8,8]");
}

// Pipelined runs (Session::submit / collect): two batches in flight at once, one of host
// pieces and one mixing host and device pieces, a third submitted once the first is collected
// (its slot reused) and collected from another thread; each equals the run of its
// concatenation, bit for bit. A device piece on a CPU session is refused.
TEST_F(DynamicBatchGpu, PipelinedRunsOfHostAndDevicePieces) {
  Options o;
  o.batch_range = {1, 8, 8};
  Session s = Session::open(model_, o);
  struct Batch {
    std::vector<int64_t> rows;
    std::vector<bool> on_device;
    std::vector<Tensor> x, want;
    std::vector<std::unique_ptr<device::DeviceBuffer>> held;  // the device pieces' memory
    std::vector<Piece> pieces;
  };
  auto make = [&](std::vector<int64_t> rows, std::vector<bool> on_device, unsigned seed) {
    Batch b;
    b.rows = std::move(rows);
    b.on_device = std::move(on_device);
    int64_t batch = 0;
    for (int64_t r : b.rows) batch += r;
    b.x = inputs_at(batch, seed);
    b.want = s.run(b.x);
    const size_t row_bytes = b.x[0].nbytes() / static_cast<size_t>(batch);
    int64_t at = 0;
    for (size_t k = 0; k < b.rows.size(); ++k) {
      const std::byte* host = b.x[0].raw() + static_cast<size_t>(at) * row_bytes;
      const size_t bytes = static_cast<size_t>(b.rows[k]) * row_bytes;
      const void* data = host;
      if (b.on_device[k]) {
        b.held.push_back(std::make_unique<device::DeviceBuffer>(bytes));
        b.held.back()->upload(host, bytes);
        data = reinterpret_cast<const void*>(b.held.back()->ptr());
      }
      b.pieces.push_back({data, DType::kF32, {b.rows[k], 16, 8, 8}, b.on_device[k]});
      at += b.rows[k];
    }
    return b;
  };
  auto expect_equal = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                         const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(got[j].shape(), want[j].shape()) << what;
      EXPECT_EQ(std::memcmp(got[j].raw(), want[j].raw(), got[j].nbytes()), 0)
          << what << " output " << j;
    }
  };
  Batch a = make({3, 2}, {false, false}, 11), b = make({1, 2, 4}, {true, false, true}, 12),
        c = make({6}, {true}, 13);
  Session::Pending pa = s.submit({a.pieces}), pb = s.submit({b.pieces});
  expect_equal(s.collect(std::move(pa)), a.want, "first of two in flight");
  Session::Pending pc = s.submit({c.pieces});  // a's slot, again
  expect_equal(s.collect(std::move(pb)), b.want, "second, with device pieces");
  std::vector<Tensor> got_c;
  std::thread collector([&] { got_c = s.collect(std::move(pc)); });
  collector.join();
  expect_equal(got_c, c.want, "third, collected on another thread");

  Options cpu;
  cpu.device = Device::kCpu;
  cpu.batch = 6;
  Session host = Session::open(model_, cpu);
  EXPECT_EQ(onnx::testing::user_error_of([&] { host.submit({c.pieces}); }),
            "input 'x': a piece in GPU memory needs a session on the GPU");
}

// Device tensors: batch 8 runs in place, batch 3 through the engine's buffers; both equal the
// host run of the same batch.
TEST_F(DynamicBatchGpu, DeviceTensorsAtAnyBatch) {
  Options o;
  o.batch_range = {1, 8, 8};
  Session s = Session::open(model_, o);
  for (int64_t batch : {8, 3, 1}) {
    SCOPED_TRACE(batch);
    const std::vector<Tensor> x = inputs_at(batch, 3);
    const std::vector<Tensor> want = s.run(x);
    device::DeviceBuffer in(x[0].nbytes());
    in.upload(x[0].raw(), x[0].nbytes());
    const std::vector<DeviceTensor> got =
        s.run_on_device({DeviceTensor::borrow(in.ptr(), DType::kF32, x[0].shape())}, nullptr);
    device::synchronize();
    ASSERT_EQ(got.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      const Tensor h = download(got[j]);
      ASSERT_EQ(h.shape(), want[j].shape());
      EXPECT_EQ(std::memcmp(h.raw(), want[j].raw(), h.nbytes()), 0) << "output " << j;
    }
  }
  device::DeviceBuffer big(9 * 16 * 64 * 4);
  EXPECT_EQ(onnx::testing::user_error_of([&] {
              s.run_on_device({DeviceTensor::borrow(big.ptr(), DType::kF32, {9, 16, 8, 8})},
                              nullptr);
            }),
            "batch 9 is outside the session's batch range 1:8");
}

// The engine file keeps the profiles: loaded, it runs batch 3 as the compiled session does.
TEST_F(DynamicBatchGpu, EngineFileRunsAnyBatch) {
  Options o;
  o.batch_range = {1, 8, 4};
  const std::string tsl = (dir_ / "dyn.tsl").string();
  compile_file(model_, tsl, o);
  Session loaded = Session::open(tsl);
  Session compiled = Session::open(model_, o);
  EXPECT_EQ(loaded.profiles(), compiled.profiles());
  const std::vector<Tensor> x = inputs_at(3, 5);
  const std::vector<Tensor> a = loaded.run(x), b = compiled.run(x);
  for (size_t j = 0; j < 2; ++j)
    EXPECT_EQ(std::memcmp(a[j].raw(), b[j].raw(), a[j].nbytes()), 0) << "output " << j;
}

// Each GPU's session has its engine there: opened on GPU g (from the model file, with a batch
// range, as `tessel serve` opens one per GPU), its memory is taken from g's and no other's,
// and its runs equal GPU 0's bit for bit. The engine was once made on whichever GPU was
// current when the session opened, and ran there while it looked as if it ran on g.
TEST_F(DynamicBatchGpu, ASessionOnEachGpuHasItsEngineThere) {
  // x[N,64,32,32] -> Conv 3x3 (pad 1) -> y: 128 KiB of fp16 per image and activation, so that
  // the engine's arena at batch 256 is tens of MiB.
  onnx::testing::ModelBuilder m;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  std::vector<float> w(64 * 64 * 9);
  for (float& e : w) e = u(rng);
  m.input("x", ::onnx::TensorProto::FLOAT, {"N", 64, 32, 32});
  m.initializer_f32("w", {64, 64, 3, 3}, w);
  auto* conv = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  auto* pads = onnx::testing::add_attr(conv, "pads", ::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.output("y", ::onnx::TensorProto::FLOAT, {"N", 64, 32, 32});
  const std::string path = (dir_ / "wide.onnx").string();
  std::ofstream(path, std::ios::binary) << m.bytes();

  const int gpus = device::gpu_count();
  auto free_bytes = [&] {  // every GPU's free memory (its context made on the first call)
    std::vector<int64_t> free;
    for (int g = 0; g < gpus; ++g) {
      device::DeviceScope scope(g);
      free.push_back(static_cast<int64_t>(device::memory_info().free));
    }
    return free;
  };
  free_bytes();
  std::mt19937 xrng(3);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  std::vector<double> xv(size_t{200} * 64 * 1024);
  for (double& e : xv) e = (xrng() % 2 ? -1 : 1) * mag(xrng);
  const std::vector<Tensor> x = {Tensor::from_doubles(DType::kF32, {200, 64, 32, 32}, xv)};
  std::vector<Tensor> want;
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (int g = 0; g < gpus; ++g) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    const std::vector<int64_t> before = free_bytes();
    Options o;
    o.gpu = g;
    o.batch_range = {128, 256, 256};
    Session s = Session::open(path, o);
    const std::vector<Tensor> got = s.run(x);
    const std::vector<int64_t> after = free_bytes();
    for (int other = 0; other < gpus; ++other) {
      const int64_t taken = before[static_cast<size_t>(other)] - after[static_cast<size_t>(other)];
      if (other == g) {
        EXPECT_GE(taken, 32 * kMiB) << "taken from its own GPU";
      } else {
        EXPECT_LT(taken, 4 * kMiB) << "taken from GPU " << other;
      }
    }
    if (g == 0) {
      want = got;
    } else {
      EXPECT_EQ(std::memcmp(got[0].raw(), want[0].raw(), want[0].nbytes()), 0);
    }
  }
  EXPECT_EQ(device::current_gpu(), 0);
}

}  // namespace
}  // namespace tessel
