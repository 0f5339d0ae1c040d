// Storage aliases in the memory plan (plan_memory.h): views that are their input's bytes and
// Concat inputs stored in place as channel slices of the Concat's buffer. Hand-computed plans
// (f32[64] = 256 bytes, one alignment unit), verify_plan accepting exactly the aliases the graph
// implies, and an execution oracle: `simulate` runs a graph over a byte arena laid out by the
// plan, doing only the writes the GPU lowering does (none for a view, none for a Concat's
// in-place inputs, whose producers write their slices), and checks that every read sees the
// value the graph's semantics give it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ir/parser.h"
#include "passes/plan_memory.h"
#include "passes/rewrite_util.h"

namespace tessel {
namespace {

using passes::BufferPlan;
using passes::MemoryPlan;

const BufferPlan& buffer(const ir::Graph& g, const MemoryPlan& p, const char* name) {
  return p.buffers.at(static_cast<size_t>(g.find_value(name)));
}

// ---- The oracle ------------------------------------------------------------------------------

// Runs g's data movement over an arena laid out by `plan`. Each element has an identity (the
// value that computed it, its index there): a graph input's and a computing node's outputs are
// new elements; a view's are its input's; a Concat's and a Split's are those of the pieces they
// move. A node's writes put its outputs' identities at their addresses, byte by byte; a view
// writes nothing, a Concat only its inputs not stored in place. Before each node, and for the
// graph outputs at the end, every element read must hold the identity the semantics give it.
// Returns "" or the first mismatch.
std::string simulate(const ir::Graph& g, const MemoryPlan& plan) {
  using Ident = std::pair<ir::ValueId, int64_t>;
  std::vector<std::vector<Ident>> want(g.values.size());
  auto fresh = [&](ir::ValueId v) {
    for (int64_t i = 0; i < numel(g.type(v).shape); ++i) want[v].push_back({v, i});
  };
  std::vector<Ident> arena(static_cast<size_t>(plan.arena_bytes), {ir::kNoValue, -1});
  // Byte b of element i of v: a channel slice's rows are strided by its base's channel count.
  auto address = [&](ir::ValueId v, int64_t i) {
    const BufferPlan& b = plan.buffers[v];
    const int64_t esize = static_cast<int64_t>(dtype_size(g.type(v).dtype));
    if (b.alias_of == ir::kNoValue || b.channel_offset < 0) return b.offset + i * esize;
    const int64_t c = g.type(v).shape.back(), ld = g.type(b.alias_of).shape.back();
    return b.offset + ((i / c) * ld + b.channel_offset + i % c) * esize;
  };
  auto write = [&](ir::ValueId v) {
    const int64_t esize = static_cast<int64_t>(dtype_size(g.type(v).dtype));
    for (size_t i = 0; i < want[v].size(); ++i)
      for (int64_t b = 0; b < esize; ++b)
        arena[static_cast<size_t>(address(v, static_cast<int64_t>(i)) + b)] = want[v][i];
  };
  auto check = [&](ir::ValueId v, const std::string& where) -> std::string {
    const int64_t esize = static_cast<int64_t>(dtype_size(g.type(v).dtype));
    for (size_t i = 0; i < want[v].size(); ++i)
      for (int64_t b = 0; b < esize; ++b)
        if (arena[static_cast<size_t>(address(v, static_cast<int64_t>(i)) + b)] != want[v][i])
          return "%" + g.value(v).name + " element " + std::to_string(i) + " is overwritten " +
                 where;
    return "";
  };
  for (ir::ValueId v : g.inputs) {
    fresh(v);
    write(v);
  }
  for (const ir::Node& n : g.nodes) {
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue || g.value(v).is_constant()) continue;
      if (std::string e = check(v, "when " + n.label() + " reads it"); !e.empty()) return e;
    }
    if (passes::is_view_alias(g, n)) {
      want[n.outputs[0]] = want[n.inputs[0]];
      continue;
    }
    if (n.op == "Concat") {  // along the last axis, as every Concat of these tests
      const ir::ValueId out = n.outputs[0];
      const int64_t ld = g.type(out).shape.back(),
                    rows = ld == 0 ? 0 : numel(g.type(out).shape) / ld;
      const std::vector<passes::ChannelSlice> slices = passes::in_place_inputs(g, n);
      want[out].resize(static_cast<size_t>(rows * ld));
      int64_t at = 0;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ir::ValueId v = n.inputs[k];
        const int64_t c = g.type(v).shape.back();
        for (int64_t m = 0; m < rows; ++m)
          for (int64_t j = 0; j < c; ++j)
            want[out][static_cast<size_t>(m * ld + at + j)] =
                want[v][static_cast<size_t>(m * c + j)];
        at += c;
      }
      // The copy kernel writes the elements of the inputs not stored in place.
      const int64_t esize = static_cast<int64_t>(dtype_size(g.type(out).dtype));
      at = 0;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int64_t c = g.type(n.inputs[k]).shape.back();
        const bool in_place = std::any_of(
            slices.begin(), slices.end(),
            [&](const passes::ChannelSlice& s) { return s.input == static_cast<int>(k); });
        for (int64_t m = 0; m < rows && !in_place; ++m)
          for (int64_t j = 0; j < c; ++j)
            for (int64_t b = 0; b < esize; ++b)
              arena[static_cast<size_t>(address(out, m * ld + at + j) + b)] =
                  want[out][static_cast<size_t>(m * ld + at + j)];
        at += c;
      }
      continue;
    }
    if (n.op == "Split") {
      int64_t at = 0;
      for (ir::ValueId v : n.outputs) {
        const int64_t len = numel(g.type(v).shape);
        want[v].assign(want[n.inputs[0]].begin() + at, want[n.inputs[0]].begin() + at + len);
        at += len;
        if (plan.buffers[v].offset >= 0) write(v);
      }
      continue;
    }
    for (ir::ValueId v : n.outputs) {
      fresh(v);
      if (plan.buffers[v].offset >= 0) write(v);
    }
  }
  for (ir::ValueId v : g.outputs)
    if (std::string e = check(v, "at the end"); !e.empty()) return e;
  return "";
}

