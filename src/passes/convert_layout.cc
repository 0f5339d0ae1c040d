// Puts every tensor in the layout the GPU kernels read: 4-D activations NHWC, conv weights
// OHWI, dense weights [N, K] (K contiguous), with Transposes only at the graph's edges and
// where no NHWC form exists.
//
// Layout propagates forward in one walk over the nodes. Every 4-D activation v of the input
// graph may have an NHWC twin; v's own id keeps the NCHW value and is materialised (a
// Transpose from the twin) only where something still reads NCHW: an op without an NHWC form
// or a graph output. Conv and Gemm always take their tessel form (a conv whose input is NCHW
// gets a Transpose in front: at a graph input this is the edge transpose), and so does a 2-D
// ConvTranspose with equal strides: it becomes the stride-1 tessel.Conv of its phases with a
// depth_to_space store (ops/conv_transpose_phases.h), plus a Slice where the pads cut rows or
// columns off the interleaved phases. Every other op
// follows its inputs: it becomes NHWC when one of its activations already is, by
//  - rewriting its attributes / constant operands: axes of Concat, Split, Slice, Pad, Resize,
//    Softmax, the Reduce* ops; per-channel constants broadcast against NCHW ([C,1,1], [1,C,1,1])
//    of the elementwise ops become NHWC broadcasts ([C]);
//  - or taking its tessel form: tessel.MaxPool, tessel.AveragePool, tessel.GlobalAveragePool,
//    tessel.GlobalMaxPool, tessel.DepthToSpace;
//  - or, for Flatten/Reshape, reading the NHWC data directly when the flat element order is
//    the same in both layouts (C == 1 or H == W == 1, the global-pool -> classifier case);
//  - QuantizeLinear / DequantizeLinear of QDQ models follow like elementwise ops (a per-channel
//    axis is remapped), so that a QDQ network is NHWC throughout as well.
// Where none applies (a Flatten of 7x7 maps, an op without NHWC form), a Transpose back to
// NCHW is inserted and carries the reason in its `layout_reason` attribute, which `tessel opt`
// prints: interior transposes cost a full pass over memory and must be explainable.
//
// Weights are transposed here, at compile time: no runtime op. Biases keep their dtype and
// shape. Tensor Core alignment: a conv (group 1) whose input channels Ci are not a multiple of
// 8 (the RGB first layer) gets weights zero-padded to the next multiple and a Pad of its input
// channels, placed right after the input's edge Transpose so that the lowering fuses both into
// one kernel. Output channels that are not a multiple of 8 (the super-resolution net's 3-channel
// tail) are left alone: the GPU kernels predicate the last partial tile along N.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/op_registry.h"
#include "ops/conv_geometry.h"
#include "ops/conv_transpose_phases.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_reference.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

constexpr int64_t kChannelAlignment = 8;  // 8 fp16 = 16 bytes: one ldmatrix / cp.async row
constexpr char kReasonAttr[] = "layout_reason";

// The NHWC position of NCHW axis a.
int64_t nhwc_axis(int64_t a) { return a == 0 ? 0 : a == 1 ? 3 : a - 1; }


std::vector<int64_t> mapped_axes(const ir::Node& n, const std::vector<int64_t>& axes) {
  std::vector<int64_t> r;
  for (int64_t a : axes) r.push_back(nhwc_axis(normalize_axis(a, 4, n.label())));
  return r;
}

// Per-axis operands of a 4-D op (Resize's scales / sizes, Pad's and Resize's begin/end lists)
// are permuted by gathering their elements: t'[j] = t[index[j]].
const std::vector<int64_t> kBeginEndToNhwc = {0, 2, 3, 1, 4, 6, 7, 5};

Tensor gather_elements(const Tensor& t, const std::vector<int64_t>& index) {
  Tensor r(t.dtype(), {static_cast<int64_t>(index.size())});
  const size_t e = dtype_size(t.dtype());
  for (size_t j = 0; j < index.size(); ++j)
    std::memcpy(r.raw() + j * e, t.raw() + static_cast<size_t>(index[j]) * e, e);
  return r;
}

// w with its last dim zero-padded to `to` entries.
Tensor pad_last_dim(const Tensor& w, int64_t to) {
  Shape s = w.shape();
  const int64_t from = s.back();
  s.back() = to;
  Tensor r(w.dtype(), s);
  const size_t esize = dtype_size(w.dtype());
  const int64_t rows = from == 0 ? 0 : w.numel() / from;
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(r.raw() + i * to * esize, w.raw() + i * from * esize, from * esize);
  return r;
}

class LayoutConverter {
 public:
  explicit LayoutConverter(ir::Graph g)
      : g_(std::move(g)),
        num_original_(g_.values.size()),
        value_names_(UniqueNames::of_values(g_)),
        node_names_(UniqueNames::of_nodes(g_)),
        nhwc_(num_original_, kNoValue),
        nchw_missing_(num_original_, 0) {}

