// Memory planning: an analysis that places every activation of a graph in one arena, so that
// the runtime makes a single device allocation per engine and no allocation per run.
//
// Liveness is taken over the node order: a value is live from the node that writes it (or
// from before the first node, for a graph input) to the last node that reads it (or to the
// end, for a graph output); a node's inputs and outputs are live together while it runs.
// Offsets are chosen greedily in order of definition, best fit among the holes that freed
// values leave, 256-byte aligned (the widest vector access and cudaMalloc's own alignment).
//
// Three kinds of sharing:
//  - In place: a unary elementwise op (or a reshape the GPU runs as a copy) whose input's bytes
//    die at it writes its output over them, when both have the same size.
//  - Views (storage aliases): a Reshape / Flatten / Squeeze / Unsqueeze / Identity that
//    is_view_alias() accepts moves no data on the GPU: its output *is* its input's bytes.
//  - Channel slices (storage aliases): an input of a Concat that concat_into_slices marked
//    `in_place` is stored by its producer straight into its channels of the Concat's output.
//    Its elements are strided there (row m, channels [offset, offset + C) of a buffer of ld
//    channels), so the plan records (base value, channel offset) instead of a byte range.
// An alias has no bytes of its own: its base (a value that is no alias) owns one buffer that
// is live from the first to the last step any value sharing it is live.
// Constants are not planned: they live in the engine's read-only weight buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::passes {

// ---- Storage aliases: what the GPU lowering writes no kernel for -----------------------------

// The Concat attribute (ints, one flag per input) set by concat_into_slices: in_place[k] = 1
// when input k's producer (a tessel.Conv / tessel.Gemm with the plain store) writes it directly
// into its channel slice of the Concat's output, so the Concat copies only the other inputs.
// The graph's values are unchanged by it: the CPU executor ignores it and computes the same.
inline constexpr char kInPlaceAttr[] = "in_place";


struct ChannelSlice {
  int input = 0;  // the Concat's input index
  ir::ValueId value = ir::kNoValue;
  int64_t channel_offset = 0;  // its first channel in the Concat's output
};

// The in-place inputs of Concat `concat` (its `in_place` attribute), with their offsets. A
// malformed attribute, or one naming an input that cannot be aliased (a constant, graph input or
// output, a value with another reader -- except, for an inner Concat's output, readers that
// reads_channel_slice accepts --, a view's output, a Concat that is a graph output or not
// along the last axis), is a UserError naming the node. An inner Concat that copies some of
// its inputs copies them into the outer buffer (the op kernel's strided output).
std::vector<ChannelSlice> in_place_inputs(const ir::Graph& g, const ir::Node& concat);

// Where value v is stored in place: the buffer's base (the outermost Concat's output, through
// nested in-place Concats), v's channel offset in it, and its channel count (the `ld` of the
// producer's store). nullopt for every other value.
struct SliceOf {
  ir::ValueId base = ir::kNoValue;
  int64_t channel_offset = 0;
  int64_t channels = 0;
};
std::optional<SliceOf> channel_slice_of(const ir::Graph& g, ir::ValueId v);

// A node that reads value v where a Concat's buffer holds it (a channel slice: rows of the
// buffer's channels): a group-1 tessel.Conv reading v once, as its NHWC X (the GPU lowering
// gives its A operand the buffer's row stride), or a depthwise one (the depthwise kernels take
// the row stride and the slice's first channel: kXLd, kXOffset). Besides its Concat, only these
// may read an inner Concat's output that is stored in place in an outer one (DenseNet's blocks;
// in a QDQ DenseNet, the depthwise conv that requantizes each concat, fold-qdq's).
bool reads_channel_slice(const ir::Graph& g, const ir::Node& reader, ir::ValueId v);

// A Reshape, Flatten, Squeeze, Unsqueeze or Identity whose output is its input's bytes: the input
// is not a constant, and neither it nor the output is a graph input or output (the engine keeps
// those in buffers of their own).
bool is_view_alias(const ir::Graph& g, const ir::Node& n);

// ---- The plan ----------------------------------------------------------------------------------

struct BufferPlan {
  // Bytes from the arena start; -1: not in the arena (constant, unused). For an alias, its
  // base's offset: a channel slice's elements are then at the channel offset within each row.
  int64_t offset = -1;
  int64_t bytes = 0;  // the tensor's size; it occupies bytes rounded up to the alignment
  int first = 0;      // live range in node indices: written by node `first` (-1: graph input)
  int last = 0;       // last read by node `last` (the node count: a graph output)
  ir::ValueId reuses = ir::kNoValue;    // in place: written over this input of its producer
  ir::ValueId alias_of = ir::kNoValue;  // a storage alias of this value's buffer (its base)
  int64_t channel_offset = -1;          // -1: a view; else a channel slice at this channel
};

struct MemoryPlan {
  static constexpr int64_t kAlignment = 256;
  std::vector<BufferPlan> buffers;  // indexed by ValueId
  int64_t arena_bytes = 0;          // the arena size the plan needs
  int64_t peak_live_bytes = 0;      // most (aligned) bytes live at one time: a lower bound
};

MemoryPlan plan_memory(const ir::Graph& g);

// Checks a plan against the graph: every non-constant value placed, aligned, inside the arena,
// with the live range the graph implies; exactly the views and channel slices the graph implies
// recorded as aliases of their base (and placed at its offset); and no two buffers in use at the
// same time in overlapping bytes, except an in-place output over an input whose buffer dies at
// its producer. A buffer is in use from the first to the last step of any value sharing it.
// Returns "" when the plan is valid, else a description of the first violation.
std::string verify_plan(const ir::Graph& g, const MemoryPlan& plan);

}  // namespace tessel::passes
