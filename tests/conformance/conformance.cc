#include "conformance/conformance.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "runtime/cpu/executor.h"

namespace tessel::conformance {
namespace {

namespace fs = std::filesystem;
using ::onnx::ModelProto;
using ::onnx::TypeProto;

// ONNX's backend runner uses atol 1e-7 except for the models converted from PyTorch, whose
// reference outputs were computed by PyTorch and carry more float noise.
Tolerance suite_tolerance(const std::string& suite) {
  return suite == "pytorch-converted" ? Tolerance{1e-3, 1e-5} : Tolerance{1e-3, 1e-7};
}

// ONNX's loader lets a case's data.json override the tolerance.
Tolerance case_tolerance(const fs::path& dir, Tolerance tol) {
  fs::path json_path = dir / "data.json";
  if (!fs::exists(json_path)) return tol;
  std::ifstream in(json_path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (j.contains("rtol") && j["rtol"].is_number()) tol.rtol = j["rtol"].get<double>();
    if (j.contains("atol") && j["atol"].is_number()) tol.atol = j["atol"].get<double>();
  }
  return tol;
}

void add_cases(const fs::path& dir, const std::string& suite, std::vector<TestCase>& out) {
  std::vector<TestCase> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "model.onnx")) continue;
    found.push_back(TestCase{suite, entry.path().filename().string(), entry.path(),
                             case_tolerance(entry.path(), suite_tolerance(suite))});
  }
  std::sort(found.begin(), found.end(),
            [](const TestCase& a, const TestCase& b) { return a.name < b.name; });
  out.insert(out.end(), found.begin(), found.end());
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The reason a declared type makes a case unsupported, if it does.
std::optional<std::string> type_skip(const TypeProto& t) {
  switch (t.value_case()) {
    case TypeProto::kTensorType: {
      int elem = t.tensor_type().elem_type();
      if (elem != ::onnx::TensorProto::UNDEFINED && !dtype_from_onnx(elem))
        return "element type " + onnx_type_name(elem);
      return std::nullopt;
    }
    case TypeProto::kSequenceType:
      return "sequence type";
    case TypeProto::kOptionalType:
      return "optional type";
    case TypeProto::kMapType:
      return "map type";
    case TypeProto::kSparseTensorType:
      return "sparse tensor type";
    default:
      return std::nullopt;
  }
}

std::optional<std::string> elem_type_skip(int elem) {
  if (dtype_from_onnx(elem)) return std::nullopt;
  return "element type " + onnx_type_name(elem);
}

// Element types a node names in its attributes: Cast's "to", the "dtype" of EyeLike and the
// random generators, and tensor-valued attributes (Constant's value, ConstantOfShape's).
std::optional<std::string> node_type_skip(const ::onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.type() == ::onnx::AttributeProto::INT && (a.name() == "to" || a.name() == "dtype")) {
      if (auto r = elem_type_skip(static_cast<int>(a.i()))) return r;
    }
    if (a.type() == ::onnx::AttributeProto::TENSOR) {
      if (auto r = elem_type_skip(a.t().data_type())) return r;
    }
    if (a.name() == "value_string" || a.name() == "value_strings") return "element type STRING";
  }
  return std::nullopt;
}

std::string model_ops(const ModelProto& model) {
  std::set<std::string> ops;
  for (const auto& n : model.graph().node())
    if (n.op_type() != "Constant") ops.insert(n.op_type());
  std::string r;
  for (const std::string& op : ops) r += (r.empty() ? "" : "+") + op;
  return r.empty() ? "Constant" : r;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return shape_str(idx);
}

// assert_allclose's rule for one element (equal_nan=True; an infinity must match exactly).
bool close(double got, double want, Tolerance tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::abs(got - want) <= tol.atol + tol.rtol * std::abs(want);
}

ModelProto read_model(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ModelProto model;
  TESSEL_USER_CHECK(in && model.ParseFromIstream(&in))
      << path.string() << ": cannot read or parse the model";
  return model;
}

