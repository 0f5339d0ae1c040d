// The ONNX conformance harness: runs ONNX's backend test cases (Debian's libonnx-testdata:
// a folder per case with model.onnx and test_data_set_N/{input,output}_K.pb) through the
// importer and the CPU reference executor, and compares the outputs as ONNX's own backend
// runner does (numpy.testing.assert_allclose: |got - expected| <= atol + rtol * |expected|,
// NaN equal to NaN, infinities exact; integers and bools exact).
//
// tessel compiles static shapes, so every integer (i32/i64) graph input is bound to its test
// value as a constant before import (ImportOptions::bind_constants): Reshape's shape, Slice's
// starts, TopK's k and the like then fold at compile time. So are the few float inputs that
// determine an output shape (Resize's scales, Range's bounds, OneHot's depth). Other inputs
// stay runtime inputs, their shapes taken from the test data (ImportOptions::input_shapes).
// bf16 test tensors, stored by ONNX as UINT16 bit patterns, are read back as bf16.
//
// A case is skipped, not failed, when it needs what tessel does not claim to support: an op
// outside OpRegistry::global() (Constant is handled by the importer), an op of another
// domain, an opset outside onnx::kMinOpset..kMaxOpset (1..22), an element type tessel lacks,
// or sequence/optional/map types. Everything else must pass.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/op_registry.h"

namespace tessel::conformance {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

struct TestCase {
  std::string suite;  // "node", "pytorch-converted", ...
  std::string name;   // "test_relu"
  std::filesystem::path dir;
  Tolerance tolerance;
  std::string id() const { return suite + "/" + name; }
};

// The cases under `root`: one suite per subfolder named in `suites` that exists; if none
// exists, `root` itself is taken as one suite of cases. Sorted by suite, then name. A case's
// tolerance is ONNX's default for its suite (atol 1e-5 for pytorch-converted, 1e-7
// otherwise; rtol 1e-3), overridden by the case's data.json as ONNX's loader does.
std::vector<TestCase> discover_cases(const std::filesystem::path& root,
                                     const std::vector<std::string>& suites);

struct Skip {
  std::string reason;  // "opset 23 (tessel supports 1 to 22)", "unsupported ops If, Loop"
  // What the skip counts toward in a summary: the reason, or for missing ops one entry per
  // op ("unsupported op Loop"), so that the summary says which op unlocks how many cases.
  std::vector<std::string> groups;
};

// Why tessel does not claim to pass `model`, or nullopt when it must pass it.
std::optional<Skip> skip_reason(const ::onnx::ModelProto& model, const ir::OpRegistry& registry);

// nullopt if `got` matches `expected` within `tol`; otherwise what differs, naming `what`.
std::optional<std::string> compare(const Tensor& got, const Tensor& expected, Tolerance tol,
                                   const std::string& what);

struct CaseResult {
  enum class Status { kPass, kFail, kSkip };
  Status status = Status::kFail;
  std::string reason;  // why it failed or was skipped; one line
  std::string ops;     // the model's op types, "Conv+Relu": groups failures for op authors
  std::vector<std::string> skip_groups;  // Skip::groups of a skipped case
};

// Imports and runs every data set of `c` and compares the outputs. Never throws: errors of
// the importer, the executor or the test data are failures with their message.
CaseResult run_case(const TestCase& c, const ir::OpRegistry& registry);

}  // namespace tessel::conformance
