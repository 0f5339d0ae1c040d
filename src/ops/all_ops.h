// Registration of every op family. Each family file in ops/ defines one function here.
#pragma once

#include "ir/op_registry.h"

namespace tessel::ops {

void register_elementwise_ops(ir::OpRegistry& r);   // unary, binary (broadcasting), activations
void register_tensor_ops(ir::OpRegistry& r);        // shape/data movement: reshape, slice, ...
void register_nn_ops(ir::OpRegistry& r);            // conv, gemm, matmul, pooling, norms
void register_quantized_ops(ir::OpRegistry& r);     // QDQ, QLinear*, *Integer
void register_reduce_ops(ir::OpRegistry& r);        // softmax, reductions

void register_all_ops(ir::OpRegistry& r);

}  // namespace tessel::ops
