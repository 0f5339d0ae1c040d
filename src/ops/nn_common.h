// Helpers shared by the reference kernels of the nn, quantized and reduce op families: input
// checks that raise UserErrors naming the node, the compute type of floating-point kernels,
// and the registration entry points of the op groups that live outside their family's file
// (nn.cc and quantized.cc call them).
#pragma once

#include <string>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::ops {

// Floating-point kernels compute f64 in double and f32, f16 and bf16 in float: 16-bit floats
// are widened on load and rounded once on store, as onnxruntime's CPU kernels do.
DType float_compute_dtype(DType t);
// `t` in its compute dtype (the same buffer when it already is).
Tensor to_compute_dtype(const Tensor& t);
// Writes a result computed in the compute dtype into an output allocated by the executor,
// rounding to the output's dtype.
void store_output(Tensor& out, const Tensor& result);

// UserErrors naming the node and the input (`what`, e.g. "X") unless input i ...
// ... is a floating-point tensor;
void require_float_input(const ir::InferContext& ctx, int i, const char* what);
// ... has the same dtype as input j;
void require_same_dtype(const ir::InferContext& ctx, int i, int j, const char* what_i,
                        const char* what_j);
// ... has rank at least `min_rank` (and at most `max_rank` when >= 0).
void require_rank(const ir::InferContext& ctx, int i, const char* what, int64_t min_rank,
                  int64_t max_rank = -1);

// Op groups of the nn family that live in files of their own (conv_ops.cc, pool_ops.cc,
// layer_norm_ops.cc).
void register_conv_ops(ir::OpRegistry& r);        // Conv, ConvTranspose
void register_pool_ops(ir::OpRegistry& r);        // MaxPool, AveragePool, Global{Average,Max}Pool, LRN
void register_layer_norm_ops(ir::OpRegistry& r);  // Layer-, Instance-, GroupNormalization
// The integer contractions of the quantized family (quant_contractions.cc).
void register_quant_contraction_ops(ir::OpRegistry& r);  // QLinearConv/MatMul, *Integer

}  // namespace tessel::ops
