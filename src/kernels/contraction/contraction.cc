#include "kernels/contraction/contraction.h"

#include <array>
#include <sstream>

namespace tessel::contraction {
namespace {

struct Group {
  char letter;
  const std::vector<int>* dims;
};

std::array<Group, 4> groups_of(const Contraction& c) {
  return {{{'b', &c.batch_dims}, {'m', &c.m_dims}, {'n', &c.n_dims}, {'k', &c.k_dims}}};
}

// One operand in key form: "[1,56,56,64](0,m0+k0-1,m1+k1-1,k2)". Terms are written in group
// order (b, m, n, k) under canonical names; dims in no group (extent 1) are always 0.
std::string canonical_access(const Contraction& c, const Access& x) {
  std::ostringstream os;
  os << shape_str(x.shape) << "(";
  for (size_t d = 0; d < x.index.size(); ++d) {
    if (d) os << ",";
    bool first = true;
    for (const Group& g : groups_of(c)) {
      for (size_t t = 0; t < g.dims->size(); ++t) {
        int64_t coeff = x.index[d].coeffs[(*g.dims)[t]];
        if (coeff == 0) continue;
        if (!first || coeff < 0) os << (coeff < 0 ? "-" : "+");
        if (coeff != 1 && coeff != -1) os << (coeff < 0 ? -coeff : coeff) << "*";
        os << g.letter << t;
        first = false;
      }
    }
    int64_t offset = x.index[d].offset;
    if (first)
      os << offset;
    else if (offset != 0)
      os << (offset > 0 ? "+" : "") << offset;
  }
  os << ")";
  return os.str();
}

const char* major_name(Major m, char mn) {
  return m == Major::kK ? "K-major" : (mn == 'M' ? "M-major" : "N-major");
}

}  // namespace

std::string Contraction::key() const {
  // Everything the generated code depends on, and nothing else: types, extents, and the
  // index maps written over canonical dim names (group letter + position), so the op's own
  // dim names and declaration order do not matter. Majorness, vectors and gathers follow
  // from the maps. e.g. GEMM NN 512x64x512:
  //   f16*f16->f16/f32:b1:m512:n64:k512:b()m(512)n(64)k(512)
  //     :A[512,512](m0,k0):B[512,64](k0,n0):C[512,64](m0,n0)
  std::ostringstream os;
  os << dtype_name(a_dtype) << "*" << dtype_name(b_dtype) << "->" << dtype_name(maps.c.dtype) << "/"
     << dtype_name(acc_dtype) << ":b" << batch << ":m" << m << ":n" << n << ":k" << k << ":";
  for (const Group& g : groups_of(*this)) {
    os << g.letter << "(";
    for (size_t t = 0; t < g.dims->size(); ++t)
      os << (t ? "," : "") << maps.dims[(*g.dims)[t]].extent;
    os << ")";
  }
  os << ":A" << canonical_access(*this, maps.a) << ":B" << canonical_access(*this, maps.b) << ":C"
     << canonical_access(*this, maps.c);
  return os.str();
}

std::string Contraction::str() const {
  // contraction f16*f16 -> f16 (acc f32), 0.231 GFLOP
  //   batch 1    = (none)
  //   M     3136 = oh(56)*ow(56)
  //   ...
  std::ostringstream os;
  os << "contraction " << dtype_name(a_dtype) << "*" << dtype_name(b_dtype) << " -> "
     << dtype_name(maps.c.dtype) << " (acc " << dtype_name(acc_dtype) << "), "
     << static_cast<double>(flops()) * 1e-9 << " GFLOP\n";
  auto group_line = [&](const char* label, int64_t extent, const std::vector<int>& group) {
    os << "  " << label << " " << extent << " = ";
    if (group.empty()) os << "(none)";
    for (size_t t = 0; t < group.size(); ++t)
      os << (t ? "*" : "") << maps.dims[group[t]].name << "(" << maps.dims[group[t]].extent << ")";
    os << "\n";
  };
  group_line("batch", batch, batch_dims);
  group_line("M", m, m_dims);
  group_line("N", n, n_dims);
  group_line("K", k, k_dims);
  os << "  A: " << major_name(a_major, 'M') << ", vec " << a_vec
     << (a_gather ? ", gather" : ", plain") << "\n";
  os << "  B: " << major_name(b_major, 'N') << ", vec " << b_vec
     << (b_gather ? ", gather" : ", plain") << "\n";
  if (operands_swapped) os << "  operands swapped: the op's first input is B\n";
  std::string loops = maps.str();
  os << "  ";
  for (char ch : loops) {
    os << ch;
    if (ch == '\n') os << "  ";
  }
  return os.str();
}

}  // namespace tessel::contraction
