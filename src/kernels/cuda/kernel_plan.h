// Internal to codegen/cuda: the kernel plan, i.e. everything derived from (Contraction,
// Epilogue, Schedule) before any source is written: which template, how threads map onto
// operand tiles, store vector width, shared memory, grid and workspace. can_implement() is
// "make_plan() succeeded"; emit() writes the plan out. One derivation serves both, so the
// tuner's pruning and the generated code cannot disagree.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/contraction/contraction.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/kernel_rules.h"
#include "kernels/schedule.h"

namespace tessel::kernels::cuda {

// How one operand is read: its index map split into the contraction's groups. "rows" are
// the operand's M dims (A) or N dims (B).
struct OperandPlan {
  const contraction::Access* access = nullptr;
  char name = 'A';             // 'A' or 'B', for comments and identifiers
  std::vector<int> row_dims;   // iteration dims of M (A) or N (B), outermost first
  int64_t rows = 0;            // M or N
  bool k_major = true;         // contiguous along k (smem tile rows = m/n) or along m/n
  int vec = 1;                 // elements per global load
  // Thread mapping of the operand's shared-memory tile (see TileLoader, tessel_tile.cuh).
  int tile_rows = 0, tile_cols = 0;
  int iters = 0;               // vectors per thread per k-tile
  // The contraction whose maps the gather reads, when not the plan's (the packed-groups A
  // view, contraction/grouped.h), and its k-tile.
  const contraction::Contraction* view = nullptr;
  int view_block_k = 0;
};

struct KernelPlan {
  kernels::Instruction instruction = kernels::Instruction::kMmaSync;
  // The contraction the kernel computes: the problem's, or for packed groups its dense view
  // (groups folded into N), whose M, N, K, B and C the kernel reads; `views` owns the views.
  const contraction::Contraction* c = nullptr;
  std::vector<std::shared_ptr<const contraction::Contraction>> views;
  const contraction::Epilogue* e = nullptr;
  kernels::Schedule s;
  OperandPlan a, b;
  int threads = 0;
  int64_t tiles_m = 0, tiles_n = 0, k_tiles = 0;
  int k_tiles_per_split = 0;
  bool index64 = false;        // some flat offset needs 64 bits
  int store_vec = 1;           // output elements per store
  int store_n_stride = 1;      // n distance between them (block^2 for depth_to_space CRD)
  int64_t out_channels = 0;    // channels of one output pixel before the slice (ld)
  int residual_operand = -1;
  unsigned smem_bytes = 0;
  size_t workspace_bytes = 0;
  // kTma: how the tensor maps read A and B, and the C map of the bulk stores where the store
  // map and output allow them (else the epilogue stores from registers).
  std::optional<kernels::TmaLayout> tma;
  std::optional<device::TensorMapSpec> tma_store;
  // kTma with a C map: the residual's bulk loads (tessel_tma.cuh, kTmaResidual), where the
  // residual has the output's element type (16-bit or int8): C's map over its address.
  std::optional<device::TensorMapSpec> tma_residual;
  uint64_t grid_x = 0;
};

// Fills `plan`, or returns why the schedule cannot implement the problem.
std::optional<std::string> make_plan(const contraction::Contraction& c,
                                     const contraction::Epilogue& e, const kernels::Schedule& s,
                                     KernelPlan* plan);

// Source of the Gather struct of one operand (tessel_tile.cuh's contract).
std::string emit_gather(const KernelPlan& plan, const OperandPlan& op);

// MN-major operands walk k row by row without bounds checks: says why `op` cannot.
std::optional<std::string> check_gather(const contraction::Contraction& c, const OperandPlan& op);

// The C++ identifier of iteration dim `dim` in generated code ("x_oh").
std::string coord_name(const contraction::Contraction& c, int dim);

// Kernel-side element type of a dtype ("f16", "bf16", "float", "s8", "u8q").
const char* kernel_element_type(DType t);

}  // namespace tessel::kernels::cuda
