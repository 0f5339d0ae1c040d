// `tessel compile` and the engine file through `tessel run/bench/profile`, on a machine
// without a GPU: compiling for a named target works anywhere (NVRTC only); every check on the
// file comes before the search for a GPU, so a damaged file is reported as such here too.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_util.h"

namespace tessel::testing {
namespace {

bool has_gpu() {
  return run_tessel("run --device cuda /nonexistent.tir").out.find("no CUDA device") ==
         std::string::npos;
}

// A dense layer with bias and relu over a batch of 2: a Tensor Core GEMM in fp16.
std::string dense_tir() {
  std::string w, b;
  for (int i = 0; i < 32 * 64; ++i) w += (i ? ", " : "") + std::to_string((i % 13 - 6) * 0.0625);
  for (int i = 0; i < 32; ++i) b += (i ? ", " : "") + std::to_string((i % 5 - 2) * 0.25);
  return "graph @g opset 17 {\n"
         "  input %x : f32[2,64]\n"
         "  const %w : f32[32,64] = [" +
         w +
         "]\n"
         "  const %b : f32[32] = [" +
         b +
         "]\n"
         "  %y = Gemm(%x, %w, %b) {transB = 1} : f32[2,32] @\"fc\"\n"
         "  %z = Relu(%y) : f32[2,32] @\"relu\"\n"
         "  output %z\n"
         "}\n";
}

// Kernels compiled by this test process go to its own cache, not the user's.
std::string cache_env() { return "TESSEL_CACHE_DIR=" + (temp_dir() / "cache").string(); }

TEST(EngineCli, CompileWithoutGpuNeedsATarget) {
  if (has_gpu()) GTEST_SKIP() << "a CUDA device is present: compile targets it by default";
  const std::string tir = write_file("dense1.tir", dense_tir());
  expect_user_error("compile " + tir + " -o " + (temp_dir() / "d.tsl").string(),
                    "no CUDA device to compile for (");
  const Result r = run_tessel("compile " + tir + " -o " + (temp_dir() / "d.tsl").string());
  EXPECT_NE(r.out.find("); pass --target sm_90a or --target sm_80 to compile for a GPU that is "
                       "not here\n"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(temp_dir() / "d.tsl"));
}

TEST(EngineCli, CompileBadArguments) {
  const std::string tir = write_file("dense2.tir", dense_tir());
  expect_user_error("compile " + tir + " -o x.tsl --target sm_75",
                    "unknown target 'sm_75': tessel compiles for sm_90a (NVIDIA H100 SXM), sm_80 "
                    "(NVIDIA A100 SXM)");
  expect_user_error("compile " + tir + " --target sm_90a", "--output is required");
  expect_user_error("compile " + tir + " -o x.tsl --target sm_90a --precision fp8", "--precision");
  expect_user_error("compile /nonexistent/m.onnx -o x.tsl --target sm_90a",
                    "/nonexistent/m.onnx: cannot open file");
  expect_user_error("compile " + tir + " -o /nonexistent/dir/x.tsl --target sm_90a",
                    "/nonexistent/dir/x.tsl: cannot open for writing", cache_env());
}

// One compile, then every way of using the file that fails without a GPU, each before
// anything looks for one when the file is to blame.
TEST(EngineCli, CompiledFileAndItsErrors) {
  const std::string tir = write_file("dense3.tir", dense_tir());
  const std::string tsl = (temp_dir() / "dense.tsl").string();
  const Result r = run_tessel("compile " + tir + " -o " + tsl + " --target sm_90a", cache_env());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(
      r.out.rfind("compiled " + tir + " for sm_90a (NVIDIA H100 SXM, 132 SMs), fp16, batch 2: ", 0),
      0u)
      << r.out;
  EXPECT_NE(r.out.find(" (1 on Tensor Cores), arena "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ms -> " + tsl + "\n"), std::string::npos) << r.out;
  std::ifstream f(tsl, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 32u);
  EXPECT_EQ(bytes.substr(0, 8), "TSLENGIN");
  for (const auto& entry : std::filesystem::directory_iterator(temp_dir()))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();

  expect_user_error("run " + tsl, tsl + " is a compiled engine: it runs with --device cuda only");
  expect_user_error("run " + tsl + " --device cuda --batch 4",
                    tsl + ": batch 4: the engine is compiled for batch 2 (compile it with "
                          "--batch A:B for a range)");
  expect_user_error("run " + tsl + " --device cuda --batch 1:4",
                    tsl + " is a compiled engine: --input-shape, --precision, --db and a batch "
                          "range apply when compiling a model (tessel compile)");
  expect_user_error("bench " + tsl + " --precision fp32", "apply when compiling a model");
  expect_user_error("profile " + tsl + " --db tuning.json", "apply when compiling a model");

  std::string flipped = bytes;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x40);
  const std::string bad = write_file("bad.tsl", flipped);
  for (const char* command : {"run --device cuda ", "bench ", "profile "})
    expect_user_error(command + bad,
                      "error: engine file " + bad + " is corrupt: checksum mismatch");
  const std::string cut = write_file("cut.tsl", bytes.substr(0, bytes.size() - 5));
  expect_user_error("run --device cuda " + cut, "error: engine file " + cut +
                                                    " is truncated: it has " +
                                                    std::to_string(bytes.size() - 5) + " bytes");
  // Not an engine file at all, whatever its name says.
  const std::string junk = write_file("junk.tsl", "these bytes are not an engine");
  expect_user_error("run --device cuda " + junk, "error: " + junk + " is not a tessel engine file");

  if (has_gpu()) return;  // the rest is about a machine without one
  for (const char* command : {"run --device cuda ", "bench ", "profile "})
    expect_user_error(command + tsl, "error: no CUDA device: ");
}

TEST(EngineCli, BenchAndProfileWithoutGpu) {
  if (has_gpu()) GTEST_SKIP() << "a CUDA device is present";
  const std::string tir = write_file("dense4.tir", dense_tir());
  expect_user_error("bench " + tir, "error: no CUDA device: ");
  expect_user_error("bench " + tir + " --json " + (temp_dir() / "b.json").string(),
                    "error: no CUDA device: ");
  expect_user_error("profile " + tir + " --trace " + (temp_dir() / "t.json").string(),
                    "error: no CUDA device: ");
  expect_user_error("bench " + tir + " --reps 0", "--reps");
}

// Malformed batches and ranges, each one line before anything is loaded or compiled.
TEST(EngineCli, BadBatchRanges) {
  const std::string tir = write_file("dense5.tir", dense_tir());
  const std::string compile = "compile " + tir + " -o x.tsl --target sm_90a ";
  expect_user_error(compile + "--batch 0:4",
                    "error: --batch '0:4': the smallest batch is 0, expected at least 1");
  expect_user_error(compile + "--batch 8:4", "error: --batch '8:4': the range is empty (8 > 4)");
  expect_user_error(compile + "--batch x",
                    "error: --batch 'x': expected a batch size such as 8 or a range such as 1:64");
  expect_user_error(compile + "--batch 1:4:8",
                    "error: --batch '1:4:8': expected a batch size such as 8 or a range such as "
                    "1:64");
  expect_user_error(compile + "--batch 1:8 --opt-batch 9",
                    "error: --batch 1:8 --opt-batch 9: the opt batch 9 is outside the range");
  expect_user_error(compile + "--batch 8 --opt-batch 4",
                    "error: --opt-batch 4: it applies to a batch range such as --batch 1:64");
  expect_user_error(compile + "--batch 8 --profile-every 4",
                    "error: --profile-every 4: it applies to a batch range such as --batch 1:64");
  expect_user_error(compile + "--batch 1:8 --profile-every -2",
                    "error: --batch 1:8 --profile-every -2: a profile every -2 batches, expected "
                    "a positive step");
  // A .tir graph has fixed shapes: no input follows the batch.
  expect_user_error(compile + "--batch 1:4",
                    "error: batch range 1:4: input 'x' is f32[2,64] at batch 1; a batch range "
                    "needs every input and output to lead with the batch (a symbolic first "
                    "dimension)",
                    cache_env());
  // Commands that take one batch say where a range goes.
  for (const char* command : {"run --device cpu ", "inspect ", "predict ", "bench "})
    expect_user_error(command + tir + " --batch 1:4",
                      "error: --batch 1:4: this command takes one batch such as --batch 4; a "
                      "batch range (dynamic batch) is for tessel compile");
}

TEST(EngineCli, Version) {
  const Result r = run_tessel("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "tessel 0.1.0\n");
}

}  // namespace
}  // namespace tessel::testing
