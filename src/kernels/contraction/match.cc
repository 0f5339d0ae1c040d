// match(): from index maps to a Contraction, or to the reasons there is none.
//
// The analysis follows the "Auto TensorCore CodeGen" RFC: the roles of the operands and of
// every loop come from where each iteration variable appears, never from an op name.
//   1. Roles by appearance: a reduction dim is K; an output dim in A and B is batch, in A
//      only an M candidate, in B only an N candidate. Extent-1 dims are dropped.
//   2. C must be written exactly once per (batch, m, n): its address is a dense mixed-radix
//      layout of the output dims. Its contiguous dim decides the operand order: if it
//      indexes A only, the operands are swapped so that it indexes B only -- unless that N
//      would not be C's last tensor dim alone (C's last dim an extent-1 channel, or B indexing
//      no output dim while A's innermost run has several): then N = 1.
//   3. Groups from C's layout: N = the innermost run of N candidates, M = the next run of
//      M candidates (batch dims may sit in between: a grouped conv's channel g*cog + co),
//      every other output dim is batch.
//   4. Per operand: its contiguous dim (majorness), the widest aligned vector along it, and
//      whether it is a plain strided matrix.
//   5. Tensor Core eligibility, one remark per failed condition, and a note where an eligible
//      operand is read one element at a time (ci=3: 2-byte loads).
#include <algorithm>
#include <optional>
#include <sstream>

#include "kernels/contraction/contraction.h"
#include "core/error.h"

