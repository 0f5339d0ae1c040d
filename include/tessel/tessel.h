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
// Dynamic batch: a range instead of one batch compiles one engine that runs any batch in it
// (one plan per profile batch, compiler/profiles.h; the batches between run padded or split,
// runtime/batch_split.h). The batch of a run is the leading extent of its inputs.
//
//   o.batch = 0;
//   o.batch_range = tessel::parse_batch_range("1:64");  // profiles 1, 2, 4, ..., 64
//   o.batch_range.opt = 32;
//   tessel::Session d = tessel::Session::open("resnet50.onnx", o);
//   d.run({x_at_batch_3});  d.run({x_at_batch_40});
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

// A range of batch sizes [min, max]; opt (0: max) is the batch `tessel bench` and `profile` run
// by default, compiled as a profile of its own. Empty (max 0): no range. A GPU engine compiles a
// profile at the ends, the opt batch and the powers of two between; with `every` > 0 also at
// each multiple of it, so that a batch between profiles is padded by fewer than `every` rows
// (what a server's batcher forms: 22 runs as 24 with every = 8, not as 32), for more compile
// time and engine size.
struct BatchRange {
  int64_t min = 0, max = 0, opt = 0;
  int64_t every = 0;
  bool empty() const { return max == 0; }
};

// The CLI's --batch and Python's batch= spelling: "8" is {8, 8} (one batch), "1:64" a range.
// UserError for anything else, naming `what`: "--batch 'x': expected a batch size such as 8 or a
// range such as 1:64", "--batch '0:4': the smallest batch is 0, expected at least 1",
// "--batch '8:4': the range is empty (8 > 4)".
BatchRange parse_batch_range(const std::string& text, const std::string& what = "--batch");

// UserError unless 1 <= min <= max and opt is 0 or within [min, max] (`what` names the range:
// "--batch 1:64").
void check_batch_range(const BatchRange& range, const std::string& what);

// A session's batch dimension that is not fixed (TensorInfo::shape[0] of a dynamic session).
inline constexpr int64_t kDynamicBatch = -1;

// The public API's options, in one struct.
struct Options {
  Device device = Device::kCuda;
  // Which GPU a GPU session runs on: an ordinal among those CUDA_VISIBLE_DEVICES leaves visible.
  // Its engine's memory, kernels and runs all belong to that GPU, whichever thread calls.
  int gpu = 0;
  Precision precision = Precision::kFp16;  // GPU storage precision
  bool tensor_cores = true;                // false: every contraction on the SIMT kernel
  int64_t batch = 0;                       // fixes a symbolic batch dimension
  // Instead of `batch`: a dynamic-batch session or engine for every batch in the range (the
  // model's inputs and outputs must all lead with a symbolic batch dimension).
  BatchRange batch_range;
  std::map<std::string, Shape> input_shapes;  // static shapes for symbolic inputs
  ProgressFn progress = nullptr;              // long steps: passes, compiling, loading
  std::string tuning_db;  // a `tessel tune` database whose schedules the compiler uses
};

// An input or output of a session. In a dynamic-batch session shape[0] is kDynamicBatch: any
// batch of Session::batch_range().
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

// A tensor in a GPU's memory, contiguous and row-major: either borrowed (the
// storage of a PyTorch or CuPy tensor, kept alive by its owner while tessel uses it) or
// allocated by tessel and freed when its last copy goes.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // `address` is a CUdeviceptr the caller owns.
  static DeviceTensor borrow(uint64_t address, DType dtype, Shape shape);
  // On the calling thread's GPU (device 0 unless a session's call is allocating on its own);
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

// Rows of one input, not owned: `shape` of `dtype` at `data`, contiguous; the leading extent is
// the piece's rows (Session::run_gathered). In host memory, or where `on_device`, at a device
// address of any visible GPU (a Triton client's CUDA shared memory, a PyTorch tensor's storage).
struct Piece {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  bool on_device = false;
};

// Copies `bytes` from `src` to `dst`, each in host memory or in device memory of any visible
// GPU (one unified address space), and waits for it: a server's answer written into a
// client's CUDA shared memory. UserError without a CUDA device.
void copy_memory(void* dst, const void* src, size_t bytes);
// Many copies, made together and waited for once (host sources staged in page-locked memory,
// every copy enqueued, one wait): a batch's answers into its clients' GPU memory. Which side
// of each is in device memory is said, not looked up.
struct MemoryCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  bool dst_on_device = false;
  bool src_on_device = false;
};
void copy_memory(const std::vector<MemoryCopy>& copies);

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
  std::vector<LaunchInfo> launches;  // of the opt batch's profile in a dynamic engine
  std::vector<int64_t> profiles;     // the batches compiled: one, or a dynamic engine's profiles
};

// Compiles a model for `target` ("sm_90a", "sm_80", or "" for the GPU present) and writes the
// engine file. Needs NVRTC, not a GPU, when a target is named.
CompileReport compile_file(const std::string& model_path, const std::string& engine_path,
                           const Options& options, const std::string& target = "");

class Session {
 public:
  // A model (.onnx, .tir) compiled for options.device, or an engine file (.tsl, GPU only)
  // loaded as it is (then batch, batch_range, input_shapes and precision must be left at their
  // defaults). With a batch range, a GPU session compiles a dynamic-batch engine; a CPU session
  // imports the model at each batch it runs (the reference executor has no profiles).
  static Session open(const std::string& path, const Options& options = {});
  // An imported graph (its shapes are fixed: a batch range needs open()).
  static Session from_graph(const ir::Graph& graph, const Options& options = {});

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // The batches the session runs: {b, b, b} for a static one (b the first input's leading
  // extent, 1 without one), the range of a dynamic one (opt filled in).
  BatchRange batch_range() const;
  // The profile batches of a dynamic GPU engine (one for a static one); empty on the CPU.
  std::vector<int64_t> profiles() const;
  // One tensor per input, in order and of the input's type; the outputs in order. A dynamic
  // session takes any batch of its range: the inputs all lead with it. A mismatched input or a
  // batch outside the range is a UserError naming it.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // One run on inputs given in pieces, inputs[i] the pieces of input i, which concatenated
  // along the leading (batch) dimension make it: a batch gathered from several requests, as a
  // server's batcher forms it. On the GPU host pieces are staged in page-locked memory by
  // several threads and uploaded block by block as they are staged, device pieces copied on the
  // device (no host copy of the batch); on the CPU they are concatenated. The batch is the
  // first input's rows in all. A piece of another type or trailing shape, or inputs whose rows
  // differ, is a UserError naming it.
  std::vector<Tensor> run_gathered(const std::vector<std::vector<Piece>>& inputs);

  // run_gathered in two halves, so that a server's batches pipeline: submit() checks the pieces
  // as run_gathered does, copies them in and starts the run, and returns once they may be
  // freed; collect() waits for that run and returns its outputs. On the GPU, while one run
  // computes the next one's inputs are staged and uploaded; up to two runs are in flight, and
  // submit() waits while two await collect(). Runs execute in submit order. One thread at a
  // time submits; another may collect. On the CPU submit() runs the batch. A piece in device
  // memory needs a GPU session. Every run submitted is collected once.
  struct Pending {
    size_t slot = 0;
    uint64_t serial = 0;
    std::vector<Tensor> outputs;  // a CPU session's, computed by submit()
  };
  Pending submit(const std::vector<std::vector<Piece>>& inputs);
  std::vector<Tensor> collect(Pending run);

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
  // The graph the CPU runs, or the GPU engine was compiled from after the pass pipeline (at the
  // opt batch of a range); null for a loaded engine file.
  const ir::Graph* graph() const;

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel
