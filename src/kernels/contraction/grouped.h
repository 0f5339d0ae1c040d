// Grouped contractions: a batch dim that offsets the channels of A, B and C, as a grouped
// convolution's group does (ops_maps.h, conv2d_nhwc_maps):
//
//   A[..., cig*g + ci]   B[cog*g + co, ..., ci]   C[..., cog*g + co]      (batch dim g)
//
// Run one group per CTA and a ResNeXt layer (4 to 32 channels per group) leaves a Tensor Core
// tile mostly empty. The packed-groups mainloop (Schedule::groups_per_tile) puts several whole
// groups side by side in one CTA's N tile instead; each n8 mma fragment belongs to one group,
// and reads the K slice of that group only, so no mma multiplies the zeros of a
// block-diagonal weight. Its loaders read through two views of the same maps:
//  - the dense view: g folded away, N = groups * cog. B is then a plain [G*cog, K_g] matrix
//    (each output channel's row holds its own group's K = kh*kw*cig), C a plain output; the
//    epilogue and the B gather come from this view.
//  - the packed-A view: g advances by whole tiles of `groups_per_tile` groups, and K walks all
//    of their cp = groups_per_tile * cig input channels at once. A k-tile of T taps then loads
//    T contiguous runs of cp channels per pixel (full sectors, where a group alone is 8-64
//    bytes); the kernel scatters each group's channels to its own slice of the shared tile.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/contraction/contraction.h"

namespace tessel::contraction {

struct GroupedLayout {
  int group_dim = -1;      // the batch dim g
  int n_dim = -1;          // co, the N dim (channels per group of C and B)
  int ci_dim = -1;         // ci, the innermost K dim (channels per group of A and B)
  int64_t groups = 1;      // extent of g
  int64_t n_per_group = 1; // cog
  int64_t k_per_group = 1; // K of one group (kh * kw * cig for a convolution)
  int64_t ci_per_group = 1;  // cig
  // cig as the kernel lays it out in shared memory: cig itself where it is a power of two or
  // a multiple of 64, else the next power of two (RegNet's groups of 24 -> 32), so that a
  // k-tile of whole taps is 32 or a multiple of 64 columns and spreads evenly over the
  // loaders' threads. The views read the padding as zeros (out of bounds of the real
  // channels), and the mma multiplies them: 33% more work for groups of 24.
  int64_t ci_padded = 1;
};

// The grouped structure of `c`, or nothing when `c` is not a grouped contraction as above:
// exactly one batch dim, which moves A's contiguous dim by the extent of the innermost K dim
// (ci) and B's and C's channel by the extent of the one N dim (co), and nothing else; A and B
// K-major; C's contiguous dim is its channel.
std::optional<GroupedLayout> grouped_layout(const Contraction& c);

// The dense view (see above): g of extent 1, co of extent groups * cog, ci of extent
// ci_padded (B's channels past cig read as zeros). match() of it is a contraction without
// batch, N = G*cog, K = k_per_group / cig * ci_padded.
IndexMaps grouped_dense_view(const Contraction& c, const GroupedLayout& l);

// The packed-A view for `groups_per_tile`: g of extent ceil(groups / groups_per_tile) moving
// A's channel by groups_per_tile * cig, ci of extent groups_per_tile * cig, co of extent
// groups_per_tile * cog. The last tile's channels past the last group are out of bounds (read
// as zeros). Where ci_padded > cig, A is read as [..., groups, cig] instead, with a K dim
// `gi` (the group within the tile, A's group index g * groups_per_tile + gi) and ci of extent
// ci_padded reading zeros past cig. Only its A is read (B and C are shaped to keep the maps
// valid).
IndexMaps grouped_packed_a_view(const Contraction& c, const GroupedLayout& l, int groups_per_tile);

}  // namespace tessel::contraction
