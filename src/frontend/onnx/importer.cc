#include "frontend/onnx/importer.h"

// onnx_pb.h defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML=1 comes with onnx_proto).
#include <onnx/onnx_pb.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "frontend/onnx/opset_conversion.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/onnx/topological_sort.h"
#include "ir/infer.h"

namespace tessel::onnx {
namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TypeProto;
using ::onnx::ValueInfoProto;

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// onnxruntime's QuantizeLinear and DequantizeLinear of domain com.microsoft (its quantizer
// writes them with UseQDQContribOps, and for 16- and 4-bit types) compute what the default
// domain's do; on the 8-bit types, the only ones tessel has, they import as those.
bool is_contrib_qdq(const NodeProto& n) {
  return n.domain() == "com.microsoft" &&
         (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear");
}

// "Conv 'conv1'", the way ir::Node::label() names nodes, before the ir::Node exists.
std::string node_label(const std::string& op, const std::string& name) {
  return op + " '" + name + "'";
}

// ---------------------------------------------------------------------------------------
// Types declared on graph inputs and outputs.

// A value_info's tensor type. A dim is std::nullopt when symbolic (dim_param) or unknown.
struct DeclaredType {
  std::optional<DType> dtype;  // nullopt: element type not declared (outputs only)
  bool has_shape = false;
  std::vector<std::optional<int64_t>> dims;
  std::vector<std::string> dim_params;  // names of the symbolic dims, "" when unnamed

  // "f32[N,3,224,224]"; "?" for an unnamed unknown dim.
  std::string str() const {
    std::string r = dtype ? std::string(dtype_name(*dtype)) : "?";
    if (!has_shape) return r + "[...]";
    r += "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) r += ",";
      r += dims[i] ? std::to_string(*dims[i]) : dim_params[i].empty() ? "?" : dim_params[i];
    }
    return r + "]";
  }
};

const char* type_kind(const TypeProto& t) {
  switch (t.value_case()) {
    case TypeProto::kTensorType:
      return "tensor";
    case TypeProto::kSequenceType:
      return "sequence";
    case TypeProto::kMapType:
      return "map";
    case TypeProto::kOptionalType:
      return "optional";
    case TypeProto::kSparseTensorType:
      return "sparse tensor";
    case TypeProto::kOpaqueType:
      return "opaque";
    case TypeProto::VALUE_NOT_SET:
      break;
  }
  return "no";
}

// `elem_type_required`: graph inputs must declare their element type; outputs may leave it
// to inference.
DeclaredType declared_type(const ValueInfoProto& vi, const std::string& what,
                           bool elem_type_required) {
  const TypeProto& t = vi.type();
  TESSEL_USER_CHECK(t.value_case() == TypeProto::kTensorType)
      << what << ": has " << type_kind(t) << " type; tessel supports tensors only";
  const auto& tt = t.tensor_type();
  DeclaredType d;
  if (elem_type_required || tt.elem_type() != ::onnx::TensorProto::UNDEFINED)
    d.dtype = dtype_from_onnx_elem_type(tt.elem_type(), what);
  d.has_shape = tt.has_shape();
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& dim = tt.shape().dim(i);
    if (dim.has_dim_value()) {
      TESSEL_USER_CHECK(dim.dim_value() >= 0)
          << what << ": dim " << i << " is " << dim.dim_value() << ", expected >= 0";
      d.dims.emplace_back(dim.dim_value());
    } else {
      d.dims.emplace_back(std::nullopt);
    }
    d.dim_params.push_back(dim.dim_param());
  }
  return d;
}

// Checks a shape given for a declared type: same rank, same static dims.
void check_agrees(const Shape& s, const DeclaredType& d, const std::string& what,
                  const char* given_by) {
  if (!d.has_shape) return;
  bool ok = s.size() == d.dims.size();
  for (size_t i = 0; ok && i < s.size(); ++i) ok = !d.dims[i] || *d.dims[i] == s[i];
  TESSEL_USER_CHECK(ok) << what << ": " << given_by << " gives shape " << shape_str(s)
                        << ", but the model declares " << d.str();
}

// The static shape of a graph input: given in full by the options, else the model's dims with
// a symbolic batch (dim 0) resolved by options.batch (default 1).
Shape resolve_input_shape(const std::string& name, const DeclaredType& d,
                          const ImportOptions& options, const std::string& what) {
  if (auto it = options.input_shapes.find(name); it != options.input_shapes.end()) {
    check_agrees(it->second, d, what, "ImportOptions::input_shapes");
    numel(it->second, what);
    return it->second;
  }
  TESSEL_USER_CHECK(d.has_shape)
      << what << ": has no declared shape; give it with ImportOptions::input_shapes";
  Shape s;
  std::string symbolic;
  for (size_t i = 0; i < d.dims.size(); ++i) {
    if (d.dims[i]) {
      s.push_back(*d.dims[i]);
    } else if (i == 0) {
      s.push_back(options.batch > 0 ? options.batch : 1);
    } else {
      symbolic += symbolic.empty() ? "" : ", ";
      symbolic += "dim " + std::to_string(i);
      if (!d.dim_params[i].empty()) symbolic += " ('" + d.dim_params[i] + "')";
      s.push_back(0);
    }
  }
  TESSEL_USER_CHECK(symbolic.empty()) << what << ": has symbolic " << symbolic << " in " << d.str()
                                      << "; give its full shape with ImportOptions::input_shapes";
  numel(s, what);
  return s;
}

// ---------------------------------------------------------------------------------------
// Attributes.

ir::Attribute convert_attribute(const AttributeProto& a, const std::string& label,
                                const std::string& base_dir) {
  const std::string what = label + ": attribute '" + a.name() + "'";
  TESSEL_USER_CHECK(a.ref_attr_name().empty())
      << what << " refers to function attribute '" << a.ref_attr_name()
      << "'; only nodes inside functions may do that";
  switch (a.type()) {
    case AttributeProto::FLOAT:
      return static_cast<double>(a.f());
    case AttributeProto::INT:
      return static_cast<int64_t>(a.i());
    case AttributeProto::STRING:
      return a.s();
    case AttributeProto::TENSOR:
      return tensor_from_proto(a.t(), what, base_dir);
    case AttributeProto::FLOATS:
      return std::vector<double>(a.floats().begin(), a.floats().end());
    case AttributeProto::INTS:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case AttributeProto::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      TESSEL_USER_ERROR() << what << " is a subgraph: control flow (If, Loop, Scan) is not "
                          << "supported by tessel";
      break;
    case AttributeProto::UNDEFINED:
      TESSEL_USER_ERROR() << what << " has no type";
      break;
    default:
      TESSEL_USER_ERROR() << what << " has kind " << AttributeProto::AttributeType_Name(a.type())
                          << ", which tessel does not support";
  }
  return {};
}

// The value of a Constant node. ONNX gives it in exactly one of several attributes.
Tensor constant_value(const NodeProto& n, const std::string& label, const std::string& base_dir) {
  TESSEL_USER_CHECK(n.attribute_size() == 1)
      << label << ": has " << n.attribute_size()
      << " attributes, expected exactly one of value, value_float, value_floats, value_int, "
         "value_ints";
  const AttributeProto& a = n.attribute(0);
  const std::string what = label + ": attribute '" + a.name() + "'";
  auto expect_kind = [&](AttributeProto::AttributeType kind) {
    TESSEL_USER_CHECK(a.type() == kind)
        << what << " has kind " << AttributeProto::AttributeType_Name(a.type()) << ", expected "
        << AttributeProto::AttributeType_Name(kind);
  };
  if (a.name() == "value") {
    expect_kind(AttributeProto::TENSOR);
    return tensor_from_proto(a.t(), what, base_dir);
  }
  if (a.name() == "value_float") {
    expect_kind(AttributeProto::FLOAT);
    return Tensor::from_vector<float>({}, {a.f()});
  }
  if (a.name() == "value_floats") {
    expect_kind(AttributeProto::FLOATS);
    std::vector<float> v(a.floats().begin(), a.floats().end());
    return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (a.name() == "value_int") {
    expect_kind(AttributeProto::INT);
    return Tensor::scalar_i64(a.i());
  }
  if (a.name() == "value_ints") {
    expect_kind(AttributeProto::INTS);
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  TESSEL_USER_CHECK(a.name() != "value_string" && a.name() != "value_strings")
      << what << ": string tensors are not supported by tessel";
  TESSEL_USER_CHECK(a.name() != "sparse_value")
      << what << ": sparse tensors are not supported by tessel";
  TESSEL_USER_ERROR() << what << " is not an attribute of Constant";
  return {};
}

// ---------------------------------------------------------------------------------------
// The graph.

class GraphImporter {
 public:
  GraphImporter(const GraphProto& graph, int64_t opset, const std::string& base_dir,
                const ImportOptions& options)
      : graph_(graph), base_dir_(base_dir), options_(options), model_opset_(opset) {
    g_.name = graph.name().empty() ? "main" : graph.name();
    g_.opset = converted_opset(opset);
  }

  ir::Graph run(const ir::OpRegistry& registry) {
    TESSEL_USER_CHECK(graph_.sparse_initializer_size() == 0)
        << "sparse initializers are not supported by tessel";
    check_option_names();
    collect_names();
    import_initializers();
    import_inputs();
    std::vector<ir::Node> nodes = import_nodes();
    resolve_node_inputs(nodes);
    g_.nodes = topological_sort(std::move(nodes), producer_);
    import_outputs();
    // Op forms of other opsets become the ones tessel implements (opset_conversion.h); the
    // rewrites that need types run once they are inferred.
    convert_untyped_forms(g_, model_opset_, registry);
    ir::verify(g_, registry);
    ir::infer_types(g_, registry);
    if (convert_typed_forms(g_, model_opset_)) {
      ir::verify(g_, registry);
      ir::infer_types(g_, registry);
    }
    check_declared_outputs();
    return std::move(g_);
  }

 private:
  bool is_graph_input(const std::string& name) const {
    for (const ValueInfoProto& vi : graph_.input())
      if (vi.name() == name) return true;
    return false;
  }

  // Names in the options that match no graph input are almost certainly typos.
  void check_option_names() const {
    TESSEL_USER_CHECK(options_.batch >= 0)
        << "ImportOptions::batch is " << options_.batch << ", expected >= 0";
    for (const auto& [name, shape] : options_.input_shapes)
      TESSEL_USER_CHECK(is_graph_input(name))
          << "ImportOptions::input_shapes names '" << name << "', which is not a graph input";
    for (const auto& [name, tensor] : options_.bind_constants)
      TESSEL_USER_CHECK(is_graph_input(name))
          << "ImportOptions::bind_constants names '" << name << "', which is not a graph input";
  }

  // Every value name the model uses, so that names tessel invents never collide with one.
  void collect_names() {
    for (const auto& t : graph_.initializer()) model_names_.insert(t.name());
    for (const auto& vi : graph_.input()) model_names_.insert(vi.name());
    for (const auto& n : graph_.node())
      for (const std::string& out : n.output()) model_names_.insert(out);
  }

  // Records that `by` defines value `name`; each ONNX name may be defined once.
  void define(const std::string& name, ir::ValueId id, const std::string& by) {
    TESSEL_USER_CHECK(!name.empty()) << by << ": defines a value with an empty name";
    auto [it, inserted] = definitions_.emplace(name, Definition{id, by});
    TESSEL_USER_CHECK(inserted) << "value '" << name << "' is defined twice: by " << it->second.by
                                << " and by " << by;
  }

  void import_initializers() {
    for (const auto& t : graph_.initializer()) {
      // A bound constant replaces the initializer that gives an input its default value.
      if (options_.bind_constants.count(t.name()) && is_graph_input(t.name())) continue;
      std::string what = "initializer '" + t.name() + "'";
      define(t.name(), g_.add_constant(t.name(), tensor_from_proto(t, what, base_dir_)), what);
    }
  }

  void import_inputs() {
    for (const ValueInfoProto& vi : graph_.input()) {
      const std::string what = "graph input '" + vi.name() + "'";
      if (auto it = options_.bind_constants.find(vi.name()); it != options_.bind_constants.end()) {
        DeclaredType d = declared_type(vi, what, true);
        TESSEL_USER_CHECK(it->second.dtype() == *d.dtype)
            << what << ": ImportOptions::bind_constants gives " << it->second.type_str()
            << ", but the model declares " << d.str();
        check_agrees(it->second.shape(), d, what, "ImportOptions::bind_constants");
        define(vi.name(), g_.add_constant(vi.name(), it->second), what);
        continue;
      }
      // An input with an initializer of the same name has ONNX's default value, which
      // tessel, compiling static graphs, takes as fixed: it stays the constant. (Only
      // initializers are defined at this point; a repeated input is caught by define().)
      if (auto def = definitions_.find(vi.name());
          def != definitions_.end() && g_.value(def->second.id).is_constant())
        continue;
      DeclaredType d = declared_type(vi, what, true);
      Shape shape = resolve_input_shape(vi.name(), d, options_, what);
      ir::ValueId id = g_.add_value(vi.name(), ir::TensorType{*d.dtype, std::move(shape)});
      define(vi.name(), id, what);
      g_.inputs.push_back(id);
    }
  }

  // Unique node names: a model's own names are kept where unique; a nameless node is called
  // "<OpType>_<index in the model>". Clashes get a numeric suffix.
  std::string unique_node_name(const NodeProto& n, int index) {
    if (!n.name().empty() && node_names_.insert(n.name()).second) return n.name();
    std::string base = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
    std::string candidate = base;
    for (int k = 1; node_names_.count(candidate) || explicit_node_names_.count(candidate); ++k)
      candidate = base + "_" + std::to_string(k);
    node_names_.insert(candidate);
    return candidate;
  }

  // A value for a node output ONNX left unnamed (an unused optional output between used
  // ones); its name must not clash with any of the model's.
  std::string placeholder_name(const std::string& node_name, int output) {
    std::string base = node_name + "_unused_output_" + std::to_string(output);
    std::string candidate = base;
    for (int k = 1; model_names_.count(candidate); ++k) candidate = base + "_" + std::to_string(k);
    model_names_.insert(candidate);
    return candidate;
  }

  // Creates the nodes and their output values. Inputs are resolved afterwards, since ONNX
  // models need not list nodes in topological order.
  std::vector<ir::Node> import_nodes() {
    for (const NodeProto& n : graph_.node())
      if (!n.name().empty()) explicit_node_names_.insert(n.name());
    std::vector<ir::Node> nodes;
    for (int i = 0; i < graph_.node_size(); ++i) {
      const NodeProto& n = graph_.node(i);
      TESSEL_USER_CHECK(!n.op_type().empty()) << "node " << i << " has no op_type";
      std::string name = unique_node_name(n, i);
      std::string label = node_label(n.op_type(), name);
      TESSEL_USER_CHECK(is_default_domain(n.domain()) || is_contrib_qdq(n))
          << label << ": op '" << n.op_type() << "' of domain '" << n.domain()
          << "' is not supported (tessel supports the default ONNX domain only)";
      if (n.op_type() == "Constant") {
        TESSEL_USER_CHECK(n.input_size() == 0) << label << ": has inputs, expected none";
        TESSEL_USER_CHECK(n.output_size() == 1)
            << label << ": has " << n.output_size() << " outputs, expected 1";
        define(n.output(0), g_.add_constant(n.output(0), constant_value(n, label, base_dir_)),
               label);
        continue;
      }
      ir::Attributes attrs;
      for (const AttributeProto& a : n.attribute()) {
        TESSEL_USER_CHECK(!attrs.count(a.name()))
            << label << ": attribute '" << a.name() << "' is given twice";
        attrs.emplace(a.name(), convert_attribute(a, label, base_dir_));
      }
      int n_out = n.output_size();
      while (n_out > 0 && n.output(n_out - 1).empty()) --n_out;  // omitted trailing outputs
      std::vector<ir::ValueId> outputs;
      for (int k = 0; k < n_out; ++k) {
        std::string out = n.output(k).empty() ? placeholder_name(name, k) : n.output(k);
        ir::ValueId id = g_.add_value(out, ir::TensorType{});
        define(out, id, label);
        producer_.resize(g_.values.size(), -1);
        producer_[static_cast<size_t>(id)] = static_cast<int>(nodes.size());
        outputs.push_back(id);
      }
      nodes.push_back(
          ir::Node{n.op_type(), std::move(name), {}, std::move(outputs), std::move(attrs)});
      node_protos_.push_back(&n);
    }
    producer_.resize(g_.values.size(), -1);  // values defined after the last node's outputs
    return nodes;
  }

  void resolve_node_inputs(std::vector<ir::Node>& nodes) const {
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const std::string& in : node_protos_[i]->input()) {
        if (in.empty()) {
          nodes[i].inputs.push_back(ir::kNoValue);
          continue;
        }
        auto it = definitions_.find(in);
        TESSEL_USER_CHECK(it != definitions_.end())
            << nodes[i].label() << ": input '" << in
            << "' is dangling: no node, graph input or initializer defines it";
        nodes[i].inputs.push_back(it->second.id);
      }
    }
  }

  void import_outputs() {
    for (const ValueInfoProto& vi : graph_.output()) {
      const std::string what = "graph output '" + vi.name() + "'";
      auto it = definitions_.find(vi.name());
      TESSEL_USER_CHECK(it != definitions_.end())
          << what << " is not produced by any node, graph input or initializer";
      g_.outputs.push_back(it->second.id);
      if (vi.has_type()) declared_outputs_.emplace_back(vi.name(), declared_type(vi, what, false));
    }
  }

  // A model that declares an output type tessel does not compute is wrong, or tessel is:
  // either way running it would give the user something other than what they asked for.
  void check_declared_outputs() const {
    for (const auto& [name, d] : declared_outputs_) {
      const ir::TensorType& t = g_.type(definitions_.at(name).id);
      bool ok = !d.dtype || *d.dtype == t.dtype;
      if (d.has_shape) {
        ok = ok && d.dims.size() == t.shape.size();
        for (size_t i = 0; ok && i < d.dims.size(); ++i)
          ok = !d.dims[i] || *d.dims[i] == t.shape[i];
      }
      TESSEL_USER_CHECK(ok) << "graph output '" << name << "' is declared as " << d.str()
                            << ", but tessel infers " << t.str();
    }
  }

  struct Definition {
    ir::ValueId id;
    std::string by;  // "initializer 'w'", "graph input 'x'", "Conv 'c1'": for error messages
  };

  const GraphProto& graph_;
  const std::string& base_dir_;
  const ImportOptions& options_;
  const int64_t model_opset_;  // the model's; g_.opset is the one it is converted to
  ir::Graph g_;
  std::unordered_map<std::string, Definition> definitions_;
  std::vector<int> producer_;                  // per value id: index of the writing node, or -1
  std::vector<const NodeProto*> node_protos_;  // parallel to the imported nodes
  std::unordered_set<std::string> model_names_;
  std::unordered_set<std::string> node_names_;
  std::unordered_set<std::string> explicit_node_names_;
  std::vector<std::pair<std::string, DeclaredType>> declared_outputs_;
};

