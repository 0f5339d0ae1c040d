// Engine::load (a plan instantiated on the GPU: modules, regions, relocations, one captured CUDA
// graph), and running and timing.
#include "runtime/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "device/cuda_api.h"
#include "device/tensor_map.h"
#include "runtime/batch_split.h"
#include "runtime/parallel_copy.h"
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
  if (!plan.tensor_maps.empty()) l->maps = rt::encode_tensor_maps(plan.tensor_maps, l->words.data(), l->words.size());
}

}  // namespace

// A profile instantiated: its launches bound to the engine's regions, and its CUDA graph.
struct BoundProfile {
  std::vector<BoundLaunch> launches;
  std::unique_ptr<rt::CapturedGraph> graph;
};

// A pipelined run's own memory (Engine::submit): its inputs staged in page-locked memory and
// uploaded to device buffers of its own, whole batches at the range's maximum, and its outputs
// downloaded into page-locked memory; events mark its uploads and its run.
struct RunSlot {
  bool made = false;
  rt::PinnedBuffer staging;  // the inputs, then the outputs; empty where pinning failed
  std::vector<std::byte*> staged_in, staged_out;  // per input, per output
  std::vector<rt::DeviceBuffer> inputs;
  std::unique_ptr<rt::Event> uploaded, done;
  // The run it holds (busy from submit to collect).
  bool busy = false;
  uint64_t serial = 0;
  int64_t batch = 0;
  std::vector<BatchChunk> chunks;  // how it runs (split_batch), for collect too
  std::vector<Tensor> outputs;     // where the run was synchronous (no page-locked memory)
  bool finished = false;
};

struct Engine::Impl {
  EnginePlan plan;
  EngineStats stats;
  std::vector<std::shared_ptr<rt::Module>> modules;  // one per cubin
  rt::DeviceBuffer arena, constants, scratch;
  std::vector<rt::DeviceBuffer> workspaces, inputs, outputs;  // outputs: empty where shared
  std::vector<BoundProfile> profiles;
  // Host runs (submit/collect): the slots of the runs in flight (the first free one taken);
  // the threads that copy a batch's host pieces into a slot's staging; the copies on one
  // stream, the runs on another (declared last: destroyed first, each waiting for its work,
  // before the memory that work uses is freed). All made at the first host run (never, for an
  // engine run on device tensors only).
  std::array<RunSlot, kPipelineDepth> slots;
  std::unique_ptr<ParallelCopy> copier;
  std::unique_ptr<rt::Stream> copy_stream, run_stream;
  uint64_t serial = 0;
  std::mutex slots_mutex;
  std::condition_variable slot_freed;

  void load_modules(const std::string& what, const ProgressFn& progress);
  void allocate_regions();
  uint64_t address(const Relocation& r) const;
  void enqueue(const BoundLaunch& l, void* stream) const;
  // The profile index compiled for `batch` (0: the opt batch); UserError for another batch.
  size_t profile_index(int64_t batch, const char* what) const;
  // The largest batch a run takes, and a tensor's bytes at `batch`.
  int64_t max_batch() const;
  uint64_t bytes_at(const PlanTensor& t, int64_t batch) const;
  // Makes `slot`'s memory (and the streams and copier) at its first use.
  void make_slot(RunSlot& slot);
  void release(RunSlot& slot);
};

int64_t Engine::Impl::max_batch() const {
  return plan.batch.dynamic() ? plan.batch.max : plan.batch.min;
}

uint64_t Engine::Impl::bytes_at(const PlanTensor& t, int64_t batch) const {
  const uint64_t bytes = tensor_bytes(t.dtype, t.shape).value_or(0);
  if (!plan.batch.dynamic() || t.shape.empty()) return bytes;
  return bytes / static_cast<uint64_t>(t.shape[0]) * static_cast<uint64_t>(batch);
}

