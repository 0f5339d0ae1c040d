// Window ops over NHWC activations: tessel.MaxPool, tessel.AveragePool, LRN's window over
// channels (kernels/tessel_op_window.cuh), tessel.GlobalAveragePool (a mean over the pixels,
// op_reduce.cc's emit_mean), and tessel.Conv with group > 1 (depthwise and grouped convolutions,
// which the Tensor Core generator declines) with its fused bias, epilogue steps and store map, as
// the reference kernel (ops/tessel_contraction_ops.cc) defines them: acc + bias (acc * S + bias for
// a depthwise conv's int8 input, fold-qdq's), then each step in fp32, then one rounding at the
// store. Depthwise convolutions (one channel per group, multiplier 1) run the tiled kernel of
// tessel_depthwise.cuh with the tiling depthwise_tiling.cc chooses; other grouped ones the
// direct kernel of tessel_op_window.cuh.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/cuda/op_emit.h"
#include "core/error.h"
#include "ops/tessel_epilogue.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 128;

// The most negative finite value of T: a max over a window with no input tap (ceil_mode),
// as ops/pool_ops.cc defines it.
std::string lowest_literal(DType t) {
  switch (t) {
    case DType::kF16: return "-65504.f";
    case DType::kBF16: return "-3.38953139e38f";
    default: return "-3.40282347e38f";
  }
}

struct Window {
  std::vector<int64_t> kernel{1, 1}, strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
};

Window read_window(const ir::Node& n, const Shape& w_ohwi) {
  Window w;
  w.kernel = w_ohwi.empty() ? n.get_ints("kernel_shape") : std::vector<int64_t>{w_ohwi[1], w_ohwi[2]};
  w.strides = n.get_ints("strides", {1, 1});
  w.pads = n.get_ints("pads", {0, 0, 0, 0});
  w.dilations = n.get_ints("dilations", {1, 1});
  return w;
}

// X's rows: kXLd elements apart, its channels from kXOffset on (a channel slice of a Concat's
// buffer, `x_slice`), else kC and 0.
std::string geometry(const Shape& x, const Shape& y_pre, const Window& w, int vec,
                     const std::optional<BufferSlice>& x_slice = std::nullopt) {
  return fmt::format(
      "  static constexpr int kXLd = {}, kXOffset = {};\n"
      "  static constexpr int kN = {}, kH = {}, kW = {}, kC = {};\n"
      "  static constexpr int kOH = {}, kOW = {}, kCo = {};\n"
      "  static constexpr int kKH = {}, kKW = {}, kSH = {}, kSW = {}, kPT = {}, kPL = {}, kDH = {}, kDW = {};\n"
      "  static constexpr int kVec = {};\n",
      x_slice ? x_slice->channels : x[3], x_slice ? x_slice->channel_offset : 0, x[0], x[1], x[2],
      x[3], y_pre[1], y_pre[2], y_pre[3], w.kernel[0], w.kernel[1], w.strides[0],
      w.strides[1], w.pads[0], w.pads[1], w.dilations[0], w.dilations[1], vec);
}

// The fp32 form of one fused epilogue step on `v` (r: the residual at the same position): the
// activations of templates/tessel_activations.cuh, the contraction kernels' too; ReLU, leaky
// ReLU and clip by comparisons, so that NaN stays NaN as in the reference; GELU by erfc, as
// the standalone Gelu kernel (no cancellation for very negative v).
std::string step_code(const ops::EpilogueStep& s) {
  using ops::EpilogueKind;
  switch (s.kind) {
    case EpilogueKind::kRelu: return "v = v < 0.f ? 0.f : v;";
    case EpilogueKind::kLeakyRelu: return fmt::format("v = v < 0.f ? {} * v : v;", float_literal(s.alpha));
    case EpilogueKind::kClip:
      return fmt::format("v = v < {0} ? {0} : (v > {1} ? {1} : v);", float_literal(s.alpha), float_literal(s.beta));
    case EpilogueKind::kSigmoid: return "v = sigmoid_f(v);";
    case EpilogueKind::kHardSwish: return "v = hardswish_f(v);";
    case EpilogueKind::kSilu: return "v = silu_f(v);";
    case EpilogueKind::kSiluQuantizedGate:
      return fmt::format("v = silu_qgate_f(v, {}, {});",
                         float_literal(static_cast<float>(1.0 / s.alpha)), float_literal(s.beta));
    case EpilogueKind::kGelu: return "v = 0.5f * v * erfcf(-0.70710678118f * v);";
    case EpilogueKind::kGeluTanh: return "v = gelu_tanh_f(v);";
    case EpilogueKind::kAddResidual: return "v += to_float(residual);";
    case EpilogueKind::kTanh: return "v = tanhf(v);";
    case EpilogueKind::kMish: return "v = mish_f(v);";
    case EpilogueKind::kHardSigmoid:
      return fmt::format("v = hard_sigmoid_f(v, {}, {});", float_literal(s.alpha), float_literal(s.beta));
    case EpilogueKind::kElu: return fmt::format("v = elu_f(v, {});", float_literal(s.alpha));
    // int8 (a QDQ model's float conv between Q/DQ pairs): a DequantizeLinear by alpha; a
    // QuantizeLinear by alpha, by the reciprocal as the contraction kernels (tessel_ptx.cuh).
    case EpilogueKind::kMul: return fmt::format("v *= {};", float_literal(s.alpha));
    case EpilogueKind::kQuantize:
      return fmt::format("v = quantize_s8_f(v, {});",
                         float_literal(static_cast<float>(1.0 / s.alpha)));
    // An asymmetric QuantizeLinear's rounding (fuse's fake quantization: the clip and mul
    // after it are the steps above), by the reciprocal as the quantize.
    case EpilogueKind::kRound:
      return fmt::format("v = rintf(v * {});", float_literal(static_cast<float>(1.0 / s.alpha)));
    // A saturated rounding of a value its S and B scaled into [0, 1] (unit-quantize).
    case EpilogueKind::kQuantizeUnit:
      return fmt::format("v = quantize_unit_f(v, {}, {});", float_literal(s.alpha), float_literal(s.beta));
    case EpilogueKind::kAddScaledResidual:
      break;  // its R is int8, which can_emit_op refuses for a conv (takes_int8)
  }
  TESSEL_ICHECK(false) << "unhandled epilogue step " << ops::epilogue_name(s.kind);
  return "";
}

OpKernelSource emit_pool(const ir::Graph& g, const ir::Node& n) {
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& y = g.type(n.outputs[0]).shape;
  const DType t = g.type(n.inputs[0]).dtype;
  const std::string what = g.type(n.inputs[0]).str() + " -> " + g.type(n.outputs[0]).str();
  // A global pool is a mean or max over the pixels: [N, H*W, C] -> [N, C].
  if (n.op == "tessel.GlobalAveragePool" || n.op == "tessel.GlobalMaxPool")
    return emit_reduction(n, n.op == "tessel.GlobalMaxPool" ? "kReduceMax" : "kReduceMean", what, t, x[0],
                          x[1] * x[2], x[3], reduction_store(t));
  const int vec = channel_vector(t, x[3]);
  const bool max = n.op == "tessel.MaxPool";
  std::string problem = fmt::format("// {}: {}\nstruct Problem {{\n  using T = {};\n", n.op, what, type_of(t));
  problem += geometry(x, y, read_window(n, {}), vec);
  problem += fmt::format("  static constexpr bool kMax = {}, kCountIncludePad = {};\n", max,
                         !max && n.get_int("count_include_pad", 0) == 1);
  problem += fmt::format("  static constexpr float kLowest = {};\n", lowest_literal(t));
  problem += "};\n";
  const int64_t items = y[0] * y[1] * y[2] * (y[3] / vec);
  return make_source(n, "pool", "tessel_op_window.cuh", problem, "tessel::for_each_item<tessel::Pool<Problem>>(p);",
                     (items + kThreads - 1) / kThreads, kThreads);
}

// The operand types of a grouped or depthwise Problem: X (the input: T, or an int8 input's
// i8), T (W and the residual), Out (Y).
std::string operand_types_code(const ir::Graph& g, const ir::Node& n) {
  return fmt::format("  using X = {};\n  using T = {};\n  using Out = {};\n",
                     type_of(g.type(n.inputs[0]).dtype), type_of(g.type(n.inputs[1]).dtype),
                     type_of(g.type(n.outputs[0]).dtype));
}

// The terms of a grouped or depthwise Problem's value before the steps, acc (* scale) + bias:
// B[co] in fp32 or 0, and where kScale an int8 input's dequantization scale S[co] (f32).
std::string bias_and_scale_code(const ir::Graph& g, const ir::Node& n) {
  auto has = [&](size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; };
  std::string code = fmt::format("  static constexpr bool kScale = {};\n", has(4));
  code += "  __device__ __forceinline__ static float bias(const OpParams& p, int co) {\n";
  code += has(2) ? fmt::format("    return to_float(static_cast<const {}*>(p.in[2])[co]);\n  }}\n",
                               type_of(g.type(n.inputs[2]).dtype))
                 : "    return 0.f;\n  }\n";
  code += "  __device__ __forceinline__ static float scale(const OpParams& p, int co) {\n";
  code += has(4) ? "    return static_cast<const float*>(p.in[4])[co];\n  }\n"
                 : "    return 1.f;\n  }\n";
  // A depthwise conv's int8 X read requantized (ops/tessel_epilogue.h prologue 'requantize'):
  // x = clamp(rint(x * R[c]), -128, 127), R = P[0] (input 5).
  const std::optional<ops::Prologue> pro = ops::read_prologue(n);
  TESSEL_ICHECK(!pro || pro->requantize) << n.label() << ": the grouped kernels take no affine prologue";
  code += fmt::format("  static constexpr bool kRequantize = {};\n", pro.has_value());
  code += "  __device__ __forceinline__ static float requantize_factor(const OpParams& p, int c) {\n";
  code += pro ? "    return static_cast<const float*>(p.in[5])[c];\n  }\n" : "    return 1.f;\n  }\n";
  return code;
}

// store_offset(n, oh, ow, co) of a grouped or depthwise Problem: where pre-store element
// (n, oh, ow, co) of `pre` goes, for the stored output shape `y`.
std::string store_offset_code(const ops::StoreMap& store, const Shape& pre, const Shape& y) {
  const int64_t co = pre[3];
  std::string code = "  // Where pre-store element (n, oh, ow, co) goes.\n";
  code += "  __device__ __forceinline__ static i64 store_offset(int n, int oh, int ow, int co) {\n";
  if (store.kind == ops::StoreMap::Kind::kNhwc) {
    code += fmt::format("    return ((i64(n) * {} + oh) * {} + ow) * {} + co;\n", pre[1], pre[2], co);
  } else {
    const int64_t b = store.block, cp = co / (b * b);
    code += store.dcr ? fmt::format("    const int c = co % {0}, i = co / {0} / {1}, j = co / {0} % {1};  // DCR\n", cp, b)
                      : fmt::format("    const int c = co / {0}, i = co % {0} / {1}, j = co % {1};  // CRD\n", b * b, b);
    code += fmt::format("    return ((i64(n) * {} + oh * {} + i) * {} + ow * {} + j) * {} + c;\n", y[1], b, y[2], b, cp);
  }
  return code + "  }\n";
}

// The pre-store output [N, OH, OW, Co] of a grouped tessel.Conv (the store map may move it).
Shape pre_store_shape(const ir::Graph& g, const ir::Node& n, const ops::StoreMap& store) {
  const Shape& y = g.type(n.outputs[0]).shape;
  const int64_t b = store.kind == ops::StoreMap::Kind::kDepthToSpace ? store.block : 1;
  return Shape{y[0], y[1] / b, y[2] / b, g.type(n.inputs[1]).shape[0]};
}

// The problem fields of a depthwise tiling; `vec` channels per staged copy.
DepthwiseTiling depthwise_problem(const Shape& x, const Shape& pre, const Window& w, int vec) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  DepthwiseTiling t{};
  t.n = i(x[0]), t.h = i(x[1]), t.w = i(x[2]), t.c = i(x[3]);
  t.oh = i(pre[1]), t.ow = i(pre[2]);
  t.kernel_h = i(w.kernel[0]), t.kernel_w = i(w.kernel[1]);
  t.stride_h = i(w.strides[0]), t.stride_w = i(w.strides[1]);
  t.pad_top = i(w.pads[0]), t.pad_left = i(w.pads[1]);
  t.dilation_h = i(w.dilations[0]), t.dilation_w = i(w.dilations[1]);
  t.stage_vec = vec;
  return t;
}

// Channels per vector of a grouped conv's loads and stores: whole vectors of its output's
// channels, and aligned in X's rows where X is a channel slice of a wider buffer.
int grouped_vector(DType t, int64_t channels, const std::optional<BufferSlice>& x_slice) {
  if (x_slice) channels = std::gcd(channels, std::gcd(x_slice->channels, x_slice->channel_offset));
  return channel_vector(t, channels);
}

// The problem fields of a depthwise node's tiling.
DepthwiseTiling depthwise_problem_of(const ir::Graph& g, const ir::Node& n,
                                     const std::optional<BufferSlice>& x_slice = std::nullopt) {
  const ops::StoreMap store = ops::read_store(n);
  const Shape pre = pre_store_shape(g, n, store);
  const DType t = g.type(n.inputs[0]).dtype;
  return depthwise_problem(g.type(n.inputs[0]).shape, pre, read_window(n, g.type(n.inputs[1]).shape),
                           grouped_vector(t, pre[3], x_slice));
}

// The chooser's tiling of a depthwise node; nullopt for other nodes and windows too large
// to stage (the direct grouped kernel runs those).
std::optional<DepthwiseTiling> depthwise_pick(const ir::Graph& g, const ir::Node& n,
                                              const std::optional<BufferSlice>& x_slice = std::nullopt) {
  if (!ops::is_depthwise_conv(g, n))
    return std::nullopt;
  return choose_depthwise_tiling(depthwise_problem_of(g, n, x_slice),
                                 static_cast<int>(dtype_size(g.type(n.inputs[0]).dtype)));
}

