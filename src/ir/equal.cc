#include "ir/equal.h"

#include <unordered_map>

namespace tessel::ir {
namespace {

class Differ {
 public:
  Differ(const Graph& a, const Graph& b) : a_(a), b_(b) {}

  std::string diff() {
    if (a_.opset != b_.opset)
      return "opset " + std::to_string(a_.opset) + " vs " + std::to_string(b_.opset);
    if (a_.inputs.size() != b_.inputs.size())
      return std::to_string(a_.inputs.size()) + " vs " + std::to_string(b_.inputs.size()) +
             " graph inputs";
    for (size_t i = 0; i < a_.inputs.size(); ++i)
      if (std::string d = bind(a_.inputs[i], b_.inputs[i], "graph input " + std::to_string(i));
          !d.empty())
        return d;
    if (a_.nodes.size() != b_.nodes.size())
      return std::to_string(a_.nodes.size()) + " vs " + std::to_string(b_.nodes.size()) + " nodes";
    for (size_t i = 0; i < a_.nodes.size(); ++i)
      if (std::string d = node_diff(a_.nodes[i], b_.nodes[i]); !d.empty())
        return "node " + std::to_string(i) + " (" + a_.nodes[i].label() + "): " + d;
    if (a_.outputs.size() != b_.outputs.size()) return "different number of graph outputs";
    for (size_t i = 0; i < a_.outputs.size(); ++i)
      if (std::string d = bind(a_.outputs[i], b_.outputs[i], "graph output " + std::to_string(i));
          !d.empty())
        return d;
    return "";
  }

 private:
  // Records that a's value va corresponds to b's vb, or reports why it cannot.
  std::string bind(ValueId va, ValueId vb, const std::string& where) {
    if ((va == kNoValue) != (vb == kNoValue)) return where + ": omitted in one graph only";
    if (va == kNoValue) return "";
    auto it = map_.find(va);
    if (it != map_.end())
      return it->second == vb ? "" : where + ": refers to a different value (%" +
                                         a_.value(va).name + " vs %" + b_.value(vb).name + ")";
    const Value& x = a_.value(va);
    const Value& y = b_.value(vb);
    if (!(x.type == y.type)) return where + ": type " + x.type.str() + " vs " + y.type.str();
    if (x.is_constant() != y.is_constant()) return where + ": constant in one graph only";
    if (x.is_constant() && !bitwise_equal(*x.data, *y.data))
      return where + ": constants %" + x.name + " and %" + y.name + " differ";
    map_[va] = vb;
    return "";
  }

  std::string node_diff(const Node& x, const Node& y) {
    if (x.op != y.op) return "op " + x.op + " vs " + y.op;
    if (x.inputs.size() != y.inputs.size()) return "different number of inputs";
    if (x.outputs.size() != y.outputs.size()) return "different number of outputs";
    if (x.attrs.size() != y.attrs.size()) return "different attribute sets";
    for (const auto& [key, ax] : x.attrs) {
      auto it = y.attrs.find(key);
      if (it == y.attrs.end()) return "attribute '" + key + "' missing in the second graph";
      if (!attribute_equal(ax, it->second)) return "attribute '" + key + "' differs";
    }
    for (size_t i = 0; i < x.inputs.size(); ++i) {
      ValueId vx = x.inputs[i], vy = y.inputs[i];
      std::string where = "input " + std::to_string(i);
      // An operand must be an already-bound value or a constant seen for the first time.
      if (vx != kNoValue && !map_.count(vx) && !a_.value(vx).is_constant())
        return where + ": uses a value not defined before it";
      if (std::string d = bind(vx, vy, where); !d.empty()) return d;
    }
    for (size_t i = 0; i < x.outputs.size(); ++i)
      if (std::string d = bind(x.outputs[i], y.outputs[i], "output " + std::to_string(i));
          !d.empty())
        return d;
    return "";
  }

  const Graph& a_;
  const Graph& b_;
  std::unordered_map<ValueId, ValueId> map_;
};

}  // namespace

std::string structural_diff(const Graph& a, const Graph& b) { return Differ(a, b).diff(); }

}  // namespace tessel::ir
