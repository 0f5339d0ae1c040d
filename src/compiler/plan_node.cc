// plan_node: views and in-place concats first (they launch nothing), then contractions, then
// op kernels.
#include "compiler/plan_node.h"

#include <algorithm>

#include "compiler/lowering.h"
#include "compiler/tuning_db.h"
#include "core/error.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/default_schedule.h"
#include "ops/conv_transpose_phases.h"
#include "ops/tessel_epilogue.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

namespace cg = kernels::cuda;

std::string remarks_text(const contraction::MatchResult& m) {
  std::string r;
  for (const contraction::Remark& x : m.remarks) r += (r.empty() ? "" : "; ") + x.text;
  return r.empty() ? "no reason given" : r;
}

// The op kernels' reasons (kernels/cuda/op_kernels.h) name the node, which NodePlan::why
// leaves to its reader (compile_plan's error, explain's table).
std::string without_label(const ir::Node& n, std::string why) {
  const std::string label = n.label() + ": ";
  if (why.rfind(label, 0) == 0) why.erase(0, label.size());
  return why;
}

NodePlan unsupported(std::string why) {
  NodePlan p;
  p.run = NodeRun::kUnsupported;
  p.why = std::move(why);
  return p;
}

// A concat_into_slices output goes straight into its channels of the Concat's buffer, which the
// memory plan gives it as its address (plan_memory.h, channel slices). Returns why the epilogue
// cannot store so, if it cannot.
std::optional<std::string> store_into_slice(const ir::Graph& g, const ir::Node& n,
                                            NodePlan& plan) {
  const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, n.outputs.at(0));
  if (!slice) return std::nullopt;
  const bool residual = std::find(plan.extra_inputs.begin(), plan.extra_inputs.end(),
                                  kResidualInput) != plan.extra_inputs.end();
  if (plan.epilogue.store.kind != contraction::StoreMap::Kind::kPlain || residual)
    return "its output is marked in_place in a Concat, but a depth_to_space store or a residual "
           "add cannot store into a channel slice";
  plan.epilogue.store.kind = contraction::StoreMap::Kind::kChannelSlice;
  plan.epilogue.store.channel_offset = slice->channel_offset;
  plan.epilogue.store.ld = slice->channels;
  return std::nullopt;
}

NodePlan plan_contraction(const ir::Graph& g, const ir::Node& n, const Options& options,
                          const device::DeviceInfo& target) {
  ContractionSpec spec = contraction_of(g, n);
  NodePlan plan;
  plan.run = NodeRun::kContraction;
  plan.match = contraction::match(spec.maps);
  plan.epilogue = std::move(spec.epilogue);
  plan.extra_inputs = std::move(spec.extra_inputs);
  if (std::optional<std::string> why = store_into_slice(g, n, plan)) return unsupported(*why);
  if (!plan.match.contraction)
    return unsupported("cannot be lowered to a contraction kernel: " + remarks_text(plan.match));
  const contraction::Contraction& c = *plan.match.contraction;
  // default_schedule is SIMT where match() says no, except where the halo kernel takes what
  // the GEMM kernels cannot (a stem's f32 NCHW input, converted while staged).
  if (!options.tensor_cores) {
    plan.why = "Tensor Cores turned off (compiler::Options::tensor_cores)";
    plan.schedule = kernels::simt_schedule(c);
  } else {
    // An A prologue is applied by the mma.sync kernel's loader alone. (An X read inside a
    // Concat's buffer has no conv window, contraction/conv_window.h: the halo kernel refuses it.)
    plan.schedule = kernels::default_schedule(
        c, target, plan.epilogue.a_prologue.has_value(),
        contraction::read_bytes_per_output(plan.epilogue),
        contraction::transcendentals_per_output(plan.epilogue));
    if (plan.schedule.instruction == kernels::Instruction::kSimt)
      plan.why = plan.match.remarks.empty() ? "no reason given" : plan.match.remarks[0].text;
  }
  // A measured schedule from the tuning database, where one matches and the kernel takes it
  // with this node's epilogue.
  if (options.tensor_cores && options.tuning)
    if (const TuningRecord* r =
            options.tuning->find(tuning_key(c, plan.epilogue), TuningDb::device_key(target)))
      if (std::optional<kernels::Schedule> s = kernels::parse_schedule(r->schedule, c))
        if (!cg::can_implement(c, plan.epilogue, *s)) {
          plan.schedule = *s;
          plan.tuned = true;
          plan.why.clear();
        }
  std::optional<std::string> why = cg::can_implement(c, plan.epilogue, plan.schedule);
  if (why && plan.schedule.instruction != kernels::Instruction::kSimt) {
    plan.why = "the Tensor Core generator refuses " + plan.schedule.name() + ": " + *why;
    plan.schedule = kernels::simt_schedule(c);
    why = cg::can_implement(c, plan.epilogue, plan.schedule);
  }
  if (why) return unsupported("cannot be lowered to a contraction kernel: " + *why);
  return plan;
}

// A Concat whose inputs all live in its buffer already; nothing when some input must be copied.
// Every in-place input must come from a node that stores into a channel slice.
std::optional<NodePlan> in_place_concat(const ir::Graph& g, const ir::Node& n) {
  const std::vector<passes::ChannelSlice> slices = passes::in_place_inputs(g, n);
  const std::vector<int> producers = g.producers();
  for (const passes::ChannelSlice& s : slices) {
    const int p = producers.at(s.value);
    const ir::Node& producer = g.nodes.at(static_cast<size_t>(p));
    // (A Concat producer has all its inputs in place, in_place_inputs checked: their producers
    // store into this Concat's buffer.)
    if (!lowered_as_contraction(producer) && producer.op != "Concat")
      return unsupported("input " + std::to_string(s.input) + " is marked in_place, but its "
                         "producer " + producer.label() + " is no contraction (tessel.Conv with "
                         "group 1, tessel.Gemm): only those store into a channel slice");
  }
  if (slices.empty() || slices.size() != n.inputs.size()) return std::nullopt;
  NodePlan p;
  p.run = NodeRun::kNoKernel;
  p.why = "its producers store into its channel slices (memory plan)";
  return p;
}

// Why the packed-groups kernel does not take a grouped tessel.Conv (the reason explain gives
// where the conv runs as a batch of dense GEMMs or on the direct kernel), or nothing when it
// does.
std::optional<std::string> packed_groups_refusal(const ir::Graph& g, const ir::Node& n,
                                                 const Options& options,
                                                 const device::DeviceInfo& target) {
  if (!options.tensor_cores) return "Tensor Cores turned off (compiler::Options::tensor_cores)";
  const contraction::MatchResult m = contraction::match(contraction_of(g, n).maps);
  if (!m.contraction || !m.tensor_cores) return remarks_text(m);
  std::string why;
  if (!kernels::packed_groups_schedule(*m.contraction, target, &why)) return why;
  return std::nullopt;
}

}  // namespace

bool lowered_as_contraction(const ir::Node& n) {
  return is_contraction_op(n) && (n.op == "tessel.Gemm" || n.get_int("group", 1) == 1);
}

std::string NodePlan::instruction() const {
  switch (run) {
    case NodeRun::kContraction: return kernels::instruction_name(schedule.instruction);
    case NodeRun::kOpKernel: return kernels::instruction_name(kernels::Instruction::kSimt);
    case NodeRun::kNoKernel:
    case NodeRun::kUnsupported: return "";
  }
  return "";
}

std::string NodePlan::summary() const {
  switch (run) {
    case NodeRun::kNoKernel: return "no kernel: " + why;
    case NodeRun::kUnsupported: return "not supported on the GPU: " + why;
    case NodeRun::kOpKernel: return why.empty() ? "CUDA kernel" : "CUDA kernel: " + why;
    case NodeRun::kContraction: {
      if (!tensor_cores()) return "SIMT: " + why;
      const bool int8 = match.contraction && contraction::int8_operands(*match.contraction);
      return "Tensor Cores (" + instruction() + (int8 ? " int8" : "") + ") " + schedule.name() +
             (tuned ? " tuned" : "") + (why.empty() ? "" : " (" + why + ")");
    }
  }
  return "";
}

namespace {

// fold-qdq's reason for leaving a QDQ conv in float (its int8_refusal attribute), added to what
// the plan says: "float, not int8", or "float math" and which side is int8 where fold-qdq gave
// it its int8 input (a depthwise conv) and fuse the QuantizeLinear after it (int8 stores).
NodePlan with_int8_refusal(const ir::Graph& g, const ir::Node& n, NodePlan p) {
  const std::string refusal = n.get_string("int8_refusal", "");
  if (refusal.empty() || p.run == NodeRun::kUnsupported) return p;
  const bool int8_in = g.type(n.inputs.at(0)).dtype == DType::kI8;
  const bool int8_out = ops::read_out_dtype(n) == DType::kI8;
  const char* sides = int8_in && int8_out ? "float math, int8 input and output: "
                      : int8_in           ? "float math, int8 input: "
                      : int8_out          ? "float math, int8 output: "
                                          : "float, not int8: ";
  p.why += (p.why.empty() ? "" : "; ") + std::string(sides) + refusal;
  return p;
}

NodePlan plan_any_node(const ir::Graph& g, const ir::Node& n, const Options& options,
                       const device::DeviceInfo& target);

}  // namespace

