// Lowering of the tessel contractions (tessel.Conv, tessel.Gemm; ops/tessel_ops.h) to what the
// contraction generator consumes: index maps (for match()) and the GPU epilogue. A pure function
// of the graph's types and the node's attributes, so it is tested without a GPU.
#pragma once

#include <vector>

#include "kernels/contraction/epilogue.h"
#include "kernels/contraction/index_map.h"
#include "ir/graph.h"
#include "ops/tessel_ops.h"

namespace tessel::compiler {

// Node inputs of the tessel contractions (ops/tessel_ops.h).
using ops::kBiasInput;
using ops::kPrologueInput;
using ops::kResidualInput;
using ops::kScaleInput;

struct ContractionSpec {
  contraction::IndexMaps maps;
  contraction::Epilogue epilogue;
  // extra_inputs[i] is the node input bound to KernelArgs::extra[i], the operand that epilogue
  // steps name by index: kScaleInput, kBiasInput (bound as an f32 vector, per
  // contraction/epilogue.h, even where the graph stores the bias in the activations' dtype) or
  // kResidualInput.
  std::vector<int> extra_inputs;
};

// True for the nodes contraction_of() translates: the ops whose facts name the contraction
// generator (tessel.Conv, any group, and tessel.Gemm).
bool is_contraction_op(const ir::Node& n);

// conv2d_nhwc_maps (conv2d_nchw_input_maps for input_layout = "nchw") / gemm_maps (layout from
// trans_a / trans_b; by default NT: A [M, K] x W [N, K]) from the node's operand types and attributes (strides, pads [t, l, b, r],
// dilations, group), C in the node's dtype (W's; f32 for int8), and the epilogue: for int8 a
// kScale step by S first (acc * S[n]), then a kBias step when B is given (the ops add it to the accumulator before every step), then the node's steps in
// order, add_residual reading R; the store map plain, NCHW, or depth_to_space (NHWC or NCHW)
// over the pre-store [N, OH, OW, Co]; out_dtype the output's dtype. A residual add with any
// other store, or with an out_dtype, is a UserError: the kernel reads R in the stored layout
// and dtype, the op in the pre-store ones. Requires inferred types; a malformed attribute is a
// UserError naming the node.
ContractionSpec contraction_of(const ir::Graph& g, const ir::Node& n);

}  // namespace tessel::compiler
