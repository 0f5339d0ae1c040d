// The tessel.* ops: the form of a graph that the GPU lowering consumes, produced by the passes
// convert-layout (NHWC activations, OHWI / [N, K] weights) and fuse (epilogues, store maps).
//
//   tessel.Conv, tessel.Gemm                 contractions with a fused epilogue
//                                            (tessel_contraction_ops.cc, tessel_epilogue.h)
//   tessel.MaxPool, tessel.AveragePool,      NHWC forms of ONNX's layout-sensitive ops
//   tessel.GlobalAveragePool,                (tessel_layout_ops.cc)
//   tessel.GlobalMaxPool, tessel.LRN,
//   tessel.InstanceNormalization,
//   tessel.DepthToSpace, tessel.SpaceToDepth
//
// Every one has a CPU reference kernel that reuses the ONNX op it generalises (transpose to
// NCHW, run the ONNX kernel from the registry, transpose back), so a graph keeps running on
// the CPU executor after every pass.
#pragma once

#include "ir/op_registry.h"

namespace tessel::ops {

void register_tessel_ops(ir::OpRegistry& r);

// Node inputs of tessel.Conv and tessel.Gemm, (X, W, B?, R?, S?, P?) (tessel_contraction_ops.cc):
// the passes that rewrite them and the lowering that reads them name them by these.
inline constexpr int kBiasInput = 2;
inline constexpr int kResidualInput = 3;
inline constexpr int kScaleInput = 4;     // the dequantization scale S (int8 X)
inline constexpr int kPrologueInput = 5;  // tessel.Conv's prologue P

// The two groups, one per file.
void register_tessel_contraction_ops(ir::OpRegistry& r);  // tessel.Conv, tessel.Gemm
void register_tessel_layout_ops(ir::OpRegistry& r);       // NHWC pools, DepthToSpace

}  // namespace tessel::ops
