// Registration of the op groups added beside the original families: elementwise math, logic
// and comparisons (elementwise_math.cc), value-generating tensor ops (tensor_generate.cc) and
// the remaining reductions (reduce_more.cc). Each is called at the end of its family's
// register function (register_elementwise_ops, register_tensor_ops, register_reduce_ops).
#pragma once

#include "ir/op_registry.h"

namespace tessel::ops {

// Unary math (Neg, Abs, Sqrt, Exp, Log, Reciprocal, Ceil, Floor, Round, Sign, Erf, Sin, Cos),
// Pow, Mod, the variadic Max/Min/Sum/Mean, comparisons, And/Or/Xor/Not and Where.
void register_elementwise_math_ops(ir::OpRegistry& r);
// Expand, Tile, ConstantOfShape, Range, Size, GatherElements and CumSum.
void register_tensor_generate_ops(ir::OpRegistry& r);
// ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare, ArgMax and ArgMin.
void register_reduce_more_ops(ir::OpRegistry& r);

}  // namespace tessel::ops
