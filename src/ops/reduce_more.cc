// The reductions beside ReduceMean, with ONNX semantics: ReduceSum, ReduceProd, ReduceMax,
// ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, and the index
// reductions ArgMax and ArgMin.
//
// Float data accumulates in double and is rounded once on store. Integer data whose result is
// an integer (Sum, Prod, SumSquare, L1, Max, Min) accumulates exactly in int64 with
// wrap-around, which after narrowing equals numpy's in-type arithmetic; L2, LogSum and
// LogSumExp of integers go through double and truncate, as the reference's astype does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "ops/more_ops.h"
#include "ops/reduce_common.h"
#include "ops/tensor_util.h"

namespace tessel::ops {
namespace {

constexpr DType kReduceTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                                  DType::kF64, DType::kI32, DType::kI64};
// ReduceMax and ReduceMin accept 8-bit integers too (opset 12).
constexpr DType kReduceMinMaxTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                                        DType::kI8,  DType::kU8,  DType::kI32,  DType::kI64};

// ---- accumulation ---------------------------------------------------------------------------

// int64 arithmetic that wraps around instead of overflowing (undefined in C++).
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Element i of `x` as the accumulator type: exact for every tessel dtype.
template <typename A>
A load(const Tensor& x, int64_t i) {
  if constexpr (std::is_same_v<A, double>)
    return x.get_f64(i);
  else
    return x.get_i64(i);
}

// acc[o] = combine(acc[o], element) over the input elements that reduce into output o.
template <typename A, typename Combine>
std::vector<A> fold(const Tensor& x, const ReducePlan& p, int64_t out_numel, A init,
                    Combine combine) {
  std::vector<A> acc(static_cast<size_t>(out_numel), init);
  for_each_reduced(x.shape(), p, [&](int64_t out, int64_t in) {
    acc[static_cast<size_t>(out)] = combine(acc[static_cast<size_t>(out)], load<A>(x, in));
  });
  return acc;
}

// Stores acc[i] with finish applied; set_f64 rounds floats and truncates (saturating) into
// integers, set_i64 narrows integers with wrap-around.
template <typename A, typename Finish>
void store(Tensor& y, const std::vector<A>& acc, Finish finish) {
  for (int64_t i = 0; i < y.numel(); ++i) {
    if constexpr (std::is_same_v<A, double>)
      y.set_f64(i, finish(acc[static_cast<size_t>(i)]));
    else
      y.set_i64(i, finish(acc[static_cast<size_t>(i)]));
  }
}

// A reduction that is a fold with an identity element, computed exactly in int64 for integer
// data and in double for float data. Map is applied to each element (x, x*x, |x|) before
// combining.
template <typename MapI, typename MapF, typename Combine>
struct FoldReduction {
  int64_t init;
  MapI map_i;
  MapF map_f;
  Combine combine;

  void operator()(const Tensor& x, const ReducePlan& p, Tensor& y) const {
    if (is_float(x.dtype())) {
      const auto acc = fold<double>(x, p, y.numel(), static_cast<double>(init),
                                    [&](double a, double v) { return combine(a, map_f(v)); });
      store(y, acc, [](double a) { return a; });
    } else {
      const auto acc = fold<int64_t>(x, p, y.numel(), init,
                                     [&](int64_t a, int64_t v) { return combine(a, map_i(v)); });
      store(y, acc, [](int64_t a) { return a; });
    }
  }
};

template <typename MapI, typename MapF, typename Combine>
FoldReduction<MapI, MapF, Combine> fold_reduction(int64_t init, MapI mi, MapF mf, Combine c) {
  return {init, mi, mf, c};
}

const auto kIdentity = [](auto v) { return v; };
const auto kAbsI = [](int64_t v) { return v < 0 ? wrap_mul(v, -1) : v; };
const auto kAbsF = [](double v) { return std::fabs(v); };
const auto kSquareI = [](int64_t v) { return wrap_mul(v, v); };
const auto kSquareF = [](double v) { return v * v; };
const auto kAdd = [](auto a, auto b) {
  if constexpr (std::is_same_v<decltype(a), int64_t>)
    return wrap_add(a, b);
  else
    return a + b;
};
const auto kMul = [](auto a, auto b) {
  if constexpr (std::is_same_v<decltype(a), int64_t>)
    return wrap_mul(a, b);
  else
    return a * b;
};

