#include "passes/plan_memory.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string_view>

#include "core/error.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

// Ops whose output 0 may overwrite their input 0: each output element depends only on the
// input element at the same flat index (unary elementwise ops), or they move no data at all
// (reshapes).
constexpr std::string_view kInPlaceOps[] = {
    "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",    "Softplus", "Elu",
    "Clip", "Identity",  "Dropout", "Cast",        "Reshape",   "Flatten", "Squeeze",  "Unsqueeze"};

int64_t aligned(int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

struct LiveRange {
  bool planned = false;  // a non-constant value that a node writes or the graph gets
  int first = 0;
  int last = 0;
};

std::vector<LiveRange> live_ranges(const ir::Graph& g) {
  std::vector<LiveRange> r(g.values.size());
  for (ValueId v : g.inputs) r[v] = {true, -1, -1};
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs) r[v] = {true, static_cast<int>(i), static_cast<int>(i)};
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].inputs)
      if (v != kNoValue && r[v].planned) r[v].last = std::max(r[v].last, static_cast<int>(i));
  for (ValueId v : g.outputs)
    if (r[v].planned) r[v].last = static_cast<int>(g.nodes.size());
  return r;
}

int64_t value_bytes(const ir::Graph& g, ValueId v) {
  return numel(g.type(v).shape) * static_cast<int64_t>(dtype_size(g.type(v).dtype));
}

// Free space of the arena as disjoint, coalesced blocks.
class Arena {
 public:
  // The smallest free block that fits (the lowest such on ties), else the end of the arena,
  // which grows, starting inside a free block that reaches it.
  int64_t allocate(int64_t size) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    if (best != free_.end()) {
      const auto [offset, block] = *best;
      free_.erase(best);
      if (block > size) free_.emplace(offset + size, block - size);
      return offset;
    }
    int64_t offset = end_;
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_) {
        offset = last->first;
        free_.erase(last);
      }
    }
    end_ = offset + size;
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    auto it = free_.emplace(offset, size).first;
    auto next = std::next(it);
    if (next != free_.end() && offset + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == offset) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  int64_t size() const { return end_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> size
  int64_t end_ = 0;
};

bool in_place_op(const ir::Node& n) {
  return std::find(std::begin(kInPlaceOps), std::end(kInPlaceOps), n.op) != std::end(kInPlaceOps);
}

}  // namespace

MemoryPlan plan_memory(const ir::Graph& g) {
  const std::vector<LiveRange> ranges = live_ranges(g);
  const int num_nodes = static_cast<int>(g.nodes.size());
  MemoryPlan plan;
  plan.buffers.resize(g.values.size());
  // dies[t + 1]: the values last read at step t (t = -1: graph inputs nobody reads).
  std::vector<std::vector<ValueId>> dies(static_cast<size_t>(num_nodes) + 2);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!ranges[v].planned) continue;
    BufferPlan& b = plan.buffers[v];
    b.bytes = value_bytes(g, static_cast<ValueId>(v));
    b.first = ranges[v].first;
    b.last = ranges[v].last;
    dies[static_cast<size_t>(b.last + 1)].push_back(static_cast<ValueId>(v));
  }
  std::vector<char> handed_over(g.values.size(), 0);  // its bytes now belong to an in-place output
  Arena arena;
  int64_t live = 0;
  auto place = [&](ValueId v, int t) {
    BufferPlan& b = plan.buffers[v];
    if (b.bytes == 0) {  // an empty tensor needs no bytes
      b.offset = 0;
      return;
    }
    if (t >= 0 && g.nodes[t].outputs[0] == v && in_place_op(g.nodes[t]) &&
        !g.nodes[t].inputs.empty()) {
      const ValueId x = g.nodes[t].inputs[0];
      const bool graph_input = std::count(g.inputs.begin(), g.inputs.end(), x) > 0;
      if (x != kNoValue && ranges[x].planned && !graph_input && ranges[x].last == t &&
          plan.buffers[x].bytes == b.bytes && !handed_over[x]) {
        b.offset = plan.buffers[x].offset;
        b.reuses = x;
        handed_over[x] = 1;
        return;
      }
    }
    b.offset = arena.allocate(aligned(b.bytes));
    live += aligned(b.bytes);
  };
  for (int t = -1; t < num_nodes; ++t) {
    // Values last read before step t are free for the outputs of step t.
    if (t >= 0) {
      for (ValueId v : dies[static_cast<size_t>(t)]) {
        if (handed_over[v] || plan.buffers[v].bytes == 0) continue;
        arena.release(plan.buffers[v].offset, aligned(plan.buffers[v].bytes));
        live -= aligned(plan.buffers[v].bytes);
      }
    }
    if (t < 0) {
      for (ValueId v : g.inputs) place(v, t);
    } else {
      for (ValueId v : g.nodes[t].outputs) place(v, t);
    }
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  plan.arena_bytes = arena.size();
  return plan;
}