// The default-domain opset the model imports.
int64_t default_opset(const ModelProto& model) {
  std::optional<int64_t> opset;
  for (const auto& o : model.opset_import()) {
    if (!is_default_domain(o.domain())) continue;
    TESSEL_USER_CHECK(!opset || *opset == o.version())
        << "imports the default ONNX domain twice, as opsets " << *opset << " and " << o.version();
    opset = o.version();
  }
  TESSEL_USER_CHECK(opset) << "imports no opset of the default ONNX domain";
  TESSEL_USER_CHECK(*opset >= kMinOpset && *opset <= kMaxOpset)
      << "opset " << *opset << " is not supported (tessel supports opsets " << kMinOpset << " to "
      << kMaxOpset << ")";
  return *opset;
}

ir::Graph import_parsed(const std::string& bytes, const std::string& base_dir,
                        const ImportOptions& options) {
  TESSEL_USER_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX))
      << "is larger than 2 GiB, which protobuf cannot parse; store the weights as external "
         "data";
  ModelProto model;
  TESSEL_USER_CHECK(model.ParseFromString(bytes))
      << "not an ONNX model: protobuf parsing failed (the file is truncated or not ONNX)";
  TESSEL_USER_CHECK(model.has_graph()) << "not an ONNX model: it has no graph";
  TESSEL_USER_CHECK(model.ir_version() >= 3)
      << "ir_version " << model.ir_version() << " is not supported (tessel needs 3 or later)";
  int64_t opset = default_opset(model);
  const ir::OpRegistry& registry = options.registry ? *options.registry : ir::OpRegistry::global();
  return GraphImporter(model.graph(), opset, base_dir, options).run(registry);
}

}  // namespace

ir::Graph import_model_bytes(const std::string& bytes, const std::string& what,
                             const std::string& base_dir, const ImportOptions& options) {
  try {
    return import_parsed(bytes, base_dir, options);
  } catch (const UserError& e) {
    // Errors inside name the node or tensor; the file is named once, here.
    throw UserError(what + ": " + e.what());
  }
}

ir::Graph import_model(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  TESSEL_USER_CHECK(std::filesystem::exists(path, ec)) << path << ": no such file";
  TESSEL_USER_CHECK(std::filesystem::is_regular_file(path, ec)) << path << ": not a regular file";
  std::ifstream in(path, std::ios::binary);
  TESSEL_USER_CHECK(in) << path << ": cannot open the model for reading";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TESSEL_USER_CHECK(!in.bad()) << path << ": error while reading the model";
  return import_model_bytes(bytes, path, folder_of(path), options);
}

}  // namespace tessel::onnx
