// Data-movement ops as strided copies. Each op becomes one or more Segments: an iteration
// space (the extents of one output, or of one input for Concat) with, per side, a base offset
// and a stride per dim (0 where Expand and Tile repeat the source); Pad adds bounds outside which the pad value is stored. Adjacent dims
// that are contiguous on both sides are merged first, so a copy of any rank usually runs as a
// rank-1..3 loop, and the innermost dim moves as V-element fragments (16-byte stores) where
// its extent and offsets allow. A transpose that collapses to a batched swap of the last two
// dims (NCHW <-> NHWC) goes through a shared-memory tiled kernel instead.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>

#include "kernels/cuda/op_emit.h"
#include "core/error.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 256;

struct Segment {
  int in = 0, out = 0;  // operand indices
  DType src_type = DType::kF32, dst_type = DType::kF32;
  std::vector<int64_t> dims, src_stride, dst_stride;
  int64_t src_base = 0, dst_base = 0;
  // Pad only: the source coordinate of dim d is c[d] - lo[d], valid in [0, src_extent[d]);
  // elsewhere the output is the pad value (input `pad_input`, or 0 when absent).
  bool bounded = false;
  std::vector<int64_t> lo, src_extent;
  int pad_input = -1;
  // Pad's mode: outside the source, the pad value (constant), or the source coordinate
  // mirrored (reflect) or clamped (edge) into it (ops/tensor_indexing.cc, pad_source).
  enum class PadMode { kConstant, kReflect, kEdge } pad_mode = PadMode::kConstant;
  int vec = 1;
  bool vector_load = false;
};

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

bool is_pad_free(const Segment& s, size_t d) {
  return !s.bounded || (s.lo[d] == 0 && s.src_extent[d] == s.dims[d]);
}

// Drops extent-1 dims and merges dim d into d+1 where both sides step through d as one run of
// d+1 (stride[d] == stride[d+1] * dims[d+1]) and no padding applies to either.
void collapse(Segment& s) {
  Segment r = s;
  r.dims.clear(), r.src_stride.clear(), r.dst_stride.clear(), r.lo.clear(), r.src_extent.clear();
  for (size_t d = 0; d < s.dims.size(); ++d) {
    if (s.dims[d] == 1 && is_pad_free(s, d)) continue;
    if (!r.dims.empty() && is_pad_free(s, d) && is_pad_free(r, r.dims.size() - 1) &&
        r.src_stride.back() == s.src_stride[d] * s.dims[d] &&
        r.dst_stride.back() == s.dst_stride[d] * s.dims[d]) {
      r.dims.back() *= s.dims[d];
      r.src_stride.back() = s.src_stride[d];
      r.dst_stride.back() = s.dst_stride[d];
      if (r.bounded) r.src_extent.back() = r.dims.back();
      continue;
    }
    r.dims.push_back(s.dims[d]);
    r.src_stride.push_back(s.src_stride[d]);
    r.dst_stride.push_back(s.dst_stride[d]);
    if (s.bounded) r.lo.push_back(s.lo[d]), r.src_extent.push_back(s.src_extent[d]);
  }
  if (r.dims.empty()) {  // a single element
    r.dims = {1}, r.src_stride = {1}, r.dst_stride = {1};
    if (r.bounded) r.lo = {0}, r.src_extent = {1};
  }
  s = std::move(r);
}

// The widest V (a power of two, V * dst size <= 16 bytes) whose fragments stay inside one run
// of the innermost dim and start V-aligned; loads are V-wide too when the source side is
// contiguous and aligned and the run is not cut by padding.
void choose_vector(Segment& s) {
  const int64_t inner = s.dims.back();
  int v = static_cast<int>(16 / dtype_size(s.dst_type));
  // Mirrored or clamped source coordinates are not contiguous at the edges: one element each.
  if (s.dst_stride.back() != 1 || s.pad_mode != Segment::PadMode::kConstant) v = 1;
  while (v > 1 && (inner % v != 0 || s.dst_base % v != 0)) v /= 2;
  s.vec = v;
  const bool aligned_src = s.src_stride.back() == 1 && s.src_base % v == 0;
  const bool aligned_pad = !s.bounded || (s.lo.back() % v == 0 && s.src_extent.back() % v == 0);
  s.vector_load = v > 1 && aligned_src && aligned_pad;
}

