// MatMul of two activations (kernels/tessel_op_matmul.cuh): numpy's batched product with the
// shapes and broadcasting of ops/nn_matmul.h's plan_matmul, on CUDA cores in fp32. (A MatMul
// with a constant B is a tessel.Gemm by then: convert-layout.)
#include <fmt/format.h>

#include <vector>

#include "kernels/cuda/op_emit.h"
#include "core/error.h"
#include "ops/nn_matmul.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

constexpr int kThreads = 256;

}  // namespace

std::optional<std::string> check_matmul(const ir::Graph& g, const ir::Node& n) {
  const DType t = g.type(n.inputs[0]).dtype;
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16)
    return n.label() + ": input dtype " + std::string(dtype_name(t)) +
           " has no GPU MatMul kernel (f32, f16, bf16; integer products are shape arithmetic)";
  return std::nullopt;
}

OpKernelSource emit_matmul(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& a = g.type(n.inputs[0]);
  const ir::TensorType& b = g.type(n.inputs[1]);
  const ops::MatMulPlan plan = ops::plan_matmul(n, a.shape, b.shape);
  // The broadcast batch dims, and each operand's element stride along them (0 where it is
  // broadcast), right-aligned as numpy aligns them.
  const size_t ra = plan.a_shape.size() - 2, rb = plan.b_shape.size() - 2;
  const size_t rank = std::max(ra, rb);
  std::vector<int64_t> extent, a_stride, b_stride;
  auto strides = [](const Shape& s, size_t batch_rank, int64_t matrix) {
    std::vector<int64_t> st(batch_rank);
    int64_t run = matrix;
    for (size_t d = batch_rank; d-- > 0;) {
      st[d] = run;
      run *= s[d];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides(plan.a_shape, ra, plan.m * plan.k);
  const std::vector<int64_t> sb = strides(plan.b_shape, rb, plan.k * plan.n);
  int64_t batch = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t da = d + ra >= rank ? plan.a_shape[d + ra - rank] : 1;
    const int64_t db = d + rb >= rank ? plan.b_shape[d + rb - rank] : 1;
    extent.push_back(std::max(da, db));
    a_stride.push_back(da == 1 ? 0 : sa[d + ra - rank]);
    b_stride.push_back(db == 1 ? 0 : sb[d + rb - rank]);
    batch *= extent.back();
  }
  const std::string problem = fmt::format(
      "// MatMul {} x {} -> {}\nstruct Problem {{\n  using T = {};\n"
      "  static constexpr i64 kBatch = {}, kM = {}, kN = {}, kK = {};\n  static constexpr int kBatchDims = {};\n"
      "  static constexpr i64 kBatchExtent[] = {{{}1}}, kAStride[] = {{{}0}}, kBStride[] = {{{}0}};\n}};\n",
      a.str(), b.str(), g.type(n.outputs[0]).str(), type_of(a.dtype), batch, plan.m, plan.n, plan.k, rank,
      i64_list(extent), i64_list(a_stride), i64_list(b_stride));
  const int64_t tiles = batch * ((plan.m + 31) / 32) * ((plan.n + 31) / 32);
  return make_source(n, "matmul", "tessel_op_matmul.cuh", problem, "tessel::BatchedMatMul<Problem>::run(p);", tiles,
                     kThreads);
}

}  // namespace tessel::kernels::cuda::op_detail
