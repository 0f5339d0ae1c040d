// Engine::load (a plan instantiated on the GPU: modules, regions, relocations, one captured CUDA
// graph), and running and timing.
#include "runtime/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "device/cuda_api.h"
#include "device/tensor_map.h"
#include "runtime/target.h"

namespace tessel::runtime {
namespace {

namespace rt = device;

rt::DeviceBuffer allocate(uint64_t bytes) {
  return rt::DeviceBuffer(static_cast<size_t>(std::max(bytes, kMinAllocation)));
}

// One launch with every address resolved: its parameter block, as the kernel takes it by
// value. The array is the largest block any kernel takes, so the driver, which copies as many
// bytes as the kernel's parameter needs, never reads past it.
struct BoundLaunch {
  void* function = nullptr;
  rt::LaunchConfig config;
  std::array<uint64_t, kMaxParamWords> words{};
  rt::TensorMapParam maps;  // a TMA kernel's second parameter, encoded over `words`
};

// Resolves a launch's parameter words (and the tensor maps over them) with `address`.
template <typename AddressFn>
void bind(const PlanLaunch& plan, AddressFn address, BoundLaunch* l) {
  for (size_t w = 0; w < plan.params.size(); ++w) l->words[w] = address(plan.params[w]);
  if (!plan.tensor_maps.empty()) l->maps = rt::encode_tensor_maps(plan.tensor_maps, l->words.data());
}

}  // namespace

struct Engine::Impl {
  EnginePlan plan;
  EngineStats stats;
  std::vector<std::shared_ptr<rt::Module>> modules;  // one per cubin
  rt::DeviceBuffer arena, constants, scratch;
  std::vector<rt::DeviceBuffer> workspaces, inputs, outputs;  // outputs: empty where shared
  std::vector<BoundLaunch> launches;
  std::unique_ptr<rt::CapturedGraph> cuda_graph;

  void load_modules(const std::string& what, const ProgressFn& progress);
  void allocate_regions();
  uint64_t address(const Relocation& r) const;
  void enqueue(const BoundLaunch& l, void* stream) const;
};

void Engine::Impl::load_modules(const std::string& what, const ProgressFn& progress) {
  const int total = static_cast<int>(plan.cubins.size());
  for (int i = 0; i < total; ++i) {
    if (progress) progress("loading kernels", i, total);
    try {
      modules.push_back(rt::Module::load(plan.cubins[static_cast<size_t>(i)]));
    } catch (const rt::DriverError& e) {
      // The checksum guards against damage, not against a file made by something else.
      TESSEL_USER_ERROR() << what << ": kernel binary " << i << " does not load: " << e.what();
    }
  }
  if (progress) progress("loading kernels", total, total);
  for (const PlanLaunch& l : plan.launches) {
    BoundLaunch b;
    b.function = modules[l.cubin]->function(l.entry);
    for (int d = 0; d < 3; ++d) {
      b.config.grid[d] = l.grid[static_cast<size_t>(d)];
      b.config.block[d] = l.block[static_cast<size_t>(d)];
    }
    b.config.smem_bytes = l.smem_bytes;
    launches.push_back(b);
  }
}

void Engine::Impl::allocate_regions() {
  arena = allocate(plan.arena_bytes);
  scratch = allocate(plan.scratch_bytes);
  constants = allocate(plan.constants.size());
  constants.upload(plan.constants.data(), plan.constants.size());
  for (uint64_t bytes : plan.workspace_bytes) {
    workspaces.push_back(allocate(bytes));
    workspaces.back().fill_bytes(0);  // split-K tile counters start at zero
  }
  for (uint32_t i = 0; i < plan.inputs.size(); ++i)
    inputs.push_back(allocate(region_bytes(plan, Region::kInput, i)));
  for (uint32_t j = 0; j < plan.outputs.size(); ++j) {
    const Relocation& s = plan.outputs[j].source;
    const bool own = s.region == Region::kOutput && s.index == j;
    outputs.push_back(own ? allocate(region_bytes(plan, Region::kOutput, j)) : rt::DeviceBuffer());
  }
}

uint64_t Engine::Impl::address(const Relocation& r) const {
  switch (r.region) {
    case Region::kNull:
      return 0;
    case Region::kArena:
      return arena.ptr() + r.offset;
    case Region::kConstants:
      return constants.ptr() + r.offset;
    case Region::kScratch:
      return scratch.ptr() + r.offset;
    case Region::kWorkspace:
      return workspaces.at(r.index).ptr() + r.offset;
    case Region::kInput:
      return inputs.at(r.index).ptr() + r.offset;
    case Region::kOutput:
      return outputs.at(r.index).ptr() + r.offset;
  }
  TESSEL_ICHECK(false) << "unknown region " << static_cast<int>(r.region);
  return 0;
}

void Engine::Impl::enqueue(const BoundLaunch& l, void* stream) const {
  rt::LaunchConfig config = l.config;
  config.stream = stream;
  // The kernel's one parameter is the whole block; cuLaunchKernel copies it (into the graph
  // node, under capture).
  void* args[] = {const_cast<uint64_t*>(l.words.data()), const_cast<rt::TensorMapParam*>(&l.maps)};
  rt::launch(l.function, config, args);
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::load(EnginePlan plan, const std::string& what, const ProgressFn& progress) {
  // A plan read from a file was checked by parse_plan; one that fails here was built wrong.
  const std::optional<std::string> bad = check_plan(plan);
  TESSEL_ICHECK(!bad) << what << ": " << *bad;
  std::string why;
  TESSEL_USER_CHECK(rt::cuda_available(&why)) << "no CUDA device: " << why;
  check_plan_device(plan, rt::device_info(), what);

  auto impl = std::make_unique<Impl>();
  Impl& e = *impl;
  e.plan = std::move(plan);
  e.load_modules(what, progress);
  e.allocate_regions();
  for (size_t i = 0; i < e.launches.size(); ++i)
    bind(e.plan.launches[i], [&e](const Relocation& r) { return e.address(r); }, &e.launches[i]);
  e.cuda_graph = std::make_unique<rt::CapturedGraph>(
      [&e](void* stream) {
        for (const BoundLaunch& l : e.launches) e.enqueue(l, stream);
      },
      1);

  EngineStats& s = e.stats;
  s.kernels = static_cast<int>(e.plan.launches.size());
  s.tensor_core_kernels = tensor_core_launches(e.plan);
  s.arena_bytes = static_cast<int64_t>(e.plan.arena_bytes);
  s.constant_bytes = static_cast<int64_t>(e.plan.constants.size());
  for (const rt::DeviceBuffer& b : e.inputs) s.io_bytes += static_cast<int64_t>(b.size());
  for (const rt::DeviceBuffer& b : e.outputs) s.io_bytes += static_cast<int64_t>(b.size());
  s.workspace_bytes = static_cast<int64_t>(e.scratch.size());
  for (const rt::DeviceBuffer& b : e.workspaces)
    s.workspace_bytes += static_cast<int64_t>(b.size());
  s.device_bytes = static_cast<int64_t>(device_bytes(e.plan));
  return Engine(std::move(impl));
}

std::vector<Tensor> Engine::run(const std::vector<Tensor>& inputs) {
  const EnginePlan& plan = impl_->plan;
  TESSEL_USER_CHECK(inputs.size() == plan.inputs.size())
      << "engine run: " << inputs.size() << " inputs given, the model has " << plan.inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const PlanTensor& want = plan.inputs[i];
    TESSEL_USER_CHECK(inputs[i].dtype() == want.dtype && inputs[i].shape() == want.shape)
        << "engine run: input " << i << " '" << want.name << "' is " << inputs[i].type_str()
        << ", expected " << dtype_name(want.dtype) << shape_str(want.shape);
    impl_->inputs[i].upload(inputs[i].raw(), inputs[i].nbytes());
  }
  impl_->cuda_graph->replay();
  impl_->cuda_graph->synchronize();

  std::vector<Tensor> outputs;
  for (const PlanTensor& y : plan.outputs) {
    Tensor t(y.dtype, y.shape);
    const Relocation& s = y.source;
    if (t.nbytes() != 0) {
      if (s.region == Region::kConstants)
        std::memcpy(t.raw(), plan.constants.data() + s.offset, t.nbytes());
      else if (s.region == Region::kInput)
        std::memcpy(t.raw(), inputs[s.index].raw(), t.nbytes());
      else
        impl_->outputs[s.index].download(t.raw(), t.nbytes());
    }
    outputs.push_back(std::move(t));
  }
  return outputs;
}

void Engine::run_on(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                    void* stream) {
  const EnginePlan& plan = impl_->plan;
  TESSEL_USER_CHECK(inputs.size() == plan.inputs.size() && outputs.size() == plan.outputs.size())
      << "engine run: " << inputs.size() << " inputs and " << outputs.size()
      << " outputs given, the model has " << plan.inputs.size() << " and " << plan.outputs.size();
  // The kernels' vector loads and stores assume what cuMemAlloc gives the engine's own buffers
  // at least to this degree.
  static constexpr uint64_t kAlignment = 16;
  auto check_aligned = [](uint64_t address, const PlanTensor& t, const char* what) {
    TESSEL_USER_CHECK(address % kAlignment == 0)
        << "engine run: " << what << " '" << t.name << "' at device address 0x" << std::hex
        << address << " is not " << std::dec << kAlignment << "-byte aligned";
  };
  for (size_t i = 0; i < inputs.size(); ++i) check_aligned(inputs[i], plan.inputs[i], "input");
  for (size_t j = 0; j < outputs.size(); ++j) check_aligned(outputs[j], plan.outputs[j], "output");

  auto address = [&](const Relocation& r) {
    if (r.region == Region::kInput) return inputs.at(r.index) + r.offset;
    if (r.region == Region::kOutput) return outputs.at(r.index) + r.offset;
    return impl_->address(r);
  };
  for (size_t i = 0; i < impl_->launches.size(); ++i) {
    BoundLaunch l = impl_->launches[i];
    bind(plan.launches[i], address, &l);
    impl_->enqueue(l, stream);
  }
  // Outputs the kernels do not write: a constant, an input passed through, an output listed
  // twice. After the kernels, so that a second listing copies the value they wrote.
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const PlanTensor& y = plan.outputs[j];
    const Relocation& s = y.source;
    if (s.region == Region::kOutput && s.index == j) continue;
    rt::copy_on_device(outputs[j], address(s), tensor_bytes(y.dtype, y.shape).value_or(0), stream);
  }
}

std::vector<float> Engine::time_replays(int warmup, int reps) {
  return rt::time_graph_replays(*impl_->cuda_graph, warmup, reps);
}

std::vector<float> Engine::profile_launches(int reps) {
  std::vector<float> median_ms;
  for (const BoundLaunch& l : impl_->launches) {
    rt::CapturedGraph copies([&](void* stream) { impl_->enqueue(l, stream); }, kProfileCopies);
    const std::vector<float> ms = rt::time_graph_replays(copies, /*warmup=*/2, reps);
    median_ms.push_back(ms[ms.size() / 2]);
  }
  return median_ms;
}

const EngineStats& Engine::stats() const { return impl_->stats; }
const EnginePlan& Engine::plan() const { return impl_->plan; }


}  // namespace tessel::runtime
