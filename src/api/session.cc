// The public API (include/tessel/tessel.h): model loading, compiling, and the Session that runs
// a model on the CPU reference executor or as a GPU engine.
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>

#include "compiler/compile_plan.h"
#include "compiler/tuning_db.h"
#include "core/units.h"
#include "device/cuda_api.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "runtime/cpu/executor.h"
#include "runtime/engine.h"
#include "runtime/engine_file.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

compiler::Options compiler_options(const Options& o) {
  compiler::Options c;
  c.precision = o.precision;
  c.tensor_cores = o.tensor_cores;
  c.progress = o.progress;
  if (!o.tuning_db.empty())
    c.tuning = std::make_shared<const compiler::TuningDb>(compiler::TuningDb::load(o.tuning_db));
  return c;
}

// The GPU to compile for: the named target, else the GPU present; without either, say how to
// name one.
device::DeviceInfo compile_target(const std::string& requested) {
  if (!requested.empty()) return device::known_device(requested);
  std::string why;
  if (device::cuda_available(&why)) return device::device_info();
  std::string known;
  for (const device::DeviceInfo& d : device::known_devices())
    known += (known.empty() ? "--target " : " or --target ") + d.arch();
  TESSEL_USER_ERROR() << "no CUDA device to compile for (" << why << "); pass " << known
                      << " to compile for a GPU that is not here";
  return {};
}

std::vector<TensorInfo> graph_tensors(const ir::Graph& g, const std::vector<ir::ValueId>& values) {
  std::vector<TensorInfo> r;
  for (ir::ValueId v : values) r.push_back({g.value(v).name, g.type(v).dtype, g.type(v).shape});
  return r;
}

std::vector<TensorInfo> plan_tensors(const std::vector<runtime::PlanTensor>& tensors) {
  std::vector<TensorInfo> r;
  for (const runtime::PlanTensor& t : tensors) r.push_back({t.name, t.dtype, t.shape});
  return r;
}

// A mismatched device tensor, named: "input 'x' is f32[2,3], expected f32[1,3]".
void check_run_tensor(const DeviceTensor& given, const TensorInfo& want, const char* what) {
  TESSEL_USER_CHECK(given.dtype() == want.dtype && given.shape() == want.shape)
      << what << " '" << want.name << "' is " << given.type_str() << ", expected "
      << dtype_name(want.dtype) << shape_str(want.shape);
}

}  // namespace