// One test tensor. numpy has no bfloat16, so ONNX's test data stores bf16 tensors as UINT16
// holding the bit patterns; `declared` (the model's element type for this input or output)
// says when to read them back as bf16.
Tensor read_test_tensor(const fs::path& path, int declared) {
  std::ifstream in(path, std::ios::binary);
  ::onnx::TensorProto tp;
  TESSEL_USER_CHECK(in && tp.ParseFromIstream(&in))
      << path.string() << ": cannot read or parse the TensorProto";
  if (tp.data_type() == ::onnx::TensorProto::UINT16 && declared == ::onnx::TensorProto::BFLOAT16)
    tp.set_data_type(::onnx::TensorProto::BFLOAT16);
  return onnx::tensor_from_proto(tp, path.string(), path.parent_path().string());
}

int declared_elem_type(const ::onnx::ValueInfoProto& vi) {
  return vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
}

// prefix_0.pb, prefix_1.pb, ... as long as they exist; `values[i]` declares file i's type.
std::vector<Tensor> read_numbered(const fs::path& dir, const std::string& prefix,
                                  const std::vector<const ::onnx::ValueInfoProto*>& values) {
  std::vector<Tensor> r;
  for (size_t i = 0;; ++i) {
    fs::path p = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) return r;
    r.push_back(read_test_tensor(p, i < values.size() ? declared_elem_type(*values[i]) : 0));
  }
}

// Float inputs that determine the shape of an op's output (Resize's scales, Range's bounds,
// OneHot's depth). tessel compiles static shapes, so graph inputs feeding these are bound as
// constants like the integer inputs are. Integer shape operands (Reshape's shape, Slice's
// starts, ...) need no entry: every integer input is bound.
const std::map<std::string, std::set<int>> kFloatShapeOperands = {
    {"Resize", {1, 2}},    // roi, scales
    {"Upsample", {1}},     // scales
    {"Range", {0, 1, 2}},  // start, limit, delta
    {"OneHot", {1}},       // depth
};

std::set<std::string> float_shape_operands(const ModelProto& model) {
  std::set<std::string> names;
  for (const auto& n : model.graph().node()) {
    auto it = kFloatShapeOperands.find(n.op_type());
    if (it == kFloatShapeOperands.end()) continue;
    for (int i : it->second)
      if (i < n.input_size() && !n.input(i).empty()) names.insert(n.input(i));
  }
  return names;
}

// A few ONNX cases declare input dims their test data contradicts (CastLike's `like` in the
// expanded castlike cases is declared [3,4] and given as [1]). The data is what ONNX's runner
// feeds, so the model's declared shape is dropped where it disagrees with the data's; the
// importer then takes the data's shape from ImportOptions::input_shapes.
ModelProto with_data_shapes(const ModelProto& model, const std::map<std::string, Shape>& shapes) {
  ModelProto adjusted = model;
  for (auto& vi : *adjusted.mutable_graph()->mutable_input()) {
    auto it = shapes.find(vi.name());
    if (it == shapes.end() || !vi.type().has_tensor_type()) continue;
    const auto& dims = vi.type().tensor_type().shape().dim();
    bool agrees = dims.size() == static_cast<int>(it->second.size());
    for (int d = 0; agrees && d < dims.size(); ++d)
      agrees = !dims[d].has_dim_value() || dims[d].dim_value() == it->second[d];
    if (!agrees) vi.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  return adjusted;
}

std::vector<fs::path> data_sets(const fs::path& case_dir) {
  std::vector<std::pair<int, fs::path>> sets;
  const std::string prefix = "test_data_set_";
  for (const auto& entry : fs::directory_iterator(case_dir)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind(prefix, 0) == 0)
      sets.emplace_back(std::atoi(name.c_str() + prefix.size()), entry.path());
  }
  std::sort(sets.begin(), sets.end());
  std::vector<fs::path> r;
  for (auto& [n, p] : sets) r.push_back(std::move(p));
  return r;
}

