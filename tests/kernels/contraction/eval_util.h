// Test oracles for index maps: run the loop nest they describe, directly and through the
// GEMM view match() derived, on deterministic data (in doubles, exact for these integers).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/contraction/contraction.h"

namespace tessel::contraction::testing {

// Deterministic small integers with period 211, longer than every test tensor, so an index
// error cannot land on an equal value by periodicity. gen.py-style Python producing the
// expected literals in the tests uses the same formula:
//   ((i * 37 + seed * 11) % 211) % 13 - 6
inline std::vector<double> test_data(const Shape& shape, int seed) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(((i * 37 + seed * 11) % 211) % 13 - 6);
  return v;
}

// Flat row-major address of x at iteration point `it`, or -1 where an index is out of
// bounds (a read of padding, which is zero).
inline int64_t address(const Access& x, const std::vector<int64_t>& it) {
  int64_t flat = 0;
  for (size_t d = 0; d < x.index.size(); ++d) {
    int64_t idx = x.index[d].offset;
    for (size_t j = 0; j < it.size(); ++j) idx += x.index[d].coeffs[j] * it[j];
    if (idx < 0 || idx >= x.shape[d]) return -1;
    flat = flat * x.shape[d] + idx;
  }
  return flat;
}

// C = sum over the loop nest of A * B, exactly as the maps say.
inline std::vector<double> evaluate_maps(const IndexMaps& maps, const std::vector<double>& a,
                                         const std::vector<double>& b) {
  int64_t c_size = 1;
  for (int64_t e : maps.c.shape) c_size *= e;
  std::vector<double> c(c_size, 0.0);
  std::vector<int64_t> it(maps.dims.size(), 0);
  for (const IterDim& d : maps.dims)
    if (d.extent == 0) return c;
  while (true) {
    int64_t ia = address(maps.a, it), ib = address(maps.b, it), ic = address(maps.c, it);
    EXPECT_GE(ic, 0) << "C index out of bounds";
    if (ia >= 0 && ib >= 0 && ic >= 0) c[ic] += a[ia] * b[ib];
    size_t j = 0;  // odometer, last dim fastest
    for (j = it.size(); j-- > 0;) {
      if (++it[j] < maps.dims[j].extent) break;
      it[j] = 0;
    }
    if (j == static_cast<size_t>(-1)) break;
  }
  return c;
}

// Sets the coordinates of `group` (outermost first) from a flat index into it.
inline void decompose(const Contraction& c, const std::vector<int>& group, int64_t flat,
                      std::vector<int64_t>& it) {
  for (size_t t = group.size(); t-- > 0;) {
    int64_t e = c.maps.dims[group[t]].extent;
    it[group[t]] = flat % e;
    flat /= e;
  }
}

// The stride of a plain operand's group: its innermost dim's element stride (0 if empty).
inline int64_t group_stride(const std::vector<int>& group, const std::vector<int64_t>& strides) {
  return group.empty() ? 0 : strides[group.back()];
}

// C[b, m, n] = sum_k A(b, m, k) * B(b, n, k) the way a generated kernel walks it: flat
// (b, m, n, k) decomposed into the groups' dims. `op_a`/`op_b` are the op's inputs in the op's
// order (the view swaps them if match() did). Where match() calls an operand plain, also
// checks that offset + batch*stride_b + row*stride_mn + k*stride_k is its address.
inline std::vector<double> evaluate_gemm_view(const Contraction& c, const std::vector<double>& op_a,
                                              const std::vector<double>& op_b) {
  const std::vector<double>& a = c.operands_swapped ? op_b : op_a;
  const std::vector<double>& b = c.operands_swapped ? op_a : op_b;
  const size_t nd = c.maps.dims.size();
  std::vector<int64_t> sa = element_strides(c.maps.a, nd), sb = element_strides(c.maps.b, nd);
  const int64_t oa = element_offset(c.maps.a), ob = element_offset(c.maps.b);
  int64_t c_size = 1;
  for (int64_t e : c.maps.c.shape) c_size *= e;
  std::vector<double> out(c_size, 0.0);
  std::vector<bool> written(c_size, false);
  std::vector<int64_t> it(nd, 0);
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    decompose(c, c.batch_dims, bi, it);
    for (int64_t mi = 0; mi < c.m; ++mi) {
      decompose(c, c.m_dims, mi, it);
      for (int64_t ni = 0; ni < c.n; ++ni) {
        decompose(c, c.n_dims, ni, it);
        double acc = 0;
        for (int64_t ki = 0; ki < c.k; ++ki) {
          decompose(c, c.k_dims, ki, it);
          int64_t ia = address(c.maps.a, it), ib = address(c.maps.b, it);
          if (!c.a_gather) {
            EXPECT_EQ(ia, oa + bi * group_stride(c.batch_dims, sa) +
                              mi * group_stride(c.m_dims, sa) + ki * group_stride(c.k_dims, sa));
          }
          if (!c.b_gather) {
            EXPECT_EQ(ib, ob + bi * group_stride(c.batch_dims, sb) +
                              ni * group_stride(c.n_dims, sb) + ki * group_stride(c.k_dims, sb));
          }
          if (ia >= 0 && ib >= 0) acc += a[ia] * b[ib];
        }
        int64_t ic = address(c.maps.c, it);
        EXPECT_GE(ic, 0);
        if (ic < 0) continue;
        EXPECT_FALSE(written[ic]) << "C element " << ic << " written twice";
        written[ic] = true;
        out[ic] = acc;
      }
    }
  }
  for (int64_t i = 0; i < c_size; ++i)
    EXPECT_TRUE(written[i]) << "C element " << i << " never written";
  return out;
}

}  // namespace tessel::contraction::testing
