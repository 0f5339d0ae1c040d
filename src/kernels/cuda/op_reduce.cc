// Reductions (kernels/tessel_op_reduce.cuh): Softmax and LogSoftmax along any axis, the float Reduce* ops
// (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp) over any axes,
// LayerNormalization over its trailing dims, Instance- and GroupNormalization over the pixels,
// ArgMax/ArgMin and CumSum along an axis, with the semantics of ops/reduce.cc and
// ops/reduce_more.cc (the axes and output shape come from the same ops::plan_reduce) and fp32
// accumulation for f32, f16 and bf16 storage. A reduction over one run of adjacent dims (the
// spatial dims of NHWC data, or the innermost ones) takes the columns or rows kernel; others
// the one-thread-per-output kernel. The zoo's softmax follows a tessel.Gemm over logits: last
// axis, contiguous rows, one warp per row.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "kernels/cuda/op_emit.h"
#include "core/error.h"
#include "ops/quant_common.h"
#include "ops/reduce_common.h"
#include "ops/tessel_epilogue.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 256;

// The fused activations of a normalization (fuse's epilogue attribute) as `act`, applied to each
// fp32 result before the store.
std::string act_function(const ir::Node& n) {
  std::string f = "  __device__ __forceinline__ static float act(float v) {\n";
  for (const ops::EpilogueStep& s : ops::read_epilogue(n)) f += "    " + epilogue_step_code(s) + "\n";
  return f + "    return v;\n  }\n";
}


bool is_float_storage(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Softmax's [outer, n, inner] view, as ops/reduce.cc's softmax_view defines it per opset:
// before opset 13 the input is coerced to 2-D at `axis` (default 1), so all of dims
// [axis, rank) are normalised at once; from 13 on, one axis (default -1).
struct SoftmaxView {
  int64_t outer = 1, n = 1, inner = 1;
};

std::optional<SoftmaxView> softmax_view(const ir::Node& n, const Shape& shape, int64_t opset) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerce_2d = opset < 13;
  int64_t axis = n.get_int("axis", coerce_2d ? 1 : -1);
  const int64_t end = coerce_2d ? rank + 1 : rank;
  if (rank < 1 || axis < -rank || axis >= end) return std::nullopt;
  if (axis < 0) axis += rank;
  SoftmaxView v;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      v.outer *= shape[d];
    else if (d == axis || coerce_2d)
      v.n *= shape[d];
    else
      v.inner *= shape[d];
  }
  return v;
}

// The ReduceKind (templates/tessel_op_reduce.cuh) of each float Reduce* op.
const std::map<std::string, std::string>& reduce_kinds() {
  static const std::map<std::string, std::string> kKinds = {
      {"ReduceSum", "kReduceSum"},       {"ReduceMean", "kReduceMean"},
      {"ReduceMax", "kReduceMax"},       {"ReduceMin", "kReduceMin"},
      {"ReduceProd", "kReduceProd"},     {"ReduceSumSquare", "kReduceSumSquare"},
      {"ReduceL1", "kReduceL1"},         {"ReduceL2", "kReduceL2"},
      {"ReduceLogSum", "kReduceLogSum"}, {"ReduceLogSumExp", "kReduceLogSumExp"}};
  return kKinds;
}

// A Reduce* op's axes: input 1 (which must be a constant: the kernel is specialised on them)
// or the 'axes' attribute; nullopt when input 1 is not a constant.
std::optional<std::vector<int64_t>> reduce_axes(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return n.get_ints("axes");
  const ir::Value& v = g.value(n.inputs[1]);
  if (!v.is_constant()) return std::nullopt;
  return v.data->to_i64_vector();
}

OpKernelSource emit_softmax(const ir::Graph& g, const ir::Node& n) {
  const Shape& shape = g.type(n.inputs[0]).shape;
  const std::optional<SoftmaxView> v = softmax_view(n, shape, g.opset);
  TESSEL_ICHECK(v) << n.label() << ": axis checked by check_reduce";
  const std::string problem =
      fmt::format("// {}: {} -> {}\nstruct Problem {{\n  using T = {};\n  static constexpr i64 kOuter = {}, kN = {}, kInner = {};\n"
                  "  static constexpr bool kLog = {};\n}};\n",
                  n.op, g.type(n.inputs[0]).str(), g.type(n.outputs[0]).str(),
                  type_of(g.type(n.inputs[0]).dtype), v->outer, v->n, v->inner, n.op == "LogSoftmax");
  if (v->inner == 1) {
    constexpr int kWarps = kThreads / 32;
    return make_source(n, "softmax_rows", "tessel_op_reduce.cuh", problem,
                       "tessel::SoftmaxRows<Problem>::run(p);", (v->outer + kWarps - 1) / kWarps,
                       kThreads);
  }
  return make_source(n, "softmax", "tessel_op_reduce.cuh", problem,
                     "tessel::for_each_item<tessel::SoftmaxStrided<Problem>>(p);",
                     (v->outer * v->inner + kThreads - 1) / kThreads, kThreads);
}

// A Reduce* op as a reduction over the middle dim of [outer, r, inner]: when its reduced dims
// (those of extent > 1) are one run of adjacent dims. nullopt otherwise, for an identity and
// for an empty input.
struct RunView {
  int64_t outer = 1, r = 1, inner = 1;
};

std::optional<RunView> run_view(const Shape& shape, const ops::ReducePlan& plan) {
  if (plan.identity || numel(shape) == 0) return std::nullopt;
  RunView v;
  int run = 0;  // 0: before the reduced run, 1: in it, 2: after it
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (plan.reduced[d]) {
      if (run == 2) return std::nullopt;  // a second run
      run = 1;
      v.r *= shape[d];
    } else {
      if (run == 1) run = 2;
      (run == 0 ? v.outer : v.inner) *= shape[d];
    }
  }
  if (v.r == 1) return std::nullopt;
  return v;
}

constexpr const char* kQLinearMean = "tessel.QLinearReduceMean";

// tessel.QLinearReduceMean's stored value from the sum of x's integers (kReduceSum: exact in
// f32, check_reduce bounds the count), as its reference computes it (ops/quantized.cc):
// m = (sum - count * x_zero_point) / count and round(m * (x_scale / y_scale)) + y_zero_point,
// each step rounded to f32 (the _rn intrinsics: nothing contracts into an FMA).
std::string qlinear_mean_store(const ir::Graph& g, const ir::Node& n, int64_t count) {
  auto scalar = [&](size_t k) {
    return fmt::format("to_float(static_cast<const {}*>(p.in[{}])[0])", type_of(g.type(n.inputs[k]).dtype), k);
  };
  auto given = [&](size_t k) { return n.inputs.size() > k && n.inputs[k] != ir::kNoValue; };
  const std::string c = float_literal(static_cast<float>(count));
  const std::string sum = given(2) ? fmt::format("__fsub_rn(sum, __fmul_rn({}, {}))", c, scalar(2)) : "sum";
  return fmt::format(
      "  using TOut = {};\n"
      "  __device__ __forceinline__ static TOut finish(const OpParams& p, float sum) {{\n"
      "    const float f = __fdiv_rn({}, {});\n"
      "    return quantize<TOut>(__fmul_rn(__fdiv_rn({}, {}), f), {});\n  }}\n",
      type_of(g.type(n.outputs[0]).dtype), scalar(1), scalar(3), sum, c,
      given(4) ? fmt::format("static_cast<int>(static_cast<const {}*>(p.in[4])[0])", type_of(g.type(n.inputs[4]).dtype))
               : "0");
}

OpKernelSource emit_reduce_op(const ir::Graph& g, const ir::Node& n) {
  const Shape& shape = g.type(n.inputs[0]).shape;
  const bool qlinear = n.op == kQLinearMean;
  const ops::ReducePlan plan = ops::plan_reduce(n, shape, qlinear ? n.get_ints("axes") : *reduce_axes(g, n));
  const std::string what = g.type(n.inputs[0]).str() + " -> " + g.type(n.outputs[0]).str();
  const DType t = g.type(n.inputs[0]).dtype;
  const int64_t count = plan.identity ? 1 : plan.count;
  const std::string store = qlinear ? qlinear_mean_store(g, n, count) : reduction_store(t);
  const std::string op_kind = qlinear ? "kReduceSum" : reduce_kinds().at(n.op);
  if (const std::optional<RunView> v = run_view(shape, plan))
    return emit_reduction(n, op_kind, what, t, v->outer, v->r, v->inner, store);
  // The identity (noop_with_empty_axes without axes) is a sum of one element: x itself.
  const std::string kind = plan.identity ? "kReduceSum" : op_kind;
  // Row-major input strides, split by kept / reduced dim (outermost first).
  std::vector<int64_t> stride(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  std::vector<int64_t> kept_ext, kept_stride, red_ext, red_stride;
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool reduced = !plan.identity && plan.reduced[d];
    (reduced ? red_ext : kept_ext).push_back(shape[d]);
    (reduced ? red_stride : kept_stride).push_back(stride[d]);
  }
  const int64_t out_elems = numel(g.type(n.outputs[0]).shape);
  const std::string problem = fmt::format(
      "// {}: {}\nstruct Problem {{\n  using T = {};\n  static constexpr int kKind = tessel::{};\n"
      "  static constexpr i64 kOutElems = {}, kCount = {};\n"
      "  static constexpr int kKept = {}, kRed = {};\n"
      "  static constexpr i64 kKeptExtent[] = {{{}1}}, kKeptStride[] = {{{}0}};\n"
      "  static constexpr i64 kRedExtent[] = {{{}1}}, kRedStride[] = {{{}0}};\n{}}};\n",
      n.op, what, type_of(t), kind, out_elems, count, kept_ext.size(),
      red_ext.size(), i64_list(kept_ext), i64_list(kept_stride), i64_list(red_ext), i64_list(red_stride), store);
  return make_source(n, "reduce", "tessel_op_reduce.cuh", problem,
                     "tessel::for_each_item<tessel::ReduceAny<Problem>>(p);",
                     (out_elems + kThreads - 1) / kThreads, kThreads);
}

