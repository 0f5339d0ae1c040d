// check_plan and the small queries on an EnginePlan.
#include "runtime/engine_plan.h"

#include <algorithm>
#include <sstream>

namespace tessel::runtime {
namespace {

// Plans beyond these are refused as corrupt: far beyond any GPU's memory or any model, and small
// enough that device_bytes() cannot overflow (at most 2^16 buffers of at most 2^47 bytes: a
// tensor of 2^44 elements of 8 bytes).
constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 44;
constexpr size_t kMaxBuffers = size_t{1} << 16;  // workspaces, inputs and outputs together
constexpr int kMaxRank = 8;

// CUDA's launch limits on every architecture tessel targets (sm_80 and later).
constexpr uint64_t kMaxGridX = (uint64_t{1} << 31) - 1;
constexpr uint64_t kMaxGridYZ = 65535;
constexpr uint64_t kMaxBlockThreads = 1024;

// "launch 3 ('conv1')": which launch a message is about.
std::string launch_str(const EnginePlan& plan, size_t i) {
  return "launch " + std::to_string(i) + " ('" + plan.launches[i].node + "')";
}

bool indexed(Region r) {
  return r == Region::kWorkspace || r == Region::kInput || r == Region::kOutput;
}

// "arena", "workspace 2": a region as messages name it.
std::string region_str(Region r, uint32_t index) {
  return indexed(r) ? std::string(region_name(r)) + " " + std::to_string(index) : region_name(r);
}

// Why `r` does not lie inside its region ("addresses ..."), or nothing.
std::optional<std::string> check_relocation(const EnginePlan& plan, const Relocation& r) {
  std::ostringstream why;
  if (r.region == Region::kNull) {
    if (r.index == 0 && r.offset == 0 && r.bytes == 0) return std::nullopt;
    why << "is null but has index " << r.index << ", offset " << r.offset << ", bytes " << r.bytes;
    return why.str();
  }
  if (static_cast<int>(r.region) > static_cast<int>(Region::kOutput)) {
    why << "addresses unknown region " << static_cast<int>(r.region);
    return why.str();
  }
  const size_t count = r.region == Region::kWorkspace ? plan.workspace_bytes.size()
                       : r.region == Region::kInput   ? plan.inputs.size()
                       : r.region == Region::kOutput  ? plan.outputs.size()
                                                      : 1;
  if (r.index >= count) {
    if (indexed(r.region))
      why << "addresses " << region_str(r.region, r.index) << " of " << count;
    else
      why << "addresses " << region_name(r.region) << " number " << r.index << " of 1";
    return why.str();
  }
  const uint64_t size = region_bytes(plan, r.region, r.index);
  if (r.offset <= size && r.bytes <= size - r.offset) return std::nullopt;
  why << "addresses bytes [" << r.offset << ", " << r.offset << " + " << r.bytes << ") of "
      << region_str(r.region, r.index) << ", which has " << size << " bytes";
  return why.str();
}

std::optional<std::string> check_tensor(const PlanTensor& t, const std::string& what) {
  if (t.shape.size() > static_cast<size_t>(kMaxRank) || !tensor_bytes(t.dtype, t.shape))
    return what + " '" + t.name + "' has a malformed shape " + shape_str(t.shape);
  return std::nullopt;
}

std::optional<std::string> check_launch(const EnginePlan& plan, size_t i) {
  const PlanLaunch& l = plan.launches[i];
  const std::string where = launch_str(plan, i);
  if (l.cubin >= plan.cubins.size())
    return where + " uses cubin " + std::to_string(l.cubin) + " of " +
           std::to_string(plan.cubins.size());
  if (l.entry.empty()) return where + " has no kernel name";
  const uint64_t grid_limit[3] = {kMaxGridX, kMaxGridYZ, kMaxGridYZ};
  uint64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (l.grid[d] < 1 || l.grid[d] > grid_limit[d] || l.block[d] < 1 ||
        l.block[d] > kMaxBlockThreads)
      return where + " has an invalid grid or block";
    threads *= l.block[d];
  }
  if (threads > kMaxBlockThreads)
    return where + " has " + std::to_string(threads) + " threads per block";
  if (l.params.size() > static_cast<size_t>(kMaxParamWords))
    return where + " has " + std::to_string(l.params.size()) + " parameter words, at most " +
           std::to_string(kMaxParamWords);
  for (size_t w = 0; w < l.params.size(); ++w)
    if (std::optional<std::string> why = check_relocation(plan, l.params[w]))
      return where + " word " + std::to_string(w) + " " + *why;
  if (l.tensor_maps.size() > static_cast<size_t>(device::kMaxTensorMaps))
    return where + " has " + std::to_string(l.tensor_maps.size()) + " tensor maps, at most " +
           std::to_string(device::kMaxTensorMaps);
  for (size_t m = 0; m < l.tensor_maps.size(); ++m) {
    const device::TensorMapSpec& spec = l.tensor_maps[m];
    if (std::optional<std::string> why = device::check_tensor_map(spec))
      return where + " tensor map " + std::to_string(m) + ": " + *why;
    if (spec.operand >= l.params.size() || l.params[spec.operand].region == Region::kNull)
      return where + " tensor map " + std::to_string(m) + " maps parameter word " +
             std::to_string(spec.operand) + ", which holds no address";
  }
  return std::nullopt;
}

}  // namespace

