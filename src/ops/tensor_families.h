// Registration of the tensor op groups that live in files of their own. Called by
// register_tensor_ops (tensor.cc), which registers the reshaping and permuting ops itself.
#pragma once

#include "ir/op_registry.h"

namespace tessel::ops {

void register_tensor_indexing_ops(ir::OpRegistry& r);  // Gather, Concat, Split, Slice, Pad
void register_resize_ops(ir::OpRegistry& r);           // Resize, Upsample (resize_ops.cc)

}  // namespace tessel::ops
