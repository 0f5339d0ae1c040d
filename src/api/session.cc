// The public API (include/tessel/tessel.h): model loading, compiling, and the Session that runs
// a model on the CPU reference executor or as a GPU engine.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <optional>

#include "compiler/compile_plan.h"
#include "compiler/profiles.h"
#include "compiler/tuning_db.h"
#include "core/units.h"
#include "device/cuda_api.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "runtime/cpu/executor.h"
#include "runtime/batch_split.h"
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
  c.profile_every = o.batch_range.every;
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

// The engine's inputs or outputs, the batch dimension kDynamicBatch in a dynamic engine.
std::vector<TensorInfo> plan_tensors(const runtime::EnginePlan& plan, bool inputs) {
  const runtime::PlanProfile& p = plan.profiles.front();
  std::vector<TensorInfo> r;
  for (const runtime::PlanTensor& t : inputs ? p.inputs : p.outputs) {
    r.push_back({t.name, t.dtype, t.shape});
    if (plan.batch.dynamic()) r.back().shape[0] = kDynamicBatch;
  }
  return r;
}

// `t`'s shape at `batch` (its own where it has no dynamic batch).
Shape shape_at(const TensorInfo& t, int64_t batch) {
  Shape s = t.shape;
  if (!s.empty() && s[0] == kDynamicBatch) s[0] = batch;
  return s;
}

// A mismatched device tensor, named: "input 'x' is f32[2,3], expected f32[1,3]".
void check_run_tensor(const DeviceTensor& given, const TensorInfo& want, int64_t batch,
                      const char* what) {
  const Shape shape = shape_at(want, batch);
  TESSEL_USER_CHECK(given.dtype() == want.dtype && given.shape() == shape)
      << what << " '" << want.name << "' is " << given.type_str() << ", expected "
      << dtype_name(want.dtype) << shape_str(shape);
}

// The range `options` asks for, opt filled in (its max where not given), checked; empty
// when it asks for none. A range with `batch` too is a UserError.
BatchRange requested_range(const Options& options) {
  BatchRange r = options.batch_range;
  if (r.empty()) return r;
  const std::string what =
      "batch range " + std::to_string(r.min) + ":" + std::to_string(r.max);
  TESSEL_USER_CHECK(options.batch == 0)
      << what << " and batch " << options.batch << " given: pass one or the other";
  check_batch_range(r, what);
  if (r.opt == 0) r.opt = r.max;
  return r;
}

runtime::BatchRange runtime_range(const BatchRange& r) { return {r.min, r.max, r.opt}; }

// The model imported with its symbolic batch at `batch`.
ir::Graph graph_at(const std::string& path, Options options, int64_t batch) {
  options.batch = batch;
  options.batch_range = {};
  return load_graph(path, options);
}

// Runs `batch` through the range check the engine makes, with the session's wording.
void check_batch(const BatchRange& range, int64_t batch) {
  TESSEL_USER_CHECK(batch >= range.min && batch <= range.max)
      << "batch " << batch << " is outside the session's batch range " << range.min << ":"
      << range.max;
}

// The batch of a run: the first input's leading extent.
template <typename T>
int64_t batch_of_inputs(const std::vector<T>& inputs, const std::vector<TensorInfo>& want) {
  TESSEL_USER_CHECK(inputs.size() == want.size())
      << inputs.size() << " inputs given, the model has " << want.size();
  TESSEL_USER_CHECK(!inputs.empty() && !inputs[0].shape().empty())
      << "input '" << (want.empty() ? std::string() : want[0].name)
      << "' has no batch dimension";
  return inputs[0].shape()[0];
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
  // Freed with the GPU it was allocated on current, on whichever thread lets it go.
  const int gpu = device::current_gpu();
  std::shared_ptr<device::DeviceBuffer> buffer(
      new device::DeviceBuffer(static_cast<size_t>(*bytes)), [gpu](device::DeviceBuffer* b) {
        device::DeviceScope scope(gpu);
        delete b;
      });
  DeviceTensor t = borrow(buffer->ptr(), dtype, std::move(shape));
  t.storage_ = std::move(buffer);
  return t;
}

std::string DeviceTensor::type_str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

struct Session::Impl {
  Device device = Device::kCpu;
  int gpu = 0;  // the GPU of a GPU session: every call on its engine runs with it current
  std::optional<ir::Graph> graph;
  std::optional<runtime::Engine> engine;
  std::vector<TensorInfo> inputs, outputs;
  BatchRange batch;  // {b, b, b} for a static session
  double compile_ms = 0;

