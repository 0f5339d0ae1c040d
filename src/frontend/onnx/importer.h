// ONNX importer: reads a model (opsets 1 to 22 of the default domain) into an ir::Graph
// with ONNX semantics and static types on every value. Op forms of opsets other than 11 to 18
// are rewritten into those tessel implements (opset_conversion.h): a model of opsets 1 to 10
// is imported as an opset-11 graph.
//
// What it accepts: tensors of tessel's dtypes only; initializers stored inline (raw_data or
// the typed fields) or as external data inside the model's folder; Constant nodes (imported
// as constant values, not nodes); nodes in any order (they are sorted topologically).
// What it refuses, always with a UserError whose message starts with the model's path and
// names the offending input, tensor or node: non-ONNX or truncated files, ir_version < 3,
// opsets outside 1..22, op forms of other opsets that tessel cannot convert, ops of other
// domains or that tessel lacks, control flow (graph-valued attributes), sequence/map/optional
// types, symbolic dims it cannot resolve, dangling values, cycles, tensors whose data does not
// match their dims, and declared output types that contradict inference.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::onnx {

// Opsets of the default domain that tessel imports. 22 is the newest that ONNX 1.17 knows
// (onnx.defs.onnx_opset_version()).
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 22;

struct ImportOptions {
  // The batch: resolves a symbolic first dimension of any graph input. 0 means 1. Static
  // first dimensions are the model's and are never changed (a reshape constant may depend
  // on them).
  int64_t batch = 0;
  // Full shapes for named graph inputs; required for symbolic dims other than the batch.
  // A given shape must agree with the model's static dims and rank.
  std::map<std::string, Shape> input_shapes;
  // Graph inputs replaced by these constant values (the conformance runner binds integer
  // inputs such as Reshape's shape this way, since tessel compiles static shapes). The
  // tensor must have the input's element type and agree with its static dims.
  std::map<std::string, Tensor> bind_constants;
  // Ops the model may use and how to infer their types; nullptr means OpRegistry::global().
  const ir::OpRegistry* registry = nullptr;
};

// Reads `path` (external data files are resolved relative to its folder). Any problem with
// the file or the model is a UserError naming the file and, where relevant, the node.
ir::Graph import_model(const std::string& path, const ImportOptions& options = {});
// Same, from bytes in memory (`what` names the source in errors; external data is resolved
// relative to `base_dir`, and refused when `base_dir` is empty).
ir::Graph import_model_bytes(const std::string& bytes, const std::string& what,
                             const std::string& base_dir, const ImportOptions& options = {});

// Parses a serialized onnx TensorProto (the .pb files of ONNX's test data). Errors start
// with `path`.
Tensor read_tensor_proto(const std::string& path);

}  // namespace tessel::onnx