// Sum of f(x) in double, then finish: L2 (x*x, sqrt) and LogSum (x, log) of any dtype.
template <typename Map, typename Finish>
auto double_sum_reduction(Map map, Finish finish) {
  return [map, finish](const Tensor& x, const ReducePlan& p, Tensor& y) {
    store(y, fold<double>(x, p, y.numel(), 0.0, [&](double a, double v) { return a + map(v); }),
          finish);
  };
}

// Max/Min with NaN propagating as in numpy. The identity of an empty reduction is the lowest
// (Max) or highest (Min) value of the dtype, -inf/+inf for floats, as ONNX's reference uses.
template <bool kMax>
void reduce_extremum(const Tensor& x, const ReducePlan& p, Tensor& y) {
  const auto pick = [](auto a, auto v) {
    if (v != v) return v;  // NaN
    return (kMax ? v > a : v < a) ? v : a;
  };
  if (is_float(x.dtype())) {
    const double init = kMax ? -INFINITY : INFINITY;
    store(y, fold<double>(x, p, y.numel(), init, pick), [](double a) { return a; });
    return;
  }
  int64_t init = 0;
  visit_dtype<int8_t, uint8_t, int32_t, int64_t>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    init = static_cast<int64_t>(kMax ? std::numeric_limits<T>::lowest()
                                     : std::numeric_limits<T>::max());
  });
  store(y, fold<int64_t>(x, p, y.numel(), init, pick), [](int64_t a) { return a; });
}

// log(sum(exp(x))), shifted by the maximum so that exp cannot overflow. An infinite or NaN
// maximum is not subtracted (inf - inf would be NaN): -inf everywhere then gives log(0) = -inf
// and any +inf gives +inf, the mathematically right results.
void reduce_log_sum_exp(const Tensor& x, const ReducePlan& p, Tensor& y) {
  std::vector<double> shift =
      fold<double>(x, p, y.numel(), -INFINITY, [](double a, double v) { return std::max(a, v); });
  for (double& s : shift)
    if (!std::isfinite(s)) s = 0;
  std::vector<double> sum(shift.size(), 0.0);
  for_each_reduced(x.shape(), p, [&](int64_t out, int64_t in) {
    const size_t o = static_cast<size_t>(out);
    sum[o] += std::exp(x.get_f64(in) - shift[o]);
  });
  for (int64_t i = 0; i < y.numel(); ++i)
    y.set_f64(i, std::log(sum[static_cast<size_t>(i)]) + shift[static_cast<size_t>(i)]);
}

// Registers a Reduce* op. `axes_input_since` is the opset from which 'axes' is an input.
template <typename Kernel>
void add_reduce(ir::OpRegistry& r, const char* name, std::span<const DType> types,
                int64_t axes_input_since, Kernel kernel) {
  r.add({.name = name,
         .min_inputs = 1,
         .max_inputs = 2,
         .infer =
             [types, axes_input_since](ir::InferContext& ctx) {
               check_dtype(ctx, 0, types);
               const std::vector<int64_t> axes = infer_reduce_axes(ctx, axes_input_since);
               ctx.set_output(0, ctx.dtype(0),
                              plan_reduce(ctx.node(), ctx.shape(0), axes).out_shape);
             },
         .compute =
             [kernel](ir::KernelContext& ctx) {
               const Tensor& x = ctx.input(0);
               const ReducePlan p = plan_reduce(ctx.node(), x.shape(), reduce_axes(ctx));
               // noop_with_empty_axes makes every reduction the identity (not, say, x*x for
               // ReduceSumSquare), as the spec says and onnxruntime does.
               if (p.identity) {
                 copy_data(x, ctx.output(0));
                 return;
               }
               kernel(x, p, ctx.output(0));
             }});
}