int64_t items(const Segment& s) {
  return std::accumulate(s.dims.begin(), s.dims.end(), int64_t{1}, std::multiplies<>()) / s.vec;
}

// The item code of one segment: coordinates, source gather, conversion, one fragment store.
std::string segment_code(const Segment& s, int64_t first_item) {
  const std::string src = type_of(s.src_type), dst = type_of(s.dst_type);
  const int rank = static_cast<int>(s.dims.size());
  std::string c = fmt::format("    // in[{}] {} -> out[{}] {}: extents [{}], source strides [{}], "
                              "destination strides [{}]\n",
                              s.in, src, s.out, dst, fmt::join(s.dims, ", "),
                              fmt::join(s.src_stride, ", "), fmt::join(s.dst_stride, ", "));
  c += fmt::format("    i64 r = (i - {}) * {};\n", first_item, s.vec);
  for (int d = rank - 1; d >= 0; --d) {
    if (d == 0)
      c += fmt::format("    const i64 c0 = r;\n");
    else
      c += fmt::format("    const i64 c{} = r % {}; r /= {};\n", d, s.dims[d], s.dims[d]);
  }
  std::string src_off = fmt::format("{}", s.src_base), dst_off = fmt::format("{}", s.dst_base);
  for (int d = 0; d < rank; ++d) {
    const std::string coord = s.bounded ? fmt::format("(c{} - {})", d, s.lo[d]) : fmt::format("c{}", d);
    src_off += fmt::format(" + {} * {}", coord, s.src_stride[d]);
    dst_off += fmt::format(" + c{} * {}", d, s.dst_stride[d]);
  }
  c += fmt::format("    const {}* x = static_cast<const {}*>(p.in[{}]);\n", src, src, s.in);
  c += fmt::format("    Frag<{}, {}> f;\n", dst, s.vec);
  if (s.bounded && s.pad_mode != Segment::PadMode::kConstant) {
    // Every output element reads the source: each coordinate mirrored or clamped into it.
    const char* map = s.pad_mode == Segment::PadMode::kReflect ? "pad_reflect" : "pad_edge";
    std::string off = fmt::format("{}", s.src_base);
    for (int d = 0; d < rank; ++d) {
      c += fmt::format("    const i64 s{} = {}(c{} - {}, {});\n", d, map, d, s.lo[d], s.src_extent[d]);
      off += fmt::format(" + s{} * {}", d, s.src_stride[d]);
    }
    c += fmt::format("    f.v[0] = convert<{}>(x[{}]);\n", dst, off);
    c += fmt::format("    f.store(static_cast<{}*>(p.out[{}]) + ({}));\n", dst, s.out, dst_off);
    return c;
  }
  if (s.vector_load) {
    c += fmt::format("    Frag<{}, {}> s;\n", src, s.vec);
    if (s.bounded) {
      std::string inside = "true";
      for (int d = 0; d < rank; ++d)
        inside += fmt::format(" && c{} >= {} && c{} < {}", d, s.lo[d], d, s.lo[d] + s.src_extent[d]);
      c += fmt::format("    if ({}) {{\n      s.load(x + ({}));\n", inside, src_off);
      c += fmt::format("#pragma unroll\n      for (int v = 0; v < {}; ++v) f.v[v] = convert<{}>(s.v[v]);\n", s.vec, dst);
      c += fmt::format("    }} else {{\n#pragma unroll\n      for (int v = 0; v < {}; ++v) f.v[v] = pad;\n    }}\n", s.vec);
    } else {
      c += fmt::format("    s.load(x + ({}));\n", src_off);
      c += fmt::format("#pragma unroll\n    for (int v = 0; v < {}; ++v) f.v[v] = convert<{}>(s.v[v]);\n", s.vec, dst);
    }
  } else {
    const int last = rank - 1;
    c += fmt::format("#pragma unroll\n    for (int v = 0; v < {}; ++v) {{\n", s.vec);
    c += fmt::format("      const i64 cv = c{} + v;\n", last);
    std::string off = src_off;
    // The innermost coordinate advances with v inside the fragment.
    const std::string inner = s.bounded ? fmt::format("(c{} - {})", last, s.lo[last]) : fmt::format("c{}", last);
    off.replace(off.rfind(inner), inner.size(), s.bounded ? fmt::format("(cv - {})", s.lo[last]) : "cv");
    if (s.bounded) {
      std::string inside = "true";
      for (int d = 0; d < rank; ++d) {
        const std::string cd = d == last ? "cv" : fmt::format("c{}", d);
        inside += fmt::format(" && {} >= {} && {} < {}", cd, s.lo[d], cd, s.lo[d] + s.src_extent[d]);
      }
      c += fmt::format("      f.v[v] = ({}) ? convert<{}>(x[{}]) : pad;\n", inside, dst, off);
    } else {
      c += fmt::format("      f.v[v] = convert<{}>(x[{}]);\n", dst, off);
    }
    c += "    }\n";
  }
  c += fmt::format("    f.store(static_cast<{}*>(p.out[{}]) + ({}));\n", dst, s.out, dst_off);
  return c;
}


