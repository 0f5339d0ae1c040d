#include "ops/nn_matmul.h"

#include "core/error.h"
#include "ops/nn_gemm.h"

namespace tessel::ops {
namespace {

// Index of each output batch entry's matrix in an operand with batch dims `batch`, which
// broadcasts (right-aligned) to `out_batch`.
std::vector<int64_t> batch_index(const Shape& batch, const Shape& out_batch) {
  const size_t rank = out_batch.size(), lead = rank - batch.size();
  const std::vector<int64_t> strides = strides_of(batch);
  const int64_t count = numel(out_batch);
  std::vector<int64_t> index(static_cast<size_t>(count));
  std::vector<int64_t> coord(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = 0;
    for (size_t d = lead; d < rank; ++d)
      if (batch[d - lead] != 1) at += coord[d] * strides[d - lead];
    index[i] = at;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0 && ++coord[d] == out_batch[d]; --d)
      coord[d] = 0;
  }
  return index;
}

}  // namespace

MatMulPlan plan_matmul(const ir::Node& node, const Shape& a, const Shape& b, const char* a_name,
                       const char* b_name) {
  TESSEL_USER_CHECK(!a.empty() && !b.empty())
      << node.label() << ": inputs " << a_name << " " << shape_str(a) << " and " << b_name << " "
      << shape_str(b) << " must have rank >= 1";
  MatMulPlan p;
  p.a_shape = a.size() == 1 ? Shape{1, a[0]} : a;
  p.b_shape = b.size() == 1 ? Shape{b[0], 1} : b;
  const size_t ra = p.a_shape.size(), rb = p.b_shape.size();
  p.m = p.a_shape[ra - 2];
  p.k = p.a_shape[ra - 1];
  p.n = p.b_shape[rb - 1];
  TESSEL_USER_CHECK(p.b_shape[rb - 2] == p.k)
      << node.label() << ": " << a_name << " " << shape_str(a) << " and " << b_name << " "
      << shape_str(b) << " have different contraction dims (" << p.k << " vs " << p.b_shape[rb - 2]
      << ")";
  const Shape a_batch(p.a_shape.begin(), p.a_shape.end() - 2);
  const Shape b_batch(p.b_shape.begin(), p.b_shape.end() - 2);
  Shape out_batch = broadcast_shapes(a_batch, b_batch,
                                     node.label() + ": batch dims of " + a_name + " and " + b_name);
  p.a_index = batch_index(a_batch, out_batch);
  p.b_index = batch_index(b_batch, out_batch);
  p.out_shape = out_batch;
  if (a.size() > 1) p.out_shape.push_back(p.m);
  if (b.size() > 1) p.out_shape.push_back(p.n);
  return p;
}

template <typename T>
void run_matmul(const MatMulPlan& p, const T* a, const T* b, T* y) {
  const int64_t batches = static_cast<int64_t>(p.a_index.size());
  // When every output matrix multiplies the same b and consecutive a's (a Linear layer on a
  // batch of sequences), the batches stack into one taller gemm.
  bool stacked = true;
  for (int64_t i = 0; i < batches && stacked; ++i) stacked = p.a_index[i] == i && p.b_index[i] == 0;
  if (stacked) {
    gemm(batches * p.m, p.n, p.k, MatrixRef<T>::row_major(a, p.k), MatrixRef<T>::row_major(b, p.n),
         y, p.n, false);
    return;
  }
  for (int64_t i = 0; i < batches; ++i)
    gemm(p.m, p.n, p.k, MatrixRef<T>::row_major(a + p.a_index[i] * p.m * p.k, p.k),
         MatrixRef<T>::row_major(b + p.b_index[i] * p.k * p.n, p.n), y + i * p.m * p.n, p.n, false);
}

template void run_matmul<float>(const MatMulPlan&, const float*, const float*, float*);
template void run_matmul<double>(const MatMulPlan&, const double*, const double*, double*);
template void run_matmul<int64_t>(const MatMulPlan&, const int64_t*, const int64_t*, int64_t*);

}  // namespace tessel::ops