void register_reductions(ir::OpRegistry& r) {
  add_reduce(r, "ReduceSum", kReduceTypes, 13, fold_reduction(0, kIdentity, kIdentity, kAdd));
  add_reduce(r, "ReduceProd", kReduceTypes, 18, fold_reduction(1, kIdentity, kIdentity, kMul));
  add_reduce(r, "ReduceSumSquare", kReduceTypes, 18, fold_reduction(0, kSquareI, kSquareF, kAdd));
  add_reduce(r, "ReduceL1", kReduceTypes, 18, fold_reduction(0, kAbsI, kAbsF, kAdd));
  add_reduce(r, "ReduceL2", kReduceTypes, 18,
             double_sum_reduction(kSquareF, [](double s) { return std::sqrt(s); }));
  add_reduce(r, "ReduceLogSum", kReduceTypes, 18,
             double_sum_reduction(kIdentity, [](double s) { return std::log(s); }));
  add_reduce(r, "ReduceLogSumExp", kReduceTypes, 18, reduce_log_sum_exp);
  add_reduce(r, "ReduceMax", kReduceMinMaxTypes, 18, reduce_extremum<true>);
  add_reduce(r, "ReduceMin", kReduceMinMaxTypes, 18, reduce_extremum<false>);
}

// ---- ArgMax / ArgMin ------------------------------------------------------------------------

struct ArgPlan {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last = false;  // opset 12: the last index of the extremum instead of the first
  Shape out_shape;
};

ArgPlan plan_arg(const ir::Node& node, const Shape& in) {
  const int64_t rank = static_cast<int64_t>(in.size());
  ArgPlan p;
  p.axis = normalize_axis(node, node.get_int("axis", 0), rank, "axis");
  p.keepdims = node.get_int("keepdims", 1) != 0;
  p.select_last = node.get_int("select_last_index", 0) != 0;
  TESSEL_USER_CHECK(in[static_cast<size_t>(p.axis)] > 0)
      << node.label() << ": axis " << p.axis << " of the input " << shape_str(in)
      << " is empty; it has no extremum";
  for (int64_t d = 0; d < rank; ++d) {
    if (d != p.axis)
      p.out_shape.push_back(in[static_cast<size_t>(d)]);
    else if (p.keepdims)
      p.out_shape.push_back(1);
  }
  return p;
}

// The index of the first (or with select_last the last) extremum along the axis. NaN counts as
// the extremum, as in numpy's argmax/argmin.
template <bool kMax, typename A>
void arg_extremum(const Tensor& x, const ArgPlan& p, Tensor& y) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < p.axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[static_cast<size_t>(p.axis)];
  int64_t* out = y.data<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      A best = load<A>(x, base);
      int64_t best_at = 0;
      for (int64_t k = 1; k < n; ++k) {
        const A v = load<A>(x, base + k * inner);
        const bool v_nan = v != v, best_nan = best != best;
        const bool better = !best_nan && (v_nan || (kMax ? v > best : v < best));
        const bool tie = v == best || (v_nan && best_nan);
        if (better || (p.select_last && tie)) {
          best = v;
          best_at = k;
        }
      }
      out[o * inner + i] = best_at;
    }
  }
}

template <bool kMax>
void add_arg(ir::OpRegistry& r, const char* name) {
  r.add({.name = name,
         .infer =
             [](ir::InferContext& ctx) {
               check_dtype(ctx, 0, kNumericTypes);
               ctx.set_output(0, DType::kI64, plan_arg(ctx.node(), ctx.shape(0)).out_shape);
             },
         .compute =
             [](ir::KernelContext& ctx) {
               const Tensor& x = ctx.input(0);
               const ArgPlan p = plan_arg(ctx.node(), x.shape());
               if (is_float(x.dtype()))
                 arg_extremum<kMax, double>(x, p, ctx.output(0));
               else
                 arg_extremum<kMax, int64_t>(x, p, ctx.output(0));
             }});
}

}  // namespace

void register_reduce_more_ops(ir::OpRegistry& r) {
  register_reductions(r);
  add_arg<true>(r, "ArgMax");
  add_arg<false>(r, "ArgMin");
}

}  // namespace tessel::ops
