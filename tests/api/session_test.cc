// The public API (include/tessel/tessel.h) without a GPU: loading .tir models, CPU sessions
// against the reference executor, the user errors every entry point raises, and the GPU
// entry points' "no CUDA device" error on a machine without one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "device/cuda_api.h"
#include "runtime/cpu/executor.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

// y = Relu(x + b): two inputs' worth of arithmetic on a small graph.
constexpr const char* kTinyModel = R"(graph @main opset 17 {
  input %x : f32[2,3]
  const %b : f32[3] = [0.5, -1.25, 2]
  %s = Add(%x, %b) : f32[2,3] @"add"
  %y = Relu(%s) : f32[2,3] @"relu"
  output %y
}
)";

std::string write_temp(const std::string& name, const std::string& contents) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel_api_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path p = dir / name;
  std::ofstream(p) << contents;
  return p.string();
}

std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

Options cpu() {
  Options o;
  o.device = Device::kCpu;
  return o;
}

TEST(Session, CpuRunsTheReferenceExecutor) {
  const std::string path = write_temp("tiny.tir", kTinyModel);
  Session s = Session::open(path, cpu());
  EXPECT_EQ(s.device(), Device::kCpu);
  EXPECT_EQ(s.engine(), nullptr);
  ASSERT_NE(s.graph(), nullptr);
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "x");
  EXPECT_EQ(s.inputs()[0].shape, (Shape{2, 3}));
  ASSERT_EQ(s.outputs().size(), 1u);
  EXPECT_EQ(s.outputs()[0].name, "y");
  const Tensor x = Tensor::from_doubles(DType::kF32, {2, 3}, {-1, 2, -3, 0.25, 1, -0.5});
  const std::vector<Tensor> y = s.run({x});
  ASSERT_EQ(y.size(), 1u);
  // relu(x + [0.5, -1.25, 2]) by hand.
  const std::vector<double> want = {0, 0.75, 0, 0.75, 0, 1.5};
  for (int64_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(y[0].get_f64(i), want[i]) << i;
}

TEST(Session, WrongInputIsAUserError) {
  Session s = Session::open(write_temp("tiny2.tir", kTinyModel), cpu());
  const std::string e = user_error([&] { s.run({Tensor(DType::kF32, {3, 2})}); });
  EXPECT_NE(e.find("x"), std::string::npos) << e;
  EXPECT_NE(e.find("f32[2,3]"), std::string::npos) << e;
}

TEST(Session, MissingFileIsAUserError) {
  EXPECT_EQ(user_error([] { Session::open("/nonexistent/model.onnx", cpu()); }),
            "/nonexistent/model.onnx: cannot open file");
}

TEST(Session, GpuWithoutDeviceIsAUserError) {
  if (device::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string path = write_temp("tiny3.tir", kTinyModel);
  EXPECT_EQ(user_error([&] { Session::open(path); }).rfind("no CUDA device: ", 0), 0u);
  const ir::Graph g = load_graph(path);
  EXPECT_EQ(user_error([&] { Session::from_graph(g); }).rfind("no CUDA device: ", 0), 0u);
}

TEST(CompileFile, CrossCompilesWithoutAGpuAndReportsEachLaunch) {
  const std::string path = write_temp("tiny4.tir", kTinyModel);
  const std::string engine = write_temp("tiny4.tsl", "");
  const CompileReport r = compile_file(path, engine, {}, "sm_90a");
  EXPECT_TRUE(is_engine_file(engine));
  EXPECT_EQ(r.summary.rfind("compiled " + path + " for sm_90a (NVIDIA H100 SXM, 132 SMs), fp16", 0),
            0u)
      << r.summary;
  // Add and Relu run as op kernels; the edge casts of the fp16 pipeline as well.
  bool add = false;
  for (const LaunchInfo& l : r.launches) {
    EXPECT_EQ(l.instruction, "SIMT") << l.node;
    add |= l.op == "Add";
  }
  EXPECT_TRUE(add);
  EXPECT_EQ(user_error([&] { compile_file(path, engine, {}, "sm_75"); }).rfind(
                "unknown target 'sm_75'", 0),
            0u);
}

TEST(CompileFile, EngineFileWithCompileOptionsIsAUserError) {
  const std::string path = write_temp("tiny5.tir", kTinyModel);
  const std::string engine = write_temp("tiny5.tsl", "");
  compile_file(path, engine, {}, "sm_90a");
  Options o;
  o.batch = 4;
  EXPECT_EQ(user_error([&] { Session::open(engine, o); }),
            engine + " is a compiled engine: batch and input shapes apply when compiling a model "
                     "(tessel compile)");
  EXPECT_EQ(user_error([&] { Session::open(engine, cpu()); }),
            engine + " is a compiled engine: it runs on the GPU only");
}

}  // namespace
}  // namespace tessel
