// Chooses the storage precision of every float tensor: fp16 for activations and weights in
// Precision::kFp16, with fp32 kept where it is needed or free.
//
// Which tensors must share a dtype is a property of each op: its "tied" float operands (Conv's
// X, W, B and Y; Add's A, B and C; ...) must all have one dtype, while a few operands accept
// any float dtype ("free": the fp32 bias of tessel.Conv / tessel.Gemm, BatchNormalization's
// statistics, Resize's roi and scales, Dropout's ratio, the input of a Cast or of Shape). Tied
// non-constant values are joined into classes (union-find); a class becomes fp16 unless one of
// its values touches an op that must stay fp32:
//  - integer ops (QLinear*, *Integer) and every op without OpFacts::fp16: their float
//    operands and, through the ties, the float neighbours around them stay fp32. fold-qdq's
//    int8 contractions (run before) are neither: their S and B are their own fp32 constants,
//    while the result Y (stored in out_dtype, the fp32 value rounded once) and a plain residual
//    R (read in its own dtype) each take the dtype of what they connect to -- fp16 between
//    fp16 ops, so that a conv the quantizer left float beside them (a downsample whose
//    output an int8 conv adds) is an fp16 Tensor Core conv, not an fp32 SIMT one. (Grouped
//    int8 convs, whose kernels store int8 or f32, keep theirs fp32.) QuantizeLinear and DequantizeLinear take fp16
//    on their float side (x; the output, with its scale converted), so that what a QDQ model
//    leaves in float (the stem, depthwise convs, pools) runs in fp16 between them; a depthwise
//    conv that fold-qdq gave its int8 input is an fp16 op like the others (X is no float
//    operand, its scale S a free one);
//  - nothing else: pools, Softmax and ReduceMean compute in fp32 internally (their reference
//    kernels in double or float, the GPU ones in fp32) and only store fp16.
// Free operands keep their dtype: biases, BN statistics and scales stay fp32 where the op
// accepts it, so they are added in the fp32 accumulator at full precision. (ONNX's own Conv
// and Gemm require the bias in X's dtype: convert-layout runs first so that convs and dense
// layers are tessel ops by then.)
//
// The decision is made at the sources only -- constants of fp16 classes are converted (one
// copy per constant), fp16 graph inputs get a Cast after them, Casts into an fp16 class cast to
// fp16 -- and type inference carries it through the nodes. Graph outputs of fp16 classes get a
// Cast back to fp32: the user sees the model's types (before the node that writes the output
// where that node upsamples, so that the Cast moves the smaller tensor). The only Casts the
// pass adds are these edge Casts.
#include <algorithm>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

// ONNX TensorProto data types, for Cast's `to`.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

// The ops whose reference (and GPU) kernels store fp16 and compute in fp32, with their free
// inputs, are those whose facts say so (OpFacts::fp16, fp16_free_inputs, fp16_free_output in
// ops/op_facts.cc); null for any other op. Integer inputs (shapes, axes, indices) never change
// and need no entry.
const ir::OpFacts* fp16_facts(const std::string& op) {
  const ir::OpFacts& f = ir::OpRegistry::global().facts(op);
  return f.fp16 ? &f : nullptr;
}

using ops::is_int8_contraction;

using ops::kResidualInput;  // tessel.Conv / tessel.Gemm's R

// The float activations of an int8 contraction that take their neighbours' dtype: its result Y
// where some node reads it and no out_dtype is set (a graph output alone stays as written), and
// a float residual R. Only the dense kernels' contractions (tessel.Gemm, group-1 tessel.Conv):
// the grouped kernels store int8 or the node's f32.
std::vector<ValueId> int8_free_operands(const ir::Graph& g, const ir::Node& n,
                                        const std::vector<char>& read) {
  std::vector<ValueId> r;
  if (n.get_int("group", 1) != 1) return r;
  if (n.inputs.size() > kResidualInput && n.inputs[kResidualInput] != kNoValue &&
      is_float(g.type(n.inputs[kResidualInput]).dtype))
    r.push_back(n.inputs[kResidualInput]);
  const ValueId y = n.outputs[0];
  if (!n.has_attr("out_dtype") && is_float(g.type(y).dtype) && read[static_cast<size_t>(y)])
    r.push_back(y);
  return r;
}

