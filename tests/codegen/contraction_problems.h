// Test problems for the contraction kernel generator: a conv2d / GEMM (index maps built by
// contraction/ops_maps.h, matched by contraction::match), an epilogue and a schedule, with a
// name that spells the full configuration ("f16_conv3x3_s1_p1_tc_128x128x32_s3_w64x64_...").
// Shared by tests/codegen (NVRTC compile matrix) and tests/gpu (numerics on a device).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "codegen/cuda/contraction_kernel.h"
#include "contraction/contraction.h"
#include "contraction/epilogue.h"
#include "contraction/ops_maps.h"
#include "core/error.h"
#include "tune/schedule.h"

namespace tessel::codegen::cuda::testing {

struct TestProblem {
  std::string what;  // "conv3x3_s1_p1_d1_g1_n2_h9_w7_ci16_co24", "gemm_NN_100x72x56"
  contraction::Conv2dParams conv;  // valid when is_conv
  bool is_conv = false;
  contraction::GemmLayout layout;
  int64_t gm = 0, gn = 0, gk = 0;
  contraction::Contraction c;
  bool tensor_cores = false;
  contraction::Epilogue e;
  tune::Schedule s;

  std::string name() const {
    std::string ep;
    for (const auto& st : e.steps) ep += "_" + step_name(st.kind);
    const char* store[] = {"", "_slice", "_d2s"};
    std::string st = store[static_cast<int>(e.store.kind)];
    if (e.store.kind == contraction::StoreMap::Kind::kDepthToSpace) st += e.store.dcr ? "dcr" : "crd";
    return std::string(dtype_name(c.a_dtype)) + "_" + what + "_" + s.name() + ep + st + "_" +
           std::string(dtype_name(e.out_dtype));
  }

  static std::string step_name(contraction::EpilogueOpKind k) {
    using K = contraction::EpilogueOpKind;
    switch (k) {
      case K::kScale: return "scale";
      case K::kBias: return "bias";
      case K::kRelu: return "relu";
      case K::kLeakyRelu: return "leaky";
      case K::kClip: return "clip";
      case K::kSigmoid: return "sigmoid";
      case K::kHardSwish: return "hswish";
      case K::kSilu: return "silu";
      case K::kResidualAdd: return "residual";
    }
    return "?";
  }
};

inline void finish(TestProblem& p, const contraction::IndexMaps& maps, DType out) {
  contraction::MatchResult r = contraction::match(maps);
  TESSEL_ICHECK(r.contraction.has_value()) << "test problem is not a contraction: " << p.what;
  p.c = *r.contraction;
  p.tensor_cores = r.tensor_cores;
  p.e.out_dtype = out;
}

inline TestProblem conv_problem(const contraction::Conv2dParams& cp, DType in = DType::kF16,
                                DType out = DType::kF16) {
  TestProblem p;
  p.is_conv = true;
  p.conv = cp;
  p.what = "conv" + std::to_string(cp.kh) + "x" + std::to_string(cp.kw) + "_s" +
           std::to_string(cp.stride_h) + "_p" + std::to_string(cp.pad_top) + "_d" +
           std::to_string(cp.dilation_h) + "_g" + std::to_string(cp.groups) + "_n" +
           std::to_string(cp.n) + "_h" + std::to_string(cp.h) + "_w" + std::to_string(cp.w) +
           "_ci" + std::to_string(cp.ci) + "_co" + std::to_string(cp.co);
  finish(p, contraction::conv2d_nhwc_maps(cp, {in, in, out}), out);
  return p;
}

inline TestProblem gemm_problem(int64_t m, int64_t n, int64_t k, const std::string& layout,
                                DType in = DType::kF16, DType out = DType::kF16) {
  TestProblem p;
  p.layout = *contraction::parse_gemm_layout(layout);
  p.gm = m;
  p.gn = n;
  p.gk = k;
  p.what = "gemm_" + layout + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
           std::to_string(k);
  finish(p, contraction::gemm_maps(m, n, k, p.layout, {in, in, out}), out);
  return p;
}

inline contraction::Conv2dParams conv_params(int64_t n, int64_t h, int64_t w, int64_t ci,
                                             int64_t co, int64_t k, int64_t stride, int64_t pad,
                                             int64_t dilation = 1, int64_t groups = 1) {
  contraction::Conv2dParams p;
  p.n = n;
  p.h = h;
  p.w = w;
  p.ci = ci;
  p.co = co;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

inline tune::Schedule tc_schedule(int bm, int bn, int bk, int wm, int wn, int stages,
                                  int split_k = 1, int a_vec = 8, int b_vec = 8, int raster = 8) {
  tune::Schedule s;
  s.instruction = tune::Instruction::kMmaSync;
  s.block_m = bm;
  s.block_n = bn;
  s.block_k = bk;
  s.warp_m = wm;
  s.warp_n = wn;
  s.stages = stages;
  s.split_k = split_k;
  s.a_vec = a_vec;
  s.b_vec = b_vec;
  s.raster = raster;
  return s;
}

// For wgmma, warp_m x warp_n is the tile of one warpgroup (4 warps).
inline tune::Schedule wgmma_schedule(int bm, int bn, int bk, int wm, int wn, int stages,
                                     int split_k = 1, int a_vec = 8, int b_vec = 8) {
  tune::Schedule s = tc_schedule(bm, bn, bk, wm, wn, stages, split_k, a_vec, b_vec);
  s.instruction = tune::Instruction::kWgmma;
  return s;
}

inline tune::Schedule simt_schedule(int bm, int bn, int bk, int wm, int wn, int a_vec, int b_vec) {
  tune::Schedule s = tc_schedule(bm, bn, bk, wm, wn, 2, 1, a_vec, b_vec);
  s.instruction = tune::Instruction::kSimt;
  return s;
}

// Epilogue steps with the operand slots the tests bind: 0 scale, 1 bias, 2 residual.
inline contraction::EpilogueStep step(contraction::EpilogueOpKind kind, float alpha = 0.0f,
                                      float beta = 0.0f) {
  using K = contraction::EpilogueOpKind;
  contraction::EpilogueStep s;
  s.kind = kind;
  s.alpha = alpha;
  s.beta = beta;
  s.operand = kind == K::kScale ? 0 : kind == K::kBias ? 1 : kind == K::kResidualAdd ? 2 : -1;
  return s;
}

}  // namespace tessel::codegen::cuda::testing
