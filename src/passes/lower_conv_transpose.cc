// The 2-D ConvTransposes that convert-layout's phase decomposition refuses because their
// strides differ (a lifted 1-D one has strides [1, s]; ops/conv_transpose_phases.h) become a
// stride-1 Conv over the input with zeros inserted between its pixels:
//
//   ConvTranspose(x [N, C, H, W], W [C, M/g, kh, kw]) with strides (sh, sw)
//     -> z = Reshape(Pad(Reshape(NHWC(x), [N, H, 1, W, 1, C]), zeros after the two 1s up to
//            sh and sw), [N, H*sh, W*sw, C])     x's pixel (h, w) at (h*sh, w*sw), else zeros
//        y = Conv(NCHW(Slice(z)), W' [M, C/g, kh, kw] flipped, pads from the ConvTranspose's)
//
// A ConvTranspose is the correlation of its dilated input with the flipped, transposed kernel:
// padded by dk - 1 - pad_begin before (dk = (k - 1) * d + 1) and by whatever makes the output
// extent after (output_padding, output_shape); a negative pad crops the zero-inserted input
// instead (the Slice). The conv multiplies the inserted zeros (sh * sw times the work of the
// phase decomposition), but it runs on Tensor Cores, and the Transposes to NHWC and back
// cancel against convert-layout's. Every piece has a GPU kernel.
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/conv_geometry.h"
#include "ops/conv_transpose_phases.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

class Lowerer {
 public:
  explicit Lowerer(ir::Graph g)
      : g_(std::move(g)), values_(UniqueNames::of_values(g_)), names_(UniqueNames::of_nodes(g_)) {}

  ir::Graph run() {
    bool changed = false;
    for (const ir::Node& n : std::vector<ir::Node>(g_.nodes)) {
      if (lowerable(n)) {
        lower(n);
        changed = true;
      } else {
        out_.push_back(n);
      }
    }
    if (!changed) return std::move(g_);
    g_.nodes = std::move(out_);
    ir::infer_types(g_, ir::OpRegistry::global());
    return std::move(g_);
  }