// ---- Hand-computed plans ----------------------------------------------------------------------

//   step -1: x                     @0
//   step 0:  a = Relu(x)           x is a graph input: a @256
//   step 1:  v = Reshape(a)        a view: v is a's bytes, @256
//   step 2:  b = Sigmoid(v)        v dies here but a is read at step 3: not in place; x's
//                                  bytes are free since step 1: b @0
//   step 3:  t = Tanh(a)           a's buffer (a and v) dies here: in place, @256
//   step 4:  w = Reshape(b)        a view of b, @0; b's buffer now lives to step 5
//   step 5:  y = Add(w, t)         @512
TEST(PlanMemoryAliases, ViewsShareTheirInputsBuffer) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  const %s : i64[2] = [8, 8]
  const %flat : i64[1] = [64]
  %a = Relu(%x) : f32[64] @"relu"
  %v = Reshape(%a, %s) : f32[8,8] @"view"
  %b = Sigmoid(%v) : f32[8,8] @"sigmoid"
  %t = Tanh(%a) : f32[64] @"tanh"
  %w = Reshape(%b, %flat) : f32[64] @"view2"
  %y = Add(%w, %t) : f32[64] @"add"
  output %y
})");
  EXPECT_TRUE(passes::is_view_alias(g, g.nodes[1]));
  const MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, p), "");
  EXPECT_EQ(simulate(g, p), "");
  EXPECT_EQ(buffer(g, p, "a").offset, 256);
  EXPECT_EQ(buffer(g, p, "v").offset, 256);
  EXPECT_EQ(buffer(g, p, "v").alias_of, g.find_value("a"));
  EXPECT_EQ(buffer(g, p, "v").channel_offset, -1);
  EXPECT_EQ(buffer(g, p, "v").last, 2);  // its own live range; a's buffer lives on
  EXPECT_EQ(buffer(g, p, "b").offset, 0);
  EXPECT_EQ(buffer(g, p, "b").reuses, ir::kNoValue);
  EXPECT_EQ(buffer(g, p, "t").offset, 256);
  EXPECT_EQ(buffer(g, p, "t").reuses, g.find_value("a"));
  EXPECT_EQ(buffer(g, p, "w").offset, 0);
  EXPECT_EQ(buffer(g, p, "w").alias_of, g.find_value("b"));
  EXPECT_EQ(buffer(g, p, "y").offset, 512);
  EXPECT_EQ(p.arena_bytes, 768);
  EXPECT_EQ(p.peak_live_bytes, 768);
}

