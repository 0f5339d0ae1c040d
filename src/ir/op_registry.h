// The op registry: one OpSchema per op type, registered by name in one place
// (ops/all_ops.cc). A schema knows how to check a node and infer its output types, and how
// to compute it on the host (the reference kernel: obviously right, not fast).
//
// Inference and the reference kernel share one path: the CPU executor first calls infer()
// with the actual input tensors as known values, then compute(). Static shape inference on a
// Graph calls infer() with the values it knows (constants and small folded shape chains).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::ir {

class InferContext {
 public:
  InferContext(const Node& node, std::vector<const TensorType*> in_types,
               std::vector<const Tensor*> in_values, int64_t opset);

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(in_types_.size()); }
  // False for an omitted optional input ("" in ONNX) or past the end.
  bool has_input(int i) const;
  const TensorType& input(int i) const;  // UserError if the input is absent
  DType dtype(int i) const { return input(i).dtype; }
  const Shape& shape(int i) const { return input(i).shape; }
  int64_t rank(int i) const { return static_cast<int64_t>(input(i).shape.size()); }
  // The value of input i if it is known at this point (constant, folded, or at run time).
  const Tensor* value(int i) const;
  // The value of input i, or a UserError saying the op needs it to be constant.
  const Tensor& require_value(int i, const char* what) const;

  // Output types, one per node output; the schema's infer() must set every one.
  std::vector<TensorType>& outputs() { return out_types_; }
  void set_output(int i, DType dtype, Shape shape);

 private:
  const Node& node_;
  std::vector<const TensorType*> in_types_;
  std::vector<const Tensor*> in_values_;
  std::vector<TensorType> out_types_;
  int64_t opset_;
};

class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs,
                int64_t opset)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs), opset_(opset) {}
  const Node& node() const { return node_; }
  // The default-domain opset of the graph: some ops changed meaning across versions.
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const {
    return i < num_inputs() && inputs_[i] != nullptr;
  }
  const Tensor& input(int i) const;
  // Outputs are allocated (zeroed) by the executor from the inferred types.
  Tensor& output(int i);
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  int64_t opset_;
};

// What an op is, as the compiler's layers need to know it: its kind, how it takes the NHWC
// layout, whether it may run in fp16 and in place, which GPU kernel family runs it, and how its
// FLOPs are counted. One table holds them all (ops/op_facts.cc); passes, the kernel generators,
// `tessel explain` and the profiler read them here instead of keeping op lists of their own.
enum class OpKind {
  kOther,
  kElementwise,   // per element of input 0; other inputs are scalars or attributes
  kBroadcast,     // elementwise over numpy-broadcast operands
  kContraction,   // conv, dense, matmul: a Contraction (kernels/contraction)
  kWindow,        // pools and other sliding windows
  kNormalization, // batch/layer norm
  kReduction,     // reductions and softmax
  kDataMovement,  // copies with a different element order: transpose, concat, pad, slice, ...
  kView,          // the same elements in the same order: reshape and its kind
  kQuantization,  // quantize / dequantize and the integer ops
  kShape,         // computes shapes or constants, folded at compile time
};
const char* op_kind_name(OpKind k);

// How an op takes NHWC activations (passes/convert_layout.cc).
enum class NhwcForm {
  kNone,        // it reads NCHW: a Transpose back is inserted in front of it
  kAgnostic,    // per element: it follows its input's layout as it is
  kBroadcast,   // per element with broadcasting: NCHW per-channel constants become [C]
  kAxes,        // its axis attributes or axis operands are rewritten for NHWC
  kTesselForm,  // it becomes its tessel.* NHWC op (OpFacts::tessel_form)
};

// The GPU kernel family that runs an op (kernels/cuda/op_kernels.h, or the contraction
// generator); kNone: no GPU kernel.
enum class GpuKernel { kNone, kContraction, kElementwise, kCopy, kWindow, kReduce, kResize, kMatMul };
const char* gpu_kernel_name(GpuKernel k);

// How ops/flops.cc counts an op's work: multiply-adds count 2.
enum class FlopRule {
  kZero,           // data movement and shape arithmetic
  kPerOutput,      // one per output element
  kPerInput,       // one per element of input 0 (global pools, reductions)
  kConv,           // 2 x output elements x (C_in / group) x kernel extent
  kConvTranspose,  // 2 x input elements x (C_out / group) x kernel extent
  kGemm,           // 2 x output elements x K
  kWindow,         // output elements x kernel extent
};

struct OpFacts {
  OpKind kind = OpKind::kOther;
  NhwcForm nhwc = NhwcForm::kNone;
  const char* tessel_form = "";  // with NhwcForm::kTesselForm: "tessel.MaxPool"
  GpuKernel gpu = GpuKernel::kNone;
  FlopRule flops = FlopRule::kPerOutput;
  // Output 0 may overwrite input 0: each output element depends only on the input element at
  // the same flat index, or the op moves no data (passes/plan_memory.cc).
  bool in_place = false;
  // Output 0 is input 0's bytes unchanged: no data moves (a view in the memory plan).
  bool view = false;
  // Its kernels store fp16 and compute in fp32, so choose-precision may give it fp16 tensors;
  // fp16_free_inputs keep their dtype (a bias, BN statistics, Resize's scales), and with
  // fp16_free_output the output's dtype is an attribute (Cast's `to`).
  bool fp16 = false;
  std::vector<int> fp16_free_inputs = {};
  bool fp16_free_output = false;
};

struct OpSchema {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  // Checks attributes and input types (UserError naming the node on a problem) and sets the
  // output types.
  std::function<void(InferContext&)> infer;
  // Computes outputs from inputs on the host.
  std::function<void(KernelContext&)> compute;
  // Cheap enough and deterministic enough to evaluate at compile time when all inputs are
  // constant (shape arithmetic). Everything except random ops is.
  bool foldable = true;
  // Set from the one facts table (ops/op_facts.cc) when the registry is built.
  OpFacts facts = {};
};

class OpRegistry {
 public:
  // The registry with every op of ops/ registered.
  static const OpRegistry& global();

  void add(OpSchema schema);
  // Attaches the facts of a registered op; an InternalError for an unknown one.
  void set_facts(const std::string& op, OpFacts facts);
  const OpSchema* find(const std::string& op) const;
  // The facts of `op`: the defaults (kOther, no GPU kernel, ...) for an unknown op.
  const OpFacts& facts(const std::string& op) const;
  std::vector<std::string> names() const;  // sorted

 private:
  std::map<std::string, OpSchema> schemas_;
};

// Runs a schema's arity checks and infer() on a node. Used by graph shape inference and by
// the CPU executor. Throws UserError for an unknown op, wrong arity or a failed check.
std::vector<TensorType> infer_node(const OpSchema& schema, const Node& node,
                                   const std::vector<const TensorType*>& in_types,
                                   const std::vector<const Tensor*>& in_values, int64_t opset);

}  // namespace tessel::ir
