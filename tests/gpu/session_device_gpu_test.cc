// Session::run_on_device (the Python module's CUDA path): tensors already in GPU memory run in
// place on the caller's stream, and match the same session's host run, with outputs tessel
// allocates and with outputs the caller gives; a misaligned or mistyped tensor and a CPU session
// are refused in one line. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "compiler/cnn_blocks.h"
#include "device/cuda_api.h"
#include "gpu/gpu_test_util.h"
#include "ir/ir_writer.h"

namespace tessel {
namespace {

using testing::conv_weight;
using testing::IrWriter;

// Two outputs: the last conv's and the ReLU's between the convs.
ir::Graph two_convs() {
  IrWriter w(5);
  w.input("x", "f32[2,16,8,8]");
  conv_weight(w, "wa", 16, 16, 3);
  conv_weight(w, "wb", 16, 16, 1);
  w.node("%a = Conv(%x, %wa) {pads = [1, 1, 1, 1]} : f32[2,16,8,8] @\"conv_a\"");
  w.node("%r = Relu(%a) : f32[2,16,8,8] @\"relu\"");
  w.node("%y = Conv(%r, %wb) : f32[2,16,8,8] @\"conv_b\"");
  return w.graph(std::vector<std::string>{"y", "r"});
}

Tensor download(const DeviceTensor& t) {
  Tensor h(t.dtype(), t.shape());
  device::copy_to_host(h.raw(), t.address(), h.nbytes());
  return h;
}

class SessionDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

TEST_F(SessionDevice, DeviceTensorsInAndOutMatchTheHostRun) {
  const ir::Graph g = two_convs();
  Session s = testing::compile_session(g);
  const std::vector<Tensor> x = testing::random_inputs(g, 3);
  const std::vector<Tensor> want = s.run(x);

  device::DeviceBuffer in(x[0].nbytes());
  in.upload(x[0].raw(), x[0].nbytes());
  const DeviceTensor din = DeviceTensor::borrow(in.ptr(), x[0].dtype(), x[0].shape());

  // Outputs tessel allocates, on the legacy default stream.
  std::vector<DeviceTensor> got = s.run_on_device({din}, nullptr);
  device::synchronize();
  ASSERT_EQ(got.size(), 2u);
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(got[j].type_str(), want[j].type_str());
    EXPECT_TRUE(bitwise_equal(download(got[j]), want[j])) << "output " << j;
  }

  // Outputs the caller gives, poisoned first: written in place, returned as given.
  std::vector<device::DeviceBuffer> out;
  std::vector<DeviceTensor> given;
  for (const Tensor& w : want) {
    out.emplace_back(w.nbytes());
    out.back().fill_bytes(0xff);
    given.push_back(DeviceTensor::borrow(out.back().ptr(), w.dtype(), w.shape()));
  }
  got = s.run_on_device({din}, nullptr, given);
  device::synchronize();
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(got[j].address(), out[j].ptr());
    EXPECT_TRUE(bitwise_equal(download(got[j]), want[j])) << "output " << j;
  }
}

TEST_F(SessionDevice, MismatchedTensorsAreRefused) {
  const ir::Graph g = two_convs();
  Session s = testing::compile_session(g);
  device::DeviceBuffer in(2 * 16 * 8 * 8 * 4 + 16);
  auto message = [&](const std::vector<DeviceTensor>& inputs) {
    try {
      s.run_on_device(inputs, nullptr);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({DeviceTensor::borrow(in.ptr(), DType::kF16, {2, 16, 8, 8})}),
            "input 'x' is f16[2,16,8,8], expected f32[2,16,8,8]");
  EXPECT_EQ(message({}), "0 inputs given, the model has 1");
  const std::string misaligned =
      message({DeviceTensor::borrow(in.ptr() + 4, DType::kF32, {2, 16, 8, 8})});
  EXPECT_NE(misaligned.find("input 'x' at device address 0x"), std::string::npos) << misaligned;
  EXPECT_NE(misaligned.find("is not 16-byte aligned"), std::string::npos) << misaligned;

  Options cpu;
  cpu.device = Device::kCpu;
  Session c = Session::from_graph(g, cpu);
  try {
    c.run_on_device({DeviceTensor::borrow(in.ptr(), DType::kF32, {2, 16, 8, 8})}, nullptr);
    ADD_FAILURE() << "a CPU session ran device tensors";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "this session runs on the CPU: device tensors need a session on the GPU");
  }
}