  // A dynamic CPU session: the model and its options, and the graphs of the last batches run
  // (imported on demand, most recent first; runs may come from several threads).
  std::string path;
  Options options;
  std::mutex cpu_graphs_mutex;
  std::list<std::pair<int64_t, std::shared_ptr<const ir::Graph>>> cpu_graphs;
  static constexpr size_t kCpuGraphsKept = 4;
  std::shared_ptr<const ir::Graph> cpu_graph_at(int64_t batch);
};

std::shared_ptr<const ir::Graph> Session::Impl::cpu_graph_at(int64_t batch) {
  {
    std::lock_guard<std::mutex> lock(cpu_graphs_mutex);
    for (auto it = cpu_graphs.begin(); it != cpu_graphs.end(); ++it) {
      if (it->first != batch) continue;
      cpu_graphs.splice(cpu_graphs.begin(), cpu_graphs, it);
      return it->second;
    }
  }
  auto g = std::make_shared<const ir::Graph>(graph_at(path, options, batch));
  std::lock_guard<std::mutex> lock(cpu_graphs_mutex);
  cpu_graphs.emplace_front(batch, g);
  if (cpu_graphs.size() > kCpuGraphsKept) cpu_graphs.pop_back();
  return g;
}

// The range of a static session's tensors: its first input's leading extent, 1 without one.
BatchRange static_range(const std::vector<TensorInfo>& inputs) {
  const int64_t b =
      !inputs.empty() && !inputs[0].shape.empty() ? std::max<int64_t>(1, inputs[0].shape[0]) : 1;
  return {b, b, b};
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() {
  // The engine's memory and modules belong to its GPU's context.
  if (impl_ && impl_->engine) {
    device::DeviceScope scope(impl_->gpu);
    impl_.reset();
  }
}

BatchRange parse_batch_range(const std::string& text, const std::string& what) {
  auto number = [&](const std::string& item, int64_t& v) {
    size_t used = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      return false;
    }
    return used == item.size() && !item.empty() && std::isdigit(static_cast<unsigned char>(item[0]));
  };
  const size_t colon = text.find(':');
  BatchRange r;
  const bool ok = colon == std::string::npos
                      ? number(text, r.min)
                      : number(text.substr(0, colon), r.min) && number(text.substr(colon + 1), r.max);
  TESSEL_USER_CHECK(ok) << what << " '" << text
                        << "': expected a batch size such as 8 or a range such as 1:64";
  if (colon == std::string::npos) r.max = r.min;
  check_batch_range(r, what + " '" + text + "'");
  return r;
}

void check_batch_range(const BatchRange& r, const std::string& what) {
  TESSEL_USER_CHECK(r.min >= 1) << what << ": the smallest batch is " << r.min
                                << ", expected at least 1";
  TESSEL_USER_CHECK(r.min <= r.max) << what << ": the range is empty (" << r.min << " > " << r.max
                                    << ")";
  TESSEL_USER_CHECK(r.opt == 0 || (r.opt >= r.min && r.opt <= r.max))
      << what << ": the opt batch " << r.opt << " is outside the range";
  TESSEL_USER_CHECK(r.every >= 0) << what << ": a profile every " << r.every
                                  << " batches, expected a positive step";
}

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
  const BatchRange range = requested_range(options);
  const device::DeviceInfo device = compile_target(target);
  const compiler::CompiledPlan compiled =
      range.empty()
          ? compiler::compile_plan(load_graph(model_path, options), compiler_options(options),
                                   device)
          : compiler::compile_profiles(
                [&](int64_t b) { return graph_at(model_path, options, b); },
                runtime_range(range), compiler_options(options), device);
  runtime::write_engine_file(compiled.plan, engine_path);
  const runtime::EnginePlan& p = compiled.plan;
  const runtime::PlanProfile& opt = *p.profile_for(p.batch.opt);
  CompileReport report;
  for (const runtime::PlanLaunch& l : opt.launches)
    report.launches.push_back({l.node, l.op, l.instruction, l.schedule});
  std::string batch = "batch " + runtime::batch_range_str(p.batch);
  for (const runtime::PlanProfile& q : p.profiles) report.profiles.push_back(q.batch);
  std::string kernels = std::to_string(opt.launches.size()) + " kernels (" +
                        std::to_string(runtime::tensor_core_launches(opt)) + " on Tensor Cores)";
  if (p.batch.dynamic()) {
    std::string list;
    for (int64_t b : report.profiles) list += (list.empty() ? "" : ", ") + std::to_string(b);
    batch += " (profiles " + list + "; opt " + std::to_string(p.batch.opt) + ")";
    kernels += " per run at batch " + std::to_string(p.batch.opt) + ", " +
               std::to_string(p.cubins.size()) + " distinct";
  }
  report.summary = "compiled " + model_path + " for " + device.str() + ", " +
                   precision_name(p.precision) + ", " + batch + ": " + kernels + ", arena " +
                   human_bytes(static_cast<int64_t>(p.arena_bytes)) + ", constants " +
                   human_bytes(static_cast<int64_t>(p.constants.size())) + ", in " +
                   std::to_string(std::llround(compiled.compile_ms)) + " ms -> " + engine_path;
  return report;
}