// fp16_facts of node n; none for an int8 contraction (fold-qdq's): it computes its f32 result
// from integers, and its float operands are either its own constants (S, B) or free
// (int8_free_operands).
const ir::OpFacts* fp16_facts(const ir::Graph& g, const ir::Node& n) {
  return is_int8_contraction(g, n) ? nullptr : fp16_facts(n.op);
}

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(size_t a, size_t b) { parent_[find(a)] = find(b); }

 private:
  std::vector<size_t> parent_;
};

class PrecisionChooser {
 public:
  explicit PrecisionChooser(ir::Graph g)
      : g_(std::move(g)),
        classes_(g_.values.size()),
        tied_(g_.values.size(), 0),
        pinned_(g_.values.size(), 0) {}

  ir::Graph run() {
    isolate_fp32_ops();
    classes_ = UnionFind(g_.values.size());
    tied_.assign(g_.values.size(), 0);
    pinned_.assign(g_.values.size(), 0);
    build_classes();
    convert_constants();
    cast_graph_inputs();
    cast_graph_outputs();
    ir::infer_types(g_, ir::OpRegistry::global());
    drop_identity_casts();
    return std::move(g_);
  }

 private:
  bool is_f32(ValueId v) const { return v != kNoValue && g_.type(v).dtype == DType::kF32; }
  bool is_const(ValueId v) const { return g_.value(v).is_constant(); }
  // v is stored as fp16: an f32 activation tied by some fp16 op, in a class nothing pins. (A
  // value no op ties -- read only by Casts, or passed straight to the output -- keeps its
  // dtype, so running the pass twice changes nothing the second time.)
  bool fp16(ValueId v) {
    TESSEL_ICHECK(static_cast<size_t>(v) < tied_.size()) << "fp16() asked about a new value";
    return is_f32(v) && !is_const(v) && tied_[v] && !pinned_[classes_.find(v)];
  }

