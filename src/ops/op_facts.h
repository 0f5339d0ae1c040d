// The op facts table (op_facts.cc): what each registered op is, for the compiler's layers.
#pragma once

#include <string>
#include <vector>

#include "ir/op_registry.h"

namespace tessel::ops {

// Sets every registered op's OpSchema::facts from the table. An InternalError if a row names
// an op that is not registered.
void attach_op_facts(ir::OpRegistry& r);

// The registered ops that have no row in the table (a test keeps this empty).
std::vector<std::string> ops_without_facts(const ir::OpRegistry& r);

}  // namespace tessel::ops
