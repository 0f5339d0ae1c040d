// The NHWC forms of ONNX's layout-sensitive ops that CNNs use, produced by convert-layout:
// tessel.MaxPool, tessel.AveragePool, tessel.GlobalAveragePool, tessel.GlobalMaxPool,
// tessel.LRN, tessel.InstanceNormalization, tessel.DepthToSpace and tessel.SpaceToDepth. Each
// has its ONNX op's attributes and semantics with X and Y in NHWC [N, H, W, C], and its
// reference kernel is the ONNX kernel between two transposes. (The pools compute in double
// and round once, as their ONNX kernels do; tessel.MaxPool has no Indices output.)
#include "core/error.h"
#include "ops/nn_common.h"
#include "ops/tessel_epilogue.h"
#include "ops/tessel_ops.h"
#include "ops/tessel_reference.h"

namespace tessel::ops {
namespace {

// `extra_inputs` operands after X (the normalizations' per-channel scale and B) pass to the
// stand-in as they are: they are per-channel vectors, the same in either layout. With
// `activations`, the op takes fuse's epilogue attributes (activation steps only, no residual or
// int8 step): the stand-in then runs in f64 and the steps follow before the one rounding, as
// the GPU kernels apply them to their fp32 result.
void add_nhwc_op(ir::OpRegistry& r, const char* name, const char* onnx_op, std::vector<std::string> allowed,
                 int extra_inputs = 0, bool activations = false) {
  auto make_stand_in = [onnx_op, extra_inputs](const ir::Node& node) {
    ir::Attributes attrs = node.attrs;
    for (const char* key : {"epilogue", "epilogue_alpha", "epilogue_beta"}) attrs.erase(key);
    return stand_in(node, onnx_op, std::move(attrs), 1 + extra_inputs);
  };
  if (activations)
    for (const char* key : {"epilogue", "epilogue_alpha", "epilogue_beta"}) allowed.push_back(key);
  r.add({.name = name,
         .min_inputs = 1 + extra_inputs,
         .max_inputs = 1 + extra_inputs,
         .infer =
             [allowed, make_stand_in](ir::InferContext& ctx) {
               const ir::Node& node = ctx.node();
               check_attributes(node, allowed);
               for (const EpilogueStep& s : read_epilogue(node))
                 TESSEL_USER_CHECK(s.kind != EpilogueKind::kAddResidual && s.kind != EpilogueKind::kMul &&
                                   s.kind != EpilogueKind::kQuantize && s.kind != EpilogueKind::kAddScaledResidual &&
                                   s.kind != EpilogueKind::kRound && s.kind != EpilogueKind::kQuantizeUnit)
                     << node.label() << ": epilogue step '" << epilogue_name(s.kind)
                     << "' (only activations follow a normalization)";
               require_rank(ctx, 0, "X", 4, 4);
               const ir::TensorType x{ctx.dtype(0), permute_shape(ctx.shape(0), kNhwcToNchw)};
               std::vector<ir::TensorType> rest;
               for (int i = 1; i < ctx.num_inputs(); ++i) rest.push_back({ctx.dtype(i), ctx.shape(i)});
               std::vector<const ir::TensorType*> types = {&x};
               for (const ir::TensorType& t : rest) types.push_back(&t);
               const ir::TensorType y = infer_stand_in(node, make_stand_in(node), types, ctx.opset())[0];
               ctx.set_output(0, y.dtype, permute_shape(y.shape, kNchwToNhwc));
             },
         .compute =
             [make_stand_in](ir::KernelContext& ctx) {
               const std::vector<EpilogueStep> steps = read_epilogue(ctx.node());
               // With steps, every input in f64 (exact), so that only the store rounds; without,
               // the inputs as they are.
               auto in = [&](int i) { return steps.empty() ? ctx.input(i) : ctx.input(i).cast(DType::kF64); };
               const Tensor x = permute(in(0), kNhwcToNchw);
               std::vector<Tensor> rest;
               for (int i = 1; i < ctx.num_inputs(); ++i) rest.push_back(in(i));
               std::vector<const Tensor*> inputs = {&x};
               for (const Tensor& t : rest) inputs.push_back(&t);
               Tensor y = run_stand_in(ctx.node(), make_stand_in(ctx.node()), inputs, ctx.opset())[0];
               for (int64_t i = 0; !steps.empty() && i < y.numel(); ++i) {
                 double v = y.get_f64(i);
                 for (const EpilogueStep& s : steps) v = apply_epilogue_step(s, v, 0.0);
                 y.set_f64(i, v);
               }
               store_output(ctx.output(0), permute(y, kNchwToNhwc));
             }});
}

}  // namespace

void register_tessel_layout_ops(ir::OpRegistry& r) {
  add_nhwc_op(r, "tessel.MaxPool", "MaxPool",
              {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"});
  add_nhwc_op(r, "tessel.AveragePool", "AveragePool",
              {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
               "strides"});
  add_nhwc_op(r, "tessel.GlobalAveragePool", "GlobalAveragePool", {});
  add_nhwc_op(r, "tessel.GlobalMaxPool", "GlobalMaxPool", {});
  add_nhwc_op(r, "tessel.LRN", "LRN", {"alpha", "beta", "bias", "size"});
  add_nhwc_op(r, "tessel.InstanceNormalization", "InstanceNormalization", {"epsilon"}, 2, true);
  add_nhwc_op(r, "tessel.GroupNormalization", "GroupNormalization", {"epsilon", "num_groups", "stash_type"}, 2,
              true);
  add_nhwc_op(r, "tessel.DepthToSpace", "DepthToSpace", {"blocksize", "mode"});
  add_nhwc_op(r, "tessel.SpaceToDepth", "SpaceToDepth", {"blocksize"});
}

}  // namespace tessel::ops
