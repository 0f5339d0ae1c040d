// Resize (and Upsample) on the GPU, modes nearest, linear and cubic (antialiased or not), any
// rank (NHWC after convert-layout: scales [1, sh, sw, 1]). Shapes, scales and sizes are
// compile-time constants, so the coordinate mapping is not re-derived in CUDA: the emitter asks
// the CPU reference for its per-dimension taps (ops/resize.h) and writes them into the kernel as
// tables, one per resized dimension. The GPU therefore reads exactly the input elements the
// reference reads, with its weights rounded once to fp32, for every coordinate_transformation_mode,
// nearest_mode, cubic_coeff_a, exclude_outside and antialias the reference supports; only the
// interpolation arithmetic differs (fp32 here, double there).
//
// A dimension the Resize leaves alone (every output coordinate o reads input o with weight 1:
// N and C of an NHWC upsample) needs no table. When the innermost one is such a dimension, an
// item moves a fragment of V channels with 16-byte accesses; otherwise one element. Per
// resized dimension, a table is either
//   Gather  int kIndexD[out_d]                     one input index per coordinate (nearest, and
//                                                  linear where every coordinate is whole)
//   Lerp    Lerp kLerpD[out_d] = {i0, i1, w0, w1}  two taps (linear)
//   Taps    TapsK kTapsD[out_d] = {{i..}, {w..}}   K taps, unused ones of weight 0 (cubic: 4;
//                                                  antialias: as wide as the filter)
// Without Taps tables an output element reads the 2^(number of Lerp dimensions) corners they
// span, unrolled; with one, every interpolated dimension is a Taps table and the element sums
// over their product in nested loops. An index of -1 marks a coordinate that
// tf_crop_and_resize extrapolates.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/op_emit.h"
#include "ops/resize.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 256;
// The largest output extent of a resized dimension whose table is emitted (an 8K frame is
// 7680): tables are source text, and NVRTC time grows with it.
constexpr int64_t kMaxTableEntries = int64_t{1} << 15;
// The most taps per output coordinate in a Taps table: a cubic antialias filter downsampling
// by 1/16 (or linear by 1/32). Wider filters would be mostly loop overhead per element.
constexpr size_t kMaxTaps = 64;

std::vector<const Tensor*> constant_operands(const ir::Graph& g, const ir::Node& n) {
  std::vector<const Tensor*> r;
  for (ir::ValueId v : n.inputs) r.push_back(v == ir::kNoValue ? nullptr : g.value(v).data.get());
  return r;
}

ops::ResizeSampling sampling_of(const ir::Graph& g, const ir::Node& n) {
  return ops::resize_sampling(n, g.opset, g.type(n.inputs[0]).shape, constant_operands(g, n));
}

// Output coordinate o reads input o with weight 1, everywhere along the dimension.
bool is_identity(const std::vector<std::vector<ops::ResizeTap>>& taps, int64_t in) {
  if (static_cast<int64_t>(taps.size()) != in) return false;
  for (size_t o = 0; o < taps.size(); ++o)
    if (taps[o].size() != 1 || taps[o][0].index != static_cast<int64_t>(o) ||
        taps[o][0].weight != 1.0)
      return false;
  return true;
}

size_t max_taps(const std::vector<std::vector<ops::ResizeTap>>& taps) {
  size_t k = 0;
  for (const std::vector<ops::ResizeTap>& t : taps) k = std::max(k, t.size());
  return k;
}

const char* mode_name(ops::ResizeMode m) {
  switch (m) {
    case ops::ResizeMode::kNearest:
      return "nearest";
    case ops::ResizeMode::kLinear:
      return "linear";
    case ops::ResizeMode::kCubic:
      return "cubic";
  }
  return "?";
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// A table as CUDA source, `per_line` entries per line.
template <typename Entry>
std::string table(const std::string& decl, const std::vector<std::vector<ops::ResizeTap>>& taps,
                  size_t per_line, Entry&& entry) {
  std::string s = fmt::format("__device__ const {}[{}] = {{", decl, taps.size());
  for (size_t o = 0; o < taps.size(); ++o)
    s += (o % per_line == 0 ? "\n    " : " ") + entry(taps[o]) + (o + 1 < taps.size() ? "," : "");
  return s + "};\n";
}

// "a * stride" for an offset sum ("a" alone for stride 1).
std::string term(const std::string& a, int64_t stride) {
  return stride == 1 ? a : fmt::format("{} * {}", a, stride);
}

std::string sum(const std::vector<std::string>& terms) {
  std::string s;
  for (const std::string& t : terms) s += (s.empty() ? "" : " + ") + t;
  return s.empty() ? "0" : s;
}

}  // namespace


