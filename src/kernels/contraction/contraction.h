// The Contraction: a GEMM view of any contraction-shaped op, derived by the matcher from the
// op's index maps. Kernel generators consume a Contraction (plus an Epilogue and a
// Schedule), never an op name.
//
//   C[b, m, n] = sum_k A(b, m, k) * B(b, n, k)
//
// Each of batch, M, N and K is a group of iteration dims (outermost first); a flat m is
// decomposed into its dims' coordinates (e.g. m -> (image, oh, ow) for conv), and the
// operands' addresses follow from the index maps. When an operand index depends on both an
// M dim and a K dim (conv's oh*s + kh*d - p), A is an implicit-GEMM gather.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/contraction/index_map.h"

namespace tessel::contraction {

// Which iteration group is contiguous in memory for an operand (its fastest-varying dim).
//   A: kK  = "row-major A" (m, k), the N in NN/NT;  kMN = (k, m), the T in TN.
//   B: kK  = (n, k), as conv weights and NT GEMM;    kMN = (k, n), as NN GEMM.
enum class Major { kK, kMN };

struct Contraction {
  IndexMaps maps;
  // Iteration dims of each group, outermost first (indices into maps.dims). Batch, M and N
  // are ordered by their stride in C, K by its stride in A (then B). A dim of extent 1 is in
  // no group: its value is always 0.
  std::vector<int> batch_dims, m_dims, n_dims, k_dims;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  Major a_major = Major::kK, b_major = Major::kK;
  // Elements per aligned contiguous vector along each operand's contiguous dim (8, 4, 2, 1
  // for 16-bit types): bounded by the contiguous extent and the alignment of every stride.
  int a_vec = 1, b_vec = 1;
  // A (or B) needs bounds checks / index arithmetic beyond a plain strided matrix. Plain
  // means: no index can leave its tensor (no padding), and within each group the dims'
  // element strides flatten to one stride (conv 1x1 stride 1: M = (image, oh, ow) has row
  // stride ci). So conv 3x3 (oh + kh - 1), a strided 1x1 conv (2*oh) and a batch broadcast
  // over only some batch dims are gathers; a grouped 1x1 conv (channel g*cig + ci) is not.
  bool a_gather = false, b_gather = false;
  DType a_dtype = DType::kF16, b_dtype = DType::kF16, acc_dtype = DType::kF32;
  // The GEMM's A is the op's second operand: match() swapped the operands (C = B*A) because
  // C's contiguous dim indexed only the op's first one (a matrix-vector product [M,K]x[K]).
  // maps.a/maps.b above are already swapped: bind the op's input 0 to KernelArgs::b.
  bool operands_swapped = false;

  int64_t flops() const { return 2 * batch * m * n * k; }
  // Stable text key for kernel caches and the tuning database, e.g.
  // "f16:b1:m3136:n64:k576:A(conv...)": equal keys mean the same generated code.
  std::string key() const;
  std::string str() const;  // multi-line description for `tessel codegen`
};

// The int8 Tensor Core contractions: W (B) i8, and A i8 or u8 (is_int8_operand, core/dtype.h;
// u8 read as it is: a zero pad is the real 0 either way). One-byte integers both, so the
// kernels move them alike; only the instruction's A type differs.
using tessel::is_int8_operand;
inline bool int8_operands(const Contraction& c) {
  return c.b_dtype == DType::kI8 && is_int8_operand(c.a_dtype);
}

// Why a contraction cannot use Tensor Cores (or cannot be a contraction at all), or a note on
// how an eligible one is read (e.g. "A: ci=3 is not a multiple of 8: 2-byte loads; pad it to 8
// for full-width loads"). The text is user output: `tessel explain` prints it per layer.
struct Remark {
  std::string text;
};

struct MatchResult {
  std::optional<Contraction> contraction;  // empty: not a contraction (see remarks)
  bool tensor_cores = false;               // eligible for the mma.sync/wgmma generator
  std::vector<Remark> remarks;             // reasons for every "no" above, and notes on
                                           // narrow (2-byte) loads of eligible operands
};

// Derives the Contraction from index maps: classifies dims (in A, B and C: batch; A and C:
// M; B and C: N; reduction in A and B: K), checks that C is a plain function of (b, m, n),
// finds majorness and vector widths, and decides Tensor Core eligibility.
//
// C must be a dense layout of (batch, m, n): every C element written exactly once, the N
// dims the innermost run of C (dims in B and C only), the M dims the next run of dims in A
// and C only (batch dims may sit between), and the batch dims flattening to one stride
// wherever they sit. That admits a grouped conv's C[b, oh, ow, g*cog + co] (the channel is
// the batch offset g*cog plus n) and a broadcast MatMul: an output dim in only one operand
// but outside those runs becomes a batch dim with stride 0 in the other operand, while one
// in A only next to M joins M (MatMul [B,M,K]x[K,N] is one GEMM with M' = B*M).
//  - C's contiguous dim in A only (C = [M,K]x[K]): the operands are swapped (see
//    Contraction::operands_swapped).
//  - C's contiguous dim a batch dim (depthwise conv's channel): N is empty; still a
//    contraction, but not for Tensor Cores (remark).
//  - Anything else (C indexed by a reduction dim, an output dim missing from C, C elements
//    written twice or never): no contraction, one remark "C is not a function of M and N".
//
// Malformed maps (wrong coefficient counts) are InternalErrors: ops/ builds them.
MatchResult match(const IndexMaps& maps);

// The Tensor Core conditions match() reports in MatchResult::tensor_cores, evaluated on the
// Contraction's own fields: both operands f16, both bf16, or int8_operands; each operand's
// contiguous tensor dim stepped by 1 by one of its K or M (A) / N (B) dims; vectors of at least 2
// bytes (a_vec, b_vec >= 1 for 16-bit types, >= 2 for i8: the kernels load 4 to 16 bytes with
// cp.async and 2-byte vectors through registers, so ci=3 convs qualify, at a lower load
// rate); batch, M, N, K >= 1; C's contiguous dim is an N dim (n_dims is empty only for a
// single-element C).
bool tensor_core_eligible(const Contraction& c);

}  // namespace tessel::contraction
