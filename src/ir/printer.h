// Textual IR. The printer and parser (parser.h) round-trip: parse(print(g)) is structurally
// equal to g. Format, one statement per line:
//
//   graph @main opset 17 {
//     input %x : f32[1,3,8,8]
//     const %w : f32[4,3,3,3] = [0.5, -1.25, ...]
//     %y = Conv(%x, %w, _) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1,4,8,8] @"conv1"
//     output %y
//   }
//
// Names that are not plain identifiers ([A-Za-z0-9_.]) are quoted: %"onnx::Conv_12". An
// omitted optional input prints as `_`. Floats always carry a '.' or an exponent, so an int
// attribute and a float attribute never look alike. Constants print every element unless
// `elide_constants_over` is set, in which case larger ones print as `[...]`, which the
// parser rejects (such dumps are for reading, not for round-trips).
#pragma once

#include <string>

#include "ir/graph.h"

namespace tessel::ir {

struct PrintOptions {
  int64_t elide_constants_over = -1;  // -1: never elide
};

std::string print_graph(const Graph& g, const PrintOptions& options = {});

}  // namespace tessel::ir