// Runs one data set; returns the failure, or nullopt when every output matches.
std::optional<std::string> run_data_set(const TestCase& c, const ModelProto& model,
                                        const fs::path& set_dir, const ir::OpRegistry& registry) {
  // Test inputs feed the graph inputs that are not initializers, in order (as ONNX's runner
  // feeds them).
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<const ::onnx::ValueInfoProto*> fed, outputs;
  for (const auto& vi : model.graph().input())
    if (!initializers.count(vi.name())) fed.push_back(&vi);
  for (const auto& vi : model.graph().output()) outputs.push_back(&vi);
  std::vector<Tensor> inputs = read_numbered(set_dir, "input", fed);
  std::vector<Tensor> expected = read_numbered(set_dir, "output", outputs);
  if (inputs.size() > fed.size()) {
    return "the test data has " + std::to_string(inputs.size()) + " inputs, the model takes " +
           std::to_string(fed.size());
  }

  const std::set<std::string> shape_operands = float_shape_operands(model);
  onnx::ImportOptions options;
  options.registry = &registry;
  std::map<std::string, Tensor> by_name;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = fed[i]->name();
    by_name[name] = inputs[i];
    options.input_shapes[name] = inputs[i].shape();
    if (inputs[i].dtype() == DType::kI64 || inputs[i].dtype() == DType::kI32 ||
        shape_operands.count(name))
      options.bind_constants[name] = inputs[i];
  }
  ModelProto adjusted = with_data_shapes(model, options.input_shapes);
  const fs::path model_path = c.dir / "model.onnx";
  ir::Graph g = onnx::import_model_bytes(adjusted.SerializeAsString(), model_path.string(),
                                         c.dir.string(), options);

  std::vector<Tensor> feed;
  for (ir::ValueId id : g.inputs) {
    const std::string& name = g.value(id).name;
    auto it = by_name.find(name);
    if (it == by_name.end()) return "graph input '" + name + "' has no test data";
    feed.push_back(it->second);
  }
  std::vector<Tensor> got = runtime::cpu::run_graph(g, feed, {}, registry);
  if (got.size() != expected.size()) {
    return "the graph has " + std::to_string(got.size()) + " outputs, the test data " +
           std::to_string(expected.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    std::string what = "output " + std::to_string(i) + " '" + g.value(g.outputs[i]).name + "'";
    if (auto diff = compare(got[i], expected[i], c.tolerance, what)) return diff;
  }
  return std::nullopt;
}

}  // namespace

std::vector<TestCase> discover_cases(const fs::path& root, const std::vector<std::string>& suites) {
  std::vector<TestCase> cases;
  bool any_suite = false;
  for (const std::string& suite : suites) {
    if (!fs::is_directory(root / suite)) continue;
    any_suite = true;
    add_cases(root / suite, suite, cases);
  }
  if (!any_suite && fs::is_directory(root)) {
    std::string suite = fs::path(root).lexically_normal().filename().string();
    add_cases(root, suite.empty() ? "cases" : suite, cases);
  }
  return cases;
}

// Variants of supported ops that lie outside tessel's operator set by design (the set is
// "Resize (nearest, linear, cubic)" and "Dropout (inference)"): skipped with the reason, not
// failed.
std::optional<std::string> variant_skip(const ::onnx::NodeProto& n) {
  auto attr = [&](const char* name) -> const ::onnx::AttributeProto* {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  };
  if (n.op_type() == "Resize" || n.op_type() == "Upsample") {
    const auto* mode = attr("mode");
    if (mode && mode->s() != "nearest" && mode->s() != "linear" && mode->s() != "bilinear" &&
        mode->s() != "cubic")
      return "Resize mode '" + mode->s() + "' (tessel supports nearest, linear and cubic)";
  }
  if (n.op_type() == "BatchNormalization") {
    const auto* training = attr("training_mode");
    if (training && training->i() != 0) return std::string("BatchNormalization training mode");
  }
  if (n.op_type() == "Dropout" && n.input_size() > 2 && !n.input(2).empty())
    return std::string("Dropout with a training_mode input (tessel runs inference)");
  return std::nullopt;
}