const char* region_name(Region r) {
  switch (r) {
    case Region::kNull:
      return "null";
    case Region::kArena:
      return "arena";
    case Region::kConstants:
      return "constants";
    case Region::kScratch:
      return "scratch";
    case Region::kWorkspace:
      return "workspace";
    case Region::kInput:
      return "input";
    case Region::kOutput:
      return "output";
  }
  return "unknown region";
}

device::DeviceInfo recorded_target(const device::DeviceInfo& device) {
  device::DeviceInfo t;
  t.name = device.name;
  t.cc_major = device.cc_major;
  t.cc_minor = device.cc_minor;
  t.sm_count = device.sm_count;
  t.smem_per_block_optin = device.smem_per_block_optin;
  return t;
}

std::optional<uint64_t> tensor_bytes(DType dtype, const Shape& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const uint64_t extent = static_cast<uint64_t>(d);
    if (extent != 0 && n > kMaxRegionBytes / extent) return std::nullopt;
    n *= extent;
  }
  return n * dtype_size(dtype);
}

uint64_t region_bytes(const EnginePlan& plan, Region region, uint32_t index) {
  switch (region) {
    case Region::kNull:
      return 0;
    case Region::kArena:
      return plan.arena_bytes;
    case Region::kConstants:
      return plan.constants.size();
    case Region::kScratch:
      return plan.scratch_bytes;
    case Region::kWorkspace:
      return index < plan.workspace_bytes.size() ? plan.workspace_bytes[index] : 0;
    case Region::kInput:
      if (index >= plan.inputs.size()) return 0;
      return tensor_bytes(plan.inputs[index].dtype, plan.inputs[index].shape).value_or(0);
    case Region::kOutput: {
      if (index >= plan.outputs.size()) return 0;
      const PlanTensor& t = plan.outputs[index];
      // Only an output computed into its own buffer has one.
      if (t.source.region != Region::kOutput || t.source.index != index) return 0;
      return tensor_bytes(t.dtype, t.shape).value_or(0);
    }
  }
  return 0;
}

uint64_t device_bytes(const EnginePlan& plan) {
  auto block = [](uint64_t bytes) { return std::max(bytes, kMinAllocation); };
  uint64_t total =
      block(plan.arena_bytes) + block(plan.constants.size()) + block(plan.scratch_bytes);
  for (uint64_t w : plan.workspace_bytes) total += block(w);
  for (uint32_t i = 0; i < plan.inputs.size(); ++i)
    total += block(region_bytes(plan, Region::kInput, i));
  for (uint32_t j = 0; j < plan.outputs.size(); ++j) {
    const Relocation& s = plan.outputs[j].source;
    if (s.region == Region::kOutput && s.index == j)
      total += block(region_bytes(plan, Region::kOutput, j));
  }
  return total;
}

int tensor_core_launches(const EnginePlan& plan) {
  return static_cast<int>(
      std::count_if(plan.launches.begin(), plan.launches.end(),
                    [](const PlanLaunch& l) { return l.instruction != "SIMT"; }));
}

std::optional<std::string> check_plan(const EnginePlan& plan) {
  if (plan.target.cc_major <= 0) return std::string("no target architecture");
  if (plan.batch < 1) return "batch " + std::to_string(plan.batch);
  for (uint64_t size : {plan.arena_bytes, plan.scratch_bytes, uint64_t{plan.constants.size()}})
    if (size > kMaxRegionBytes) return "a region of " + std::to_string(size) + " bytes";
  const size_t buffers = plan.workspace_bytes.size() + plan.inputs.size() + plan.outputs.size();
  if (buffers > kMaxBuffers) return std::to_string(buffers) + " workspaces, inputs and outputs";
  for (uint64_t size : plan.workspace_bytes)
    if (size > kMaxRegionBytes) return "a workspace of " + std::to_string(size) + " bytes";
  for (size_t i = 0; i < plan.cubins.size(); ++i)
    if (plan.cubins[i].empty()) return "cubin " + std::to_string(i) + " is empty";

  for (const PlanTensor& t : plan.inputs)
    if (std::optional<std::string> why = check_tensor(t, "input")) return why;
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const PlanTensor& t = plan.outputs[j];
    if (std::optional<std::string> why = check_tensor(t, "output")) return why;
    const Relocation& s = t.source;
    const std::string where = "output " + std::to_string(j) + " '" + t.name + "'";
    // An output is read from its own buffer, an earlier output's, an input or the constants.
    const bool kind_ok = s.region == Region::kInput || s.region == Region::kConstants ||
                         (s.region == Region::kOutput && s.index <= j);
    if (!kind_ok) return where + " is read from " + region_str(s.region, s.index);
    if (s.bytes != *tensor_bytes(t.dtype, t.shape))
      return where + " is read as " + std::to_string(s.bytes) + " bytes";
    if (std::optional<std::string> why = check_relocation(plan, s)) return where + " " + *why;
  }
  for (size_t i = 0; i < plan.launches.size(); ++i)
    if (std::optional<std::string> why = check_launch(plan, i)) return why;
  return std::nullopt;
}

}  // namespace tessel::runtime
