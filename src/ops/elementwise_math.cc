// Elementwise math, comparisons and logic with ONNX semantics: the unary math ops (Neg, Abs,
// Sqrt, Exp, Log, Reciprocal, Ceil, Floor, Round, Sign, Erf, Sin, Cos), Pow, Mod, the variadic
// Max/Min/Sum/Mean, Equal/Greater/Less/GreaterOrEqual/LessOrEqual, And/Or/Xor/Not and Where.
// Every binary and variadic op broadcasts as numpy does.
//
// As in elementwise.cc, f16 and bf16 are widened to f32, computed there and rounded once on
// store (elementwise_common.h); integer arithmetic wraps around (two's complement) as numpy's
// does. Each op accepts the union of the types ONNX allows it over opsets 11-18, restricted to
// tessel's dtypes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "ops/broadcast.h"
#include "ops/elementwise_common.h"
#include "ops/more_ops.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

constexpr DType kSignedTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                  DType::kI8,  DType::kI32, DType::kI64};
constexpr DType kEqualTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8,
                                 DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};
constexpr DType kBoolTypes[] = {DType::kBool};
// Pow's base (T) and exponent (T1) types differ since opset 12.
constexpr DType kPowBaseTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                                   DType::kF64, DType::kI32, DType::kI64};
constexpr DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8,
                               DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};

// ONNX's bound on variadic inputs.
constexpr int kVariadic = std::numeric_limits<int32_t>::max();

// ---- dtype plumbing -------------------------------------------------------------------------

template <typename T>
T wrap_neg(T x) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(x));
  else
    return -x;
}

// A double converted to T as numpy's astype does for in-range values: rounded for floats,
// truncated toward zero for integers. Out-of-range values saturate and NaN becomes 0 for
// integers, where a plain cast would be undefined behaviour.
template <typename T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// ---- broadcasting loops ---------------------------------------------------------------------

// out = `in` broadcast to out's shape.
template <typename T>
void broadcast_copy(const Tensor& in, Tensor& out) {
  const T* pi = in.data<T>();
  T* po = out.data<T>();
  const BroadcastRuns<1> runs(out.shape(), {&in.shape()});
  runs.for_each([&](int64_t o, int64_t n, const auto& off, const auto& step) {
    for (int64_t j = 0; j < n; ++j) po[o + j] = pi[off[0] + j * step[0]];
  });
}

Shape broadcast_inputs(const ir::InferContext& ctx) {
  Shape s = ctx.shape(0);
  for (int i = 1; i < ctx.num_inputs(); ++i)
    s = broadcast_shapes(s, ctx.shape(i), ctx.node().label());
  return s;
}

// ---- unary ----------------------------------------------------------------------------------

// Registers a unary op whose output has the input's dtype; fn is generic over the element
// type and Ts are the C++ types it is instantiated for.
template <typename... Ts, typename Fn>
void add_unary(ir::OpRegistry& r, const char* name, std::span<const DType> types, Fn fn) {
  r.add({.name = name,
         .infer =
             [types](ir::InferContext& ctx) {
               check_dtype(ctx, 0, types);
               ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
             },
         .compute =
             [fn](ir::KernelContext& ctx) {
               const Tensor x = widened(ctx.input(0));
               store_widened(ctx.output(0), [&](Tensor& y) {
                 visit_dtype<Ts...>(x.dtype(), [&](auto tag) {
                   using T = decltype(tag);
                   const T* in = x.data<T>();
                   T* out = y.data<T>();
                   for (int64_t i = 0, n = x.numel(); i < n; ++i)
                     out[i] = static_cast<T>(fn(in[i]));
                 });
               });
             }});
}

