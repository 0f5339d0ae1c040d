// Structural equality of graphs: same inputs, outputs, constants (bitwise), nodes (op,
// attributes, operands) and types, up to the names of values. Node order must match.
#pragma once

#include <string>

#include "ir/graph.h"

namespace tessel::ir {

// Empty when equal; otherwise a description of the first difference.
std::string structural_diff(const Graph& a, const Graph& b);
inline bool structurally_equal(const Graph& a, const Graph& b) {
  return structural_diff(a, b).empty();
}

}  // namespace tessel::ir