  ir::Graph run() {
    uses_ = use_counts(g_);
    std::vector<ir::Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    find_matmul_biases(nodes);
    for (const ir::Node& n : nodes)
      if (n.op == "DequantizeLinear" && n.outputs.size() == 1) dequantized_[n.outputs[0]] = n;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::Node& n = nodes[i];
      if (absorbed_.count(i)) continue;  // a MatMul's bias Add, now the tessel.Gemm's bias
      std::string why = n.label() + " has no NHWC form";
      if (!convert(n, why)) keep(n, why);
    }
    for (ValueId v : g_.outputs) to_nchw(v, "");
    // The quantized weights' DequantizeLinear in OIHW / [K, N] that only the converted
    // contractions read: the OHWI / [N, K] copies replaced them.
    const std::vector<int> uses = use_counts(g_);
    std::vector<char> dead(g_.nodes.size(), 0);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& n = g_.nodes[i];
      dead[i] = n.op == "DequantizeLinear" && n.outputs.size() == 1 && uses[n.outputs[0]] == 0 &&
                is_const(n.inputs[0]);
    }
    erase_nodes(g_, dead);
    return std::move(g_);
  }

 private:
  // ---- value bookkeeping --------------------------------------------------------------------

  // A 4-D activation of the input graph: the values that have a layout.
  bool tracked(ValueId v) const {
    return v != kNoValue && static_cast<size_t>(v) < num_original_ && !g_.value(v).is_constant() &&
           g_.type(v).shape.size() == 4;
  }
  bool has_nhwc(ValueId v) const { return tracked(v) && nhwc_[v] != kNoValue; }

  ValueId add_value(const std::string& base, ir::TensorType type) {
    return g_.add_value(value_names_.fresh(base), std::move(type));
  }
  ValueId add_constant(const std::string& base, Tensor t) {
    return g_.add_constant(value_names_.fresh(base), std::move(t));
  }
  ValueId add_i64(const std::string& base, const std::vector<int64_t>& v) {
    return add_constant(base, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  void emit(std::string op, const std::string& name, std::vector<ValueId> ins,
            std::vector<ValueId> outs, ir::Attributes attrs = {}) {
    g_.add_node(std::move(op), node_names_.fresh(name), std::move(ins), std::move(outs),
                std::move(attrs));
  }

  // The NHWC twin of activation v, created by a Transpose on first use (with `reason`, where
  // given, for explain).
  ValueId to_nhwc(ValueId v, const std::string& reason = "") {
    TESSEL_ICHECK(tracked(v)) << "value " << g_.value(v).name << " has no layout";
    if (nhwc_[v] == kNoValue) {
      const ir::TensorType& t = g_.type(v);
      nhwc_[v] = add_value(g_.value(v).name + ".nhwc",
                           {t.dtype, ops::permute_shape(t.shape, ops::kNchwToNhwc)});
      ir::Attributes attrs = {{"perm", ops::kNchwToNhwc}};
      if (!reason.empty()) attrs[kReasonAttr] = reason;
      emit("Transpose", g_.value(v).name + ".to_nhwc", {v}, {nhwc_[v]}, std::move(attrs));
    }
    return nhwc_[v];
  }

  // Makes v's own id hold its NCHW value (a Transpose from the twin) if it does not yet.
  void to_nchw(ValueId v, const std::string& reason) {
    if (!tracked(v) || !nchw_missing_[v]) return;
    ir::Attributes attrs = {{"perm", ops::kNhwcToNchw}};
    if (!reason.empty()) attrs[kReasonAttr] = reason;
    emit("Transpose", g_.value(v).name + ".to_nchw", {nhwc_[v]}, {v}, std::move(attrs));
    nchw_missing_[v] = 0;
  }

  // A new NHWC value standing for output v of a converted node.
  ValueId nhwc_output(ValueId v) {
    TESSEL_ICHECK(tracked(v) && nhwc_[v] == kNoValue) << "output " << g_.value(v).name;
    const ir::TensorType& t = g_.type(v);
    nhwc_[v] = add_value(g_.value(v).name + ".nhwc",
                         {t.dtype, ops::permute_shape(t.shape, ops::kNchwToNhwc)});
    nchw_missing_[v] = 1;
    return nhwc_[v];
  }

  // Constant operand c of a broadcasting op whose output is 4-D NCHW, rewritten to broadcast
  // against NHWC: right-aligned to rank 4, permuted, leading 1s dropped ([1,C,1,1] -> [C]).
  ValueId nhwc_constant(ValueId c) {
    const Tensor& t = *g_.value(c).data;
    if (t.numel() == 1) return c;  // a scalar broadcasts the same in any layout
    auto [it, inserted] = nhwc_constants_.try_emplace(c, kNoValue);
    if (!inserted) return it->second;
    Shape s4(4 - t.shape().size(), 1);
    s4.insert(s4.end(), t.shape().begin(), t.shape().end());
    Tensor p = ops::permute(t.reshaped(s4), ops::kNchwToNhwc);
    Shape s = p.shape();
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), [](int64_t d) { return d != 1; }));
    it->second = add_constant(g_.value(c).name + ".nhwc", p.reshaped(s));
    return it->second;
  }

  // An op that stays NCHW: its activations are made NCHW for it.
  void keep(const ir::Node& n, const std::string& why) {
    for (ValueId v : n.inputs) to_nchw(v, why);
    g_.nodes.push_back(n);
  }

  // ---- conversions: each checks everything before it emits anything -----------------------

  bool convert(const ir::Node& n, std::string& why) {
    if (n.op == "Conv") return convert_conv(n, why);
    if (n.op == "ConvTranspose") return convert_conv_transpose(n, why);
    if (n.op == "Gemm") return convert_gemm(n);
    if (n.op == "MatMul") return convert_matmul(n);
    if (n.op == "Transpose" && convert_transpose(n)) return true;
    // How the op takes NHWC is one of its facts (ir/op_registry.h); the ops whose axes are
    // rewritten each have a converter of their own.
    const ir::OpFacts& facts = ir::OpRegistry::global().facts(n.op);
    // An op whose only GPU kernel is its tessel form's (the pools, DepthToSpace) takes that form
    // even on a channels-first activation: a Transpose into NHWC costs less than leaving the
    // op without a GPU kernel.
    if (facts.nhwc == ir::NhwcForm::kTesselForm && facts.gpu == ir::GpuKernel::kNone &&
        tracked(n.inputs[0]) && !has_nhwc(n.inputs[0]) && n.outputs.size() == 1) {
      to_nhwc(n.inputs[0], n.label() + " runs on the GPU in NHWC only");
      return convert_window(n, facts.tessel_form, why);
    }
    // Everything else follows its activations: NHWC only if one of them already is.
    if (std::none_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return has_nhwc(v); }))
      return false;
    switch (facts.nhwc) {
      case ir::NhwcForm::kNone: return false;
      case ir::NhwcForm::kTesselForm: return convert_window(n, facts.tessel_form, why);
      case ir::NhwcForm::kAgnostic: return convert_unary(n);
      case ir::NhwcForm::kBroadcast: return convert_binary(n, why);
      case ir::NhwcForm::kAxes: break;
    }
    if (n.op == "Concat") return convert_concat(n, why);
    if (n.op == "Split") return convert_split(n);
    if (n.op == "Slice") return convert_slice(n, why);
    if (n.op == "Pad") return convert_pad(n, why);
    if (n.op == "Resize") return convert_resize(n, why);
    if (n.op == "Softmax" || n.op == "LogSoftmax") return convert_softmax(n, why);
    if (n.op.rfind("Reduce", 0) == 0) return convert_reduce(n, why);
    if (n.op == "Flatten" || n.op == "Reshape") return convert_reshape(n, why);
    if (n.op == "QuantizeLinear" || n.op == "DequantizeLinear") return convert_quantize(n, why);
    TESSEL_ICHECK(false) << n.label() << ": the op facts say its axes convert to NHWC, but "
                         << "convert-layout has no converter for " << n.op;
    return false;
  }

  // A model's own permute whose output, in NHWC, is a value that exists already: a Linear's
  // channels-last result put back channels-first (ConvNeXt's permute(0, 3, 1, 2)) is its own
  // NHWC twin. Then the output's twin aliases it and no kernel runs; whatever reads the output
  // stays NHWC (its NCHW value is made only if something needs it). Other permutes are kept
  // (fold-transposes composes them with the layout's).
  bool convert_transpose(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    if (n.outputs.size() != 1 || !tracked(x) || !tracked(y)) return false;
    const std::vector<int64_t> perm = n.get_ints("perm");
    if (perm.size() != 4) return false;
    // y's twin is permute(y, kNchwToNhwc) = permute(source, composite), where the source is
    // x's twin (x = permute(twin, kNhwcToNchw)) or x itself.
    const bool from_twin = has_nhwc(x);
    for (size_t i = 0; i < 4; ++i) {
      const int64_t axis = perm[static_cast<size_t>(ops::kNchwToNhwc[i])];
      const int64_t source_axis = from_twin ? ops::kNhwcToNchw[static_cast<size_t>(axis)] : axis;
      if (source_axis != static_cast<int64_t>(i)) return false;
    }
    nhwc_[y] = from_twin ? nhwc_[x] : x;
    nchw_missing_[y] = 1;
    return true;
  }

  bool is_const(ValueId v) const { return v != kNoValue && g_.value(v).is_constant(); }
  ValueId input(const ir::Node& n, size_t i) const {
    return i < n.inputs.size() ? n.inputs[i] : kNoValue;
  }

  // The DequantizeLinear writing a QDQ model's conv weight w, which fold-constants left for
  // fold-qdq (fold_constants.cc): an integer constant per tensor or per output channel.
  const ir::Node* quantized_weight(ValueId w, size_t rank = 4) const {
    auto it = dequantized_.find(w);
    if (it == dequantized_.end()) return nullptr;
    const ir::Node& dq = it->second;
    const bool params_const =
        is_const(dq.inputs[1]) && (dq.inputs.size() < 3 || dq.inputs[2] == kNoValue || is_const(dq.inputs[2]));
    return is_const(dq.inputs[0]) && g_.type(dq.inputs[0]).shape.size() == rank && params_const ? &dq : nullptr;
  }

  // Conv -> tessel.Conv: NHWC input, OHWI weights, explicit pads, channels aligned. A
  // quantized weight DequantizeLinear(Wq) becomes DequantizeLinear(Wq in OHWI), axis 0 both.
  bool convert_conv(const ir::Node& n, std::string& why) {
    const ValueId x = n.inputs[0], w = n.inputs[1], b = input(n, 2);
    if (!tracked(x)) return false;  // 1-D / 3-D convs have no NHWC form
    const ir::Node* dq = quantized_weight(w);
    if (!is_const(w) && !dq) {
      why = n.label() + ": the weight is not a constant";
      return false;
    }
    const ValueId stored = dq ? dq->inputs[0] : w;
    const ops::ConvGeometry geo = ops::plan_conv(n, g_.type(x).shape, g_.type(w).shape);
    Tensor ohwi = ops::permute(*g_.value(stored).data, ops::kNchwToNhwc);
    ValueId in = to_nhwc(x);
    const int64_t ci = geo.in_channels;
    if (geo.group == 1 && ci % kChannelAlignment != 0) {
      const int64_t aligned = (ci + kChannelAlignment - 1) / kChannelAlignment * kChannelAlignment;
      ohwi = pad_last_dim(ohwi, aligned);
      in = padded_channels(in, aligned);
    }
    ir::Attributes attrs;
    auto any_not = [](const std::vector<int64_t>& v, int64_t d) {
      return std::any_of(v.begin(), v.end(), [d](int64_t e) { return e != d; });
    };
    if (any_not(geo.strides, 1)) attrs["strides"] = geo.strides;
    std::vector<int64_t> pads = geo.pad_begin;
    pads.insert(pads.end(), geo.pad_end.begin(), geo.pad_end.end());
    if (any_not(pads, 0)) attrs["pads"] = pads;
    if (any_not(geo.dilations, 1)) attrs["dilations"] = geo.dilations;
    if (geo.group != 1) attrs["group"] = geo.group;
    ValueId weight = add_constant(g_.value(stored).name + ".ohwi", std::move(ohwi));
    if (dq) weight = dequantized(*dq, weight, g_.value(w).name + ".ohwi", g_.type(w).dtype);
    std::vector<ValueId> ins = {in, weight};
    if (b != kNoValue) ins.push_back(b);
    g_.add_node("tessel.Conv", n.name, std::move(ins), {nhwc_output(n.outputs[0])},
                std::move(attrs));
    return true;
  }

  // ConvTranspose -> tessel.Conv over its phases (ops/conv_transpose_phases.h): the phase
  // weights OHWI, the bias once per phase, for stride > 1 the depth_to_space store (DCR, or CRD
  // for groups), and a Slice where the ConvTranspose's output is a crop of the interleaved
  // phases. Input channels are aligned as for a conv.
  bool convert_conv_transpose(const ir::Node& n, std::string& why) {
    const ValueId x = n.inputs[0], w = n.inputs[1], b = input(n, 2);
    if (std::optional<std::string> refusal = ops::conv_transpose_refusal(g_, n)) {
      why = n.label() + ": " + *refusal;
      return false;
    }
    if (!tracked(x)) return false;
    const ops::ConvGeometry geo = ops::plan_conv_transpose(n, g_.type(x).shape, g_.type(w).shape);
    const ops::PhaseConv p = ops::plan_phase_conv(geo);
    Tensor ohwi = ops::phase_conv_weights(*g_.value(w).data, p);
    ValueId in = to_nhwc(x);
    const int64_t ci = p.in_channels;
    if (p.group == 1 && ci % kChannelAlignment != 0) {
      const int64_t aligned = (ci + kChannelAlignment - 1) / kChannelAlignment * kChannelAlignment;
      ohwi = pad_last_dim(ohwi, aligned);
      in = padded_channels(in, aligned);
    }
    const int64_t s = p.block();
    ir::Attributes attrs;
    const std::vector<int64_t> pads = {p.h.pad_begin, p.w.pad_begin, p.h.pad_end, p.w.pad_end};
    if (std::any_of(pads.begin(), pads.end(), [](int64_t e) { return e != 0; }))
      attrs["pads"] = pads;
    if (p.h.dilation != 1 || p.w.dilation != 1)
      attrs["dilations"] = std::vector<int64_t>{p.h.dilation, p.w.dilation};
    if (p.group != 1) attrs["group"] = p.group;
    std::vector<ValueId> ins = {in, add_constant(g_.value(w).name + ".phases", std::move(ohwi))};
    if (b != kNoValue)
      ins.push_back(s == 1 ? b
                           : add_constant(g_.value(b).name + ".phases",
                                          ops::phase_conv_bias(*g_.value(b).data, p)));
    const ValueId y = nhwc_output(n.outputs[0]);
    const ir::TensorType yt = g_.type(y);
    const ValueId stored =
        p.crops() ? add_value(g_.value(n.outputs[0]).name + ".uncropped",
                              {yt.dtype,
                               {yt.shape[0], p.h.conv_out * s, p.w.conv_out * s, p.out_channels}})
                  : y;
    ir::Node& conv = g_.add_node("tessel.Conv", n.name, std::move(ins), {stored}, std::move(attrs));
    if (s > 1)
      ops::write_store(conv,
                       {.kind = ops::StoreMap::Kind::kDepthToSpace, .block = s, .dcr = p.dcr});
    if (p.crops()) {
      emit("Slice", n.name + ".crop",
           {stored, add_i64(n.name + ".crop_starts", {p.h.crop, p.w.crop}),
            add_i64(n.name + ".crop_ends", {p.h.crop + p.h.out, p.w.crop + p.w.out}),
            add_i64(n.name + ".crop_axes", {1, 2})},
           {y});
    }
    return true;
  }

  // x (NHWC) with its channels zero-padded to `aligned`; one Pad per value.
  ValueId padded_channels(ValueId x, int64_t aligned) {
    auto [it, inserted] = padded_.try_emplace(x, kNoValue);
    if (!inserted) return it->second;
    const ir::TensorType& t = g_.type(x);
    Shape s = t.shape;
    const int64_t extra = aligned - s[3];
    s[3] = aligned;
    it->second = add_value(g_.value(x).name + ".aligned", {t.dtype, s});
    emit("Pad", g_.value(x).name + ".align_channels",
         {x, add_i64(g_.value(x).name + ".channel_pads", {0, 0, 0, 0, 0, 0, 0, extra})},
         {it->second});
    return it->second;
  }

  // Gemm -> tessel.Gemm (Y = A W^T + b): weights [N, K], bias [N]. Layout-free, but the same
  // rewrite as the conv's: the dense weight in the kernel's layout, the bias left in its dtype.
  // alpha scales constant weights and beta a constant C at compile time; transA takes a
  // Transpose of A.
  bool convert_gemm(const ir::Node& n) {
    const ValueId a = n.inputs[0], bw = n.inputs[1], c = input(n, 2);
    const double alpha = n.get_float("alpha", 1.0), beta = n.get_float("beta", 1.0);
    const bool trans_a = n.get_int("transA", 0) != 0;
    const ir::Node* dq = quantized_weight(bw, 2);
    if ((!is_const(bw) && !dq) || g_.type(bw).shape.size() != 2) return false;
    if (alpha != 1.0 && dq) return false;  // the int8 weight keeps its own scale
    if (c != kNoValue && beta != 1.0 && !is_const(c)) return false;
    if (trans_a && g_.type(a).shape.size() != 2) return false;
    const bool trans_b = n.get_int("transB", 0) != 0;
    const int64_t out = g_.type(bw).shape[trans_b ? 0 : 1];
    ValueId bias = kNoValue;
    if (c != kNoValue) {
      // C broadcasts to [M, N]; as a bias it must be one value per column: [N] itself, or a
      // constant [1, N] or scalar made into one (times beta).
      const Shape& cs = g_.type(c).shape;
      if (cs == Shape{out} && beta == 1.0) {
        bias = c;
      } else if (is_const(c) && (cs == Shape{out} || cs == Shape{1, out} || numel(cs) == 1)) {
        const Tensor& t = *g_.value(c).data;
        Tensor v(t.dtype(), {out});
        for (int64_t i = 0; i < out; ++i) v.set_f64(i, beta * t.get_f64(numel(cs) == 1 ? 0 : i));
        bias = add_constant(g_.value(c).name + ".vector", std::move(v));
      } else {
        return false;
      }
    }
    // [N, K] weights (times alpha); a quantized one as DequantizeLinear(Wq [N, K]), axis 0.
    const ValueId stored = dq ? dq->inputs[0] : bw;
    ValueId w = stored;
    if (!trans_b || alpha != 1.0) {
      Tensor t = trans_b ? *g_.value(stored).data : ops::permute(*g_.value(stored).data, {1, 0});
      if (alpha != 1.0)
        for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, alpha * t.get_f64(i));
      w = add_constant(g_.value(stored).name + ".nk", std::move(t));
    }
    if (dq) w = dequantized(*dq, w, g_.value(bw).name + ".nk", g_.type(bw).dtype);
    ValueId rows = a;
    if (trans_a) {
      const ir::TensorType& at = g_.type(a);
      rows = add_value(g_.value(a).name + ".mk", {at.dtype, {at.shape[1], at.shape[0]}});
      emit("Transpose", g_.value(a).name + ".to_mk", {a}, {rows},
           {{"perm", std::vector<int64_t>{1, 0}}});
    }
    std::vector<ValueId> ins = {rows, w};
    if (bias != kNoValue) ins.push_back(bias);
    g_.add_node("tessel.Gemm", n.name, std::move(ins), n.outputs);
    return true;
  }

  // A copy of DequantizeLinear `dq` reading `weight` (its constant permuted so that the output
  // channels come first: a per-channel scale's axis is 0), as a new value of dtype t.
  ValueId dequantized(const ir::Node& dq, ValueId weight, const std::string& name, DType t) {
    ir::Node d = dq;
    d.inputs[0] = weight;
    if (numel(g_.type(dq.inputs[1]).shape) > 1) d.attrs["axis"] = int64_t{0};
    const ValueId out = add_value(name, {t, g_.type(weight).shape});
    d.outputs = {out};
    d.name = node_names_.fresh(dq.name + ".weight");
    g_.nodes.push_back(std::move(d));
    return out;
  }

  // A MatMul of activations A [..., K] (any rank >= 2) and constant weights B [K, N]: a dense
  // layer applied along the last axis (ConvNeXt's and the classifiers' Linear layers). It
  // becomes tessel.Gemm on A viewed as [M, K], M the product of the leading extents, with the
  // weights transposed to [N, K] at compile time, viewed back as [..., N]; the Reshapes are
  // views (no kernel). An Add of a constant [N] (or [1, ..., N]) right after, read by nothing
  // else, becomes the Gemm's bias (find_matmul_biases).
  bool convert_matmul(const ir::Node& n) {
    const ValueId a = n.inputs.at(0), bw = n.inputs.at(1);
    if (!is_const(bw) || g_.type(bw).shape.size() != 2 || !is_float(g_.type(a).dtype)) return false;
    const Shape as = g_.type(a).shape;
    if (as.size() < 2) return false;
    const int64_t k = as.back(), out = g_.type(bw).shape[1];
    if (g_.type(bw).shape[0] != k) return false;
    // MatMul contracts the last axis of the value in the model's own layout.
    to_nchw(a, n.label() + " contracts the last axis of the NCHW layout");
    const ValueId x = a;
    const ValueId w =
        add_constant(g_.value(bw).name + ".nk", ops::permute(*g_.value(bw).data, {1, 0}));
    std::vector<ValueId> ins = {x, w};
    ValueId y = n.outputs.at(0);
    if (auto it = matmul_bias_.find(n.outputs.at(0)); it != matmul_bias_.end()) {
      ins.push_back(it->second.bias);
      y = it->second.output;
    }
    const Shape ys = g_.type(y).shape;
    if (as.size() == 2) {
      g_.add_node("tessel.Gemm", n.name, std::move(ins), {y});
      return true;
    }
    const int64_t m = numel(as) / std::max<int64_t>(k, 1);
    const ValueId flat = add_value(g_.value(a).name + ".mk", {g_.type(a).dtype, {m, k}});
    g_.add_node("Reshape", node_names_.fresh(n.name + ".flatten"), {x, add_i64(n.name + ".mk", {m, k})},
                {flat});
    ins[0] = flat;
    const ValueId flat_y = add_value(g_.value(y).name + ".mn", {g_.type(y).dtype, {m, out}});
    g_.add_node("tessel.Gemm", n.name, std::move(ins), {flat_y});
    g_.add_node("Reshape", node_names_.fresh(n.name + ".unflatten"),
                {flat_y, add_i64(n.name + ".shape", ys)}, {y});
    return true;
  }

  // For each MatMul that convert_matmul will take, an Add of a constant bias right after it.
  struct MatmulBias {
    ValueId bias;    // the [N] constant
    ValueId output;  // the Add's output, which the MatMul's rewrite now produces
  };
  void find_matmul_biases(const std::vector<ir::Node>& nodes) {
    std::unordered_map<ValueId, std::vector<size_t>> readers;
    for (size_t i = 0; i < nodes.size(); ++i)
      for (ValueId v : nodes[i].inputs) readers[v].push_back(i);
    for (const ir::Node& n : nodes) {
      if (n.op != "MatMul" || n.inputs.size() != 2 || !is_const(n.inputs[1]) ||
          g_.type(n.inputs[1]).shape.size() != 2)
        continue;
      const ValueId y = n.outputs.at(0);
      const std::vector<size_t>& r = readers[y];
      if (r.size() != 1 || std::count(g_.outputs.begin(), g_.outputs.end(), y)) continue;
      const ir::Node& add = nodes[r[0]];
      if (add.op != "Add" || add.inputs.size() != 2) continue;
      const ValueId c = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
      if (!is_const(c) || add.inputs[0] == add.inputs[1]) continue;
      const int64_t out = g_.type(n.inputs[1]).shape[1];
      const Shape& cs = g_.type(c).shape;
      if (numel(cs) != out || (!cs.empty() && cs.back() != out)) continue;
      if (g_.type(add.outputs[0]).shape != g_.type(y).shape) continue;
      const Tensor& t = *g_.value(c).data;
      Tensor v(t.dtype(), {out});
      for (int64_t i = 0; i < out; ++i) v.set_f64(i, t.get_f64(i));
      matmul_bias_[y] = {add_constant(g_.value(c).name + ".vector", std::move(v)), add.outputs[0]};
      absorbed_.insert(r[0]);
    }
  }

  // MaxPool, AveragePool, GlobalAveragePool, DepthToSpace -> their tessel NHWC forms.
  // Pools and depth_to_space: their tessel.* form, the same attributes on NHWC data.
  bool convert_window(const ir::Node& n, const std::string& form, std::string& why) {
    if (n.outputs.size() != 1) {
      why = n.label() + ": the Indices output has no NHWC form";
      return false;
    }
    ir::Attributes attrs = n.attrs;
    attrs.erase("storage_order");  // only orders the Indices output
    // A pool's auto_pad (TensorFlow exports' SAME), resolved to the explicit pads the NHWC
    // kernels take.
    if ((n.op == "MaxPool" || n.op == "AveragePool") &&
        n.get_string("auto_pad", "NOTSET") != "NOTSET") {
      const Shape& x = g_.type(n.inputs[0]).shape;
      const ops::WindowPlan w =
          ops::plan_forward_window(n, ops::read_window_attrs(n, 2), {x[2], x[3]},
                                   n.get_ints("kernel_shape"), n.get_int("ceil_mode", 0) != 0);
      attrs.erase("auto_pad");
      attrs["pads"] =
          std::vector<int64_t>{w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]};
    }
    // Operands after X (InstanceNormalization's per-channel scale and B) are the same in either
    // layout.
    std::vector<ValueId> inputs = n.inputs;
    inputs[0] = to_nhwc(n.inputs[0]);
    g_.add_node(form, n.name, std::move(inputs), {nhwc_output(n.outputs[0])}, std::move(attrs));
    return true;
  }

  // Per-element ops: same node on the twin.
  bool convert_unary(const ir::Node& n) {
    if (n.outputs.size() != 1 || !tracked(n.inputs[0])) return false;
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  bool convert_binary(const ir::Node& n, std::string& why) {
    if (!tracked(n.outputs[0])) return false;
    for (ValueId v : n.inputs) {
      if (tracked(v) || is_const(v) || numel(g_.type(v).shape) == 1) continue;
      why = n.label() + ": operand " + g_.value(v).name + " " + g_.type(v).str() +
            " is an activation of rank < 4";
      return false;
    }
    ir::Node c = n;
    for (ValueId& v : c.inputs) v = tracked(v) ? to_nhwc(v) : is_const(v) ? nhwc_constant(v) : v;
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // QuantizeLinear / DequantizeLinear (QDQ models) act per element, with a scale and zero
  // point per tensor or per channel along `axis`, which is remapped.
  bool convert_quantize(const ir::Node& n, std::string& why) {
    if (n.outputs.size() != 1 || n.inputs.size() < 2 || !tracked(n.inputs[0])) return false;
    if (n.get_int("block_size", 0) != 0) {
      why = n.label() + ": blocked quantization has no NHWC form";
      return false;
    }
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    if (numel(g_.type(n.inputs[1]).shape) > 1)
      c.attrs["axis"] = mapped_axes(n, {n.get_int("axis", 1)})[0];
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  bool convert_concat(const ir::Node& n, std::string& why) {
    for (ValueId v : n.inputs) {
      if (tracked(v) || (is_const(v) && g_.type(v).shape.size() == 4)) continue;
      why = n.label() + ": operand " + g_.value(v).name + " is not 4-D";
      return false;
    }
    ir::Node c = n;
    for (ValueId& v : c.inputs)
      v = tracked(v) ? to_nhwc(v)
                     : add_constant(g_.value(v).name + ".nhwc",
                                    ops::permute(*g_.value(v).data, ops::kNchwToNhwc));
    c.attrs["axis"] = mapped_axes(n, {n.require_int("axis")})[0];
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  bool convert_split(const ir::Node& n) {
    if (!tracked(n.inputs[0])) return false;
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    c.attrs["axis"] = mapped_axes(n, {n.get_int("axis", 0)})[0];
    for (ValueId& v : c.outputs) v = nhwc_output(v);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // Slice(data, starts, ends, axes?, steps?): the axes input, made explicit, is remapped.
  bool convert_slice(const ir::Node& n, std::string& why) {
    const ValueId axes = input(n, 3);
    if (!tracked(n.inputs[0]) || n.inputs.size() < 3) return false;
    if (axes != kNoValue && !is_const(axes)) {
      why = n.label() + ": the axes input is not a constant";
      return false;
    }
    std::vector<int64_t> list;
    if (axes != kNoValue) {
      list = g_.value(axes).data->to_i64_vector();
    } else {
      const Shape& starts = g_.type(n.inputs[1]).shape;
      for (int64_t i = 0; i < (starts.empty() ? 1 : starts[0]); ++i) list.push_back(i);
    }
    ir::Node c = n;
    c.inputs.resize(std::max<size_t>(c.inputs.size(), 4), kNoValue);
    c.inputs[0] = to_nhwc(n.inputs[0]);
    c.inputs[3] = add_i64(n.name + ".axes", mapped_axes(n, list));
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // Pad(data, pads, constant_value?, axes?): remap the axes input if given, else the pads.
  bool convert_pad(const ir::Node& n, std::string& why) {
    const ValueId pads = input(n, 1), axes = input(n, 3);
    if (!tracked(n.inputs[0]) || pads == kNoValue) return false;
    if (!is_const(pads) || (axes != kNoValue && !is_const(axes))) {
      why = n.label() + ": pads / axes are not constants";
      return false;
    }
    const Tensor& p = *g_.value(pads).data;
    if (axes == kNoValue && p.numel() != 8) return false;  // malformed: Pad's check reports it
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    if (axes != kNoValue) {
      c.inputs[3] = add_i64(n.name + ".axes", mapped_axes(n, g_.value(axes).data->to_i64_vector()));
    } else {
      c.inputs[1] =
          add_constant(g_.value(pads).name + ".nhwc", gather_elements(p, kBeginEndToNhwc));
    }
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // Resize(X, roi?, scales?, sizes?) from opset 11: the `axes` attribute if present, else the
  // per-axis roi / scales / sizes (which must then be constants) are permuted.
  bool convert_resize(const ir::Node& n, std::string& why) {
    if (g_.opset < 11 || !tracked(n.inputs[0])) return false;
    // An upsample that writes a graph output and nothing else stays NCHW: the Transpose back
    // to ONNX's layout then moves its input instead of its output, which is larger by the
    // square of the scale (a segmentation net's 8x upsample to the image: 64x).
    if (tracked(n.outputs[0]) && upsamples_into_output(g_, n, uses_)) {
      why = n.label() +
            " upsamples into a graph output: it runs in NCHW, so that the transpose "
            "to NCHW moves its smaller input";
      return false;
    }
    ir::Node c = n;
    if (n.has_attr("axes")) {
      c.attrs["axes"] = mapped_axes(n, n.get_ints("axes"));
    } else {
      // roi (input 1): begins and ends, 8 values; scales, sizes: one value per axis. Empty
      // tensors stand for omitted inputs (opset 11).
      auto expected = [](size_t i) { return i == 1 ? 8 : 4; };
      for (size_t i = 1; i < 4; ++i) {
        const ValueId v = input(n, i);
        if (v == kNoValue || numel(g_.type(v).shape) == 0) continue;
        if (!is_const(v)) {
          why = n.label() + ": roi / scales / sizes are not constants";
          return false;
        }
        if (numel(g_.type(v).shape) != expected(i)) return false;  // Resize's check reports it
      }
      for (size_t i = 1; i < 4; ++i) {
        const ValueId v = input(n, i);
        if (v == kNoValue || numel(g_.type(v).shape) == 0) continue;
        c.inputs[i] = add_constant(
            g_.value(v).name + ".nhwc",
            gather_elements(*g_.value(v).data, i == 1 ? kBeginEndToNhwc : ops::kNchwToNhwc));
      }
    }
    c.inputs[0] = to_nhwc(n.inputs[0]);
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  bool convert_softmax(const ir::Node& n, std::string& why) {
    if (g_.opset < 13) {
      why = n.label() + ": before opset 13 the axis flattens the trailing NCHW dims";
      return false;
    }
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    c.attrs["axis"] = mapped_axes(n, {n.get_int("axis", -1)})[0];
    c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // The Reduce* ops: axes (attribute before opset 18, 13 for ReduceSum, input since) remapped.
  // Without keepdims the
  // output has no layout; it is the same tensor in both layouts only when the kept axes come
  // in the same order.
  bool convert_reduce(const ir::Node& n, std::string& why) {
    const bool axes_input = g_.opset >= (n.op == "ReduceSum" ? 13 : 18);
    const ValueId axes_v = input(n, 1);
    if (axes_input && axes_v != kNoValue && !is_const(axes_v)) {
      why = n.label() + ": the axes input is not a constant";
      return false;
    }
    const std::vector<int64_t> axes =
        axes_input
            ? (axes_v == kNoValue ? std::vector<int64_t>{} : g_.value(axes_v).data->to_i64_vector())
            : n.get_ints("axes");
    const bool keepdims = n.get_int("keepdims", 1) != 0;
    const bool identity = axes.empty() && n.get_int("noop_with_empty_axes", 0) != 0;
    const std::vector<int64_t> mapped = mapped_axes(n, axes);
    const bool has_layout = keepdims || identity;
    if (!has_layout && !axes.empty()) {
      std::vector<int64_t> kept_nchw, kept_nhwc;
      // Both lists name NCHW dims: in NCHW order, and in the order NHWC stores them.
      auto reduced = [&](int64_t nhwc) {
        return std::find(mapped.begin(), mapped.end(), nhwc) != mapped.end();
      };
      for (int64_t d = 0; d < 4; ++d) {
        if (!reduced(nhwc_axis(d))) kept_nchw.push_back(d);
        if (!reduced(d)) kept_nhwc.push_back(ops::kNchwToNhwc[d]);
      }
      if (kept_nchw != kept_nhwc) {
        why = n.label() + ": keepdims = 0 would leave the kept axes in NHWC order";
        return false;
      }
    }
    ir::Node c = n;
    c.inputs[0] = to_nhwc(n.inputs[0]);
    if (!axes.empty()) {
      if (axes_input) {
        c.inputs[1] = add_i64(n.name + ".axes", mapped);
      } else {
        c.attrs["axes"] = mapped;
      }
    }
    if (has_layout) c.outputs[0] = nhwc_output(n.outputs[0]);
    g_.nodes.push_back(std::move(c));
    return true;
  }

  // Flatten / Reshape of an NHWC value whose flat element order equals the NCHW one
  // (C == 1 or H == W == 1): the same op on the twin, with the output's shape made explicit.
  bool convert_reshape(const ir::Node& n, std::string& why) {
    const ValueId x = n.inputs[0];
    if (!tracked(x)) return false;
    const Shape& s = g_.type(x).shape;
    if (!(s[1] == 1 || (s[2] == 1 && s[3] == 1))) {
      why = n.label() + " mixes channels with " + std::to_string(s[2]) + "x" +
            std::to_string(s[3]) + " spatial dims: it reads NCHW order";
      return false;
    }
    ir::Node c = n;
    c.inputs[0] = to_nhwc(x);
    // Flatten splits the dims at `axis`: for axis 0, 1 and 4 the split of the NHWC dims has
    // the NCHW one's extents. Other splits, and Reshape (whose 0 entries copy input dims),
    // become a Reshape to the static output shape. A 4-D result is the NCHW tensor itself.
    bool same_split = false;
    if (n.op == "Flatten") {
      int64_t axis = n.get_int("axis", 1);
      if (axis < 0) axis += 4;
      same_split = axis == 0 || axis == 1 || axis == 4;
    }
    if (!same_split) {
      c.op = "Reshape";
      c.attrs.clear();
      c.inputs = {c.inputs[0], add_i64(n.name + ".shape", g_.type(n.outputs[0]).shape)};
    }
    g_.nodes.push_back(std::move(c));
    return true;
  }

  ir::Graph g_;
  const size_t num_original_;
  UniqueNames value_names_;
  UniqueNames node_names_;
  std::vector<ValueId> nhwc_;       // per original value: its NHWC twin, or kNoValue
  std::vector<char> nchw_missing_;  // per original value: only the twin holds the data
  std::vector<int> uses_;           // use_counts of the input graph
  std::unordered_map<ValueId, ir::Node> dequantized_;  // DequantizeLinear nodes by output
  std::unordered_map<ValueId, ValueId> nhwc_constants_;  // broadcast constants, rewritten
  std::unordered_map<ValueId, ValueId> padded_;          // NHWC value -> channel-aligned copy
  std::unordered_map<ValueId, MatmulBias> matmul_bias_;  // MatMul output -> its bias Add
  std::unordered_set<size_t> absorbed_;                  // node indices of those Adds
};

}  // namespace

ir::Graph convert_layout(ir::Graph g) { return LayoutConverter(std::move(g)).run(); }

}  // namespace tessel::passes