void register_unary_math(ir::OpRegistry& r) {
  add_unary<float, double, int8_t, int32_t, int64_t>(r, "Neg", kSignedTypes,
                                                     [](auto x) { return wrap_neg(x); });
  // abs(INT_MIN) wraps to INT_MIN, as in numpy.
  add_unary<float, double, int8_t, uint8_t, int32_t, int64_t>(
      r, "Abs", kNumericTypes, [](auto x) { return x < decltype(x)(0) ? wrap_neg(x) : x; });
  add_unary<float, double>(r, "Sqrt", kFloatTypes, [](auto x) { return std::sqrt(x); });
  add_unary<float, double>(r, "Exp", kFloatTypes, [](auto x) { return std::exp(x); });
  add_unary<float, double>(r, "Log", kFloatTypes, [](auto x) { return std::log(x); });
  add_unary<float, double>(r, "Reciprocal", kFloatTypes, [](auto x) { return decltype(x)(1) / x; });
  add_unary<float, double>(r, "Ceil", kFloatTypes, [](auto x) { return std::ceil(x); });
  add_unary<float, double>(r, "Floor", kFloatTypes, [](auto x) { return std::floor(x); });
  // Halves round to even (numpy's round): nearbyint under the default rounding mode, which
  // tessel never changes.
  add_unary<float, double>(r, "Round", kFloatTypes, [](auto x) { return std::nearbyint(x); });
  add_unary<float, double>(r, "Sin", kFloatTypes, [](auto x) { return std::sin(x); });
  add_unary<float, double>(r, "Cos", kFloatTypes, [](auto x) { return std::cos(x); });
  // NaN fails both comparisons and is returned unchanged, as numpy's sign does.
  add_unary<float, double, int8_t, uint8_t, int32_t, int64_t>(r, "Sign", kNumericTypes, [](auto x) {
    using T = decltype(x);
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;
  });
  // ONNX allows integer Erf: erf in double, truncated toward zero like numpy's astype.
  add_unary<float, double, int8_t, uint8_t, int32_t, int64_t>(r, "Erf", kNumericTypes, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>)
      return std::erf(x);
    else
      return from_double<T>(std::erf(static_cast<double>(x)));
  });
  add_unary<bool>(r, "Not", kBoolTypes, [](bool x) { return !x; });
}

// ---- Pow ------------------------------------------------------------------------------------

// Integer base and integer exponent: exact, wrapping like numpy's integer power. A negative
// exponent gives 1/base^-e, whose truncation toward zero is 0 unless |base| is 1 (onnxruntime
// computes it so); 0 to a negative power is a division by zero.
template <typename B>
B int_power(const ir::Node& node, B base, int64_t exp) {
  if (exp < 0) {
    TESSEL_USER_CHECK(base != 0) << node.label() << ": integer 0 raised to the negative power "
                                 << exp;
    if (base == 1) return 1;
    if (base == -1) return exp % 2 == 0 ? 1 : -1;
    return 0;
  }
  using U = std::make_unsigned_t<B>;
  U result = 1, b = static_cast<U>(base);
  for (; exp; exp >>= 1, b *= b)
    if (exp & 1) result *= b;
  return static_cast<B>(result);
}

// The output has the base's type. Mixed types compute in double, as numpy promotes them, and
// convert back like the reference's astype(base dtype).
template <typename B, typename E>
B power(const ir::Node& node, B base, E exp) {
  if constexpr (std::is_integral_v<B> && std::is_integral_v<E>)
    return int_power(node, base, static_cast<int64_t>(exp));
  else if constexpr (std::is_same_v<B, E>)
    return std::pow(base, exp);
  else
    return from_double<B>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
}

void register_pow(ir::OpRegistry& r) {
  r.add({.name = "Pow",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kPowBaseTypes);
               check_dtype(ctx, 1, kNumericTypes);
               ctx.set_output(0, ctx.dtype(0), broadcast_inputs(ctx));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor base = widened(ctx.input(0)), exp = widened(ctx.input(1));
               store_widened(ctx.output(0), [&](Tensor& y) {
                 visit_dtype<float, double, int32_t, int64_t>(base.dtype(), [&](auto bt) {
                   using B = decltype(bt);
                   visit_dtype<float, double, int8_t, uint8_t, int32_t, int64_t>(
                       exp.dtype(), [&](auto et) {
                         using E = decltype(et);
                         broadcast_binary<B, E, B>(
                             base, exp, y, [&](B b, E e) { return power(ctx.node(), b, e); });
                       });
                 });
               });
             }});
}