NodePlan plan_node(const ir::Graph& g, const ir::Node& n, const Options& options,
                   const device::DeviceInfo& target) {
  return with_int8_refusal(g, n, plan_any_node(g, n, options, target));
}

namespace {

NodePlan plan_any_node(const ir::Graph& g, const ir::Node& n, const Options& options,
                       const device::DeviceInfo& target) {
  if (passes::is_view_alias(g, n)) {
    NodePlan p;
    p.run = NodeRun::kNoKernel;
    p.why = "its output aliases its input's memory (memory plan)";
    return p;
  }
  if (n.op == "Concat")
    if (std::optional<NodePlan> p = in_place_concat(g, n)) return *p;
  if (lowered_as_contraction(n)) return plan_contraction(g, n, options, target);
  std::optional<std::string> not_packed;
  const std::optional<ops::Prologue> prologue = ops::read_prologue(n);
  if (is_contraction_op(n) && prologue && prologue->requantize) {
    // A depthwise conv reading its int8 X requantized: a prologue of the depthwise kernels'.
    not_packed = "its int8 X is read requantized";
  } else if (is_contraction_op(n)) {
    // A grouped convolution: on Tensor Cores where default_schedule puts it (a grouped
    // kernel, or wide groups as a batch of dense GEMMs: kernels::dense_groups_wide) and the
    // kernel takes the node's epilogue; else the direct grouped kernel.
    NodePlan p;
    if (options.tensor_cores) {
      p = plan_contraction(g, n, options, target);
      if (p.run == NodeRun::kContraction && p.tensor_cores()) {
        if (!p.tuned && p.schedule.groups_per_tile == 0)
          if (std::optional<std::string> why = packed_groups_refusal(g, n, options, target))
            p.why = "groups as a batch of dense GEMMs; " + *why;
        return p;
      }
    }
    // (Where the packed kernel takes the conv, the plan says why it is not on Tensor Cores.)
    const std::optional<std::string> why = packed_groups_refusal(g, n, options, target);
    not_packed = why ? *why : p.why;
  }
  // A ConvTranspose that convert-layout left alone: why it has no tessel.Conv form.
  if (n.op == "ConvTranspose")
    if (std::optional<std::string> why = ops::conv_transpose_refusal(g, n))
      return unsupported(*why);
  // A Concat held in place in an outer Concat copies its other inputs into that buffer; a
  // depthwise conv reads such a Concat where it lies.
  cg::OpSlices slices;
  if (n.op == "Concat" && n.outputs.size() == 1)
    if (const std::optional<passes::SliceOf> s = passes::channel_slice_of(g, n.outputs[0]))
      slices.out = cg::BufferSlice{.channel_offset = s->channel_offset, .channels = s->channels};
  if (ops::is_depthwise_conv(g, n))
    if (const std::optional<passes::SliceOf> s = passes::channel_slice_of(g, n.inputs[0]))
      slices.x = cg::BufferSlice{.channel_offset = s->channel_offset, .channels = s->channels};
  if (std::optional<std::string> why = cg::can_emit_op(g, n, slices))
    return unsupported(without_label(n, *why));
  NodePlan p;
  p.run = NodeRun::kOpKernel;
  p.slices = slices;
  if (not_packed) {
    // Grouped convolutions: say why they are not on Tensor Cores.
    const int64_t groups = n.get_int("group", 1);
    const int64_t channels = g.type(n.inputs.at(1)).shape.back();  // OHWI: Ci per group
    const int64_t outputs = g.type(n.inputs.at(1)).shape.front() / groups;
    p.why = channels == 1 && outputs == 1
                ? "depthwise convolution: the tiled depthwise kernel (memory-bound, CUDA cores)"
                : "grouped convolution (" + std::to_string(groups) + " groups of " +
                      std::to_string(channels) + " to " + std::to_string(outputs) +
                      " channels): " + *not_packed + "; the direct grouped kernel runs it on CUDA cores";
    if (prologue && prologue->requantize)
      p.why += "; its int8 X read requantized to another scale (prologue 'requantize': a "
               "requantization of a concat, fused)";
  }
  return p;
}

}  // namespace
}  // namespace tessel::compiler
