// Engine files on a GPU: the plan of a model written to a .tsl file and loaded back computes
// bitwise the outputs of the engine compiled in memory, close to the CPU reference; per-launch
// profiling and replay timing measure what they say; a plan compiled for another GPU is refused;
// and `tessel compile/run/bench/profile` work end to end. Skipped where no CUDA device is present.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "gpu/gpu_test_util.h"
#include "ir/ir_writer.h"
#include "ir/printer.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"
#include "runtime/engine.h"
#include "runtime/engine_file.h"
#include "runtime/engine_report.h"
#include "runtime/target.h"
#include "compiler/compile_plan.h"

namespace tessel::runtime {
namespace {

namespace rt = device;
using testing::random_inputs;
using testing::relative_l2;

// conv-bn-relu, max pool, a residual conv, global pool and a dense layer over a batch of 2:
// Tensor Core contractions, op kernels, a residual epilogue and a constant-heavy tail.
ir::Graph small_net() {
  testing::IrWriter w(19);
  w.input("x", "f32[2,3,10,12]");
  testing::conv_weight(w, "w1", 16, 3, 3);
  testing::conv_weight(w, "w2", 16, 16, 3);
  testing::batch_norm_params(w, "bn1", 16);
  w.constant("fc_w", {10, 16}, -0.5, 0.5);
  w.constant("fc_b", {10}, -0.1, 0.1);
  const std::string big = "f32[2,16,10,12]", small = "f32[2,16,5,6]";
  w.node("%c1 = Conv(%x, %w1) {pads = [1, 1, 1, 1]} : " + big + " @\"conv1\"");
  w.node(testing::bn("b1", "c1", "bn1", big));
  w.node("%r1 = Relu(%b1) : " + big + " @\"relu1\"");
  w.node("%p = MaxPool(%r1) {kernel_shape = [2, 2], strides = [2, 2]} : " + small + " @\"pool\"");
  w.node("%c2 = Conv(%p, %w2) {pads = [1, 1, 1, 1]} : " + small + " @\"conv2\"");
  w.node("%s = Add(%c2, %p) : " + small + " @\"add\"");
  w.node("%r2 = Relu(%s) : " + small + " @\"relu2\"");
  w.node("%g = GlobalAveragePool(%r2) : f32[2,16,1,1] @\"gap\"");
  w.node("%f = Flatten(%g) {axis = 1} : f32[2,16] @\"flatten\"");
  w.node("%y = Gemm(%f, %fc_w, %fc_b) {transB = 1} : f32[2,10] @\"fc\"");
  return w.graph("y");
}

class EngineFileGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    dir_ = std::filesystem::temp_directory_path() /
           ("tessel_engine_file_gpu_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(EngineFileGpu, LoadedFileMatchesTheEngineCompiledInMemory) {
  const ir::Graph g = small_net();
  Session session = testing::compile_session(g);
  Engine& in_memory = *session.engine();
  const std::string path = (dir_ / "small.tsl").string();
  write_engine_file(compiler::compile_plan(g, {}, rt::device_info()).plan, path);
  Session file_session = Session::open(path);
  Engine& loaded = *file_session.engine();
  EXPECT_EQ(loaded.plan(), in_memory.plan());
  EXPECT_EQ(loaded.stats().kernels, static_cast<int>(loaded.plan().profiles[0].launches.size()));
  EXPECT_EQ(loaded.stats().device_bytes, in_memory.stats().device_bytes);
  EXPECT_GT(session.compile_ms(), 0);
  EXPECT_EQ(file_session.compile_ms(), 0);
  EXPECT_EQ(file_session.graph(), nullptr);  // a loaded plan has no compiled graph
  for (unsigned seed : {1u, 2u}) {
    const std::vector<Tensor> inputs = random_inputs(g, seed);
    const std::vector<Tensor> a = in_memory.run(inputs);
    const std::vector<Tensor> b = loaded.run(inputs);
    const std::vector<Tensor> want = cpu::run_graph(g, inputs);
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    ASSERT_EQ(a[0].type_str(), b[0].type_str());
    EXPECT_EQ(std::memcmp(a[0].raw(), b[0].raw(), a[0].nbytes()), 0) << "seed " << seed;
    EXPECT_LE(relative_l2(b[0], want[0]), 2e-2) << "seed " << seed;
  }
}

TEST_F(EngineFileGpu, ProfileAndReplayTimes) {
  const ir::Graph g = small_net();
  Session session = testing::compile_session(g);
  Engine& e = *session.engine();
  e.run(random_inputs(g, 3));
  const std::vector<float> launches = e.profile_launches(5);
  ASSERT_EQ(launches.size(), e.plan().profiles[0].launches.size());
  for (float ms : launches) EXPECT_GT(ms, 0);
  const LatencyStats s = latency_stats(e.time_replays(3, 30), e.plan().batch.opt);
  EXPECT_GT(s.median_ms, 0);
  EXPECT_GE(s.p90_ms, s.median_ms);
  EXPECT_NEAR(s.throughput_per_s, 2 * 1e3 / s.median_ms, 1e-6 * s.throughput_per_s);
  const ProfileReport r = make_profile_report(e.plan().profiles[0], launches, s.median_ms,
                                              rt::device_info());
  const std::string table = format_profile(r);
  for (const PlanLaunch& l : e.plan().profiles[0].launches) EXPECT_NE(table.find(l.node), std::string::npos);
  // Profiling leaves nothing a later run depends on.
  const std::vector<Tensor> inputs = random_inputs(g, 4);
  EXPECT_LE(relative_l2(e.run(inputs)[0], cpu::run_graph(g, inputs)[0]), 2e-2);

  const rt::MemoryInfo m = rt::memory_info();
  EXPECT_GT(m.total, 0u);
  EXPECT_LE(m.free, m.total);
}

TEST_F(EngineFileGpu, PlanForAnotherGpuIsRefused) {
  const std::string here = rt::device_info().arch();
  const std::string other = here == "sm_90a" ? "sm_80" : "sm_90a";
  const EnginePlan plan = compiler::compile_plan(small_net(), {}, device::known_device(other)).plan;
  try {
    Engine::load(plan, "other.tsl");
    FAIL() << "a plan for " << other << " loaded on " << here;
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("other.tsl was compiled for " + other + " (", 0), 0u)
        << e.what();
  }
}

TEST_F(EngineFileGpu, CommandLine) {
  using testing::run_tessel;
  const std::string tir = (dir_ / "small.tir").string();
  std::ofstream(tir) << ir::print_graph(small_net());
  const std::string tsl = (dir_ / "small.tsl").string();
  testing::Result r = run_tessel("compile " + tir + " -o " + tsl);
  ASSERT_EQ(r.code, 0) << r.out;
  const EnginePlan plan = read_engine_file(tsl);

  r = run_tessel("run " + tsl + " --device cuda --seed 5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loaded from " + tsl), std::string::npos) << r.out;

