#include "ops/all_ops.h"

#include "ops/op_facts.h"
#include "ops/tessel_ops.h"

namespace tessel::ops {

void register_all_ops(ir::OpRegistry& r) {
  register_elementwise_ops(r);
  register_tensor_ops(r);
  register_nn_ops(r);
  register_quantized_ops(r);
  register_reduce_ops(r);
  register_tessel_ops(r);
  attach_op_facts(r);
}

}  // namespace tessel::ops

namespace tessel::ir {

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    ops::register_all_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace tessel::ir