// LayerNormalization's [outer, n] view: the dims from `axis` on are normalised together.
struct LayerNormView {
  int64_t outer = 1, n = 1;
};

std::optional<LayerNormView> layer_norm_view(const ir::Node& n, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = n.get_int("axis", -1);
  if (rank < 1 || axis < -rank || axis >= rank) return std::nullopt;
  if (axis < 0) axis += rank;
  LayerNormView v;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? v.outer : v.n) *= shape[d];
  return v;
}

// Why the GPU kernel cannot take this LayerNormalization (it reads Scale and B as vectors over
// the normalised dims and writes Y alone).
std::optional<std::string> check_layer_norm(const ir::Graph& g, const ir::Node& n) {
  const Shape& shape = g.type(n.inputs[0]).shape;
  const std::optional<LayerNormView> v = layer_norm_view(n, shape);
  if (!v) return n.label() + ": axis out of range for the input";
  if (n.outputs.size() != 1)
    return n.label() + ": the Mean and InvStdDev outputs have no GPU kernel (Y alone has)";
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] != ir::kNoValue && numel(g.type(n.inputs[i]).shape) != v->n)
      return n.label() + ": input " + std::to_string(i) + " " + g.type(n.inputs[i]).str() +
             " is broadcast; the GPU kernel takes one value per normalised element";
  return std::nullopt;
}

OpKernelSource emit_layer_norm(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const LayerNormView v = *layer_norm_view(n, x.shape);
  const bool bias = n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue;
  const std::string problem = fmt::format(
      "// {} -> {}\nstruct Problem {{\n  using T = {};\n  static constexpr i64 kOuter = {}, kN = {};\n"
      "  static constexpr bool kHasBias = {};\n  static constexpr float kEpsilon = {};\n}};\n",
      x.str(), g.type(n.outputs[0]).str(), type_of(x.dtype), v.outer, v.n, bias ? "true" : "false",
      float_literal(n.get_float("epsilon", 1e-5)));
  constexpr int kWarps = kThreads / 32;
  return make_source(n, "layer_norm", "tessel_op_reduce.cuh", problem,
                     "tessel::LayerNormRows<Problem>::run(p);", (v.outer + kWarps - 1) / kWarps,
                     kThreads);
}

// ArgMax / ArgMin along `axis` as [outer, n, inner] (the CPU reference's plan_arg checked
// the axis and that it is not empty).
OpKernelSource emit_arg_extremum(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const AxisView v = axis_view(x.shape, n.get_int("axis", 0));
  const std::string problem = fmt::format(
      "// {}: {} -> {}\nstruct Problem {{\n  using T = {};\n  static constexpr i64 kOuter = {}, kN = {}, kInner = {};\n"
      "  static constexpr bool kMax = {}, kSelectLast = {};\n}};\n",
      n.op, x.str(), g.type(n.outputs[0]).str(), type_of(x.dtype), v.outer, v.extent, v.inner, n.op == "ArgMax",
      n.get_int("select_last_index", 0) != 0);
  return make_source(n, "arg_extremum", "tessel_op_reduce.cuh", problem,
                     "tessel::for_each_item<tessel::ArgExtremum<Problem>>(p);", (v.outer * v.inner + kThreads - 1) / kThreads,
                     kThreads);
}

