// Small helpers shared by the rewriting passes.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tessel::passes {

// Replaces every read of `from` (node inputs and graph outputs) with `to`. When `from` is a
// graph output, `to` takes over its name, so the model's output names do not change.
// Returns false (and changes nothing) when that is impossible: `to` is a graph input, a
// constant, or itself a graph output.
bool replace_all_uses(ir::Graph& g, ir::ValueId from, ir::ValueId to);

// Removes the nodes whose flag is set, then values nobody refers to.
void erase_nodes(ir::Graph& g, const std::vector<char>& erase);

// Number of readers of each value, counting graph outputs as readers.
std::vector<int> use_counts(const ir::Graph& g);

// The index of v's only reading node (reading it once), or -1: none, several, or v is a graph
// output. `users`: g.users().
int sole_reader(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v);

// Float dtypes the GPU kernels store (f32, f16, bf16; not f64).
inline bool is_float_storage(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// c's constant when it holds `channels` values along its last axis only ([C] or [1, ..., 1, C]:
// one per channel of an NHWC tensor), else null.
const Tensor* channel_constant(const ir::Graph& g, ir::ValueId c, int64_t channels);

// n is a Resize that upsamples (more output elements than input) into a graph output that no
// node reads (`uses`: use_counts(g)): a conversion of that output (to NCHW, to fp32) moves less
// memory on n's input. convert-layout and choose-precision both put theirs there.
bool upsamples_into_output(const ir::Graph& g, const ir::Node& n, const std::vector<int>& uses);

// The parameters of a QuantizeLinear / DequantizeLinear node: a constant float scale (one
// value, or one per index of `axis`), a zero point absent or constant, no blocks. The one
// definition fold-batch-norm, fold-qdq and fuse read.
struct QdqParams {
  const Tensor* scale = nullptr;
  const Tensor* zero_point = nullptr;  // null where absent (zero)
  int64_t axis = 0;             // normalized against the quantized tensor's rank
  DType integer = DType::kI8;   // the quantized side's dtype (DequantizeLinear's input,
                                // QuantizeLinear's output)
  bool per_tensor() const { return scale->numel() == 1; }
  // The zero point of a per-tensor pair (0 where absent); nothing where it varies by channel.
  std::optional<int64_t> tensor_zero_point() const {
    if (!zero_point) return 0;
    if (zero_point->numel() != 1) return std::nullopt;
    return zero_point->get_i64(0);
  }
  // The scale of TensorRT's int8 form that the epilogues fold (one value, int8), or nothing.
  std::optional<double> int8_scale() const {
    if (integer != DType::kI8 || !per_tensor()) return std::nullopt;
    return scale->get_f64(0);
  }
};
// n's parameters, or nothing and (when given) *why: "is block-quantized", "'s scale is not a
// constant float", "'s zero point is not a constant" (to follow the operand's name).
std::optional<QdqParams> qdq_params(const ir::Graph& g, const ir::Node& n, std::string* why = nullptr);
// The index of the per-tensor QuantizeLinear (qdq_params, a single zero point) that alone reads
// v as its x (sole_reader), or -1. fuse-mul-quantize and integer-readers fold such a
// QuantizeLinear into the op before it.
int sole_tensor_quantize(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v);
// TensorRT's symmetric form: qdq_params with the zero point absent or all zeros (*why: "has a
// non-zero zero point (asymmetric)").
using SymmetricQdq = QdqParams;
std::optional<SymmetricQdq> symmetric_qdq(const ir::Graph& g, const ir::Node& n,
                                          std::string* why = nullptr);

// Fresh names for the values (or nodes) a pass adds: unique in the graph and among each other.
// Graph::unique_value_name rescans the graph on every call; a pass that adds a value per node
// keeps one of these instead.
class UniqueNames {
 public:
  static UniqueNames of_values(const ir::Graph& g);
  static UniqueNames of_nodes(const ir::Graph& g);
  // `base` if unused, else base_1, base_2, ...; the result counts as used from now on.
  std::string fresh(const std::string& base);

 private:
  std::unordered_set<std::string> used_;
};

// A pass that rebuilds the node list in order: each node it does not rewrite stays as it is,
// each one it does is replaced by the nodes `rewrite` emits (through the helpers below); then
// the graph's types are inferred again. lift-1d's sibling passes over other ranks (lower-3d,
// lower-conv-transpose) are written on it.
class NodeRewriter {
 public:
  explicit NodeRewriter(ir::Graph g);
  virtual ~NodeRewriter() = default;
  ir::Graph run() &&;

 protected:
  virtual bool rewrites(const ir::Node& n) const = 0;
  virtual void rewrite(const ir::Node& n) = 0;

  // A new value, named after `base`.
  ir::ValueId value(const std::string& base, DType dtype, Shape shape);
  // A new i64 vector constant (shapes, pads, axes), named after `base`.
  ir::ValueId i64s(const std::string& base, const std::vector<int64_t>& v);
  // A new constant, named after `base`.
  ir::ValueId constant(const std::string& base, Tensor t);
  // A node named after `name` (made unique) writing `out`.
  void emit(const std::string& op, const std::string& name, std::vector<ir::ValueId> ins,
            ir::ValueId out, ir::Attributes attrs = {});
  // A node named after `name` writing a new value of `dtype` and `shape`, named likewise, which
  // it returns.
  ir::ValueId emit(const std::string& op, const std::string& name, std::vector<ir::ValueId> ins,
                   DType dtype, Shape shape, ir::Attributes attrs = {});
  // A node that keeps the rewritten node's own name (it does that node's work: explain and
  // profiles name it so).
  void emit_as(const ir::Node& n, const std::string& op, std::vector<ir::ValueId> ins,
               ir::ValueId out, ir::Attributes attrs);

  ir::Graph g_;

 private:
  UniqueNames values_, names_;
  std::vector<ir::Node> out_;
};

}  // namespace tessel::passes
