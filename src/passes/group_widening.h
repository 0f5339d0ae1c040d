// The arithmetic of widen-narrow-groups (widen_narrow_groups.cc), shared with `tessel bench-op`,
// which times a narrow grouped conv in the form the engine runs it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tessel::passes {

// The factor f that widen-narrow-groups merges groups by: the smallest that makes the output
// channels per group (co / groups) a multiple of 8 and divides `groups`; 1 where it leaves the
// conv alone (already a multiple of 8, one input channel per group, no such factor).
int64_t group_widening(int64_t groups, int64_t co, int64_t ci_per_group);

// OHWI weights [Co, R, S, cig] of `groups` groups as weights of groups / f groups of f * cig
// input channels, block-diagonal: W'[co, r, s, j*cig + ci] = W[co, r, s, ci] for
// j = (co / cog) % f, zero elsewhere.
Tensor widen_group_weights(const Tensor& w, int64_t groups, int64_t f);

}  // namespace tessel::passes
