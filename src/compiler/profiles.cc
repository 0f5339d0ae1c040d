// Dynamic batch: the profile set, merging single-batch plans into one engine, and compiling one.
#include "compiler/profiles.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

#include "core/error.h"
#include "core/hash.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

using runtime::EnginePlan;
using runtime::PlanProfile;
using runtime::Region;
using runtime::Relocation;

constexpr uint64_t kAlign = static_cast<uint64_t>(passes::MemoryPlan::kAlignment);

// Byte strings stored once each in a growing image or list, found again by content.
class ContentPool {
 public:
  // The index of `bytes` among the distinct strings added so far.
  uint32_t add_cubin(std::vector<std::string>& cubins, const std::string& bytes) {
    for (uint32_t i : index_[fnv1a64(bytes)])
      if (cubins[i] == bytes) return i;
    const uint32_t i = static_cast<uint32_t>(cubins.size());
    cubins.push_back(bytes);
    index_[fnv1a64(bytes)].push_back(i);
    return i;
  }
  // The offset of `bytes` in `image`, appended kAlign-aligned where it is new.
  uint64_t add_block(std::string& image, std::string_view bytes) {
    for (uint64_t offset : index_[fnv1a64(bytes)])
      if (std::string_view(image).substr(offset, bytes.size()) == bytes) return offset;
    const uint64_t offset = (image.size() + kAlign - 1) / kAlign * kAlign;
    image.resize(offset);
    image.append(bytes);
    index_[fnv1a64(bytes)].push_back(offset);
    return offset;
  }

 private:
  std::map<uint64_t, std::vector<uint64_t>> index_;
};

// Every constant relocation of a profile, in place, so that they can be rebased.
std::vector<Relocation*> constant_relocations(PlanProfile& p) {
  std::vector<Relocation*> r;
  for (runtime::PlanTensor& y : p.outputs)
    if (y.source.region == Region::kConstants) r.push_back(&y.source);
  for (runtime::PlanLaunch& l : p.launches)
    for (Relocation& w : l.params)
      if (w.region == Region::kConstants) r.push_back(&w);
  return r;
}

// Single-profile plans added one by one into one plan, sharing what is equal.
class Merger {
 public:
  void add(EnginePlan from);
  // The merged plan for `range`, checked.
  EnginePlan finish(const runtime::BatchRange& range);

 private:
  EnginePlan into_;
  ContentPool constants_, cubins_;
};

void Merger::add(EnginePlan from) {
  TESSEL_ICHECK(from.profiles.size() == 1) << "merging a plan of " << from.profiles.size()
                                           << " profiles";
  if (into_.profiles.empty()) {
    into_.target = from.target;
    into_.precision = from.precision;
    into_.tessel_version = from.tessel_version;
  }
  TESSEL_ICHECK(from.target == into_.target && from.precision == into_.precision)
      << "merging plans for different targets or precisions";
  PlanProfile p = std::move(from.profiles[0]);
  // The constant image as blocks: the byte ranges the relocations address, overlapping ones
  // joined; each block stored once by content.
  std::vector<Relocation*> refs = constant_relocations(p);
  std::sort(refs.begin(), refs.end(),
            [](const Relocation* a, const Relocation* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < refs.size();) {
    const uint64_t start = refs[i]->offset;
    uint64_t end = start + refs[i]->bytes;
    size_t j = i + 1;
    while (j < refs.size() && refs[j]->offset < end) {
      end = std::max(end, refs[j]->offset + refs[j]->bytes);
      ++j;
    }
    // A block starts where an entry of compile_plan's image starts: aligned, and it stays so.
    const uint64_t at = constants_.add_block(
        into_.constants, std::string_view(from.constants).substr(start, end - start));
    for (size_t k = i; k < j; ++k) refs[k]->offset = at + (refs[k]->offset - start);
    i = j;
  }
  const uint32_t workspace_base = static_cast<uint32_t>(into_.workspace_bytes.size());
  into_.workspace_bytes.insert(into_.workspace_bytes.end(), from.workspace_bytes.begin(),
                              from.workspace_bytes.end());
  for (runtime::PlanLaunch& l : p.launches) {
    l.cubin = cubins_.add_cubin(into_.cubins, from.cubins.at(l.cubin));
    for (Relocation& w : l.params)
      if (w.region == Region::kWorkspace) w.index += workspace_base;
  }
  into_.arena_bytes = std::max(into_.arena_bytes, from.arena_bytes);
  into_.scratch_bytes = std::max(into_.scratch_bytes, from.scratch_bytes);
  into_.profiles.push_back(std::move(p));
}

EnginePlan Merger::finish(const runtime::BatchRange& range) {
  into_.batch = range;
  const std::optional<std::string> bad = runtime::check_plan(into_);
  TESSEL_ICHECK(!bad) << "dynamic engine plan: " << *bad;
  return std::move(into_);
}

}  // namespace

std::vector<int64_t> profile_batches(const runtime::BatchRange& range, int64_t every) {
  std::vector<int64_t> b = {range.min, range.opt, range.max};
  for (int64_t p = 1; p < range.max; p *= 2)
    if (p > range.min) b.push_back(p);
  if (every > 0)
    for (int64_t p = every; p < range.max; p += every)
      if (p > range.min) b.push_back(p);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

EnginePlan merge_profiles(std::vector<EnginePlan> plans, int64_t opt) {
  TESSEL_ICHECK(!plans.empty()) << "no plans to merge";
  const runtime::BatchRange range = {plans.front().batch.min, plans.back().batch.max, opt};
  Merger merger;
  for (EnginePlan& p : plans) merger.add(std::move(p));
  return merger.finish(range);
}

void check_leads_with_batch(const ir::Graph& g, int64_t batch, const runtime::BatchRange& range) {
  auto check = [&](ir::ValueId v, const char* what) {
    const ir::TensorType& t = g.type(v);
    TESSEL_USER_CHECK(!t.shape.empty() && t.shape[0] == batch)
        << "batch range " << range.min << ":" << range.max << ": " << what << " '"
        << g.value(v).name << "' is " << t.str() << " at batch " << batch
        << "; a batch range needs every input and output to lead with the batch (a symbolic "
        << "first dimension)";
  };
  for (ir::ValueId v : g.inputs) check(v, "input");
  for (ir::ValueId v : g.outputs) check(v, "output");
}

CompiledPlan compile_profiles(const std::function<ir::Graph(int64_t batch)>& graph_at,
                              const runtime::BatchRange& range, const Options& options,
                              const device::DeviceInfo& target) {
  TESSEL_ICHECK(range.min >= 1 && range.min <= range.opt && range.opt <= range.max)
      << "batch range " << range.min << ":" << range.max << " opt " << range.opt;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> batches = profile_batches(range, options.profile_every);
  // Each profile is merged as soon as it is compiled, so that only one profile's constant image
  // is held beside the shared one.
  Merger merger;
  CompiledPlan result;
  for (int64_t b : batches) {
    const ir::Graph g = graph_at(b);
    check_leads_with_batch(g, b, range);
    Options at = options;
    if (options.progress) {
      const std::string prefix = "batch " + std::to_string(b) + ": ";
      at.progress = [&options, prefix](std::string_view step, int done, int total) {
        options.progress(prefix + std::string(step), done, total);
      };
    }
    CompiledPlan compiled = compile_plan(g, at, target);
    merger.add(std::move(compiled.plan));
    if (b == range.opt) result.graph = std::move(compiled.graph);
  }
  result.plan = merger.finish(range);
  result.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessel::compiler