void Engine::Impl::make_slot(RunSlot& slot) {
  if (slot.made) return;
  if (!run_stream) {
    copy_stream = std::make_unique<rt::Stream>();
    run_stream = std::make_unique<rt::Stream>();
    copier = std::make_unique<ParallelCopy>(ParallelCopy::default_workers());
  }
  const PlanProfile& first = plan.profiles.front();
  const int64_t batch = max_batch();
  size_t bytes = 0;
  for (const PlanTensor& t : first.inputs) bytes += bytes_at(t, batch);
  for (const PlanTensor& t : first.outputs) bytes += bytes_at(t, batch);
  for (const PlanTensor& t : first.inputs) slot.inputs.push_back(allocate(bytes_at(t, batch)));
  try {
    slot.staging = rt::PinnedBuffer(bytes);
  } catch (const rt::DriverError&) {  // the run goes synchronously through pageable memory
  }
  if (slot.staging.data()) {
    std::byte* at = slot.staging.data();
    for (const PlanTensor& t : first.inputs)
      slot.staged_in.push_back(std::exchange(at, at + bytes_at(t, batch)));
    for (const PlanTensor& t : first.outputs)
      slot.staged_out.push_back(std::exchange(at, at + bytes_at(t, batch)));
  }
  slot.uploaded = std::make_unique<rt::Event>();
  slot.done = std::make_unique<rt::Event>();
  slot.made = true;
}

