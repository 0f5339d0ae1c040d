// Helpers of the tessel.* reference kernels: layout permutations between NHWC and NCHW, and
// running the ONNX op a tessel op generalises through the registry, so that each tessel
// kernel is "transpose, run the ONNX reference, transpose back" and obviously right. The
// permutations also serve convert-layout, which transposes weights with them at compile time.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::ops {

// Axis permutations for Transpose: NCHW -> NHWC reads dims (0, 2, 3, 1); the inverse (0, 3, 1, 2).
inline const std::vector<int64_t> kNchwToNhwc = {0, 2, 3, 1};
inline const std::vector<int64_t> kNhwcToNchw = {0, 3, 1, 2};

// out[i] = in[perm[i]].
Shape permute_shape(const Shape& in, const std::vector<int64_t>& perm);
// The tensor transposed by `perm` (Transpose's semantics), in the same dtype.
Tensor permute(const Tensor& in, const std::vector<int64_t>& perm);

// UserError naming the node for any attribute not in `allowed`: tessel ops are written by
// passes and tests, and a misspelled attribute must not be silently ignored.
void check_attributes(const ir::Node& node, const std::vector<std::string>& allowed);

// The ONNX op `op` standing in for `node` (same name, the given attributes), whose inputs are
// `num_inputs` placeholders: infer_node and the schema's compute need only the node's arity.
ir::Node stand_in(const ir::Node& node, const std::string& op, ir::Attributes attrs,
                  int num_inputs);

// Output types / values of the stand-in on the given inputs, with the registry's schema. A
// UserError raised by the ONNX op is re-raised naming `node` (the tessel op), not the stand-in.
std::vector<ir::TensorType> infer_stand_in(const ir::Node& node, const ir::Node& onnx,
                                           const std::vector<const ir::TensorType*>& types,
                                           int64_t opset);
std::vector<Tensor> run_stand_in(const ir::Node& node, const ir::Node& onnx,
                                 const std::vector<const Tensor*>& inputs, int64_t opset);

}  // namespace tessel::ops