// A reshape of a graph input or to a graph output is no view (the engine keeps those in buffers
// of their own): it stays a copy, in place where its input dies.
TEST(PlanMemoryAliases, ReshapesAtTheEdgesAreCopies) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  const %s : i64[2] = [8, 8]
  const %flat : i64[1] = [64]
  %v = Reshape(%x, %s) : f32[8,8] @"in_view"
  %r = Relu(%v) : f32[8,8] @"relu"
  %o = Reshape(%r, %flat) : f32[64] @"out_view"
  output %o
})");
  EXPECT_FALSE(passes::is_view_alias(g, g.nodes[0]));
  EXPECT_FALSE(passes::is_view_alias(g, g.nodes[2]));
  const MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, p), "");
  EXPECT_EQ(simulate(g, p), "");
  for (const BufferPlan& b : p.buffers) EXPECT_EQ(b.alias_of, ir::kNoValue);
  EXPECT_EQ(buffer(g, p, "v").offset, 256);
  EXPECT_EQ(buffer(g, p, "r").reuses, g.find_value("v"));
  EXPECT_EQ(buffer(g, p, "o").reuses, g.find_value("r"));
  EXPECT_EQ(p.arena_bytes, 512);
}

//   step -1: x                            @0 (f32[4,16], 256 bytes)
//   step 0:  a = Relu(x)                  stored in place: the Concat's buffer (768 bytes) is
//                                         placed now, @256; a is its channels [0, 16)
//   step 1:  b = Sigmoid(x)               channels [16, 32), @256
//   step 2:  p = Tanh(x)                  copied by the Concat: @1024
//   step 3:  c = Concat(a, b, p)          its buffer is in use since step 0
//   step 4:  y = Sigmoid(c)               c's buffer dies here: in place, @256
TEST(PlanMemoryAliases, InPlaceConcatInputsAreChannelSlices) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[4,16]
  %a = Relu(%x) : f32[4,16] @"relu"
  %b = Sigmoid(%x) : f32[4,16] @"sigmoid"
  %p = Tanh(%x) : f32[4,16] @"tanh"
  %c = Concat(%a, %b, %p) {axis = 1, in_place = [1, 1, 0]} : f32[4,48] @"concat"
  %y = Sigmoid(%c) : f32[4,48] @"out"
  output %y
})");
  const MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(passes::verify_plan(g, p), "");
  EXPECT_EQ(buffer(g, p, "c").offset, 256);
  EXPECT_EQ(buffer(g, p, "c").first, 3);
  EXPECT_EQ(buffer(g, p, "a").offset, 256);
  EXPECT_EQ(buffer(g, p, "a").alias_of, g.find_value("c"));
  EXPECT_EQ(buffer(g, p, "a").channel_offset, 0);
  EXPECT_EQ(buffer(g, p, "b").offset, 256);
  EXPECT_EQ(buffer(g, p, "b").channel_offset, 16);
  EXPECT_EQ(buffer(g, p, "p").offset, 1024);
  EXPECT_EQ(buffer(g, p, "p").alias_of, ir::kNoValue);
  EXPECT_EQ(buffer(g, p, "y").reuses, g.find_value("c"));
  EXPECT_EQ(p.arena_bytes, 1280);
  EXPECT_EQ(p.peak_live_bytes, 1280);
  EXPECT_EQ(passes::channel_slice_of(g, g.find_value("b"))->channel_offset, 16);
  EXPECT_EQ(passes::channel_slice_of(g, g.find_value("b"))->channels, 48);
  EXPECT_FALSE(passes::channel_slice_of(g, g.find_value("p")));
}

