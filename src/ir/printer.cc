#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tessel::ir {
namespace {

bool is_plain_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (c == '\n') {
      r += "\\n";
    } else {
      r += c;
    }
  }
  return r + "\"";
}

std::string value_ref(const std::string& name) {
  return "%" + (is_plain_identifier(name) ? name : quote(name));
}

// A float that reads back exactly and never looks like an int.
std::string format_float(double v, bool is_double) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest decimal that reads back to the same value.
  char buf[64];
  for (int precision = is_double ? 15 : 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    double back = std::strtod(buf, nullptr);
    if (is_double ? back == v : static_cast<float>(back) == static_cast<float>(v)) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_element(const Tensor& t, int64_t i) {
  if (is_float(t.dtype())) return format_float(t.get_f64(i), t.dtype() == DType::kF64);
  if (t.dtype() == DType::kBool) return t.get_i64(i) ? "true" : "false";
  return std::to_string(t.get_i64(i));
}

std::string format_tensor_data(const Tensor& t, int64_t elide_over) {
  if (elide_over >= 0 && t.numel() > elide_over) return "[...]";
  std::string r = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) r += ", ";
    r += format_element(t, i);
  }
  return r + "]";
}

std::string format_type(const TensorType& t) { return t.str(); }

std::string format_attribute(const Attribute& a, int64_t elide_over) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_float(x, false);  // float attributes are float32, as in ONNX
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string r = "[";
          for (size_t i = 0; i < x.size(); ++i) r += (i ? ", " : "") + std::to_string(x[i]);
          return r + "]";
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          std::string r = "[";
          for (size_t i = 0; i < x.size(); ++i) r += (i ? ", " : "") + format_float(x[i], false);
          return r + "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string r = "[";
          for (size_t i = 0; i < x.size(); ++i) r += (i ? ", " : "") + quote(x[i]);
          return r + "]";
        } else {
          return "tensor<" + x.type_str() + " " + format_tensor_data(x, elide_over) + ">";
        }
      },
      a);
}

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& options) {
  std::ostringstream os;
  os << "graph @" << (is_plain_identifier(g.name) ? g.name : quote(g.name)) << " opset "
     << g.opset << " {\n";
  for (ValueId v : g.inputs)
    os << "  input " << value_ref(g.value(v).name) << " : " << format_type(g.type(v)) << "\n";
  for (const Value& v : g.values) {
    if (!v.data) continue;
    os << "  const " << value_ref(v.name) << " : " << format_type(v.type) << " = "
       << format_tensor_data(*v.data, options.elide_constants_over) << "\n";
  }
  for (const Node& n : g.nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      os << (i ? ", " : "") << value_ref(g.value(n.outputs[i]).name);
    os << " = " << (is_plain_identifier(n.op) ? n.op : quote(n.op)) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      os << (i ? ", " : "");
      os << (n.inputs[i] == kNoValue ? "_" : value_ref(g.value(n.inputs[i]).name));
    }
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [key, a] : n.attrs) {
        os << (first ? "" : ", ") << key << " = "
           << format_attribute(a, options.elide_constants_over);
        first = false;
      }
      os << "}";
    }
    os << " :";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      os << (i ? ", " : " ") << format_type(g.type(n.outputs[i]));
    os << " @" << quote(n.name) << "\n";
  }
  for (ValueId v : g.outputs) os << "  output " << value_ref(g.value(v).name) << "\n";
  os << "}\n";
  return os.str();
}

}  // namespace tessel::ir
