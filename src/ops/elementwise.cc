// The elementwise op family with ONNX semantics: activations (Relu, LeakyRelu, Sigmoid,
// HardSigmoid, HardSwish, Tanh, Softplus, Gelu, Elu, Selu, Celu, ThresholdedRelu, Softsign,
// Mish, Shrink), Clip, PRelu and the broadcasting arithmetic
// (Add, Sub, Mul, Div). Identity, Dropout, Cast and Constant live in elementwise_data.cc.
//
// Kernels are templated on the element type and instantiated only for the dtypes each op
// accepts; f16 and bf16 are computed in f32 (see compute_widened in elementwise_common.h).
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "ops/all_ops.h"
#include "ops/broadcast.h"
#include "ops/elementwise_common.h"
#include "ops/elementwise_data.h"
#include "ops/more_ops.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

constexpr DType kReluTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                DType::kI8,  DType::kI32, DType::kI64};
constexpr DType kPReluTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                                 DType::kF64, DType::kI32, DType::kI64};

// min(max(v, lo), hi), written so that NaN propagates (std::min/std::max would drop it) and
// so that lo > hi yields hi, as ONNX's Clip specifies.
template <typename T>
T clamp_nan(T v, T lo, T hi) {
  const T t = v < lo ? lo : v;
  return t > hi ? hi : t;
}

// ---- unary ----------------------------------------------------------------------------------

template <typename... Ts, typename Fn>
void map_unary(const Tensor& x, Tensor& y, const Fn& fn) {
  visit_dtype<Ts...>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) out[i] = static_cast<T>(fn(in[i]));
  });
}

// Registers a unary op. make(node) reads the attributes and returns the scalar function,
// generic over the element type; Ts are the C++ types it is instantiated for.
template <typename... Ts, typename Make>
void add_unary(ir::OpRegistry& r, const char* name, std::span<const DType> types, Make make) {
  r.add({.name = name,
         .infer =
             [types, make](ir::InferContext& ctx) {
               check_dtype(ctx, 0, types);
               make(ctx.node());  // reports a malformed attribute before run time
               ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
             },
         .compute =
             [make](ir::KernelContext& ctx) {
               const auto fn = make(ctx.node());
               compute_widened(ctx, [&](const std::vector<Tensor>& in, Tensor& out) {
                 map_unary<Ts...>(in[0], out, fn);
               });
             }});
}