// The slices are strided, not dense: the simulation stores row m of b at bytes
// 256 + (m * 48 + 16 + c) * 4, and the plan of the previous test must keep every element.
TEST(PlanMemoryAliases, ChannelSlicesSurviveTheSimulation) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[4,16]
  %a = Relu(%x) : f32[4,16] @"relu"
  %b = Sigmoid(%x) : f32[4,16] @"sigmoid"
  %p = Tanh(%x) : f32[4,16] @"tanh"
  %c = Concat(%a, %b, %p) {axis = 1, in_place = [1, 1, 0]} : f32[4,48] @"concat"
  %y = Sigmoid(%c) : f32[4,48] @"out"
  output %y
})");
  MemoryPlan p = passes::plan_memory(g);
  EXPECT_EQ(simulate(g, p), "");
  // Treated as dense sub-buffers at the base's offset, a and b would overwrite each other.
  p.buffers[static_cast<size_t>(g.find_value("b"))].channel_offset = -1;
  EXPECT_NE(simulate(g, p), "");
}

TEST(PlanMemoryAliases, VerifyAcceptsExactlyTheImpliedAliases) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[4,16]
  const %s : i64[1] = [192]
  %a = Relu(%x) : f32[4,16] @"relu"
  %b = Sigmoid(%x) : f32[4,16] @"sigmoid"
  %p = Tanh(%x) : f32[4,16] @"tanh"
  %c = Concat(%a, %b, %p) {axis = 1, in_place = [1, 1, 0]} : f32[4,48] @"concat"
  %v = Reshape(%c, %s) : f32[192] @"view"
  %y = Sigmoid(%v) : f32[192] @"out"
  output %y
})");
  const MemoryPlan good = passes::plan_memory(g);
  ASSERT_EQ(passes::verify_plan(g, good), "");
  ASSERT_EQ(simulate(g, good), "");
  auto with = [&](const char* name, auto&& change) {
    MemoryPlan p = good;
    change(p.buffers[static_cast<size_t>(g.find_value(name))]);
    return passes::verify_plan(g, p);
  };
  EXPECT_EQ(with("a", [](BufferPlan& b) { b.alias_of = ir::kNoValue; }),
            "%a is planned as no alias, the graph makes it channel 0 of %c");
  EXPECT_EQ(with("b", [](BufferPlan& b) { b.channel_offset = 0; }),
            "%b is planned as channel 0 of %c, the graph makes it channel 16 of %c");
  EXPECT_EQ(with("v", [](BufferPlan& b) { b.alias_of = ir::kNoValue; }),
            "%v is planned as no alias, the graph makes it a view of %c");
  EXPECT_EQ(with("p", [&](BufferPlan& b) { b.alias_of = g.find_value("c"); }),
            "%p is planned as a view of %c, the graph makes it no alias");
  EXPECT_EQ(with("v", [](BufferPlan& b) { b.offset = 1280; }),
            "%v: offset 1280 (768 bytes) is unaligned or outside the arena of 1280");
  EXPECT_EQ(with("v", [](BufferPlan& b) { b.offset = 512; }),
            "%v is not placed at the offset of its base %c");
  // A copied input inside the Concat's buffer while its slices are live: a real overlap.
  EXPECT_EQ(with("p", [](BufferPlan& b) { b.offset = 512; }),
            "%p (live [2, 3], bytes 512+256) and %c (live [0, 5], bytes 256+768) overlap");
}

// ---- Random graphs -----------------------------------------------------------------------------

