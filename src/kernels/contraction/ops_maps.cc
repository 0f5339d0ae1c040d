#include "kernels/contraction/ops_maps.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "core/error.h"

namespace tessel::contraction {
namespace {

// Declares dims first, then writes indices as (dim, coefficient) terms.
class MapsBuilder {
 public:
  int dim(std::string name, int64_t extent, bool reduction = false) {
    maps_.dims.push_back({std::move(name), extent, reduction});
    return static_cast<int>(maps_.dims.size()) - 1;
  }

  AffineIndex index(std::initializer_list<std::pair<int, int64_t>> terms,
                    int64_t offset = 0) const {
    AffineIndex idx;
    idx.coeffs.assign(maps_.dims.size(), 0);
    for (auto [dim, coeff] : terms) idx.coeffs[dim] += coeff;
    idx.offset = offset;
    return idx;
  }

  IndexMaps& maps() { return maps_; }

 private:
  IndexMaps maps_;
};

}  // namespace

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation) {
  TESSEL_ICHECK(kernel >= 1 && stride >= 1 && dilation >= 1)
      << "conv window: kernel " << kernel << ", stride " << stride << ", dilation " << dilation;
  int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t Conv2dParams::out_h() const {
  return conv_output_size(h, kh, stride_h, pad_top, pad_bottom, dilation_h);
}

int64_t Conv2dParams::out_w() const {
  return conv_output_size(w, kw, stride_w, pad_left, pad_right, dilation_w);
}

IndexMaps conv2d_nhwc_maps(const Conv2dParams& p, OperandDTypes types) {
  TESSEL_ICHECK(p.n >= 1 && p.h >= 1 && p.w >= 1 && p.ci >= 1 && p.co >= 1 && p.kh >= 1 &&
                p.kw >= 1 && p.groups >= 1 && p.ci % p.groups == 0 && p.co % p.groups == 0)
      << "conv2d extents n=" << p.n << " h=" << p.h << " w=" << p.w << " ci=" << p.ci
      << " co=" << p.co << " k=" << p.kh << "x" << p.kw << " groups=" << p.groups;
  TESSEL_ICHECK(p.pad_top >= 0 && p.pad_left >= 0 && p.pad_bottom >= 0 && p.pad_right >= 0)
      << "conv2d has negative padding";
  const int64_t oh_extent = p.out_h(), ow_extent = p.out_w();
  TESSEL_ICHECK(oh_extent >= 1 && ow_extent >= 1)
      << "conv2d window " << p.kh << "x" << p.kw << " does not fit the padded input";
  const int64_t cig = p.ci / p.groups, cog = p.co / p.groups;

  MapsBuilder mb;
  const int g = p.groups > 1 ? mb.dim("g", p.groups) : -1;
  const int b = mb.dim("b", p.n);
  const int oh = mb.dim("oh", oh_extent);
  const int ow = mb.dim("ow", ow_extent);
  const int co = mb.dim("co", cog);
  const int kh = mb.dim("kh", p.kh, true);
  const int kw = mb.dim("kw", p.kw, true);
  const int ci = mb.dim("ci", cig, true);
  // Without groups there is no g term: {g, 0} would name dim -1.
  auto channel = [&](int dim, int64_t per_group) {
    return g >= 0 ? mb.index({{g, per_group}, {dim, 1}}) : mb.index({{dim, 1}});
  };

  IndexMaps& maps = mb.maps();
  const int64_t x_channels = p.x_channels > 0 ? p.x_channels : p.ci;
  TESSEL_ICHECK(p.x_channel_offset >= 0 && p.x_channel_offset + p.ci <= x_channels)
      << "conv2d X channels [" << p.x_channel_offset << ", " << p.x_channel_offset + p.ci
      << ") outside rows of " << x_channels;
  AffineIndex x_channel = channel(ci, cig);
  x_channel.offset += p.x_channel_offset;
  maps.a = {types.a,
            {p.n, p.h, p.w, x_channels},
            {mb.index({{b, 1}}), mb.index({{oh, p.stride_h}, {kh, p.dilation_h}}, -p.pad_top),
             mb.index({{ow, p.stride_w}, {kw, p.dilation_w}}, -p.pad_left), x_channel}};
  maps.b = {types.b,
            {p.co, p.kh, p.kw, cig},
            {channel(co, cog), mb.index({{kh, 1}}), mb.index({{kw, 1}}), mb.index({{ci, 1}})}};
  maps.c = {types.c,
            {p.n, oh_extent, ow_extent, p.co},
            {mb.index({{b, 1}}), mb.index({{oh, 1}}), mb.index({{ow, 1}}), channel(co, cog)}};
  return std::move(maps);
}

IndexMaps conv2d_nchw_input_maps(const Conv2dParams& p, OperandDTypes types) {
  IndexMaps maps = conv2d_nhwc_maps(p, types);
  // A's NHWC indices (b, h, w, c) in NCHW order; the dims are unchanged.
  std::vector<AffineIndex>& a = maps.a.index;
  maps.a.shape = {p.n, p.ci, p.h, p.w};
  a = {a[0], a[3], a[1], a[2]};
  return maps;
}

std::optional<GemmLayout> parse_gemm_layout(std::string_view name) {
  if (name.size() != 2) return std::nullopt;
  auto flag = [](char ch) -> std::optional<bool> {
    if (ch == 'N') return false;
    if (ch == 'T') return true;
    return std::nullopt;
  };
  std::optional<bool> a = flag(name[0]), b = flag(name[1]);
  if (!a || !b) return std::nullopt;
  return GemmLayout{*a, *b};
}

std::string gemm_layout_name(GemmLayout layout) {
  return std::string{layout.trans_a ? 'T' : 'N', layout.trans_b ? 'T' : 'N'};
}

IndexMaps gemm_maps(int64_t m, int64_t n, int64_t k, GemmLayout layout, OperandDTypes types) {
  TESSEL_ICHECK(m >= 0 && n >= 0 && k >= 0) << "GEMM " << m << "x" << n << "x" << k;
  MapsBuilder mb;
  const int md = mb.dim("m", m), nd = mb.dim("n", n), kd = mb.dim("k", k, true);
  IndexMaps& maps = mb.maps();
  if (layout.trans_a)
    maps.a = {types.a, {k, m}, {mb.index({{kd, 1}}), mb.index({{md, 1}})}};
  else
    maps.a = {types.a, {m, k}, {mb.index({{md, 1}}), mb.index({{kd, 1}})}};
  if (layout.trans_b)
    maps.b = {types.b, {n, k}, {mb.index({{nd, 1}}), mb.index({{kd, 1}})}};
  else
    maps.b = {types.b, {k, n}, {mb.index({{kd, 1}}), mb.index({{nd, 1}})}};
  maps.c = {types.c, {m, n}, {mb.index({{md, 1}}), mb.index({{nd, 1}})}};
  return std::move(maps);
}

IndexMaps matmul_maps(const Shape& a_shape, const Shape& b_shape, OperandDTypes types) {
  TESSEL_ICHECK(!a_shape.empty() && !b_shape.empty()) << "MatMul of a scalar";
  // numpy promotes a 1-D a to [1, K] and a 1-D b to [K, 1], then drops that dim from C.
  const bool a_vector = a_shape.size() == 1, b_vector = b_shape.size() == 1;
  const int64_t m = a_vector ? 1 : a_shape[a_shape.size() - 2];
  const int64_t k = a_shape.back();
  const int64_t n = b_vector ? 1 : b_shape.back();
  TESSEL_ICHECK(k == (b_vector ? b_shape[0] : b_shape[b_shape.size() - 2]))
      << "MatMul " << shape_str(a_shape) << " x " << shape_str(b_shape) << ": K differs";
  const size_t a_batch = a_vector ? 0 : a_shape.size() - 2;
  const size_t b_batch = b_vector ? 0 : b_shape.size() - 2;
  const size_t rank = std::max(a_batch, b_batch);

  // Output batch extents, right-aligned numpy broadcasting.
  Shape batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t ea = i + a_batch >= rank ? a_shape[i + a_batch - rank] : 1;
    int64_t eb = i + b_batch >= rank ? b_shape[i + b_batch - rank] : 1;
    TESSEL_ICHECK(ea == eb || ea == 1 || eb == 1)
        << "MatMul " << shape_str(a_shape) << " x " << shape_str(b_shape)
        << ": batch dims do not broadcast";
    batch[i] = std::max(ea, eb);
  }

  MapsBuilder mb;
  std::vector<int> bd(rank);
  for (size_t i = 0; i < rank; ++i) bd[i] = mb.dim("b" + std::to_string(i), batch[i]);
  const int md = mb.dim("m", m), nd = mb.dim("n", n), kd = mb.dim("k", k, true);

  // An input's batch dim i (of `count`) is output batch dim i + rank - count; it reads index
  // 0 where it broadcasts.
  auto batch_indices = [&](const Shape& shape, size_t count) {
    std::vector<AffineIndex> idx;
    for (size_t i = 0; i < count; ++i) {
      int out = bd[i + rank - count];
      bool broadcast = shape[i] == 1 && batch[i + rank - count] > 1;
      idx.push_back(mb.index({{out, broadcast ? 0 : 1}}));
    }
    return idx;
  };

  IndexMaps& maps = mb.maps();
  maps.a = {types.a, a_shape, batch_indices(a_shape, a_batch)};
  if (!a_vector) maps.a.index.push_back(mb.index({{md, 1}}));
  maps.a.index.push_back(mb.index({{kd, 1}}));
  maps.b = {types.b, b_shape, batch_indices(b_shape, b_batch)};
  maps.b.index.push_back(mb.index({{kd, 1}}));
  if (!b_vector) maps.b.index.push_back(mb.index({{nd, 1}}));

  Shape c_shape = batch;
  maps.c = {types.c, {}, {}};
  for (size_t i = 0; i < rank; ++i) maps.c.index.push_back(mb.index({{bd[i], 1}}));
  if (!a_vector) {
    c_shape.push_back(m);
    maps.c.index.push_back(mb.index({{md, 1}}));
  }
  if (!b_vector) {
    c_shape.push_back(n);
    maps.c.index.push_back(mb.index({{nd, 1}}));
  }
  maps.c.shape = c_shape;
  return std::move(maps);
}

}  // namespace tessel::contraction
