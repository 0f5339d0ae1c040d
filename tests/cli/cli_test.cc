// End-to-end tests of the `tessel` command: exit codes and the one-line error contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "compiler/cnn_blocks.h"

namespace {

using tessel::testing::expect_user_error;
using tessel::testing::Result;
using tessel::testing::run_tessel;
using tessel::testing::temp_dir;
using tessel::testing::write_file;

const char* kTir = R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  %y = Relu(%x) : f32[1,2,2,2] @"relu"
  %z = Relu(%y) : f32[1,2,2,2] @"dead"
  output %y
}
)";

TEST(Cli, MissingFile) { expect_user_error("inspect /nonexistent/model.onnx", "/nonexistent/model.onnx: cannot open file"); }

// `tessel compare` runs the Python module; an interpreter that does not start is one line.
// (The comparison itself is tested in tests/python/compare_test.py.)
TEST(Cli, CompareWithoutPython) {
  expect_user_error("compare m.onnx --against onnxruntime",
                    "tessel compare runs the Python module with /nonexistent/python3, which does "
                    "not start: No such file or directory (set TESSEL_PYTHON to a Python that has "
                    "it)",
                    "TESSEL_PYTHON=/nonexistent/python3");
}

// `tessel serve` runs the Python module too (tests/python/serve_test.py tests the server).
TEST(Cli, ServeWithoutPython) {
  expect_user_error("serve m.onnx --device cpu",
                    "tessel serve runs the Python module with /nonexistent/python3, which does "
                    "not start: No such file or directory (set TESSEL_PYTHON to a Python that has "
                    "it)",
                    "TESSEL_PYTHON=/nonexistent/python3");
}

TEST(Cli, NotAnOnnxFile) {
  std::string path = write_file("garbage.onnx", std::string("\x08\x96\x01 this is not protobuf \xff\xfe", 28));
  expect_user_error("inspect " + path, path);
}

TEST(Cli, EmptyFileIsNotAModel) {
  std::string path = write_file("empty.onnx", "");
  expect_user_error("run " + path, path);
}

TEST(Cli, BadCommandLine) {
  Result r = run_tessel("run");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  expect_user_error("frobnicate", "frobnicate");
}

TEST(Cli, BadNpyInput) {
  std::string tir = write_file("relu.tir", kTir);
  std::string npy = write_file("bad.npy", "\x93NUMPY garbage");
  expect_user_error("run " + tir + " --input x=" + npy, "bad.npy");
}

TEST(Cli, WrongInputShape) {
  std::string tir = write_file("relu2.tir", kTir);
  // A valid .npy of the wrong shape: f32[3].
  std::string npy("\x93NUMPY\x01\x00", 8);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  npy += static_cast<char>(header.size());
  npy += '\0';
  npy += header;
  npy.append(12, '\0');
  std::string path = write_file("wrong.npy", npy);
  expect_user_error("run " + tir + " --input x=" + path, "input 'x': expected f32[1,2,2,2], got f32[3]");
}

TEST(Cli, UnknownInputName) {
  std::string tir = write_file("relu3.tir", kTir);
  expect_user_error("run " + tir + " --input nope=a.npy", "no input named 'nope'");
}

TEST(Cli, OptRunsPassesAndPrintsIr) {
  std::string tir = write_file("dce.tir", kTir);
  Result r = run_tessel("opt --passes=dce " + tir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("@\"relu\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("@\"dead\""), std::string::npos) << r.out;
  expect_user_error("opt --passes=nosuchpass " + tir, "unknown pass 'nosuchpass'");
}

TEST(Cli, TirSyntaxErrorNamesLine) {
  std::string tir = write_file("broken.tir", "graph @g opset 17 {\n  input %x : f32[1]\n  output %q\n}\n");
  expect_user_error("opt " + tir, "broken.tir:3:10: use of undefined value %q");
}

TEST(Cli, RunWritesOutputsAsNpy) {
  std::string tir = write_file("relu4.tir", kTir);
  std::string out = (temp_dir() / "outs").string();
  Result r = run_tessel("run " + tir + " --seed 3 --output-dir " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::filesystem::exists(out + "/y.npy")) << r.out;
  EXPECT_NE(r.out.find("median"), std::string::npos);
}

// A constant of `count` small distinct values, in textual IR list syntax.
std::string weights(int count) {
  std::string r = "[";
  for (int i = 0; i < count; ++i) r += (i ? ", " : "") + std::to_string((i % 7 - 3) * 0.125);
  return r + "]";
}

// The line of `explain`'s output that starts with node name `name`; empty when there is none.
std::string line_of(const std::string& out, const std::string& name) {
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    std::string line = out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.rfind(name + " ", 0) == 0) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

// Two chains: an RGB conv (3 -> 8 channels, 3x3) then a max pool and a relu, which stays a
// node of its own (nothing fuses into a pool); and a 64 -> 64 1x1 conv whose relu fuses into
// its epilogue.
std::string explain_tir() {
  return "graph @g opset 17 {\n"
         "  input %x : f32[1,3,8,8]\n"
         "  input %u : f32[1,64,4,4]\n"
         "  const %wa : f32[8,3,3,3] = " + weights(8 * 3 * 3 * 3) + "\n"
         "  const %wb : f32[64,64,1,1] = " + weights(64 * 64) + "\n"
         "  %a = Conv(%x, %wa) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,8,8,8] @\"conv_a\"\n"
         "  %p = MaxPool(%a) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,8,4,4] @\"pool\"\n"
         "  %y = Relu(%p) : f32[1,8,4,4] @\"relu_p\"\n"
         "  %b = Conv(%u, %wb) {kernel_shape = [1, 1]} : f32[1,64,4,4] @\"conv_b\"\n"
         "  %z = Relu(%b) : f32[1,64,4,4] @\"relu_b\"\n"
         "  output %y\n"
         "  output %z\n"
         "}\n";
}

// `opt --pipeline`: the passes compile runs, for fp16 and fp32; the convs become tessel.Conv
// with the ReLU fused, in f16 only for gpu-fp16.
TEST(Cli, OptRunsTheGpuPipeline) {
  const std::string tir = write_file("pipeline.tir", explain_tir());
  const Result fp16 = run_tessel("opt --pipeline=gpu-fp16 --elide-constants 8 " + tir);
  ASSERT_EQ(fp16.code, 0) << fp16.out;
  EXPECT_NE(fp16.out.find("tessel.Conv"), std::string::npos) << fp16.out;
  EXPECT_EQ(fp16.out.find("@\"relu_b\""), std::string::npos) << "relu_b fuses into conv_b\n" << fp16.out;
  EXPECT_NE(fp16.out.find("f16["), std::string::npos) << fp16.out;
  const Result fp32 = run_tessel("opt --pipeline=gpu-fp32 --elide-constants 8 " + tir);
  ASSERT_EQ(fp32.code, 0) << fp32.out;
  EXPECT_NE(fp32.out.find("tessel.Conv"), std::string::npos) << fp32.out;
  EXPECT_EQ(fp32.out.find("f16["), std::string::npos) << fp32.out;
  expect_user_error("opt --pipeline=gpu-int4 " + tir, "gpu-int4 not in {gpu-fp16,gpu-fp32}");
  expect_user_error("opt --pipeline=gpu-fp16 --passes=dce " + tir, "--passes excludes --pipeline");
}

