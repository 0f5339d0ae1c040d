#include "passes/plan_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ir/parser.h"

namespace tessel {
namespace {

using passes::MemoryPlan;

const passes::BufferPlan& buffer(const ir::Graph& g, const MemoryPlan& p, const char* name) {
  return p.buffers.at(static_cast<size_t>(g.find_value(name)));
}

// f32[64] = 256 bytes, exactly one alignment unit.
//   step -1: x                 @0
//   step 0:  a = Relu(x)       x is a graph input: never overwritten -> @256
//   step 1:  b = Sigmoid(a)    a dies here, same size -> in place @256
//   step 2:  c = Add(b, x)     b and x are read while c is written -> @512
TEST(PlanMemory, InPlaceUnaryOverADyingInput) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  %a = Relu(%x) : f32[64] @"relu"
  %b = Sigmoid(%a) : f32[64] @"sigmoid"
  %c = Add(%b, %x) : f32[64] @"add"
  output %c
})");
  const MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, p), "");
  EXPECT_EQ(buffer(g, p, "x").offset, 0);
  EXPECT_EQ(buffer(g, p, "x").first, -1);
  EXPECT_EQ(buffer(g, p, "x").last, 2);
  EXPECT_EQ(buffer(g, p, "a").offset, 256);
  EXPECT_EQ(buffer(g, p, "a").reuses, ir::kNoValue);
  EXPECT_EQ(buffer(g, p, "b").offset, 256);
  EXPECT_EQ(buffer(g, p, "b").reuses, g.find_value("a"));
  EXPECT_EQ(buffer(g, p, "c").offset, 512);
  EXPECT_EQ(buffer(g, p, "c").last, 3);  // a graph output lives to the end
  EXPECT_EQ(p.arena_bytes, 768);
  EXPECT_EQ(p.peak_live_bytes, 768);
}

// Holes left by dead values are reused best fit: at step 4, a (1024 bytes at 256) and b (512
// bytes at 1536) are free, separated by s1; c (512 bytes) takes b's hole, not the first one.
TEST(PlanMemory, BestFitReusesTheTightestHole) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  %a = Concat(%x, %x, %x, %x) {axis = 0} : f32[256] @"n0"
  %s1 = Relu(%x) : f32[64] @"n1"
  %b = Concat(%x, %x) {axis = 0} : f32[128] @"n2"
  %s2 = Concat(%a, %b) {axis = 0} : f32[384] @"n3"
  %c = Concat(%x, %x) {axis = 0} : f32[128] @"n4"
  output %s1
  output %s2
  output %c
})");
  const MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, p), "");
  EXPECT_EQ(buffer(g, p, "a").offset, 256);
  EXPECT_EQ(buffer(g, p, "s1").offset, 1280);
  EXPECT_EQ(buffer(g, p, "b").offset, 1536);
  EXPECT_EQ(buffer(g, p, "s2").offset, 2048);
  EXPECT_EQ(buffer(g, p, "c").offset, 1536);
  EXPECT_EQ(p.arena_bytes, 2048 + 1536);
  // Step 3: x, a, s1, b and s2 are live together.
  EXPECT_EQ(p.peak_live_bytes, 256 + 1024 + 256 + 512 + 1536);
}

TEST(PlanMemory, VerifyRejectsOverlapOfLiveValues) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  %a = Relu(%x) : f32[64] @"relu"
  %c = Add(%a, %x) : f32[64] @"add"
  output %c
})");
  MemoryPlan p = passes::plan_memory(g);
  ASSERT_EQ(passes::verify_plan(g, p), "");
  p.buffers[static_cast<size_t>(g.find_value("c"))].offset = 256;  // a's bytes, a is read by add
  EXPECT_EQ(passes::verify_plan(g, p),
            "%a (live [0, 1], bytes 256+256) and %c (live [1, 2], bytes 256+256) overlap");
  p = passes::plan_memory(g);
  p.buffers[static_cast<size_t>(g.find_value("a"))].offset = 100;
  EXPECT_EQ(passes::verify_plan(g, p),
            "%a: offset 100 (256 bytes) is unaligned or outside the arena of 768");
}

// Random graphs of 1-D tensors of random sizes (rounded up to the alignment): Relu (in place
// when its input dies there), Cast between f32 and f16 (a size change: never in place), Concat
// and Split (values of many sizes and lifetimes), random graph outputs.
ir::Graph random_graph(std::mt19937& rng) {
  ir::Graph g;
  std::uniform_int_distribution<int> size(1, 300);
  std::vector<ir::ValueId> pool;
  auto value = [&](DType t, int64_t n) {
    return g.add_value("v" + std::to_string(g.values.size()), {t, {n}});
  };
  for (int i = 0; i < 2; ++i) {
    pool.push_back(value(DType::kF32, size(rng)));
    g.inputs.push_back(pool.back());
  }
  const int num_nodes = std::uniform_int_distribution<int>(5, 40)(rng);
  for (int n = 0; n < num_nodes; ++n) {
    auto pick = [&] {
      return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    };
    const std::string name = "n" + std::to_string(n);
    const ir::ValueId x = pick();
    const int64_t len = g.type(x).shape[0];
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
      case 0: {
        pool.push_back(value(g.type(x).dtype, len));
        g.add_node("Relu", name, {x}, {pool.back()});
        break;
      }
      case 1: {
        const bool to_half = g.type(x).dtype == DType::kF32;
        pool.push_back(value(to_half ? DType::kF16 : DType::kF32, len));
        g.add_node("Cast", name, {x}, {pool.back()}, {{"to", int64_t{to_half ? 10 : 1}}});
        break;
      }
      case 2: {
        const ir::ValueId y = pick();
        if (g.type(y).dtype != g.type(x).dtype) continue;
        pool.push_back(value(g.type(x).dtype, len + g.type(y).shape[0]));
        g.add_node("Concat", name, {x, y}, {pool.back()}, {{"axis", int64_t{0}}});
        break;
      }
      default: {
        if (len < 2) continue;
        const ir::ValueId a = value(g.type(x).dtype, len / 2),
                          b = value(g.type(x).dtype, len - len / 2);
        pool.push_back(a);
        pool.push_back(b);
        g.add_node("Split", name, {x}, {a, b}, {{"axis", int64_t{0}}});
        break;
      }
    }
  }
  for (ir::ValueId v : pool)
    if (std::find(g.inputs.begin(), g.inputs.end(), v) == g.inputs.end() &&
        std::bernoulli_distribution(0.15)(rng))
      g.outputs.push_back(v);
  if (g.outputs.empty()) g.outputs.push_back(pool.back());
  return g;
}

TEST(PlanMemory, RandomGraphsGetValidPlans) {
  std::mt19937 rng(2024);
  int in_place = 0, reused_holes = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const ir::Graph g = random_graph(rng);
    const MemoryPlan p = passes::plan_memory(g);
    ASSERT_EQ(passes::verify_plan(g, p), "") << "trial " << trial;
    ASSERT_GE(p.arena_bytes, p.peak_live_bytes) << "trial " << trial;
    int64_t total = 0;
    for (const passes::BufferPlan& b : p.buffers) {
      in_place += b.reuses != ir::kNoValue;
      if (b.offset >= 0 && b.reuses == ir::kNoValue)
        total += (b.bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment *
                 MemoryPlan::kAlignment;
    }
    reused_holes += p.arena_bytes < total;
  }
  // The generator must exercise both kinds of reuse, or the property says little.
  EXPECT_GT(in_place, 50);
  EXPECT_GT(reused_holes, 100);
}

}  // namespace
}  // namespace tessel