void Engine::Impl::release(RunSlot& slot) {
  {
    std::lock_guard lock(slots_mutex);
    slot.busy = false;
    slot.outputs.clear();
  }
  slot_freed.notify_all();
}

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
  for (const PlanProfile& p : plan.profiles) {
    BoundProfile bound;
    for (const PlanLaunch& l : p.launches) {
      BoundLaunch b;
      b.function = modules[l.cubin]->function(l.entry);
      for (int d = 0; d < 3; ++d) {
        b.config.grid[d] = l.grid[static_cast<size_t>(d)];
        b.config.block[d] = l.block[static_cast<size_t>(d)];
      }
      b.config.smem_bytes = l.smem_bytes;
      b.config.programmatic = l.grid_dependent;
      bound.launches.push_back(b);
    }
    profiles.push_back(std::move(bound));
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
  // Every profile runs in the same input and output buffers, sized for the largest. A padded
  // run leaves the items past the batch as they are: zeros at first, so never uninitialized.
  const PlanProfile& first = plan.profiles.front();
  for (uint32_t i = 0; i < first.inputs.size(); ++i) {
    inputs.push_back(allocate(io_buffer_bytes(plan, Region::kInput, i)));
    inputs.back().fill_bytes(0);
  }
  for (uint32_t j = 0; j < first.outputs.size(); ++j) {
    const Relocation& s = first.outputs[j].source;
    const bool own = s.region == Region::kOutput && s.index == j;
    outputs.push_back(own ? allocate(io_buffer_bytes(plan, Region::kOutput, j))
                          : rt::DeviceBuffer());
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

size_t Engine::Impl::profile_index(int64_t batch, const char* what) const {
  const int64_t b = batch == 0 ? plan.batch.opt : batch;
  const std::string bad = batch_error(plan, b);
  TESSEL_USER_CHECK(bad.empty()) << what << ": " << bad;
  for (size_t k = 0; k < plan.profiles.size(); ++k)
    if (plan.profiles[k].batch == b) return k;
  std::string batches;
  for (const PlanProfile& p : plan.profiles)
    batches += (batches.empty() ? "" : ", ") + std::to_string(p.batch);
  TESSEL_USER_ERROR() << what << ": batch " << b << " is not one of the engine's profiles ("
                      << batches << ")";
  return 0;
}

namespace {

// The bytes of `t` that chunk `c` covers: [offset, offset + bytes). In a dynamic engine every
// input and output leads with the batch, so a chunk is a run of whole items; a static engine
// runs whole tensors in one chunk.
struct Span {
  uint64_t offset = 0, bytes = 0;
};
Span span(const EnginePlan& plan, const PlanTensor& t, const BatchChunk& c) {
  const uint64_t bytes = tensor_bytes(t.dtype, t.shape).value_or(0);
  if (!plan.batch.dynamic()) return {0, bytes};
  const uint64_t item = bytes / static_cast<uint64_t>(t.shape[0]);
  return {static_cast<uint64_t>(c.offset) * item, static_cast<uint64_t>(c.items) * item};
}

// "f32[3,3,32,32]": `t` at `batch`.
std::string type_at(const PlanTensor& t, int64_t batch, bool dynamic) {
  Shape s = t.shape;
  if (dynamic && !s.empty()) s[0] = batch;
  return std::string(dtype_name(t.dtype)) + shape_str(s);
}

// Calls fn(src, bytes, at, device) for each part of [offset, offset + bytes) of a tensor given
// in `pieces` (rows of row_bytes each, concatenated): src the part's bytes (a device address
// where `device`), `at` where it starts relative to `offset`.
template <typename Fn>
void for_each_part(const std::vector<Engine::Rows>& pieces, uint64_t row_bytes,
                   uint64_t offset, uint64_t bytes, Fn fn) {
  uint64_t at = 0;
  for (const Engine::Rows& piece : pieces) {
    const uint64_t end = at + static_cast<uint64_t>(piece.rows) * row_bytes;
    const uint64_t lo = std::max(at, offset), hi = std::min(end, offset + bytes);
    if (lo < hi)
      fn(static_cast<const char*>(piece.data) + (lo - at), hi - lo, lo - offset, piece.device);
    at = end;
  }
}

}  // namespace

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
  for (size_t k = 0; k < e.profiles.size(); ++k) {
    BoundProfile& bound = e.profiles[k];
    const std::vector<PlanLaunch>& launches = e.plan.profiles[k].launches;
    for (size_t i = 0; i < launches.size(); ++i)
      bind(launches[i], [&e](const Relocation& r) { return e.address(r); }, &bound.launches[i]);
    bound.graph = std::make_unique<rt::CapturedGraph>(
        [&bound, &e](void* stream) {
          for (const BoundLaunch& l : bound.launches) e.enqueue(l, stream);
        },
        1);
  }

  EngineStats& s = e.stats;
  const PlanProfile& opt = *e.plan.profile_for(e.plan.batch.opt);
  s.profiles = static_cast<int>(e.plan.profiles.size());
  s.kernels = static_cast<int>(opt.launches.size());
  s.tensor_core_kernels = tensor_core_launches(opt);
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
  const PlanProfile& first = plan.profiles.front();
  const bool dynamic = plan.batch.dynamic();
  TESSEL_USER_CHECK(inputs.size() == first.inputs.size())
      << "engine run: " << inputs.size() << " inputs given, the model has " << first.inputs.size();
  // The batch: the first input's leading extent (a static engine's own).
  int64_t batch = plan.batch.min;
  if (dynamic && !inputs.empty() && !inputs[0].shape().empty()) {
    batch = inputs[0].shape()[0];
    const std::string bad = batch_error(plan, batch);
    TESSEL_USER_CHECK(bad.empty()) << "engine run: input 0 '" << first.inputs[0].name << "': "
                                   << bad;
  }
  std::vector<std::vector<Rows>> pieces;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const PlanTensor& want = first.inputs[i];
    Shape shape = want.shape;
    if (dynamic) shape[0] = batch;
    TESSEL_USER_CHECK(inputs[i].dtype() == want.dtype && inputs[i].shape() == shape)
        << "engine run: input " << i << " '" << want.name << "' is " << inputs[i].type_str()
        << ", expected " << type_at(want, batch, dynamic);
    pieces.emplace_back();
    const int64_t rows = shape.empty() ? 1 : shape[0];
    if (rows > 0) pieces.back().push_back({inputs[i].raw(), rows});  // none of an empty one
  }
  return run_gathered(pieces, batch);
}

std::vector<Tensor> Engine::run_gathered(const std::vector<std::vector<Rows>>& inputs,
                                         int64_t batch) {
  return collect(submit(inputs, batch));
}

Engine::Ticket Engine::submit(const std::vector<std::vector<Rows>>& inputs, int64_t batch) {
  Impl& e = *impl_;
  const EnginePlan& plan = e.plan;
  const PlanProfile& first = plan.profiles.front();
  const bool dynamic = plan.batch.dynamic();
  TESSEL_USER_CHECK(inputs.size() == first.inputs.size())
      << "engine run: " << inputs.size() << " inputs given, the model has " << first.inputs.size();
  const std::string bad = batch_error(plan, batch);
  TESSEL_USER_CHECK(bad.empty()) << "engine run: " << bad;
  // Each input's bytes per leading row at this batch; its pieces must cover every row.
  std::vector<uint64_t> row_bytes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const PlanTensor& want = first.inputs[i];
    const int64_t rows = want.shape.empty() ? 1 : dynamic ? batch : want.shape[0];
    int64_t given = 0;
    for (const Rows& p : inputs[i]) {
      TESSEL_USER_CHECK(p.rows > 0 && p.data) << "engine run: input " << i << " '" << want.name
                                              << "' has an empty piece";
      given += p.rows;
    }
    TESSEL_USER_CHECK(given == rows)
        << "engine run: input " << i << " '" << want.name << "' is given " << given
        << " rows in " << inputs[i].size() << " pieces, expected " << rows << " ("
        << type_at(want, batch, dynamic) << ")";
    row_bytes.push_back(tensor_bytes(want.dtype, want.shape).value_or(0) /
                        static_cast<uint64_t>(std::max<int64_t>(
                            1, want.shape.empty() ? 1 : want.shape[0])));
  }

  // The first free slot: runs one at a time only ever make and use the first.
  size_t k = 0;
  {
    std::unique_lock lock(e.slots_mutex);
    e.slot_freed.wait(lock, [&] {
      for (k = 0; k < kPipelineDepth; ++k)
        if (!e.slots[k].busy) return true;
      return false;
    });
    e.slots[k].busy = true;
    e.slots[k].serial = ++e.serial;
  }
  RunSlot& slot = e.slots[k];
  try {
    e.make_slot(slot);
    slot.batch = batch;
    slot.chunks = split_batch(plan, batch);
    slot.finished = false;
    void* const copies = e.copy_stream->get();
    void* const runs = e.run_stream->get();
    const bool pinned = slot.staging.data() != nullptr;

    // The whole batch into the slot's device inputs, on the copy stream: device pieces device
    // to device, host pieces in 1 MiB blocks that the copier's threads stage and whose uploads
    // start, in order, as soon as each is there.
    static constexpr uint64_t kStageBlock = uint64_t{1} << 20;
    struct Upload {
      size_t input;
      uint64_t at, bytes;
    };
    std::vector<ParallelCopy::Block> blocks;
    std::vector<Upload> uploads;
    for (size_t i = 0; i < inputs.size(); ++i) {
      rt::DeviceBuffer& dst = slot.inputs[i];
      for_each_part(inputs[i], row_bytes[i], 0, e.bytes_at(first.inputs[i], batch),
                    [&](const char* src, uint64_t bytes, uint64_t at, bool device) {
                      if (device) {
                        rt::copy_async(dst.ptr() + at, reinterpret_cast<uint64_t>(src), bytes,
                                       copies);
                      } else if (!pinned) {  // staged by the driver, in stream order
                        dst.upload_async(src, bytes, at, copies);
                      } else {
                        for (uint64_t b = 0; b < bytes; b += kStageBlock) {
                          const uint64_t n = std::min(kStageBlock, bytes - b);
                          blocks.push_back({slot.staged_in[i] + at + b, src + b, n});
                          uploads.push_back({i, at + b, n});
                        }
                      }
                    });
    }
    e.copier->run(blocks, [&](size_t b) {
      const Upload& u = uploads[b];
      slot.inputs[u.input].upload_async(slot.staged_in[u.input] + u.at, u.bytes, u.at, copies);
    });
    slot.uploaded->record(copies);
    slot.uploaded->make_wait(runs);

    // Each chunk on the run stream: its rows into the engine's input buffers, its graph, its
    // outputs down into the slot's staging (without it, into the outputs after a wait).
    if (!pinned) {
      slot.outputs.clear();
      for (const PlanTensor& y : first.outputs) {
        Shape shape = y.shape;
        if (dynamic) shape[0] = batch;
        slot.outputs.emplace_back(y.dtype, shape);
      }
    }
    for (const BatchChunk& c : slot.chunks) {
      const PlanProfile& p = plan.profiles[c.profile];
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Span x = span(plan, p.inputs[i], c);
        rt::copy_on_device(e.inputs[i].ptr(), slot.inputs[i].ptr() + x.offset, x.bytes, runs);
      }
      e.profiles[c.profile].graph->replay(runs);
      for (size_t j = 0; j < p.outputs.size(); ++j) {
        const Span y = span(plan, p.outputs[j], c);
        const Relocation& s = p.outputs[j].source;
        if (y.bytes == 0 || s.region == Region::kConstants) continue;  // copied in collect
        // An output that is an input (an identity model) comes from the slot's copy of it.
        const uint64_t from = s.region == Region::kInput
                                  ? slot.inputs[s.index].ptr() + y.offset
                                  : e.outputs[s.index].ptr();
        // Without staging, into the outputs in pageable memory: done by the wait below.
        rt::copy_async(reinterpret_cast<uint64_t>(pinned ? slot.staged_out[j] + y.offset
                                                         : slot.outputs[j].raw() + y.offset),
                       from, y.bytes, runs);
      }
    }
    slot.done->record(runs);
    if (!pinned) {
      e.run_stream->synchronize();
      slot.finished = true;
    }
  } catch (...) {
    e.release(slot);
    throw;
  }
  return {k, slot.serial};
}

