// Lowers the 3-D CNN ops (video nets: Conv3d, MaxPool3d / AvgPool3d, the global pools over
// [N, C, D, H, W]) to 2-D ones over batches of frames, which convert-layout, fuse and the GPU
// kernels know. A 3-D conv is a 2-D conv over the output frames whose input channels are the
// kd input frames it reads, stacked:
//
//   Conv(x [N, C, D, H, W], W [Co, C, kd, kh, kw])
//     -> p = Pad(x) along D (the depth pads); s_i = Slice(p, D: i*dd, step sd), i < kd
//        t = Concat(s_0 .. s_kd-1, axis 1)                     [N, kd*C, OD, H, W]
//        f = Reshape(Transpose(t, [0, 2, 1, 3, 4]))            [N*OD, kd*C, H, W]
//        y = Conv(f, W' [Co, kd*C, kh, kw]) with the H, W strides / pads / dilations
//        -> Transpose(Reshape(y, [N, OD, Co, OH, OW]), [0, 2, 1, 3, 4])
//
// W'[co, i*C + c] = W[co, c, i]. A grouped conv (each group's channels must stay together)
// runs one 2-D conv per depth tap instead, over s_i alone with W[:, :, i], summed by Adds.
// Pools are separable over a box, max and average alike (a window's count of valid elements
// is the product of its counts along D and along H, W): a 2-D pool over H, W on the frames
// [N, C*D, H, W], then one over D on [N, C, D, OH*OW] with the kernel (kd, 1). The global
// pools reduce [N, C, D*H, W]. Every step is an op with a GPU kernel (the Transposes and
// Reshapes are copies or views): the convs run on Tensor Cores.
#include <array>
#include <numeric>

#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/conv_geometry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

const std::vector<int64_t> kSwapChannelsAndDepth = {0, 2, 1, 3, 4};

class Lowerer {
 public:
  explicit Lowerer(ir::Graph g)
      : g_(std::move(g)), values_(UniqueNames::of_values(g_)), names_(UniqueNames::of_nodes(g_)) {}

  ir::Graph run() {
    bool changed = false;
    for (const ir::Node& n : std::vector<ir::Node>(g_.nodes)) {
      if (!lowerable(n)) {
        out_.push_back(n);
        continue;
      }
      changed = true;
      if (n.op == "Conv") lower_conv(n);
      else if (n.op == "MaxPool" || n.op == "AveragePool") lower_pool(n);
      else lower_global_pool(n);
    }
    if (!changed) return std::move(g_);
    g_.nodes = std::move(out_);
    ir::infer_types(g_, ir::OpRegistry::global());
    return std::move(g_);
  }

 private:
  bool lowerable(const ir::Node& n) const {
    const bool op = n.op == "Conv" || n.op == "MaxPool" || n.op == "AveragePool" ||
                    n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
    if (!op || n.inputs.empty() || n.outputs.size() != 1) return false;
    const ir::TensorType& x = g_.type(n.inputs[0]);
    if (x.shape.size() != 5 || !is_float(x.dtype)) return false;
    if (n.op == "Conv") {
      const ValueId w = n.inputs.size() > 1 ? n.inputs[1] : kNoValue;
      return w != kNoValue && g_.value(w).is_constant() && g_.type(w).shape.size() == 5;
    }
    // A pool's auto_pad, like lift-1d's, is left to the op (it stays on the CPU path).
    return n.get_string("auto_pad", "NOTSET") == "NOTSET";
  }

  ValueId value(const std::string& base, DType dtype, Shape shape) {
    return g_.add_value(values_.fresh(base), {dtype, std::move(shape)});
  }
  ValueId i64s(const std::string& base, const std::vector<int64_t>& v) {
    return g_.add_constant(values_.fresh(base),
                           Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  void emit(const std::string& op, const std::string& name, std::vector<ValueId> ins,
            ValueId out, ir::Attributes attrs = {}) {
    out_.push_back(ir::Node{op, names_.fresh(name), std::move(ins), {out}, std::move(attrs)});
  }
  // The node that does the lowered op's work keeps its name (explain, profiles).
  void emit_as(const ir::Node& n, const std::string& op, std::vector<ValueId> ins, ValueId out,
               ir::Attributes attrs) {
    out_.push_back(ir::Node{op, n.name, std::move(ins), {out}, std::move(attrs)});
  }
  // x reshaped to `shape` (a view), as a new value; `into` writes an existing one.
  ValueId reshape(ValueId x, const Shape& shape, const std::string& name, ValueId into = kNoValue) {
    const ValueId y = into != kNoValue ? into : value(name, g_.type(x).dtype, shape);
    emit("Reshape", name, {x, i64s(name + ".shape", shape)}, y);
    return y;
  }
  ValueId transpose(ValueId x, const Shape& out_shape, const std::string& name,
                    ValueId into = kNoValue) {
    const ValueId y = into != kNoValue ? into : value(name, g_.type(x).dtype, out_shape);
    emit("Transpose", name, {x}, y, {{"perm", kSwapChannelsAndDepth}});
    return y;
  }

  void lower_conv(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    // Copies: adding values below may move the graph's value table.
    const ir::TensorType xt = g_.type(x);
    const Tensor w = *g_.value(n.inputs[1]).data;
    const ops::ConvGeometry geo = ops::plan_conv(n, xt.shape, w.shape());
    const int64_t batch = xt.shape[0], c = xt.shape[1], d = xt.shape[2], h = xt.shape[3],
                  wd = xt.shape[4];
    const int64_t co = w.shape()[0], cg = w.shape()[1], kd = w.shape()[2], kh = w.shape()[3],
                  kw = w.shape()[4];
    const int64_t od = geo.out_spatial[0], oh = geo.out_spatial[1], ow = geo.out_spatial[2];
    const int64_t sd = geo.strides[0], dd = geo.dilations[0];
    const std::string& name = n.name;
    // The depth pads, then one strided depth slice per tap.
    ValueId padded = x;
    if (geo.pad_begin[0] != 0 || geo.pad_end[0] != 0) {
      padded = value(name + ".depth_padded", xt.dtype,
                     {batch, c, d + geo.pad_begin[0] + geo.pad_end[0], h, wd});
      emit("Pad", name + ".pad_depth",
           {x, i64s(name + ".depth_pads", {0, 0, geo.pad_begin[0], 0, 0, 0, 0, geo.pad_end[0], 0, 0})},
           padded);
    }
    const int64_t depth = g_.type(padded).shape[2];
    std::vector<ValueId> taps;
    for (int64_t i = 0; i < kd; ++i) {
      const int64_t start = i * dd;
      if (start == 0 && sd == 1 && od == depth) {
        taps.push_back(padded);
        continue;
      }
      const ValueId s = value(name + ".tap" + std::to_string(i), xt.dtype, {batch, c, od, h, wd});
      emit("Slice", name + ".tap" + std::to_string(i),
           {padded, i64s(name + ".tap_start", {start}), i64s(name + ".tap_end", {start + (od - 1) * sd + 1}),
            i64s(name + ".tap_axis", {2}), i64s(name + ".tap_step", {sd})},
           s);
      taps.push_back(s);
    }
    // Each 2-D conv reads frames [N*OD, channels, H, W] and writes [N*OD, Co, OH, OW].
    ir::Attributes attrs = {{"kernel_shape", std::vector<int64_t>{kh, kw}},
                            {"strides", std::vector<int64_t>{geo.strides[1], geo.strides[2]}},
                            {"dilations", std::vector<int64_t>{geo.dilations[1], geo.dilations[2]}},
                            {"pads", std::vector<int64_t>{geo.pad_begin[1], geo.pad_begin[2],
                                                          geo.pad_end[1], geo.pad_end[2]}},
                            {"group", geo.group}};
    auto frames = [&](ValueId v, const std::string& what) {
      const int64_t ch = g_.type(v).shape[1];
      const ValueId t = transpose(v, {batch, od, ch, h, wd}, name + "." + what + ".frames_first");
      return reshape(t, {batch * od, ch, h, wd}, name + "." + what + ".frames");
    };
    auto tap_weight = [&](const std::vector<int64_t>& tap_list, const std::string& what) {
      // W'[co, j*cg + ci, :, :] = W[co, ci, tap_list[j], :, :].
      const int64_t k = static_cast<int64_t>(tap_list.size());
      Tensor t(w.dtype(), {co, k * cg, kh, kw});
      for (int64_t o = 0; o < co; ++o)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t r = 0; r < kh * kw; ++r)
              t.set_f64(((o * k + j) * cg + ci) * kh * kw + r,
                        w.get_f64(((o * cg + ci) * kd + tap_list[static_cast<size_t>(j)]) * kh * kw + r));
      return g_.add_constant(values_.fresh(g_.value(n.inputs[1]).name + what), std::move(t));
    };
    const DType yt = g_.type(y).dtype;
    ValueId sum = kNoValue;
    if (geo.group == 1) {
      // One conv over the taps stacked along the channels.
      ValueId stacked = taps[0];
      if (kd > 1) {
        stacked = value(name + ".taps", xt.dtype, {batch, kd * c, od, h, wd});
        emit("Concat", name + ".taps", taps, stacked, {{"axis", int64_t{1}}});
      }
      std::vector<int64_t> all(static_cast<size_t>(kd));
      std::iota(all.begin(), all.end(), 0);
      std::vector<ValueId> ins = {frames(stacked, "in"), tap_weight(all, ".2d")};
      if (b != kNoValue) ins.push_back(b);
      sum = value(name + ".2d", yt, {batch * od, co, oh, ow});
      emit_as(n, "Conv", std::move(ins), sum, attrs);
    } else {
      // One conv per tap, each group's channels together, summed.
      for (int64_t i = 0; i < kd; ++i) {
        const std::string tap = ".tap" + std::to_string(i);
        std::vector<ValueId> ins = {frames(taps[static_cast<size_t>(i)], tap.substr(1)),
                                    tap_weight({i}, tap)};
        if (b != kNoValue && i == 0) ins.push_back(b);
        const ValueId part = value(name + tap + ".2d", yt, {batch * od, co, oh, ow});
        emit("Conv", name + tap, std::move(ins), part, attrs);
        if (sum == kNoValue) {
          sum = part;
          continue;
        }
        const ValueId next = value(name + ".sum" + std::to_string(i), yt, {batch * od, co, oh, ow});
        emit("Add", name + ".sum" + std::to_string(i), {sum, part}, next);
        sum = next;
      }
    }
    const ValueId back = reshape(sum, {batch, od, co, oh, ow}, name + ".frames_out");
    transpose(back, Shape(g_.type(y).shape), name + ".channels_first", y);
  }

  void lower_pool(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const Shape xs = g_.type(x).shape;  // copies: adding values may move the value table
    const DType dt = g_.type(x).dtype;
    const std::vector<int64_t> kernel = n.get_ints("kernel_shape");
    const ops::WindowAttrs a = ops::read_window_attrs(n, 3);
    const std::vector<int64_t>& p = a.pads;
    const int64_t batch = xs[0], c = xs[1], d = xs[2];
    const Shape ys = g_.type(y).shape;
    const int64_t od = ys[2], oh = ys[3], ow = ys[4];
    // The attributes of a 2-D pool over two of the axes: (kernel, stride, dilation, pad begin,
    // pad end) of each; ceil_mode and count_include_pad as given.
    auto pool_attrs = [&](std::array<size_t, 2> axes, std::array<bool, 2> whole) {
      ir::Attributes at = n.attrs;
      std::vector<int64_t> k, s, dl, pads(4, 0);
      for (size_t j = 0; j < 2; ++j) {
        const size_t ax = axes[j];
        k.push_back(whole[j] ? 1 : kernel[ax]);
        s.push_back(whole[j] ? 1 : a.strides[ax]);
        dl.push_back(whole[j] ? 1 : a.dilations[ax]);
        pads[j] = whole[j] ? 0 : p[ax];
        pads[j + 2] = whole[j] ? 0 : p[ax + 3];
      }
      at["kernel_shape"] = k;
      at["strides"] = s;
      if (n.has_attr("dilations")) at["dilations"] = dl;  // AveragePool has none before opset 19
      at["pads"] = pads;
      return at;
    };
    const std::string& name = n.name;
    // Over H, W on the frames [N, C*D, H, W].
    const ValueId frames = reshape(x, {batch, c * d, xs[3], xs[4]}, name + ".frames");
    const ValueId hw = value(name + ".hw", dt, {batch, c * d, oh, ow});
    emit(n.op, name + ".hw", {frames}, hw, pool_attrs({1, 2}, {false, false}));
    // Over D on [N, C, D, OH*OW], the kernel (kd, 1).
    const ValueId columns = reshape(hw, {batch, c, d, oh * ow}, name + ".columns");
    const ValueId depth = value(name + ".depth", dt, {batch, c, od, oh * ow});
    emit_as(n, n.op, {columns}, depth, pool_attrs({0, 0}, {false, true}));
    reshape(depth, ys, name + ".out", y);
  }

  void lower_global_pool(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const Shape xs = g_.type(x).shape;
    const ValueId v = reshape(x, {xs[0], xs[1], xs[2] * xs[3], xs[4]}, n.name + ".frames");
    const ValueId pooled = value(n.name + ".2d", g_.type(x).dtype, {xs[0], xs[1], 1, 1});
    emit_as(n, n.op, {v}, pooled, n.attrs);
    reshape(pooled, Shape(g_.type(y).shape), n.name + ".out", y);
  }

  ir::Graph g_;
  UniqueNames values_, names_;
  std::vector<ir::Node> out_;
};

}  // namespace

ir::Graph lower_3d(ir::Graph g) { return Lowerer(std::move(g)).run(); }

}  // namespace tessel::passes
