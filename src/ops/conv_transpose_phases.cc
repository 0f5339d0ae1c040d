#include "ops/conv_transpose_phases.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace tessel::ops {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool is_constant(const ir::Graph& g, ir::ValueId v) {
  return v != ir::kNoValue && g.value(v).is_constant();
}

// One dim of the decomposition (the header's derivation): input extent `in`, kernel k,
// stride s, dilation d, begin pad p, output extent `out`.
PhaseAxis plan_axis(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p, int64_t out) {
  PhaseAxis a;
  a.stride = s;
  a.out = out;
  const int64_t delta = std::min(p, (k - 1) * d);
  a.crop = p - delta;
  // offset[r * k + kh]: where tap kh reads x relative to q in phase r, if it reaches it.
  std::vector<std::optional<int64_t>> offset(static_cast<size_t>(s * k));
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (int64_t r = 0; r < s; ++r) {
    for (int64_t kh = 0; kh < k; ++kh) {
      const int64_t e = r + delta - kh * d;
      if (e % s != 0) continue;
      offset[static_cast<size_t>(r * k + kh)] = e / s;
      lo = std::min(lo, e / s);
      hi = std::max(hi, e / s);
    }
  }
  TESSEL_ICHECK(lo <= 0 && lo <= hi) << "phase offsets [" << lo << ", " << hi << "] for k=" << k
                                     << " s=" << s << " d=" << d << " p=" << p;
  int64_t step = 0;
  for (const std::optional<int64_t>& o : offset)
    if (o) step = std::gcd(step, *o - lo);
  a.dilation = std::max<int64_t>(step, 1);
  a.kernel = (hi - lo) / a.dilation + 1;
  a.tap.assign(static_cast<size_t>(s * a.kernel), -1);
  for (int64_t r = 0; r < s; ++r)
    for (int64_t kh = 0; kh < k; ++kh)
      if (const std::optional<int64_t>& o = offset[static_cast<size_t>(r * k + kh)])
        a.tap[static_cast<size_t>(r * a.kernel + (*o - lo) / a.dilation)] = kh;
  a.pad_begin = -lo;
  const int64_t rows = ceil_div(a.crop + out, s);
  a.pad_end = std::max<int64_t>(0, rows - in + hi);
  a.conv_out = in + a.pad_begin + a.pad_end - (hi - lo);
  TESSEL_ICHECK(a.conv_out >= rows) << "phase conv makes " << a.conv_out << " rows of " << rows;
  return a;
}

}  // namespace

int64_t PhaseConv::channel(int64_t m, int64_t rh, int64_t rw) const {
  const int64_t s = block();
  return dcr ? (rh * s + rw) * out_channels + m : m * s * s + rh * s + rw;
}

std::optional<std::string> conv_transpose_refusal(const ir::Graph& g, const ir::Node& n) {
  TESSEL_ICHECK(n.op == "ConvTranspose" && n.inputs.size() >= 2) << n.label();
  const ir::TensorType& x = g.type(n.inputs[0]);
  const ir::TensorType& w = g.type(n.inputs[1]);
  if (x.shape.size() != 4)
    return "only 2-D transposed convolutions (a 4-D input) become a tessel.Conv; X is " + x.str();
  const ConvGeometry geo = plan_conv_transpose(n, x.shape, w.shape);
  if (geo.strides[0] != geo.strides[1])
    return "strides " + ints_str(geo.strides) +
           " differ, and the depth_to_space store that interleaves the phases has one block "
           "for both dims";
  if (!is_constant(g, n.inputs[1]))
    return "the weight is not a constant (its taps are rearranged into a stride-1 conv's at "
           "compile time)";
  const ir::ValueId b = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  if (b != ir::kNoValue && geo.strides[0] != 1 && !is_constant(g, b))
    return "the bias is not a constant (it is repeated for each of the " +
           std::to_string(geo.strides[0] * geo.strides[1]) + " output phases at compile time)";
  return std::nullopt;
}

PhaseConv plan_phase_conv(const ConvGeometry& geo) {
  TESSEL_ICHECK(geo.spatial_rank() == 2 && geo.strides[0] == geo.strides[1])
      << "plan_phase_conv: a 2-D ConvTranspose with equal strides expected";
  PhaseConv p;
  p.in_channels = geo.in_channels;
  p.out_channels = geo.out_channels;
  p.group = geo.group;
  p.dcr = geo.group == 1;
  PhaseAxis* axes[2] = {&p.h, &p.w};
  for (size_t d = 0; d < 2; ++d)
    *axes[d] = plan_axis(geo.in_spatial[d], geo.kernel[d], geo.strides[d], geo.dilations[d],
                         geo.pad_begin[d], geo.out_spatial[d]);
  return p;
}

Tensor phase_conv_weights(const Tensor& w, const PhaseConv& p) {
  const int64_t s = p.block();
  const int64_t cg = p.in_channels / p.group, mg = p.out_channels / p.group;
  const int64_t kh_in = w.dim(2), kw_in = w.dim(3);
  TESSEL_ICHECK(w.shape() == (Shape{p.in_channels, mg, kh_in, kw_in}))
      << "phase_conv_weights: weight " << shape_str(w.shape());
  const int64_t kh_out = p.h.kernel, kw_out = p.w.kernel;
  Tensor r(w.dtype(), {s * s * p.out_channels, kh_out, kw_out, cg});  // zeros
  for (int64_t m = 0; m < p.out_channels; ++m) {
    const int64_t group = m / mg, ml = m % mg;
    for (int64_t rh = 0; rh < s; ++rh) {
      for (int64_t rw = 0; rw < s; ++rw) {
        const int64_t n = p.channel(m, rh, rw);
        for (int64_t jh = 0; jh < kh_out; ++jh) {
          const int64_t kh = p.h.tap[static_cast<size_t>(rh * kh_out + jh)];
          if (kh < 0) continue;
          for (int64_t jw = 0; jw < kw_out; ++jw) {
            const int64_t kw = p.w.tap[static_cast<size_t>(rw * kw_out + jw)];
            if (kw < 0) continue;
            // r[n, jh, jw, c] = w[group * cg + c, ml, kh, kw]
            for (int64_t c = 0; c < cg; ++c)
              r.set_f64(((n * kh_out + jh) * kw_out + jw) * cg + c,
                        w.get_f64((((group * cg + c) * mg + ml) * kh_in + kh) * kw_in + kw));
          }
        }
      }
    }
  }
  return r;
}

Tensor phase_conv_bias(const Tensor& b, const PhaseConv& p) {
  TESSEL_ICHECK(b.shape() == Shape{p.out_channels})
      << "phase_conv_bias: bias " << shape_str(b.shape());
  const int64_t s = p.block();
  Tensor r(b.dtype(), {s * s * p.out_channels});
  for (int64_t m = 0; m < p.out_channels; ++m)
    for (int64_t rh = 0; rh < s; ++rh)
      for (int64_t rw = 0; rw < s; ++rw) r.set_f64(p.channel(m, rh, rw), b.get_f64(m));
  return r;
}

}  // namespace tessel::ops
