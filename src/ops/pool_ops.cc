// MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool and
// GlobalMaxPool in any spatial rank. Kernels compute in double, which holds every supported
// input dtype exactly, and round once on store.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "ops/conv_geometry.h"
#include "ops/nn_common.h"

namespace tessel::ops {
namespace {

// Pooling is a depthwise window over each (n, c) plane: a ConvGeometry with M == C. With
// ceil_mode, opset 22 drops a last window that would start in the end padding (PyTorch's rule,
// ONNX's test maxpool_2d_ceil_output_size_reduce_by_one); earlier opsets keep it.
ConvGeometry plan_pool(const ir::Node& node, const Shape& x, int64_t opset) {
  TESSEL_USER_CHECK(x.size() >= 3) << node.label() << ": input X has shape " << shape_str(x)
                                   << ", expected rank >= 3 (N, C, spatial...)";
  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = g.out_channels = g.group = x[1];
  g.in_spatial.assign(x.begin() + 2, x.end());
  g.kernel = node.require_ints("kernel_shape");
  TESSEL_USER_CHECK(g.kernel.size() == g.in_spatial.size())
      << node.label() << ": kernel_shape " << shape_str(g.kernel) << " has " << g.kernel.size()
      << " values, expected " << g.in_spatial.size() << " for input X " << shape_str(x);
  for (int64_t k : g.kernel)
    TESSEL_USER_CHECK(k >= 1) << node.label() << ": kernel_shape " << shape_str(g.kernel)
                              << " must be positive";
  int64_t ceil_mode = node.get_int("ceil_mode", 0);
  TESSEL_USER_CHECK(ceil_mode == 0 || ceil_mode == 1)
      << node.label() << ": ceil_mode is " << ceil_mode << ", expected 0 or 1";
  plan_window_into(node, g, ceil_mode == 1);
  if (ceil_mode == 1 && opset >= 22 && node.get_string("auto_pad", "NOTSET") == "NOTSET") {
    for (size_t d = 0; d < g.out_spatial.size(); ++d)
      if ((g.out_spatial[d] - 1) * g.strides[d] >= g.in_spatial[d] + g.pad_begin[d])
        --g.out_spatial[d];
  }
  return g;
}

// taps[o]: the input indices that window o covers along one spatial dim (padding excluded).
std::vector<std::vector<int64_t>> dim_taps(const ConvGeometry& g, size_t d) {
  std::vector<std::vector<int64_t>> taps(static_cast<size_t>(g.out_spatial[d]));
  for (int64_t o = 0; o < g.out_spatial[d]; ++o) {
    for (int64_t k = 0; k < g.kernel[d]; ++k) {
      int64_t i = o * g.strides[d] - g.pad_begin[d] + k * g.dilations[d];
      if (i >= 0 && i < g.in_spatial[d]) taps[o].push_back(i);
    }
  }
  return taps;
}

// Calls fn(out_index, taps) for every output position of a plane, where taps are the flat
// in-plane offsets of the window's elements inside the input, in row-major kernel order.
template <typename Fn>
void for_each_window(const ConvGeometry& g, Fn&& fn) {
  const size_t rank = g.spatial_rank();
  std::vector<std::vector<std::vector<int64_t>>> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(dim_taps(g, d));
  const std::vector<int64_t> in_strides = strides_of(g.in_spatial);
  const int64_t out_plane = numel(g.out_spatial);
  std::vector<int64_t> o(rank, 0);
  std::vector<int64_t> taps, next;
  for (int64_t out = 0; out < out_plane; ++out) {
    // Cartesian product of the per-dim taps, built dim by dim.
    taps.assign(1, 0);
    for (size_t d = 0; d < rank; ++d) {
      next.clear();
      for (int64_t base : taps)
        for (int64_t i : dims[d][o[d]]) next.push_back(base + i * in_strides[d]);
      taps.swap(next);
    }
    fn(out, taps);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0 && ++o[d] == g.out_spatial[d]; --d)
      o[d] = 0;
  }
}

// The lowest finite value of a MaxPool dtype: the result of a window that covers no input
// element (ceil_mode can place the last window entirely in the padding), as in onnxruntime.
double lowest_value(DType t) {
  switch (t) {
    case DType::kF32:
      return std::numeric_limits<float>::lowest();
    case DType::kF16:
      return -65504.0;
    case DType::kBF16:
      return -bf16_to_float(0x7f7f);
    case DType::kI8:
      return -128.0;
    case DType::kU8:
      return 0.0;
    default:
      return std::numeric_limits<double>::lowest();
  }
}

std::vector<double> read_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_f64(i);
  return v;
}

