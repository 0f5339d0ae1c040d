// Op forms of other opsets, rewritten at import into the forms tessel's ops, passes and GPU code
// implement (those of opsets 11 to 18), so that nothing after the importer needs to know how
// ONNX ops changed. The one place that does: the table of rules in opset_conversion.cc, a row
// per (op, opsets) with its rewrite.
//
//  - Opsets 1 to 6: every node first takes its opset-7 form (legacy broadcasting from an axis ->
//    numpy broadcasting of a reshaped operand; PRelu's per-channel slope; Reshape's, Upsample's
//    and Tile's attributes and inputs; Split-1, Cast-1, Concat-1, Pad-1 and Selu-1; is_test),
//    then goes on as a model of opset 7.
//  - Opsets 7 to 10: every node becomes its opset-11 form and the graph is imported as opset 11
//    (Upsample and Resize-10 -> Resize; Pad's, Slice's and Clip's attributes -> inputs;
//    BatchNormalization's `spatial`; Dropout's mask of the data's type before opset 10;
//    leftovers of older opsets dropped or refused).
//  - Opsets 19 to 22: the graph keeps its opset. Of the changes that reach tessel's op set,
//    QuantizeLinear's `output_dtype` is rewritten; the ops honour the others themselves (opset
//    22's ceil_mode rule of the pools, Resize's half_pixel_symmetric, AveragePool's dilations)
//    or refuse them with one line (Pad's `wrap`, blocked quantization, new element types).
//
// Some new forms need the element type or the shape of an input (Clip's bounds are typed like
// the data; the rounding of Upsample's nearest mode depends on whether an axis shrinks), so the
// conversion runs in two steps around the importer's type inference: convert_untyped_forms()
// leaves every node in a form tessel's ops can infer, convert_typed_forms() finishes it. A
// rewrite of the first step that needs the rank of an input (legacy broadcasting from an axis)
// has the nodes before it inferred on the spot.
//
// A form that cannot be converted is a UserError naming the node, its op, the model's opset and
// why, in one line.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::onnx {

// The opset a model of `model_opset` is imported as: 11 for opsets 1 to 10, else its own.
int64_t converted_opset(int64_t model_opset);

// Step 1, on the graph as read from the model (types not yet inferred; g.opset is already
// converted_opset(model_opset)). Every node is left in a form that type inference accepts.
// `registry` infers the nodes before one whose rewrite needs its inputs' types.
void convert_untyped_forms(ir::Graph& g, int64_t model_opset, const ir::OpRegistry& registry);

// Step 2, once every value has its type. Returns whether it changed the graph, which then
// needs its types inferred again (the values it adds are untyped).
bool convert_typed_forms(ir::Graph& g, int64_t model_opset);

}  // namespace tessel::onnx
