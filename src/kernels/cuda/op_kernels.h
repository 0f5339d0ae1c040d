// Kernels for the graph's nodes that are not contractions: after the GPU pass pipeline
// (passes::gpu_pipeline) these are NHWC pools, standalone depth_to_space, elementwise and
// broadcasting ops left unfused, QuantizeLinear / DequantizeLinear, layout transposes and
// channel pads at the graph's edges, concat/split/slice/reshape copies, softmax and
// reductions, and depthwise/grouped convs that the Tensor Core generator declines
// (tessel.Conv with group > 1 and few channels per group). One generated kernel per node;
// the engine fuses nothing further yet.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::kernels::cuda {

// Kernel ABI: `extern "C" __global__ void <name>(const tessel::OpParams p)` with
//   struct OpParams { const void* in[8]; void* out[4]; };
// in[i] = device address of the node's input i (nullptr for an omitted optional input),
// out[j] = of its output j. Constants are passed like any input (the engine uploads them).
// Shapes, dtypes and attributes are compile-time constants of the generated source.
inline constexpr int kOpKernelInputs = 8;
inline constexpr int kOpKernelOutputs = 4;

struct OpKernelSource {
  std::string name;
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;
  bool grid_dependent = false;  // as KernelSource::grid_dependent (contraction_kernel.h)
};

// Where a tensor lies when it is no dense tensor of its own: channels [channel_offset,
// channel_offset + C) of rows of `channels` elements, in the buffer of an outer Concat that
// holds it in place (passes/plan_memory.h; the tensor's pointer is that buffer's).
struct BufferSlice {
  int64_t channel_offset = 0;
  int64_t channels = 0;
};
// A node's tensors that lie so: output 0 (only a Concat along its last axis writes one), and
// input 0 (only a depthwise conv reads one: an inner Concat's output, plan_memory.h
// reads_channel_slice).
struct OpSlices {
  std::optional<BufferSlice> out;
  std::optional<BufferSlice> x;
};

// Why `n` cannot run through emit_op (empty when it can): unsupported op, dtype or attribute.
std::optional<std::string> can_emit_op(const ir::Graph& g, const ir::Node& n, const OpSlices& slices = {});

// Throws InternalError when can_emit_op says no.
OpKernelSource emit_op(const ir::Graph& g, const ir::Node& n, const OpSlices& slices = {});

// Depthwise convolutions (tessel.Conv with one channel per group) run a tiled kernel whose
// tiling has a name ("dw_v4x8_r2x4_c4x2_s2_wr", kernels/cuda/op_emit.h). For sweeps
// (`tessel bench-op --schedule`): the name of the tiling emit_op picks (nullopt where the node
// runs no tiled depthwise kernel), why another tiling cannot run the node (empty when it
// can), and the node's kernel with that tiling (InternalError where it cannot).
std::optional<std::string> chosen_depthwise_tiling(const ir::Graph& g, const ir::Node& n);
std::optional<std::string> cannot_tile_depthwise(const ir::Graph& g, const ir::Node& n,
                                                 const std::string& tiling);
OpKernelSource emit_depthwise(const ir::Graph& g, const ir::Node& n, const std::string& tiling);

}  // namespace tessel::kernels::cuda