std::optional<std::string> check_resize(const ir::Graph& g, const ir::Node& n) {
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i] != ir::kNoValue && !g.value(n.inputs[i]).is_constant())
      return n.label() + ": roi, scales and sizes must be constants";
  const ir::TensorType& x = g.type(n.inputs[0]);
  if (x.shape.empty() || numel(x.shape) == 0) return n.label() + ": expected a non-empty tensor";
  const ops::ResizeSampling s = sampling_of(g, n);
  if (s.mode != ops::ResizeMode::kNearest && !is_float(x.dtype))
    return n.label() + ": " + mode_name(s.mode) + " Resize of " + std::string(dtype_name(x.dtype)) +
           " has no GPU kernel (f32, f16, bf16)";
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (is_identity(s.taps[d], x.shape[d])) continue;
    if (s.out[d] > kMaxTableEntries)
      return fmt::format(
          "{}: output extent {} of dimension {} exceeds the {} entries of a "
          "GPU sampling table",
          n.label(), s.out[d], d, kMaxTableEntries);
    if (max_taps(s.taps[d]) > kMaxTaps)
      return fmt::format(
          "{}: dimension {} reads {} input elements per output element (antialias downsampling "
          "{} to {}); the GPU kernel reads at most {}",
          n.label(), d, max_taps(s.taps[d]), x.shape[d], s.out[d], kMaxTaps);
  }
  return std::nullopt;
}