 private:
  bool lowerable(const ir::Node& n) const {
    if (n.op != "ConvTranspose" || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
    const ir::TensorType& x = g_.type(n.inputs[0]);
    const ValueId w = n.inputs[1];
    if (x.shape.size() != 4 || !is_float(x.dtype) || !g_.value(w).is_constant()) return false;
    const ops::ConvGeometry geo = ops::plan_conv_transpose(n, x.shape, g_.type(w).shape);
    return geo.strides[0] != geo.strides[1];
  }

  ValueId value(const std::string& base, DType dtype, Shape shape) {
    return g_.add_value(values_.fresh(base), {dtype, std::move(shape)});
  }
  ValueId i64s(const std::string& base, const std::vector<int64_t>& v) {
    return g_.add_constant(values_.fresh(base),
                           Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  ValueId emit(const std::string& op, const std::string& name, std::vector<ValueId> ins, DType dtype,
               Shape shape, ir::Attributes attrs = {}) {
    const ValueId y = value(name, dtype, std::move(shape));
    out_.push_back(ir::Node{op, names_.fresh(name), std::move(ins), {y}, std::move(attrs)});
    return y;
  }

  void lower(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    // Copies: adding values below may move the graph's value table.
    const ir::TensorType xt = g_.type(x);
    const Tensor w = *g_.value(n.inputs[1]).data;
    const Shape ys = g_.type(y).shape;
    const ops::ConvGeometry geo = ops::plan_conv_transpose(n, xt.shape, w.shape());
    const int64_t batch = xt.shape[0], c = xt.shape[1], h = xt.shape[2], wd = xt.shape[3];
    const int64_t cig = w.shape()[0] / geo.group, cog = w.shape()[1];
    const int64_t kh = w.shape()[2], kw = w.shape()[3];
    const int64_t sh = geo.strides[0], sw = geo.strides[1];
    const std::string& name = n.name;
    const DType dt = xt.dtype;
    // Zeros between the pixels, channels-last.
    const ValueId nhwc = emit("Transpose", name + ".nhwc", {x}, dt, {batch, h, wd, c},
                              {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
    const ValueId cells = emit("Reshape", name + ".cells", {nhwc, i64s(name + ".cells_shape", {batch, h, 1, wd, 1, c})},
                               dt, {batch, h, 1, wd, 1, c});
    const ValueId padded =
        emit("Pad", name + ".insert_zeros",
             {cells, i64s(name + ".zero_pads", {0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1, 0})}, dt,
             {batch, h, sh, wd, sw, c});
    ValueId zeroed = emit("Reshape", name + ".zeroed", {padded, i64s(name + ".zeroed_shape", {batch, h * sh, wd * sw, c})},
                          dt, {batch, h * sh, wd * sw, c});
    // The conv's pads per axis (its input is the dilated x, (in - 1) * s + 1 long, followed
    // by s - 1 more zeros); a negative one crops instead.
    std::vector<int64_t> starts, ends, pad_begin, pad_end;
    const int64_t in[2] = {h, wd}, stride[2] = {sh, sw}, k[2] = {kh, kw};
    for (size_t d = 0; d < 2; ++d) {
      const int64_t dk = (k[d] - 1) * geo.dilations[d] + 1, out = ys[2 + d];
      const int64_t dilated = (in[d] - 1) * stride[d] + 1;
      const int64_t before = dk - 1 - geo.pad_begin[d];
      const int64_t after = out + dk - 1 - before - dilated - (stride[d] - 1);  // past the extra zeros
      starts.push_back(std::max<int64_t>(0, -before));
      ends.push_back(in[d] * stride[d] + std::min<int64_t>(0, after));
      pad_begin.push_back(std::max<int64_t>(0, before));
      pad_end.push_back(std::max<int64_t>(0, after));
    }
    if (starts[0] != 0 || starts[1] != 0 || ends[0] != h * sh || ends[1] != wd * sw) {
      zeroed = emit("Slice", name + ".crop",
                    {zeroed, i64s(name + ".crop_starts", starts), i64s(name + ".crop_ends", ends),
                     i64s(name + ".crop_axes", {1, 2})},
                    dt, {batch, ends[0] - starts[0], ends[1] - starts[1], c});
    }
    const Shape zs = g_.type(zeroed).shape;
    const ValueId nchw = emit("Transpose", name + ".nchw", {zeroed}, dt, {batch, c, zs[1], zs[2]},
                              {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
    // W'[g*cog + o, i, a, b] = W[g*cig + i, o, kh-1-a, kw-1-b].
    Tensor flipped(w.dtype(), {geo.group * cog, cig, kh, kw});
    for (int64_t g = 0; g < geo.group; ++g)
      for (int64_t o = 0; o < cog; ++o)
        for (int64_t i = 0; i < cig; ++i)
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t bb = 0; bb < kw; ++bb)
              flipped.set_f64((((g * cog + o) * cig + i) * kh + a) * kw + bb,
                              w.get_f64((((g * cig + i) * cog + o) * kh + (kh - 1 - a)) * kw + (kw - 1 - bb)));
    std::vector<ValueId> ins = {nchw, g_.add_constant(values_.fresh(g_.value(n.inputs[1]).name + ".conv"),
                                                      std::move(flipped))};
    if (b != kNoValue) ins.push_back(b);
    out_.push_back(ir::Node{"Conv", name, std::move(ins), {y},
                            {{"kernel_shape", std::vector<int64_t>{kh, kw}},
                             {"dilations", std::vector<int64_t>{geo.dilations[0], geo.dilations[1]}},
                             {"pads", std::vector<int64_t>{pad_begin[0], pad_begin[1], pad_end[0], pad_end[1]}},
                             {"group", geo.group}}});
  }

  ir::Graph g_;
  UniqueNames values_, names_;
  std::vector<ir::Node> out_;
};

}  // namespace

ir::Graph lower_conv_transpose(ir::Graph g) { return Lowerer(std::move(g)).run(); }

}  // namespace tessel::passes