void infer_max_pool(ir::InferContext& ctx) {
  DType t = ctx.dtype(0);
  TESSEL_USER_CHECK(is_float(t) || t == DType::kI8 || t == DType::kU8)
      << ctx.node().label() << ": input X has dtype " << dtype_name(t)
      << ", expected f32, f16, bf16, f64, i8 or u8";
  int64_t order = ctx.node().get_int("storage_order", 0);
  TESSEL_USER_CHECK(order == 0 || order == 1)
      << ctx.node().label() << ": storage_order is " << order << ", expected 0 or 1";
  ConvGeometry g = plan_pool(ctx.node(), ctx.shape(0), ctx.opset());
  ctx.set_output(0, t, g.out_shape());
  if (ctx.outputs().size() > 1) ctx.set_output(1, DType::kI64, g.out_shape());
}

void compute_max_pool(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ConvGeometry g = plan_pool(ctx.node(), x.shape(), ctx.opset());
  const bool want_indices = ctx.num_outputs() > 1;
  const bool column_major = ctx.node().get_int("storage_order", 0) == 1;
  // Indices address the whole input tensor: plane * in_plane + the in-plane position, whose
  // dims are ordered row-major, or column-major when storage_order is 1.
  const Shape& in = g.in_spatial;
  const std::vector<int64_t> row_strides = strides_of(in);
  std::vector<int64_t> index_strides = row_strides;
  if (column_major) {
    int64_t s = 1;
    for (size_t d = 0; d < in.size(); ++d) {
      index_strides[d] = s;
      s *= in[d];
    }
  }

  const std::vector<double> xv = read_doubles(x);
  const int64_t in_plane = numel(in), out_plane = numel(g.out_spatial);
  Tensor& y = ctx.output(0);
  const double empty = lowest_value(x.dtype());
  for_each_window(g, [&](int64_t out, const std::vector<int64_t>& taps) {
    for (int64_t p = 0; p < g.batch * g.in_channels; ++p) {
      const double* xp = xv.data() + p * in_plane;
      double best = empty;
      int64_t best_at = -1;  // stays -1 for a window without input elements
      for (int64_t t : taps)
        if (best_at < 0 || xp[t] > best) {  // the first maximum wins, as in onnxruntime
          best = xp[t];
          best_at = t;
        }
      y.set_f64(p * out_plane + out, best);
      if (!want_indices) continue;
      int64_t index = -1;
      if (best_at >= 0) {
        index = p * in_plane;
        int64_t rem = best_at;
        for (size_t d = 0; d < in.size(); ++d) {
          index += rem / row_strides[d] * index_strides[d];
          rem %= row_strides[d];
        }
      }
      ctx.output(1).data<int64_t>()[p * out_plane + out] = index;
    }
  });
}

void infer_average_pool(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "X");
  int64_t include = ctx.node().get_int("count_include_pad", 0);
  TESSEL_USER_CHECK(include == 0 || include == 1)
      << ctx.node().label() << ": count_include_pad is " << include << ", expected 0 or 1";
  ctx.set_output(0, ctx.dtype(0), plan_pool(ctx.node(), ctx.shape(0), ctx.opset()).out_shape());
}