// 1-D tensors of random sizes: Relu and Cast (f32 <-> f16) computing new elements, Identity
// views, Concat (also of a Concat, as Inception-v3's nested torch.cat) and Split; then each Concat
// input that may be stored in place (a node's output that its producer stores, read only by that
// Concat) is marked so, with probability 0.8, where the Concat's output is not a graph output.
// Whether `p` stores its output itself (in_place_inputs' condition): no view, and no Concat
// that copies an input.
bool storable(const ir::Graph& g, const ir::Node& p) {
  if (passes::is_view_alias(g, p)) return false;
  return p.op != "Concat" || passes::in_place_inputs(g, p).size() == p.inputs.size();
}

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
    const ir::ValueId x = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    const std::string name = "n" + std::to_string(n);
    const DType t = g.type(x).dtype;
    const int64_t len = g.type(x).shape[0];
    switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
      case 0:
        pool.push_back(value(t, len));
        g.add_node("Relu", name, {x}, {pool.back()});
        break;
      case 1: {
        const bool to_half = t == DType::kF32;
        pool.push_back(value(to_half ? DType::kF16 : DType::kF32, len));
        g.add_node("Cast", name, {x}, {pool.back()}, {{"to", int64_t{to_half ? 10 : 1}}});
        break;
      }
      case 2:
        pool.push_back(value(t, len));
        g.add_node("Identity", name, {x}, {pool.back()});
        break;
      case 3: {
        const ir::ValueId y = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
        if (g.type(y).dtype != t) continue;
        pool.push_back(value(t, len + g.type(y).shape[0]));
        g.add_node("Concat", name, {x, y}, {pool.back()}, {{"axis", int64_t{0}}});
        break;
      }
      case 4: {  // torch.cat of a torch.cat: Concat(Concat(Relu(x), Relu(x)), Relu(x))
        const ir::ValueId a = value(t, len), b = value(t, len), inner = value(t, 2 * len),
                          c = value(t, len);
        g.add_node("Relu", name + "a", {x}, {a});
        g.add_node("Relu", name + "b", {x}, {b});
        g.add_node("Concat", name + "inner", {a, b}, {inner}, {{"axis", int64_t{0}}});
        g.add_node("Relu", name + "c", {x}, {c});
        pool.push_back(value(t, 3 * len));
        g.add_node("Concat", name, {inner, c}, {pool.back()}, {{"axis", int64_t{0}}});
        break;
      }
      default: {
        if (len < 2) continue;
        const ir::ValueId a = value(t, len / 2), b = value(t, len - len / 2);
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
  const std::vector<int> uses = passes::use_counts(g);
  const std::vector<int> producers = g.producers();
  for (ir::Node& n : g.nodes) {
    if (n.op != "Concat" || std::count(g.outputs.begin(), g.outputs.end(), n.outputs[0])) continue;
    std::vector<int64_t> flags;
    for (ir::ValueId v : n.inputs)
      flags.push_back(producers[v] >= 0 && uses[v] == 1 &&
                      storable(g, g.nodes[static_cast<size_t>(producers[v])]) &&
                      std::bernoulli_distribution(0.8)(rng));
    n.attrs[passes::kInPlaceAttr] = flags;
  }
  return g;
}

TEST(PlanMemoryAliases, RandomGraphsRunCorrectlyOnTheirPlans) {
  std::mt19937 rng(77);
  int views = 0, slices = 0, nested = 0, in_place = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const ir::Graph g = random_graph(rng);
    const MemoryPlan p = passes::plan_memory(g);
    ASSERT_EQ(passes::verify_plan(g, p), "") << "trial " << trial;
    ASSERT_EQ(simulate(g, p), "") << "trial " << trial;
    ASSERT_GE(p.arena_bytes, p.peak_live_bytes) << "trial " << trial;
    for (const BufferPlan& b : p.buffers) {
      views += b.alias_of != ir::kNoValue && b.channel_offset < 0;
      slices += b.alias_of != ir::kNoValue && b.channel_offset >= 0;
      nested += b.alias_of != ir::kNoValue && b.channel_offset >= 0 &&
                g.nodes[static_cast<size_t>(b.first)].op == "Concat";
      in_place += b.reuses != ir::kNoValue;
    }
  }
  // The generator must exercise every kind of sharing, or the property says little.
  EXPECT_GT(views, 100);
  EXPECT_GT(slices, 100);
  EXPECT_GT(nested, 10);
  EXPECT_GT(in_place, 50);
}

// The oracle itself: a plan that puts two simultaneously live values on the same bytes fails.
TEST(PlanMemoryAliases, SimulationCatchesAnOverlap) {
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[64]
  %a = Relu(%x) : f32[64] @"relu"
  %c = Add(%a, %x) : f32[64] @"add"
  output %c
})");
  MemoryPlan p = passes::plan_memory(g);
  ASSERT_EQ(simulate(g, p), "");
  p.buffers[static_cast<size_t>(g.find_value("a"))].offset = 0;  // x's bytes, read by add
  EXPECT_EQ(simulate(g, p), "%x element 0 is overwritten when Add 'add' reads it");
}

}  // namespace
}  // namespace tessel
