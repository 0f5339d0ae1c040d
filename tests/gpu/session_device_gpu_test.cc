// Session::run_on_device (the Python module's CUDA path): tensors already in GPU memory run in
// place on the caller's stream, and match the same session's host run, with outputs tessel
// allocates and with outputs the caller gives; a misaligned or mistyped tensor and a CPU session
// are refused in one line. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <string>
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

}  // namespace
}  // namespace tessel
