// Lifts the 1-D CNN ops (audio and time-series nets: Conv1d, ConvTranspose1d, MaxPool1d,
// AvgPool1d, the global pools over [N, C, L]) to their 2-D forms over [N, C, 1, L], which convert-layout, fuse and the
// GPU kernels know:
//
//   Conv(x [N, C, L], W [Co, Ci/g, k])  ->  Squeeze(Conv(Unsqueeze(x, 2), W [Co, Ci/g, 1, k]), 2)
//
// with kernel_shape, strides, dilations [1, .] and pads [0, begin, 0, end]; pools alike. Then
// the Squeezes move down through per-element ops (unary ones, and broadcasts of lifted values
// with each other or with constants such as lower-batch-norm's [C, 1] scale and shift, which
// gain the axis) and cancel against the next lifted layer's Unsqueeze, so a chain Conv1d ->
// BN -> ReLU -> MaxPool1d -> Conv1d, residual adds included, becomes one 2-D chain with no
// reshapes inside.
#include <algorithm>

#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/conv_geometry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

bool lifted_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool" ||
         op == "GlobalAveragePool" || op == "GlobalMaxPool";
}

class Lifter {
 public:
  explicit Lifter(ir::Graph g)
      : g_(std::move(g)), values_(UniqueNames::of_values(g_)), names_(UniqueNames::of_nodes(g_)) {}

  ir::Graph run() {
    bool changed = false;
    std::vector<ir::Node> out;
    for (const ir::Node& n : std::vector<ir::Node>(g_.nodes)) {
      if (liftable(n)) {
        lift(n, out);
        changed = true;
      } else {
        out.push_back(n);
      }
    }
    if (!changed) return std::move(g_);
    g_.nodes = std::move(out);
    cancel();
    ir::infer_types(g_, ir::OpRegistry::global());
    return std::move(g_);
  }

 private:
  bool liftable(const ir::Node& n) const {
    if (!lifted_op(n.op) || n.inputs.empty() || n.outputs.size() != 1) return false;
    const ir::TensorType& x = g_.type(n.inputs[0]);
    if (x.shape.size() != 3 || !is_float(x.dtype)) return false;
    // Explicit pads; a conv's auto_pad is resolved to them (lift), a pool's or a transposed
    // conv's is kept out.
    if (n.op != "Conv" && n.get_string("auto_pad", "NOTSET") != "NOTSET") return false;
    if (n.op != "Conv" && n.op != "ConvTranspose") return true;
    const ValueId w = n.inputs.size() > 1 ? n.inputs[1] : kNoValue;
    return w != kNoValue && g_.value(w).is_constant() && g_.type(w).shape.size() == 3;
  }

  // Unsqueeze / Squeeze of axis 2: the axes an input from opset 13, an attribute before.
  ir::Node axis2_node(const std::string& op, const std::string& name, ValueId in, ValueId out) {
    if (g_.opset >= 13) {
      const ValueId axes = g_.add_constant(values_.fresh(name + ".axes"), Tensor::from_vector<int64_t>({1}, {2}));
      return ir::Node{op, names_.fresh(name), {in, axes}, {out}, {}};
    }
    return ir::Node{op, names_.fresh(name), {in}, {out}, {{"axes", std::vector<int64_t>{2}}}};
  }

  // 4-D shape of a 3-D one: a 1 at axis 2.
  static Shape with_axis2(Shape s) {
    s.insert(s.begin() + 2, 1);
    return s;
  }