Session Session::open(const std::string& path, const Options& options) {
  if (runtime::is_engine_file(path)) {
    TESSEL_USER_CHECK(options.device == Device::kCuda)
        << path << " is a compiled engine: it runs on the GPU only";
    TESSEL_USER_CHECK(options.batch == 0 && options.batch_range.empty() &&
                      options.input_shapes.empty())
        << path << " is a compiled engine: batch and input shapes apply when compiling a model "
        << "(tessel compile)";
    // Read and checked before the GPU is looked for, so that a damaged file is reported as
    // such on any machine.
    runtime::EnginePlan plan = runtime::read_engine_file(path);
    std::string why;
    TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
    device::DeviceScope scope(options.gpu);
    auto impl = std::make_unique<Impl>();
    impl->device = Device::kCuda;
    impl->gpu = options.gpu;
    impl->engine.emplace(runtime::Engine::load(std::move(plan), path, options.progress));
    const runtime::EnginePlan& p = impl->engine->plan();
    impl->inputs = plan_tensors(p, true);
    impl->outputs = plan_tensors(p, false);
    impl->batch = {p.batch.min, p.batch.max, p.batch.opt};
    return Session(std::move(impl));
  }
  const BatchRange range = requested_range(options);
  if (options.device == Device::kCuda) {
    // Without a GPU, say so before spending time on importing and compiling.
    std::string why;
    TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
    device::check_gpu(options.gpu);  // a GPU that does not exist, before compiling
  }
  if (range.empty()) return from_graph(load_graph(path, options), options);

  auto impl = std::make_unique<Impl>();
  impl->device = options.device;
  impl->gpu = options.gpu;
  impl->batch = range;
  if (options.device == Device::kCpu) {
    // The reference executor runs any batch: each is the model imported at that batch. The
    // ends of the range are imported now, to refuse a model without a batch dimension early.
    impl->path = path;
    impl->options = options;
    for (int64_t b : {range.min, range.max})
      compiler::check_leads_with_batch(*impl->cpu_graph_at(b), b, runtime_range(range));
    impl->graph = *impl->cpu_graph_at(range.opt);
    impl->inputs = graph_tensors(*impl->graph, impl->graph->inputs);
    impl->outputs = graph_tensors(*impl->graph, impl->graph->outputs);
    if (range.min != range.max) {
      for (TensorInfo& t : impl->inputs) t.shape[0] = kDynamicBatch;
      for (TensorInfo& t : impl->outputs) t.shape[0] = kDynamicBatch;
    }
    return Session(std::move(impl));
  }
  // The engine's memory, modules, graphs and streams are made in its GPU's context.
  device::DeviceScope scope(options.gpu);
  const auto start = std::chrono::steady_clock::now();
  compiler::CompiledPlan compiled = compiler::compile_profiles(
      [&](int64_t b) { return graph_at(path, options, b); }, runtime_range(range),
      compiler_options(options), device::device_info());
  impl->engine.emplace(
      runtime::Engine::load(std::move(compiled.plan), "the engine", options.progress));
  impl->graph = std::move(compiled.graph);
  impl->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  impl->inputs = plan_tensors(impl->engine->plan(), true);
  impl->outputs = plan_tensors(impl->engine->plan(), false);
  return Session(std::move(impl));
}

