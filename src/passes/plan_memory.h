// Memory planning: an analysis that places every activation of a graph in one arena, so that
// the runtime makes a single device allocation per engine and no allocation per run.
//
// Liveness is taken over the node order: a value is live from the node that writes it (or
// from before the first node, for a graph input) to the last node that reads it (or to the
// end, for a graph output); a node's inputs and outputs are live together while it runs.
// Offsets are chosen greedily in order of definition, best fit among the holes that freed
// values leave, 256-byte aligned (the widest vector access and cudaMalloc's own alignment).
// A unary elementwise op (or a reshape, which moves no data) whose input dies at it writes its
// output in place, over the input, when both have the same size. Constants are not planned:
// they live in the engine's read-only weight buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::passes {

struct BufferPlan {
  int64_t offset = -1;  // bytes from the arena start; -1: not in the arena (constant, unused)
  int64_t bytes = 0;    // the tensor's size; it occupies bytes rounded up to the alignment
  int first = 0;        // live range in node indices: written by node `first` (-1: graph input)
  int last = 0;         // last read by node `last` (the node count: a graph output)
  ir::ValueId reuses = ir::kNoValue;  // in place: written over this input of its producer
};

struct MemoryPlan {
  static constexpr int64_t kAlignment = 256;
  std::vector<BufferPlan> buffers;  // indexed by ValueId
  int64_t arena_bytes = 0;          // the arena size the plan needs
  int64_t peak_live_bytes = 0;      // most (aligned) bytes live at one time: a lower bound
};

MemoryPlan plan_memory(const ir::Graph& g);

// Checks a plan against the graph: every non-constant value placed, aligned, inside the arena,
// with the live range the graph implies, and no two values live at the same time in
// overlapping bytes, except an in-place output over an input that dies at its producer.
// Returns "" when the plan is valid, else a description of the first violation.
std::string verify_plan(const ir::Graph& g, const MemoryPlan& plan);

}  // namespace tessel::passes