  const std::string json = (dir_ / "bench.json").string();
  r = run_tessel("bench " + tsl + " --warmup 2 --reps 20 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json b = nlohmann::json::parse(std::ifstream(json));
  EXPECT_GT(b["median_ms"].get<double>(), 0);
  EXPECT_GE(b["p90_ms"].get<double>(), b["median_ms"].get<double>());
  EXPECT_EQ(b["batch"].get<int64_t>(), 2);
  EXPECT_NEAR(b["throughput_per_s"].get<double>(), 2e3 / b["median_ms"].get<double>(), 1e-3);
  EXPECT_EQ(b["peak_device_bytes"].get<uint64_t>(), device_bytes(plan));
  EXPECT_TRUE(b["compile_ms"].is_null());
  r = run_tessel("bench " + tir + " --warmup 2 --reps 20 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(nlohmann::json::parse(std::ifstream(json))["compile_ms"].get<double>(), 0);

  const std::string trace = (dir_ / "trace.json").string();
  r = run_tessel("profile " + tsl + " --reps 5 --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(
      r.out.find("sum of the " + std::to_string(plan.profiles[0].launches.size()) + " kernels' own times"),
      std::string::npos)
      << r.out;
  const nlohmann::json t = nlohmann::json::parse(std::ifstream(trace));
  ASSERT_EQ(t["traceEvents"].size(), plan.profiles[0].launches.size());
  double end = 0;
  for (size_t i = 0; i < plan.profiles[0].launches.size(); ++i) {
    const nlohmann::json& ev = t["traceEvents"][i];
    EXPECT_EQ(ev["ph"], "X");
    EXPECT_EQ(ev["name"], plan.profiles[0].launches[i].node);
    EXPECT_GT(ev["dur"].get<double>(), 0);
    EXPECT_NEAR(ev["ts"].get<double>(), end, 1e-6 * (end + 1));  // laid end to end
    end = ev["ts"].get<double>() + ev["dur"].get<double>();
    EXPECT_EQ(ev["args"]["flops"].get<int64_t>(), plan.profiles[0].launches[i].flops);
    EXPECT_EQ(ev["args"]["epilogue"], plan.profiles[0].launches[i].epilogue);
    EXPECT_EQ(ev["args"]["operand_dtype"], plan.profiles[0].launches[i].operand_dtype);
  }
}

// `tessel tune` records how far down each contraction's candidates it measured, and a second
// run with a larger --per-layer goes on from there instead of starting over; a third finds
// nothing left to do. The records compile. Two contractions whose schedule spaces hold
// thousands of schedules: a 1x1 conv and a dense layer.
TEST_F(EngineFileGpu, TuneGoesOnWhereItStopped) {
  using testing::run_tessel;
  testing::IrWriter w(23);
  w.input("x", "f32[32,64,16,16]");
  testing::conv_weight(w, "wc", 128, 64, 1);
  w.constant("fc_w", {64, 128}, -0.5, 0.5);
  w.node("%c = Conv(%x, %wc) : f32[32,128,16,16] @\"conv\"");
  w.node("%g = GlobalAveragePool(%c) : f32[32,128,1,1] @\"gap\"");
  w.node("%f = Flatten(%g) {axis = 1} : f32[32,128] @\"flatten\"");
  w.node("%y = Gemm(%f, %fc_w) {transB = 1} : f32[32,64] @\"fc\"");
  const std::string tir = (dir_ / "tune.tir").string();
  std::ofstream(tir) << ir::print_graph(w.graph("y"));
  const std::string db = (dir_ / "tune.json").string();
  auto records = [&] { return nlohmann::json::parse(std::ifstream(db))["records"]; };
  testing::Result r = run_tessel("tune " + tir + " --db " + db + " --per-layer 3 --budget 120s");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json first = records();
  ASSERT_EQ(first.size(), 2u) << r.out;
  for (const nlohmann::json& rec : first) EXPECT_EQ(rec["candidates"].get<int>(), 3) << rec.dump();

  r = run_tessel("tune " + tir + " --db " + db + " --per-layer 5 --budget 120s");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(std::to_string(first.size()) + " unique contractions to tune (0 done"),
            std::string::npos)
      << r.out;
  const nlohmann::json second = records();
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_EQ(second[i]["key"], first[i]["key"]);
    EXPECT_EQ(second[i]["candidates"].get<int>(), 5) << second[i].dump();
    EXPECT_LE(second[i]["microseconds"].get<double>(), first[i]["microseconds"].get<double>());
  }

