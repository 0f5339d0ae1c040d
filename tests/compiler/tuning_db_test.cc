// The tuning database: its file format (round trip, refusal of damaged and foreign files),
// merging, and plan_node's use of a matching record (`tessel explain` says "tuned").
#include "compiler/tuning_db.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/cnn_blocks.h"
#include "compiler/compile_plan.h"
#include "compiler/plan_node.h"
#include "compiler/predict.h"
#include "core/error.h"
#include "kernels/contraction/ops_maps.h"
#include "kernels/default_schedule.h"
#include "passes/pipeline.h"

namespace tessel::compiler {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessel_tuning_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string load_error(const std::string& path) {
  try {
    TuningDb::load(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TuningDb, RoundTripAndTheFasterRecordWins) {
  TuningDb a;
  a.add({"f16:b1:m64:n64:k64:A", "sm_90a/132/H100", "tc_64x64x32_s3_w32x32_sk1_r8", 12.5, 8});
  a.add({"f16:b1:m64:n64:k64:A", "sm_90a/132/H100", "tc_128x64x32_s3_w64x32_sk1_r8", 14.0, 8});
  a.add({"f16:b1:m64:n64:k64:A", "sm_80/108/A100", "tc_128x64x32_s3_w64x32_sk1_r8", 20.0, 4});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a.find("f16:b1:m64:n64:k64:A", "sm_90a/132/H100")->schedule, "tc_64x64x32_s3_w32x32_sk1_r8");
  EXPECT_EQ(a.find("other", "sm_90a/132/H100"), nullptr);
  const std::string path = temp_path("a.json");
  a.save(path);
  const TuningDb b = TuningDb::load(path);
  EXPECT_EQ(b.records(), a.records());

  TuningDb c;
  c.add({"f16:b1:m64:n64:k64:A", "sm_90a/132/H100", "tc_32x32x32_s3_w16x16_sk1_r8", 10.0, 16});
  c.add({"f16:b1:m8:n8:k8:A", "sm_90a/132/H100", "tc_32x32x32_s3_w16x16_sk1_r8", 3.0, 16});
  c.merge(b);
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.find("f16:b1:m64:n64:k64:A", "sm_90a/132/H100")->microseconds, 10.0);
  // The slower record's deeper search is kept: a later tune goes on from the 16th candidate.
  TuningDb d;
  d.add({"f16:b1:m64:n64:k64:A", "sm_90a/132/H100", "tc_128x64x32_s3_w64x32_sk1_r8", 14.0, 40});
  d.merge(c);
  const TuningRecord* r = d.find("f16:b1:m64:n64:k64:A", "sm_90a/132/H100");
  EXPECT_EQ(r->schedule, "tc_32x32x32_s3_w16x16_sk1_r8");
  EXPECT_EQ(r->microseconds, 10.0);
  EXPECT_EQ(r->candidates, 40);
  std::filesystem::remove(path);
}

TEST(TuningDb, DamagedAndForeignFilesAreRefused) {
  const std::string path = temp_path("bad.json");
  TuningDb a;
  a.add({"k", "sm_90a/132/H100", "tc_64x64x32_s3_w32x32_sk1_r8", 12.5, 8});
  a.save(path);
  const std::string good = read(path);
  std::string edited = good;
  edited.replace(edited.find("12.5"), 4, "11.5");
  write(path, edited);
  EXPECT_EQ(load_error(path), path + ": damaged tuning database (its checksum does not match its records)");
  write(path, good.substr(0, good.size() / 2));
  EXPECT_EQ(load_error(path), path + ": not a tessel tuning database (not JSON)");
  write(path, R"({"format": "something-else", "version": 1})");
  EXPECT_EQ(load_error(path), path + ": not a tessel tuning database (format is not \"tessel-tuning-db\")");
  std::string newer = good;
  newer.replace(newer.find("\"version\": 2"), 12, "\"version\": 7");
  write(path, newer);
  EXPECT_EQ(load_error(path), path + ": tuning database version 7; this tessel reads version 2");
  std::string older = good;
  older.replace(older.find("\"version\": 2"), 12, "\"version\": 1");
  write(path, older);
  EXPECT_EQ(load_error(path),
            path +
                ": tuning database version 1; this tessel reads version 2 "
                "(version 1 keys do not name the epilogue: run tessel tune again)");
  std::filesystem::remove(path);
  EXPECT_EQ(load_error(path), path + ": cannot open file");
  EXPECT_EQ(TuningDb::load_or_empty(path).size(), 0u);
}

// Records are keyed by contraction and epilogue traffic: a residual conv and a plain conv of the
// same shapes have different keys, and so do two stores (plain, NCHW) and an A prologue.
TEST(TuningDb, KeysNameWhatOfTheEpilogueChangesTheTime) {
  const contraction::IndexMaps maps = contraction::conv2d_nhwc_maps([] {
    contraction::Conv2dParams p;
    p.n = 2;
    p.h = p.w = 14;
    p.ci = p.co = 64;
    return p;
  }());
  const contraction::Contraction c = *contraction::match(maps).contraction;
  contraction::Epilogue plain;
  plain.steps = {{contraction::EpilogueOpKind::kBias, 0, 0, 0}};
  contraction::Epilogue relu = plain;
  relu.steps.push_back({contraction::EpilogueOpKind::kRelu});
  contraction::Epilogue residual = relu;
  residual.steps.push_back({contraction::EpilogueOpKind::kResidualAdd, 0, 0, 1});
  contraction::Epilogue nchw = plain;
  nchw.store.kind = contraction::StoreMap::Kind::kNchw;
  contraction::Epilogue prologue = plain;
  prologue.a_prologue = contraction::OperandPrologue{true, 1, 64};
  EXPECT_EQ(tuning_key(c, plain), c.key() + "|read0:plain:f16");
  EXPECT_EQ(tuning_key(c, relu), tuning_key(c, plain));  // an activation costs the same
  EXPECT_EQ(tuning_key(c, residual), c.key() + "|read2:plain:f16");
  EXPECT_EQ(tuning_key(c, nchw), c.key() + "|read0:nchw:f16");
  EXPECT_EQ(tuning_key(c, prologue), c.key() + "|prologue:read0:plain:f16");
  // A transcendental activation does not cost the same: counted per output.
  contraction::Epilogue silu = plain;
  silu.steps.push_back({contraction::EpilogueOpKind::kSilu});
  EXPECT_EQ(tuning_key(c, silu), c.key() + "|read0:plain:f16:math1");
  contraction::Epilogue gelu_sigmoid = silu;
  gelu_sigmoid.steps.back().kind = contraction::EpilogueOpKind::kGelu;
  gelu_sigmoid.steps.push_back({contraction::EpilogueOpKind::kSigmoid});
  EXPECT_EQ(contraction::transcendentals_per_output(gelu_sigmoid), 2);
  EXPECT_EQ(tuning_key(c, gelu_sigmoid), c.key() + "|read0:plain:f16:math2");
  contraction::Epilogue hard = plain;
  hard.steps.push_back({contraction::EpilogueOpKind::kHardSwish});
  EXPECT_EQ(tuning_key(c, hard), tuning_key(c, plain));
}

// A record for a conv's contraction on the H100 replaces the cost model's pick, and the plan
// says so; a record the generator cannot take (a schedule name that is no schedule) is ignored.
TEST(TuningDb, PlanNodeUsesAMatchingRecord) {
  const ir::Graph g = passes::run_passes(testing::preact_block(), passes::gpu_pipeline({}));
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  const ir::Node* conv = nullptr;
  for (const ir::Node& n : g.nodes)
    if (n.name == "conv2") conv = &n;
  ASSERT_NE(conv, nullptr);
  const NodePlan untuned = plan_node(g, *conv, {}, h100);
  ASSERT_EQ(untuned.run, NodeRun::kContraction);
  EXPECT_FALSE(untuned.tuned);
  const std::string key = tuning_key(*untuned.match.contraction, untuned.epilogue);
  const std::string other = untuned.schedule.name() == "tc_64x64x32_s4_w32x32_sk1_r8"
                                ? "tc_128x64x32_s3_w64x32_sk1_r8"
                                : "tc_64x64x32_s4_w32x32_sk1_r8";
  auto db = std::make_shared<TuningDb>();
  db->add({key, TuningDb::device_key(h100), other, 5.0, 2});
  Options options;
  options.tuning = db;
  const NodePlan tuned = plan_node(g, *conv, options, h100);
  EXPECT_TRUE(tuned.tuned);
  EXPECT_EQ(tuned.schedule.name(), other);
  EXPECT_NE(tuned.summary().find(other + " tuned"), std::string::npos) << tuned.summary();
  // Another GPU's record does not apply.
  auto a100 = std::make_shared<TuningDb>();
  a100->add({key, TuningDb::device_key(device::known_device("sm_80")), other, 5.0, 2});
  options.tuning = a100;
  EXPECT_FALSE(plan_node(g, *conv, options, h100).tuned);
  auto bad = std::make_shared<TuningDb>();
  bad->add({key, TuningDb::device_key(h100), "not_a_schedule", 5.0, 2});
  options.tuning = bad;
  const NodePlan ignored = plan_node(g, *conv, options, h100);
  EXPECT_FALSE(ignored.tuned);
  EXPECT_EQ(ignored.schedule.name(), untuned.schedule.name());
}

// predict with a database: the measured contraction is predicted by its measurement, and the
// cost model's predictions of the others are scaled by measured / predicted of that one.
TEST(TuningDb, PredictUsesMeasurementsAndCalibratesTheRest) {
  const ir::Graph g = passes::run_passes(testing::preact_block(), passes::gpu_pipeline({}));
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  const ModelPrediction plain = predict(g, {}, h100);
  EXPECT_EQ(plain.calibrated_from, 0);
  int conv2 = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == "conv2") conv2 = static_cast<int>(i);
  ASSERT_GE(conv2, 0);
  const NodePlan plan = plan_node(g, g.nodes[static_cast<size_t>(conv2)], {}, h100);
  const double estimated = plain.nodes[static_cast<size_t>(conv2)].microseconds;
  ASSERT_GT(estimated, 0);
  auto db = std::make_shared<TuningDb>();
  db->add({tuning_key(*plan.match.contraction, plan.epilogue), TuningDb::device_key(h100),
           plan.schedule.name(), 2.0 * estimated, 4});
  Options options;
  options.tuning = db;
  const ModelPrediction tuned = predict(g, options, h100);
  // conv1 computes the same contraction as conv2 (3x3, c -> c, same shapes) but reads it
  // through a BN + ReLU prologue, which only the mma.sync kernel applies: its key is its own
  // (tuning_key), so the record measures conv2 alone and conv1 is calibrated like the others.
  std::vector<char> same_key(g.nodes.size(), 0);
  int matched = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodePlan p = plan_node(g, g.nodes[i], options, h100);
    same_key[i] = p.tuned;
    matched += p.tuned;
  }
  EXPECT_EQ(matched, 1);
  EXPECT_EQ(tuned.calibrated_from, matched);
  EXPECT_NEAR(tuned.calibration, 2.0 * estimated / plain.nodes[static_cast<size_t>(conv2)].microseconds,
              1e-9);
  EXPECT_EQ(tuned.nodes[static_cast<size_t>(conv2)].model, "measured");
  EXPECT_NEAR(tuned.nodes[static_cast<size_t>(conv2)].microseconds, 2.0 * estimated, 1e-9);
  int scaled = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (plain.nodes[i].model != "cost model" || same_key[i]) continue;
    EXPECT_EQ(tuned.nodes[i].model, "cost model, calibrated");
    EXPECT_NEAR(tuned.nodes[i].microseconds, tuned.calibration * plain.nodes[i].microseconds, 1e-9);
    ++scaled;
  }
  EXPECT_GE(scaled, 3);  // the stem, the projection and conv1
  // Op kernels keep their roofline.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (plain.nodes[i].model != "bandwidth") continue;
    EXPECT_EQ(tuned.nodes[i].microseconds, plain.nodes[i].microseconds);
  }
}