// The depthwise kernel (templates/tessel_depthwise.cuh) for `tiling`.
OpKernelSource emit_depthwise_conv(const ir::Graph& g, const ir::Node& n, const DepthwiseTiling& tiling,
                                   const std::optional<BufferSlice>& x_slice = std::nullopt) {
  const Shape& x = g.type(n.inputs[0]).shape;
  const DType t = g.type(n.inputs[0]).dtype;
  const ops::StoreMap store = ops::read_store(n);
  const Shape pre = pre_store_shape(g, n, store);
  const bool has_residual = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  const int elem = static_cast<int>(dtype_size(t));

  std::string problem =
      fmt::format("// tessel.Conv, depthwise (group {}): {} * {} -> {}\nstruct Problem {{\n",
                  n.get_int("group", 1), g.type(n.inputs[0]).str(), g.type(n.inputs[1]).str(),
                  g.type(n.outputs[0]).str());
  problem += operand_types_code(g, n);
  problem += geometry(x, pre, read_window(n, g.type(n.inputs[1]).shape), tiling.vec, x_slice);
  problem += fmt::format(
      "  // Tiling {} (tessel_depthwise_tile.cuh): CTA tile ({}, {}) output pixels x {} channels;\n"
      "  // {} threads of ({}, {}) outputs x {} channels; smem x {} x ({}, {}, {}) + w: {} bytes; "
      "weights in {}.\n",
      depthwise_tiling_name(tiling), tiling.tile_rows(), tiling.tile_cols(), tiling.slab(),
      tiling.threads(), tiling.rows_per_thread, tiling.cols_per_thread, tiling.vec, tiling.stages,
      tiling.in_rows(), tiling.in_cols(), tiling.slab(), tiling.smem_bytes(elem),
      tiling.register_weights ? "registers" : "shared memory");
  problem += fmt::format("  static constexpr int kStageVec = {};\n", tiling.stage_vec);
  problem += fmt::format(
      "  static constexpr int kSlabVecs = {}, kColGroups = {}, kColsPerThread = {}, kRowGroups = "
      "{}, "
      "kRowsPerThread = {}, kStages = {};\n",
      tiling.slab_vecs, tiling.col_groups, tiling.cols_per_thread, tiling.row_groups,
      tiling.rows_per_thread, tiling.stages);
  problem += fmt::format("  static constexpr bool kRegisterWeights = {}, kTilePerCta = {};\n",
                         tiling.register_weights, tiling.tile_per_cta);
  problem += fmt::format("  static constexpr bool kResidual = {};\n", has_residual);
  // Only the plain NHWC store keeps a fragment's channels adjacent in memory.
  problem += fmt::format("  static constexpr bool kVectorStore = {};\n\n", store.kind == ops::StoreMap::Kind::kNhwc);
  problem += bias_and_scale_code(g, n);
  problem += "  // Steps of the fused epilogue, in order, on the fp32 accumulator.\n";
  problem += "  __device__ __forceinline__ static float epilogue(float v, float residual) {\n";
  for (const ops::EpilogueStep& s : ops::read_epilogue(n)) problem += "    " + step_code(s) + "\n";
  problem += "    return v;\n  }\n";
  problem += store_offset_code(store, pre, g.type(n.outputs[0]).shape);
  problem += "};\n";
  // One CTA per tile, or a multiple of the slab count: each CTA keeps one slab as it strides
  // over the tiles.
  const int64_t blocks = depthwise_grid(tiling, elem);
  TESSEL_ICHECK(blocks == tiling.tiles() || (blocks <= kMaxBlocks && blocks % tiling.slabs() == 0))
      << n.label() << ": depthwise grid " << blocks << " for " << tiling.tiles() << " tiles";
  OpKernelSource ks =
      make_source(n, "depthwise_conv", "tessel_depthwise.cuh", problem,
                  "tessel::DepthwiseConv<Problem>::run(p);", blocks, tiling.threads());
  ks.grid[0] = static_cast<unsigned>(blocks);  // one CTA per tile may pass make_source's cap
  return ks;
}

OpKernelSource emit_grouped_conv(const ir::Graph& g, const ir::Node& n,
                                 const std::optional<BufferSlice>& x_slice) {
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& w = g.type(n.inputs[1]).shape;
  const DType t = g.type(n.inputs[0]).dtype;
  const ops::StoreMap store = ops::read_store(n);
  const Shape pre = pre_store_shape(g, n, store);
  const int vec = grouped_vector(t, pre[3], x_slice);
  if (const std::optional<DepthwiseTiling> tiling = depthwise_pick(g, n, x_slice))
    return emit_depthwise_conv(g, n, *tiling, x_slice);
  const int64_t group = n.get_int("group", 1);
  const int64_t co = w[0], cig = w[3], cog = co / group;
  const bool has_residual = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;

  std::string problem =
      fmt::format("// tessel.Conv, group {}: {} * {} -> {}\nstruct Problem {{\n", group,
                  g.type(n.inputs[0]).str(), g.type(n.inputs[1]).str(), g.type(n.outputs[0]).str());
  problem += operand_types_code(g, n);
  problem += geometry(x, pre, read_window(n, w), vec, x_slice);
  problem += fmt::format("  static constexpr int kCig = {}, kCog = {};\n", cig, cog);
  // Only the plain NHWC store keeps a fragment's channels adjacent in memory.
  problem += fmt::format("  static constexpr bool kVectorStore = {};\n\n",
                         store.kind == ops::StoreMap::Kind::kNhwc);
  problem += bias_and_scale_code(g, n);
  problem += "  // Steps of the fused epilogue, in order, on the fp32 accumulator.\n";
  problem += "  __device__ __forceinline__ static float epilogue(const OpParams& p, float v, int n, int oh, int ow, int co) {\n";
  if (has_residual)
    problem += fmt::format("    const T residual = static_cast<const T*>(p.in[3])[((i64(n) * {} + oh) * {} + ow) * {} + co];\n",
                           pre[1], pre[2], pre[3]);
  for (const ops::EpilogueStep& s : ops::read_epilogue(n)) problem += "    " + step_code(s) + "\n";
  problem += "    return v;\n  }\n";
  problem += store_offset_code(store, pre, g.type(n.outputs[0]).shape);
  problem += "};\n";
  const int64_t items = pre[0] * pre[1] * pre[2] * (co / vec);
  return make_source(n, "grouped_conv", "tessel_op_window.cuh", problem,
                     "tessel::for_each_item<tessel::GroupedConv<Problem>>(p);",
                     (items + kThreads - 1) / kThreads, kThreads);
}