TEST(Cli, ExplainSaysHowEachNodeRuns) {
  std::string tir = write_file("explain.tir", explain_tir());
  Result r = run_tessel("explain " + tir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "conv_b").find("tessel.Conv"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "conv_b").find("Tensor Cores ("), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "pool").find("f16[1,4,4,8]"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "pool").find("CUDA kernel"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "relu_p").find("CUDA kernel"), std::string::npos) << r.out;
  EXPECT_EQ(line_of(r.out, "relu_b"), "") << "relu_b fuses into conv_b\n" << r.out;
  // u (64 channels) keeps its edge Transpose; the RGB stem conv_a reads x itself (fuse.cc),
  // and conv_b stores the fp32 NCHW output z itself.
  EXPECT_NE(r.out.find("u.to_nhwc                Transpose          f16[1,4,4,64]          CUDA kernel\n"
                       "    layout: graph edge: NCHW<->NHWC"),
            std::string::npos) << r.out;
  EXPECT_EQ(line_of(r.out, "x.to_nhwc"), "") << r.out;
  EXPECT_EQ(line_of(r.out, "x.nhwc.align_channels"), "") << r.out;
  EXPECT_NE(r.out.find("    layout: reads the NCHW f32 input itself (graph edge folded into the conv)"),
            std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "conv_b").find("f32[1,64,4,4]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    epilogue: relu -> store f32 nchw(out=4x4)\n"
                       "    layout: stores NCHW f32 itself (graph edge folded into the store)"),
            std::string::npos) << r.out;
  // fp16: u's Cast and Transpose, y's Transpose and Cast, the two convs (relu_b and z's edge
  // fused into conv_b), the pool and relu_p.
  EXPECT_NE(r.out.find("summary: 8 nodes, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 2 layout changes, 1 fused epilogues\n"), std::string::npos) << r.out;

  // fp32 operands do not qualify for Tensor Cores: both convs run SIMT and say why.
  r = run_tessel("explain " + tir + " --precision fp32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(line_of(r.out, "conv_b").find("SIMT: dtype f32 operands"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary: 6 nodes, 0 on Tensor Cores, 2 SIMT contractions, 4 other "
                       "kernels, 0 unsupported, 2 layout changes, 1 fused epilogues\n"),
            std::string::npos) << r.out;
}

// A QDQ residual block (compiler/cnn_blocks.h): every QuantizeLinear / DequantizeLinear that
// no contraction takes runs as a CUDA kernel on sm_90a, and nothing is unsupported.
TEST(Cli, ExplainRunsQdqNodesOnTheGpu) {
  const std::string tir = write_file("qdq.tir", tessel::testing::qdq_residual_block_tir());
  const Result r = run_tessel("explain " + tir);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* node : {"q_x", "dq_x", "q_a", "dq_a", "q_out", "dq_out"}) {
    const std::string line = line_of(r.out, node);
    EXPECT_NE(line.find("CUDA kernel"), std::string::npos) << node << "\n" << r.out;
  }
  // conv_b's per-tensor asymmetric pair (int8, zero point -2) is its fake quantization.
  EXPECT_EQ(line_of(r.out, "q_b"), "") << r.out;
  EXPECT_NE(r.out.find("round(0.05) -> clip(-126, 129) -> mul("), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "q_a").find("u8[2,6,6,16]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not supported"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no GPU kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 unsupported,"), std::string::npos) << r.out;
}

// The number after `key` on the line starting with `prefix` (0 when there is none).
double number_after(const std::string& out, const std::string& prefix, const std::string& key) {
  const std::string line = line_of(out, prefix);
  const size_t at = line.find(key);
  return at == std::string::npos ? 0.0 : std::stod(line.substr(at + key.size()));
}