void register_activations(ir::OpRegistry& r) {
  // `x < 0 ? 0 : x` rather than max(x, 0): NaN propagates as in numpy.
  add_unary<float, double, int8_t, int32_t, int64_t>(r, "Relu", kReluTypes, [](const ir::Node&) {
    return [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; };
  });
  add_unary<float, double>(r, "LeakyRelu", kFloatTypes, [](const ir::Node& n) {
    const double alpha = n.get_float("alpha", 0.01);
    return [alpha](auto x) {
      using T = decltype(x);
      return x < T(0) ? static_cast<T>(alpha) * x : x;
    };
  });
  add_unary<float, double>(r, "Sigmoid", kFloatTypes, [](const ir::Node&) {
    // Two forms so that exp never overflows: for x < 0, exp(x) is at most 1.
    return [](auto x) {
      using T = decltype(x);
      if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
      const T e = std::exp(x);
      return e / (T(1) + e);
    };
  });
  add_unary<float, double>(r, "HardSigmoid", kFloatTypes, [](const ir::Node& n) {
    const double alpha = n.get_float("alpha", 0.2), beta = n.get_float("beta", 0.5);
    return [alpha, beta](auto x) {
      using T = decltype(x);
      return clamp_nan(static_cast<T>(alpha) * x + static_cast<T>(beta), T(0), T(1));
    };
  });
  add_unary<float, double>(r, "HardSwish", kFloatTypes, [](const ir::Node&) {
    // ONNX: x * HardSigmoid(x) with alpha = 1/6, beta = 0.5.
    return [](auto x) {
      using T = decltype(x);
      return x * clamp_nan(x * static_cast<T>(1.0 / 6.0) + T(0.5), T(0), T(1));
    };
  });
  add_unary<float, double>(r, "Tanh", kFloatTypes,
                           [](const ir::Node&) { return [](auto x) { return std::tanh(x); }; });
  add_unary<float, double>(r, "Softplus", kFloatTypes, [](const ir::Node&) {
    // log(1 + exp(x)) without overflow for large x.
    return [](auto x) {
      using T = decltype(x);
      return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    };
  });
  add_unary<float, double>(r, "Gelu", kFloatTypes, [](const ir::Node& n) {
    // ONNX (opset 20): "none" is x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))); "tanh"
    // replaces Phi(x) by 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
    const std::string approximate = n.get_string("approximate", "none");
    TESSEL_USER_CHECK(approximate == "none" || approximate == "tanh")
        << n.label() << ": approximate is \"" << approximate << "\", expected \"none\" or \"tanh\"";
    const bool tanh = approximate == "tanh";
    return [tanh](auto x) {
      using T = decltype(x);
      // Both forms are rewritten so that nothing cancels for negative x, where 1 + erf and
      // 1 + tanh approach 0: 1 + erf(z) = erfc(-z) and 0.5 * (1 + tanh(u)) = 1 / (1 + e^-2u).
      if (!tanh) return static_cast<T>(0.5) * x * std::erfc(-x / std::numbers::sqrt2_v<T>);
      const T sqrt_2_over_pi = std::numbers::sqrt2_v<T> * std::numbers::inv_sqrtpi_v<T>;
      const T u = sqrt_2_over_pi * (x + static_cast<T>(0.044715) * x * x * x);
      return x / (T(1) + std::exp(T(-2) * u));
    };
  });
  add_unary<float, double>(r, "Elu", kFloatTypes, [](const ir::Node& n) {
    const double alpha = n.get_float("alpha", 1.0);
    return [alpha](auto x) {
      using T = decltype(x);
      return x < T(0) ? static_cast<T>(alpha) * std::expm1(x) : x;
    };
  });
  add_unary<float, double>(r, "Selu", kFloatTypes, [](const ir::Node& n) {
    // The defaults are ONNX's float32 constants, exactly.
    const double alpha = n.get_float("alpha", 1.67326319217681884765625);
    const double gamma = n.get_float("gamma", 1.05070102214813232421875);
    return [alpha, gamma](auto x) {
      using T = decltype(x);
      return static_cast<T>(gamma) * (x > T(0) ? x : static_cast<T>(alpha) * std::expm1(x));
    };
  });
  add_unary<float, double>(r, "Celu", kFloatTypes, [](const ir::Node& n) {
    // max(0, x) + min(0, alpha (exp(x / alpha) - 1)): one branch per sign, NaN kept.
    const double alpha = n.get_float("alpha", 1.0);
    TESSEL_USER_CHECK(alpha != 0.0) << n.label() << ": alpha must not be 0";
    return [alpha](auto x) {
      using T = decltype(x);
      return x > T(0) ? x : static_cast<T>(alpha) * std::expm1(x / static_cast<T>(alpha));
    };
  });
  add_unary<float, double>(r, "ThresholdedRelu", kFloatTypes, [](const ir::Node& n) {
    const double alpha = n.get_float("alpha", 1.0);
    return [alpha](auto x) {
      using T = decltype(x);
      return x > static_cast<T>(alpha) ? x : T(0);
    };
  });
  add_unary<float, double>(r, "Softsign", kFloatTypes, [](const ir::Node&) {
    return [](auto x) {
      using T = decltype(x);
      return x / (T(1) + std::fabs(x));
    };
  });
  add_unary<float, double>(r, "Mish", kFloatTypes, [](const ir::Node&) {
    // x tanh(softplus(x)), softplus without overflow as above (YOLOv4's activation).
    return [](auto x) {
      using T = decltype(x);
      const T sp = x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
      return x * std::tanh(sp);
    };
  });
  add_unary<float, double>(r, "Shrink", kFloatTypes, [](const ir::Node& n) {
    const double lambd = n.get_float("lambd", 0.5), bias = n.get_float("bias", 0.0);
    return [lambd, bias](auto x) {
      using T = decltype(x);
      if (x < static_cast<T>(-lambd)) return x + static_cast<T>(bias);
      if (x > static_cast<T>(lambd)) return x - static_cast<T>(bias);
      return T(0);
    };
  });
}

// ---- Clip -----------------------------------------------------------------------------------

// Clip's bounds: inputs 1 and 2 since opset 11 (scalars of the input's dtype, either may be
// omitted); the float attributes 'min' and 'max' before. The attribute form is accepted
// whenever the node carries it, so that older models and hand-written graphs work.
void check_clip_bound(const ir::InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  check_same_dtype(ctx, 0, i);
  TESSEL_USER_CHECK(numel(ctx.shape(i)) == 1)
      << ctx.node().label() << ": '" << what << "' has shape " << shape_str(ctx.shape(i))
      << ", expected a scalar";
}