  void lift(const ir::Node& n, std::vector<ir::Node>& out) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const ValueId x4 = g_.add_value(values_.fresh(g_.value(x).name + ".2d"),
                                    {g_.type(x).dtype, with_axis2(g_.type(x).shape)});
    out.push_back(axis2_node("Unsqueeze", n.name + ".to_2d", x, x4));
    ir::Node lifted = n;
    lifted.inputs[0] = x4;
    if (n.op == "Conv" || n.op == "ConvTranspose") {
      const Tensor& w = *g_.value(n.inputs[1]).data;
      // The same elements as [Co, Ci/g, 1, k] (a transposed conv's [Ci, Co/g, 1, k]).
      lifted.inputs[1] = g_.add_constant(values_.fresh(g_.value(n.inputs[1]).name + ".2d"), w.reshaped(with_axis2(w.shape())));
    }
    auto prepend = [&](const char* key, int64_t first) {
      if (!n.has_attr(key)) return;
      std::vector<int64_t> v = n.get_ints(key);
      v.insert(v.begin(), first);
      lifted.attrs[key] = v;
    };
    prepend("kernel_shape", 1);
    prepend("strides", 1);
    prepend("dilations", 1);
    prepend("output_padding", 0);  // ConvTranspose's
    prepend("output_shape", 1);
    if (n.op == "Conv") {
      // The pads as the conv resolves them (auto_pad SAME_UPPER / SAME_LOWER / VALID included).
      const ops::ConvGeometry geo = ops::plan_conv(n, g_.type(x).shape, g_.type(n.inputs[1]).shape);
      lifted.attrs.erase("auto_pad");
      lifted.attrs["pads"] = std::vector<int64_t>{0, geo.pad_begin.at(0), 0, geo.pad_end.at(0)};
    } else if (n.has_attr("pads")) {
      const std::vector<int64_t> p = n.get_ints("pads");  // [begin, end]
      lifted.attrs["pads"] = std::vector<int64_t>{0, p.at(0), 0, p.at(1)};
    }
    const ValueId y4 = g_.add_value(values_.fresh(g_.value(y).name + ".2d"), {g_.type(y).dtype, with_axis2(g_.type(y).shape)});
    lifted.outputs[0] = y4;
    out.push_back(std::move(lifted));
    out.push_back(axis2_node("Squeeze", n.name + ".to_1d", y4, y));
  }

  bool is_axis2(const ir::Node& n, const std::string& op) const {
    if (n.op != op || n.outputs.size() != 1) return false;
    std::vector<int64_t> axes;
    if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
      const Tensor* t = g_.value(n.inputs[1]).data.get();
      if (!t) return false;
      axes = t->to_i64_vector();
    } else {
      axes = n.get_ints("axes", {});
    }
    return axes == std::vector<int64_t>{2};
  }

  // A per-element op (unary, or broadcasting) whose activation operands are all axis-2
  // Squeezes of lifted values: true with those operands' 4-D sources in `sources`.
  bool over_squeezes(const ir::Node& n, const std::vector<int>& producers) const {
    const ir::OpFacts& f = ir::OpRegistry::global().facts(n.op);
    const bool unary = f.kind == ir::OpKind::kElementwise && f.nhwc == ir::NhwcForm::kAgnostic;
    if ((!unary && f.kind != ir::OpKind::kBroadcast) || n.outputs.size() != 1) return false;
    if (g_.type(n.outputs[0]).shape.size() != 3) return false;
    int activations = 0;
    for (ValueId c : n.inputs) {
      if (c == kNoValue || g_.value(c).is_constant()) continue;
      const int p = producers[static_cast<size_t>(c)];
      if (p < 0 || !is_axis2(g_.nodes[static_cast<size_t>(p)], "Squeeze") || g_.type(c).shape != g_.type(n.outputs[0]).shape)
        return false;
      ++activations;
    }
    return activations > 0;
  }

  // To a fixpoint:
  //  A. a per-element op over Squeezes runs on their 4-D sources and is squeezed after (the
  //     Squeeze moves past it, towards the next lifted layer);
  //  B. an Unsqueeze(axis 2) of a Squeeze(axis 2) is the Squeeze's source: its readers read that.
  // Squeezes left without readers go.
  void cancel() {
    for (bool again = true; again;) {
      again = false;
      const std::vector<int> producers = g_.producers();
      for (size_t i = 0; i < g_.nodes.size() && !again; ++i) {
        ir::Node& n = g_.nodes[i];
        if (is_axis2(n, "Unsqueeze")) {
          const int p = producers[static_cast<size_t>(n.inputs[0])];
          if (p < 0 || !is_axis2(g_.nodes[static_cast<size_t>(p)], "Squeeze")) continue;
          const ValueId from = n.outputs[0], source = g_.nodes[static_cast<size_t>(p)].inputs[0];
          if (std::count(g_.outputs.begin(), g_.outputs.end(), from)) continue;
          for (ir::Node& m : g_.nodes) std::replace(m.inputs.begin(), m.inputs.end(), from, source);
          std::vector<char> erase(g_.nodes.size(), 0);
          erase[i] = 1;
          erase_nodes(g_, erase);
          again = true;
        } else if (over_squeezes(n, producers)) {
          ir::Node lifted = n;
          for (ValueId& c : lifted.inputs) {
            if (c == kNoValue) continue;
            c = g_.value(c).is_constant() ? constant_4d(c) : g_.nodes[static_cast<size_t>(producers[static_cast<size_t>(c)])].inputs[0];
          }
          const ValueId y = n.outputs[0];
          const ValueId y4 = g_.add_value(values_.fresh(g_.value(y).name + ".2d"), {g_.type(y).dtype, with_axis2(g_.type(y).shape)});
          lifted.outputs[0] = y4;
          ir::Node squeeze = axis2_node("Squeeze", n.name + ".to_1d", y4, y);
          g_.nodes[i] = std::move(lifted);
          g_.nodes.insert(g_.nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(squeeze));
          again = true;
        }
      }
    }
    // Squeezes nobody reads any more (every reader took the 4-D value).
    const std::vector<int> uses = use_counts(g_);
    std::vector<char> erase(g_.nodes.size(), 0);
    bool any = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (is_axis2(g_.nodes[i], "Squeeze") && uses[static_cast<size_t>(g_.nodes[i].outputs[0])] == 0 &&
          !std::count(g_.outputs.begin(), g_.outputs.end(), g_.nodes[i].outputs[0]))
        erase[i] = any = true;
    if (any) erase_nodes(g_, erase);
  }

  // A constant operand of a per-element op, for the 4-D value: rank >= 2 gains axis rank - 1
  // (it aligns with [C, L] or [N, C, L] from the right); a scalar or [L] stays.
  ValueId constant_4d(ValueId c) {
    const Tensor& t = *g_.value(c).data;
    if (t.shape().size() < 2) return c;
    Shape s = t.shape();
    s.insert(s.end() - 1, 1);
    return g_.add_constant(values_.fresh(g_.value(c).name + ".2d"), t.reshaped(s));
  }

  ir::Graph g_;
  UniqueNames values_, names_;
};

}  // namespace

ir::Graph lift_1d(ir::Graph g) { return Lifter(std::move(g)).run(); }

}  // namespace tessel::passes
