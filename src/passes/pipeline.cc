#include "passes/pipeline.h"

#include "core/error.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "passes/passes.h"
#include "passes/plan_memory.h"

namespace tessel::passes {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> kPasses = {
      {"canonicalize", "bypass Identity/Dropout/no-op Cast; Clip bounds as inputs", canonicalize},
      {"fold-constants", "evaluate nodes whose inputs are all constant", fold_constants},
      {"fuse-norm-gelu",
       "decomposed LayerNorm / GELU / Mish / HardSwish / pixel-shuffle subgraphs -> "
       "LayerNormalization / Gelu / Mish / HardSwish / DepthToSpace / SpaceToDepth",
       fuse_norm_gelu},
      {"fold-batch-norm",
       "fold inference BatchNormalization into the preceding Conv or ConvTranspose",
       fold_batch_norm},
      {"lower-batch-norm",
       "BatchNormalization left unfolded -> per-channel scale and shift (Mul, Add)",
       lower_batch_norm},
      {"lift-1d", "1-D convs and pools over [N, C, L] -> 2-D over [N, C, 1, L]", lift_1d},
      {"lower-conv-transpose",
       "ConvTranspose of unequal strides or over 3-D data -> stride-1 Conv over the "
       "zero-inserted input",
       lower_conv_transpose},
      {"lower-3d", "3-D convs and pools over [N, C, D, H, W] -> 2-D ones over frames", lower_3d},
      {"convert-layout",
       "NHWC activations, OHWI / [N,K] weights, tessel.* ops; transposes only at the edges",
       convert_layout},
      {"fold-transposes", "compose chained Transposes; drop identity ones", fold_transposes},
      {"integer-readers",
       "a DequantizeLinear whose every reader can take its integers (a mean or a Mul, each "
       "quantized after; moves requantized to its grid) -> they read the int8 tensor "
       "(tessel.QLinearReduceMean, tessel.MulQuantizeLinear); moves into a contraction move "
       "the integers, the DequantizeLinear after them",
       integer_readers},
      {"fold-qdq",
       "QDQ convs (symmetric int8) -> int8 tessel.Conv with a dequantization scale; other "
       "DequantizeLinear of constants folded",
       fold_qdq},
      // Precision is a parameter of choose_precision; each precision that does something is
      // a pass name of its own, so that `tessel opt --passes=...` lists can select it. fp32
      // needs none: it is the model as given.
      {"choose-precision-fp16",
       "fp16 storage for activations and weights; fp32 biases, edges and QDQ regions",
       [](ir::Graph g) { return choose_precision(std::move(g), Precision::kFp16); }},
      {"widen-narrow-groups",
       "grouped tessel.Conv with < 8 output channels per group -> wider groups, block-diagonal "
       "weights (the packed-groups Tensor Core kernel's shape)",
       widen_narrow_groups},
      {"fuse",
       "fold epilogue, depth_to_space and edge-layout chains into tessel.Conv / tessel.Gemm", fuse},
      {"fuse-prologue",
       "per-channel scale/shift (+ ReLU) before a tessel.Conv -> the conv's A prologue; an int8 "
       "requantization before depthwise convs -> their 'requantize' prologue",
       fuse_prologue},
      {"fold-quantize-scales",
       "int8 epilogues: each quantize's 1/s moved into the multiplication before it (S, B, "
       "a dequantization or residual scale)",
       fold_quantize_scales},
      {"unit-quantize",
       "int8 epilogues: each saturated rounding's range scaled into [0, 1] by the "
       "multiplication before it, so that the kernels saturate in its FFMA",
       fold_unit_quantize},
      {"fuse-mul-quantize",
       "a float Mul whose product only a per-tensor QuantizeLinear reads -> one "
       "tessel.MulQuantizeLinear (a quantized squeeze-excite gate)",
       fuse_mul_quantize},
      {"depth-to-space-dcr",
       "convs storing depth_to_space CRD permute their weights to store DCR (contiguous vectors)",
       depth_to_space_dcr},
      {"dce", "remove nodes whose outputs reach no graph output", eliminate_dead_code},
      {"nest-prefix-concats",
       "a Concat starting with an earlier Concat's inputs reads that Concat (DenseNet's blocks)",
       nest_prefix_concats},
      {"split-wide-concats", "Concats of more than 8 inputs -> a tree of Concats",
       split_wide_concats},
      {"concat-into-slices",
       "contractions feeding a channel Concat store into its slices (Concat in_place flags)",
       concat_into_slices},
  };
  return kPasses;
}

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> gpu_pipeline(const Options& options) {
  // Layout before precision: ONNX's Conv and Gemm take the bias in X's dtype, tessel.Conv and
  // tessel.Gemm in fp32 too, so choose-precision can keep biases fp32 only once convert-layout
  // has made them tessel ops; and convert-layout needs no precision, since its channel
  // alignment (multiples of 8) suits fp16 and tf32 Tensor Core tiles alike. No second
  // fold-constants: convert-layout and choose-precision rewrite constants themselves rather
  // than leave Transposes or Casts of constants behind.
  std::vector<std::string> names = {
      "canonicalize", "fold-constants", "fuse-norm-gelu", "fold-batch-norm", "lower-batch-norm",
      "lift-1d",      "lower-conv-transpose", "lower-3d", "convert-layout", "fold-transposes",
      "integer-readers", "fold-qdq"};
  // Narrow groups are widened for the fp16 Tensor Core kernels only: in fp32 they would just
  // multiply zeros on CUDA cores.
  if (options.precision == Precision::kFp16)
    names.insert(names.end(), {"choose-precision-fp16", "widen-narrow-groups"});
  // Slices last: fuse has settled each contraction's epilogue and store, and dce has removed the
  // dead readers that would make a producer look shared.
  names.insert(names.end(),
               {"fuse", "fuse-prologue", "fold-quantize-scales", "unit-quantize", "fuse-mul-quantize",
                "depth-to-space-dcr", "dce", "nest-prefix-concats",
                "split-wide-concats", "concat-into-slices"});
  return names;
}

ir::Graph run_passes(ir::Graph g, const std::vector<std::string>& names,
                     const Options& options) {
  for (const std::string& name : names) {
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string known;
      for (const PassInfo& q : all_passes()) known += (known.empty() ? "" : ", ") + q.name;
      TESSEL_USER_ERROR() << "unknown pass '" << name << "' (known: " << known << ")";
    }
    g = p->run(std::move(g));
    ir::verify(g, ir::OpRegistry::global());
    if (options.print_after_all && options.log) {
      *options.log << "// ----- IR after " << name << " -----\n" << ir::print_graph(g) << "\n";
    }
  }
  return g;
}

}  // namespace tessel::passes
