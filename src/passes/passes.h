// Every graph pass: one exported function each, defined in a file of its own name.
// A pass takes the graph by value and returns the rewritten graph; passes keep ONNX
// semantics, so the CPU reference executor runs the graph before and after any pass (the
// tests compare both).
#pragma once

#include "ir/graph.h"

namespace tessel::passes {

// Removes nodes whose outputs reach no graph output, and values nobody uses.
ir::Graph eliminate_dead_code(ir::Graph g);

// Local clean-ups that make later patterns simpler: Identity and inference Dropout are
// bypassed, Cast to the same dtype is bypassed, Clip's opset-6 attribute form
// (min/max attributes) becomes the input form.
ir::Graph canonicalize(ir::Graph g);

// Evaluates every node whose inputs are all constants with the reference kernels and turns
// its outputs into constants (up to 2^26 elements per output).
ir::Graph fold_constants(ir::Graph g);

// Folds an inference BatchNormalization into the Conv that feeds it (when the conv's output
// has no other reader): W' = W * s[co], b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps).
ir::Graph fold_batch_norm(ir::Graph g);

}  // namespace tessel::passes