// LRN (channels-first, any rank >= 3) and tessel.LRN (NHWC) as [outer, C, inner].
OpKernelSource emit_lrn(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const bool nhwc = n.op == "tessel.LRN";
  const int64_t c = nhwc ? x.shape[3] : x.shape[1];
  const int64_t outer = nhwc ? numel(x.shape) / c : x.shape[0];
  const int64_t inner = nhwc ? 1 : numel(x.shape) / (x.shape[0] * c);
  const int64_t size = n.get_int("size", 1), before = (size - 1) / 2;
  const std::string problem = fmt::format(
      "// {}: {} -> {}\nstruct Problem {{\n  using T = {};\n  static constexpr i64 kOuter = {}, kC = {}, kInner = {};\n"
      "  static constexpr i64 kBefore = {}, kAfter = {};\n"
      "  static constexpr float kAlphaOverSize = {}, kBeta = {}, kBias = {};\n}};\n",
      n.op, x.str(), g.type(n.outputs[0]).str(), type_of(x.dtype), outer, c, inner, before, size - 1 - before,
      float_literal(n.get_float("alpha", 1e-4) / static_cast<double>(size)), float_literal(n.get_float("beta", 0.75)),
      float_literal(n.get_float("bias", 1.0)));
  const int64_t items = outer * c * inner;
  return make_source(n, "lrn", "tessel_op_window.cuh", problem, "tessel::for_each_item<tessel::Lrn<Problem>>(p);",
                     (items + kThreads - 1) / kThreads, kThreads);
}

}  // namespace