// A batch of several MiB given in pieces (a served batch): staged in 1 MiB blocks that the
// engine's copier threads fill and hand to the upload in order; equal to the run of the whole.
TEST_F(SessionDevice, LargeGatheredBatchesMatchTheWholeRun) {
  IrWriter w(9);
  w.input("x", "f32[8,32,64,64]");
  conv_weight(w, "w", 16, 32, 1);
  w.node("%y = Conv(%x, %w) : f32[8,16,64,64] @\"conv\"");
  const ir::Graph g = w.graph(std::vector<std::string>{"y"});
  Session s = testing::compile_session(g);
  const std::vector<Tensor> x = testing::random_inputs(g, 11);
  const std::vector<Tensor> want = s.run(x);
  const size_t row = x[0].nbytes() / 8;
  for (const std::vector<int64_t>& rows :
       {std::vector<int64_t>{3, 1, 4}, {8}, {1, 1, 1, 1, 1, 1, 1, 1}}) {
    std::vector<Piece> pieces;
    int64_t at = 0;
    for (int64_t r : rows) {
      pieces.push_back({x[0].raw() + static_cast<size_t>(at) * row, DType::kF32, {r, 32, 64, 64}});
      at += r;
    }
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<Tensor> got = s.run_gathered({pieces});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(bitwise_equal(got[0], want[0])) << rows.size() << " pieces, run " << rep;
    }
  }
}

// Options::gpu: a session per GPU (a server's instances), each compiled for, run on and freed
// with its own GPU, called from any thread. On one GPU the sessions share it; with two or more
// each runs on its own and all match bit for bit (the same kernels on the same GPU model).
TEST_F(SessionDevice, SessionsOnEveryGpuMatchFromAnyThread) {
  const ir::Graph g = two_convs();
  const std::vector<Tensor> x = testing::random_inputs(g, 7);
  const int gpus = device::gpu_count();
  std::vector<Session> sessions;
  for (int gpu = 0; gpu < gpus; ++gpu) {
    Options o;
    o.gpu = gpu;
    sessions.push_back(Session::from_graph(g, o));
  }
  const std::vector<Tensor> want = sessions[0].run(x);
  // Interleaved on this thread, then each from a thread of its own.
  for (int round = 0; round < 2; ++round)
    for (int gpu = 0; gpu < gpus; ++gpu) {
      const std::vector<Tensor> got = sessions[static_cast<size_t>(gpu)].run(x);
      for (size_t j = 0; j < want.size(); ++j)
        EXPECT_TRUE(bitwise_equal(got[j], want[j])) << "GPU " << gpu << " output " << j;
    }
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(gpus));
  std::vector<std::thread> threads;
  for (int gpu = 0; gpu < gpus; ++gpu)
    threads.emplace_back([&, gpu] { results[gpu] = sessions[static_cast<size_t>(gpu)].run(x); });
  for (std::thread& t : threads) t.join();
  for (int gpu = 0; gpu < gpus; ++gpu)
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_TRUE(bitwise_equal(results[gpu][j], want[j])) << "thread of GPU " << gpu;
  // This thread's GPU is left as it was.
  EXPECT_EQ(device::current_gpu(), 0);
  sessions.clear();  // each engine freed with its GPU current

  Options o;
  o.gpu = gpus;
  try {
    Session::from_graph(g, o);
    ADD_FAILURE() << "a session opened on GPU " << gpus << " of " << gpus;
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "GPU " + std::to_string(gpus) + " does not exist: " +
                                         std::to_string(gpus) + " CUDA device(s) visible");
  }
}

}  // namespace
}  // namespace tessel