std::vector<Tensor> Engine::collect(const Ticket& ticket) {
  Impl& e = *impl_;
  TESSEL_ICHECK(ticket.slot < kPipelineDepth && e.slots[ticket.slot].busy &&
                e.slots[ticket.slot].serial == ticket.serial)
      << "engine collect: run " << ticket.serial << " is not in flight";
  RunSlot& slot = e.slots[ticket.slot];
  const EnginePlan& plan = e.plan;
  const PlanProfile& first = plan.profiles.front();
  std::vector<Tensor> outputs;
  try {
    if (slot.finished) {
      outputs = std::move(slot.outputs);
    } else {
      slot.done->synchronize();
      for (size_t j = 0; j < first.outputs.size(); ++j) {
        const PlanTensor& y = first.outputs[j];
        Shape shape = y.shape;
        if (plan.batch.dynamic()) shape[0] = slot.batch;
        Tensor& t = outputs.emplace_back(y.dtype, shape);
        if (y.source.region != Region::kConstants && t.nbytes())
          std::memcpy(t.raw(), slot.staged_out[j], t.nbytes());
      }
    }
    // Constant outputs, chunk by chunk as the plan places them.
    for (const BatchChunk& c : slot.chunks) {
      const PlanProfile& p = plan.profiles[c.profile];
      for (size_t j = 0; j < p.outputs.size(); ++j) {
        const Relocation& s = p.outputs[j].source;
        const Span y = span(plan, p.outputs[j], c);
        if (s.region == Region::kConstants && y.bytes)
          std::memcpy(outputs[j].raw() + y.offset, plan.constants.data() + s.offset, y.bytes);
      }
    }
  } catch (...) {
    e.release(slot);
    throw;
  }
  e.release(slot);
  return outputs;
}