void compute_average_pool(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ConvGeometry g = plan_pool(ctx.node(), x.shape(), ctx.opset());
  const bool include_pad = ctx.node().get_int("count_include_pad", 0) == 1;
  const double kernel_size = static_cast<double>(numel(g.kernel));
  const std::vector<double> xv = read_doubles(x);
  const int64_t in_plane = numel(g.in_spatial), out_plane = numel(g.out_spatial);
  Tensor& y = ctx.output(0);
  // With count_include_pad every kernel element counts, including the part of a ceil_mode
  // window that hangs past the end pad (onnxruntime and ONNX's reference agree on this).
  // Without it, a window of padding only averages nothing: 0 / 0 = NaN.
  for_each_window(g, [&](int64_t out, const std::vector<int64_t>& taps) {
    const double count = include_pad ? kernel_size : static_cast<double>(taps.size());
    for (int64_t p = 0; p < g.batch * g.in_channels; ++p) {
      const double* xp = xv.data() + p * in_plane;
      double sum = 0;
      for (int64_t t : taps) sum += xp[t];
      y.set_f64(p * out_plane + out, sum / count);
    }
  });
}

// Global pools reduce each (n, c) plane to one value; the output keeps the spatial dims as 1.
void infer_global_pool(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "X");
  require_rank(ctx, 0, "X", 3);
  Shape out = ctx.shape(0);
  std::fill(out.begin() + 2, out.end(), 1);
  ctx.set_output(0, ctx.dtype(0), out);
}

template <bool kMax>
void compute_global_pool(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t plane = planes == 0 ? 0 : x.numel() / planes;
  for (int64_t p = 0; p < planes; ++p) {
    double acc = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = p * plane; i < (p + 1) * plane; ++i)
      acc = kMax ? std::max(acc, x.get_f64(i)) : acc + x.get_f64(i);
    ctx.output(0).set_f64(p, kMax ? acc : acc / static_cast<double>(plane));
  }
}

// LRN (AlexNet's and GoogLeNet's local response normalization, [N, C, D1, ...]): each element
// divided by (bias + alpha / size * the sum of squares over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C))^beta.
struct LrnParams {
  double alpha, beta, bias;
  int64_t size;
};

LrnParams lrn_params(const ir::Node& n) {
  TESSEL_USER_CHECK(n.has_attr("size")) << n.label() << ": the size attribute is required";
  const LrnParams p{n.get_float("alpha", 1e-4), n.get_float("beta", 0.75), n.get_float("bias", 1.0),
                    n.get_int("size", 0)};
  TESSEL_USER_CHECK(p.size >= 1) << n.label() << ": size is " << p.size << ", expected at least 1";
  return p;
}

void infer_lrn(ir::InferContext& ctx) {
  require_float_input(ctx, 0, "X");
  require_rank(ctx, 0, "X", 3);
  lrn_params(ctx.node());
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void compute_lrn(ir::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const LrnParams p = lrn_params(ctx.node());
  const int64_t channels = x.dim(1), images = x.dim(0);
  const int64_t plane = images * channels == 0 ? 0 : x.numel() / (images * channels);
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  const std::vector<double> xv = read_doubles(x);
  Tensor& y = ctx.output(0);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t s = 0; s < plane; ++s) {
        double sum = 0;
        for (int64_t i = std::max<int64_t>(0, c - before); i <= std::min(channels - 1, c + after); ++i) {
          const double v = xv[static_cast<size_t>((n * channels + i) * plane + s)];
          sum += v * v;
        }
        const int64_t at = (n * channels + c) * plane + s;
        y.set_f64(at, xv[static_cast<size_t>(at)] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sum, p.beta));
      }
}

}  // namespace

void register_pool_ops(ir::OpRegistry& r) {
  r.add({.name = "LRN", .infer = infer_lrn, .compute = compute_lrn});
  r.add(
      {.name = "MaxPool", .max_outputs = 2, .infer = infer_max_pool, .compute = compute_max_pool});
  r.add({.name = "AveragePool", .infer = infer_average_pool, .compute = compute_average_pool});
  r.add({.name = "GlobalAveragePool",
         .infer = infer_global_pool,
         .compute = compute_global_pool<false>});
  r.add(
      {.name = "GlobalMaxPool", .infer = infer_global_pool, .compute = compute_global_pool<true>});
}

}  // namespace tessel::ops
