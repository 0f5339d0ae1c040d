// Node attributes: ONNX's attribute kinds that CNNs use (int, float, string, their lists,
// tensors). Stored sorted by name so that printing and comparison are deterministic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace tessel::ir {

using Attribute = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, Tensor>;

// "int", "float", "string", "ints", "floats", "strings", "tensor"
const char* attribute_kind(const Attribute& a);
bool attribute_equal(const Attribute& a, const Attribute& b);

using Attributes = std::map<std::string, Attribute>;

}  // namespace tessel::ir
