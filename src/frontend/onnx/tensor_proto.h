// Conversion of ONNX TensorProto messages (initializers, tensor attributes, the .pb files of
// ONNX's test data) to host Tensors, including tensors whose bytes live in an external file.
// Internal to the importer; the public entry points are in importer.h.
#pragma once

// onnx_pb.h defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML=1 comes with onnx_proto).
#include <onnx/onnx_pb.h>

#include <string>

#include "core/tensor.h"

namespace tessel::onnx {

// tessel's dtype for an ONNX element type (TensorProto.DataType), or a UserError saying that
// `what` has an element type tessel does not support.
DType dtype_from_onnx_elem_type(int32_t elem_type, const std::string& what);

// Decodes `tp` into a Tensor. The data may be in raw_data, in the typed field ONNX assigns to
// the element type, or in an external file (data_location EXTERNAL) whose `location` is
// relative to `base_dir`; an empty `base_dir` refuses external data. Every size is checked
// against the dims before anything is allocated, so a malformed tensor cannot make the
// importer allocate more than the bytes it was actually given. Errors are UserErrors that
// start with `what` ("initializer 'conv1.weight'").
Tensor tensor_from_proto(const ::onnx::TensorProto& tp, const std::string& what,
                         const std::string& base_dir);

// The folder external data of the file at `path` is resolved in ("." for a bare file name).
std::string folder_of(const std::string& path);

}  // namespace tessel::onnx
