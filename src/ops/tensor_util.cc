#include "ops/tensor_util.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace tessel::ops {
namespace {

std::string dtype_list(std::span<const DType> types) {
  std::string r;
  for (DType t : types) r += (r.empty() ? "" : ", ") + std::string(dtype_name(t));
  return r;
}

}  // namespace

void check_dtype(const ir::InferContext& ctx, int i, std::span<const DType> allowed) {
  DType t = ctx.dtype(i);
  TESSEL_USER_CHECK(std::find(allowed.begin(), allowed.end(), t) != allowed.end())
      << ctx.node().label() << ": input " << i << " has dtype " << dtype_name(t)
      << ", expected one of " << dtype_list(allowed);
}

void check_same_dtype(const ir::InferContext& ctx, int i, int j) {
  TESSEL_USER_CHECK(ctx.dtype(i) == ctx.dtype(j))
      << ctx.node().label() << ": inputs " << i << " and " << j << " must have the same dtype, got "
      << dtype_name(ctx.dtype(i)) << " and " << dtype_name(ctx.dtype(j));
}

std::vector<int64_t> read_int_list(const ir::Node& node, const Tensor& t, const char* what) {
  TESSEL_USER_CHECK(t.dtype() == DType::kI64 || t.dtype() == DType::kI32)
      << node.label() << ": '" << what << "' has dtype " << dtype_name(t.dtype())
      << ", expected i64 or i32";
  TESSEL_USER_CHECK(t.rank() <= 1) << node.label() << ": '" << what << "' has shape "
                                   << shape_str(t.shape()) << ", expected a 1-D tensor";
  return t.to_i64_vector();
}

std::vector<int64_t> require_int_list(const ir::InferContext& ctx, int i, const char* what) {
  return read_int_list(ctx.node(), ctx.require_value(i, what), what);
}

std::vector<double> read_float_list(const ir::Node& node, const Tensor& t, const char* what) {
  TESSEL_USER_CHECK(is_float(t.dtype())) << node.label() << ": '" << what << "' has dtype "
                                         << dtype_name(t.dtype()) << ", expected a float type";
  TESSEL_USER_CHECK(t.rank() <= 1) << node.label() << ": '" << what << "' has shape "
                                   << shape_str(t.shape()) << ", expected a 1-D tensor";
  std::vector<double> r(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[static_cast<size_t>(i)] = t.get_f64(i);
  return r;
}

int64_t normalize_axis(const ir::Node& node, int64_t axis, int64_t rank, const char* what) {
  TESSEL_USER_CHECK(axis >= -rank && axis < rank)
      << node.label() << ": " << what << " " << axis << " is out of range for rank " << rank
      << " (expected " << -rank << " to " << rank - 1 << ")";
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const ir::Node& node, const std::vector<int64_t>& axes,
                                    int64_t rank, const char* what) {
  std::vector<int64_t> r;
  r.reserve(axes.size());
  for (int64_t a : axes) {
    int64_t n = normalize_axis(node, a, rank, what);
    TESSEL_USER_CHECK(std::find(r.begin(), r.end(), n) == r.end())
        << node.label() << ": " << what << " " << a << " is repeated";
    r.push_back(n);
  }
  return r;
}

void copy_data(const Tensor& in, Tensor& out) {
  TESSEL_ICHECK(in.dtype() == out.dtype() && in.numel() == out.numel())
      << "copy_data: " << in.type_str() << " into " << out.type_str();
  if (in.nbytes()) std::memcpy(out.raw(), in.raw(), in.nbytes());
}

}  // namespace tessel::ops
