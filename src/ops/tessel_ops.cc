#include "ops/tessel_ops.h"

namespace tessel::ops {

void register_tessel_ops(ir::OpRegistry& r) {
  register_tessel_contraction_ops(r);
  register_tessel_layout_ops(r);
}

}  // namespace tessel::ops
