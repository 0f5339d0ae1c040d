// Every graph pass: one exported function each, defined in a file of its own name.
// A pass takes the graph by value and returns the rewritten graph; passes keep ONNX
// semantics, so the CPU reference executor runs the graph before and after any pass (the
// tests compare both).
#pragma once

#include "ir/graph.h"
#include "passes/options.h"

namespace tessel::passes {

// Removes nodes whose outputs reach no graph output, and values nobody uses.
ir::Graph eliminate_dead_code(ir::Graph g);

// Local clean-ups that make later patterns simpler: Identity and inference Dropout are
// bypassed, Cast to the same dtype is bypassed, Clip's opset-6 attribute form
// (min/max attributes) becomes the input form, and a Gather of constant indices that pick one
// position or a run of consecutive ones becomes a Slice (plus a Reshape for a scalar index).
ir::Graph canonicalize(ir::Graph g);

// Evaluates every node whose inputs are all constants with the reference kernels and turns
// its outputs into constants (up to 2^26 elements per output).
ir::Graph fold_constants(ir::Graph g);

// Folds an inference BatchNormalization into the Conv or ConvTranspose that feeds it (when its
// output has no other reader): W' = W * s[co], b' = (b - mean) * s + beta,
// s = gamma / sqrt(var + eps).
ir::Graph fold_batch_norm(ir::Graph g);

// Lowers each inference BatchNormalization that fold-batch-norm left (after a Concat, a pool,
// an activation) to Mul(x, s) + Add(., t) with per-channel constants [C, 1, ..., 1]:
// s = gamma / sqrt(var + eps), t = beta - mean * s. Training-mode or non-constant ones stay.
ir::Graph lower_batch_norm(ir::Graph g);

// Lifts 1-D convs and pools over [N, C, L] (audio and time-series CNNs) to their 2-D forms over
// [N, C, 1, L], and cancels the Squeeze -> per-element ops -> Unsqueeze between lifted layers
// (lift_1d.cc), so convert-layout and the GPU kernels take them.
ir::Graph lift_1d(ir::Graph g);

// Lowers the 3-D CNN ops over [N, C, D, H, W] (lower_3d.cc): Conv with constant weights to a
// 2-D Conv over the output frames [N*OD, kd*C, H, W] whose channels stack the kd input frames
// each reads (grouped: one 2-D Conv per depth tap, summed); MaxPool / AveragePool to a 2-D pool
// over H, W and one over D (separable over a box); the global pools to their 2-D forms over
// [N, C, D*H, W]. Pads, Slices, Transposes and Reshapes around them.
ir::Graph lower_3d(ir::Graph g);

// A ConvTranspose with constant weights that convert-layout's phase decomposition cannot store
// (2-D of unequal strides; 3-D, for lower-3d after it; lower_conv_transpose.cc): a stride-1 Conv
// with the flipped, transposed kernel over the input with zeros inserted between its pixels.
ir::Graph lower_conv_transpose(ir::Graph g);

// Replaces the decomposed layer normalization and GELU that older exporters write with one
// LayerNormalization (over the last axis) or Gelu node each (fuse_norm_gelu.cc lists the exact
// forms): ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div, optionally times gamma plus
// beta; x * 0.5 * (1 + Erf(x / sqrt(2))) or its Tanh approximation; Mish as
// x * Tanh(Softplus(x)); HardSwish as x * relu6(x + 3) / 6 or x * HardSigmoid(x), and
// relu6(x + 3) / 6 alone as HardSigmoid; pixel shuffles as Reshape / Transpose / Reshape
// (DepthToSpace CRD or DCR, SpaceToDepth); in the operand orders exporters write. Only where
// every intermediate is read by the pattern alone.
ir::Graph fuse_norm_gelu(ir::Graph g);

// Puts tensors in the GPU kernels' layouts (convert_layout.cc): 4-D activations NHWC with
// Transposes only at the graph edges and where unavoidable (each interior one says why in its
// `layout_reason` attribute); Conv -> tessel.Conv with OHWI weights and explicit pads, input
// channels zero-padded to a multiple of 8; Gemm -> tessel.Gemm with [N, K] weights; pools and
// DepthToSpace -> their tessel NHWC forms; axes and per-channel constants of the other ops
// rewritten for NHWC.
ir::Graph convert_layout(ir::Graph g);

// The most inputs a Concat keeps (split_wide_concats): the GPU op kernels' parameter block
// takes 8 inputs (kernels/cuda/op_kernels.h, kOpKernelInputs; a compiler test keeps the two
// equal).
inline constexpr int kMaxConcatInputs = 8;

// Splits a Concat of more than kMaxConcatInputs inputs (DenseNet's growing feature lists) into
// a Concat of Concats of consecutive inputs, recursively (the same values in the same order).
ir::Graph split_wide_concats(ir::Graph g);

// Folds a Transpose of a Transpose into one with the composed permutation, and removes
// Transposes whose permutation is the identity (fold_transposes.cc): after convert-layout, a
// model's own permutes to and from channels-last (ConvNeXt's LayerNorm) meet the layout's
// Transposes and cancel.
ir::Graph fold_transposes(ir::Graph g);

// QDQ convolutions and dense layers -> int8 contractions (fold_qdq.cc): a tessel.Conv (or
// tessel.Gemm) reading DequantizeLinear(Xq int8, sx) and DequantizeLinear(Wq int8 constant, sw
// per tensor or per output channel), zero points 0, group 1, input channels (K) a multiple of
// 8, becomes tessel.Conv(Xq, Wq, B, -, S = sx * sw); the others say why in `int8_refusal`.
// Then every DequantizeLinear of a constant left is folded.
ir::Graph fold_qdq(ir::Graph g);

// The readers of a quantized tensor's DequantizeLinear read the int8 tensor itself where every
// one can: a mean quantized after it -> tessel.QLinearReduceMean, a Mul by a computed operand
// quantized after it -> tessel.MulQuantizeLinear of the integers, a shape-only op requantized
// to the same grid -> that op on the integers (integer_readers.cc). A quantized squeeze-excite
// block's features and a classifier's last features then stay int8.
ir::Graph integer_readers(ir::Graph g);

// Chooses storage precision (choose_precision.cc). kFp32 returns g unchanged. kFp16 stores
// float activations and weights as fp16 with Casts only after graph inputs and before graph
// outputs (which stay fp32); biases of tessel contractions and other operands that accept any
// float dtype stay fp32; QDQ / integer ops, ops without fp16 support, and the float tensors
// tied to them stay fp32.
ir::Graph choose_precision(ir::Graph g, Precision precision);

// Rewrites a grouped tessel.Conv with fewer than 8 output channels per group (and more than
// one input channel per group) into one with f times fewer groups and block-diagonal weights,
// f the smallest factor making the output channels per group a multiple of 8 that divides the
// group count (widen_narrow_groups.cc): the same function, in the shape of the packed-groups
// Tensor Core kernel.
ir::Graph widen_narrow_groups(ir::Graph g);

// Fuses single-consumer chains after tessel.Conv / tessel.Gemm into their epilogue (relu,
// leaky_relu, clip, sigmoid, hardswish, silu, gelu, residual add) and a following
// tessel.DepthToSpace into the conv's store (fuse.cc), also through a Reshape that keeps the
// channel dim (a Linear on a 4-D tensor); a per-channel constant Mul right after a contraction
// folds into its weights and bias. Other injective chains are left as ONNX
// ops for the lowering to group.
ir::Graph fuse(ir::Graph g);

// A per-channel affine chain (Mul / Add / Sub / Div by constants: an unfoldable
// BatchNormalization) and a ReLU before group-1 tessel.Convs become those convs' A prologue,
// applied as the kernel loads X (fuse_prologue.cc).
ir::Graph fuse_prologue(ir::Graph g);

// A Concat whose leading inputs are an earlier Concat's inputs reads that Concat instead
// (DenseNet's growing concatenations become a chain of two-input Concats;
// nest_prefix_concats.cc).
ir::Graph nest_prefix_concats(ir::Graph g);

// Each fused QuantizeLinear's 1/s moved into the multiplication before it: the int8
// dequantization scale and bias (constants scaled once), a DequantizeLinear's or a residual's
// scale; the quantize then divides by 1 (fold_quantize_scales.cc, ops::fold_quantize_scales).
ir::Graph fold_quantize_scales(ir::Graph g);

// Each saturated rounding of an int8 epilogue (a quantize or round with its integral clamps)
// made quantize_unit of a value the multiplication before it scales into [0, 1] (S and B, a
// DequantizeLinear's or a residual's scale): the kernels saturate in that FFMA instead of two
// clamps (fold_quantize_scales.cc, ops::fold_unit_quantize).
ir::Graph fold_unit_quantize(ir::Graph g);

// A float Mul whose product only a per-tensor QuantizeLinear reads -> one
// tessel.MulQuantizeLinear: a quantized squeeze-excite gate in one kernel, quantized by the
// scale's reciprocal as the int8 epilogues are (fuse_mul_quantize.cc).
ir::Graph fuse_mul_quantize(ir::Graph g);

// A conv storing depth_to_space CRD computes its channels in DCR order (weights and bias
// permuted at compile time) and stores DCR: contiguous channel vectors in the GPU epilogue.
ir::Graph depth_to_space_dcr(ir::Graph g);

// Marks every channel Concat input that can be stored in place: a value written by a tessel.Gemm
// or a group-1 tessel.Conv with the plain NHWC store and no residual operand (the GPU epilogue
// reads R at the store index, which a channel slice would stride), or by a Concat whose inputs
// are all in place (nested concats), read by this Concat alone and only once, concatenated
// along its last axis, neither it nor the Concat's output a graph output. Any `in_place`
// attribute found is recomputed, so running it again changes nothing.
// plan_memory (plan_memory.h) honours the flags.
ir::Graph concat_into_slices(ir::Graph g);

}  // namespace tessel::passes