Session Session::from_graph(const ir::Graph& graph, const Options& options) {
  TESSEL_USER_CHECK(options.batch_range.empty())
      << "a batch range needs the model file (Session::open): an imported graph has fixed shapes";
  auto impl = std::make_unique<Impl>();
  impl->device = options.device;
  if (options.device == Device::kCpu) {
    impl->graph = graph;
    impl->inputs = graph_tensors(graph, graph.inputs);
    impl->outputs = graph_tensors(graph, graph.outputs);
    impl->batch = static_range(impl->inputs);
    return Session(std::move(impl));
  }
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  TESSEL_USER_CHECK(device::cuda_available(&why)) << "no CUDA device: " << why;
  device::DeviceScope scope(options.gpu);
  impl->gpu = options.gpu;
  compiler::CompiledPlan compiled =
      compiler::compile_plan(graph, compiler_options(options), device::device_info());
  impl->engine.emplace(runtime::Engine::load(std::move(compiled.plan), "the engine", options.progress));
  impl->graph = std::move(compiled.graph);
  impl->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const runtime::EnginePlan& p = impl->engine->plan();
  impl->inputs = plan_tensors(p, true);
  impl->outputs = plan_tensors(p, false);
  impl->batch = {p.batch.min, p.batch.max, p.batch.opt};
  return Session(std::move(impl));
}

const std::vector<TensorInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return impl_->outputs; }
Device Session::device() const { return impl_->device; }
double Session::compile_ms() const { return impl_->compile_ms; }
runtime::Engine* Session::engine() const { return impl_->engine ? &*impl_->engine : nullptr; }
const ir::Graph* Session::graph() const { return impl_->graph ? &*impl_->graph : nullptr; }

BatchRange Session::batch_range() const { return impl_->batch; }

std::vector<int64_t> Session::profiles() const {
  std::vector<int64_t> r;
  if (impl_->engine)
    for (const runtime::PlanProfile& p : impl_->engine->plan().profiles) r.push_back(p.batch);
  return r;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  if (impl_->engine) {
    device::DeviceScope scope(impl_->gpu);
    return impl_->engine->run(inputs);
  }
  if (impl_->path.empty()) return runtime::cpu::run_graph(*impl_->graph, inputs);
  const int64_t batch = batch_of_inputs(inputs, impl_->inputs);
  check_batch(impl_->batch, batch);
  return runtime::cpu::run_graph(*impl_->cpu_graph_at(batch), inputs);
}

void copy_memory(void* dst, const void* src, size_t bytes) {
  device::copy(reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), bytes);
}

void copy_memory(const std::vector<MemoryCopy>& copies) {
  // Per thread and GPU (a stream and page-locked memory belong to the GPU current when they
  // were made): a stream and staging, grown to the largest batch.
  struct Staging {
    std::unique_ptr<device::Stream> stream;
    device::PinnedBuffer pinned;
  };
  thread_local std::map<int, Staging> staging_of;
  size_t staged = 0;
  for (const MemoryCopy& c : copies)
    if (c.dst_on_device && !c.src_on_device) staged += c.bytes;
  bool any_device = false;
  for (const MemoryCopy& c : copies) any_device = any_device || c.dst_on_device || c.src_on_device;
  Staging& staging = staging_of[device::current_gpu()];
  if (any_device && !staging.stream) staging.stream = std::make_unique<device::Stream>();
  if (staging.pinned.size() < staged) staging.pinned = device::PinnedBuffer(staged);
  std::byte* at = staging.pinned.data();
  for (const MemoryCopy& c : copies) {
    if (c.bytes == 0) continue;
    if (!c.dst_on_device && !c.src_on_device) {
      std::memcpy(c.dst, c.src, c.bytes);
      continue;
    }
    uint64_t src = reinterpret_cast<uint64_t>(c.src);
    if (c.dst_on_device && !c.src_on_device) {
      std::memcpy(at, c.src, c.bytes);
      src = reinterpret_cast<uint64_t>(at);
      at += c.bytes;
    }
    device::copy_async(reinterpret_cast<uint64_t>(c.dst), src, c.bytes, staging.stream->get());
  }
  if (any_device) staging.stream->synchronize();
}

std::vector<Tensor> Session::run_gathered(const std::vector<std::vector<Piece>>& inputs) {
  return collect(submit(inputs));
}