// Every launch of a compiled engine records predict()'s time for its node (in whole
// nanoseconds), with the tuning database's measurement where it has one: `tessel profile`
// shows the same numbers `tessel predict --db` prints.
TEST(TuningDb, EngineLaunchesRecordTheModelsPrediction) {
  const ir::Graph in = testing::preact_block();
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  const ir::Graph g = passes::run_passes(in, passes::gpu_pipeline({}));
  int conv2 = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == "conv2") conv2 = static_cast<int>(i);
  ASSERT_GE(conv2, 0);
  const NodePlan plan = plan_node(g, g.nodes[static_cast<size_t>(conv2)], {}, h100);
  auto db = std::make_shared<TuningDb>();
  db->add({tuning_key(*plan.match.contraction, plan.epilogue), TuningDb::device_key(h100),
           plan.schedule.name(), 123.0, 4});
  Options options;
  options.tuning = db;
  const ModelPrediction expected = predict(g, options, h100);
  const CompiledPlan compiled = compile_plan(in, options, h100);
  int checked = 0;
  for (const runtime::PlanLaunch& l : compiled.plan.profiles[0].launches) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].name != l.node) continue;
      EXPECT_NEAR(l.predicted_us, expected.nodes[i].microseconds, 1e-3) << l.node;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(compiled.plan.profiles[0].launches.size()));
  bool measured = false;
  for (const runtime::PlanLaunch& l : compiled.plan.profiles[0].launches) measured |= l.node == "conv2" && l.predicted_us == 123.0;
  EXPECT_TRUE(measured);
}

}  // namespace
}  // namespace tessel::compiler