namespace tessel::contraction {
namespace {

enum class Role { kNone, kBatch, kM, kN, kK };  // kNone: extent 1, the value is always 0

bool indexes(const Access& x, int j) {
  for (const AffineIndex& idx : x.index)
    if (idx.coeffs[j] != 0) return true;
  return false;
}

// Whether C's last tensor dim (the one the store map puts n on) is indexed by dim j.
bool indexes_last_dim(const Access& x, int j) {
  return !x.index.empty() && x.index.back().coeffs[j] != 0;
}

std::string quoted_names(const std::vector<int>& group, const std::vector<IterDim>& dims) {
  std::string s;
  for (int j : group) s += (s.empty() ? "'" : ", '") + dims[j].name + "'";
  return s;
}

int64_t extent_of(const std::vector<int>& group, const std::vector<IterDim>& dims) {
  int64_t e = 1;
  for (int j : group) e *= dims[j].extent;
  return e;
}

// True when the group's dims (outermost first) flatten to one non-negative stride: each
// dim's stride is the next inner dim's stride times that dim's extent. A group broadcast in
// this operand (all strides 0) flattens too.
bool flattens(const std::vector<int>& group, const std::vector<int64_t>& strides,
              const std::vector<IterDim>& dims) {
  for (size_t t = 0; t < group.size(); ++t) {
    if (strides[group[t]] < 0) return false;
    if (t + 1 < group.size() &&
        strides[group[t]] != strides[group[t + 1]] * dims[group[t + 1]].extent)
      return false;
  }
  return true;
}

// Largest power of two <= cap that divides v (0 is divisible by everything).
int largest_pow2_dividing(int64_t v, int cap) {
  int p = 1;
  while (p < cap && v % (int64_t{2} * p) == 0) p *= 2;
  return p;
}

struct OperandFacts {
  Major major = Major::kK;
  int vec = 1;
  bool gather = false;
  // No loop walks the operand contiguously along its M/N or K dims: not for Tensor Cores.
  std::optional<std::string> no_vectors;
  // Why vectors are a single element ("A: ci=3 is not a multiple of 8"), and the fix
  // ("pad it to 8") where padding is one.
  std::optional<std::string> scalar_why;
  std::optional<std::string> pad_to;
};

// `name` is "A" or "B"; `groups` are the operand's batch, M-or-N and K groups; `mn` is the
// letter of its middle group, for messages.
OperandFacts analyze_operand(const char* name, const Access& x, const std::vector<IterDim>& dims,
                             const std::vector<Role>& role,
                             const std::vector<const std::vector<int>*>& groups, char mn) {
  OperandFacts f;
  std::vector<int64_t> strides = element_strides(x, dims.size());
  f.gather = !always_in_bounds(x, dims);
  for (const std::vector<int>* g : groups) f.gather = f.gather || !flattens(*g, strides, dims);

  // 16-byte vectors: 8 halves, 16 bytes of i8, 4 floats.
  const int max_vec = std::max<int>(1, 16 / static_cast<int>(dtype_size(x.dtype)));
  std::ostringstream why;
  why << name << ": ";

  // The contiguous tensor dim is the innermost one of extent > 1 (its row-major stride is
  // 1); the contiguous iteration dim indexes it with coefficient 1. K is preferred when
  // several qualify (a Hankel view A[m + k]), as K-major is the faster load.
  int d_star = -1;
  for (int d = static_cast<int>(x.shape.size()) - 1; d >= 0 && d_star < 0; --d)
    if (x.shape[d] > 1) d_star = d;
  int j_star = -1;
  if (d_star >= 0) {
    auto rank = [&](int j) { return role[j] == Role::kK ? 0 : role[j] == Role::kBatch ? 2 : 1; };
    for (size_t j = 0; j < dims.size(); ++j) {
      if (role[j] == Role::kNone || x.index[d_star].coeffs[j] != 1) continue;
      if (j_star < 0 || rank(static_cast<int>(j)) < rank(j_star)) j_star = static_cast<int>(j);
    }
  }
  if (j_star < 0) {
    why << "no loop walks it with unit stride";
    if (d_star >= 0) why << " (its innermost index is " << affine_str(x.index[d_star], dims) << ")";
    why << ": Tensor Cores load contiguous vectors (SIMT kernel used)";
    f.no_vectors = why.str();
    return f;
  }
  const IterDim& contiguous = dims[j_star];
  if (role[j_star] == Role::kBatch) {
    why << "its contiguous dim '" << contiguous.name << "' is a batch dim: Tensor Cores load "
        << name << " along " << mn << " or K (SIMT kernel used)";
    f.no_vectors = why.str();
    return f;
  }
  f.major = role[j_star] == Role::kK ? Major::kK : Major::kMN;

  // A vector of v elements starting at a multiple of v along the contiguous dim must stay
  // inside one row of that dim, start aligned wherever the other loops put it, and be all in
  // or all out of bounds (so conv padding never splits it): v divides the contiguous extent,
  // the contiguous tensor dim's extent, every other coefficient in its index and its offset.
  // The other tensor dims' strides are multiples of the contiguous tensor dim's extent.
  f.vec = max_vec;
  auto limit = [&](int64_t value, auto&& describe) {
    int p = largest_pow2_dividing(value, max_vec);
    if (p >= f.vec) return;
    f.vec = p;
    if (f.vec < 2 && !f.scalar_why) {
      describe();
      f.scalar_why = why.str();
    }
  };
  limit(contiguous.extent, [&] {
    int64_t padded = (contiguous.extent + max_vec - 1) / max_vec * max_vec;
    why << contiguous.name << "=" << contiguous.extent << " is not a multiple of " << max_vec;
    f.pad_to = "pad it to " + std::to_string(padded);
  });
  limit(x.shape[d_star], [&] {
    why << "its contiguous tensor dim has extent " << x.shape[d_star]
        << ", so vectors would straddle rows";
  });
  for (size_t j = 0; j < dims.size(); ++j) {
    int64_t c = x.index[d_star].coeffs[j];
    if (static_cast<int>(j) == j_star || role[j] == Role::kNone || c == 0) continue;
    limit(c, [&] {
      why << "dim '" << dims[j].name << "' moves " << c << " elements along the contiguous dim '"
          << contiguous.name << "', so vectors would be misaligned";
    });
  }
  limit(x.index[d_star].offset, [&] {
    why << "offset " << x.index[d_star].offset << " on the contiguous dim '" << contiguous.name
        << "' misaligns vectors";
  });
  return f;
}

bool tensor_core_dtype(DType t) { return t == DType::kF16 || t == DType::kBF16 || t == DType::kI8; }

// The Tensor Core kernels' loaders move 4 to 16 bytes per cp.async, and 2-byte vectors
// through registers (ld.global + st.shared, one k-tile ahead): so a 16-bit operand can be
// read one element at a time, an 8-bit one needs pairs.
bool loads_tensor_cores_take(int vec, DType t) {
  return vec * static_cast<int>(dtype_size(t)) >= 2;
}

// The Tensor Core loaders read an operand in vectors along its K dims or its M (A) / N (B)
// dims: one of those must step the operand's contiguous tensor dim (its innermost of extent
// > 1) by 1. analyze_operand's "no_vectors" cases are exactly the operands without one.
bool walked_along_gemm_dims(const Access& x, const std::vector<int>& k_dims,
                            const std::vector<int>& rows) {
  int d_star = -1;
  for (int d = static_cast<int>(x.shape.size()) - 1; d >= 0 && d_star < 0; --d)
    if (x.shape[d] > 1) d_star = d;
  if (d_star < 0) return false;
  for (const std::vector<int>* group : {&k_dims, &rows})
    for (int j : *group)
      if (x.index[d_star].coeffs[j] == 1) return true;
  return false;
}

DType accumulator_for(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32:
      return DType::kF32;
    case DType::kF64:
      return DType::kF64;
    case DType::kI64:
      return DType::kI64;
    default:
      return DType::kI32;  // i8, u8, i32, bool
  }
}

MatchResult not_a_contraction(std::string why) {
  MatchResult r;
  r.remarks.push_back({"C is not a function of M and N: " + std::move(why)});
  return r;
}

}  // namespace