const Tensor* constant_input(const ir::Graph& g, const ir::Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == ir::kNoValue) return nullptr;
  return g.value(n.inputs[i]).data.get();
}

Segment identity_segment(const ir::Graph& g, const ir::Node& n, int in, int out) {
  Segment s;
  s.in = in, s.out = out;
  s.src_type = g.type(n.inputs[in]).dtype;
  s.dst_type = g.type(n.outputs[out]).dtype;
  const Shape& shape = g.type(n.outputs[out]).shape;
  s.dims = shape;
  s.src_stride = s.dst_stride = contiguous_strides(shape);
  return s;
}

// The segments of a checked node.
std::vector<Segment> segments_of(const ir::Graph& g, const ir::Node& n,
                                 std::optional<BufferSlice> out_slice) {
  const Shape& out = g.type(n.outputs[0]).shape;
  const Shape& in = g.type(n.inputs[0]).shape;
  const std::vector<int64_t> out_st = contiguous_strides(out), in_st = contiguous_strides(in);
  if (n.op == "Cast" || n.op == "Identity" || n.op == "Reshape" || n.op == "Flatten" ||
      n.op == "Squeeze" || n.op == "Unsqueeze") {
    Segment s = identity_segment(g, n, 0, 0);  // same element order: a flat copy
    s.dims = {std::max<int64_t>(1, numel(out))}, s.src_stride = s.dst_stride = {1};
    return {s};
  }
  if (n.op == "Transpose") {
    std::vector<int64_t> perm = n.get_ints("perm");
    if (perm.empty())
      for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) perm.push_back(d);
    Segment s = identity_segment(g, n, 0, 0);
    for (size_t d = 0; d < perm.size(); ++d) s.src_stride[d] = in_st[perm[d]];
    return {s};
  }
  if (n.op == "Expand") {
    // The input broadcast (right-aligned) to the output: stride 0 along the dims it repeats.
    Segment s = identity_segment(g, n, 0, 0);
    const size_t lead = out.size() - in.size();
    for (size_t d = 0; d < out.size(); ++d)
      s.src_stride[d] = d < lead || in[d - lead] == 1 ? 0 : in_st[d - lead];
    return {s};
  }
  if (n.op == "Tile") {
    // Output dim d (repeats x in[d]) iterated as [repeats, in[d]]: the source steps through the
    // inner one only.
    Segment s = identity_segment(g, n, 0, 0);
    s.dims.clear(), s.src_stride.clear(), s.dst_stride.clear();
    for (size_t d = 0; d < in.size(); ++d) {
      s.dims.push_back(in[d] == 0 ? 0 : out[d] / in[d]);
      s.src_stride.push_back(0);
      s.dst_stride.push_back(in[d] * out_st[d]);
      s.dims.push_back(in[d]);
      s.src_stride.push_back(in_st[d]);
      s.dst_stride.push_back(out_st[d]);
    }
    return {s};
  }
  if (n.op == "Pad") {
    const std::vector<int64_t> pads = constant_input(g, n, 1)->to_i64_vector();
    Segment s = identity_segment(g, n, 0, 0);
    s.bounded = true;
    s.src_stride = in_st;
    s.lo.assign(pads.begin(), pads.begin() + in.size());
    s.src_extent = in;
    const std::string mode = n.get_string("mode", "constant");
    if (mode == "reflect") s.pad_mode = Segment::PadMode::kReflect;
    if (mode == "edge") s.pad_mode = Segment::PadMode::kEdge;
    if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue && s.pad_mode == Segment::PadMode::kConstant)
      s.pad_input = 2;
    return {s};
  }
  if (n.op == "Concat" || n.op == "Split") {
    const bool concat = n.op == "Concat";
    const Shape& whole = concat ? out : in;
    const int64_t axis = normalize_axis(n.get_int("axis", 0), static_cast<int64_t>(whole.size()), n.label());
    // A Concat stored in place in an outer one: its rows are the outer buffer's.
    Shape rows = whole;
    if (out_slice) rows.back() = out_slice->channels;
    const std::vector<int64_t> whole_st = contiguous_strides(rows);
    const int64_t slice_base = out_slice ? out_slice->channel_offset : 0;
    std::vector<Segment> segs;
    int64_t offset = 0;
    const size_t parts = concat ? n.inputs.size() : n.outputs.size();
    // A Concat's inputs flagged `in_place` (passes/plan_memory.h) were stored into their
    // channels by their producers: only the others are copied.
    const std::vector<int64_t> in_place = concat ? n.get_ints("in_place", {}) : std::vector<int64_t>{};
    for (size_t k = 0; k < parts; ++k) {
      Segment s = identity_segment(g, n, concat ? static_cast<int>(k) : 0, concat ? 0 : static_cast<int>(k));
      s.dims = g.type(concat ? n.inputs[k] : n.outputs[k]).shape;
      (concat ? s.src_stride : s.dst_stride) = contiguous_strides(s.dims);
      (concat ? s.dst_stride : s.src_stride) = whole_st;
      (concat ? s.dst_base : s.src_base) = offset * whole_st[axis] + slice_base;
      offset += s.dims[axis];
      const bool stored = k < in_place.size() && in_place[k] == 1;
      if (numel(s.dims) > 0 && !stored) segs.push_back(std::move(s));
    }
    return segs;
  }
  if (n.op == "Slice") {
    const std::vector<int64_t> starts = constant_input(g, n, 1)->to_i64_vector();
    const Tensor* axes_t = constant_input(g, n, 3);
    const Tensor* steps_t = constant_input(g, n, 4);
    Segment s = identity_segment(g, n, 0, 0);
    s.src_stride = in_st;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t axis = normalize_axis(axes_t ? axes_t->to_i64_vector()[k] : static_cast<int64_t>(k),
                                          static_cast<int64_t>(in.size()), n.label());
      const int64_t step = steps_t ? steps_t->to_i64_vector()[k] : 1;
      const int64_t dim = in[axis];
      int64_t start = starts[k] < 0 ? starts[k] + dim : starts[k];
      start = step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
      s.src_base += start * in_st[axis];
      s.src_stride[axis] = step * in_st[axis];
    }
    return {s};
  }
  if (n.op == "SpaceToDepth" || n.op == "tessel.SpaceToDepth") {
    // Output channel (dy * b + dx) * C + c of pixel (ho, wo) is input channel c of pixel
    // (ho * b + dy, wo * b + dx). The output iterated in its own order: NHWC [N, Ho, Wo, dy,
    // dx, C]; channels-first [N, dy, dx, C, Ho, Wo].
    const int64_t b = n.get_int("blocksize", 0);
    Segment s = identity_segment(g, n, 0, 0);
    if (n.op == "tessel.SpaceToDepth") {
      const int64_t N = in[0], H = in[1], W = in[2], C = in[3];
      s.dims = {N, H / b, W / b, b, b, C};
      s.src_stride = {H * W * C, b * W * C, b * C, W * C, C, 1};
    } else {
      const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
      s.dims = {N, b, b, C, H / b, W / b};
      s.src_stride = {C * H * W, W, 1, H * W, b * W, b};
    }
    s.dst_stride = contiguous_strides(s.dims);
    return {s};
  }
  // tessel.DepthToSpace, NHWC: out [N, H*b, W*b, C'] iterated as [N, H, i, W, j, C'].
  const int64_t b = n.get_int("blocksize", 0);
  const bool dcr = n.get_string("mode", "DCR") == "DCR";
  const int64_t N = in[0], H = in[1], W = in[2], C = in[3], Cp = C / (b * b);
  Segment s = identity_segment(g, n, 0, 0);
  s.dims = {N, H, b, W, b, Cp};
  const int64_t row = W * b * Cp;
  s.dst_stride = {H * b * row, b * row, row, b * Cp, Cp, 1};
  s.src_stride = dcr ? std::vector<int64_t>{H * W * C, W * C, b * Cp, C, Cp, 1}
                     : std::vector<int64_t>{H * W * C, W * C, b, C, 1, b * b};
  return {s};
}

