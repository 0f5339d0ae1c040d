// Engine::compile and Engine::run: passes, memory, constants, kernels, one captured CUDA graph.
#include "runtime/cuda_engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "codegen/cuda/contraction_kernel.h"
#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/lowering.h"
#include "runtime/cuda_engine/node_kernels.h"

namespace tessel::runtime::cuda_engine {
namespace {

namespace rt = runtime::cuda;
constexpr int64_t kAlign = passes::MemoryPlan::kAlignment;

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// A buffer of at least one aligned block: cuMemAlloc refuses zero bytes, and a zero-element
// tensor still needs a valid address to pass.
rt::DeviceBuffer allocate(int64_t bytes) {
  return rt::DeviceBuffer(static_cast<size_t>(std::max(bytes, kAlign)));
}

int64_t value_bytes(const ir::Graph& g, ir::ValueId v) {
  const ir::TensorType& t = g.type(v);
  return numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
}

// The op kernels' parameter block (op_kernels.h): device addresses of inputs and outputs.
struct OpParams {
  uint64_t in[8];
  uint64_t out[4];
};

// The constants the kernels read, packed 256-byte aligned into one host image. A contraction's
// bias is read as an f32 vector whatever its stored dtype, so it gets an f32 copy when needed.
class ConstantImage {
 public:
  int64_t add(const ir::Graph& g, ir::ValueId v, bool as_f32) {
    auto [it, fresh] = offsets_.try_emplace({v, as_f32}, 0);
    if (!fresh) return it->second;
    const Tensor& data = *g.value(v).data;
    const Tensor t = as_f32 && data.dtype() != DType::kF32 ? data.cast(DType::kF32) : data;
    it->second = static_cast<int64_t>(bytes_.size());
    bytes_.resize(static_cast<size_t>(align_up(it->second + static_cast<int64_t>(t.nbytes()))));
    if (t.nbytes() != 0) std::memcpy(bytes_.data() + it->second, t.raw(), t.nbytes());
    return it->second;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::map<std::pair<ir::ValueId, bool>, int64_t> offsets_;
  std::vector<std::byte> bytes_;
};

// One node's launch with every address resolved.
struct Launch {
  const NodeKernel* kernel = nullptr;
  codegen::cuda::KernelArgs args;  // contractions
  OpParams params{};               // op kernels
};

}  // namespace

struct Engine::Impl {
  ir::Graph graph;
  EngineStats stats;
  std::vector<NodeKernel> kernels;
  rt::DeviceBuffer arena, constants, scratch;
  std::map<const codegen::cuda::ContractionKernel*, rt::DeviceBuffer> workspaces;  // split-K
  std::map<ir::ValueId, rt::DeviceBuffer> io;  // graph inputs and outputs
  std::vector<Launch> launches;
  std::unique_ptr<rt::CapturedGraph> cuda_graph;

  // Lays out activations, constants and I/O buffers, and resolves every launch's addresses.
  void bind(const passes::MemoryPlan& plan);
  void capture();
};

void Engine::Impl::bind(const passes::MemoryPlan& plan) {
  const ir::Graph& g = graph;
  for (ir::ValueId v : g.inputs) io.try_emplace(v, allocate(value_bytes(g, v)));
  for (ir::ValueId v : g.outputs)
    if (!g.value(v).is_constant()) io.try_emplace(v, allocate(value_bytes(g, v)));
  for (const auto& [v, buf] : io) stats.io_bytes += static_cast<int64_t>(buf.size());

  // A node output nobody reads (a Split's unused piece) is not in the plan; its writes go to a
  // scratch buffer that is never read.
  int64_t scratch_bytes = 0;
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId v : n.outputs)
      if (plan.buffers[v].offset < 0 && !io.count(v))
        scratch_bytes = std::max(scratch_bytes, value_bytes(g, v));
  arena = allocate(plan.arena_bytes);
  scratch = allocate(scratch_bytes);
  stats.arena_bytes = plan.arena_bytes;

  ConstantImage image;
  std::vector<std::map<int, int64_t>> constant_offset(g.nodes.size());  // node -> input -> offset
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const NodeKernel& k = kernels[i];
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const ir::ValueId v = n.inputs[j];
      if (v == ir::kNoValue || !g.value(v).is_constant()) continue;
      const bool bias = k.contraction && static_cast<int>(j) == kBiasInput;
      constant_offset[i][static_cast<int>(j)] = image.add(g, v, bias);
    }
  }
  constants = allocate(static_cast<int64_t>(image.bytes().size()));
  if (!image.bytes().empty()) constants.upload(image.bytes().data(), image.bytes().size());
  stats.constant_bytes = static_cast<int64_t>(image.bytes().size());

  auto address = [&](size_t node, int input_or_output, bool is_input) -> uint64_t {
    const ir::Node& n = g.nodes[node];
    const ir::ValueId v = is_input ? n.inputs[input_or_output] : n.outputs[input_or_output];
    if (v == ir::kNoValue) return 0;
    if (auto it = io.find(v); it != io.end()) return it->second.ptr();
    if (is_input && g.value(v).is_constant())
      return constants.ptr() + static_cast<uint64_t>(constant_offset[node].at(input_or_output));
    const int64_t offset = plan.buffers[v].offset;
    if (offset < 0) return scratch.ptr();
    return arena.ptr() + static_cast<uint64_t>(offset);
  };

  // A split-K workspace per distinct kernel, zeroed once: a launch leaves its own tile counters
  // zero for the next launch of the same kernel (contraction_kernel.h), and the nodes sharing a
  // kernel run one after another on one stream. Another kernel could place its counters where
  // this one leaves partial sums, so kernels do not share.
  auto workspace_of = [&](const codegen::cuda::ContractionKernel& k) -> uint64_t {
    const size_t bytes = k.source().workspace_bytes;
    if (bytes == 0) return 0;
    auto [it, fresh] = workspaces.try_emplace(&k);
    if (fresh) {
      it->second = allocate(static_cast<int64_t>(bytes));
      it->second.fill_bytes(0);
    }
    return it->second.ptr();
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    Launch l;
    l.kernel = &kernels[i];
    if (l.kernel->contraction) {
      const uint64_t x = address(i, 0, true), w = address(i, 1, true);
      l.args.a = l.kernel->operands_swapped ? w : x;
      l.args.b = l.kernel->operands_swapped ? x : w;
      l.args.c = address(i, 0, false);
      for (int input : l.kernel->extra_inputs) {
        const ir::ValueId v = n.inputs.at(input);
        TESSEL_USER_CHECK(input != kBiasInput || g.type(v).dtype == DType::kF32 ||
                          g.value(v).is_constant())
            << n.label() << ": a bias B of dtype " << dtype_name(g.type(v).dtype)
            << " that is not a constant; the GPU epilogue reads an f32 bias";
        l.args.extra.push_back(address(i, input, true));
      }
      l.args.workspace = workspace_of(*l.kernel->contraction);
    } else {
      TESSEL_USER_CHECK(n.inputs.size() <= 8 && n.outputs.size() <= 4)
          << n.label() << ": " << n.inputs.size() << " inputs and " << n.outputs.size()
          << " outputs; GPU op kernels take at most 8 and 4";
      for (size_t j = 0; j < n.inputs.size(); ++j) l.params.in[j] = address(i, int(j), true);
      for (size_t j = 0; j < n.outputs.size(); ++j) l.params.out[j] = address(i, int(j), false);
    }
    launches.push_back(std::move(l));
  }
}

void Engine::Impl::capture() {
  cuda_graph = std::make_unique<rt::CapturedGraph>(
      [this](void* stream) {
        for (const Launch& l : launches) {
          if (l.kernel->contraction) {
            l.kernel->contraction->launch(l.args, stream);
          } else {
            rt::LaunchConfig config = l.kernel->config;
            config.stream = stream;
            OpParams params = l.params;  // cuLaunchKernel copies it into the graph node
            void* args[] = {&params};
            rt::launch(l.kernel->function, config, args);
          }
        }
      },
      1);
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::compile(const ir::Graph& imported, const EngineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  TESSEL_USER_CHECK(rt::cuda_available(&why)) << "no CUDA device: " << why;

  auto impl = std::make_unique<Impl>();
  ir::Graph g = imported;
  ir::infer_types(g, ir::OpRegistry::global());
  g = passes::run_passes(std::move(g), passes::gpu_pipeline({.precision = options.precision}));
  ir::infer_types(g, ir::OpRegistry::global());
  ir::verify(g, ir::OpRegistry::global());
  impl->graph = std::move(g);

  const passes::MemoryPlan plan = passes::plan_memory(impl->graph);
  const std::string bad_plan = passes::verify_plan(impl->graph, plan);
  TESSEL_ICHECK(bad_plan.empty()) << "memory plan: " << bad_plan;

  impl->kernels = build_node_kernels(impl->graph, options, rt::device_info());
  impl->bind(plan);
  impl->capture();

  EngineStats& s = impl->stats;
  s.kernels = static_cast<int>(impl->kernels.size());
  s.tensor_core_kernels = static_cast<int>(std::count_if(
      impl->kernels.begin(), impl->kernels.end(), [](const NodeKernel& k) { return k.tensor_cores; }));
  s.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Engine(std::move(impl));
}

std::vector<Tensor> Engine::run(const std::vector<Tensor>& inputs) {
  const ir::Graph& g = impl_->graph;
  TESSEL_USER_CHECK(inputs.size() == g.inputs.size())
      << "engine run: " << inputs.size() << " inputs given, the model has " << g.inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = g.value(g.inputs[i]);
    TESSEL_USER_CHECK(inputs[i].dtype() == v.type.dtype && inputs[i].shape() == v.type.shape)
        << "engine run: input " << i << " '" << v.name << "' is " << inputs[i].type_str()
        << ", expected " << v.type.str();
    if (inputs[i].nbytes() != 0) impl_->io.at(g.inputs[i]).upload(inputs[i].raw(), inputs[i].nbytes());
  }
  impl_->cuda_graph->replay();
  impl_->cuda_graph->synchronize();

  std::vector<Tensor> outputs;
  for (ir::ValueId id : g.outputs) {
    const ir::Value& v = g.value(id);
    if (v.is_constant()) {
      outputs.push_back(v.data->clone());
      continue;
    }
    Tensor t(v.type.dtype, v.type.shape);
    if (t.nbytes() != 0) impl_->io.at(id).download(t.raw(), t.nbytes());
    outputs.push_back(std::move(t));
  }
  return outputs;
}

std::vector<float> Engine::time_replays(int warmup, int reps) {
  return rt::time_graph_replays(*impl_->cuda_graph, warmup, reps);
}

const EngineStats& Engine::stats() const { return impl_->stats; }
const ir::Graph& Engine::graph() const { return impl_->graph; }

}  // namespace tessel::runtime::cuda_engine