// `tessel predict`: a time per launching node, the cost model's for the convs and a roofline
// for the other kernels; totals that add up; the A100 slower than the H100 on the same model;
// the same numbers in the JSON form.
TEST(Cli, PredictGivesEachKernelsTimeAndTheTotal) {
  const std::string tir = write_file("predict.tir", explain_tir());
  const std::string json = (temp_dir() / "predict.json").string();
  const Result h100 = run_tessel("predict " + tir + " --target sm_90a --json " + json);
  ASSERT_EQ(h100.code, 0) << h100.out;
  EXPECT_NE(line_of(h100.out, "conv_b").find("(cost model)"), std::string::npos) << h100.out;
  EXPECT_NE(line_of(h100.out, "pool").find("(bandwidth)"), std::string::npos) << h100.out;
  const double total_h100 = number_after(h100.out, "total:", "kernels, ");
  EXPECT_GT(total_h100, 0.0) << h100.out;
  EXPECT_NE(line_of(h100.out, "total:").find("device memory"), std::string::npos) << h100.out;
  const std::string json_a100 = (temp_dir() / "predict_a100.json").string();
  const Result a100 =
      run_tessel("predict " + tir + " --target sm_80 --total-only --json " + json_a100);
  ASSERT_EQ(a100.code, 0) << a100.out;
  EXPECT_GE(number_after(a100.out, "total:", "kernels, "), total_h100) << a100.out;
  EXPECT_EQ(line_of(a100.out, "conv_b"), "") << a100.out;
  auto read = [](const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const std::string text = read(json);
  // The totals in full (the table rounds this small model's to the same 0.007 ms): the JSON's
  // first "microseconds" is the whole run's.
  auto total_us = [](const std::string& j) {
    const size_t at = j.find("\"microseconds\": ");
    return at == std::string::npos ? 0.0 : std::stod(j.substr(at + 16));
  };
  EXPECT_GT(total_us(read(json_a100)), total_us(text));
  EXPECT_GT(total_us(text), 0.0);
  EXPECT_NE(text.find("\"target\": \"sm_90a\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"node\": \"conv_b\""), std::string::npos) << text;
  // The total is one replay: every kernel's time and its gap.
  const nlohmann::json j = nlohmann::json::parse(text);
  double replay = 0;
  for (const nlohmann::json& n : j["nodes"]) {
    EXPECT_GT(n["analytical_us"].get<double>(), 0.0) << n.dump();
    replay += n["microseconds"].get<double>() + n["gap_us"].get<double>();
    // A contraction says its operands' dtype (fp16 here), an op kernel none.
    if (n["node"] == "conv_b") {
      EXPECT_EQ(n["operand_dtype"], "f16") << n.dump();
    }
    if (n["node"] == "pool") {
      EXPECT_EQ(n["operand_dtype"], "") << n.dump();
    }
  }
  EXPECT_NEAR(j["microseconds"].get<double>(), replay, 1e-6);
  expect_user_error("predict " + tir + " --target sm_99", "sm_99");
  expect_user_error("predict /nonexistent/model.onnx", "/nonexistent/model.onnx: cannot open file");
}

// `tessel tune` measures on the GPU: without one it says so in one line; --merge needs no GPU
// and writes the union of its databases; a damaged database is refused by name.
TEST(Cli, TuneNeedsAGpuAndMergesDatabases) {
  const std::string tir = write_file("tune.tir", explain_tir());
  const std::string db = (temp_dir() / "tune.json").string();
  const Result r = run_tessel("tune " + tir + " --db " + db);
  if (r.code == 0) GTEST_SKIP() << "a GPU is present: tune ran";
  expect_user_error("tune " + tir + " --db " + db, "tessel tune measures on the GPU: no CUDA device");
  expect_user_error("tune " + tir, "tune MODEL --db FILE");
  expect_user_error("tune " + tir + " --db " + db + " --budget soon", "--budget 'soon'");
  expect_user_error("tune " + tir + " --db " + db + " --explore 8 --per-layer 3",
                    "--explore goes with neither --per-layer nor --retune");
  // An empty database (FNV-1a 64 of "[]" is 09612b07b5ecb5a5), merged with itself.
  const std::string a = write_file("a.json", R"({
 "checksum": "09612b07b5ecb5a5",
 "format": "tessel-tuning-db",
 "records": [],
 "version": 2
})");
  const Result merged = run_tessel("tune --merge " + a + " " + a + " -o " + db);
  ASSERT_EQ(merged.code, 0) << merged.out;
  EXPECT_NE(merged.out.find("merged 2 databases: 0 records -> " + db), std::string::npos) << merged.out;
  const Result explain = run_tessel("explain " + tir + " --db " + db);
  EXPECT_EQ(explain.code, 0) << explain.out;
  EXPECT_EQ(explain.out.find(" tuned"), std::string::npos) << explain.out;
  const std::string damaged = write_file("damaged.json", "{\"format\": \"tessel-tuning-db\"");
  expect_user_error("tune --merge " + damaged + " -o " + db, damaged + ": not a tessel tuning database");
  expect_user_error("explain " + tir + " --db " + damaged, damaged + ": not a tessel tuning database");
}

// `tessel tune --replay`: no GPU; each unique contraction's default pick against what a tune log
// measured of it, and the totals over the model's nodes; malformed logs are refused by line.
TEST(Cli, TuneReplaysTheDefaultsAgainstALog) {
  const std::string tir = write_file("replay.tir", explain_tir());
  auto read_json = [](const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  };
  // An empty log: every contraction listed, none timed.
  const std::string empty = write_file("empty.jsonl", "");
  const std::string json = (temp_dir() / "replay.json").string();
  const Result none = run_tessel("tune " + tir + " --replay " + empty + " --target sm_90a --json " + json);
  ASSERT_EQ(none.code, 0) << none.out;
  const nlohmann::json a = read_json(json);
  ASSERT_TRUE(a.is_object() && !a["contractions"].empty()) << none.out;
  EXPECT_EQ(a["target"], "sm_90a");
  EXPECT_EQ(a["timed"], 0);
  for (const nlohmann::json& c : a["contractions"]) {
    EXPECT_TRUE(c["default_us"].is_null() && c["fastest_us"].is_null()) << c.dump();
    EXPECT_FALSE(c["key"].get<std::string>().empty());
  }
  EXPECT_NE(none.out.find("defaults timed in the log: 0 of"), std::string::npos) << none.out;

  // A log that timed the first contraction's default at 10 us (and again at 12: the fastest
  // counts), a rival at 5 us, a failed candidate (0 us) and a contraction of another model.
  const nlohmann::json& first = a["contractions"][0];
  const std::string key = first["key"], def = first["default"];
  auto line = [](const std::string& k, const std::string& s, double us) {
    return nlohmann::json{{"key", k}, {"node", "n"}, {"schedule", s}, {"rank", 0}, {"microseconds", us}}.dump() + "\n";
  };
  const std::string log = write_file("replay.jsonl", line(key, def, 12.0) + line(key, def, 10.0) +
                                                         line(key, "tma_128x128x64_s4_r1_c132", 5.0) +
                                                         line(key, "tma_64x64x64_s8_r1_c132", 0.0) +
                                                         line("another model's key", def, 1.0));
  const Result timed = run_tessel("tune " + tir + " --replay " + log + " --target sm_90a --json " + json);
  ASSERT_EQ(timed.code, 0) << timed.out;
  const nlohmann::json b = read_json(json);
  const nlohmann::json& row = b["contractions"][0];
  EXPECT_EQ(row["default_us"], 10.0);
  EXPECT_EQ(row["fastest_us"], 5.0);
  EXPECT_EQ(row["fastest"], "tma_128x128x64_s4_r1_c132");
  EXPECT_EQ(b["timed"], 1);
  const int nodes = row["nodes"];
  EXPECT_DOUBLE_EQ(b["default_us"].get<double>(), 10.0 * nodes);
  EXPECT_DOUBLE_EQ(b["fastest_us"].get<double>(), 5.0 * nodes);
  EXPECT_NE(timed.out.find("(defaults / fastest 2.000)"), std::string::npos) << timed.out;

  // --relog: the log again, each line of this model's keys with the estimate of today's cost
  // model (as tune logs it); the other model's line, a
  // schedule the contraction cannot take by name and one that does not fit are dropped and
  // counted. conv_b: a 16 x 64 x 64 GEMM that mma.sync's 64x64 and 32x32 tiles both take.
  const nlohmann::json* conv_b = nullptr;
  for (const nlohmann::json& c : a["contractions"])
    if (c["node"] == "conv_b") conv_b = &c;
  ASSERT_NE(conv_b, nullptr) << a.dump();
  const std::string kb = (*conv_b)["key"];
  const std::string relog_in = write_file(
      "relog_in.jsonl", line(kb, "tc_64x64x32_s3_w32x32_sk1_r8", 12.0) + line(kb, "tc_32x32x32_s2_w16x16_sk1_r8", 5.0) +
                            line(kb, "tc_1_2_3", 7.0) + line(kb, "tc_256x256x64_s8_w128x128_sk1_r8", 3.0) +
                            line("another model's key", def, 1.0));
  const std::string relogged = (temp_dir() / "relogged.jsonl").string();
  const Result re = run_tessel("tune " + tir + " --replay " + relog_in + " --target sm_90a --relog " + relogged);
  ASSERT_EQ(re.code, 0) << re.out;
  EXPECT_NE(re.out.find("relog: 2 lines re-estimated into " + relogged +
                        "; dropped 1 of keys not in the model, 2 of schedules their contraction does not take"),
            std::string::npos)
      << re.out;
  std::ifstream rf(relogged);
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(rf, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["schedule"], "tc_64x64x32_s3_w32x32_sk1_r8");
  EXPECT_EQ(lines[0]["microseconds"], 12.0);  // the measurement travels unchanged
  EXPECT_EQ(lines[1]["schedule"], "tc_32x32x32_s2_w16x16_sk1_r8");
  for (const nlohmann::json& l : lines) EXPECT_GT(l["estimate_us"].get<double>(), 0.0) << l.dump();
  EXPECT_NE(lines[0]["estimate_us"], lines[1]["estimate_us"]);
  expect_user_error("tune " + tir + " --db x.json --relog y.jsonl", "--target, --json and --relog go with --replay");

  const std::string bad = write_file("bad.jsonl", line(key, def, 10.0) + "{\"key\": 3}\n");
  expect_user_error("tune " + tir + " --replay " + bad, bad + ":2: not a tune log line");
  expect_user_error("tune " + tir + " --replay /nonexistent/log.jsonl", "/nonexistent/log.jsonl: cannot open file");
  expect_user_error("tune " + tir + " --replay " + log + " --db x.json", "no --db (nothing is measured)");
  expect_user_error("tune " + tir + " --db x.json --target sm_80", "--target, --json and --relog go with --replay");
}