  // The tied f32 operands of n (inputs then outputs); every float operand when n is not an
  // fp16 op.
  std::vector<ValueId> tied_operands(const ir::Node& n, const ir::OpFacts* op) const {
    std::vector<ValueId> r;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const bool free =
          op && std::count(op->fp16_free_inputs.begin(), op->fp16_free_inputs.end(),
                         static_cast<int>(i));
      if (is_f32(n.inputs[i]) && !free) r.push_back(n.inputs[i]);
    }
    if (op && op->fp16_free_output) return r;
    for (ValueId v : n.outputs)
      if (is_f32(v)) r.push_back(v);
    return r;
  }

  // A float op that computes in fp32 only (no OpFacts::fp16; not an integer op, whose float
  // neighbours stay fp32 as above) reads its float activations through Casts and writes them
  // through Casts: an fp32 island, so that the convs around it keep fp16 and Tensor Cores and
  // only its edges convert. (Pinning its neighbours instead let one Sin after a conv turn the
  // conv into an fp32 SIMT kernel.) The Casts take fp16 on their other side where that side's
  // class is fp16 (convert_constants); those left f32 -> f32 are dropped (drop_identity_casts).
  void isolate_fp32_ops() {
    UniqueNames values = UniqueNames::of_values(g_), nodes = UniqueNames::of_nodes(g_);
    std::vector<ir::Node> out;
    out.reserve(g_.nodes.size());
    for (ir::Node n : g_.nodes) {
      const ir::OpFacts& facts = ir::OpRegistry::global().facts(n.op);
      if (fp16_facts(g_, n) || facts.kind == ir::OpKind::kQuantization || is_int8_contraction(g_, n)) {
        out.push_back(std::move(n));
        continue;
      }
      auto f32_copy = [&](ValueId v, const std::string& suffix) {
        return g_.add_value(values.fresh(g_.value(v).name + suffix), {DType::kF32, g_.type(v).shape});
      };
      for (ValueId& v : n.inputs) {
        if (!is_f32(v) || is_const(v)) continue;
        const ValueId island = f32_copy(v, ".f32");
        out.push_back(ir::Node{"Cast", nodes.fresh(g_.value(v).name + ".to_f32"), {v}, {island}, {{"to", kOnnxFloat}}});
        island_casts_.insert(out.back().name);
        v = island;
      }
      std::vector<ir::Node> after;
      for (ValueId& y : n.outputs) {
        if (!is_f32(y) || std::count(g_.outputs.begin(), g_.outputs.end(), y)) continue;
        const ValueId island = f32_copy(y, ".f32");
        after.push_back(ir::Node{"Cast", nodes.fresh(g_.value(y).name + ".from_f32"), {island}, {y}, {{"to", kOnnxFloat}}});
        island_casts_.insert(after.back().name);
        y = island;
      }
      out.push_back(std::move(n));
      for (ir::Node& c : after) out.push_back(std::move(c));
    }
    g_.nodes = std::move(out);
  }

  // The island Casts that stayed f32 -> f32: their readers read the input instead.
  void drop_identity_casts() {
    std::vector<ir::Node> kept;
    for (ir::Node& n : g_.nodes) {
      if (!island_casts_.count(n.name) || g_.type(n.inputs[0]).dtype != g_.type(n.outputs[0]).dtype) {
        kept.push_back(std::move(n));
        continue;
      }
      const ValueId from = n.outputs[0], to = n.inputs[0];
      for (ir::Node& m : g_.nodes) std::replace(m.inputs.begin(), m.inputs.end(), from, to);
      for (ir::Node& m : kept) std::replace(m.inputs.begin(), m.inputs.end(), from, to);
    }
    g_.nodes = std::move(kept);
  }

  void build_classes() {
    std::vector<char> pin(g_.values.size(), 0);
    std::vector<char> read(g_.values.size(), 0);  // per value: some node reads it
    for (const ir::Node& n : g_.nodes)
      for (ValueId v : n.inputs)
        if (v != kNoValue) read[static_cast<size_t>(v)] = 1;
    for (const ir::Node& n : g_.nodes) {
      const ir::OpFacts* op = fp16_facts(g_, n);
      if (is_int8_contraction(g_, n)) {
        // Each free operand joins only its other ops' classes; the rest stay fp32.
        std::vector<ValueId> free = int8_free_operands(g_, n, read);
        for (ValueId v : free)
          if (!is_const(v)) tied_[v] = 1;
        for (ValueId v : n.inputs)
          if (is_f32(v) && std::find(free.begin(), free.end(), v) == free.end()) pin[v] = 1;
        for (ValueId v : n.outputs)
          if (is_f32(v) && std::find(free.begin(), free.end(), v) == free.end()) pin[v] = 1;
        continue;
      }
      if (!op) {
        for (ValueId v : n.inputs)
          if (is_f32(v)) pin[v] = 1;
        for (ValueId v : n.outputs)
          if (is_f32(v)) pin[v] = 1;
        continue;
      }
      ValueId previous = kNoValue;
      for (ValueId v : tied_operands(n, op)) {
        if (is_const(v)) continue;  // constants are converted per use, never join classes
        tied_[v] = 1;
        if (previous != kNoValue) classes_.join(v, previous);
        previous = v;
      }
    }
    for (size_t v = 0; v < pin.size(); ++v)
      if (pin[v]) pinned_[classes_.find(v)] = 1;
  }

  // Tied f32 constants of nodes whose class is fp16 are replaced by fp16 copies.
  void convert_constants() {
    std::unordered_map<ValueId, ValueId> half;
    UniqueNames names = UniqueNames::of_values(g_);
    for (ir::Node& n : g_.nodes) {
      const ir::OpFacts* op = fp16_facts(g_, n);
      if (!op) continue;
      std::vector<ValueId> tied = tied_operands(n, op);
      auto var = std::find_if(tied.begin(), tied.end(), [&](ValueId v) { return !is_const(v); });
      if (var == tied.end() || !fp16(*var)) continue;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId c = n.inputs[i];
        if (c == kNoValue || !is_const(c) || std::find(tied.begin(), tied.end(), c) == tied.end())
          continue;
        auto [it, inserted] = half.try_emplace(c, kNoValue);
        if (inserted) {
          Tensor t = g_.value(c).data->cast(DType::kF16);
          it->second = g_.add_constant(names.fresh(g_.value(c).name + ".f16"), std::move(t));
        }
        n.inputs[i] = it->second;
      }
    }
    for (ir::Node& n : g_.nodes)
      if (n.op == "Cast" && n.get_int("to", 0) == kOnnxFloat && fp16(n.outputs[0]))
        n.attrs["to"] = kOnnxFloat16;
    // An int8 contraction whose result goes fp16 stores it so (its epilogue still runs in
    // fp32; fuse carries the chain after it on through this out_dtype).
    for (ir::Node& n : g_.nodes)
      if (is_int8_contraction(g_, n) && !n.has_attr("out_dtype") && fp16(n.outputs[0]))
        ops::write_out_dtype(n, DType::kF16);
  }

  void cast_graph_inputs() {
    UniqueNames values = UniqueNames::of_values(g_), nodes = UniqueNames::of_nodes(g_);
    std::vector<ir::Node> casts;
    for (ValueId x : g_.inputs) {
      if (!fp16(x)) continue;
      const ValueId h =
          g_.add_value(values.fresh(g_.value(x).name + ".f16"), {DType::kF16, g_.type(x).shape});
      for (ir::Node& n : g_.nodes) std::replace(n.inputs.begin(), n.inputs.end(), x, h);
      casts.push_back(ir::Node{
          "Cast", nodes.fresh(g_.value(x).name + ".to_f16"), {x}, {h}, {{"to", kOnnxFloat16}}});
    }
    g_.nodes.insert(g_.nodes.begin(), casts.begin(), casts.end());
  }

  // The producer of an fp16 graph output y writes a new value; a Cast at the end writes y.
  // Where that producer upsamples into it (upsamples_into_output), the Cast goes before the
  // producer instead: the Resize then interpolates in fp32 and the Cast moves its input.
  void cast_graph_outputs() {
    UniqueNames values = UniqueNames::of_values(g_), nodes = UniqueNames::of_nodes(g_);
    std::vector<char> done(g_.values.size(), 0);
    for (ValueId y : std::vector<ValueId>(g_.outputs)) {
      if (!fp16(y) || done[y] ||
          std::find(g_.inputs.begin(), g_.inputs.end(), y) != g_.inputs.end())
        continue;
      done[y] = 1;
      const int up = g_.producers()[static_cast<size_t>(y)];
      if (up >= 0 && upsamples_into_output(g_, g_.nodes[static_cast<size_t>(up)], use_counts(g_))) {
        const ValueId x = g_.nodes[static_cast<size_t>(up)].inputs[0];
        const ValueId x32 =
            g_.add_value(values.fresh(g_.value(x).name + ".f32"), {DType::kF32, g_.type(x).shape});
        ir::Node cast{
            "Cast", nodes.fresh(g_.value(x).name + ".to_f32"), {x}, {x32}, {{"to", kOnnxFloat}}};
        g_.nodes[static_cast<size_t>(up)].inputs[0] = x32;
        g_.nodes.insert(g_.nodes.begin() + up, std::move(cast));
        continue;
      }
      const ValueId h =
          g_.add_value(values.fresh(g_.value(y).name + ".f16"), {DType::kF16, g_.type(y).shape});
      for (ir::Node& n : g_.nodes) {
        std::replace(n.inputs.begin(), n.inputs.end(), y, h);
        std::replace(n.outputs.begin(), n.outputs.end(), y, h);
      }
      g_.add_node("Cast", nodes.fresh(g_.value(y).name + ".to_f32"), {h}, {y},
                  {{"to", kOnnxFloat}});
    }
  }

  ir::Graph g_;
  std::set<std::string> island_casts_;  // the names of isolate_fp32_ops' Casts
  UnionFind classes_;
  std::vector<char> tied_;    // per value: a tied operand of some fp16 op
  std::vector<char> pinned_;  // per class representative
};

}  // namespace

ir::Graph choose_precision(ir::Graph g, Precision precision) {
  if (precision == Precision::kFp32) return g;
  TESSEL_ICHECK(precision == Precision::kFp16) << "unhandled precision";
  return PrecisionChooser(std::move(g)).run();
}

}  // namespace tessel::passes
