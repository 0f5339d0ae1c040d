// Identity, Dropout (inference only), Cast and Constant: the elementwise ops that move or
// convert data without arithmetic. They accept every tessel dtype where ONNX does.
#include "ops/elementwise_data.h"

#include <optional>

#include "core/error.h"
#include "core/half.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

void register_identity(ir::OpRegistry& r) {
  r.add({.name = "Identity",
         .infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.dtype(0), ctx.shape(0)); },
         .compute = [](ir::KernelContext& ctx) { copy_data(ctx.input(0), ctx.output(0)); }});
}

// Dropout in inference is the identity, with an all-true mask. Since opset 12 the ratio and
// training_mode are inputs; a model that asks for training (random dropout) is refused, except
// with a ratio of 0, where training dropout is the identity too.
void infer_dropout(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 0, kFloatTypes);
  if (ctx.has_input(1)) {
    check_dtype(ctx, 1, kFloatTypes);
    TESSEL_USER_CHECK(numel(ctx.shape(1)) == 1) << node.label() << ": 'ratio' has shape "
                                                << shape_str(ctx.shape(1)) << ", expected a scalar";
  }
  if (ctx.has_input(2)) {
    TESSEL_USER_CHECK(ctx.dtype(2) == DType::kBool && numel(ctx.shape(2)) == 1)
        << node.label() << ": 'training_mode' must be a bool scalar, got " << ctx.input(2).str();
    const Tensor* training = ctx.value(2);
    if (training && training->get_i64(0) != 0) {
      // Decided once the ratio is known; an absent ratio defaults to 0.5.
      const Tensor* ratio = ctx.value(1);
      const bool ratio_pending = ctx.has_input(1) && !ratio;
      TESSEL_USER_CHECK(ratio_pending || (ratio && ratio->get_f64(0) == 0.0))
          << node.label()
          << ": training_mode=true (random dropout) is not supported; tessel runs inference, "
             "so export the model in evaluation mode";
    }
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  if (ctx.outputs().size() > 1) ctx.set_output(1, DType::kBool, ctx.shape(0));
}

void register_dropout(ir::OpRegistry& r) {
  r.add({.name = "Dropout",
         .min_inputs = 1,
         .max_inputs = 3,
         .min_outputs = 1,
         .max_outputs = 2,
         .infer = infer_dropout,
         .compute = [](ir::KernelContext& ctx) {
           copy_data(ctx.input(0), ctx.output(0));
           if (ctx.num_outputs() > 1) {
             Tensor& mask = ctx.output(1);
             bool* m = mask.data<bool>();
             for (int64_t i = 0; i < mask.numel(); ++i) m[i] = true;
           }
         }});
}

DType cast_target(const ir::Node& node) {
  const int64_t to = node.require_int("to");
  const std::optional<DType> t = dtype_from_onnx(static_cast<int>(to));
  TESSEL_USER_CHECK(t) << node.label() << ": cast to " << onnx_type_name(static_cast<int>(to))
                       << " is not supported (tessel's dtypes are f32, f16, bf16, f64, i8, u8, "
                          "i32, i64 and bool)";
  return *t;
}

// Cast to bf16 converts to f32 and then drops the low 16 bits: ONNX's reference implementation
// truncates (onnx/reference/ops/op_cast.py, float32_to_bfloat16(truncate=True)) and its backend
// tests expect it, although onnxruntime rounds to nearest even. NaN stays a quiet NaN.
Tensor cast_to_bf16(const Tensor& x) {
  Tensor out(DType::kBF16, x.shape());
  uint16_t* dst = out.data_u16();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const uint32_t bits = float_bits(static_cast<float>(x.get_f64(i)));
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    dst[i] = static_cast<uint16_t>(nan ? ((bits >> 16) | 0x7fc0u) : (bits >> 16));
  }
  return out;
}

// Every other pair is Tensor::cast, which gives ONNX's conversions: round to nearest even
// between floats, truncation toward zero (saturating) from float to integer, wrap-around
// between integers, x != 0 to bool.
void register_cast(ir::OpRegistry& r) {
  r.add(
      {.name = "Cast",
       .infer =
           [](ir::InferContext& ctx) { ctx.set_output(0, cast_target(ctx.node()), ctx.shape(0)); },
       .compute =
           [](ir::KernelContext& ctx) {
             const Tensor& x = ctx.input(0);
             const DType to = cast_target(ctx.node());
             ctx.output(0) =
                 to == DType::kBF16 && x.dtype() != DType::kBF16 ? cast_to_bf16(x) : x.cast(to);
           }});
}

// The tensor of a Constant node: exactly one of 'value' (a tensor), 'value_float(s)' (f32)
// or 'value_int(s)' (i64).
Tensor constant_value(const ir::Node& node) {
  static constexpr const char* kForms[] = {"value",         "value_float", "value_floats",
                                           "value_int",     "value_ints",  "value_string",
                                           "value_strings", "sparse_value"};
  const char* form = nullptr;
  for (const char* f : kForms) {
    if (!node.has_attr(f)) continue;
    TESSEL_USER_CHECK(!form) << node.label() << ": has both '" << form << "' and '" << f
                             << "'; a Constant has exactly one value attribute";
    form = f;
  }
  TESSEL_USER_CHECK(form) << node.label()
                          << ": has no value attribute (expected 'value', 'value_float', "
                             "'value_floats', 'value_int' or 'value_ints')";
  const std::string f = form;
  if (f == "value") return *node.get_tensor("value");
  if (f == "value_float")
    return Tensor::from_doubles(DType::kF32, {}, {node.get_float("value_float", 0)});
  if (f == "value_floats") {
    std::vector<double> v = node.get_floats("value_floats");
    return Tensor::from_doubles(DType::kF32, {static_cast<int64_t>(v.size())}, v);
  }
  if (f == "value_int") return Tensor::scalar_i64(node.get_int("value_int", 0));
  if (f == "value_ints") {
    std::vector<int64_t> v = node.get_ints("value_ints");
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  TESSEL_USER_ERROR() << node.label() << ": '" << f
                      << "' is not supported (tessel has no string or sparse tensors)";
}

void register_constant(ir::OpRegistry& r) {
  r.add({.name = "Constant",
         .min_inputs = 0,
         .max_inputs = 0,
         .infer =
             [](ir::InferContext& ctx) {
               const Tensor t = constant_value(ctx.node());
               ctx.set_output(0, t.dtype(), t.shape());
             },
         .compute =
             [](ir::KernelContext& ctx) { ctx.output(0) = constant_value(ctx.node()).clone(); }});
}

}  // namespace

void register_elementwise_data_ops(ir::OpRegistry& r) {
  register_identity(r);
  register_dropout(r);
  register_cast(r);
  register_constant(r);
}

}  // namespace tessel::ops
