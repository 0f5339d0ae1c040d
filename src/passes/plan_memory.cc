#include "passes/plan_memory.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string_view>

#include "core/error.h"
#include "ir/op_registry.h"
#include "ops/tessel_epilogue.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

bool contains(const std::vector<ValueId>& list, ValueId v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

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

// Output 0 may overwrite input 0 (OpFacts::in_place): each output element depends only on the
// input element at the same flat index (unary elementwise ops), or the op moves no data
// (reshapes that are not views, is_view_alias: the GPU copies them, flat index to flat index).
bool in_place_op(const ir::Node& n) { return ir::OpRegistry::global().facts(n.op).in_place; }

// Which buffer holds each value: base[v] is v itself unless v is a storage alias (a view, or a
// Concat input stored in place); channel_offset[v] is -1 except for a channel slice. A base's
// buffer is in use from first[base] to last[base]: the union of the live ranges sharing it.
struct Storage {
  std::vector<ValueId> base;
  std::vector<int64_t> channel_offset;
  std::vector<int> first, last;

  bool is_alias(ValueId v) const { return base[v] != v; }
};

Storage storage_of(const ir::Graph& g, const std::vector<LiveRange>& ranges) {
  // The direct relations first: a view's output lives in its input, an in-place Concat input in
  // the Concat's output at a channel offset, and that output may itself be an in-place input
  // of an outer Concat (a Concat whose inputs are all in place writes nothing of its own).
  std::vector<ValueId> parent(g.values.size(), kNoValue);
  std::vector<int64_t> offset_in_parent(g.values.size(), -1);
  for (const ir::Node& n : g.nodes) {
    if (is_view_alias(g, n)) parent[n.outputs[0]] = n.inputs[0];
    for (const ChannelSlice& slice : in_place_inputs(g, n)) {
      parent[slice.value] = n.outputs[0];
      offset_in_parent[slice.value] = slice.channel_offset;
    }
  }
  // Then each value's base at the end of its chain. A chain is all views or all slices: a
  // slice is read by its Concat (and convs), no view, and in_place_inputs refuses views.
  Storage s;
  s.base.resize(g.values.size());
  s.channel_offset.assign(g.values.size(), -1);
  for (size_t v = 0; v < g.values.size(); ++v) {
    ValueId b = static_cast<ValueId>(v);
    for (; parent[b] != kNoValue; b = parent[b])
      if (offset_in_parent[b] >= 0)
        s.channel_offset[v] = std::max<int64_t>(s.channel_offset[v], 0) + offset_in_parent[b];
    s.base[v] = b;
  }
  s.first.assign(g.values.size(), 0);
  s.last.assign(g.values.size(), 0);
  std::vector<char> seen(g.values.size(), 0);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!ranges[v].planned) continue;
    const ValueId b = s.base[v];
    s.first[b] = seen[b] ? std::min(s.first[b], ranges[v].first) : ranges[v].first;
    s.last[b] = seen[b] ? std::max(s.last[b], ranges[v].last) : ranges[v].last;
    seen[b] = 1;
  }
  return s;
}

}  // namespace

std::vector<ChannelSlice> in_place_inputs(const ir::Graph& g, const ir::Node& concat) {
  const auto it = concat.attrs.find(kInPlaceAttr);
  if (concat.op != "Concat" || it == concat.attrs.end()) return {};
  const auto* flags = std::get_if<std::vector<int64_t>>(&it->second);
  TESSEL_USER_CHECK(
      flags && flags->size() == concat.inputs.size() &&
      std::all_of(flags->begin(), flags->end(), [](int64_t f) { return f == 0 || f == 1; }))
      << concat.label() << ": attribute '" << kInPlaceAttr
      << "' must hold a 0 or 1 for each of its " << concat.inputs.size() << " inputs";
  if (std::count(flags->begin(), flags->end(), 1) == 0) return {};
  const ValueId out = concat.outputs.at(0);
  const int64_t rank = static_cast<int64_t>(g.type(out).shape.size());
  TESSEL_USER_CHECK(rank >= 1 &&
                    normalize_axis(concat.require_int("axis"), rank, concat.label()) == rank - 1)
      << concat.label() << ": inputs stored in place need a concatenation along the last axis";
  TESSEL_USER_CHECK(!contains(g.outputs, out))
      << concat.label() << ": a graph output cannot have inputs stored in place";
  const std::vector<int> uses = use_counts(g);
  const std::vector<int> producers = g.producers();
  std::vector<ChannelSlice> slices;
  int64_t offset = 0;
  for (size_t k = 0; k < concat.inputs.size(); ++k) {
    const ValueId v = concat.inputs[k];
    TESSEL_USER_CHECK(v != kNoValue) << concat.label() << ": input " << k << " is omitted";
    if ((*flags)[k] == 1) {
      TESSEL_USER_CHECK(!g.value(v).is_constant() && producers[v] >= 0)
          << concat.label() << ": input " << k << " (%" << g.value(v).name << ") is marked '"
          << kInPlaceAttr << "' but is not a node's output";
      // Its producer must store it: a view is its input's bytes.
      const ir::Node& p = g.nodes[static_cast<size_t>(producers[v])];
      TESSEL_USER_CHECK(!is_view_alias(g, p))
          << concat.label() << ": input " << k << " (%" << g.value(v).name << ") is marked '"
          << kInPlaceAttr << "', but " << p.label() << " cannot store it into a channel slice";
      // Read by this Concat alone, or (an inner Concat's output) also by readers that take it
      // where it lies (reads_channel_slice).
      int others = uses[v] - 1;
      if (p.op == "Concat")
        for (const ir::Node& r : g.nodes)
          if (&r != &concat && reads_channel_slice(g, r, v)) --others;
      TESSEL_USER_CHECK(others == 0 && !contains(g.outputs, v))
          << concat.label() << ": input " << k << " (%" << g.value(v).name << ") is marked '"
          << kInPlaceAttr << "' but has readers that cannot read it inside the Concat's buffer";
      slices.push_back({static_cast<int>(k), v, offset});
    }
    offset += g.type(v).shape.back();
  }
  return slices;
}