// ---- Mod ------------------------------------------------------------------------------------

// fmod=0 (integers only): the result takes the divisor's sign, like Python's %; fmod=1: the
// dividend's sign, like C's fmod and %. x % -1 is computed as 0 because INT_MIN % -1 overflows.
struct ModOp {
  bool fmod;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return 0;
      const T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>)
        if (!fmod && r != 0 && (r < 0) != (b < 0)) return static_cast<T>(r + b);
      return r;
    }
  }
};

bool mod_fmod(const ir::Node& node) {
  const int64_t fmod = node.get_int("fmod", 0);
  TESSEL_USER_CHECK(fmod == 0 || fmod == 1)
      << node.label() << ": fmod is " << fmod << ", expected 0 or 1";
  return fmod == 1;
}

void register_mod(ir::OpRegistry& r) {
  r.add({.name = "Mod",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kNumericTypes);
               check_same_dtype(ctx, 0, 1);
               TESSEL_USER_CHECK(mod_fmod(ctx.node()) || !is_float(ctx.dtype(0)))
                   << ctx.node().label() << ": fmod=0 (integer modulus) with "
                   << dtype_name(ctx.dtype(0)) << " inputs; ONNX requires fmod=1 for floats";
               ctx.set_output(0, ctx.dtype(0), broadcast_inputs(ctx));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor a = widened(ctx.input(0)), b = widened(ctx.input(1));
               const ModOp op{mod_fmod(ctx.node())};
               store_widened(ctx.output(0), [&](Tensor& y) {
                 visit_dtype<float, double, int8_t, uint8_t, int32_t, int64_t>(
                     y.dtype(), [&](auto tag) {
                       using T = decltype(tag);
                       if constexpr (std::is_integral_v<T>) {
                         const T* d = b.data<T>();
                         for (int64_t i = 0; i < b.numel(); ++i)
                           TESSEL_USER_CHECK(d[i] != T(0))
                               << ctx.node().label() << ": integer modulus by zero (element " << i
                               << " of the divisor)";
                       }
                       binary_loop<T>(a, b, y, op);
                     });
               });
             }});
}

// ---- variadic: Max, Min, Sum, Mean ----------------------------------------------------------

// NaN propagates, as in numpy's maximum and minimum (std::max would drop it).
struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a >= b || a != a ? a : b;
  }
};
struct MinOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a <= b || a != a ? a : b;
  }
};
struct SumOp {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};

// Folds the inputs left to right with op into the broadcast output; Mean divides the sum by
// the input count at the end.
template <typename Op, typename... Ts>
void add_variadic(ir::OpRegistry& r, const char* name, std::span<const DType> types,
                  bool mean = false) {
  r.add({.name = name,
         .min_inputs = 1,
         .max_inputs = kVariadic,
         .infer =
             [types](ir::InferContext& ctx) {
               check_dtype(ctx, 0, types);
               for (int i = 1; i < ctx.num_inputs(); ++i) check_same_dtype(ctx, 0, i);
               ctx.set_output(0, ctx.dtype(0), broadcast_inputs(ctx));
             },
         .compute =
             [mean](ir::KernelContext& ctx) {
               store_widened(ctx.output(0), [&](Tensor& acc) {
                 visit_dtype<Ts...>(acc.dtype(), [&](auto tag) {
                   using T = decltype(tag);
                   broadcast_copy<T>(widened(ctx.input(0)), acc);
                   // acc has the output's shape, so each element is read before it is
                   // overwritten at the same offset.
                   for (int i = 1; i < ctx.num_inputs(); ++i)
                     binary_loop<T>(acc, widened(ctx.input(i)), acc, Op{});
                   if constexpr (std::is_floating_point_v<T>) {
                     if (mean) {
                       T* p = acc.data<T>();
                       const T n = static_cast<T>(ctx.num_inputs());
                       for (int64_t i = 0; i < acc.numel(); ++i) p[i] /= n;
                     }
                   }
                 });
               });
             }});
}

