// Registration of the elementwise ops that move or convert data without arithmetic: Identity,
// Dropout (inference), Cast and Constant. Called by register_elementwise_ops.
#pragma once

#include "ir/op_registry.h"

namespace tessel::ops {

void register_elementwise_data_ops(ir::OpRegistry& r);

}  // namespace tessel::ops
