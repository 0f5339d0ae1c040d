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
constexpr size_t kMaxProfiles = 64;

// CUDA's launch limits on every architecture tessel targets (sm_80 and later).
constexpr uint64_t kMaxGridX = (uint64_t{1} << 31) - 1;
constexpr uint64_t kMaxGridYZ = 65535;
constexpr uint64_t kMaxBlockThreads = 1024;

// "launch 3 ('conv1')", "profile 8: launch 3 ('conv1')": which launch a message is about (a
// static engine's one profile goes unnamed).
std::string launch_str(const EnginePlan& plan, const PlanProfile& profile, size_t i) {
  const std::string where = plan.profiles.size() > 1
                                ? "profile " + std::to_string(profile.batch) + ": "
                                : std::string();
  return where + "launch " + std::to_string(i) + " ('" + profile.launches[i].node + "')";
}

bool indexed(Region r) {
  return r == Region::kWorkspace || r == Region::kInput || r == Region::kOutput;
}

// "arena", "workspace 2": a region as messages name it.
std::string region_str(Region r, uint32_t index) {
  return indexed(r) ? std::string(region_name(r)) + " " + std::to_string(index) : region_name(r);
}

// Why `r` does not lie inside its region ("addresses ..."), or nothing.
std::optional<std::string> check_relocation(const EnginePlan& plan, const PlanProfile& profile,
                                            const Relocation& r) {
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
                       : r.region == Region::kInput   ? profile.inputs.size()
                       : r.region == Region::kOutput  ? profile.outputs.size()
                                                      : 1;
  if (r.index >= count) {
    if (indexed(r.region))
      why << "addresses " << region_str(r.region, r.index) << " of " << count;
    else
      why << "addresses " << region_name(r.region) << " number " << r.index << " of 1";
    return why.str();
  }
  const uint64_t size = region_bytes(plan, profile, r.region, r.index);
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

std::optional<std::string> check_launch(const EnginePlan& plan, const PlanProfile& profile,
                                        size_t i) {
  const PlanLaunch& l = profile.launches[i];
  const std::string where = launch_str(plan, profile, i);
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
    if (std::optional<std::string> why = check_relocation(plan, profile, l.params[w]))
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

const PlanProfile* EnginePlan::profile_for(int64_t b) const {
  for (const PlanProfile& p : profiles)
    if (p.batch == b) return &p;
  return nullptr;
}

uint64_t region_bytes(const EnginePlan& plan, const PlanProfile& profile, Region region,
                      uint32_t index) {
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
      if (index >= profile.inputs.size()) return 0;
      return tensor_bytes(profile.inputs[index].dtype, profile.inputs[index].shape).value_or(0);
    case Region::kOutput: {
      if (index >= profile.outputs.size()) return 0;
      const PlanTensor& t = profile.outputs[index];
      // Only an output computed into its own buffer has one.
      if (t.source.region != Region::kOutput || t.source.index != index) return 0;
      return tensor_bytes(t.dtype, t.shape).value_or(0);
    }
  }
  return 0;
}

uint64_t io_buffer_bytes(const EnginePlan& plan, Region region, uint32_t index) {
  uint64_t bytes = 0;
  for (const PlanProfile& p : plan.profiles)
    bytes = std::max(bytes, region_bytes(plan, p, region, index));
  return bytes;
}

uint64_t device_bytes(const EnginePlan& plan) {
  auto block = [](uint64_t bytes) { return std::max(bytes, kMinAllocation); };
  uint64_t total =
      block(plan.arena_bytes) + block(plan.constants.size()) + block(plan.scratch_bytes);
  for (uint64_t w : plan.workspace_bytes) total += block(w);
  if (plan.profiles.empty()) return total;
  const PlanProfile& first = plan.profiles.front();
  for (uint32_t i = 0; i < first.inputs.size(); ++i)
    total += block(io_buffer_bytes(plan, Region::kInput, i));
  for (uint32_t j = 0; j < first.outputs.size(); ++j) {
    const Relocation& s = first.outputs[j].source;
    if (s.region == Region::kOutput && s.index == j)
      total += block(io_buffer_bytes(plan, Region::kOutput, j));
  }
  return total;
}

int tensor_core_launches(const PlanProfile& profile) {
  return static_cast<int>(
      std::count_if(profile.launches.begin(), profile.launches.end(),
                    [](const PlanLaunch& l) { return l.instruction != "SIMT"; }));
}

namespace {

// Why one profile is inconsistent with the plan, or nothing.
std::optional<std::string> check_profile(const EnginePlan& plan, const PlanProfile& profile) {
  const std::string where =
      plan.profiles.size() > 1 ? "profile " + std::to_string(profile.batch) + ": " : std::string();
  for (const PlanTensor& t : profile.inputs)
    if (std::optional<std::string> why = check_tensor(t, "input")) return where + *why;
  for (size_t j = 0; j < profile.outputs.size(); ++j) {
    const PlanTensor& t = profile.outputs[j];
    if (std::optional<std::string> why = check_tensor(t, "output")) return where + *why;
    const Relocation& s = t.source;
    const std::string what = where + "output " + std::to_string(j) + " '" + t.name + "'";
    // An output is read from its own buffer, an earlier output's, an input or the constants.
    const bool kind_ok = s.region == Region::kInput || s.region == Region::kConstants ||
                         (s.region == Region::kOutput && s.index <= j);
    if (!kind_ok) return what + " is read from " + region_str(s.region, s.index);
    if (s.bytes != *tensor_bytes(t.dtype, t.shape))
      return what + " is read as " + std::to_string(s.bytes) + " bytes";
    if (std::optional<std::string> why = check_relocation(plan, profile, s))
      return what + " " + *why;
  }
  for (size_t i = 0; i < profile.launches.size(); ++i)
    if (std::optional<std::string> why = check_launch(plan, profile, i)) return why;
  return std::nullopt;
}

// Why `p`'s tensors do not match `first`'s (names, types, ranks, output sources' kinds) or, in
// a dynamic engine, do not lead with p's batch; or nothing. Every profile runs in the same
// input and output buffers, so they must describe the same tensors.
std::optional<std::string> check_profile_tensors(const EnginePlan& plan, const PlanProfile& first,
                                                 const PlanProfile& p) {
  const std::string where = "profile " + std::to_string(p.batch) + ": ";
  if (p.inputs.size() != first.inputs.size() || p.outputs.size() != first.outputs.size())
    return where + std::to_string(p.inputs.size()) + " inputs and " +
           std::to_string(p.outputs.size()) + " outputs, profile " +
           std::to_string(first.batch) + " has " + std::to_string(first.inputs.size()) +
           " and " + std::to_string(first.outputs.size());
  auto same = [&](const PlanTensor& a, const PlanTensor& b, const char* what)
      -> std::optional<std::string> {
    if (a.name != b.name || a.dtype != b.dtype || a.shape.size() != b.shape.size() ||
        a.source.region != b.source.region || a.source.index != b.source.index)
      return where + what + " '" + a.name + "' differs from profile " +
             std::to_string(first.batch) + "'s";
    if (plan.batch.dynamic() && (a.shape.empty() || a.shape[0] != p.batch))
      return where + what + " '" + a.name + "' has shape " + shape_str(a.shape) +
             ", which does not lead with the batch";
    return std::nullopt;
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (std::optional<std::string> why = same(p.inputs[i], first.inputs[i], "input")) return why;
  for (size_t j = 0; j < p.outputs.size(); ++j)
    if (std::optional<std::string> why = same(p.outputs[j], first.outputs[j], "output"))
      return why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_plan(const EnginePlan& plan) {
  if (plan.target.cc_major <= 0) return std::string("no target architecture");
  for (uint64_t size : {plan.arena_bytes, plan.scratch_bytes, uint64_t{plan.constants.size()}})
    if (size > kMaxRegionBytes) return "a region of " + std::to_string(size) + " bytes";
  if (plan.profiles.empty()) return std::string("no profiles");
  if (plan.profiles.size() > kMaxProfiles)
    return std::to_string(plan.profiles.size()) + " profiles, at most " +
           std::to_string(kMaxProfiles);
  const PlanProfile& first = plan.profiles.front();
  const size_t buffers =
      plan.workspace_bytes.size() + first.inputs.size() + first.outputs.size();
  if (buffers > kMaxBuffers) return std::to_string(buffers) + " workspaces, inputs and outputs";
  for (uint64_t size : plan.workspace_bytes)
    if (size > kMaxRegionBytes) return "a workspace of " + std::to_string(size) + " bytes";
  for (size_t i = 0; i < plan.cubins.size(); ++i)
    if (plan.cubins[i].empty()) return "cubin " + std::to_string(i) + " is empty";

  const BatchRange& r = plan.batch;
  if (r.min < 1 || r.max < r.min || r.opt < r.min || r.opt > r.max)
    return "batch range " + std::to_string(r.min) + ":" + std::to_string(r.max) + " (opt " +
           std::to_string(r.opt) + ")";
  for (const PlanProfile& p : plan.profiles)
    if (p.batch < 1) return "batch " + std::to_string(p.batch);
  for (size_t k = 1; k < plan.profiles.size(); ++k)
    if (plan.profiles[k].batch <= plan.profiles[k - 1].batch)
      return "profile " + std::to_string(plan.profiles[k].batch) + " after profile " +
             std::to_string(plan.profiles[k - 1].batch);
  if (first.batch != r.min || plan.profiles.back().batch != r.max || !plan.profile_for(r.opt))
    return "profiles " + std::to_string(first.batch) + " to " +
           std::to_string(plan.profiles.back().batch) + " for batch range " +
           std::to_string(r.min) + ":" + std::to_string(r.max) + " (opt " +
           std::to_string(r.opt) + ")";
  for (const PlanProfile& p : plan.profiles) {
    if (std::optional<std::string> why = check_profile(plan, p)) return why;
    if (std::optional<std::string> why = check_profile_tensors(plan, first, p)) return why;
  }
  return std::nullopt;
}

}  // namespace tessel::runtime