// CumSum along its constant axis (input 1) as [outer, n, inner].
OpKernelSource emit_cumsum(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const AxisView v = axis_view(x.shape, g.value(n.inputs[1]).data->get_i64(0));
  const std::string problem = fmt::format(
      "// CumSum: {} along axis {}\nstruct Problem {{\n  using T = {};\n  static constexpr i64 kOuter = {}, kN = {}, kInner = {};\n"
      "  static constexpr bool kExclusive = {}, kReverse = {};\n}};\n",
      x.str(), v.axis, type_of(x.dtype), v.outer, v.extent, v.inner, n.get_int("exclusive", 0) != 0,
      n.get_int("reverse", 0) != 0);
  return make_source(n, "cumsum", "tessel_op_reduce.cuh", problem, "tessel::for_each_item<tessel::CumSumLines<Problem>>(p);",
                     (v.outer * v.inner + kThreads - 1) / kThreads, kThreads);
}

// GroupNormalization: its NHWC form or a channels-first one, one block per (image, group); 1024
// threads where those blocks are fewer than the SMs of an H100.
OpKernelSource emit_group_norm(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const bool nhwc = n.op == "tessel.GroupNormalization";
  const int64_t c = nhwc ? x.shape[3] : x.shape[1], images = x.shape[0];
  const int64_t groups = n.get_int("num_groups", 1), pixels = numel(x.shape) / (images * c);
  const std::string problem = fmt::format(
      "// {}: {} in {} groups\nstruct Problem {{\n  using T = {};\n  static constexpr bool kNhwc = {}, kPerGroupAffine = {};\n"
      "  static constexpr i64 kImages = {}, kGroups = {}, kC = {}, kPerGroup = {}, kPixels = {};\n"
      "  static constexpr float kEpsilon = {};\n{}}};\n",
      n.op, x.str(), groups, type_of(x.dtype), nhwc, g.opset < 21, images, groups, c, c / groups, pixels,
      float_literal(n.get_float("epsilon", 1e-5)), act_function(n));
  const int64_t blocks = images * groups;
  return make_source(n, "group_norm", "tessel_op_reduce.cuh", problem, "tessel::GroupNorm<Problem>::run(p);", blocks,
                     blocks < 132 ? 1024 : kThreads);
}

// The columns kernels' launch (ReduceColumns, InstanceNormColumns) over [outer, r, inner]: up
// to 32 vector columns per block, the rest of its threads row lanes. Blocks are (outer, column
// chunk) pairs; where they are fewer than the SMs of an H100, `wide` threads each (more rows in
// flight per block: the reduction is not split across blocks, so that the sum's order, and its
// result, never depend on the grid).
struct ColumnsLaunch {
  int vec, cols, threads;
  int64_t blocks;
  std::string fields() const {
    return fmt::format("  static constexpr int kVec = {}, kCols = {}, kThreads = {};\n", vec, cols, threads);
  }
};

ColumnsLaunch columns_launch(DType t, int64_t outer, int64_t inner, int wide) {
  ColumnsLaunch l;
  l.vec = channel_vector(t, inner);
  const int64_t vectors = inner / l.vec;
  l.cols = static_cast<int>(std::min<int64_t>(vectors, 32));
  l.blocks = outer * ((vectors + l.cols - 1) / l.cols);
  l.threads = l.blocks < 132 ? wide : kThreads;
  return l;
}

// InstanceNormalization: its NHWC form as columns of pixels per (image, channel vector), a
// channels-first one (rank != 4) as rows of pixels per (image, channel).
OpKernelSource emit_instance_norm(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const bool nhwc = n.op == "tessel.InstanceNormalization";
  const int64_t c = nhwc ? x.shape[3] : x.shape[1];
  const int64_t images = x.shape[0], pixels = numel(x.shape) / (images * c);
  std::string problem = fmt::format(
      "// {}: {} -> {}\nstruct Problem {{\n  using T = {};\n  static constexpr float kEpsilon = {};\n", n.op,
      x.str(), g.type(n.outputs[0]).str(), type_of(x.dtype), float_literal(n.get_float("epsilon", 1e-5)));
  problem += act_function(n);
  if (!nhwc) {
    problem += fmt::format("  static constexpr i64 kOuter = {}, kR = {}, kC = {};\n}};\n", images * c, pixels, c);
    constexpr int kWarps = kThreads / 32;
    return make_source(n, "instance_norm_rows", "tessel_op_reduce.cuh", problem,
                       "tessel::InstanceNormRows<Problem>::run(p);", (images * c + kWarps - 1) / kWarps, kThreads);
  }
  const ColumnsLaunch l = columns_launch(x.dtype, images, c, 1024);
  problem += fmt::format("  static constexpr i64 kOuter = {}, kR = {}, kInner = {};\n", images, pixels, c) + l.fields() + "};\n";
  return make_source(n, "instance_norm_columns", "tessel_op_reduce.cuh", problem,
                     "tessel::InstanceNormColumns<Problem>::run(p);", l.blocks, l.threads);
}

}  // namespace

