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

// The two groups, one per file.
void register_tessel_contraction_ops(ir::OpRegistry& r);  // tessel.Conv, tessel.Gemm
void register_tessel_layout_ops(ir::OpRegistry& r);       // NHWC pools, DepthToSpace

}  // namespace tessel::ops