// ---- comparisons and logic ------------------------------------------------------------------

// A broadcasting binary op with a bool output; Op is a transparent functor (std::less<>, ...).
template <typename Op>
void add_predicate(ir::OpRegistry& r, const char* name, std::span<const DType> types) {
  r.add({.name = name,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer =
             [types](ir::InferContext& ctx) {
               check_dtype(ctx, 0, types);
               check_same_dtype(ctx, 0, 1);
               ctx.set_output(0, DType::kBool, broadcast_inputs(ctx));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               // Widening f16/bf16 to f32 is exact, so comparisons are unaffected.
               const Tensor a = widened(ctx.input(0)), b = widened(ctx.input(1));
               visit_dtype<float, double, int8_t, uint8_t, int32_t, int64_t, bool>(
                   a.dtype(), [&](auto tag) {
                     using T = decltype(tag);
                     broadcast_binary<T, T, bool>(a, b, ctx.output(0), Op{});
                   });
             }});
}

void register_predicates(ir::OpRegistry& r) {
  add_predicate<std::equal_to<>>(r, "Equal", kEqualTypes);
  add_predicate<std::greater<>>(r, "Greater", kNumericTypes);
  add_predicate<std::less<>>(r, "Less", kNumericTypes);
  add_predicate<std::greater_equal<>>(r, "GreaterOrEqual", kNumericTypes);
  add_predicate<std::less_equal<>>(r, "LessOrEqual", kNumericTypes);
  add_predicate<std::logical_and<>>(r, "And", kBoolTypes);
  add_predicate<std::logical_or<>>(r, "Or", kBoolTypes);
  add_predicate<std::not_equal_to<>>(r, "Xor", kBoolTypes);
}

// ---- Where ----------------------------------------------------------------------------------

void register_where(ir::OpRegistry& r) {
  r.add({.name = "Where",
         .min_inputs = 3,
         .max_inputs = 3,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kBoolTypes);
               check_dtype(ctx, 1, kAllTypes);
               check_same_dtype(ctx, 1, 2);
               ctx.set_output(0, ctx.dtype(1), broadcast_inputs(ctx));
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
               Tensor& out = ctx.output(0);
               // Where only moves elements: whole elements are copied as bytes, whatever the
               // dtype.
               const int64_t esize = static_cast<int64_t>(dtype_size(out.dtype()));
               const bool* pc = c.data<bool>();
               const std::byte *px = x.raw(), *py = y.raw();
               std::byte* po = out.raw();
               const BroadcastRuns<3> runs(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
               runs.for_each([&](int64_t o, int64_t n, const auto& off, const auto& step) {
                 for (int64_t j = 0; j < n; ++j) {
                   const std::byte* src = pc[off[0] + j * step[0]]
                                              ? px + (off[1] + j * step[1]) * esize
                                              : py + (off[2] + j * step[2]) * esize;
                   std::memcpy(po + (o + j) * esize, src, static_cast<size_t>(esize));
                 }
               });
             }});
}

}  // namespace

void register_elementwise_math_ops(ir::OpRegistry& r) {
  register_unary_math(r);
  register_pow(r);
  register_mod(r);
  add_variadic<MaxOp, float, double, int8_t, uint8_t, int32_t, int64_t>(r, "Max", kNumericTypes);
  add_variadic<MinOp, float, double, int8_t, uint8_t, int32_t, int64_t>(r, "Min", kNumericTypes);
  add_variadic<SumOp, float, double>(r, "Sum", kFloatTypes);
  add_variadic<SumOp, float, double>(r, "Mean", kFloatTypes, /*mean=*/true);
  register_predicates(r);
  register_where(r);
}

}  // namespace tessel::ops