Session::Pending Session::submit(const std::vector<std::vector<Piece>>& inputs) {
  const std::vector<TensorInfo>& want = impl_->inputs;
  TESSEL_USER_CHECK(inputs.size() == want.size())
      << inputs.size() << " inputs given, the model has " << want.size();
  // Every piece of input i: its type, a leading dim and the input's trailing dims; the rows.
  std::vector<int64_t> rows(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = want[i];
    TESSEL_USER_CHECK(!t.shape.empty())
        << "input '" << t.name << "' has no batch dimension to gather along";
    TESSEL_USER_CHECK(!inputs[i].empty()) << "input '" << t.name << "' is given no pieces";
    for (const Piece& p : inputs[i]) {
      TESSEL_USER_CHECK(!p.on_device || impl_->engine)
          << "input '" << t.name << "': a piece in GPU memory needs a session on the GPU";
      const bool fits = p.dtype == t.dtype && p.shape.size() == t.shape.size() &&
                        !p.shape.empty() && p.shape[0] > 0 &&
                        std::equal(p.shape.begin() + 1, p.shape.end(), t.shape.begin() + 1);
      if (fits) {
        rows[i] += p.shape[0];
        continue;
      }
      std::string expected = std::string(dtype_name(t.dtype)) + "[rows";
      for (size_t k = 1; k < t.shape.size(); ++k) expected += "," + std::to_string(t.shape[k]);
      TESSEL_USER_ERROR() << "input '" << t.name << "': a piece is " << dtype_name(p.dtype)
                         << shape_str(p.shape) << ", expected " << expected << "]";
    }
    TESSEL_USER_CHECK(rows[i] == rows[0])
        << "input '" << t.name << "' has " << rows[i] << " rows, input '" << want[0].name
        << "' " << rows[0] << ": feed one batch";
  }
  const int64_t batch = rows[0];
  const bool dynamic = impl_->batch.min != impl_->batch.max;
  if (dynamic) check_batch(impl_->batch, batch);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape shape = shape_at(want[i], batch);
    TESSEL_USER_CHECK(shape[0] == batch)
        << "input '" << want[i].name << "' has " << batch << " rows, expected " << shape[0];
  }
  Pending pending;
  if (impl_->engine) {
    std::vector<std::vector<runtime::Engine::Rows>> pieces(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      for (const Piece& p : inputs[i]) pieces[i].push_back({p.data, p.shape[0], p.on_device});
    device::DeviceScope scope(impl_->gpu);
    const runtime::Engine::Ticket t = impl_->engine->submit(pieces, batch);
    pending.slot = t.slot;
    pending.serial = t.serial;
    return pending;
  }
  std::vector<Tensor> whole;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t(want[i].dtype, shape_at(want[i], batch));
    std::byte* at = t.raw();
    for (const Piece& p : inputs[i]) {
      const size_t bytes = t.nbytes() / static_cast<size_t>(batch) * static_cast<size_t>(p.shape[0]);
      if (bytes) std::memcpy(at, p.data, bytes);
      at += bytes;
    }
    whole.push_back(std::move(t));
  }
  pending.outputs = run(whole);
  return pending;
}

std::vector<Tensor> Session::collect(Pending run) {
  if (!impl_->engine) return std::move(run.outputs);
  device::DeviceScope scope(impl_->gpu);
  return impl_->engine->collect({run.slot, run.serial});
}

std::vector<DeviceTensor> Session::run_on_device(const std::vector<DeviceTensor>& inputs,
                                                 void* stream, std::vector<DeviceTensor> outputs) {
  TESSEL_USER_CHECK(impl_->engine)
      << "this session runs on the CPU: device tensors need a session on the GPU";
  const bool dynamic = impl_->batch.min != impl_->batch.max;
  TESSEL_USER_CHECK(inputs.size() == impl_->inputs.size())
      << inputs.size() << " inputs given, the model has " << impl_->inputs.size();
  // A static engine runs its own batch (the shapes are checked below).
  const int64_t batch = dynamic ? batch_of_inputs(inputs, impl_->inputs) : impl_->batch.min;
  if (dynamic) check_batch(impl_->batch, batch);
  TESSEL_USER_CHECK(outputs.empty() || outputs.size() == impl_->outputs.size())
      << outputs.size() << " outputs given, the model has " << impl_->outputs.size();
  device::DeviceScope scope(impl_->gpu);
  for (size_t i = 0; i < inputs.size(); ++i)
    check_run_tensor(inputs[i], impl_->inputs[i], batch, "input");
  if (outputs.empty()) {
    for (const TensorInfo& y : impl_->outputs)
      outputs.push_back(DeviceTensor::allocate(y.dtype, shape_at(y, batch)));
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    check_run_tensor(outputs[j], impl_->outputs[j], batch, "output");
  std::vector<uint64_t> in, out;
  for (const DeviceTensor& t : inputs) in.push_back(t.address());
  for (const DeviceTensor& t : outputs) out.push_back(t.address());
  impl_->engine->run_on(in, out, batch, stream);
  return outputs;
}

}  // namespace tessel
