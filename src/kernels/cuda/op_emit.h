// Internal interface of the op-kernel emitters (op_*.cc): the pieces every family shares
// (CUDA spellings of dtypes and constants, the translation-unit frame) and each family's entry
// points, which op_kernels.cc dispatches to. Not part of the public codegen API (op_kernels.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/op_kernels.h"
#include "kernels/cuda/templates/tessel_depthwise_tile.cuh"
#include "core/dtype.h"
#include "ir/graph.h"
#include "ops/tessel_epilogue.h"

namespace tessel::kernels::cuda::op_detail {

// The storage type's name in kernels/tessel_op_common.cuh; nullopt for a dtype no op kernel
// stores. type_of is the same for a dtype already checked (InternalError otherwise).
std::optional<std::string> cuda_type(DType t);
std::string type_of(DType t);

// A float as a CUDA literal that round-trips exactly; infinities by name.
std::string float_literal(double d);

// The most blocks an op kernel's grid has: 16 on each of an H100's 132 SMs. The kernels loop
// grid-stride, and a few waves of resident blocks saturate any current GPU's memory system.
constexpr int64_t kMaxBlocks = 132 * 16;

// "a, b, c, " for the generated arrays' initialisers ("{" + i64_list(v) + "1}": a sentinel keeps
// them non-empty).
std::string i64_list(const std::vector<int64_t>& v);

// The largest V <= 16 bytes of T dividing `channels` (a fragment of V never crosses a pixel).
int channel_vector(DType t, int64_t channels);

// A tensor viewed as [outer, extent, inner] around `axis` (negative: from the end), for the
// kernels that work along one axis (Gather, ArgMax, CumSum).
struct AxisView {
  int64_t axis = 0, outer = 1, extent = 1, inner = 1;
};
AxisView axis_view(const Shape& shape, int64_t axis);

// The translation unit: a comment naming the node, the family's template header, the
// generated `struct Problem` (in an anonymous namespace: every kernel has its own), and the
// extern "C" entry point whose body is `call` (e.g. "tessel::for_each_item<Pool<Problem>>(p);").
// The grid covers `blocks_needed` blocks of `threads`, capped: the kernels loop grid-stride,
// and a few waves of resident blocks saturate any current GPU's memory system.
OpKernelSource make_source(const ir::Node& n, const std::string& kind, const std::string& header,
                           const std::string& problem, const std::string& call,
                           int64_t blocks_needed, int threads);

// Families, one file each (the op's OpFacts::gpu says which). check_* gives the reason a node
// of it cannot be emitted (empty when it can); emit_* requires check_* empty.
std::optional<std::string> check_copy(const ir::Graph& g, const ir::Node& n);
OpKernelSource emit_copy(const ir::Graph& g, const ir::Node& n,
                         std::optional<BufferSlice> out_slice = std::nullopt);

std::optional<std::string> check_elementwise(const ir::Graph& g, const ir::Node& n);
OpKernelSource emit_elementwise(const ir::Graph& g, const ir::Node& n);

std::optional<std::string> check_window(const ir::Graph& g, const ir::Node& n);
// The fp32 code of one fused activation step on `v` (op kernels' epilogues: the depthwise and
// grouped convs, the normalizations).
std::string epilogue_step_code(const ops::EpilogueStep& s);
// `x_slice`: a depthwise conv's X where it lies in a Concat's buffer.
OpKernelSource emit_window(const ir::Graph& g, const ir::Node& n,
                           const std::optional<BufferSlice>& x_slice = std::nullopt);

// The tiling of the depthwise kernel (templates/tessel_depthwise.cuh; depthwise_tiling.cc).
// choose_depthwise_tiling: for `problem` (its problem fields and stage_vec set; the tiling
// fields are ignored) and elements of `elem_bytes`, the tiling within the kernel's
// shared-memory and register budgets with the least estimated time (depthwise_cycles, in SM
// cycles of an H100); nullopt when none fits (a window too large to stage): the grouped
// kernel then runs it. depthwise_tiling_refusal: why a tiling cannot run (empty when it
// can). depthwise_grid: the CTAs to launch (one per tile, or as many as are resident at
// once, a multiple of the slab count). depthwise_registers: the registers per thread the
// estimate assumes. Names ("dw_v4x8_r2x4_c4x2_s2_wr": vec x slab_vecs, rows x row groups,
// cols x col groups, stages, weights in registers or shared memory) name a tiling for sweeps.
std::optional<DepthwiseTiling> choose_depthwise_tiling(const DepthwiseTiling& problem, int elem_bytes);
std::optional<std::string> depthwise_tiling_refusal(const DepthwiseTiling& t, int elem_bytes);
int64_t depthwise_grid(const DepthwiseTiling& t, int elem_bytes);
int depthwise_registers(const DepthwiseTiling& t);
double depthwise_cycles(const DepthwiseTiling& t, int elem_bytes);
std::string depthwise_tiling_name(const DepthwiseTiling& t);
std::optional<DepthwiseTiling> parse_depthwise_tiling(const std::string& name,
                                                      const DepthwiseTiling& problem);

std::optional<std::string> check_resize(const ir::Graph& g, const ir::Node& n);
OpKernelSource emit_resize(const ir::Graph& g, const ir::Node& n);

std::optional<std::string> check_matmul(const ir::Graph& g, const ir::Node& n);
OpKernelSource emit_matmul(const ir::Graph& g, const ir::Node& n);

std::optional<std::string> check_reduce(const ir::Graph& g, const ir::Node& n);
OpKernelSource emit_reduce(const ir::Graph& g, const ir::Node& n);
// The reduction `kind` (a tessel::ReduceKind, e.g. "kReduceMean") over the middle dim of a
// contiguous [outer, r, inner] tensor of storage `t` into [outer, inner]
// (templates/tessel_op_reduce.cuh: ReduceColumns, or ReduceRows when inner is 1): the Reduce*
// ops over a run of adjacent dims, and the global pools. `what` heads the source. `store`
// defines the problem's TOut and finish(p, result) (reduction_store: the result in t).
OpKernelSource emit_reduction(const ir::Node& n, const std::string& kind, const std::string& what, DType t,
                              int64_t outer, int64_t r, int64_t inner, const std::string& store);
// The stored value of a float reduction: its result in t.
std::string reduction_store(DType t);

}  // namespace tessel::kernels::cuda::op_detail
