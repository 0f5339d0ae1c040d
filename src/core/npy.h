// NumPy .npy files (format versions 1.0, 2.0 and 3.0; little-endian; C order) for the
// dtypes tessel supports. Malformed files raise UserError naming the file and the problem.
#pragma once

#include <string>

#include "core/tensor.h"

namespace tessel {

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);
// Parses an in-memory .npy image; `what` names it in errors.
Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);

}  // namespace tessel
