// numpy-style broadcasting for the reference kernels: which element of each input feeds each
// output element. Binary arithmetic, PRelu and any other op that reads several inputs of
// broadcast-compatible shapes iterate with BroadcastRuns.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace tessel::ops {

// Walks an output shape in row-major order as "runs" along its innermost dimension. For each
// run it gives the flat offset of the first output element, the run length, and for every
// input the flat offset of its first element and its step along the run (1, or 0 where the
// input is broadcast along that dimension).
//
// Adjacent dimensions that every input treats alike are merged first, so that the runs are as
// long as possible: [N,C,H,W] + [1,C,1,1] becomes (N*C, H*W) with the bias at step 0, and two
// inputs of equal shape become a single run over all elements.
template <size_t N>
class BroadcastRuns {
 public:
  // Each of `ins` must broadcast to `out` (shape inference has checked it); the inputs are
  // right-aligned against `out` as numpy does.
  BroadcastRuns(const Shape& out, const std::array<const Shape*, N>& ins) {
    const size_t rank = out.size();
    // Strides of every input in the output's index space: 0 along broadcast dimensions.
    std::array<std::vector<int64_t>, N> strides;
    for (size_t k = 0; k < N; ++k) {
      const Shape& in = *ins[k];
      TESSEL_ICHECK(in.size() <= rank) << "broadcast input " << shape_str(in)
                                       << " has a higher rank than the output " << shape_str(out);
      strides[k].assign(rank, 0);
      int64_t stride = 1;
      for (size_t d = in.size(); d-- > 0;) {
        const size_t od = d + rank - in.size();
        TESSEL_ICHECK(in[d] == out[od] || in[d] == 1)
            << "shape " << shape_str(in) << " does not broadcast to " << shape_str(out);
        strides[k][od] = in[d] == 1 ? 0 : stride;
        stride *= in[d];
      }
    }
    for (size_t d = 0; d < rank; ++d) {
      if (out[d] == 1) continue;  // contributes nothing to any offset
      const bool merge = !dims_.empty() && [&] {
        for (size_t k = 0; k < N; ++k)
          if (strides_[k].back() != strides[k][d] * out[d]) return false;
        return true;
      }();
      if (merge) {
        dims_.back() *= out[d];
        for (size_t k = 0; k < N; ++k) strides_[k].back() = strides[k][d];
      } else {
        dims_.push_back(out[d]);
        for (size_t k = 0; k < N; ++k) strides_[k].push_back(strides[k][d]);
      }
    }
    numel_ = 1;
    for (int64_t d : out) numel_ *= d;
  }

  // Calls body(out_offset, count, in_offset, in_step) for each run, in output order;
  // in_offset and in_step are std::array<int64_t, N>.
  template <typename Body>
  void for_each(Body&& body) const {
    std::array<int64_t, N> offset{}, step{};
    if (numel_ == 0) return;
    if (dims_.empty()) {  // every extent is 1: a single element
      body(int64_t{0}, int64_t{1}, offset, step);
      return;
    }
    const size_t inner = dims_.size() - 1;
    const int64_t count = dims_[inner];
    for (size_t k = 0; k < N; ++k) step[k] = strides_[k][inner];
    std::vector<int64_t> index(inner, 0);  // odometer over the outer dimensions
    for (int64_t out = 0; out < numel_; out += count) {
      body(out, count, offset, step);
      for (size_t d = inner; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) offset[k] += strides_[k][d];
        if (++index[d] < dims_[d]) break;
        for (size_t k = 0; k < N; ++k) offset[k] -= strides_[k][d] * dims_[d];
        index[d] = 0;
      }
    }
  }

 private:
  std::vector<int64_t> dims_;                    // merged output extents, none equal to 1
  std::array<std::vector<int64_t>, N> strides_;  // per input, per merged dimension
  int64_t numel_ = 0;
};

}  // namespace tessel::ops