std::optional<SliceOf> channel_slice_of(const ir::Graph& g, ValueId v) {
  std::optional<SliceOf> slice;
  // Up through nested Concats: the offsets add up in the outermost buffer.
  for (bool found = true; found;) {
    found = false;
    for (const ir::Node& n : g.nodes) {
      if (n.op != "Concat" || !contains(n.inputs, v)) continue;
      for (const ChannelSlice& s : in_place_inputs(g, n)) {
        if (s.value != v) continue;
        const int64_t inner = slice ? slice->channel_offset : 0;
        slice = SliceOf{n.outputs[0], inner + s.channel_offset, g.type(n.outputs[0]).shape.back()};
        v = n.outputs[0];
        found = true;
      }
      break;  // an in-place value has this Concat as its only reader
    }
  }
  return slice;
}

bool reads_channel_slice(const ir::Graph& g, const ir::Node& reader, ValueId v) {
  if (reader.op != "tessel.Conv" || reader.inputs.empty() || reader.inputs[0] != v) return false;
  if ((reader.get_int("group", 1) != 1 && !ops::is_depthwise_conv(g, reader)) ||
      reader.get_string("input_layout", "nhwc") != "nhwc")
    return false;
  const auto reads = std::count(reader.inputs.begin(), reader.inputs.end(), v);
  return reads == 1 && g.type(v).shape.size() == 4;
}

bool is_view_alias(const ir::Graph& g, const ir::Node& n) {
  // Output 0 is input 0's elements in the same order (OpFacts::view): no data movement.
  if (!ir::OpRegistry::global().facts(n.op).view || n.inputs.empty() || n.outputs.size() != 1)
    return false;
  const ValueId x = n.inputs[0], y = n.outputs[0];
  if (x == kNoValue || g.value(x).is_constant()) return false;
  if (contains(g.inputs, x) || contains(g.outputs, x) || contains(g.outputs, y)) return false;
  return g.type(x).dtype == g.type(y).dtype && numel(g.type(x).shape) == numel(g.type(y).shape);
}