std::optional<std::string> check_window(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  if (n.op == "LRN" || n.op == "tessel.LRN")
    return is_float(x.dtype) ? std::nullopt : std::optional<std::string>(n.label() + ": expected a float input");
  if (x.shape.size() != 4) return n.label() + ": expected an NHWC input of rank 4";
  // A max pool of int8 or uint8 values (fold-qdq's, between a DequantizeLinear and a
  // QuantizeLinear of one scale) compares them as floats, exactly, and stores them back
  // unchanged. A depthwise conv reads an int8 X (fold-qdq's int8-input form, which its infer
  // admits for no other conv) as floats, exactly.
  if (n.op == "tessel.MaxPool" && (x.dtype == DType::kI8 || x.dtype == DType::kU8)) return std::nullopt;
  const bool int8_input = n.op == "tessel.Conv" && x.dtype == DType::kI8;
  if (!is_float(x.dtype) && !int8_input) return n.label() + ": expected a float input";
  if (n.op == "tessel.Conv") {
    if (n.get_int("group", 1) == 1)
      return n.label() + ": group 1 convolutions are contractions (contraction_kernel.h)";
    if (g.type(n.inputs[1]).shape.size() != 4) return n.label() + ": expected OHWI weights";
    // The grouped kernel reads NHWC and stores NHWC (or depth_to_space) in the output's
    // dtype; the edge folds (ops/tessel_epilogue.h) are the contraction generator's alone.
    // An int8 output where the steps end quantized (a QDQ model's depthwise conv, whose
    // QuantizeLinear fuse took): out_dtype i8, stored as store_as<i8>; or, a depthwise conv's,
    // uint8 where they end in an integer of [0, 255] (onnxruntime's QUInt8 activations).
    const std::string store = n.get_string("store", "nhwc");
    const std::vector<ops::EpilogueStep> steps = ops::read_epilogue(n);
    const std::optional<DType> out = ops::read_out_dtype(n);
    const bool int8_out = (out == DType::kI8 && ops::ends_quantized(steps)) ||
                          (out == DType::kU8 && ops::ends_quantized(steps, DType::kU8) &&
                           ops::stores_uint8(g, n));
    if (store == "nchw" || store == "depth_to_space_nchw" || (out && !int8_out) ||
        n.has_attr("input_layout"))
      return n.label() + ": a grouped convolution with an NCHW store, input_layout, or an out_dtype "
                         "other than int8 (a depthwise one's: or uint8) after a last quantize step "
                         "(only group-1 convolutions take them)";
    return std::nullopt;
  }
  if (n.op == "tessel.GlobalAveragePool" || n.op == "tessel.GlobalMaxPool") return std::nullopt;
  if (n.get_string("auto_pad", "NOTSET") != "NOTSET")
    return n.label() + ": auto_pad must be resolved to explicit pads (convert-layout does)";
  if (n.get_ints("kernel_shape").size() != 2) return n.label() + ": expected a 2-D kernel_shape";
  if (n.outputs.size() != 1) return n.label() + ": the Indices output has no GPU kernel";
  return std::nullopt;
}

std::string epilogue_step_code(const ops::EpilogueStep& s) { return step_code(s); }

OpKernelSource emit_window(const ir::Graph& g, const ir::Node& n, const std::optional<BufferSlice>& x_slice) {
  if (n.op == "LRN" || n.op == "tessel.LRN") return emit_lrn(g, n);
  return n.op == "tessel.Conv" ? emit_grouped_conv(g, n, x_slice) : emit_pool(g, n);
}

}  // namespace tessel::kernels::cuda::op_detail

namespace tessel::kernels::cuda {

using namespace op_detail;

std::optional<std::string> chosen_depthwise_tiling(const ir::Graph& g, const ir::Node& n) {
  if (can_emit_op(g, n)) return std::nullopt;
  const std::optional<DepthwiseTiling> t = depthwise_pick(g, n);
  return t ? std::optional<std::string>(depthwise_tiling_name(*t)) : std::nullopt;
}

std::optional<std::string> cannot_tile_depthwise(const ir::Graph& g, const ir::Node& n,
                                                 const std::string& tiling) {
  if (std::optional<std::string> why = can_emit_op(g, n)) return why;
  if (!ops::is_depthwise_conv(g, n))
    return n.label() + ": not a depthwise convolution";
  const std::optional<DepthwiseTiling> t =
      parse_depthwise_tiling(tiling, depthwise_problem_of(g, n));
  if (!t) return tiling + ": not a depthwise tiling name (dw_v4x8_r2x4_c4x2_s2_wr)";
  if (std::optional<std::string> why =
          depthwise_tiling_refusal(*t, static_cast<int>(dtype_size(g.type(n.inputs[0]).dtype))))
    return tiling + ": " + *why;
  return std::nullopt;
}

OpKernelSource emit_depthwise(const ir::Graph& g, const ir::Node& n, const std::string& tiling) {
  const std::optional<std::string> why = cannot_tile_depthwise(g, n, tiling);
  TESSEL_ICHECK(!why) << "emit_depthwise: " << *why;
  return emit_depthwise_conv(g, n, *parse_depthwise_tiling(tiling, depthwise_problem_of(g, n)));
}

}  // namespace tessel::kernels::cuda
