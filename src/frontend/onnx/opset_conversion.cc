#include "frontend/onnx/opset_conversion.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/opset_rewriter.h"
#include "ir/infer.h"

namespace tessel::onnx {
namespace detail {

Rewriter::Rewriter(ir::Graph& g, int64_t model_opset, const ir::OpRegistry* registry)
    : g_(g), model_opset_(model_opset), registry_(registry), typed_(g.values.size(), 0) {
  for (const ir::Value& v : g.values) value_names_.insert(v.name);
  for (const ir::Node& n : g.nodes) node_names_.insert(n.name);
  for (size_t v = 0; v < g.values.size(); ++v) typed_[v] = g.values[v].is_constant();
  for (ir::ValueId v : g.inputs) typed_[static_cast<size_t>(v)] = 1;
}

const ir::TensorType& Rewriter::input_type(const ir::Node& n, size_t i) {
  TESSEL_USER_CHECK(has_input(n, i)) << where(n) << ": input " << i << " is missing";
  const auto v = static_cast<size_t>(n.inputs[i]);
  if (v >= typed_.size() || !typed_[v]) {
    // Infers the nodes converted so far. Rare (legacy broadcasting and the like, in models of
    // opsets before 7), so the whole prefix is inferred again each time it has grown.
    TESSEL_ICHECK(registry_ && inferred_nodes_ < g_.nodes.size())
        << n.label() << ": input " << i << " is written by no node converted so far";
    ir::infer_types(g_, *registry_);
    typed_.resize(g_.values.size(), 0);
    for (const ir::Node& done : g_.nodes)
      for (ir::ValueId out : done.outputs) typed_[static_cast<size_t>(out)] = 1;
    inferred_nodes_ = g_.nodes.size();
  }
  TESSEL_ICHECK(v < typed_.size() && typed_[v])
      << n.label() << ": input " << i << " has no type after inferring the nodes before it";
  return g_.type(n.inputs[i]);
}

std::string Rewriter::where(const ir::Node& n) const {
  return n.label() + " (opset " + std::to_string(model_opset_) + ")";
}

ir::ValueId Rewriter::constant(const ir::Node& n, const std::string& what, Tensor t) {
  const ir::ValueId v = g_.add_constant(fresh(value_names_, n.name + "." + what), std::move(t));
  typed_.resize(g_.values.size(), 0);
  typed_[static_cast<size_t>(v)] = 1;
  return v;
}

ir::ValueId Rewriter::value(const ir::Node& n, const std::string& what) {
  return g_.add_value(fresh(value_names_, n.name + "." + what), ir::TensorType{});
}

void Rewriter::flush(ir::Node n, std::vector<ir::Node>& out) {
  for (ir::Node& b : before_) out.push_back(std::move(b));
  out.push_back(std::move(n));
  for (ir::Node& a : after_) out.push_back(std::move(a));
  before_.clear();
  after_.clear();
}

std::string Rewriter::fresh(std::unordered_set<std::string>& used, const std::string& base) {
  std::string name = base;
  for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
  used.insert(name);
  return name;
}

ir::Node Rewriter::named(const ir::Node& n, ir::Node added) {
  added.name = fresh(node_names_, n.name + "." + added.name);
  return added;
}

ir::Node make_node(std::string op, std::string role, std::vector<ir::ValueId> inputs,
                   std::vector<ir::ValueId> outputs, ir::Attributes attrs) {
  return ir::Node{std::move(op), std::move(role), std::move(inputs), std::move(outputs),
                  std::move(attrs)};
}

Tensor i64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

bool has_input(const ir::Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] != ir::kNoValue;
}

}  // namespace detail

namespace {

// The oldest opset whose forms tessel's ops implement; older models are rewritten to it.
constexpr int64_t kOldestNativeOpset = 11;

enum class Step { kUntyped, kTyped };

using detail::has_input;
using detail::i64_vector;
using detail::make_node;
using detail::Rewriter;

// A rewrite changes `n` in place (and may queue nodes around it); it returns whether it changed
// anything, and throws a UserError for a form it cannot convert.
using Rewrite = bool (*)(Rewriter&, ir::Node&);

// ---- Leftovers of opsets before 7 ------------------------------------------------------------

// `consumed_inputs` (opsets 1-5, an in-place hint) and `is_test` (BatchNormalization and
// Dropout before opset 7; later opsets leave the mode to the runtime, and tessel runs
// inference) still appear in models of opsets 7 and up from old converters. Neither changes an
// inference result. (Before opset 7, test_mode_only first refuses is_test = 0.)
bool drop_removed_attributes(Rewriter&, ir::Node& n) {
  bool changed = n.attrs.erase("consumed_inputs") > 0;
  if (n.op == "BatchNormalization" || n.op == "Dropout") changed |= n.attrs.erase("is_test") > 0;
  return changed;
}

// Opset 6's binary ops broadcast B against A only when `broadcast` = 1, aligned at `axis` or
// at the trailing dims. Opset 7 replaced both with numpy's rule, which includes the trailing
// alignment; alignment at another axis means something else now. (Models of opsets before 7
// are converted by broadcast_from_axis; these attributes are leftovers in a later one.)
bool legacy_broadcast(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(!n.has_attr("axis"))
      << r.where(n) << ": attribute 'axis' (broadcasting from an axis) was removed in opset 7, "
      << "where inputs broadcast as in numpy; re-export the model";
  return n.attrs.erase("broadcast") > 0;
}

// Gemm's `broadcast` attribute (opset 6) is gone since opset 7, where C always broadcasts
// unidirectionally. C became optional in opset 11: the old required form is a valid new one.
bool gemm_broadcast(Rewriter&, ir::Node& n) { return n.attrs.erase("broadcast") > 0; }

// ---- Opsets 7-10 -> 11 -----------------------------------------------------------------------

// Dropout's mask had the data's type until opset 10 made it bool (in inference, all ones or
// all true). tessel's Dropout gives the bool mask; a Cast gives the old one.
bool dropout_mask_of_data_type(Rewriter& r, ir::Node& n) {
  if (n.outputs.size() < 2) return false;
  const DType data = r.input_type(n, 0).dtype;
  const ir::ValueId mask = n.outputs[1];
  n.outputs[1] = r.value(n, "bool_mask");
  r.after(n, make_node("Cast", "mask_to_data_type", {n.outputs[1]}, {mask},
                       {{"to", int64_t{dtype_info(data).onnx_type}}}));
  return true;
}

// Upsample-7's scales are an attribute; Upsample-9 made them input 1.
bool upsample_scales_to_input(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 1)
      << r.where(n) << ": has " << n.inputs.size()
      << " inputs, expected 1 (before opset 9 the scales are an attribute)";
  TESSEL_USER_CHECK(n.has_attr("scales"))
      << r.where(n) << ": has no 'scales' attribute (required before opset 9)";
  std::vector<float> scales;
  for (double s : n.get_floats("scales")) scales.push_back(static_cast<float>(s));
  n.attrs.erase("scales");
  n.inputs.push_back(r.constant(
      n, "scales", Tensor::from_vector<float>({static_cast<int64_t>(scales.size())}, scales)));
  return true;
}

// Upsample (opsets 7-9) and Resize-10, which is Upsample-9 under a new name, sample at
// x_in = x_out / scale: Resize-11's 'asymmetric'. Their nearest mode rounds down along an axis
// that grows and up along one that shrinks, as onnxruntime does and ONNX's opset-10 test
// test_resize_downsample_nearest expects: Resize-11's nearest_mode 'floor' and 'ceil' (an axis
// of scale 1 samples whole coordinates, where every mode agrees). A node that grows some axes
// and shrinks others becomes two Resizes, one per rounding. Scales that are not constant are
// read by inference later: resize_10_rounding then picks the rounding from the shapes.
bool upsample_to_resize(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 2 && n.inputs[1] != ir::kNoValue)
      << r.where(n) << ": expected 2 inputs (X, scales), got " << n.inputs.size();
  const ir::ValueId x = n.inputs[0], scales = n.inputs[1];
  const ir::ValueId roi = r.constant(n, "roi", Tensor(DType::kF32, {0}));  // unused
  n.op = "Resize";
  n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  n.inputs = {x, roi, scales};
  const ir::Value& s = r.graph().value(scales);
  if (n.get_string("mode", "nearest") != "nearest" || !s.is_constant()) return true;
  std::vector<float> grow, shrink;
  bool grows = false, shrinks = false;
  for (int64_t d = 0; d < s.data->numel(); ++d) {
    const float v = static_cast<float>(s.data->get_f64(d));
    grows |= v > 1;
    shrinks |= v < 1;
    grow.push_back(v < 1 ? 1.0f : v);
    shrink.push_back(v < 1 ? v : 1.0f);
  }
  n.attrs["nearest_mode"] = std::string(shrinks ? "ceil" : "floor");
  if (!grows || !shrinks) return true;
  const int64_t rank = static_cast<int64_t>(grow.size());
  const ir::ValueId grown = r.value(n, "grown");
  ir::Attributes grow_attrs = n.attrs;
  grow_attrs["nearest_mode"] = std::string("floor");
  const ir::ValueId grow_scales =
      r.constant(n, "grow_scales", Tensor::from_vector<float>({rank}, grow));
  r.before(n, make_node("Resize", "grow", {x, roi, grow_scales}, {grown}, std::move(grow_attrs)));
  n.inputs = {grown, roi,
              r.constant(n, "shrink_scales", Tensor::from_vector<float>({rank}, shrink))};
  return true;
}

// The nearest rounding of an Upsample or Resize-10 whose scales were not constant (see
// upsample_to_resize; every Resize of a model before opset 11 is one of those): 'floor' when no
// axis shrinks. When one does, the others may have scale 1 or grow, which the shapes do not
// tell apart.
bool resize_10_rounding(Rewriter& r, ir::Node& n) {
  if (n.get_string("mode", "nearest") != "nearest" || n.has_attr("nearest_mode")) return false;
  const Shape& in = r.type(n.inputs[0]).shape;
  const Shape& out = r.type(n.outputs[0]).shape;
  for (size_t d = 0; d < in.size(); ++d)
    TESSEL_USER_CHECK(out[d] >= in[d])
        << r.where(n) << ": an Upsample or Resize before opset 11 that shrinks " << shape_str(in)
        << " to " << shape_str(out)
        << " in nearest mode needs constant scales (tessel reads them to round each axis as "
        << "opsets 7-10 do)";
  n.attrs["nearest_mode"] = std::string("floor");
  return true;
}

// Pad-2's `pads` attribute became input 1 in opset 11. Its `value` becomes input 2, typed like
// the data, in pad_value_to_input; until then type inference ignores it.
bool pad_attributes_to_inputs(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 1)
      << r.where(n) << ": has " << n.inputs.size()
      << " inputs, expected 1 (before opset 11 the pads are an attribute)";
  TESSEL_USER_CHECK(n.has_attr("pads"))
      << r.where(n) << ": has no 'pads' attribute (required before opset 11)";
  n.inputs.push_back(r.constant(n, "pads", i64_vector(n.get_ints("pads"))));
  n.attrs.erase("pads");
  return true;
}

// Pad-2's `value` (a float, default 0, used in constant mode only) is opset 11's constant_value
// input, a scalar of the data's type. A zero is left to the input's default of 0.
bool pad_value_to_input(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("value")) return false;
  const double value = n.get_float("value", 0.0);
  n.attrs.erase("value");
  if (n.get_string("mode", "constant") != "constant" || (value == 0.0 && !std::signbit(value)))
    return true;
  Tensor t(r.type(n.inputs[0]).dtype, {});
  t.set_f64(0, value);
  n.inputs.resize(3, ir::kNoValue);
  n.inputs[2] = r.constant(n, "constant_value", std::move(t));
  return true;
}

// Slice-1's `starts`, `ends` and optional `axes` attributes became inputs 1-3 in opset 10,
// with the same meaning (clamped, negative values counting from the end) and step 1.
bool slice_attributes_to_inputs(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 1)
      << r.where(n) << ": has " << n.inputs.size()
      << " inputs, expected 1 (before opset 10 starts, ends and axes are attributes)";
  TESSEL_USER_CHECK(n.has_attr("starts") && n.has_attr("ends"))
      << r.where(n) << ": needs the 'starts' and 'ends' attributes (required before opset 10)";
  n.inputs.push_back(r.constant(n, "starts", i64_vector(n.get_ints("starts"))));
  n.inputs.push_back(r.constant(n, "ends", i64_vector(n.get_ints("ends"))));
  if (n.has_attr("axes")) n.inputs.push_back(r.constant(n, "axes", i64_vector(n.get_ints("axes"))));
  for (const char* key : {"starts", "ends", "axes"}) n.attrs.erase(key);
  return true;
}

// Clip-6's float `min` and `max` attributes became optional inputs 1 and 2 in opset 11, scalars
// of the data's type (tessel's Clip reads either form, but its passes and GPU code read only the
// inputs). An absent bound is an omitted input: both default to the type's range.
bool clip_bounds_to_inputs(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("min") && !n.has_attr("max")) return false;
  TESSEL_USER_CHECK(n.inputs.size() == 1)
      << r.where(n) << ": has bound attributes and bound inputs; before opset 11 the bounds are "
      << "attributes only";
  const DType dtype = r.type(n.inputs[0]).dtype;
  auto bound = [&](const char* key) {
    if (!n.has_attr(key)) return ir::kNoValue;
    Tensor t(dtype, {});
    t.set_f64(0, n.get_float(key, 0.0));
    return r.constant(n, key, std::move(t));
  };
  n.inputs.push_back(bound("min"));
  n.inputs.push_back(bound("max"));
  n.attrs.erase("min");
  n.attrs.erase("max");
  return true;
}

// BatchNormalization's `spatial` (opsets 7-8) was removed in opset 9. spatial = 1 is the
// per-channel form of later opsets. spatial = 0 normalises every activation with its own
// statistics (scale, B, mean and var of shape [C, D1, ...]): as opset 9's changelog suggests,
// that is a per-channel BatchNormalization of X flattened to [N, C*D1*...], reshaped back.
bool batch_norm_spatial(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("spatial")) return false;
  const int64_t spatial = n.get_int("spatial", 1);
  n.attrs.erase("spatial");
  if (spatial == 1) return true;
  TESSEL_USER_CHECK(spatial == 0) << r.where(n) << ": spatial is " << spatial
                                  << ", expected 0 or 1";
  TESSEL_USER_CHECK(n.inputs.size() == 5 && !n.outputs.empty())
      << r.where(n) << ": has " << n.inputs.size() << " inputs and " << n.outputs.size()
      << " outputs, expected 5 inputs (X, scale, B, mean, var) and an output";
  const ir::ValueId x = n.inputs[0];
  const ir::ValueId flat_x = r.value(n, "flat_x");
  r.before(n, make_node("Flatten", "flatten", {x}, {flat_x}, {{"axis", int64_t{1}}}));
  const char* names[] = {"X", "scale", "B", "mean", "var"};
  std::optional<ir::ValueId> minus_one;
  for (size_t i = 1; i < 5; ++i) {
    const ir::Value& p = r.graph().value(n.inputs[i]);
    if (p.is_constant()) {
      Tensor flat = p.data->reshaped({p.data->numel()});
      n.inputs[i] = r.constant(n, std::string("flat_") + names[i], std::move(flat));
      continue;
    }
    if (!minus_one) minus_one = r.constant(n, "flat_shape", i64_vector({-1}));
    const ir::ValueId flat = r.value(n, std::string("flat_") + names[i]);
    r.before(n, make_node("Reshape", std::string("flatten_") + names[i], {n.inputs[i], *minus_one},
                          {flat}));
    n.inputs[i] = flat;
  }
  n.inputs[0] = flat_x;
  const ir::ValueId x_shape = r.value(n, "x_shape");
  r.before(n, make_node("Shape", "shape", {x}, {x_shape}));
  const ir::ValueId y = n.outputs[0];
  n.outputs[0] = r.value(n, "flat_y");
  r.after(n, make_node("Reshape", "unflatten", {n.outputs[0], x_shape}, {y}));
  return true;
}

// ---- Opsets 19-22 ----------------------------------------------------------------------------

// QuantizeLinear-21's `output_dtype` names the output type when there is no zero point (the
// zero point's type rules otherwise, and the two must agree). tessel's QuantizeLinear takes the
// type from the zero point, so one of zeros is added, shaped like y_scale.
// LpNormalization (every opset; face-recognition and re-identification nets normalise their
// embedding with it) is x divided by its L1 or L2 norm along `axis`: a ReduceL1 / ReduceL2
// with keepdims, then a Div, ops that run on the GPU. Like the op, no epsilon.
bool lp_normalization_to_reduce(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 1 && n.outputs.size() == 1)
      << r.where(n) << ": expected 1 input and 1 output";
  const int64_t p = n.get_int("p", 2), axis = n.get_int("axis", -1);
  TESSEL_USER_CHECK(p == 1 || p == 2) << r.where(n) << ": p = " << p << " (1 or 2 expected)";
  const ir::ValueId x = n.inputs[0], norm = r.value(n, "norm");
  ir::Node reduce =
      make_node(p == 1 ? "ReduceL1" : "ReduceL2", "norm", {x}, {norm}, {{"keepdims", int64_t{1}}});
  // The reduction's axes: an attribute before opset 18, an input from it.
  if (converted_opset(r.model_opset()) >= 18)
    reduce.inputs.push_back(r.constant(n, "axes", i64_vector({axis})));
  else
    reduce.attrs["axes"] = std::vector<int64_t>{axis};
  r.before(n, std::move(reduce));
  n.op = "Div";
  n.inputs = {x, norm};
  n.attrs.clear();
  return true;
}

bool quantize_output_dtype(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("output_dtype")) return false;
  const int64_t code = n.get_int("output_dtype", 0);
  n.attrs.erase("output_dtype");
  if (code == 0) return true;  // UNDEFINED: the default
  const std::optional<DType> dtype = dtype_from_onnx(static_cast<int>(code));
  TESSEL_USER_CHECK(dtype) << r.where(n) << ": output_dtype "
                           << onnx_type_name(static_cast<int>(code))
                           << " is not an element type tessel supports";
  if (has_input(n, 2)) {
    const ir::Value& zp = r.graph().value(n.inputs[2]);
    TESSEL_USER_CHECK(!zp.is_constant() || zp.data->dtype() == *dtype)
        << r.where(n) << ": output_dtype is " << dtype_name(*dtype) << " but y_zero_point is "
        << dtype_name(zp.data->dtype()) << "; they must agree";
    return true;
  }
  if (*dtype == DType::kU8) return true;  // the type without a zero point anyway
  TESSEL_USER_CHECK(n.inputs.size() >= 2 && r.graph().value(n.inputs[1]).is_constant())
      << r.where(n) << ": output_dtype " << dtype_name(*dtype)
      << " without a y_zero_point needs a constant y_scale (tessel gives the output its type "
      << "through a zero point of y_scale's shape)";
  const Shape scale_shape = r.graph().value(n.inputs[1]).data->shape();
  n.inputs.resize(3, ir::kNoValue);
  n.inputs[2] = r.constant(n, "y_zero_point", Tensor(*dtype, scale_shape));
  return true;
}

// ---- The table -------------------------------------------------------------------------------

struct Rule {
  std::vector<std::string_view> ops;  // empty: every op
  int64_t first_opset;                // the model opsets the rule applies to
  int64_t last_opset;
  Step step;
  Rewrite rewrite;
};

// In the order they apply to a node. The changelog of every op is at
// https://github.com/onnx/onnx/blob/main/docs/Changelog.md (and onnx.defs.get_schema(op, v)).
// Opsets 1-6 first take the forms of opset 7 (pre7 rules), then go on with opsets 7-10's.
const std::vector<Rule>& rules() {
  // The binary ops that had opset 6's `broadcast` and `axis`.
  static const std::vector<std::string_view> kBinaryOps = {
      "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"};
  using namespace detail;  // NOLINT: the pre7 rewrites
  // clang-format off
  static const std::vector<Rule> kRules = {
      {{"BatchNormalization", "Dropout"}, 1, 6, Step::kUntyped, test_mode_only},
      {{}, 1, 10, Step::kUntyped, drop_removed_attributes},
      {kBinaryOps, 1, 6, Step::kUntyped, broadcast_from_axis},
      {kBinaryOps, 7, 10, Step::kUntyped, legacy_broadcast},
      {{"PRelu"}, 1, 6, Step::kUntyped, prelu_slope_per_channel},
      {{"Gemm"}, 1, 10, Step::kUntyped, gemm_broadcast},
      {{"Dropout"}, 1, 9, Step::kUntyped, dropout_mask_of_data_type},
      {{"Concat"}, 1, 3, Step::kUntyped, concat_default_axis},
      {{"Reshape"}, 1, 4, Step::kUntyped, reshape_shape_to_input},
      {{"Split"}, 1, 1, Step::kUntyped, split_1_to_split_2},
      {{"Cast"}, 1, 5, Step::kUntyped, cast_type_name_to_code},
      {{"Tile"}, 1, 5, Step::kUntyped, tile_1_to_repeats},
      {{"Selu"}, 1, 5, Step::kUntyped, selu_1_defaults},
      {{"Upsample"}, 1, 6, Step::kUntyped, upsample_scale_attributes},
      {{"Upsample"}, 1, 8, Step::kUntyped, upsample_scales_to_input},
      {{"Upsample", "Resize"}, 1, 10, Step::kUntyped, upsample_to_resize},
      {{"Resize"}, 1, 10, Step::kTyped, resize_10_rounding},
      {{"Pad"}, 1, 1, Step::kUntyped, pad_paddings_to_pads},
      {{"Pad"}, 1, 10, Step::kUntyped, pad_attributes_to_inputs},
      {{"Pad"}, 1, 10, Step::kTyped, pad_value_to_input},
      {{"Slice"}, 1, 9, Step::kUntyped, slice_attributes_to_inputs},
      {{"Clip"}, 1, 10, Step::kTyped, clip_bounds_to_inputs},
      {{"BatchNormalization"}, 1, 10, Step::kUntyped, batch_norm_spatial},
      {{"QuantizeLinear"}, 21, kMaxOpset, Step::kUntyped, quantize_output_dtype},
      {{"LpNormalization"}, 1, kMaxOpset, Step::kUntyped, lp_normalization_to_reduce},
  };
  // clang-format on
  return kRules;
}

bool applies(const Rule& rule, const ir::Node& n, int64_t model_opset, Step step) {
  if (rule.step != step || model_opset < rule.first_opset || model_opset > rule.last_opset)
    return false;
  if (rule.ops.empty()) return true;
  for (std::string_view op : rule.ops)
    if (n.op == op) return true;
  return false;
}

// The converted nodes go back into g.nodes one by one, so that while a node is rewritten the
// graph holds exactly the nodes before it (Rewriter::input_type infers them).
bool convert(ir::Graph& g, int64_t model_opset, Step step, const ir::OpRegistry* registry) {
  Rewriter r(g, model_opset, registry);
  std::vector<ir::Node> nodes = std::move(g.nodes);
  g.nodes.clear();
  g.nodes.reserve(nodes.size());
  bool changed = false;
  for (ir::Node& n : nodes) {
    for (const Rule& rule : rules())
      if (applies(rule, n, model_opset, step)) changed |= rule.rewrite(r, n);
    r.flush(std::move(n), g.nodes);
  }
  return changed;
}

}  // namespace

int64_t converted_opset(int64_t model_opset) {
  return model_opset < kOldestNativeOpset ? kOldestNativeOpset : model_opset;
}

void convert_untyped_forms(ir::Graph& g, int64_t model_opset, const ir::OpRegistry& registry) {
  convert(g, model_opset, Step::kUntyped, &registry);
}

bool convert_typed_forms(ir::Graph& g, int64_t model_opset) {
  return convert(g, model_opset, Step::kTyped, nullptr);
}

}  // namespace tessel::onnx
