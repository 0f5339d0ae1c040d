// The public API (include/tessel/tessel.h) without a GPU: loading .tir models, CPU sessions
// against the reference executor, the user errors every entry point raises, and the GPU
// entry points' "no CUDA device" error on a machine without one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "device/cuda_api.h"
#include "frontend/onnx/model_builder.h"
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

// y = Relu(x + b) on x of a symbolic batch N: an ONNX model, since a .tir graph has fixed shapes.
std::string dynamic_model(const std::string& name) {
  onnx::testing::ModelBuilder m;
  m.input("x", ::onnx::TensorProto::FLOAT, {"N", 3});
  m.initializer_f32("b", {3}, {0.5f, -1.25f, 2.0f});
  m.node("Add", {"x", "b"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", ::onnx::TensorProto::FLOAT, {"N", 3});
  return write_temp(name, m.bytes());
}

TEST(BatchRange, ParsesOneBatchOrARange) {
  const BatchRange one = parse_batch_range("8");
  EXPECT_EQ(one.min, 8);
  EXPECT_EQ(one.max, 8);
  const BatchRange r = parse_batch_range("1:64");
  EXPECT_EQ(r.min, 1);
  EXPECT_EQ(r.max, 64);
  EXPECT_EQ(r.opt, 0);
  EXPECT_EQ(user_error([] { parse_batch_range("x"); }),
            "--batch 'x': expected a batch size such as 8 or a range such as 1:64");
  EXPECT_EQ(user_error([] { parse_batch_range("0:4"); }),
            "--batch '0:4': the smallest batch is 0, expected at least 1");
  EXPECT_EQ(user_error([] { parse_batch_range("8:4"); }),
            "--batch '8:4': the range is empty (8 > 4)");
  for (const char* bad : {"", ":", "1:", ":4", "1:2:3", "-1", "1:-4", "+2", "2x", " 2"})
    EXPECT_EQ(user_error([&] { parse_batch_range(bad); }),
              std::string("--batch '") + bad +
                  "': expected a batch size such as 8 or a range such as 1:64")
        << bad;
  EXPECT_EQ(user_error([] { check_batch_range({1, 8, 9}, "batch (1, 8)"); }),
            "batch (1, 8): the opt batch 9 is outside the range");
}

// A CPU session for a batch range runs each batch as the model imported at that batch.
TEST(Session, CpuRangeRunsAnyBatchOfIt) {
  Options o = cpu();
  o.batch_range = {1, 4, 0};
  Session s = Session::open(dynamic_model("dyn.onnx"), o);
  EXPECT_EQ(s.inputs()[0].shape, (Shape{kDynamicBatch, 3}));
  EXPECT_EQ(s.outputs()[0].shape, (Shape{kDynamicBatch, 3}));
  EXPECT_EQ(s.batch_range().min, 1);
  EXPECT_EQ(s.batch_range().max, 4);
  EXPECT_EQ(s.batch_range().opt, 4);
  EXPECT_TRUE(s.profiles().empty());
  const std::vector<double> x = {-1, 2, -3, 0.25, 1, -0.5, 3, 0, 1.25};
  const std::vector<double> want = {0, 0.75, 0, 0.75, 0, 1.5, 3.5, 0, 3.25};  // by hand
  for (int64_t b : {1, 3}) {
    SCOPED_TRACE(b);
    const Tensor in = Tensor::from_doubles(
        DType::kF32, {b, 3}, std::vector<double>(x.begin(), x.begin() + 3 * b));
    const std::vector<Tensor> y = s.run({in});
    ASSERT_EQ(y[0].shape(), (Shape{b, 3}));
    for (int64_t i = 0; i < 3 * b; ++i) EXPECT_DOUBLE_EQ(y[0].get_f64(i), want[i]) << i;
  }
  EXPECT_EQ(user_error([&] { s.run({Tensor(DType::kF32, {5, 3})}); }),
            "batch 5 is outside the session's batch range 1:4");
  EXPECT_EQ(user_error([&] { s.run({Tensor(DType::kF32, {2, 4})}); }),
            "input 'x': expected f32[2,3], got f32[2,4]");
  EXPECT_EQ(user_error([&] { s.run({}); }), "0 inputs given, the model has 1");
}

TEST(Session, RangeErrors) {
  Options o = cpu();
  o.batch_range = {1, 4, 0};
  // A .tir graph's shapes are fixed: its input does not follow the batch.
  EXPECT_EQ(user_error([&] { Session::open(write_temp("fixed.tir", kTinyModel), o); }),
            "batch range 1:4: input 'x' is f32[2,3] at batch 1; a batch range needs every input "
            "and output to lead with the batch (a symbolic first dimension)");
  EXPECT_EQ(user_error([&] { Session::from_graph(load_graph(write_temp("g.tir", kTinyModel)), o); }),
            "a batch range needs the model file (Session::open): an imported graph has fixed "
            "shapes");
  o.batch = 2;
  EXPECT_EQ(user_error([&] { Session::open(dynamic_model("dyn2.onnx"), o); }),
            "batch range 1:4 and batch 2 given: pass one or the other");
  o.batch = 0;
  o.batch_range = {4, 2, 0};
  EXPECT_EQ(user_error([&] { Session::open(dynamic_model("dyn3.onnx"), o); }),
            "batch range 4:2: the range is empty (4 > 2)");
}

// A dynamic engine cross-compiled here: the summary names the profiles, and the engine file
// refuses a batch range given again when it is opened.
TEST(CompileFile, BatchRangeCompilesProfiles) {
  const std::string model = dynamic_model("dyn4.onnx");
  const std::string engine = write_temp("dyn4.tsl", "");
  Options o;
  o.batch_range = {1, 8, 3};
  const CompileReport r = compile_file(model, engine, o, "sm_90a");
  EXPECT_EQ(r.profiles, (std::vector<int64_t>{1, 2, 3, 4, 8}));
  EXPECT_NE(r.summary.find("batch 1:8 (profiles 1, 2, 3, 4, 8; opt 3)"), std::string::npos)
      << r.summary;
  EXPECT_FALSE(r.launches.empty());
  Options again;
  again.batch_range = {1, 8, 0};
  EXPECT_EQ(user_error([&] { Session::open(engine, again); }),
            engine + " is a compiled engine: batch and input shapes apply when compiling a model "
                     "(tessel compile)");
}

}  // namespace
}  // namespace tessel