std::optional<Skip> skip_reason(const ModelProto& model, const ir::OpRegistry& registry) {
  auto skip = [](std::string reason) { return Skip{reason, {reason}}; };
  for (const auto& o : model.opset_import()) {
    if (is_default_domain(o.domain()) &&
        (o.version() < onnx::kMinOpset || o.version() > onnx::kMaxOpset)) {
      return skip("opset " + std::to_string(o.version()) + " (tessel supports " +
                  std::to_string(onnx::kMinOpset) + " to " + std::to_string(onnx::kMaxOpset) + ")");
    }
  }
  const auto& graph = model.graph();
  for (const auto& n : graph.node())
    if (!is_default_domain(n.domain())) return skip("op domain '" + n.domain() + "'");

  for (const auto* list : {&graph.input(), &graph.output(), &graph.value_info()})
    for (const auto& vi : *list)
      if (auto r = type_skip(vi.type())) return skip(*r);
  for (const auto& t : graph.initializer())
    if (auto r = elem_type_skip(t.data_type())) return skip(*r);
  for (const auto& n : graph.node())
    if (auto r = node_type_skip(n)) return skip(*r);
  for (const auto& n : graph.node())
    if (auto r = variant_skip(n)) return skip(*r);

  std::set<std::string> missing;
  for (const auto& n : graph.node())
    if (n.op_type() != "Constant" && !registry.find(n.op_type())) missing.insert(n.op_type());
  if (missing.empty()) return std::nullopt;
  Skip s{missing.size() == 1 ? "unsupported op " : "unsupported ops ", {}};
  bool first = true;
  for (const std::string& op : missing) {
    s.reason += (first ? "" : ", ") + op;
    s.groups.push_back("unsupported op " + op);
    first = false;
  }
  return s;
}

std::optional<std::string> compare(const Tensor& got, const Tensor& expected, Tolerance tol,
                                   const std::string& what) {
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape())
    return what + ": got " + got.type_str() + ", expected " + expected.type_str();
  const bool exact = !is_float(expected.dtype());
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    bool ok = exact ? got.get_i64(i) == expected.get_i64(i)
                    : close(got.get_f64(i), expected.get_f64(i), tol);
    if (ok) continue;
    if (mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return std::nullopt;
  std::ostringstream s;
  s.precision(9);
  s << what << ": " << mismatches << " of " << expected.numel() << " elements differ; first at "
    << index_str(first, expected.shape()) << ": got ";
  if (exact)
    s << got.get_i64(first) << ", expected " << expected.get_i64(first);
  else
    s << got.get_f64(first) << ", expected " << expected.get_f64(first) << " (rtol " << tol.rtol
      << ", atol " << tol.atol << ")";
  return s.str();
}

CaseResult run_case(const TestCase& c, const ir::OpRegistry& registry) {
  CaseResult result;
  try {
    ModelProto model = read_model(c.dir / "model.onnx");
    result.ops = model_ops(model);
    if (auto skip = skip_reason(model, registry)) {
      result.status = CaseResult::Status::kSkip;
      result.reason = skip->reason;
      result.skip_groups = skip->groups;
      return result;
    }
    std::vector<fs::path> sets = data_sets(c.dir);
    if (sets.empty()) {
      result.reason = "no test_data_set_* folder";
      return result;
    }
    for (const fs::path& set : sets) {
      if (auto failure = run_data_set(c, model, set, registry)) {
        result.reason = one_line(set.filename().string() + ": " + *failure);
        return result;
      }
    }
    result.status = CaseResult::Status::kPass;
  } catch (const Error& e) {
    result.reason = one_line(e.what());
  } catch (const std::exception& e) {
    // Not a tessel error: a bug (bad_alloc, out_of_range, ...) the op or importer let escape.
    result.reason = one_line(std::string("unexpected exception: ") + e.what());
  }
  return result;
}

}  // namespace tessel::conformance