MemoryPlan plan_memory(const ir::Graph& g) {
  const std::vector<LiveRange> ranges = live_ranges(g);
  const Storage storage = storage_of(g, ranges);
  const int num_nodes = static_cast<int>(g.nodes.size());
  MemoryPlan plan;
  plan.buffers.resize(g.values.size());
  // dies[t + 1]: the bases whose buffers are last used at step t (t = -1: graph inputs nobody
  // reads).
  std::vector<std::vector<ValueId>> dies(static_cast<size_t>(num_nodes) + 2);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!ranges[v].planned) continue;
    BufferPlan& b = plan.buffers[v];
    b.bytes = value_bytes(g, static_cast<ValueId>(v));
    b.first = ranges[v].first;
    b.last = ranges[v].last;
    if (storage.is_alias(static_cast<ValueId>(v))) {
      b.alias_of = storage.base[v];
      b.channel_offset = storage.channel_offset[v];
    } else {
      dies[static_cast<size_t>(storage.last[v] + 1)].push_back(static_cast<ValueId>(v));
    }
  }
  std::vector<char> placed(g.values.size(), 0);
  std::vector<char> handed_over(g.values.size(), 0);  // its bytes now belong to an in-place output
  Arena arena;
  int64_t live = 0;
  // A base: at the first step its buffer is in use, in place over a dying input or in a hole.
  auto place_base = [&](ValueId v, int t) {
    BufferPlan& b = plan.buffers[v];
    placed[v] = 1;
    if (b.bytes == 0) {  // an empty tensor needs no bytes
      b.offset = 0;
      return;
    }
    if (t >= 0 && g.nodes[t].outputs[0] == v && in_place_op(g.nodes[t]) &&
        !g.nodes[t].inputs.empty()) {
      const ValueId x = g.nodes[t].inputs[0];
      const ValueId bx = x == kNoValue ? kNoValue : storage.base[x];
      if (bx != kNoValue && ranges[x].planned && !contains(g.inputs, bx) &&
          storage.channel_offset[x] < 0 && storage.last[bx] == t &&
          plan.buffers[bx].bytes == b.bytes && !handed_over[bx]) {
        b.offset = plan.buffers[bx].offset;
        b.reuses = x;
        handed_over[bx] = 1;
        return;
      }
    }
    b.offset = arena.allocate(aligned(b.bytes));
    live += aligned(b.bytes);
  };
  auto place = [&](ValueId v, int t) {
    const ValueId base = storage.base[v];
    if (!placed[base]) place_base(base, t);
    plan.buffers[v].offset = plan.buffers[base].offset;
  };
  for (int t = -1; t < num_nodes; ++t) {
    // Buffers last used before step t are free for the values of step t.
    if (t >= 0) {
      for (ValueId v : dies[static_cast<size_t>(t)]) {
        if (handed_over[v] || plan.buffers[v].bytes == 0) continue;
        arena.release(plan.buffers[v].offset, aligned(plan.buffers[v].bytes));
        live -= aligned(plan.buffers[v].bytes);
      }
    }
    for (ValueId v : t < 0 ? g.inputs : g.nodes[t].outputs)
      if (ranges[v].planned) place(v, t);
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
  const Storage storage = storage_of(g, ranges);
  auto name = [&](size_t v) { return "%" + g.values[v].name; };
  auto alias_str = [&](ValueId base, int64_t channel) {
    if (base == kNoValue) return std::string("no alias");
    return (channel < 0 ? "a view of " : "channel " + std::to_string(channel) + " of ") +
           name(static_cast<size_t>(base));
  };
  std::vector<size_t> bases;
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
    const bool alias = storage.is_alias(static_cast<ValueId>(v));
    const ValueId want_base = alias ? storage.base[v] : kNoValue;
    if (b.alias_of != want_base || (alias && b.channel_offset != storage.channel_offset[v]))
      return name(v) + " is planned as " + alias_str(b.alias_of, b.channel_offset) +
             ", the graph makes it " + alias_str(want_base, storage.channel_offset[v]);
    if (alias) {
      if (b.offset != plan.buffers[want_base].offset || b.reuses != kNoValue)
        return name(v) + " is not placed at the offset of its base " + name(want_base);
      continue;
    }
    if (b.reuses != kNoValue) {
      const ValueId x = b.reuses;
      const ValueId bx = storage.base[x];
      const bool by_node = b.first >= 0 && !g.nodes[static_cast<size_t>(b.first)].inputs.empty();
      if (!by_node || g.nodes[static_cast<size_t>(b.first)].inputs[0] != x ||
          storage.channel_offset[x] >= 0 || storage.last[bx] != b.first ||
          plan.buffers[bx].offset != b.offset || plan.buffers[bx].bytes != b.bytes)
        return name(v) + " reuses " + name(x) + ", which is not a same-size input dying at " +
               "its producer";
    }
    bases.push_back(v);
  }
  for (size_t i = 0; i < bases.size(); ++i) {
    for (size_t j = i + 1; j < bases.size(); ++j) {
      const size_t a = bases[i], c = bases[j];
      const BufferPlan& x = plan.buffers[a];
      const BufferPlan& y = plan.buffers[c];
      const int xf = storage.first[a], xl = storage.last[a], yf = storage.first[c],
                yl = storage.last[c];
      const bool in_time = xf <= yl && yf <= xl;
      const bool in_space = x.bytes > 0 && y.bytes > 0 && x.offset < y.offset + y.bytes &&
                            y.offset < x.offset + x.bytes;
      if (!in_time || !in_space) continue;
      auto over = [&](const BufferPlan& out, size_t in, int in_last, int out_first) {
        return out.reuses != kNoValue && storage.base[out.reuses] == static_cast<ValueId>(in) &&
               in_last == out_first;
      };
      if (!over(y, a, xl, yf) && !over(x, c, yl, xf))
        return name(a) + " (live [" + std::to_string(xf) + ", " + std::to_string(xl) + "], bytes " +
               std::to_string(x.offset) + "+" + std::to_string(x.bytes) + ") and " + name(c) +
               " (live [" + std::to_string(yf) + ", " + std::to_string(yl) + "], bytes " +
               std::to_string(y.offset) + "+" + std::to_string(y.bytes) + ") overlap";
    }
  }
  return "";
}

}  // namespace tessel::passes