OpKernelSource emit_resize(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& xt = g.type(n.inputs[0]);
  const Shape& in = xt.shape;
  const ops::ResizeSampling s = sampling_of(g, n);
  const Shape& out = s.out;
  TESSEL_ICHECK(out == g.type(n.outputs[0]).shape)
      << n.label() << ": sampling gives " << shape_str(out) << ", the graph says "
      << g.type(n.outputs[0]).str();
  const int rank = static_cast<int>(in.size());
  const std::string t = type_of(xt.dtype);
  const std::vector<int64_t> in_st = contiguous_strides(in), out_st = contiguous_strides(out);

  enum class Kind { kIdentity, kGather, kLerp, kTaps };
  std::vector<Kind> kind(rank);
  std::vector<size_t> width(rank);  // taps per coordinate, of a Taps table
  bool extrapolates = false, any_taps = false;
  for (int d = 0; d < rank; ++d) {
    width[d] = max_taps(s.taps[d]);
    kind[d] = is_identity(s.taps[d], in[d]) ? Kind::kIdentity
              : width[d] > 2                ? Kind::kTaps
              : width[d] == 2               ? Kind::kLerp
                                            : Kind::kGather;
    any_taps |= kind[d] == Kind::kTaps;
    for (const std::vector<ops::ResizeTap>& tap : s.taps[d]) extrapolates |= tap.empty();
  }
  // One way of summing per kernel: with a Taps table, Lerp dimensions become 2-tap tables.
  for (int d = 0; d < rank; ++d)
    if (any_taps && kind[d] == Kind::kLerp) kind[d] = Kind::kTaps;
  // Fragments of V along the innermost dimension, 16 bytes where its extent allows: of whole
  // elements where the Resize leaves it alone (NHWC's channels); else, without Taps tables, a
  // run of V consecutive outputs that share the outer coordinates and their taps, each with
  // its own innermost taps (NCHW's width: a segmentation net's output upsample), stored at once.
  const int last = rank - 1;
  const bool innermost_resized = kind[last] == Kind::kGather || kind[last] == Kind::kLerp;
  int vec = 1;
  if (kind[last] == Kind::kIdentity || innermost_resized) {
    vec = static_cast<int>(16 / dtype_size(xt.dtype));
    while (vec > 1 && (innermost_resized ? out[last] : in[last]) % vec != 0) vec /= 2;
  }
  const bool runs = innermost_resized && vec > 1;  // else fragments of whole elements, or V = 1

  std::string problem = fmt::format("// {} ({}): {} -> {}\n", n.op, mode_name(s.mode), xt.str(),
                                    g.type(n.outputs[0]).str());
  bool any_lerp = false;
  std::set<size_t> tap_widths;
  for (int d = 0; d < rank; ++d) {
    any_lerp |= kind[d] == Kind::kLerp;
    if (kind[d] == Kind::kTaps) tap_widths.insert(width[d]);
  }
  if (any_lerp) problem += "struct Lerp {\n  int i0, i1;\n  float w0, w1;\n};\n";
  for (size_t k : tap_widths)
    problem += fmt::format("struct Taps{} {{\n  int i[{}];\n  float w[{}];\n}};\n", k, k, k);
  // A run's innermost table is run-major: entry v * G + q is coordinate q * V + v (G runs), so
  // that for each element v of their runs consecutive threads read consecutive entries (in
  // coordinate order, a warp's reads of one v spread over V times as many cache lines).
  const int64_t run_count = out[last] / vec;
  std::vector<std::vector<std::vector<ops::ResizeTap>>> taps = s.taps;
  if (runs)
    for (int64_t v = 0; v < vec; ++v)
      for (int64_t q = 0; q < run_count; ++q)
        taps[last][static_cast<size_t>(v * run_count + q)] =
            s.taps[last][static_cast<size_t>(q * vec + v)];
  for (int d = 0; d < rank; ++d) {
    if (runs && d == last)
      problem +=
          fmt::format("// dimension {}: in run-major order ({} runs of {})\n", d, run_count, vec);
    if (kind[d] == Kind::kGather) {
      problem += fmt::format("// dimension {}: input index of each output coordinate\n", d);
      problem += table(fmt::format("int kIndex{}", d), taps[d], 8,
                       [](const std::vector<ops::ResizeTap>& tap) {
                         return fmt::format("{}", tap.empty() ? -1 : tap[0].index);
                       });
    } else if (kind[d] == Kind::kLerp) {
      problem += fmt::format(
          "// dimension {}: the two taps {{i0, i1, w0, w1}} of each output coordinate\n", d);
      problem += table(
          fmt::format("Lerp kLerp{}", d), taps[d], 4, [](const std::vector<ops::ResizeTap>& tap) {
            if (tap.empty()) return std::string("{-1, -1, 0.0f, 0.0f}");
            const ops::ResizeTap second =
                tap.size() > 1 ? tap[1] : ops::ResizeTap{tap[0].index, 0.0};
            return fmt::format("{{{}, {}, {}, {}}}", tap[0].index, second.index,
                               float_literal(tap[0].weight), float_literal(second.weight));
          });
    } else if (kind[d] == Kind::kTaps) {
      problem += fmt::format(
          "// dimension {}: the taps {{indices, weights}} of each output coordinate\n", d);
      const size_t k = width[d];
      problem += table(
          fmt::format("Taps{} kTaps{}", k, d), s.taps[d], k > 4 ? 1 : 2,
          [k](const std::vector<ops::ResizeTap>& tap) {
            std::string idx, w;
            for (size_t j = 0; j < k; ++j) {
              // Unused taps read the first one's element with weight 0.
              const bool used = j < tap.size();
              idx += fmt::format("{}{}", j ? ", " : "", tap.empty() ? -1 : tap[used ? j : 0].index);
              w += fmt::format("{}{}", j ? ", " : "", float_literal(used ? tap[j].weight : 0.0));
            }
            return fmt::format("{{{{{}}}, {{{}}}}}", idx, w);
          });
    }
  }

  std::string item;
  // Output coordinates, innermost first; the innermost advances by fragments of V. In 32 bits
  // where the items fit (a 64-bit division by a constant is several times the instructions).
  const int64_t items = numel(out) / vec;
  item += items < (int64_t{1} << 31) ? "    u32 r = static_cast<u32>(i);\n" : "    i64 r = i;\n";
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t extent = d == rank - 1 ? out[d] / vec : out[d];
    const std::string scale = d == rank - 1 && vec > 1 ? fmt::format(" * {}", vec) : "";
    if (runs && d == last) {  // the run q and its first coordinate
      item += d == 0 ? "    const i64 q = r;\n"
                     : fmt::format("    const i64 q = r % {}; r /= {};\n", extent, extent);
      item += fmt::format("    const i64 o{} = q * {};\n", d, vec);
      continue;
    }
    if (d == 0)
      item += fmt::format("    const i64 o0 = r{};\n", scale);
    else if (extent == 1)
      item += fmt::format("    const i64 o{} = 0;\n", d);
    else
      item += fmt::format("    const i64 o{} = r % {}{}; r /= {};\n", d, extent, scale, extent);
  }
  std::vector<std::string> out_off, base, invalid;
  for (int d = 0; d < rank; ++d) {
    out_off.push_back(term(fmt::format("o{}", d), out_st[d]));
    if (runs && d == last) continue;  // per element of the run, below
    if (kind[d] == Kind::kIdentity) base.push_back(term(fmt::format("o{}", d), in_st[d]));
    if (kind[d] == Kind::kGather) {
      item += fmt::format("    const int t{} = kIndex{}[o{}];\n", d, d, d);
      base.push_back(term(fmt::format("i64(t{})", d), in_st[d]));
      invalid.push_back(fmt::format("t{} < 0", d));
    }
    if (kind[d] == Kind::kLerp) {
      item += fmt::format("    const Lerp t{} = kLerp{}[o{}];\n", d, d, d);
      invalid.push_back(fmt::format("t{}.i0 < 0", d));
    }
    if (kind[d] == Kind::kTaps) {
      item += fmt::format("    const Taps{}& t{} = kTaps{}[o{}];\n", width[d], d, d, d);
      invalid.push_back(fmt::format("t{}.i[0] < 0", d));
    }
  }
  item += fmt::format("    T* y = static_cast<T*>(p.out[0]) + ({});\n", sum(out_off));
  item += "    Frag<T, kVec> f;\n";
  if (extrapolates && !invalid.empty()) {
    std::string cond;
    for (const std::string& c : invalid) cond += (cond.empty() ? "" : " || ") + c;
    item += fmt::format("    if ({}) {{  // tf_crop_and_resize: outside the input\n", cond);
    item += fmt::format(
        "#pragma unroll\n      for (int v = 0; v < kVec; ++v) f.v[v] = convert<T>({});\n",
        float_literal(s.extrapolation));
    item += "      f.store(y);\n      return;\n    }\n";
  }
  item += fmt::format("    const T* x = static_cast<const T*>(p.in[0]) + ({});\n", sum(base));
  std::vector<int> lerp_dims, tap_dims;
  for (int d = 0; d < rank; ++d) {
    if (kind[d] == Kind::kLerp) lerp_dims.push_back(d);
    if (kind[d] == Kind::kTaps) tap_dims.push_back(d);
  }
  // The input offset and the weight of one corner of the Lerp dimensions' taps (bit k of
  // `corner`: the high tap of lerp_dims[k]); `entry(d)` names dimension d's table entry.
  auto corner_terms = [&](int corner, auto&& entry) {
    std::string off, weight;
    for (size_t k = 0; k < lerp_dims.size(); ++k) {
      const int d = lerp_dims[k];
      const bool hi = (corner >> k) & 1;
      const std::string t = entry(d);
      off += " + " + term(fmt::format("i64({}.{})", t, hi ? "i1" : "i0"), in_st[d]);
      weight += fmt::format("{}{}.{}", weight.empty() ? "" : " * ", t, hi ? "w1" : "w0");
    }
    return std::pair{off, weight};
  };
  auto table_entry = [](int d) { return fmt::format("t{}", d); };
  if (runs) {
    // A run of kVec outputs along the innermost dimension: its taps per element, the outer
    // dimensions' taps (and corners) shared.
    item += "#pragma unroll\n    for (int v = 0; v < kVec; ++v) {\n";
    if (kind[last] == Kind::kGather) {
      item += fmt::format("      const int tl = kIndex{}[v * {} + q];\n", last, run_count);
      if (extrapolates)
        item += fmt::format(
            "      if (tl < 0) {{\n        f.v[v] = convert<T>({});\n        continue;\n      }}\n",
            float_literal(s.extrapolation));
    } else {
      item += fmt::format("      const Lerp tl = kLerp{}[v * {} + q];\n", last, run_count);
      if (extrapolates)
        item += fmt::format(
            "      if (tl.i0 < 0) {{\n        f.v[v] = convert<T>({});\n        continue;\n      "
            "}}\n",
            float_literal(s.extrapolation));
    }
    if (lerp_dims.empty()) {
      // Nearest (or linear on whole coordinates only): copies, exact.
      item += fmt::format("      f.v[v] = x[{}];\n", term("i64(tl)", in_st[last]));
    } else {
      item += "      float acc = 0.0f;\n";
      for (int corner = 0; corner < (1 << lerp_dims.size()); ++corner) {
        const auto [off, weight] = corner_terms(
            corner, [&](int d) { return d == last ? std::string("tl") : table_entry(d); });
        item += fmt::format("      acc += {} * to_float(x[0{}]);\n", weight, off);
      }
      item += "      f.v[v] = from_float<T>(acc);\n";
    }
    item += "    }\n";
  } else if (!tap_dims.empty()) {
    // Nested loops over the taps of every Taps dimension, outermost dimension first.
    item += "    float acc[kVec] = {};\n";
    std::string indent = "    ", off, weight;
    for (int d : tap_dims) {
      item += fmt::format("{}#pragma unroll\n{}for (int a{} = 0; a{} < {}; ++a{}) {{\n", indent,
                          indent, d, d, width[d], d);
      indent += "  ";
      off += " + " + term(fmt::format("i64(t{}.i[a{}])", d, d), in_st[d]);
      weight += fmt::format("{}t{}.w[a{}]", weight.empty() ? "" : " * ", d, d);
    }
    item += fmt::format("{}Frag<T, kVec> s;\n{}s.load(x{});\n{}const float w = {};\n", indent,
                        indent, off, indent, weight);
    item += fmt::format("{}#pragma unroll\n", indent);
    item +=
        fmt::format("{}for (int v = 0; v < kVec; ++v) acc[v] += w * to_float(s.v[v]);\n", indent);
    for (size_t k = 0; k < tap_dims.size(); ++k) {
      indent.resize(indent.size() - 2);
      item += indent + "}\n";
    }
    item += "#pragma unroll\n    for (int v = 0; v < kVec; ++v) f.v[v] = from_float<T>(acc[v]);\n";
  } else if (lerp_dims.empty()) {
    // Nearest (or linear on whole coordinates only): a copy of whole elements, exact.
    item += "    f.load(x);\n";
  } else {
    item += "    float acc[kVec] = {};\n";
    for (int corner = 0; corner < (1 << lerp_dims.size()); ++corner) {
      const auto [off, weight] = corner_terms(corner, table_entry);
      item += fmt::format(
          "    {{\n      Frag<T, kVec> s;\n      s.load(x{});\n      const float w = {};\n", off,
          weight);
      item += "#pragma unroll\n";
      item += "      for (int v = 0; v < kVec; ++v) acc[v] += w * to_float(s.v[v]);\n    }\n";
    }
    item += "#pragma unroll\n    for (int v = 0; v < kVec; ++v) f.v[v] = from_float<T>(acc[v]);\n";
  }
  item += "    f.store(y);\n";

  problem += fmt::format(
      "struct Problem {{\n  using T = {};\n  static constexpr int kVec = {};\n"
      "  static constexpr i64 kItems = {};\n\n"
      "  __device__ __forceinline__ static void item(const OpParams& p, i64 i) {{\n{}  }}\n}};\n",
      t, vec, items, item);
  return make_source(n, "resize", "tessel_op_common.cuh", problem,
                     "tessel::for_each_item<Problem>(p);", (items + kThreads - 1) / kThreads,
                     kThreads);
}

}  // namespace tessel::kernels::cuda::op_detail
