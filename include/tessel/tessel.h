// tessel's public C++ API: compile, load and run a model. The CLI is written on it, and so is
// the Python module.
//
//   tessel::Options o;
//   o.batch = 8;
//   tessel::Session s = tessel::Session::open("resnet50.onnx", o);  // compiles for the GPU here
//   std::vector<tessel::Tensor> y = s.run({x});
//
//   tessel::compile_file("resnet50.onnx", "resnet50.tsl", o, "sm_90a");  // no GPU needed
//   tessel::Session e = tessel::Session::open("resnet50.tsl");          // loads, compiles nothing
//
// Errors in the user's input (a bad model, an unsupported op, a wrong input shape, a missing
// file, an engine file for another GPU) are thrown as tessel::UserError with one line naming
// what and where; tessel::InternalError is a compiler bug.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace tessel {

namespace runtime {
class Engine;
}  // namespace runtime

enum class Device {
  kCpu,   // the reference executor: every op, in the model's precision; the correctness oracle
  kCuda,  // the compiled engine on the GPU, run as one CUDA graph
};

// The public API's options, in one struct.
struct Options {
  Device device = Device::kCuda;
  Precision precision = Precision::kFp16;  // GPU storage precision
  bool tensor_cores = true;                // false: every contraction on the SIMT kernel
  int64_t batch = 0;                       // fixes a symbolic batch dimension
  std::map<std::string, Shape> input_shapes;  // static shapes for symbolic inputs
  ProgressFn progress = nullptr;              // long steps: passes, compiling, loading
  std::string tuning_db;  // a `tessel tune` database whose schedules the compiler uses
};

// An input or output of a session.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

// A tensor in the GPU's memory (device 0), contiguous and row-major: either borrowed (the
// storage of a PyTorch or CuPy tensor, kept alive by its owner while tessel uses it) or
// allocated by tessel and freed when its last copy goes.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // `address` is a CUdeviceptr the caller owns.
  static DeviceTensor borrow(uint64_t address, DType dtype, Shape shape);
  // UserError without a GPU.
  static DeviceTensor allocate(DType dtype, Shape shape);

  uint64_t address() const { return address_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::string type_str() const;  // "f32[1,3,224,224]"

 private:
  std::shared_ptr<void> storage_;  // set where tessel allocated the memory
  uint64_t address_ = 0;
  DType dtype_ = DType::kF32;
  Shape shape_;
};

// An ONNX model (.onnx) or a textual IR graph (.tir), imported with types inferred and
// verified; batch and input_shapes of `options` fix symbolic dimensions.
ir::Graph load_graph(const std::string& path, const Options& options = {});

// True when a CUDA device can run engines here; `reason` (optional) says why not.
bool cuda_available(std::string* reason = nullptr);

// True when `path` starts with an engine file's magic (a .tsl written by compile_file).
bool is_engine_file(const std::string& path);

// One kernel launch of a compiled engine: which node it runs and how.
struct LaunchInfo {
  std::string node;         // the compiled graph's node
  std::string op;           // "tessel.Conv"
  std::string instruction;  // "mma.sync", "wgmma" or "SIMT"
  std::string schedule;     // a contraction's schedule name; "" for other kernels
};

struct CompileReport {
  std::string summary;  // one line: target, precision, batch, kernels, memory, time, file
  std::vector<LaunchInfo> launches;
};

// Compiles a model for `target` ("sm_90a", "sm_80", or "" for the GPU present) and writes the
// engine file. Needs NVRTC, not a GPU, when a target is named.
CompileReport compile_file(const std::string& model_path, const std::string& engine_path,
                           const Options& options, const std::string& target = "");

class Session {
 public:
  // A model (.onnx, .tir) compiled for options.device, or an engine file (.tsl, GPU only)
  // loaded as it is (then batch, input_shapes and precision must be left at their defaults).
  static Session open(const std::string& path, const Options& options = {});
  // An imported graph.
  static Session from_graph(const ir::Graph& graph, const Options& options = {});

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // One tensor per input, in order and of the input's type; the outputs in order. A mismatched
  // input is a UserError naming it.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // GPU sessions: one run on tensors already in GPU memory, enqueued on `stream` (a CUstream;
  // null: the legacy default stream) and not waited for; no byte goes through the host. The
  // outputs are written into `outputs` where given (one per output, of its type), else into
  // tensors allocated here. Runs of one session share its activation memory: they must not
  // overlap (queue them on one stream, or wait between them). A mismatched tensor is a
  // UserError naming it; a CPU session refuses.
  std::vector<DeviceTensor> run_on_device(const std::vector<DeviceTensor>& inputs, void* stream,
                                          std::vector<DeviceTensor> outputs = {});

  Device device() const;
  double compile_ms() const;  // compiling here, wall clock; 0 for a loaded engine file
  // The GPU engine (plan, statistics, timing); null on the CPU.
  runtime::Engine* engine() const;
  // The graph the CPU runs, or the GPU engine was compiled from after the pass pipeline; null
  // for a loaded engine file.
  const ir::Graph* graph() const;

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel
