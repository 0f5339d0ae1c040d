// The ConvTransposes that convert-layout's phase decomposition refuses: 2-D ones whose strides
// differ (a lifted 1-D one has strides [1, s]; ops/conv_transpose_phases.h), and 3-D ones (3-D
// UNets' upsampling; their 3-D conv goes on to lower-3d), become a stride-1 Conv over the
// input with zeros inserted between its pixels. In 2-D:
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
#include "ops/conv_geometry.h"
#include "ops/conv_transpose_phases.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;

class Lowerer : public NodeRewriter {
 public:
  using NodeRewriter::NodeRewriter;

 private:
  bool rewrites(const ir::Node& n) const override { return lowerable(n); }
  void rewrite(const ir::Node& n) override { lower(n); }

  // 2-D ones of unequal strides (equal ones are convert-layout's phases), and 3-D ones: their
  // conv then goes on to lower-3d.
  bool lowerable(const ir::Node& n) const {
    if (n.op != "ConvTranspose" || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
    const ir::TensorType& x = g_.type(n.inputs[0]);
    const ValueId w = n.inputs[1];
    const size_t rank = x.shape.size();
    if ((rank != 4 && rank != 5) || !is_float(x.dtype) || !g_.value(w).is_constant()) return false;
    if (g_.type(w).shape.size() != rank) return false;
    if (rank == 5) return true;
    const ops::ConvGeometry geo = ops::plan_conv_transpose(n, x.shape, g_.type(w).shape);
    return geo.strides[0] != geo.strides[1];
  }

  void lower(const ir::Node& n) {
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const ValueId b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    // Copies: adding values below may move the graph's value table.
    const ir::TensorType xt = g_.type(x);
    const Tensor w = *g_.value(n.inputs[1]).data;
    const Shape ys = g_.type(y).shape;
    const ops::ConvGeometry geo = ops::plan_conv_transpose(n, xt.shape, w.shape());
    const size_t r = xt.shape.size() - 2;  // spatial dims
    const int64_t batch = xt.shape[0], c = xt.shape[1];
    const Shape in(xt.shape.begin() + 2, xt.shape.end()), k(w.shape().begin() + 2, w.shape().end());
    const int64_t cig = w.shape()[0] / geo.group, cog = w.shape()[1];
    const std::string& name = n.name;
    const DType dt = xt.dtype;
    // Channels-last [N, s..., C], each spatial axis followed by a unit axis that the Pad
    // grows to the stride: the input's pixels at multiples of the strides, zeros between.
    std::vector<int64_t> to_last = {0}, to_first = {0, static_cast<int64_t>(r) + 1};
    Shape last = {batch}, cells = {batch}, grown = {batch}, zeroed_shape = {batch};
    std::vector<int64_t> zero_pads(2 * (2 * r + 2), 0);
    for (size_t d = 0; d < r; ++d) {
      to_last.push_back(static_cast<int64_t>(d) + 2);
      to_first.push_back(static_cast<int64_t>(d) + 1);
      last.push_back(in[d]);
      cells.insert(cells.end(), {in[d], 1});
      grown.insert(grown.end(), {in[d], geo.strides[d]});
      zeroed_shape.push_back(in[d] * geo.strides[d]);
      zero_pads[(2 * r + 2) + 2 + 2 * d] = geo.strides[d] - 1;  // the end of unit axis 2 + 2d
    }
    to_last.push_back(1);
    for (Shape* s : {&last, &cells, &grown, &zeroed_shape}) s->push_back(c);
    const ValueId channels_last =
        emit("Transpose", name + ".channels_last", {x}, dt, last, {{"perm", to_last}});
    const ValueId unit = emit("Reshape", name + ".cells", {channels_last, i64s(name + ".cells_shape", cells)},
                              dt, cells);
    const ValueId padded =
        emit("Pad", name + ".insert_zeros", {unit, i64s(name + ".zero_pads", zero_pads)}, dt, grown);
    ValueId zeroed = emit("Reshape", name + ".zeroed",
                          {padded, i64s(name + ".zeroed_shape", zeroed_shape)}, dt, zeroed_shape);
    // The conv's pads per axis (its input is the dilated x, (in - 1) * s + 1 long, followed
    // by s - 1 more zeros); a negative one crops instead.
    std::vector<int64_t> starts, ends, axes, pad_begin, pad_end;
    bool crop = false;
    for (size_t d = 0; d < r; ++d) {
      const int64_t s = geo.strides[d];
      const int64_t dk = (k[d] - 1) * geo.dilations[d] + 1, out = ys[2 + d];
      const int64_t dilated = (in[d] - 1) * s + 1;
      const int64_t before = dk - 1 - geo.pad_begin[d];
      const int64_t after = out + dk - 1 - before - dilated - (s - 1);  // past the extra zeros
      starts.push_back(std::max<int64_t>(0, -before));
      ends.push_back(in[d] * s + std::min<int64_t>(0, after));
      axes.push_back(static_cast<int64_t>(d) + 1);
      pad_begin.push_back(std::max<int64_t>(0, before));
      pad_end.push_back(std::max<int64_t>(0, after));
      crop |= starts.back() != 0 || ends.back() != in[d] * s;
    }
    if (crop) {
      Shape cropped = {batch};
      for (size_t d = 0; d < r; ++d) cropped.push_back(ends[d] - starts[d]);
      cropped.push_back(c);
      zeroed = emit("Slice", name + ".crop",
                    {zeroed, i64s(name + ".crop_starts", starts), i64s(name + ".crop_ends", ends),
                     i64s(name + ".crop_axes", axes)},
                    dt, cropped);
    }
    Shape first = {batch, c};
    const Shape zs = g_.type(zeroed).shape;
    for (size_t d = 0; d < r; ++d) first.push_back(zs[d + 1]);
    const ValueId channels_first =
        emit("Transpose", name + ".channels_first", {zeroed}, dt, first, {{"perm", to_first}});
    // W'[g*cog + o, i, taps flipped] = W[g*cig + i, o, taps].
    int64_t taps = 1;
    for (int64_t e : k) taps *= e;
    Shape wshape = {geo.group * cog, cig};
    wshape.insert(wshape.end(), k.begin(), k.end());
    Tensor flipped(w.dtype(), wshape);
    for (int64_t g = 0; g < geo.group; ++g)
      for (int64_t o = 0; o < cog; ++o)
        for (int64_t i = 0; i < cig; ++i)
          for (int64_t t = 0; t < taps; ++t)
            flipped.set_f64(((g * cog + o) * cig + i) * taps + (taps - 1 - t),
                            w.get_f64(((g * cig + i) * cog + o) * taps + t));
    std::vector<ValueId> ins = {channels_first,
                                constant(g_.value(n.inputs[1]).name + ".conv", std::move(flipped))};
    if (b != kNoValue) ins.push_back(b);
    std::vector<int64_t> pads = pad_begin;
    pads.insert(pads.end(), pad_end.begin(), pad_end.end());
    emit_as(n, "Conv", std::move(ins), y,
            {{"kernel_shape", std::vector<int64_t>(k.begin(), k.end())},
             {"dilations", geo.dilations},
             {"pads", pads},
             {"group", geo.group}});
  }
};

}  // namespace

ir::Graph lower_conv_transpose(ir::Graph g) { return Lowerer(std::move(g)).run(); }

}  // namespace tessel::passes