std::string verify_plan(const ir::Graph& g, const MemoryPlan& plan) {
  if (plan.buffers.size() != g.values.size())
    return "the plan has " + std::to_string(plan.buffers.size()) + " buffers for " +
           std::to_string(g.values.size()) + " values";
  const std::vector<LiveRange> ranges = live_ranges(g);
  auto name = [&](size_t v) { return "%" + g.values[v].name; };
  std::vector<size_t> placed;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const BufferPlan& b = plan.buffers[v];
    if (!ranges[v].planned) {
      if (b.offset != -1)
        return name(v) + " is not planned but has offset " + std::to_string(b.offset);
      continue;
    }
    if (b.bytes != value_bytes(g, static_cast<ValueId>(v)))
      return name(v) + ": " + std::to_string(b.bytes) + " bytes planned for " + g.type(v).str();
    if (b.first != ranges[v].first || b.last != ranges[v].last)
      return name(v) + ": live range [" + std::to_string(b.first) + ", " + std::to_string(b.last) +
             "], the graph implies [" + std::to_string(ranges[v].first) + ", " +
             std::to_string(ranges[v].last) + "]";
    if (b.offset < 0 || b.offset % MemoryPlan::kAlignment != 0 ||
        b.offset + aligned(b.bytes) > plan.arena_bytes)
      return name(v) + ": offset " + std::to_string(b.offset) + " (" + std::to_string(b.bytes) +
             " bytes) is unaligned or outside the arena of " + std::to_string(plan.arena_bytes);
    if (b.reuses != kNoValue) {
      const ValueId x = b.reuses;
      const bool by_node = b.first >= 0 && !g.nodes[static_cast<size_t>(b.first)].inputs.empty();
      if (!by_node || g.nodes[static_cast<size_t>(b.first)].inputs[0] != x ||
          ranges[x].last != b.first || plan.buffers[x].offset != b.offset ||
          plan.buffers[x].bytes != b.bytes)
        return name(v) + " reuses " + name(x) + ", which is not a same-size input dying at " +
               "its producer";
    }
    placed.push_back(v);
  }
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const size_t a = placed[i], c = placed[j];
      const BufferPlan& x = plan.buffers[a];
      const BufferPlan& y = plan.buffers[c];
      const bool in_time = x.first <= y.last && y.first <= x.last;
      const bool in_space = x.bytes > 0 && y.bytes > 0 && x.offset < y.offset + y.bytes &&
                            y.offset < x.offset + x.bytes;
      if (!in_time || !in_space) continue;
      const bool in_place = (y.reuses == static_cast<ValueId>(a) && x.last == y.first) ||
                            (x.reuses == static_cast<ValueId>(c) && y.last == x.first);
      if (!in_place)
        return name(a) + " (live [" + std::to_string(x.first) + ", " + std::to_string(x.last) +
               "], bytes " + std::to_string(x.offset) + "+" + std::to_string(x.bytes) + ") and " +
               name(c) + " (live [" + std::to_string(y.first) + ", " + std::to_string(y.last) +
               "], bytes " + std::to_string(y.offset) + "+" + std::to_string(y.bytes) + ") overlap";
    }
  }
  return "";
}

}  // namespace tessel::passes
