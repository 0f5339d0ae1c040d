// Lowers the 3-D CNN ops (video nets: Conv3d, MaxPool3d / AvgPool3d, the global pools over
// [N, C, D, H, W]) to 2-D ones over batches of frames, which convert-layout, fuse and the GPU
// kernels know. A 3-D conv is a 2-D conv over the output frames whose input channels are the
// kd input frames it reads, stacked:
//
//   Conv(x [N, C, D, H, W], W [Co, C, kd, kh, kw])
//     -> l = Transpose(x) channels-last                          [N, D, H, W, C]
//        p = Pad(l) along D (the depth pads); s_i = Slice(p, D: i*dd, step sd), i < kd
//        t = Concat(s_0 .. s_kd-1, channels)                     [N, OD, H, W, kd*C]
//        y = Conv(t viewed as frames [N*OD, H, W, kd*C], W' [Co, kd*C, kh, kw]) with the H, W
//            strides, pads and dilations
//        -> Transpose(y viewed as [N, OD, OH, OW, Co]) channels-first
//
// The frames go to the ONNX Conv through 4-D Transposes to NCHW and back, which cancel against
// convert-layout's (fold-transposes): the conv reads and writes channels-last frames. Between
// two lowered ops the channels-first Transpose of one and the channels-last one of the next
// cancel too (a ReLU between them moves out of the way: fold-transposes), so a chain of 3-D
// convs and pools runs channels-last throughout.
//
// W'[co, i*C + c] = W[co, c, i]. A grouped conv (each group's channels must stay together)
// runs one 2-D conv per depth tap instead, over s_i alone with W[:, :, i], summed by Adds.
// Pools are separable over a box, max and average alike (a window's count of valid elements
// is the product of its counts along D and along H, W): a 2-D pool over H, W on the frames
// [N*D, H, W, C], then one over D on the columns [N, D, OH*OW, C] with the kernel (kd, 1),
// both channels-last. The global pools reduce the channels-last [N, D*H, W, C]. Every step is an op
// with a GPU kernel (the Transposes and Reshapes are copies or views): the convs run on Tensor
// Cores.
#include <array>
#include <numeric>

#include "ops/conv_geometry.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

// [N, C, D, H, W] <-> [N, D, H, W, C], and the 4-D layout changes.
const std::vector<int64_t> kToChannelsLast = {0, 2, 3, 4, 1};
const std::vector<int64_t> kToChannelsFirst = {0, 4, 1, 2, 3};
const std::vector<int64_t> kNchwToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kNhwcToNchw = {0, 3, 1, 2};

class Lowerer : public NodeRewriter {
 public:
  using NodeRewriter::NodeRewriter;

 private:
  bool rewrites(const ir::Node& n) const override { return lowerable(n); }
  void rewrite(const ir::Node& n) override {
    if (n.op == "Conv")
      lower_conv(n);
    else if (n.op == "MaxPool" || n.op == "AveragePool")
      lower_pool(n);
    else
      lower_global_pool(n);
  }

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