  r = run_tessel("tune " + tir + " --db " + db + " --per-layer 5 --budget 120s");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("0 unique contractions to tune (" + std::to_string(first.size()) + " done"),
            std::string::npos)
      << r.out;
  r = run_tessel("explain " + tir + " --db " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" tuned"), std::string::npos) << r.out;

  // --explore: candidates drawn from beyond the ranked depth, each once, the same draw on a
  // second run; the records keep their ranked depth (5), so that the ranked order resumes there.
  const std::string log = (dir_ / "explore.jsonl").string();
  auto explored = [&] {
    std::map<std::string, std::vector<int64_t>> ranks;  // per key, the ranks measured
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["rank"].get<int64_t>() > 0) ranks[j["key"]].push_back(j["rank"].get<int64_t>());
    }
    return ranks;
  };
  r = run_tessel("tune " + tir + " --db " + db + " --explore 6 --budget 120s --log " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(up to 6 at random per contraction)"), std::string::npos) << r.out;
  const std::map<std::string, std::vector<int64_t>> draw = explored();
  ASSERT_EQ(draw.size(), first.size()) << r.out;
  for (const auto& [key, ranks] : draw) {
    ASSERT_FALSE(ranks.empty()) << key;
    EXPECT_LE(ranks.size(), 6u) << key;
    EXPECT_EQ(std::set<int64_t>(ranks.begin(), ranks.end()).size(), ranks.size()) << key;
    for (int64_t k : ranks) EXPECT_GE(k, 5) << key;
    // Thousands of candidates: those drawn at random are not all within the next round's reach.
    EXPECT_GT(*std::max_element(ranks.begin(), ranks.end()), 5 + 16) << key;
  }
  for (const nlohmann::json& rec : records()) EXPECT_EQ(rec["candidates"].get<int>(), 5) << rec.dump();
  std::filesystem::remove(log);
  r = run_tessel("tune " + tir + " --db " + db + " --explore 6 --budget 120s --log " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(explored(), draw);
}

}  // namespace
}  // namespace tessel::runtime
