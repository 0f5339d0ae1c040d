#include "kernels/contraction/grouped.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::contraction {
namespace {

int64_t coeff(const AffineIndex& ix, int j) {
  return j < static_cast<int>(ix.coeffs.size()) ? ix.coeffs[j] : 0;
}

// The tensor dims of `x` whose index uses dim j.
std::vector<size_t> uses(const Access& x, int j) {
  std::vector<size_t> d;
  for (size_t i = 0; i < x.index.size(); ++i)
    if (coeff(x.index[i], j) != 0) d.push_back(i);
  return d;
}

// x's tensor dim `d` is exactly step*g + inner (no other dim of extent > 1, no offset).
bool channel_of(const Access& x, size_t d, const std::vector<IterDim>& dims, int g, int64_t step,
                int inner) {
  const AffineIndex& ix = x.index[d];
  if (ix.offset != 0 || coeff(ix, g) != step || coeff(ix, inner) != 1) return false;
  for (size_t j = 0; j < dims.size(); ++j) {
    const int jj = static_cast<int>(j);
    if (jj != g && jj != inner && coeff(ix, jj) != 0 && dims[j].extent > 1) return false;
  }
  return true;
}

int64_t padded_channels(int64_t cig) {
  const bool pow2 = (cig & (cig - 1)) == 0;
  if (pow2 || cig % 64 == 0) return cig;
  int64_t p = 1;
  while (p < cig) p *= 2;
  return p;
}

}  // namespace

std::optional<GroupedLayout> grouped_layout(const Contraction& c) {
  if (c.batch_dims.size() != 1 || c.n_dims.size() != 1 || c.k_dims.empty() ||
      c.operands_swapped || c.a_major != Major::kK || c.b_major != Major::kK)
    return std::nullopt;
  const std::vector<IterDim>& dims = c.maps.dims;
  GroupedLayout l;
  l.group_dim = c.batch_dims[0];
  l.n_dim = c.n_dims[0];
  l.ci_dim = c.k_dims.back();
  l.groups = dims[l.group_dim].extent;
  l.n_per_group = dims[l.n_dim].extent;
  l.ci_per_group = dims[l.ci_dim].extent;
  l.k_per_group = c.k;
  const Access &a = c.maps.a, &b = c.maps.b, &out = c.maps.c;
  if (a.index.empty() || b.index.empty() || out.index.empty()) return std::nullopt;
  // g moves exactly one tensor dim of each operand: A's and C's innermost, and B's N dim.
  const std::vector<size_t> ga = uses(a, l.group_dim), gb = uses(b, l.group_dim),
                            gc = uses(out, l.group_dim), nb = uses(b, l.n_dim);
  if (ga.size() != 1 || ga[0] + 1 != a.index.size() || gc.size() != 1 ||
      gc[0] + 1 != out.index.size() || gb.size() != 1 || nb.size() != 1 || nb[0] != gb[0])
    return std::nullopt;
  if (!channel_of(a, ga[0], dims, l.group_dim, l.ci_per_group, l.ci_dim) ||
      !channel_of(b, gb[0], dims, l.group_dim, l.n_per_group, l.n_dim) ||
      !channel_of(out, gc[0], dims, l.group_dim, l.n_per_group, l.n_dim))
    return std::nullopt;
  // B is K-major along ci: its innermost index is ci itself.
  if (coeff(b.index.back(), l.ci_dim) != 1 || b.shape.back() != l.ci_per_group) return std::nullopt;
  if (a.shape.back() != l.groups * l.ci_per_group || out.shape.back() != l.groups * l.n_per_group)
    return std::nullopt;
  l.ci_padded = padded_channels(l.ci_per_group);
  return l;
}

IndexMaps grouped_dense_view(const Contraction& c, const GroupedLayout& l) {
  IndexMaps v = c.maps;
  v.dims[l.group_dim].extent = 1;
  v.dims[l.n_dim].extent = l.groups * l.n_per_group;
  v.dims[l.ci_dim].extent = l.ci_padded;  // B's channels past cig read as zeros
  validate(v);
  return v;
}

IndexMaps grouped_packed_a_view(const Contraction& c, const GroupedLayout& l, int groups_per_tile) {
  TESSEL_ICHECK(groups_per_tile >= 1) << groups_per_tile << " groups per tile";
  IndexMaps v = c.maps;
  const int64_t cp = groups_per_tile * l.ci_per_group;
  const int64_t tiles = (l.groups + groups_per_tile - 1) / groups_per_tile;
  v.dims[l.group_dim].extent = tiles;
  v.dims[l.ci_dim].extent = cp;
  v.dims[l.n_dim].extent = groups_per_tile * l.n_per_group;
  v.a.index.back().coeffs[l.group_dim] = cp;
  if (l.ci_padded != l.ci_per_group) {
    // A as [..., groups, cig]: group g * groups_per_tile + gi, channel ci < ci_padded.
    const int gi = static_cast<int>(v.dims.size());
    v.dims.push_back({"gi", groups_per_tile, true});
    for (Access* x : {&v.a, &v.b, &v.c})
      for (AffineIndex& ix : x->index) ix.coeffs.push_back(0);
    v.dims[l.ci_dim].extent = l.ci_padded;
    AffineIndex group;
    group.coeffs.assign(v.dims.size(), 0);
    group.coeffs[l.group_dim] = groups_per_tile;
    group.coeffs[gi] = 1;
    AffineIndex channel;
    channel.coeffs.assign(v.dims.size(), 0);
    channel.coeffs[l.ci_dim] = 1;
    v.a.index.back() = group;
    v.a.index.push_back(channel);
    v.a.shape.back() = l.groups;
    v.a.shape.push_back(l.ci_per_group);
  }
  for (Access* x : {&v.b, &v.c})
    for (AffineIndex& ix : x->index)
      if (coeff(ix, l.group_dim) != 0) ix.coeffs[l.group_dim] = groups_per_tile * l.n_per_group;
  // A's channels past the last group read zeros (the last tile may hold fewer groups). B and
  // C are never read through this view: their shapes keep its maps valid.
  v.b.shape.back() = std::max(cp, l.ci_padded);
  v.b.shape.front() = v.c.shape.back() = tiles * groups_per_tile * l.n_per_group;
  validate(v);
  return v;
}

}  // namespace tessel::contraction