// GatherElements along `axis`: out[c] = data[c with coordinate `axis` replaced by idx[c]] over
// the indices' shape (which may be smaller than data's off the axis); one thread per output
// element reads its index from the device, negative ones counted from the end.
OpKernelSource emit_gather_elements(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const ir::TensorType& idx = g.type(n.inputs[1]);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  const std::vector<int64_t> data_st = contiguous_strides(x.shape);
  const int64_t total = numel(idx.shape);
  std::string body = "    i64 r = i, src = 0;\n";
  for (int64_t d = rank - 1; d >= 0; --d) {
    const size_t u = static_cast<size_t>(d);
    const std::string coord = d == 0 ? "r" : fmt::format("(r % {})", idx.shape[u]);
    if (d == axis) {
      body += fmt::format("    {{\n      i64 k = static_cast<i64>(static_cast<const {}*>(p.in[1])[i]);\n"
                          "      if (k < 0) k += {};\n      src += k * {};\n    }}\n",
                          type_of(idx.dtype), x.shape[u], data_st[u]);
    } else {
      body += fmt::format("    src += {} * {};\n", coord, data_st[u]);
    }
    if (d > 0) body += fmt::format("    r /= {};\n", idx.shape[u]);
  }
  const std::string t = type_of(x.dtype);
  const std::string problem = fmt::format(
      "// GatherElements {} by {} along axis {} -> {}\nstruct Problem {{\n  static constexpr i64 kItems = {};\n\n"
      "  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {{\n{}"
      "    static_cast<{}*>(p.out[0])[i] = static_cast<const {}*>(p.in[0])[src];\n  }}\n}};\n",
      x.str(), idx.str(), axis, g.type(n.outputs[0]).str(), total, body, t, t);
  return make_source(n, "gather_elements", "tessel_op_common.cuh", problem, "tessel::for_each_item<Problem>(p);",
                     (total + kThreads - 1) / kThreads, kThreads);
}