void Engine::run_on(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                    int64_t batch, void* stream) {
  const EnginePlan& plan = impl_->plan;
  const PlanProfile& first = plan.profiles.front();
  TESSEL_USER_CHECK(inputs.size() == first.inputs.size() &&
                    outputs.size() == first.outputs.size())
      << "engine run: " << inputs.size() << " inputs and " << outputs.size()
      << " outputs given, the model has " << first.inputs.size() << " and "
      << first.outputs.size();
  const std::string bad = batch_error(plan, batch);
  TESSEL_USER_CHECK(bad.empty()) << "engine run: " << bad;
  // The kernels' vector loads and stores assume what cuMemAlloc gives the engine's own buffers
  // at least to this degree.
  static constexpr uint64_t kAlignment = 16;
  auto check_aligned = [](uint64_t address, const PlanTensor& t, const char* what) {
    TESSEL_USER_CHECK(address % kAlignment == 0)
        << "engine run: " << what << " '" << t.name << "' at device address 0x" << std::hex
        << address << " is not " << std::dec << kAlignment << "-byte aligned";
  };
  for (size_t i = 0; i < inputs.size(); ++i) check_aligned(inputs[i], first.inputs[i], "input");
  for (size_t j = 0; j < outputs.size(); ++j) check_aligned(outputs[j], first.outputs[j], "output");

  for (const BatchChunk& c : split_batch(plan, batch)) {
    const PlanProfile& p = plan.profiles[c.profile];
    // The caller's tensors at the chunk's first item.
    std::vector<uint64_t> in(inputs.size()), out(outputs.size());
    bool in_place = c.items == p.batch;
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = inputs[i] + span(plan, p.inputs[i], c).offset;
      in_place = in_place && in[i] % kAlignment == 0;
    }
    for (size_t j = 0; j < out.size(); ++j) {
      out[j] = outputs[j] + span(plan, p.outputs[j], c).offset;
      in_place = in_place && out[j] % kAlignment == 0;
    }
    // A padded (or misaligned) chunk runs in the engine's own buffers.
    if (!in_place)
      for (size_t i = 0; i < in.size(); ++i)
        rt::copy_on_device(impl_->inputs[i].ptr(), in[i], span(plan, p.inputs[i], c).bytes,
                           stream);
    auto address = [&](const Relocation& r) {
      if (in_place && r.region == Region::kInput) return in.at(r.index) + r.offset;
      if (in_place && r.region == Region::kOutput) return out.at(r.index) + r.offset;
      return impl_->address(r);
    };
    const std::vector<BoundLaunch>& bound = impl_->profiles[c.profile].launches;
    for (size_t i = 0; i < bound.size(); ++i) {
      BoundLaunch l = bound[i];
      bind(p.launches[i], address, &l);
      impl_->enqueue(l, stream);
    }
    // Outputs the kernels did not write where the caller wants them: all of a chunk run in the
    // engine's buffers, and everywhere a constant, an input passed through, an output listed
    // twice. After the kernels, so that a second listing copies the value they wrote.
    for (size_t j = 0; j < p.outputs.size(); ++j) {
      const PlanTensor& y = p.outputs[j];
      const Relocation& s = y.source;
      const uint64_t bytes = span(plan, y, c).bytes;
      if (s.region == Region::kOutput && s.index == j) {
        if (!in_place) rt::copy_on_device(out[j], impl_->outputs[j].ptr(), bytes, stream);
        continue;
      }
      const uint64_t from = s.region == Region::kOutput ? out[s.index]
                            : s.region == Region::kInput ? in[s.index]
                                                         : impl_->address(s);
      rt::copy_on_device(out[j], from, bytes, stream);
    }
  }
}

std::vector<float> Engine::time_replays(int warmup, int reps, int64_t batch) {
  const EnginePlan& plan = impl_->plan;
  const int64_t b = batch == 0 ? plan.batch.opt : batch;
  const std::string bad = batch_error(plan, b);
  TESSEL_USER_CHECK(bad.empty()) << bad;
  const std::vector<BatchChunk> chunks = split_batch(plan, b);
  if (chunks.size() == 1)
    return rt::time_graph_replays(*impl_->profiles[chunks[0].profile].graph, warmup, reps);
  // The chunks' kernels back to back, in one graph: the device time of the whole batch (the
  // copies a run makes between chunks are the host's, not counted).
  rt::CapturedGraph all(
      [&](void* stream) {
        for (const BatchChunk& c : chunks)
          for (const BoundLaunch& l : impl_->profiles[c.profile].launches)
            impl_->enqueue(l, stream);
      },
      1);
  return rt::time_graph_replays(all, warmup, reps);
}

std::vector<float> Engine::profile_launches(int reps, int64_t batch) {
  const size_t k = impl_->profile_index(batch, "profile");
  std::vector<float> median_ms;
  for (const BoundLaunch& l : impl_->profiles[k].launches) {
    rt::CapturedGraph copies([&](void* stream) { impl_->enqueue(l, stream); }, kProfileCopies);
    const std::vector<float> ms = rt::time_graph_replays(copies, /*warmup=*/2, reps);
    median_ms.push_back(ms[ms.size() / 2]);
  }
  return median_ms;
}

const EngineStats& Engine::stats() const { return impl_->stats; }
const EnginePlan& Engine::plan() const { return impl_->plan; }


}  // namespace tessel::runtime
