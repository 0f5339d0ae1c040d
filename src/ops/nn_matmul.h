// numpy.matmul semantics shared by MatMul, MatMulInteger and QLinearMatMul: 1-D operands
// are promoted to matrices (and the promoted dim dropped from the result), leading batch dims
// broadcast, and every output matrix is one gemm.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"
#include "ir/graph.h"

namespace tessel::ops {

struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  Shape a_shape;    // a after promotion: [K] -> [1, K]
  Shape b_shape;    // b after promotion: [K] -> [K, 1]
  Shape out_shape;  // numpy's result shape
  // For each output matrix (row-major over the broadcast batch dims), the index of the a and
  // b matrices it multiplies (a's matrices are (M, K) blocks of its buffer, b's (K, N)).
  std::vector<int64_t> a_index;
  std::vector<int64_t> b_index;
};

// Shapes of inputs `a_name` and `b_name`; rank-0 operands, mismatched K or batch dims that do
// not broadcast are UserErrors naming the node.
MatMulPlan plan_matmul(const ir::Node& node, const Shape& a, const Shape& b,
                       const char* a_name = "A", const char* b_name = "B");

// y = a @ b per the plan (y overwritten). Instantiated for float, double and int64_t.
template <typename T>
void run_matmul(const MatMulPlan& p, const T* a, const T* b, T* y);

}  // namespace tessel::ops