  // x reshaped to `shape` (a view), as a new value; `into` writes an existing one.
  ValueId reshape(ValueId x, const Shape& shape, const std::string& name, ValueId into = kNoValue) {
    const ValueId y = into != kNoValue ? into : value(name, g_.type(x).dtype, shape);
    emit("Reshape", name, {x, i64s(name + ".shape", shape)}, y);
    return y;
  }
  ValueId transpose(ValueId x, const std::vector<int64_t>& perm, const std::string& name,
                    ValueId into = kNoValue) {
    const Shape& in = g_.type(x).shape;
    Shape out;
    for (int64_t a : perm) out.push_back(in[static_cast<size_t>(a)]);
    const ValueId y = into != kNoValue ? into : value(name, g_.type(x).dtype, out);
    emit("Transpose", name, {x}, y, {{"perm", perm}});
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
    // Channels-last first, [N, D, H, W, C] (so that it cancels against the channels-first
    // Transpose of a lowered op before this one); then the depth pads, and one strided depth
    // slice per tap.
    const ValueId last = transpose(x, kToChannelsLast, name + ".channels_last");
    ValueId padded = last;
    if (geo.pad_begin[0] != 0 || geo.pad_end[0] != 0) {
      padded = value(name + ".depth_padded", xt.dtype,
                     {batch, d + geo.pad_begin[0] + geo.pad_end[0], h, wd, c});
      emit("Pad", name + ".pad_depth",
           {last,
            i64s(name + ".depth_pads", {0, geo.pad_begin[0], 0, 0, 0, 0, geo.pad_end[0], 0, 0, 0})},
           padded);
    }
    const int64_t depth = g_.type(padded).shape[1];
    std::vector<ValueId> taps;
    for (int64_t i = 0; i < kd; ++i) {
      const int64_t start = i * dd;
      if (start == 0 && sd == 1 && od == depth) {
        taps.push_back(padded);
        continue;
      }
      taps.push_back(emit("Slice", name + ".tap" + std::to_string(i),
                          {padded, i64s(name + ".tap_start", {start}),
                           i64s(name + ".tap_end", {start + (od - 1) * sd + 1}),
                           i64s(name + ".tap_axis", {1}), i64s(name + ".tap_step", {sd})},
                          xt.dtype, {batch, od, h, wd, c}));
    }
    // Each 2-D conv reads frames [N*OD, channels, H, W] and writes [N*OD, Co, OH, OW].
    ir::Attributes attrs = {{"kernel_shape", std::vector<int64_t>{kh, kw}},
                            {"strides", std::vector<int64_t>{geo.strides[1], geo.strides[2]}},
                            {"dilations", std::vector<int64_t>{geo.dilations[1], geo.dilations[2]}},
                            {"pads", std::vector<int64_t>{geo.pad_begin[1], geo.pad_begin[2],
                                                          geo.pad_end[1], geo.pad_end[2]}},
                            {"group", geo.group}};
    // The frames [N*OD, H, W, C'] (a view of the channels-last [N, OD, H, W, C']), then as the
    // NCHW value the ONNX conv reads: convert-layout's NHWC Transpose of it and this one
    // cancel (fold-transposes), so the conv reads the channels-last frames as they are.
    auto frames = [&](ValueId v, const std::string& what) {
      const int64_t ch = g_.type(v).shape[4];
      const ValueId f = reshape(v, {batch * od, h, wd, ch}, name + "." + what + ".frames");
      return transpose(f, kNhwcToNchw, name + "." + what + ".frames_nchw");
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
      return constant(g_.value(n.inputs[1]).name + what, std::move(t));
    };
    const DType yt = g_.type(y).dtype;
    ValueId sum = kNoValue;
    if (geo.group == 1) {
      // One conv over the taps stacked along the channels.
      ValueId stacked = taps[0];
      if (kd > 1)
        stacked = emit("Concat", name + ".taps", taps, xt.dtype, {batch, od, h, wd, kd * c},
                       {{"axis", int64_t{4}}});
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
        sum = emit("Add", name + ".sum" + std::to_string(i), {sum, part}, yt,
                   {batch * od, co, oh, ow});
      }
    }
    // Likewise out: the conv's NHWC result (convert-layout's Transpose back to NCHW and this
    // one cancel), viewed as [N, OD, OH, OW, Co], then channels-first.
    const ValueId out_last = transpose(sum, kNchwToNhwc, name + ".frames_out_last");
    const ValueId back = reshape(out_last, {batch, od, oh, ow, co}, name + ".frames_out");
    transpose(back, kToChannelsFirst, name + ".channels_first", y);
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
    // Channels-last, like the convs: [N, D, H, W, C], each stage's 4-D Transposes to NCHW and
    // back cancelling against convert-layout's, so both pools run on NHWC data. A stage whose
    // window is one element with stride 1 and no pads is left out.
    auto identity = [&](size_t ax) {
      return kernel[ax] == 1 && a.strides[ax] == 1 && p[ax] == 0 && p[ax + 3] == 0;
    };
    const bool over_hw = !identity(1) || !identity(2), over_d = !identity(0);
    ValueId v = transpose(x, kToChannelsLast, name + ".channels_last");  // [N, D, H, W, C]
    if (over_hw || !over_d) {
      // Over H, W on the frames [N*D, H, W, C].
      const ValueId f = reshape(v, {batch * d, xs[3], xs[4], c}, name + ".frames");
      const ValueId in = transpose(f, kNhwcToNchw, name + ".frames_nchw");
      const ValueId out = value(name + ".hw", dt, {batch * d, c, oh, ow});
      ir::Attributes at = pool_attrs({1, 2}, {false, false});
      if (over_d)
        emit(n.op, name + ".hw", {in}, out, std::move(at));
      else
        emit_as(n, n.op, {in}, out, std::move(at));
      v = reshape(transpose(out, kNchwToNhwc, name + ".hw_nhwc"), {batch, d, oh, ow, c},
                  name + ".hw_frames");
    }
    if (over_d) {
      // Over D on the columns [N, D, OH*OW, C], the kernel (kd, 1).
      const ValueId f = reshape(v, {batch, d, oh * ow, c}, name + ".columns");
      const ValueId in = transpose(f, kNhwcToNchw, name + ".columns_nchw");
      const ValueId out = value(name + ".depth", dt, {batch, c, od, oh * ow});
      emit_as(n, n.op, {in}, out, pool_attrs({0, 0}, {false, true}));
      v = reshape(transpose(out, kNchwToNhwc, name + ".depth_nhwc"), {batch, od, oh, ow, c},
                  name + ".depth_frames");
    }
    transpose(v, kToChannelsFirst, name + ".channels_first", y);
  }

  void lower_global_pool(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const Shape xs = g_.type(x).shape;  // copies: adding values may move the value table
    // Over the frames' pixels channels-last, [N, D*H, W, C], like the convs and pools.
    const ValueId last = transpose(x, kToChannelsLast, n.name + ".channels_last");
    const ValueId v = reshape(last, {xs[0], xs[2] * xs[3], xs[4], xs[1]}, n.name + ".frames");
    const ValueId pooled = value(n.name + ".2d", g_.type(x).dtype, {xs[0], xs[1], 1, 1});
    emit_as(n, n.op, {transpose(v, kNhwcToNchw, n.name + ".frames_nchw")}, pooled, n.attrs);
    reshape(pooled, Shape(g_.type(y).shape), n.name + ".out", y);
  }
};

}  // namespace

ir::Graph lower_3d(ir::Graph g) { return Lowerer(std::move(g)).run(); }

}  // namespace tessel::passes