// Transposes that collapse to [B, R, C] -> [B, C, R]: returns {B, R, C}.
std::optional<std::array<int64_t, 3>> batched_swap(const Segment& s) {
  if (s.dims.size() == 2 && s.src_stride[0] == 1 && s.src_stride[1] == s.dims[0])
    return std::array<int64_t, 3>{1, s.dims[1], s.dims[0]};
  if (s.dims.size() == 3 && s.src_stride[1] == 1 && s.src_stride[2] == s.dims[1] &&
      s.src_stride[0] == s.dims[1] * s.dims[2])
    return std::array<int64_t, 3>{s.dims[0], s.dims[2], s.dims[1]};
  return std::nullopt;
}

// Gather along `axis`: out[o, j, i] = x[o, idx[j], i] over x viewed as [outer, extent, inner]
// and the indices flattened to [count]; one thread per output element reads its index from the
// device (int64 or int32, negative ones counted from the end, as ONNX says).
OpKernelSource emit_gather(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs[0]);
  const ir::TensorType& idx = g.type(n.inputs[1]);
  const AxisView v = axis_view(x.shape, n.get_int("axis", 0));
  const int64_t axis = v.axis, outer = v.outer, inner = v.inner, extent = v.extent, count = numel(idx.shape);
  const int64_t total = outer * count * inner;
  const std::string t = type_of(x.dtype), it = type_of(idx.dtype);
  const std::string problem = fmt::format(
      "// Gather {} by {} along axis {} -> {}\nstruct Problem {{\n"
      "  static constexpr i64 kItems = {}, kCount = {}, kInner = {}, kExtent = {};\n\n"
      "  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {{\n"
      "    const i64 inner = i % kInner, j = (i / kInner) % kCount, outer = i / (kInner * kCount);\n"
      "    i64 k = static_cast<i64>(static_cast<const {}*>(p.in[1])[j]);\n"
      "    if (k < 0) k += kExtent;\n"
      "    static_cast<{}*>(p.out[0])[i] =\n"
      "        static_cast<const {}*>(p.in[0])[(outer * kExtent + k) * kInner + inner];\n"
      "  }}\n}};\n",
      x.str(), idx.str(), axis, g.type(n.outputs[0]).str(), total, std::max<int64_t>(count, 1),
      std::max<int64_t>(inner, 1), extent, it, t, t);
  return make_source(n, "gather", "tessel_op_common.cuh", problem,
                     "tessel::for_each_item<Problem>(p);", (total + kThreads - 1) / kThreads,
                     kThreads);
}

}  // namespace