TEST(Cli, ExplainMissingFileIsOneLineError) {
  expect_user_error("explain /nonexistent/model.onnx", "/nonexistent/model.onnx: cannot open file");
  std::string tir = write_file("explain2.tir", kTir);
  expect_user_error("explain " + tir + " --precision fp8", "--precision");
}

TEST(Cli, HelpExitsZero) {
  EXPECT_EQ(run_tessel("--help").code, 0);
  EXPECT_EQ(run_tessel("run --help").code, 0);
}

}  // namespace

namespace tessel {
namespace {

using testing::Result;
using testing::run_tessel;
using testing::write_file;

// codegen (and bench-op) plan a workload as the engine would: a grouped conv runs the
// packed-groups Tensor Core kernel, and one of 4 channels per group is first widened into
// groups of 8 (widen-narrow-groups' rule) -- 16 groups, 4 per 32-channel N tile.
TEST(Cli, CodegenPlansGroupedWorkloadsAsTheEngineRunsThem) {
  const std::string csv = write_file(
      "grouped.csv",
      "name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups\n"
      "resnext_g32_c128,2,14,14,128,128,3,3,1,1,1,32\n"
      "regnet_g13_c104,2,14,14,104,104,3,3,1,1,1,13\n");
  Result r = run_tessel("codegen --conv2d " + csv + " --workload resnext_g32_c128 --arch sm_90a --no-source");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Tensor Cores (mma.sync)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("_g4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch 16 = g(16)"), std::string::npos) << r.out;
  r = run_tessel("codegen --conv2d " + csv + " --workload regnet_g13_c104 --arch sm_90a --no-source");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Tensor Cores (mma.sync)"), std::string::npos) << r.out;
}

// codegen --schedule: the named schedule instead of the default, or one line saying why not.
TEST(Cli, CodegenTakesANamedScheduleOrSaysWhyNot) {
  const std::string csv = write_file("gemm.csv", "name,m,n,k,layout\nnn_512,512,512,1024,NN\n");
  const std::string base = "codegen --gemm " + csv + " --workload nn_512 --arch sm_90a --no-source";
  Result r = run_tessel(base + " --schedule tma_128x256x64_s3_r8_c132_w64x256");
  ASSERT_EQ(r.code, 0) << r.out;
  // 64x256 per consumer warpgroup (128 accumulators a thread): a producer warpgroup, 384 threads.
  EXPECT_NE(r.out.find("== schedule tma_128x256x64_s3_r8_c132_w64x256 (384 threads)"), std::string::npos) << r.out;
  r = run_tessel(base + " --schedule tma_128x256x64");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tma_128x256x64: not a schedule name for nn_512"), std::string::npos) << r.out;
  // A warpgroup tile that is neither the CTA tile nor its half.
  r = run_tessel(base + " --schedule tma_256x128x64_s3_r8_c132_w64x128");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("is neither the CTA tile 256x128"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessel
