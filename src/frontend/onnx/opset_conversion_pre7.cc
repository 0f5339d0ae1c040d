// The rewrites of op forms of opsets 1 to 6 into those of opset 7 (declared in opset_rewriter.h;
// the table in opset_conversion.cc says which op and opsets each applies to). What changed, op
// by op, is in ONNX's docs/Changelog.md; onnx.defs.get_schema(op, version) gives each form.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "frontend/onnx/opset_rewriter.h"
#include "frontend/onnx/tensor_proto.h"

namespace tessel::onnx::detail {
namespace {

// A constant input's value as integers, or a UserError naming what it is for.
std::vector<int64_t> constant_ints(Rewriter& r, const ir::Node& n, size_t i, const char* what) {
  TESSEL_USER_CHECK(has_input(n, i) && r.graph().value(n.inputs[i]).is_constant())
      << r.where(n) << ": input '" << what << "' must be a constant (tessel needs it to convert "
      << "the node to its opset-7 form)";
  const Tensor& t = *r.graph().value(n.inputs[i]).data;
  TESSEL_USER_CHECK(!is_float(t.dtype()))
      << r.where(n) << ": input '" << what << "' is " << t.type_str() << ", expected integers";
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(static_cast<int64_t>(t.get_f64(k)));
  return v;
}

}  // namespace

// BatchNormalization and Dropout before opset 7 run in training mode unless is_test is nonzero
// (batch statistics, random dropout). ONNX's own converter to opset 7 refuses is_test = 0; so
// does tessel, which runs inference. An absent is_test is taken as inference, as ONNX's
// converter does: the attribute, not the default, says a model was exported for training.
bool test_mode_only(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("is_test")) return false;
  TESSEL_USER_CHECK(n.get_int("is_test", 0) != 0)
      << r.where(n) << ": is_test = 0 asks for training mode; tessel runs inference (export "
      << "the model in eval mode)";
  n.attrs.erase("is_test");
  return true;
}

// Before opset 7, B broadcasts against A only with broadcast = 1: aligned with A's trailing
// dims, or with A's dims from `axis` on. Opset 7's numpy rule aligns trailing dims, so B aligned
// at an axis gets as many trailing 1s as A has dims after it: a reshaped constant, or an
// Unsqueeze of a computed B. Without broadcast = 1 both shapes are equal, as numpy allows too.
bool broadcast_from_axis(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("broadcast") && !n.has_attr("axis")) return false;
  const bool broadcast = n.get_int("broadcast", 0) != 0;
  const bool from_axis = n.has_attr("axis");
  int64_t axis = n.get_int("axis", 0);
  const int64_t given_axis = axis;
  n.attrs.erase("broadcast");
  n.attrs.erase("axis");
  if (!broadcast || !from_axis) return true;
  TESSEL_USER_CHECK(n.inputs.size() == 2)
      << r.where(n) << ": has " << n.inputs.size() << " inputs, expected 2 (A, B)";
  const Shape a = r.input_type(n, 0).shape;
  const Shape b = r.input_type(n, 1).shape;
  const auto rank_a = static_cast<int64_t>(a.size()), rank_b = static_cast<int64_t>(b.size());
  // One element broadcasts from anywhere, as numpy's rule agrees where B's rank is not larger.
  if (numel(b) == 1 && rank_b <= rank_a) return true;
  if (axis < 0) axis += rank_a;
  TESSEL_USER_CHECK(axis >= 0 && axis + rank_b <= rank_a)
      << r.where(n) << ": B of shape " << shape_str(b) << " cannot broadcast from axis "
      << given_axis << " of A of shape " << shape_str(a);
  const int64_t trailing = rank_a - axis - rank_b;
  if (trailing == 0) return true;
  Shape aligned = b;
  aligned.resize(static_cast<size_t>(rank_a - axis), 1);
  const ir::Value& bv = r.graph().value(n.inputs[1]);
  if (bv.is_constant()) {
    n.inputs[1] = r.constant(n, "aligned_b", bv.data->reshaped(aligned));
    return true;
  }
  std::vector<int64_t> axes;
  for (int64_t d = rank_b; d < rank_b + trailing; ++d) axes.push_back(d);
  const ir::ValueId b_aligned = r.value(n, "aligned_b");
  r.before(n, make_node("Unsqueeze", "align_b", {n.inputs[1]}, {b_aligned}, {{"axes", axes}}));
  n.inputs[1] = b_aligned;
  return true;
}

// PRelu before opset 7 takes a slope of one value or of one per channel (X's dim 1); opset 7
// broadcasts it unidirectionally as numpy does, from the trailing dims. A slope of C values on
// an X of rank 3 or more becomes [C, 1, ...].
bool prelu_slope_per_channel(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 2)
      << r.where(n) << ": has " << n.inputs.size() << " inputs, expected 2 (X, slope)";
  const Shape x = r.input_type(n, 0).shape;
  const Shape slope = r.input_type(n, 1).shape;
  if (x.size() < 3 || slope.size() != 1 || slope[0] == 1) return false;
  TESSEL_USER_CHECK(slope[0] == x[1])
      << r.where(n) << ": slope of shape " << shape_str(slope) << " is neither one value nor one "
      << "per channel of X of shape " << shape_str(x);
  Shape per_channel(x.size() - 1, 1);
  per_channel[0] = slope[0];
  const ir::Value& sv = r.graph().value(n.inputs[1]);
  if (sv.is_constant()) {
    n.inputs[1] = r.constant(n, "slope", sv.data->reshaped(per_channel));
    return true;
  }
  const ir::ValueId shaped = r.value(n, "slope");
  r.before(
      n, make_node("Reshape", "shape_slope",
                   {n.inputs[1], r.constant(n, "slope_shape", i64_vector(per_channel))}, {shaped}));
  n.inputs[1] = shaped;
  return true;
}

// Concat-1's axis defaults to 1; Concat-4 requires it.
bool concat_default_axis(Rewriter&, ir::Node& n) {
  if (n.has_attr("axis")) return false;
  n.attrs["axis"] = int64_t{1};
  return true;
}

// Reshape-1's `shape` attribute became input 1 in opset 5, with the same meaning.
bool reshape_shape_to_input(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.inputs.size() == 1 && n.has_attr("shape"))
      << r.where(n) << ": expected one input and the 'shape' attribute (before opset 5 the "
      << "shape is an attribute)";
  n.inputs.push_back(r.constant(n, "shape", i64_vector(n.get_ints("shape"))));
  n.attrs.erase("shape");
  return true;
}

// Upsample-1 scales the two last dims of an NCHW tensor by `height_scale` and `width_scale`,
// in mode 'nearest' or 'bilinear'; Upsample-7 takes `scales` for every dim, and calls bilinear
// 'linear'. The output extent is floor(in * scale) in both.
bool upsample_scale_attributes(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.has_attr("height_scale") && n.has_attr("width_scale"))
      << r.where(n) << ": needs the 'height_scale' and 'width_scale' attributes (required "
      << "before opset 7)";
  TESSEL_USER_CHECK(n.inputs.size() == 1 && r.input_type(n, 0).shape.size() == 4)
      << r.where(n) << ": expected one input of rank 4 (NCHW) before opset 7";
  // 'linear', Upsample-7's name, is taken too: it cannot mean anything else.
  const std::string mode = n.get_string("mode", "nearest");
  TESSEL_USER_CHECK(mode == "nearest" || mode == "bilinear" || mode == "linear")
      << r.where(n) << ": mode '" << mode << "' is not one of Upsample-1's (nearest, bilinear)";
  n.attrs["mode"] = std::string(mode == "nearest" ? "nearest" : "linear");
  n.attrs["scales"] = std::vector<double>{1.0, 1.0, n.get_float("height_scale", 1.0),
                                          n.get_float("width_scale", 1.0)};
  n.attrs.erase("height_scale");
  n.attrs.erase("width_scale");
  return true;
}

// Pad-1 calls Pad-2's `pads` `paddings`, in the same layout (all begins, then all ends).
bool pad_paddings_to_pads(Rewriter& r, ir::Node& n) {
  if (!n.has_attr("paddings")) return false;
  TESSEL_USER_CHECK(!n.has_attr("pads"))
      << r.where(n) << ": has both 'paddings' (Pad-1) and 'pads' (Pad-2)";
  n.attrs["pads"] = n.get_ints("paddings");
  n.attrs.erase("paddings");
  return true;
}

// Split-1 takes the lengths as the `split` attribute or as an optional input, and gives `axis`
// no default; Split-2 has the attribute only, and axis 0 by default. A Split-1 without an axis
// is refused rather than guessed.
bool split_1_to_split_2(Rewriter& r, ir::Node& n) {
  TESSEL_USER_CHECK(n.has_attr("axis"))
      << r.where(n) << ": Split-1 has no 'axis'; its default is undefined (Split-2 made it 0), so "
      << "tessel does not guess it";
  if (!has_input(n, 1)) {
    n.inputs.resize(1);
    return false;
  }
  TESSEL_USER_CHECK(!n.has_attr("split"))
      << r.where(n) << ": gives the lengths both as the 'split' attribute and as input 1";
  n.attrs["split"] = constant_ints(r, n, 1, "split");
  n.inputs.resize(1);
  return true;
}

// Cast before opset 6 names the target type as a string ("FLOAT", the TensorProto.DataType
// enum's name); opset 6 made it the enum's value.
bool cast_type_name_to_code(Rewriter& r, ir::Node& n) {
  const auto it = n.attrs.find("to");
  if (it == n.attrs.end() || !std::holds_alternative<std::string>(it->second)) return false;
  std::string name = std::get<std::string>(it->second);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  ::onnx::TensorProto_DataType code = ::onnx::TensorProto::UNDEFINED;
  TESSEL_USER_CHECK(::onnx::TensorProto_DataType_Parse(name, &code) &&
                    code != ::onnx::TensorProto::UNDEFINED)
      << r.where(n) << ": 'to' is '" << std::get<std::string>(it->second)
      << "', which is not an ONNX element type";
  it->second = static_cast<int64_t>(code);
  return true;
}

// Tile-1 repeats X `tiles` times along `axis`, both inputs; Tile-6 takes the repeats of every
// dim as one input. Both inputs must be constants, and X's rank known.
bool tile_1_to_repeats(Rewriter& r, ir::Node& n) {
  if (n.inputs.size() != 3) return false;
  const std::vector<int64_t> tiles = constant_ints(r, n, 1, "tiles");
  const std::vector<int64_t> axis = constant_ints(r, n, 2, "axis");
  const auto rank = static_cast<int64_t>(r.input_type(n, 0).shape.size());
  TESSEL_USER_CHECK(tiles.size() == 1 && axis.size() == 1)
      << r.where(n) << ": 'tiles' and 'axis' must hold one value each";
  const int64_t a = axis[0] < 0 ? axis[0] + rank : axis[0];
  TESSEL_USER_CHECK(a >= 0 && a < rank)
      << r.where(n) << ": axis " << axis[0] << " is out of range for an input of rank " << rank;
  std::vector<int64_t> repeats(static_cast<size_t>(rank), 1);
  repeats[static_cast<size_t>(a)] = tiles[0];
  n.inputs = {n.inputs[0], r.constant(n, "repeats", i64_vector(repeats))};
  return true;
}

// Selu-1's defaults are alpha 1.6732 and gamma 1.0507; Selu-6 has more digits. (Float
// attributes, as the importer reads them.)
bool selu_1_defaults(Rewriter&, ir::Node& n) {
  bool changed = false;
  for (const auto& [key, value] : {std::pair{"alpha", 1.6732f}, std::pair{"gamma", 1.0507f}}) {
    if (n.has_attr(key)) continue;
    n.attrs[key] = static_cast<double>(value);
    changed = true;
  }
  return changed;
}

}  // namespace tessel::onnx::detail