std::optional<std::string> check_copy(const ir::Graph& g, const ir::Node& n) {
  const Shape& in = g.type(n.inputs[0]).shape;
  if (n.op == "Pad") {
    const std::string mode = n.get_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      return n.label() + ": mode '" + mode + "' has no GPU kernel (constant, reflect, edge)";
    const Tensor* pads = constant_input(g, n, 1);
    if (!pads || pads->numel() != 2 * static_cast<int64_t>(in.size()))
      return n.label() + ": pads must be a constant input with 2 * rank values";
    if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue)
      return n.label() + ": the 'axes' input of Pad has no GPU kernel";
    if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue &&
        g.type(n.inputs[2]).dtype != g.type(n.inputs[0]).dtype)
      return n.label() + ": constant_value must have the dtype of data";
  }
  if (n.op == "Slice") {
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] != ir::kNoValue && !constant_input(g, n, i))
        return n.label() + ": starts, ends, axes and steps must be constants";
    if (n.inputs.size() < 3) return n.label() + ": Slice needs inputs starts and ends";
  }
  if (n.op == "Cast") return std::nullopt;
  if (n.op == "Gather" || n.op == "GatherElements") {
    const DType it = g.type(n.inputs.at(1)).dtype;
    if (it != DType::kI64 && it != DType::kI32)
      return n.label() + ": indices of dtype " + std::string(dtype_name(it)) + " (int64 or int32)";
    // Indices out of range are a model error the CPU reports; the kernel trusts constant ones
    // only, which the compiler has seen.
    const Tensor* idx = constant_input(g, n, 1);
    if (!idx) return n.label() + ": indices must be a constant (the kernel does not range-check)";
    const int64_t extent = in.at(static_cast<size_t>(
        n.get_int("axis", 0) < 0 ? n.get_int("axis", 0) + static_cast<int64_t>(in.size())
                                 : n.get_int("axis", 0)));
    for (int64_t i = 0; i < idx->numel(); ++i)
      if (idx->get_i64(i) < -extent || idx->get_i64(i) >= extent)
        return n.label() + ": index " + std::to_string(idx->get_i64(i)) + " out of range";
  }
  // Every other copy keeps the dtype.
  for (ir::ValueId v : n.outputs)
    if (g.type(v).dtype != g.type(n.inputs[0]).dtype)
      return n.label() + ": output dtype differs from input dtype";
  if (n.op == "Concat")
    for (ir::ValueId v : n.inputs)
      if (v == ir::kNoValue || g.type(v).dtype != g.type(n.inputs[0]).dtype)
        return n.label() + ": Concat inputs must all be given with one dtype";
  if (n.op == "SpaceToDepth" || n.op == "tessel.SpaceToDepth") {
    const int64_t b = n.get_int("blocksize", 0);
    const bool nhwc = n.op == "tessel.SpaceToDepth";
    if (in.size() != 4 || b < 1 || in[nhwc ? 1 : 2] % b != 0 || in[nhwc ? 2 : 3] % b != 0)
      return n.label() + ": expected a rank-4 input whose height and width blocksize divides";
  }
  if (n.op == "tessel.DepthToSpace") {
    const int64_t b = n.get_int("blocksize", 0);
    const std::string mode = n.get_string("mode", "DCR");
    if (in.size() != 4 || b < 1 || in[3] % (b * b) != 0 || (mode != "DCR" && mode != "CRD"))
      return n.label() + ": expected NHWC input, blocksize >= 1 dividing C as b^2, mode DCR or CRD";
  }
  return std::nullopt;
}