void infer_clip(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  check_dtype(ctx, 0, kNumericTypes);
  check_clip_bound(ctx, 1, "min");
  check_clip_bound(ctx, 2, "max");
  if (node.has_attr("min") || node.has_attr("max")) {
    TESSEL_USER_CHECK(is_float(ctx.dtype(0)))
        << node.label() << ": the 'min'/'max' attributes (Clip before opset 11) apply to float "
        << "inputs only, the input is " << dtype_name(ctx.dtype(0));
    node.get_float("min", 0);  // rejects an attribute of the wrong kind now
    node.get_float("max", 0);
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

// The bounds as T: the type's whole range unless given (in = the widened inputs).
template <typename T>
std::pair<T, T> clip_bounds(const ir::Node& node, const std::vector<Tensor>& in) {
  T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) {
    lo = static_cast<T>(node.get_float("min", lo));
    hi = static_cast<T>(node.get_float("max", hi));
  }
  if (in.size() > 1 && in[1].defined()) lo = in[1].data<T>()[0];
  if (in.size() > 2 && in[2].defined()) hi = in[2].data<T>()[0];
  return {lo, hi};
}

void compute_clip(ir::KernelContext& ctx) {
  compute_widened(ctx, [&](const std::vector<Tensor>& in, Tensor& out) {
    visit_dtype<float, double, int8_t, uint8_t, int32_t, int64_t>(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::pair<T, T> bounds = clip_bounds<T>(ctx.node(), in);
      const T lo = bounds.first, hi = bounds.second;
      map_unary<T>(in[0], out, [lo, hi](T x) { return clamp_nan(x, lo, hi); });
    });
  });
}

// ---- binary (broadcasting) ------------------------------------------------------------------

// Integer arithmetic wraps around as in numpy (two's complement), computed in the unsigned
// type because signed overflow is undefined in C++.
template <typename T>
using Unsigned = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) + Unsigned<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) - Unsigned<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return T(Unsigned<T>(a) * Unsigned<T>(b));
    else
      return a * b;
  }
};
// Integer division truncates toward zero, as ONNX's reference does (numpy's true division
// cast back to the integer type) and as C does. The divisor is checked for zeros beforehand.
struct DivOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      if (b == T(-1)) return T(Unsigned<T>(0) - Unsigned<T>(a));  // min / -1 wraps to min
    }
    return static_cast<T>(a / b);
  }
};

template <typename T>
void check_no_zero_divisor(const ir::Node& node, const Tensor& b) {
  const T* p = b.data<T>();
  for (int64_t i = 0; i < b.numel(); ++i)
    TESSEL_USER_CHECK(p[i] != T(0))
        << node.label() << ": integer division by zero (element " << i << " of the divisor)";
}

template <typename Op>
void add_binary(ir::OpRegistry& r, const char* name) {
  r.add({.name = name,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kNumericTypes);
               check_same_dtype(ctx, 0, 1);
               ctx.set_output(0, ctx.dtype(0),
                              broadcast_shapes(ctx.shape(0), ctx.shape(1), ctx.node().label()));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               compute_widened(ctx, [&](const std::vector<Tensor>& in, Tensor& out) {
                 visit_dtype<float, double, int8_t, uint8_t, int32_t, int64_t>(
                     out.dtype(), [&](auto tag) {
                       using T = decltype(tag);
                       if constexpr (std::is_same_v<Op, DivOp> && std::is_integral_v<T>)
                         check_no_zero_divisor<T>(ctx.node(), in[1]);
                       binary_loop<T>(in[0], in[1], out, Op{});
                     });
               });
             }});
}

// PRelu broadcasts the slope to the input's shape only (ONNX "unidirectional" broadcasting).
void register_prelu(ir::OpRegistry& r) {
  r.add({.name = "PRelu",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kPReluTypes);
               check_same_dtype(ctx, 0, 1);
               const Shape& x = ctx.shape(0);
               const Shape& slope = ctx.shape(1);
               TESSEL_USER_CHECK(broadcast_shapes(x, slope, ctx.node().label()) == x)
                   << ctx.node().label() << ": slope of shape " << shape_str(slope)
                   << " does not broadcast to the input shape " << shape_str(x);
               ctx.set_output(0, ctx.dtype(0), x);
             },
         .compute =
             [](ir::KernelContext& ctx) {
               compute_widened(ctx, [&](const std::vector<Tensor>& in, Tensor& out) {
                 visit_dtype<float, double, int32_t, int64_t>(out.dtype(), [&](auto tag) {
                   using T = decltype(tag);
                   binary_loop<T>(in[0], in[1], out,
                                  [](T x, T s) { return x < T(0) ? MulOp{}(s, x) : x; });
                 });
               });
             }});
}

}  // namespace

void register_elementwise_ops(ir::OpRegistry& r) {
  register_activations(r);
  r.add({.name = "Clip",
         .min_inputs = 1,
         .max_inputs = 3,
         .infer = infer_clip,
         .compute = compute_clip});
  register_prelu(r);
  add_binary<AddOp>(r, "Add");
  add_binary<SubOp>(r, "Sub");
  add_binary<MulOp>(r, "Mul");
  add_binary<DivOp>(r, "Div");
  register_elementwise_data_ops(r);
  register_elementwise_math_ops(r);
}

}  // namespace tessel::ops
