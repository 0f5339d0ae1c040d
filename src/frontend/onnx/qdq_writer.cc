// See qdq_writer.h. The model is edited as a protobuf message, not rebuilt from tessel's IR:
// what is not quantized must reach onnxruntime exactly as the user wrote it.
#include "frontend/onnx/qdq_writer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/dtype.h"
#include "core/error.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/quant_common.h"

namespace tessel::onnx {
namespace {

using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

ModelProto parse_model(const std::string& bytes, const std::string& what) {
  ModelProto m;
  TESSEL_USER_CHECK(m.ParseFromString(bytes) && m.has_graph())
      << what << ": not an ONNX model (the file does not parse as a ModelProto with a graph)";
  return m;
}

int64_t default_opset(const ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

const TensorProto* find_initializer(const GraphProto& g, const std::string& name) {
  for (const TensorProto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

int64_t int_attr(const NodeProto& n, const std::string& name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

std::string node_label(const NodeProto& n, int64_t index) {
  return n.name().empty() ? n.op_type() + " #" + std::to_string(index) : n.name();
}

// The node computing each value of the graph, by index.
using Producers = std::map<std::string, int>;

Producers producers_of(const GraphProto& g) {
  Producers p;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output()) p[o] = i;
  return p;
}

const NodeProto* producer(const GraphProto& g, const Producers& producers, const std::string& v) {
  auto it = producers.find(v);
  return it == producers.end() ? nullptr : &g.node(it->second);
}

bool default_domain(const NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

// The value of constant `v`: an initializer, or a Constant node's tensor; else null.
const TensorProto* constant_value(const GraphProto& g, const Producers& producers,
                                  const std::string& v) {
  if (const TensorProto* t = find_initializer(g, v)) return t;
  const NodeProto* p = producer(g, producers, v);
  if (!p || p->op_type() != "Constant") return nullptr;
  for (const auto& a : p->attribute())
    if (a.name() == "value" && a.has_t()) return &a.t();
  return nullptr;
}

// A scalar, or one value per channel of an NCHW tensor ([C, 1, 1], [1, C, 1, 1]).
bool per_channel_shape(const TensorProto& t) {
  const int rank = t.dims_size();
  int64_t numel = 1;
  for (int64_t d : t.dims()) numel *= d;
  if (numel == 1) return true;
  if (rank < 3 || t.dims(rank - 1) != 1 || t.dims(rank - 2) != 1) return false;
  for (int d = 0; d + 3 < rank; ++d)
    if (t.dims(d) != 1) return false;
  return true;
}

// The computed input of `n` when it is a per-channel affine map of it (a BatchNormalization, a
// Mul or Add of a per-channel constant), or empty.
std::string affine_input(const GraphProto& g, const Producers& producers, const NodeProto& n) {
  if (!default_domain(n) || n.output_size() < 1) return {};
  if (n.op_type() == "BatchNormalization") {
    if (n.input_size() != 5) return {};
    for (int k = 1; k < 5; ++k)
      if (!constant_value(g, producers, n.input(k))) return {};
    return constant_value(g, producers, n.input(0)) ? std::string() : n.input(0);
  }
  if ((n.op_type() != "Mul" && n.op_type() != "Add") || n.input_size() != 2) return {};
  for (int side = 0; side < 2; ++side) {
    const TensorProto* c = constant_value(g, producers, n.input(1 - side));
    if (c && per_channel_shape(*c) && !constant_value(g, producers, n.input(side)))
      return n.input(side);
  }
  return {};
}

// QuantizableLayer::upstream of a layer reading `activation` (qdq_writer.h).
std::vector<std::string> upstream_of(const GraphProto& g, const Producers& producers,
                                     const std::string& activation) {
  std::string x = activation;
  const NodeProto* p = producer(g, producers, x);
  if (p && default_domain(*p) && p->input_size() >= 1 &&
      (p->op_type() == "Relu" || p->op_type() == "Clip" || p->op_type() == "LeakyRelu")) {
    x = p->input(0);
    p = producer(g, producers, x);
  }
  int affine = 0;
  for (std::string in; p && !(in = affine_input(g, producers, *p)).empty(); ++affine) {
    x = in;
    p = producer(g, producers, x);
  }
  // No affine step; x a graph input; or x a layer's output, into which the norm folds.
  if (affine == 0 || !p || p->op_type() == "Constant") return {};
  const std::string& op = p->op_type();
  if (op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul") return {};
  std::vector<std::string> up{x};
  if (op == "Concat" && default_domain(*p)) {
    for (const auto& in : p->input())
      if (!in.empty() && !constant_value(g, producers, in) &&
          std::find(up.begin(), up.end(), in) == up.end())
        up.push_back(in);
  }
  return up;
}

// The quantizable layer node i is, or false. A weight must be a float initializer (of rank 2
// for the dense layers) and the activation a computed value, not a constant.
bool as_layer(const GraphProto& g, const Producers& producers, int64_t i, QuantizableLayer& layer) {
  const NodeProto& n = g.node(static_cast<int>(i));
  if (!default_domain(n)) return false;
  if (n.op_type() != "Conv" && n.op_type() != "Gemm" && n.op_type() != "MatMul") return false;
  if (n.input_size() < 2 || n.output_size() < 1) return false;
  const TensorProto* w = find_initializer(g, n.input(1));
  if (!w || w->data_type() != TensorProto::FLOAT) return false;
  if (find_initializer(g, n.input(0)) || n.input(0).empty()) return false;
  if (n.op_type() != "Conv" && w->dims_size() != 2) return false;
  if (n.op_type() == "Conv" && w->dims_size() < 3) return false;
  layer.node_index = i;
  layer.name = node_label(n, i);
  layer.op = n.op_type();
  layer.activation = n.input(0);
  layer.weight = n.input(1);
  layer.output = n.output(0);
  // Conv's weight is (M, C/group, k...), Gemm's B is (N, K) with transB and (K, N) without,
  // MatMul's B is (K, N): the axis of the output channels.
  if (n.op_type() == "Conv")
    layer.weight_axis = 0;
  else if (n.op_type() == "Gemm")
    layer.weight_axis = int_attr(n, "transB", 0) ? 0 : 1;
  else
    layer.weight_axis = 1;
  layer.upstream = upstream_of(g, producers, layer.activation);
  return true;
}

TensorProto scalar_proto(const std::string& name, TensorProto::DataType type, double v) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  if (type == TensorProto::FLOAT)
    t.add_float_data(static_cast<float>(v));
  else
    t.add_int32_data(static_cast<int32_t>(v));  // INT8 elements live in int32_data
  return t;
}

// x stored inline in raw_data (little-endian, as tessel's tensors are).
TensorProto tensor_proto(const std::string& name, const Tensor& x) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype_info(x.dtype()).onnx_type);
  for (int64_t d : x.shape()) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(x.raw()), x.nbytes()));
  return t;
}

// Symmetric int8 of w along `axis` (all of w when per_tensor): scale = max |w| / 127, values
// rounded half to even and clamped to [-127, 127], so that -128 never appears and the grid
// is symmetric, as TensorRT expects of weights.
struct QuantizedWeight {
  Tensor values;  // i8, w's shape
  Tensor scale;   // f32, [C] or [] per tensor
};

QuantizedWeight quantize_weight(const Tensor& w, int64_t axis, bool per_tensor) {
  const int64_t count = per_tensor ? 1 : w.dim(axis);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  auto slot = [&](int64_t i) { return per_tensor ? 0 : (i / inner) % count; };
  std::vector<double> amax(static_cast<size_t>(count), 0.0);
  for (int64_t i = 0; i < w.numel(); ++i)
    amax[slot(i)] = std::max(amax[slot(i)], std::abs(w.get_f64(i)));
  QuantizedWeight q{Tensor(DType::kI8, w.shape()),
                    Tensor(DType::kF32, per_tensor ? Shape{} : Shape{count})};
  for (int64_t c = 0; c < count; ++c)
    q.scale.set_f64(c, amax[c] > 0 ? static_cast<float>(amax[c] / 127.0) : 1.0f);
  const ops::QuantRange range{-127, 127};
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float quotient =
        static_cast<float>(w.get_f64(i)) / static_cast<float>(q.scale.get_f64(slot(i)));
    q.values.set_i64(i, ops::quantize_value(quotient, 0, range));
  }
  return q;
}

// Value and node names are unique in a graph; new ones take a readable base and a counter
// where the base is taken.
class Names {
 public:
  explicit Names(const GraphProto& g) {
    for (const auto& v : g.input()) taken_.insert(v.name());
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const auto& n : g.node()) {
      taken_.insert(n.name());
      for (const auto& o : n.output()) taken_.insert(o);
    }
  }
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 2; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

 private:
  std::set<std::string> taken_;
};

NodeProto make_node(const std::string& op, const std::string& name,
                    const std::vector<std::string>& inputs, const std::string& output) {
  NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  return n;
}

}  // namespace

std::vector<QuantizableLayer> quantizable_layers(const std::string& model_bytes,
                                                 const std::string& what) {
  const ModelProto m = parse_model(model_bytes, what);
  const Producers producers = producers_of(m.graph());
  std::vector<QuantizableLayer> layers;
  for (int64_t i = 0; i < m.graph().node_size(); ++i) {
    QuantizableLayer layer;
    if (as_layer(m.graph(), producers, i, layer)) layers.push_back(std::move(layer));
  }
  return layers;
}

std::vector<std::string> quantized_values(const std::string& model_bytes, const std::string& what) {
  const ModelProto m = parse_model(model_bytes, what);
  std::vector<std::string> values;
  for (const NodeProto& n : m.graph().node())
    if (n.op_type() == "QuantizeLinear" && n.input_size() > 0) values.push_back(n.input(0));
  return values;
}

std::string with_graph_outputs(const std::string& model_bytes,
                               const std::vector<std::string>& names, const std::string& what) {
  ModelProto m = parse_model(model_bytes, what);
  std::set<std::string> present;
  for (const auto& o : m.graph().output()) present.insert(o.name());
  for (const std::string& name : names)
    if (present.insert(name).second) m.mutable_graph()->add_output()->set_name(name);
  return m.SerializeAsString();
}

std::string write_qdq_model(const std::string& model_bytes, const std::vector<QdqLayer>& layers,
                            const std::string& what, const std::string& base_dir) {
  ModelProto m = parse_model(model_bytes, what);
  const int64_t opset = default_opset(m);
  TESSEL_USER_CHECK(opset >= 10) << what << ": quantizing needs opset 10 or newer (the first "
                                 << "with QuantizeLinear); the model has opset " << opset;
  const bool per_tensor_weights = opset < 13;  // DequantizeLinear's `axis` came in opset 13
  GraphProto& g = *m.mutable_graph();
  // The activations to quantize and the layers whose weights are quantized.
  std::map<std::string, double> act_amax;
  std::map<int64_t, QuantizableLayer> chosen;
  const Producers producers = producers_of(g);
  for (const QdqLayer& l : layers) {
    QuantizableLayer layer;
    TESSEL_ICHECK(as_layer(g, producers, l.node_index, layer))
        << what << ": node " << l.node_index << " is not quantizable";
    TESSEL_USER_CHECK(std::isfinite(l.activation_amax))
        << what << ": activation '" << layer.activation << "' of " << layer.name
        << " calibrated to a non-finite range";
    act_amax.emplace(layer.activation, l.activation_amax);
    TESSEL_ICHECK(l.upstream_amax.empty() || l.upstream_amax.size() == layer.upstream.size())
        << what << ": " << layer.name << " has " << layer.upstream.size() << " upstream values, "
        << l.upstream_amax.size() << " thresholds given";
    for (size_t k = 0; k < l.upstream_amax.size(); ++k) {
      TESSEL_USER_CHECK(std::isfinite(l.upstream_amax[k]))
          << what << ": value '" << layer.upstream[k] << "' before the input of " << layer.name
          << " calibrated to a non-finite range";
      act_amax.emplace(layer.upstream[k], l.upstream_amax[k]);
    }
    chosen.emplace(l.node_index, std::move(layer));
  }

  // A Concat of quantized values and chosen layers' outputs (qdq_writer.h).
  std::map<std::string, double> output_amax;  // of the chosen layers with a calibrated output
  for (const QdqLayer& l : layers)
    if (l.output_amax > 0 && std::isfinite(l.output_amax))
      output_amax.emplace(chosen.at(l.node_index).output, l.output_amax);
  for (const NodeProto& n : g.node()) {
    if (n.op_type() != "Concat" || !default_domain(n) || n.output_size() != 1 ||
        n.input_size() == 0 || act_amax.count(n.output(0)))
      continue;
    std::map<std::string, double> outputs;  // the inputs to quantize with the concat
    double amax = 0;
    bool any_quantized = false, all = true;
    for (const auto& in : n.input()) {
      if (auto it = act_amax.find(in); it != act_amax.end()) {
        any_quantized = true;
        amax = std::max(amax, it->second);
      } else if (auto o = output_amax.find(in); o != output_amax.end()) {
        outputs.insert(*o);
        amax = std::max(amax, o->second);
      } else {
        all = false;
      }
    }
    if (!all || !any_quantized) continue;
    act_amax.insert(outputs.begin(), outputs.end());
    act_amax.emplace(n.output(0), amax);
  }

  // A quantized activation is int8 for every node that reads it (as onnxruntime's quantizer
  // and TensorRT have it: a residual Add reads the same int8 tensor as the conv beside it),
  // so its Q/DQ pair goes before its first reader, and all readers take the DequantizeLinear.
  Names names(g);
  std::map<std::string, std::string> act_dq, weight_dq;  // float value -> its DequantizeLinear
  std::vector<NodeProto> nodes;
  std::vector<TensorProto> new_inits;
  for (int64_t i = 0; i < g.node_size(); ++i) {
    NodeProto n = g.node(static_cast<int>(i));
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string a = n.input(k);
      auto amax = act_amax.find(a);
      if (amax == act_amax.end()) continue;
      if (!act_dq.count(a)) {
        const std::string scale = names.fresh(a + "_scale");
        const std::string zp = names.fresh(a + "_zero_point");
        const std::string q = names.fresh(a + "_quantized");
        const std::string dq = names.fresh(a + "_dequantized");
        new_inits.push_back(
            scalar_proto(scale, TensorProto::FLOAT, amax->second > 0 ? amax->second / 127.0 : 1.0));
        new_inits.push_back(scalar_proto(zp, TensorProto::INT8, 0));
        nodes.push_back(
            make_node("QuantizeLinear", names.fresh(a + "_QuantizeLinear"), {a, scale, zp}, q));
        nodes.push_back(make_node("DequantizeLinear", names.fresh(a + "_DequantizeLinear"),
                                  {q, scale, zp}, dq));
        act_dq[a] = dq;
      }
      n.set_input(k, act_dq[a]);
    }
    auto it = chosen.find(i);
    if (it != chosen.end()) {
      const QuantizableLayer& layer = it->second;
      if (!weight_dq.count(layer.weight)) {
        const std::string& w = layer.weight;
        const Tensor wf =
            tensor_from_proto(*find_initializer(g, w), "initializer '" + w + "'", base_dir);
        const QuantizedWeight qw = quantize_weight(wf, layer.weight_axis, per_tensor_weights);
        const std::string values = names.fresh(w + "_int8");
        const std::string scale = names.fresh(w + "_scale");
        const std::string zp = names.fresh(w + "_zero_point");
        const std::string dq = names.fresh(w + "_dequantized");
        new_inits.push_back(tensor_proto(values, qw.values));
        new_inits.push_back(tensor_proto(scale, qw.scale));
        new_inits.push_back(tensor_proto(zp, Tensor(DType::kI8, qw.scale.shape())));
        NodeProto d = make_node("DequantizeLinear", names.fresh(w + "_DequantizeLinear"),
                                {values, scale, zp}, dq);
        if (!per_tensor_weights) {
          auto* axis = d.add_attribute();
          axis->set_name("axis");
          axis->set_type(::onnx::AttributeProto::INT);
          axis->set_i(layer.weight_axis);
        }
        nodes.push_back(std::move(d));
        weight_dq[w] = dq;
      }
      n.set_input(1, weight_dq[layer.weight]);
    }
    nodes.push_back(std::move(n));
  }
  g.clear_node();
  for (auto& n : nodes) *g.add_node() = std::move(n);

  // Float weights nothing reads any more go, from the initializers and, in models that list
  // initializers as graph inputs too, from the inputs.
  std::set<std::string> used;
  for (const auto& n : g.node())
    for (const auto& in : n.input()) used.insert(in);
  for (const auto& o : g.output()) used.insert(o.name());
  auto unused_weight = [&](const std::string& name) {
    return weight_dq.count(name) && !used.count(name);
  };
  auto* inits = g.mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const TensorProto& t) { return unused_weight(t.name()); }),
               inits->end());
  auto* inputs = g.mutable_input();
  inputs->erase(
      std::remove_if(inputs->begin(), inputs->end(),
                     [&](const ::onnx::ValueInfoProto& v) { return unused_weight(v.name()); }),
      inputs->end());
  for (auto& t : new_inits) *g.add_initializer() = std::move(t);
  // External data is brought inline: the model may be written to another folder than the
  // one its data files are in.
  for (TensorProto& t : *g.mutable_initializer()) {
    if (t.data_location() != TensorProto::EXTERNAL) continue;
    t = tensor_proto(t.name(), tensor_from_proto(t, "initializer '" + t.name() + "'", base_dir));
  }
  return m.SerializeAsString();
}

}  // namespace tessel::onnx