OpKernelSource emit_copy(const ir::Graph& g, const ir::Node& n, std::optional<BufferSlice> out_slice) {
  if (n.op == "Gather") return emit_gather(g, n);
  if (n.op == "GatherElements") return emit_gather_elements(g, n);
  std::vector<Segment> segs = segments_of(g, n, out_slice);
  for (Segment& s : segs) collapse(s), choose_vector(s);

  if (n.op == "Transpose" && segs.size() == 1) {
    if (const auto swap = batched_swap(segs[0])) {
      const auto [b, r, c] = *swap;
      const std::string problem = fmt::format(
          "// {} -> {}: a batched [{}, {}] -> [{}, {}] transpose.\n"
          "struct Problem {{\n  using In = {};\n  using Out = {};\n"
          "  static constexpr i64 kB = {}, kR = {}, kC = {};\n}};\n",
          g.type(n.inputs[0]).str(), g.type(n.outputs[0]).str(), r, c, c, r,
          type_of(segs[0].src_type), type_of(segs[0].dst_type), b, r, c);
      // Transpose2D: 32x32 tiles, or one thread per short row / column (8 or fewer).
      const int64_t blocks = r <= 8 ? (b * c + 255) / 256
                             : c <= 8 ? (b * r + 255) / 256
                                      : b * ((r + 31) / 32) * ((c + 31) / 32);
      return make_source(n, "transpose2d", "tessel_op_transpose.cuh", problem,
                         "tessel::Transpose2D<Problem>::run(p);", blocks, 256);
    }
  }

  std::string body;
  int64_t total = 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    const int64_t first = total;
    total += items(segs[k]);
    const bool last = k + 1 == segs.size();
    body += last ? "  {\n" : fmt::format("  if (i < {}) {{\n", total);
    body += segment_code(segs[k], first);
    body += last ? "  }\n" : "    return;\n  }\n";
  }
  std::string pad_decl;
  if (segs.size() == 1 && segs[0].bounded && segs[0].pad_mode == Segment::PadMode::kConstant) {
    const std::string t = type_of(segs[0].dst_type);
    pad_decl = segs[0].pad_input >= 0
                   ? fmt::format("    const {} pad = *static_cast<const {}*>(p.in[{}]);\n", t, t, segs[0].pad_input)
                   : fmt::format("    const {} pad = convert<{}>(i64(0));\n", t, t);
  }
  const std::string problem = fmt::format(
      "// {}: {} -> {}\nstruct Problem {{\n  static constexpr i64 kItems = {};\n\n"
      "  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {{\n{}{}  }}\n}};\n",
      n.op, g.type(n.inputs[0]).str(), g.type(n.outputs[0]).str(), total, pad_decl, body);
  return make_source(n, "copy", "tessel_op_common.cuh", problem,
                     "tessel::for_each_item<Problem>(p);", (total + kThreads - 1) / kThreads, kThreads);
}

}  // namespace tessel::kernels::cuda::op_detail