std::string reduction_store(DType t) {
  return fmt::format(
      "  using TOut = {};\n"
      "  __device__ __forceinline__ static TOut finish(const OpParams&, float v) {{ return from_float<TOut>(v); }}\n",
      type_of(t));
}

OpKernelSource emit_reduction(const ir::Node& n, const std::string& kind, const std::string& what, DType t,
                              int64_t outer, int64_t r, int64_t inner, const std::string& store) {
  std::string problem = fmt::format(
      "// {} over the middle dim of [{}, {}, {}]: {}\nstruct Problem {{\n  using T = {};\n"
      "  static constexpr int kKind = tessel::{};\n  static constexpr i64 kOuter = {}, kR = {}, kInner = {};\n",
      n.op, outer, r, inner, what, type_of(t), kind, outer, r, inner);
  if (inner == 1) {
    constexpr int kWarps = kThreads / 32;
    return make_source(n, "reduce_rows", "tessel_op_reduce.cuh", problem + store + "};\n",
                       "tessel::ReduceRows<Problem>::run(p);", (outer + kWarps - 1) / kWarps, kThreads);
  }
  // LogSumExp's partial results are two words: 512 threads keep its shared memory at 32 KiB.
  const ColumnsLaunch l = columns_launch(t, outer, inner, kind == "kReduceLogSumExp" ? 512 : 1024);
  problem += l.fields() + store + "};\n";
  return make_source(n, "reduce_columns", "tessel_op_reduce.cuh", problem, "tessel::ReduceColumns<Problem>::run(p);",
                     l.blocks, l.threads);
}

std::optional<std::string> check_reduce(const ir::Graph& g, const ir::Node& n) {
  const DType t = g.type(n.inputs[0]).dtype;
  if (n.op == kQLinearMean) {
    if (!is_int8_operand(t) || !is_int8_operand(g.type(n.outputs[0]).dtype))
      return n.label() + ": x and y must be i8 or u8";
    for (size_t k : {1, 3})
      if (!is_float_storage(g.type(n.inputs[k]).dtype)) return n.label() + ": the scales must be f32, f16 or bf16";
    const ops::ReducePlan plan = ops::plan_reduce(n, g.type(n.inputs[0]).shape, n.get_ints("axes"));
    if (plan.count > ops::kExactInt8SumCount)
      return n.label() + ": a mean of " + std::to_string(plan.count) + " integers (the kernel's f32 sums are exact up to " +
             std::to_string(ops::kExactInt8SumCount) + ")";
    return std::nullopt;
  }
  if (!is_float_storage(t))
    return n.label() + ": input dtype " + std::string(dtype_name(t)) +
           " has no GPU kernel (f32, f16, bf16; integer reductions need exact accumulation)";
  if (n.op == "Softmax" || n.op == "LogSoftmax") {
    if (!softmax_view(n, g.type(n.inputs[0]).shape, g.opset))
      return n.label() + ": axis out of range for the input";
    return std::nullopt;
  }
  if (n.op == "LayerNormalization") return check_layer_norm(g, n);
  if (n.op == "InstanceNormalization" || n.op == "tessel.InstanceNormalization") return std::nullopt;
  if (n.op == "GroupNormalization" || n.op == "tessel.GroupNormalization") return std::nullopt;
  if (n.op == "ArgMax" || n.op == "ArgMin") return std::nullopt;
  if (n.op == "CumSum") {
    if (!g.value(n.inputs[1]).is_constant()) return n.label() + ": the axis (input 1) must be a constant";
    return std::nullopt;
  }
  if (!reduce_kinds().count(n.op)) return n.label() + ": no GPU kernel for " + n.op;
  if (!reduce_axes(g, n)) return n.label() + ": axes (input 1) must be a constant";
  return std::nullopt;
}

OpKernelSource emit_reduce(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "Softmax" || n.op == "LogSoftmax") return emit_softmax(g, n);
  if (n.op == "LayerNormalization") return emit_layer_norm(g, n);
  if (n.op == "InstanceNormalization" || n.op == "tessel.InstanceNormalization") return emit_instance_norm(g, n);
  if (n.op == "GroupNormalization" || n.op == "tessel.GroupNormalization") return emit_group_norm(g, n);
  if (n.op == "ArgMax" || n.op == "ArgMin") return emit_arg_extremum(g, n);
  if (n.op == "CumSum") return emit_cumsum(g, n);
  return emit_reduce_op(g, n);
}

}  // namespace tessel::kernels::cuda::op_detail