bool tensor_core_eligible(const Contraction& c) {
  bool scalar_c = c.batch_dims.empty() && c.m_dims.empty() && c.n_dims.empty();
  return ((tensor_core_dtype(c.a_dtype) && c.a_dtype == c.b_dtype) || int8_operands(c)) &&
         walked_along_gemm_dims(c.maps.a, c.k_dims, c.m_dims) &&
         walked_along_gemm_dims(c.maps.b, c.k_dims, c.n_dims) &&
         loads_tensor_cores_take(c.a_vec, c.a_dtype) &&
         loads_tensor_cores_take(c.b_vec, c.b_dtype) && c.batch >= 1 && c.m >= 1 && c.n >= 1 &&
         c.k >= 1 && (!c.n_dims.empty() || scalar_c);
}

MatchResult match(const IndexMaps& input) {
  validate(input);
  Contraction c;
  c.maps = input;
  const std::vector<IterDim>& dims = c.maps.dims;
  const int num_dims = static_cast<int>(dims.size());

  // 1. Roles by appearance.
  std::vector<Role> role(num_dims, Role::kNone);
  std::vector<int> outputs;  // output dims of extent > 1
  for (int j = 0; j < num_dims; ++j) {
    const IterDim& d = dims[j];
    if (d.extent == 1) continue;
    bool in_c = indexes(c.maps.c, j);
    if (d.reduction) {
      if (in_c) return not_a_contraction("reduction dim '" + d.name + "' indexes C");
      role[j] = Role::kK;
      continue;
    }
    if (!in_c)
      return not_a_contraction("output dim '" + d.name + "' (extent " + std::to_string(d.extent) +
                               ") does not index C, so C would be written repeatedly");
    if (d.extent == 0)
      return not_a_contraction("C is empty (dim '" + d.name +
                               "' has extent 0): nothing to compute");
    outputs.push_back(j);
  }

  // 2. C's layout: sorted by stride, the output dims must form a dense mixed radix (each
  // stride the previous stride times the previous extent, from 1 to numel(C)). With every
  // index in bounds, that makes (output dims) -> C elements a bijection.
  std::vector<int64_t> c_strides = element_strides(c.maps.c, num_dims);
  std::vector<IterDim> output_space = dims;  // C's bounds do not depend on K (even K = 0)
  for (IterDim& d : output_space)
    if (d.reduction) d.extent = 1;
  std::sort(outputs.begin(), outputs.end(),
            [&](int x, int y) { return c_strides[x] > c_strides[y]; });  // outermost first
  {
    int64_t expected = 1;
    bool dense = always_in_bounds(c.maps.c, output_space) && element_offset(c.maps.c) == 0;
    for (auto it = outputs.rbegin(); dense && it != outputs.rend(); ++it) {
      dense = c_strides[*it] == expected;
      expected *= dims[*it].extent;
    }
    int64_t c_elements = 1;
    for (int64_t e : c.maps.c.shape) c_elements *= e;
    if (!dense || expected != c_elements) {
      std::ostringstream os;
      os << "C";
      for (size_t d = 0; d < c.maps.c.index.size(); ++d)
        os << (d ? ", " : "[") << affine_str(c.maps.c.index[d], dims);
      os << (c.maps.c.index.empty() ? "[]" : "]") << " in " << shape_str(c.maps.c.shape)
         << " does not write each element exactly once";
      return not_a_contraction(os.str());
    }
  }
  // Which operand is the GEMM's B: the one C's contiguous dim indexes. (A single-element C,
  // a dot product, has no contiguous dim: M = N = 1.) Except where B indexes no output dim of
  // its own (N = 1) and C's innermost run of A-only dims is more than one dim (a conv to one
  // channel: img, oh, ow): swapped, they would all be N, which no store map takes; unswapped,
  // they are M and N is 1. And never where C's last tensor dim does not index that dim (a
  // dense layer to one feature, C[m, o] with o of extent 1): the store map puts n on C's last
  // tensor dim, so swapped, m could not be N; unswapped, it is M and N is 1.
  if (!outputs.empty() && indexes_last_dim(c.maps.c, outputs.back())) {
    const int innermost = outputs.back();
    auto only_in = [&](const Access& x, const Access& y, int j) {
      return indexes(x, j) && !indexes(y, j);
    };
    const bool b_has_n = std::any_of(outputs.begin(), outputs.end(),
                                     [&](int j) { return only_in(c.maps.b, c.maps.a, j); });
    size_t a_run = 0;
    while (a_run < outputs.size() && only_in(c.maps.a, c.maps.b, outputs[outputs.size() - 1 - a_run]))
      ++a_run;
    if ((b_has_n || a_run == 1) && only_in(c.maps.a, c.maps.b, innermost)) {
      std::swap(c.maps.a, c.maps.b);
      c.operands_swapped = true;
    }
  }

  // 3. Groups. Walking C from its contiguous dim outwards: the run of B-only dims is N; then,
  // skipping dims of A and B (true batch), the next run of A-only dims is M. Everything else
  // is batch: a B-only or A-only dim outside those runs is broadcast in the other operand.
  // If C's contiguous dim is a batch dim (depthwise conv: C[b, oh, ow, g]), N is empty.
  for (int j : outputs) {
    bool in_a = indexes(c.maps.a, j), in_b = indexes(c.maps.b, j);
    role[j] = in_a && !in_b ? Role::kM : !in_a && in_b ? Role::kN : Role::kBatch;
  }
  size_t pos = outputs.size();
  while (pos > 0 && role[outputs[pos - 1]] == Role::kN)
    c.n_dims.insert(c.n_dims.begin(), outputs[--pos]);
  while (pos > 0 && role[outputs[pos - 1]] == Role::kBatch) --pos;
  while (pos > 0 && role[outputs[pos - 1]] == Role::kM)
    c.m_dims.insert(c.m_dims.begin(), outputs[--pos]);
  for (int j : outputs) {
    bool in_m = std::find(c.m_dims.begin(), c.m_dims.end(), j) != c.m_dims.end();
    bool in_n = std::find(c.n_dims.begin(), c.n_dims.end(), j) != c.n_dims.end();
    if (!in_m && !in_n) {
      role[j] = Role::kBatch;
      c.batch_dims.push_back(j);
    }
  }
  if (!flattens(c.batch_dims, c_strides, dims))
    return not_a_contraction("batch dims " + quoted_names(c.batch_dims, dims) +
                             " are not adjacent in C, so C has no single batch stride");

  // K: the reduction dims, outermost first by their stride in A, then in B. For conv NHWC
  // that is (kh, kw, ci) in both operands.
  std::vector<int64_t> a_strides = element_strides(c.maps.a, num_dims);
  std::vector<int64_t> b_strides = element_strides(c.maps.b, num_dims);
  for (int j = 0; j < num_dims; ++j)
    if (role[j] == Role::kK) c.k_dims.push_back(j);
  // A reduction of one element (a dense layer over one input feature: an outer product) keeps
  // its last reduction dim as a K of extent 1, so that it is a GEMM with K = 1 rather than
  // none. Its operands are then read one element at a time (below): their innermost tensor dim
  // is that K of extent 1, which no vector runs along.
  bool unit_k = false;
  if (c.k_dims.empty())
    for (int j = num_dims - 1; j >= 0 && !unit_k; --j)
      if (dims[j].reduction && dims[j].extent == 1) {
        role[j] = Role::kK;
        c.k_dims.push_back(j);
        unit_k = true;
      }
  std::stable_sort(c.k_dims.begin(), c.k_dims.end(), [&](int x, int y) {
    if (a_strides[x] != a_strides[y]) return a_strides[x] > a_strides[y];
    return b_strides[x] > b_strides[y];
  });

  c.batch = extent_of(c.batch_dims, dims);
  c.m = extent_of(c.m_dims, dims);
  c.n = extent_of(c.n_dims, dims);
  c.k = extent_of(c.k_dims, dims);
  c.a_dtype = c.maps.a.dtype;
  c.b_dtype = c.maps.b.dtype;
  // An int8 X under float weights (a QDQ model's stem reading its quantized input) is
  // converted to the weights' dtype as it is read: their float accumulates.
  c.acc_dtype = accumulator_for(is_integer(c.a_dtype) && !is_integer(c.b_dtype) ? c.b_dtype : c.a_dtype);

  // 4. Operands.
  OperandFacts a =
      analyze_operand("A", c.maps.a, dims, role, {&c.batch_dims, &c.m_dims, &c.k_dims}, 'M');
  OperandFacts b =
      analyze_operand("B", c.maps.b, dims, role, {&c.batch_dims, &c.n_dims, &c.k_dims}, 'N');
  c.a_major = a.major;
  c.b_major = b.major;
  c.a_vec = a.vec;
  c.b_vec = b.vec;
  c.a_gather = a.gather;
  c.b_gather = b.gather;
  // The loaders walk k in k_dims order, so a K-major operand moves in vectors only along the
  // innermost K dim. Where its contiguous dim is another K dim (an NCHW stem: A orders K as
  // (ci, kh, kw), while B is contiguous along ci) it is read element by element.
  auto along_inner_k = [&](const Access& x) {
    if (c.k_dims.empty() || x.index.empty()) return false;
    const auto& coeffs = x.index.back().coeffs;
    const size_t inner = static_cast<size_t>(c.k_dims.back());
    return inner < coeffs.size() && coeffs[inner] == 1;
  };
  if (c.a_major == Major::kK && !along_inner_k(c.maps.a)) c.a_vec = 1;
  if (c.b_major == Major::kK && !along_inner_k(c.maps.b)) c.b_vec = 1;
  if (unit_k) c.a_vec = c.b_vec = 1;

  // 5. Tensor Core eligibility: one remark per failed condition (a refusal), plus notes on
  // how eligible operands are read.
  MatchResult r;
  int refusals = 0;
  auto refuse = [&](std::string text) {
    r.remarks.push_back({std::move(text)});
    ++refusals;
  };
  auto note = [&](std::string text) { r.remarks.push_back({std::move(text)}); };
  const std::string a_type(dtype_name(c.a_dtype)), b_type(dtype_name(c.b_dtype));
  if (c.a_dtype == c.b_dtype && !tensor_core_dtype(c.a_dtype)) {
    refuse("dtype " + a_type + " operands: Tensor Cores take f16/bf16/i8");
  } else if (c.a_dtype != c.b_dtype && !int8_operands(c)) {
    for (auto [name, t] : {std::pair{"A", c.a_dtype}, std::pair{"B", c.b_dtype}})
      if (!tensor_core_dtype(t))
        refuse("dtype " + std::string(dtype_name(t)) + " operand " + name +
               ": Tensor Cores take f16/bf16/i8");
    refuse("A is " + a_type + " but B is " + b_type + ": Tensor Cores multiply equal types (or a u8 A by an i8 B)");
  }
  if (!outputs.empty() && c.n_dims.empty()) {
    const int innermost = outputs.back();
    const bool in_a = indexes(c.maps.a, innermost), in_b = indexes(c.maps.b, innermost);
    refuse(in_a && !in_b ? "N is 1 (B indexes no output dim of its own): Tensor Core tiles store C "
                           "as rows of N (SIMT kernel used)"
                         : "C's contiguous dim '" + dims[innermost].name + "' is a batch dim (it indexes " +
                               (in_a ? "both A and B" : "neither A nor B") +
                               "): Tensor Core tiles store C as rows of N (SIMT kernel used)");
  }
  for (const auto& [f, t] : {std::pair{&a, c.a_dtype}, std::pair{&b, c.b_dtype}}) {
    if (f->no_vectors) {
      refuse(*f->no_vectors);
    } else if (f->scalar_why && tensor_core_dtype(t) && loads_tensor_cores_take(f->vec, t)) {
      // Tensor Cores can read it, one element per load: say so, and how to widen the loads.
      note(*f->scalar_why + ": " + std::to_string(f->vec * dtype_size(t)) + "-byte loads" +
           (f->pad_to ? "; " + *f->pad_to + " for full-width loads" : ""));
    } else if (f->scalar_why) {
      refuse(*f->scalar_why + (f->pad_to ? ": " + *f->pad_to + " for Tensor Cores" : "") +
             " (SIMT kernel used)");
    }
  }
  // (An empty output returned above: only K can be 0 here.)
  if (c.k == 0) refuse("K=0: an empty reduction, C is the epilogue of zeros");

  r.tensor_cores = tensor_core_eligible(c);
  TESSEL_ICHECK(r.tensor_cores == (refusals == 0))
      << "Tensor Core eligibility and its remarks disagree for\n"
      << c.maps.str();
  r.contraction = std::move(c);
  return r;
}

}  // namespace tessel::contraction
