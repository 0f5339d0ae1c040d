// Zero-copy concatenation: a channel Concat's inputs that come straight from contractions are
// written by those contractions into their channel slices of the Concat's output (the
// contraction generator's channel-slice store map), instead of into buffers of their own that
// the Concat then copies. An Inception block's three conv branches thus cost no concat traffic;
// its pool branch, which no contraction writes, is still copied.
//
// Concats nest: an inner Concat along the channels is itself stored in place in the outer one
// (its in-place producers store into the outer buffer, its kernel copies the rest there). After
// nest-prefix-concats, DenseNet's block is such a chain: one buffer per block, each inner
// Concat a channel prefix of it, read where it lies by the 1x1 conv after it
// (plan_memory.h reads_channel_slice: the conv's A operand takes the buffer's row stride), or
// in a QDQ DenseNet by the depthwise conv that requantizes it (fold-qdq's ConcatOfIntegers).
//
// The rewrite only annotates: the Concat gets `in_place` (one flag per input, plan_memory.h).
// Values and their meaning are unchanged, so the CPU executor runs the result as before; the
// memory plan places each flagged input as an alias inside the Concat's buffer, the GPU lowering
// gives its producer the channel-slice store and the Concat a copy of the other inputs only
// (or no kernel at all).
#include <algorithm>

#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "passes/passes.h"
#include "passes/plan_memory.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ops::kResidualInput;  // tessel.Conv / tessel.Gemm (X, W, B?, R?)

// A contraction the GPU lowers through the contraction generator (as the engine's
// lowered_as_contraction: grouped convs go to the op kernels) with the plain store map, which a
// channel slice replaces, and no residual operand, which the generator reads at the store index.
// Or a Concat along the channels (Inception-v3's nested torch.cat, DenseNet's nested prefixes
// from nest-prefix-concats): its in-place producers then store into the outer Concat's buffer
// directly, and its kernel copies the rest there.
bool stores_channel_slices(const ir::Graph& g, const ir::Node& p) {
  if (p.op == "Concat") {
    const int64_t rank = static_cast<int64_t>(g.type(p.outputs.at(0)).shape.size());
    const int64_t axis = p.get_int("axis", 0);
    return rank >= 1 && (axis == rank - 1 || axis == -1) && p.outputs.size() == 1;
  }
  const bool contraction =
      p.op == "tessel.Gemm" || (p.op == "tessel.Conv" && p.get_int("group", 1) == 1 &&
                                ops::read_store(p).kind == ops::StoreMap::Kind::kNhwc);
  const bool residual =
      p.inputs.size() > kResidualInput && p.inputs[kResidualInput] != ir::kNoValue;
  return contraction && !residual && p.outputs.size() == 1;
}

// The in_place flags of Concat `n`, all zero when none of its inputs qualifies.
std::vector<int64_t> in_place_flags(const ir::Graph& g, const ir::Node& n, int self,
                                    const std::vector<int>& producers,
                                    const std::vector<int>& uses,
                                    const std::vector<std::vector<int>>& readers) {
  std::vector<int64_t> flags(n.inputs.size(), 0);
  const ir::ValueId out = n.outputs.at(0);
  const int64_t rank = static_cast<int64_t>(g.type(out).shape.size());
  const int64_t axis = n.get_int("axis", 0);
  if (rank == 0 || (axis != rank - 1 && axis != -1)) return flags;
  if (std::count(g.outputs.begin(), g.outputs.end(), out) > 0) return flags;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const ir::ValueId v = n.inputs[k];
    if (v == ir::kNoValue || producers[v] < 0) continue;
    const ir::Node& p = g.nodes[static_cast<size_t>(producers[v])];
    // This Concat reads it once and nothing else does (uses counts graph outputs too), or,
    // for an inner Concat's output, the other readers read it where it lies.
    int others = uses[v] - 1;
    if (p.op == "Concat" && std::count(g.outputs.begin(), g.outputs.end(), v) == 0)
      for (int r : readers[v])
        if (r != self && reads_channel_slice(g, g.nodes[static_cast<size_t>(r)], v)) --others;
    if (others != 0 || std::count(n.inputs.begin(), n.inputs.end(), v) != 1) continue;
    flags[k] = stores_channel_slices(g, p);
  }
  return flags;
}

}  // namespace

ir::Graph concat_into_slices(ir::Graph g) {
  const std::vector<int> producers = g.producers();
  const std::vector<int> uses = use_counts(g);
  const std::vector<std::vector<int>> readers = g.users();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    if (n.op != "Concat") continue;
    const std::vector<int64_t> flags = in_place_flags(g, n, static_cast<int>(i), producers, uses, readers);
    if (std::count(flags.begin(), flags.end(), 1) > 0)
      n.attrs[kInPlaceAttr] = flags;
    else
      n.attrs.erase(kInPlaceAttr);
  }
  return g;
}

}  // namespace tessel::passes
