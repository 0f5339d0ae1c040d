#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace tessel {

int64_t numel(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    TESSEL_USER_CHECK(d >= 0) << what << ": negative dimension " << d << " in shape "
                              << shape_str(s);
    if (d == 0) return 0 * n;
    TESSEL_USER_CHECK(n <= kMaxElements / d)
        << what << ": shape " << shape_str(s) << " has more than 2^40 elements";
    n *= d;
  }
  return n;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what) {
  TESSEL_USER_CHECK(axis >= -rank && axis < std::max<int64_t>(rank, 1))
      << what << ": axis " << axis << " out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    TESSEL_USER_CHECK(da == db || da == 1 || db == 1)
        << what << ": shapes " << shape_str(a) << " and " << shape_str(b)
        << " do not broadcast";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tessel
