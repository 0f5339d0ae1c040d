// Benchmark workloads: single conv2d and GEMM problems read from CSV files such as
// shared/workloads/conv2d.csv and gemm.csv.
//
// Format: one workload per line, comma-separated, blanks around fields ignored; lines that
// start with '#' and blank lines are skipped, as is an uncommented line equal to the column
// header. conv2d: name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups (input NHWC, weight
// (co,kh,kw,ci/groups), output NHWC). gemm: name,m,n,k,layout with C[m,n] = sum_k A[m,k]
// B[k,n], C row-major, and layout NN (A (m,k), B (k,n) row-major), NT (B stored (n,k)) or TN
// (A stored (k,m)). Anything else is a UserError "<file>:<line>: ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::bench {

struct ConvWorkload {
  std::string name;
  int64_t n = 1, h = 1, w = 1, ci = 1, co = 1, kh = 1, kw = 1;
  int64_t stride = 1, pad = 0, dilation = 1, groups = 1;

  int64_t oh() const { return (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1; }
  size_t x_elems() const { return static_cast<size_t>(n * h * w * ci); }
  size_t w_elems() const { return static_cast<size_t>(co * kh * kw * (ci / groups)); }
  size_t y_elems() const { return static_cast<size_t>(n * oh() * ow() * co); }
  // Multiply-adds count two: 2 * (n*oh*ow) * co * (kh*kw*ci/groups).
  double flops() const;
  // "n1 56x56x64 -> 128 k1x1 s1 p0 d1 g1"
  std::string shape() const;
};

enum class GemmLayout { kNN, kNT, kTN };
std::string_view layout_name(GemmLayout l);

struct GemmWorkload {
  std::string name;
  int64_t m = 1, n = 1, k = 1;
  GemmLayout layout = GemmLayout::kNN;

  size_t a_elems() const { return static_cast<size_t>(m * k); }
  size_t b_elems() const { return static_cast<size_t>(k * n); }
  size_t c_elems() const { return static_cast<size_t>(m * n); }
  double flops() const { return 2.0 * static_cast<double>(m) * n * k; }
  // "512x64x512 NN"
  std::string shape() const;
};

// The GEMM that a conv2d is, where it is one: a 1x1 convolution with stride 1, no padding and
// one group reads each input pixel once, so with x NHWC as A (n*h*w, ci) row-major and the
// weight (co, 1, 1, ci) as B stored (co, ci), y NHWC is C (n*h*w, co) = A B: layout NT, on
// the very same buffers. (Dilation does not move a 1x1 tap.) nullopt for any other conv.
std::optional<GemmWorkload> as_gemm(const ConvWorkload& c);

// Parse CSV text; `source` names it in error messages (a file name). Text without any
// workload is a UserError too.
std::vector<ConvWorkload> parse_conv_workloads(std::string_view text, const std::string& source);
std::vector<GemmWorkload> parse_gemm_workloads(std::string_view text, const std::string& source);

// Read and parse a file; UserError if it cannot be read.
std::vector<ConvWorkload> read_conv_workloads(const std::string& path);
std::vector<GemmWorkload> read_gemm_workloads(const std::string& path);

}  // namespace tessel::bench
