// Operand gathers: from an operand's affine index map to the Gather struct the tile loaders
// drive (contract in kernels/tessel_tile.cuh).
//
// Each tensor index is split by iteration group:
//   idx_d = row_d(batch, m) + k_d(k)        (row_d includes the constant offset)
// and the flat offset likewise: off = row_off(batch, m) + k_off(k), with per-dim strides
// folded into one stride per iteration dim. Per thread, the row parts are computed once (the
// only divisions), the k coordinates are advanced by block_k per k-tile with carries (no
// divisions in the main loop), and an index that can leave [0, extent) (padding) is checked
// as row_d + k_d in one unsigned compare: out of range reads zero.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "kernels/cuda/kernel_plan.h"
#include "core/error.h"
#include "core/shape.h"

namespace tessel::kernels::cuda {
namespace {

using contraction::Access;
using contraction::Contraction;

int64_t coeff(const contraction::AffineIndex& ix, int dim) {
  return dim < static_cast<int>(ix.coeffs.size()) ? ix.coeffs[dim] : 0;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// One tensor dim of the operand, split by group.
struct DimTerms {
  int64_t extent = 0;
  int64_t offset = 0;
  std::vector<std::pair<int, int64_t>> outer;  // batch and row dims (fixed per thread)
  std::vector<std::pair<int, int64_t>> inner;  // k dims (K-major) / row dims (MN-major): the
                                               // coordinates that vary along the thread's walk
  bool check = false;                          // can leave [0, extent)
};

// "x_oh * 2 + x_kh - 1"; "0" when empty.
std::string affine(const Contraction& c, const std::vector<std::pair<int, int64_t>>& terms,
                   int64_t offset) {
  std::string s;
  for (const auto& [j, k] : terms) {
    const std::string x = coord_name(c, j);
    const int64_t mag = k < 0 ? -k : k;
    if (s.empty()) s = k < 0 ? "-" : "";
    else s += k < 0 ? " - " : " + ";
    s += mag == 1 ? x : fmt::format("{} * {}", x, mag);
  }
  if (offset != 0 || s.empty()) {
    if (s.empty()) s = fmt::format("{}", offset);
    else s += offset < 0 ? fmt::format(" - {}", -offset) : fmt::format(" + {}", offset);
  }
  return s;
}

// Statements "const int x_oh = flat / 56 % 56;" decomposing `flat` over `dims` (outermost
// first). Only dims in `used` get a statement; the others still shape the divisors.
std::string decompose(const Contraction& c, const std::vector<int>& dims, const std::string& flat,
                      const std::string& indent, bool declare, const std::vector<bool>& used) {
  std::vector<std::string> lines(dims.size());
  int64_t inner = 1;
  for (int p = static_cast<int>(dims.size()) - 1; p >= 0; --p) {
    const int j = dims[p];
    const int64_t e = c.maps.dims[j].extent;
    std::string expr = flat;
    if (inner != 1) expr = fmt::format("{} / {}", expr, inner);
    if (p != 0) expr = fmt::format("{} % {}", expr, e);
    if (used[j]) {
      lines[p] = fmt::format("{}{}{} = {};\n", indent, declare ? "const int " : "",
                             coord_name(c, j), expr);
    }
    inner *= e;
  }
  std::string out;
  for (const auto& l : lines) out += l;
  return out;
}

struct Analysis {
  std::vector<DimTerms> dims;
  std::vector<int64_t> outer_stride;  // per iteration dim: flat-offset stride (0 if unused)
  std::vector<int64_t> inner_stride;
  int64_t const_offset = 0;
  std::vector<bool> used;  // per iteration dim: appears in some index
};

// Splits the operand's index map. `inner_dims` are the dims the thread walks (k for a
// K-major operand, its m/n dims for an MN-major one... see emit_gather).
Analysis analyze(const Contraction& c, const OperandPlan& op, const std::vector<int>& inner_dims) {
  const Access& acc = *op.access;
  const std::vector<int64_t> strides = strides_of(acc.shape);
  Analysis a;
  a.outer_stride.assign(c.maps.dims.size(), 0);
  a.inner_stride.assign(c.maps.dims.size(), 0);
  a.used.assign(c.maps.dims.size(), false);
  for (size_t d = 0; d < acc.shape.size(); ++d) {
    const auto& ix = acc.index[d];
    DimTerms t;
    t.extent = acc.shape[d];
    t.offset = ix.offset;
    int64_t lo = ix.offset, hi = ix.offset;
    for (size_t j = 0; j < c.maps.dims.size(); ++j) {
      const int jj = static_cast<int>(j);
      const int64_t k = coeff(ix, jj);
      // Dims of extent 1 belong to no group (the matcher drops them): their coordinate is 0.
      if (k == 0 || c.maps.dims[j].extent == 1) continue;
      a.used[j] = true;
      const int64_t span = k * (c.maps.dims[j].extent - 1);
      (span < 0 ? lo : hi) += span;
      if (contains(inner_dims, jj)) {
        t.inner.emplace_back(jj, k);
        a.inner_stride[j] += k * strides[d];
      } else {
        t.outer.emplace_back(jj, k);
        a.outer_stride[j] += k * strides[d];
      }
    }
    a.const_offset += ix.offset * strides[d];
    t.check = lo < 0 || hi >= t.extent;
    a.dims.push_back(std::move(t));
  }
  return a;
}

std::string linear(const Contraction& c, const std::vector<int64_t>& stride,
                   const std::vector<int>& order, int64_t constant) {
  std::vector<std::string> terms;
  for (int j : order) {
    if (stride[j] == 0) continue;
    const std::string x = coord_name(c, j);
    terms.push_back(stride[j] == 1 ? fmt::format("Index({})", x)
                                   : fmt::format("Index({}) * {}", x, stride[j]));
  }
  if (constant != 0 || terms.empty()) terms.push_back(fmt::format("Index({})", constant));
  std::string s;
  for (const auto& t : terms) s += (s.empty() ? "" : " + ") + t;
  return s;
}

std::string index_map_comment(const Contraction& c, const Access& acc, char name) {
  std::vector<std::string> ix;
  for (const auto& e : acc.index) {
    std::vector<std::pair<int, int64_t>> terms;
    for (size_t j = 0; j < c.maps.dims.size(); ++j)
      if (coeff(e, static_cast<int>(j)) != 0) terms.emplace_back(static_cast<int>(j), coeff(e, static_cast<int>(j)));
    ix.push_back(affine(c, terms, e.offset));
  }
  std::string joined;
  for (const auto& s : ix) joined += (joined.empty() ? "" : ", ") + s;
  return fmt::format("{}{} {}: {}[{}]", name, shape_str(acc.shape), dtype_name(acc.dtype), name, joined);
}

std::string dims_list(const Contraction& c, const std::vector<int>& dims) {
  std::string s;
  for (int j : dims) s += (s.empty() ? "" : ", ") + coord_name(c, j);
  return "(" + s + ")";
}

// Gather of a K-major operand: rows are m (n), the thread's column walks k.
std::string emit_k_major(const KernelPlan& plan, const OperandPlan& op, const std::string& elem,
                         const std::string& param) {
  const Contraction& c = *plan.c;
  const Analysis an = analyze(c, op, c.k_dims);
  const std::string sname = fmt::format("Gather{}", op.name);
  std::ostringstream o;
  o << "// " << index_map_comment(c, *op.access, op.name) << "\n";
  o << fmt::format("//   K-major, {}-element vectors; rows {} -> {}, k -> {}\n", op.vec,
                   op.name == 'A' ? "m" : "n", dims_list(c, op.row_dims), dims_list(c, c.k_dims));
  std::vector<int> mixed, row_only, k_only;
  bool window = false;  // some index sums a row and a k coordinate (a convolution window)
  for (size_t d = 0; d < an.dims.size(); ++d) {
    const DimTerms& t = an.dims[d];
    bool row_term = false;
    for (const auto& [j, k] : t.outer) row_term = row_term || contains(op.row_dims, j);
    window = window || (row_term && !t.inner.empty());
    if (!t.check) continue;
    if (!t.inner.empty() && !t.outer.empty()) mixed.push_back(static_cast<int>(d));
    else if (!t.inner.empty()) k_only.push_back(static_cast<int>(d));
    else row_only.push_back(static_cast<int>(d));
  }
  o << "struct " << sname << " {\n";
  o << fmt::format("  static constexpr int kIters = {};\n", op.iters);
  o << fmt::format("  static constexpr bool kReuseInL1 = {};  // {}\n", window,
                   window ? "window rows: re-read at the next kw, keep them in L1"
                          : "no window: each element is read once per CTA");
  o << fmt::format("  const {}* base_;\n", elem);
  o << "  Index row_off_[kIters];  // batch/row part of the flat offset (incl. constants)\n";
  for (int d : mixed) {
    o << fmt::format("  int row{}_[kIters];       // row part of index {}, checked with k{}_ against {}\n",
                     d, d, d, an.dims[d].extent);
  }
  o << "  u32 row_ok_;               // bit it: row it is in range\n";
  std::string kcoords;
  for (int j : c.k_dims) kcoords += (kcoords.empty() ? "" : ", ") + coord_name(c, j);
  o << "  int " << kcoords << ";  // k coordinates of this thread's column\n";
  o << "  Index k_off_;\n";
  for (int d : mixed) o << fmt::format("  int k{}_;\n", d);
  o << "  bool k_ok_;\n\n";

  // init
  o << "  __device__ __forceinline__ void init(const KernelParams& p, int batch, int row0, int row_step,\n"
       "                                       int col0) {\n";
  o << fmt::format("    base_ = static_cast<const {}*>({});\n", elem, param);
  o << decompose(c, c.batch_dims, "batch", "    ", true, an.used);
  o << "    row_ok_ = 0u;\n#pragma unroll\n    for (int it = 0; it < kIters; ++it) {\n";
  o << "      const int row = row0 + it * row_step;\n";
  o << decompose(c, op.row_dims, "row", "      ", true, an.used);
  std::vector<int> outer_order = c.batch_dims;
  outer_order.insert(outer_order.end(), op.row_dims.begin(), op.row_dims.end());
  o << "      row_off_[it] = " << linear(c, an.outer_stride, outer_order, an.const_offset) << ";\n";
  for (int d : mixed) {
    o << fmt::format("      row{}_[it] = {};\n", d, affine(c, an.dims[d].outer, an.dims[d].offset));
  }
  std::string row_cond = fmt::format("row < {}", op.rows);
  for (int d : row_only) {
    row_cond += fmt::format(" && u32({}) < {}u", affine(c, an.dims[d].outer, an.dims[d].offset),
                            an.dims[d].extent);
  }
  o << "      row_ok_ |= u32(" << row_cond << ") << it;\n    }\n";
  const std::vector<bool> all(c.maps.dims.size(), true);  // the carry chain needs every k dim
  o << decompose(c, c.k_dims, "col0", "    ", false, all);
  o << "    update_k();\n  }\n\n";

  // update_k: k parts from the k coordinates.
  o << "  __device__ __forceinline__ void update_k() {\n";
  o << "    k_off_ = " << linear(c, an.inner_stride, c.k_dims, 0) << ";\n";
  for (int d : mixed) o << fmt::format("    k{}_ = {};\n", d, affine(c, an.dims[d].inner, 0));
  const int outer_k = c.k_dims.front();
  std::string k_cond = fmt::format("{} < {}", coord_name(c, outer_k),
                                   c.maps.dims[outer_k].extent);
  for (int d : k_only) {
    k_cond += fmt::format(" && u32({}) < {}u", affine(c, an.dims[d].inner, an.dims[d].offset),
                          an.dims[d].extent);
  }
  o << "    k_ok_ = " << k_cond << ";\n  }\n\n";

  // advance: k += block_k with carries. A level whose increment can exceed its extent
  // carries by division (by a constant); otherwise one compare suffices.
  o << "  __device__ __forceinline__ void advance() {  // k += " << plan.s.block_k << "\n";
  int64_t inc = plan.s.block_k;
  for (int p = static_cast<int>(c.k_dims.size()) - 1; p >= 0; --p) {
    const int j = c.k_dims[p];
    const std::string x = coord_name(c, j);
    const int64_t e = c.maps.dims[j].extent;
    if (p == static_cast<int>(c.k_dims.size()) - 1) o << fmt::format("    {} += {};\n", x, inc);
    if (p == 0) break;
    const int jn = c.k_dims[p - 1];
    const std::string xn = coord_name(c, jn);
    if (inc <= e) {
      o << fmt::format("    if ({} >= {}) {{ {} -= {}; ++{}; }}\n", x, e, x, e, xn);
      inc = 1;
    } else {
      o << fmt::format("    {} += {} / {};\n    {} %= {};\n", xn, x, e, x, e);
      inc = (e - 1 + inc) / e;
    }
  }
  o << "    update_k();\n  }\n\n";

  std::string valid = "((row_ok_ >> it) & 1u) && k_ok_";
  for (int d : mixed) valid += fmt::format(" && u32(row{}_[it] + k{}_) < {}u", d, d, an.dims[d].extent);
  o << "  __device__ __forceinline__ bool valid(int it) const {\n    return " << valid << ";\n  }\n";
  o << "  __device__ __forceinline__ const void* ptr(int it) const { return base_ + row_off_[it] + k_off_; }\n";
  o << "  __device__ __forceinline__ const void* base() const { return base_; }\n";
  o << "};\n";
  return o.str();
}

// Gather of an MN-major operand: rows are k (one k dim), the thread's column is an m (n).
std::string emit_mn_major(const KernelPlan& plan, const OperandPlan& op, const std::string& elem,
                          const std::string& param) {
  const Contraction& c = *plan.c;
  const Analysis an = analyze(c, op, c.k_dims);
  const int kd = c.k_dims.front();
  const std::string sname = fmt::format("Gather{}", op.name);
  std::ostringstream o;
  o << "// " << index_map_comment(c, *op.access, op.name) << "\n";
  o << fmt::format("//   MN-major, {}-element vectors; columns {} -> {}, rows k -> {}\n", op.vec,
                   op.name == 'A' ? "m" : "n", dims_list(c, op.row_dims), dims_list(c, c.k_dims));
  o << "struct " << sname << " {\n";
  o << fmt::format("  static constexpr int kIters = {};\n", op.iters);
  o << "  static constexpr bool kReuseInL1 = false;\n";
  o << fmt::format("  const {}* base_;\n", elem);
  o << "  Index col_off_;  // batch/column part of the flat offset\n";
  o << "  bool col_ok_;\n";
  o << "  int k_, k_step_;  // k of this thread's first row, rows apart\n\n";
  o << "  __device__ __forceinline__ void init(const KernelParams& p, int batch, int row0, int row_step,\n"
       "                                       int col0) {\n";
  o << fmt::format("    base_ = static_cast<const {}*>({});\n", elem, param);
  o << decompose(c, c.batch_dims, "batch", "    ", true, an.used);
  o << decompose(c, op.row_dims, "col0", "    ", true, an.used);
  std::vector<int> outer_order = c.batch_dims;
  outer_order.insert(outer_order.end(), op.row_dims.begin(), op.row_dims.end());
  o << "    col_off_ = " << linear(c, an.outer_stride, outer_order, an.const_offset) << ";\n";
  std::string cond = fmt::format("col0 < {}", op.rows);
  for (const DimTerms& t : an.dims) {
    if (t.check) cond += fmt::format(" && u32({}) < {}u", affine(c, t.outer, t.offset), t.extent);
  }
  o << "    col_ok_ = " << cond << ";\n";
  o << "    k_ = row0;\n    k_step_ = row_step;\n  }\n";
  o << "  __device__ __forceinline__ void advance() { k_ += " << plan.s.block_k << "; }\n";
  o << fmt::format("  __device__ __forceinline__ bool valid(int it) const {{ return col_ok_ && k_ + it * k_step_ < {}; }}\n",
                   c.maps.dims[kd].extent);
  o << fmt::format("  __device__ __forceinline__ const void* ptr(int it) const {{\n"
                   "    return base_ + col_off_ + Index(k_ + it * k_step_) * {};\n  }}\n",
                   an.inner_stride[kd]);
  o << "  __device__ __forceinline__ const void* base() const { return base_; }\n";
  o << "};\n";
  return o.str();
}

const char* element_type(DType t) {
  switch (t) {
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "float";
    case DType::kI8: return "s8";
    case DType::kU8: return "u8q";
    default: break;
  }
  TESSEL_ICHECK(false) << "no kernel element type for " << dtype_name(t);
  return "";
}

}  // namespace

std::string coord_name(const Contraction& c, int dim) {
  auto sanitize = [](const std::string& name) {
    std::string s;
    for (char ch : name) {
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
      s += ok ? ch : '_';
    }
    return s;
  };
  const std::string mine = sanitize(c.maps.dims[dim].name);
  bool unique = !mine.empty();
  for (size_t j = 0; j < c.maps.dims.size() && unique; ++j) {
    unique = static_cast<int>(j) == dim || sanitize(c.maps.dims[j].name) != mine;
  }
  // Dim names need not be unique or non-empty: then the dim's index disambiguates.
  return unique ? "x_" + mine : fmt::format("x{}_{}", dim, mine);
}

std::optional<std::string> check_gather(const Contraction& c, const OperandPlan& op) {
  if (op.k_major) return std::nullopt;
  const Analysis an = analyze(c, op, c.k_dims);
  for (size_t d = 0; d < an.dims.size(); ++d) {
    if (an.dims[d].check && !an.dims[d].inner.empty()) {
      return fmt::format("{} is MN-major and its index {} needs a bounds check along k", op.name, d);
    }
  }
  return std::nullopt;
}

std::string emit_gather(const KernelPlan& plan, const OperandPlan& op) {
  if (op.view) {  // the operand reads another contraction's maps (packed groups' A)
    KernelPlan viewed = plan;
    viewed.c = op.view;
    viewed.s.block_k = op.view_block_k;
    OperandPlan plain = op;
    plain.view = nullptr;
    return emit_gather(viewed, plain);
  }
  const char* elem = element_type(op.access->dtype);
  const std::string param = op.name == 'A' ? "p.a" : "p.b";
  return op.k_major ? emit_k_major(plan, op, elem, param) : emit_mn_major(plan, op, elem, param);
}

const char* kernel_element_type(DType t) { return element_type(t); }

}  // namespace tessel::kernels::cuda