DeviceTensor DeviceTensor::borrow(uint64_t address, DType dtype, Shape shape) {
  DeviceTensor t;
  t.address_ = address;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

DeviceTensor DeviceTensor::allocate(DType dtype, Shape shape) {
  const std::optional<uint64_t> bytes = runtime::tensor_bytes(dtype, shape);
  TESSEL_USER_CHECK(bytes) << "a device tensor of " << dtype_name(dtype) << shape_str(shape)
                           << " is too large";
  auto buffer = std::make_shared<device::DeviceBuffer>(static_cast<size_t>(*bytes));
  DeviceTensor t = borrow(buffer->ptr(), dtype, std::move(shape));
  t.storage_ = std::move(buffer);
  return t;
}

std::string DeviceTensor::type_str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

struct Session::Impl {
  Device device = Device::kCpu;
  std::optional<ir::Graph> graph;
  std::optional<runtime::Engine> engine;
  std::vector<TensorInfo> inputs, outputs;
  double compile_ms = 0;
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

ir::Graph load_graph(const std::string& path, const Options& options) {
  {
    std::ifstream f(path, std::ios::binary);
    TESSEL_USER_CHECK(f.good()) << path << ": cannot open file";
  }
  if (ends_with(path, ".tir")) {
    ir::Graph g = ir::parse_graph_file(path);
    ir::verify(g, ir::OpRegistry::global());
    ir::infer_types(g, ir::OpRegistry::global());
    return g;
  }
  onnx::ImportOptions import;
  import.batch = options.batch;
  import.input_shapes = options.input_shapes;
  return onnx::import_model(path, import);
}

bool is_engine_file(const std::string& path) { return runtime::is_engine_file(path); }

bool cuda_available(std::string* reason) { return device::cuda_available(reason); }

CompileReport compile_file(const std::string& model_path, const std::string& engine_path,
                           const Options& options, const std::string& target) {
  const device::DeviceInfo device = compile_target(target);
  const ir::Graph g = load_graph(model_path, options);
  const compiler::CompiledPlan compiled =
      compiler::compile_plan(g, compiler_options(options), device);
  runtime::write_engine_file(compiled.plan, engine_path);
  const runtime::EnginePlan& p = compiled.plan;
  CompileReport report;
  for (const runtime::PlanLaunch& l : p.launches)
    report.launches.push_back({l.node, l.op, l.instruction, l.schedule});
  report.summary = "compiled " + model_path + " for " + device.str() + ", " + precision_name(p.precision) +
         ", batch " + std::to_string(p.batch) + ": " + std::to_string(p.launches.size()) +
         " kernels (" + std::to_string(runtime::tensor_core_launches(p)) +
         " on Tensor Cores), arena " + human_bytes(static_cast<int64_t>(p.arena_bytes)) +
         ", constants " + human_bytes(static_cast<int64_t>(p.constants.size())) + ", in " +
         std::to_string(std::llround(compiled.compile_ms)) + " ms -> " + engine_path;
  return report;
}

Session Session::open(const std::string& path, const Options& options) {
  if (runtime::is_engine_file(path)) {
    TESSEL_USER_CHECK(options.device == Device::kCuda)
        << path << " is a compiled engine: it runs on the GPU only";
    TESSEL_USER_CHECK(options.batch == 0 && options.input_shapes.empty())
        << path << " is a compiled engine: batch and input shapes apply when compiling a model "
        << "(tessel compile)";
    // Read and checked before the GPU is looked for, so that a damaged file is reported as
    // such on any machine.
    runtime::EnginePlan plan = runtime::read_engine_file(path);
    std::string why;
    TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
    auto impl = std::make_unique<Impl>();
    impl->device = Device::kCuda;
    impl->engine.emplace(runtime::Engine::load(std::move(plan), path, options.progress));
    impl->inputs = plan_tensors(impl->engine->plan().inputs);
    impl->outputs = plan_tensors(impl->engine->plan().outputs);
    return Session(std::move(impl));
  }
  if (options.device == Device::kCuda) {
    // Without a GPU, say so before spending time on importing and compiling.
    std::string why;
    TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
  }
  return from_graph(load_graph(path, options), options);
}

Session Session::from_graph(const ir::Graph& graph, const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->device = options.device;
  if (options.device == Device::kCpu) {
    impl->graph = graph;
    impl->inputs = graph_tensors(graph, graph.inputs);
    impl->outputs = graph_tensors(graph, graph.outputs);
    return Session(std::move(impl));
  }
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
  compiler::CompiledPlan compiled =
      compiler::compile_plan(graph, compiler_options(options), device::device_info());
  impl->engine.emplace(runtime::Engine::load(std::move(compiled.plan), "the engine", options.progress));
  impl->graph = std::move(compiled.graph);
  impl->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  impl->inputs = plan_tensors(impl->engine->plan().inputs);
  impl->outputs = plan_tensors(impl->engine->plan().outputs);
  return Session(std::move(impl));
}

const std::vector<TensorInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return impl_->outputs; }
Device Session::device() const { return impl_->device; }
double Session::compile_ms() const { return impl_->compile_ms; }
runtime::Engine* Session::engine() const { return impl_->engine ? &*impl_->engine : nullptr; }
const ir::Graph* Session::graph() const { return impl_->graph ? &*impl_->graph : nullptr; }

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  if (impl_->engine) return impl_->engine->run(inputs);
  return runtime::cpu::run_graph(*impl_->graph, inputs);
}

std::vector<DeviceTensor> Session::run_on_device(const std::vector<DeviceTensor>& inputs,
                                                 void* stream, std::vector<DeviceTensor> outputs) {
  TESSEL_USER_CHECK(impl_->engine)
      << "this session runs on the CPU: device tensors need a session on the GPU";
  TESSEL_USER_CHECK(inputs.size() == impl_->inputs.size())
      << inputs.size() << " inputs given, the model has " << impl_->inputs.size();
  TESSEL_USER_CHECK(outputs.empty() || outputs.size() == impl_->outputs.size())
      << outputs.size() << " outputs given, the model has " << impl_->outputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) check_run_tensor(inputs[i], impl_->inputs[i], "input");
  if (outputs.empty()) {
    for (const TensorInfo& y : impl_->outputs)
      outputs.push_back(DeviceTensor::allocate(y.dtype, y.shape));
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    check_run_tensor(outputs[j], impl_->outputs[j], "output");
  std::vector<uint64_t> in, out;
  for (const DeviceTensor& t : inputs) in.push_back(t.address());
  for (const DeviceTensor& t : outputs) out.push_back(t.address());
  impl_->engine->run_on(in, out, stream);
  return outputs;
}

}  // namespace tessel
