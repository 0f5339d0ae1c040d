// widen-narrow-groups: a grouped tessel.Conv with fewer than 8 output channels per group
// (ResNeXt-50's first stage: 32 groups of 4 in and 4 out) becomes one with f times fewer,
// f times wider groups whose weights are block-diagonal: each new group is f old ones side by
// side, output channel co reading only the input channels of its old group, zeros elsewhere.
// The function is exactly the same (the zeros add nothing); the shape is the one the
// packed-groups Tensor Core kernel takes, which gives each mma n8 fragment one group
// (kernels/contraction/grouped.h: output channels per group a multiple of 8). The cost is f
// times the multiply-adds of the layer, on Tensor Cores instead of CUDA cores.
//
//   W'[co, r, s, j*cig + ci] = W[co, r, s, ci]  where j = (co / cog) % f, else 0
//
// f is the smallest factor that makes f*cog a multiple of 8 and divides the group count.
// Depthwise convs (one input channel per group) keep their own kernel and are left alone.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "passes/group_widening.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {

int64_t group_widening(int64_t groups, int64_t co, int64_t ci_per_group) {
  if (groups <= 1 || co % groups != 0 || ci_per_group < 2) return 1;
  const int64_t cog = co / groups;
  if (cog % 8 == 0) return 1;
  const int64_t f = 8 / std::gcd<int64_t>(cog, 8);
  return groups % f == 0 ? f : 1;
}

Tensor widen_group_weights(const Tensor& w, int64_t groups, int64_t f) {
  TESSEL_ICHECK(w.shape().size() == 4 && groups % f == 0 && w.dim(0) % groups == 0)
      << "widen_group_weights: " << shape_str(w.shape()) << ", " << groups << " groups by " << f;
  const int64_t co = w.dim(0), cig = w.dim(3), cog = co / groups, taps = w.dim(1) * w.dim(2);
  Tensor wide(w.dtype(), {co, w.dim(1), w.dim(2), f * cig});
  const size_t elem = dtype_size(w.dtype());
  for (int64_t o = 0; o < co; ++o) {
    const int64_t j = (o / cog) % f;
    for (int64_t t = 0; t < taps; ++t)
      std::copy_n(w.raw() + ((o * taps + t) * cig) * elem, cig * elem,
                  wide.raw() + ((o * taps + t) * f * cig + j * cig) * elem);
  }
  return wide;
}

ir::Graph widen_narrow_groups(ir::Graph g) {
  UniqueNames names = UniqueNames::of_values(g);
  bool changed = false;
  for (ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv" || n.inputs.size() < 2) continue;
    const int64_t groups = n.get_int("group", 1);
    const ir::Value& wv = g.value(n.inputs[1]);
    if (groups <= 1 || !wv.is_constant() || wv.data->shape().size() != 4) continue;
    const Tensor& w = *wv.data;  // OHWI: [Co, R, S, cig]
    const int64_t f = group_widening(groups, w.dim(0), w.dim(3));
    if (f == 1) continue;
    Tensor wide = widen_group_weights(w, groups, f);
    n.inputs[1] = g.add_constant(names.fresh(wv.name + ".widened"), std::move(wide));
    n.attrs["group"] = groups / f;
    changed = true;
  }
  if (changed) g.compact();  // drops the narrow weights left unused
  return g;
}

}  // namespace tessel::passes
