// Test problems for the contraction kernel generator: a conv2d / GEMM (index maps built by
// contraction/ops_maps.h, matched by contraction::match), an epilogue and a schedule, with a
// name that spells the full configuration ("f16_conv3x3_s1_p1_tc_128x128x32_s3_w64x64_...").
// Shared by tests/codegen (NVRTC compile matrix) and tests/gpu (numerics on a device).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/contraction_kernel.h"
#include "kernels/contraction/contraction.h"
#include "kernels/contraction/epilogue.h"
#include "kernels/contraction/ops_maps.h"
#include "core/error.h"
#include "kernels/default_schedule.h"
#include "kernels/schedule.h"

namespace tessel::kernels::cuda::testing {

struct TestProblem {
  std::string what;  // "conv3x3_s1_p1_d1_g1_n2_h9_w7_ci16_co24", "gemm_NN_100x72x56"
  contraction::Conv2dParams conv;  // valid when is_conv
  bool is_conv = false;
  contraction::GemmLayout layout;
  int64_t gm = 0, gn = 0, gk = 0;
  contraction::Contraction c;
  bool tensor_cores = false;
  contraction::Epilogue e;
  kernels::Schedule s;

  std::string name() const {
    std::string ep;
    for (const auto& st : e.steps) ep += "_" + step_name(st.kind);
    const char* store[] = {"", "_slice", "_d2s", "_nchw", "_d2snchw"};  // by StoreMap::Kind
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
      case K::kGelu: return "gelu";
      case K::kGeluTanh: return "gelutanh";
      case K::kResidualAdd: return "residual";
      case K::kMul: return "mul";
      case K::kQuantize: return "quant";
      case K::kScaledResidualAdd: return "sresidual";
      case K::kTanh: return "tanh";
      case K::kMish: return "mish";
      case K::kHardSigmoid: return "hsigmoid";
      case K::kElu: return "elu";
      case K::kRound: return "round";
      case K::kSiluQuantizedGate: return "siluq";
      case K::kQuantizeUnit: return "qunit";
    }
    return "?";
  }
};

// C's dtype in the index maps: the output's, except for int8 operands, whose C is f32 (the
// int32 accumulator as the float the epilogue starts from, contraction/epilogue.h).
inline DType c_dtype(DType in, DType out) { return in == DType::kI8 ? DType::kF32 : out; }

inline void finish(TestProblem& p, const contraction::IndexMaps& maps, DType out) {
  contraction::MatchResult r = contraction::match(maps);
  TESSEL_ICHECK(r.contraction.has_value()) << "test problem is not a contraction: " << p.what;
  p.c = *r.contraction;
  p.tensor_cores = r.tensor_cores;
  p.e.out_dtype = out;
}

// `a`: A's dtype where it is not `in` (a u8 A beside i8 weights: onnxruntime's activations).
inline TestProblem conv_problem(const contraction::Conv2dParams& cp, DType in = DType::kF16,
                                DType out = DType::kF16, std::optional<DType> a = std::nullopt) {
  TestProblem p;
  p.is_conv = true;
  p.conv = cp;
  p.what = "conv" + std::to_string(cp.kh) + "x" + std::to_string(cp.kw) + "_s" +
           std::to_string(cp.stride_h) + "_p" + std::to_string(cp.pad_top) + "_d" +
           std::to_string(cp.dilation_h) + "_g" + std::to_string(cp.groups) + "_n" +
           std::to_string(cp.n) + "_h" + std::to_string(cp.h) + "_w" + std::to_string(cp.w) +
           "_ci" + std::to_string(cp.ci) + "_co" + std::to_string(cp.co) + (a ? "_u8a" : "");
  finish(p, contraction::conv2d_nhwc_maps(cp, {a.value_or(in), in, c_dtype(in, out)}), out);
  return p;
}

// `p` (a conv) storing depth_to_space of block 2, DCR or CRD, over its own output image.
inline TestProblem d2s(TestProblem p, bool dcr) {
  p.e.store.kind = contraction::StoreMap::Kind::kDepthToSpace;
  p.e.store.block = 2;
  p.e.store.dcr = dcr;
  p.e.store.out_h = p.c.maps.c.shape[1];
  p.e.store.out_w = p.c.maps.c.shape[2];
  return p;
}

inline TestProblem gemm_problem(int64_t m, int64_t n, int64_t k, const std::string& layout,
                                DType in = DType::kF16, DType out = DType::kF16,
                                std::optional<DType> a = std::nullopt) {
  TestProblem p;
  p.layout = *contraction::parse_gemm_layout(layout);
  p.gm = m;
  p.gn = n;
  p.gk = k;
  p.what = "gemm_" + layout + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
           std::to_string(k) + (a ? "_u8a" : "");
  finish(p, contraction::gemm_maps(m, n, k, p.layout, {a.value_or(in), in, c_dtype(in, out)}), out);
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

inline kernels::Schedule tc_schedule(int bm, int bn, int bk, int wm, int wn, int stages,
                                  int split_k = 1, int a_vec = 8, int b_vec = 8, int raster = 8) {
  kernels::Schedule s;
  s.instruction = kernels::Instruction::kMmaSync;
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
inline kernels::Schedule wgmma_schedule(int bm, int bn, int bk, int wm, int wn, int stages,
                                     int split_k = 1, int a_vec = 8, int b_vec = 8) {
  kernels::Schedule s = tc_schedule(bm, bn, bk, wm, wn, stages, split_k, a_vec, b_vec);
  s.instruction = kernels::Instruction::kWgmma;
  return s;
}

inline kernels::Schedule simt_schedule(int bm, int bn, int bk, int wm, int wn, int a_vec, int b_vec) {
  kernels::Schedule s = tc_schedule(bm, bn, bk, wm, wn, 2, 1, a_vec, b_vec);
  s.instruction = kernels::Instruction::kSimt;
  return s;
}

// Epilogue steps with the operand slots the tests bind: 0 scale, 1 bias, 2 residual (either
// residual add).
inline contraction::EpilogueStep step(contraction::EpilogueOpKind kind, float alpha = 0.0f,
                                      float beta = 0.0f) {
  using K = contraction::EpilogueOpKind;
  contraction::EpilogueStep s;
  s.kind = kind;
  s.alpha = alpha;
  s.beta = beta;
  s.operand = kind == K::kScale                                          ? 0
              : kind == K::kBias                                         ? 1
              : kind == K::kResidualAdd || kind == K::kScaledResidualAdd ? 2
                                                                         : -1;
  return s;
}

// Halo-kernel problems (tessel_halo.cuh): each feature of the kernel at a small scale. `ctas`
// below the tile count makes the persistent CTAs walk several tiles (and both halo buffers).
inline std::vector<TestProblem> halo_problems() {
  using K = contraction::EpilogueOpKind;
  std::vector<TestProblem> v;
  auto add = [&](TestProblem p, int th, int tw, int wm, int wn, int ctas,
                 std::vector<contraction::EpilogueStep> steps) {
    p.s = kernels::halo_schedule(p.c, th, tw, wm, wn, ctas);
    p.e.steps = std::move(steps);
    v.push_back(std::move(p));
  };
  // The SR net's body conv: bias, leaky relu, residual; 3 CTAs over 15 tiles, odd height.
  add(conv_problem(conv_params(1, 20, 48, 64, 64, 3, 1, 1)), 8, 16, 64, 32, 3,
      {step(K::kBias), step(K::kLeakyRelu, 0.1f), step(K::kResidualAdd)});
  // 64 -> 128 into depth_to_space CRD (the SR tail), 2 images, one CTA per tile.
  {
    TestProblem p = conv_problem(conv_params(2, 9, 32, 64, 128, 3, 1, 1));
    p.e.store.kind = contraction::StoreMap::Kind::kDepthToSpace;
    p.e.store.block = 2;
    p.e.store.dcr = false;
    p.e.store.out_h = 9;
    p.e.store.out_w = 32;
    add(std::move(p), 4, 16, 32, 64, 0, {step(K::kBias)});
  }
  // 16 -> 3 (the SR tail's RGB conv): N padded to one 8-wide warp tile, or one 16-wide.
  add(conv_problem(conv_params(1, 16, 32, 16, 3, 3, 1, 1)), 8, 32, 64, 8, 2, {step(K::kBias)});
  add(conv_problem(conv_params(1, 16, 32, 16, 3, 3, 1, 1)), 16, 16, 64, 16, 0, {step(K::kRelu)});
  // One output channel (a mask head, CBAM's spatial attention): N = 1 padded to an 8-wide warp
  // tile, sigmoid, 2 persistent CTAs; and stored NCHW fp32 as a graph output.
  add(conv_problem(conv_params(2, 13, 20, 16, 1, 3, 1, 1)), 8, 16, 64, 8, 2,
      {step(K::kBias), step(K::kSigmoid)});
  {
    TestProblem p = conv_problem(conv_params(1, 9, 35, 32, 1, 3, 1, 1), DType::kF16, DType::kF32);
    p.e.store.kind = contraction::StoreMap::Kind::kNchw;
    p.e.store.out_h = 9;
    p.e.store.out_w = 35;
    add(std::move(p), 4, 16, 64, 8, 0, {step(K::kBias)});
  }
  // Stored along m from the fragments (store_fragments): the SR net's RGB tail's shape (32x16
  // tiles of 64x8 warps), fp32, 2 CTAs walking 12 tiles, a width of 50 (right-edge slabs of 2
  // pixels); and an f16 NCHW output with a residual read per element and a relu, 3 CTAs.
  {
    TestProblem p = conv_problem(conv_params(1, 40, 50, 16, 3, 3, 1, 1), DType::kF16, DType::kF32);
    p.e.store.kind = contraction::StoreMap::Kind::kNchw;
    p.e.store.out_h = 40;
    p.e.store.out_w = 50;
    add(std::move(p), 32, 16, 64, 8, 2, {step(K::kBias)});
  }
  {
    TestProblem p = conv_problem(conv_params(2, 9, 20, 32, 16, 3, 1, 1));
    p.e.store.kind = contraction::StoreMap::Kind::kNchw;
    p.e.store.out_h = 9;
    p.e.store.out_w = 20;
    add(std::move(p), 8, 16, 64, 16, 3, {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
  }
  // 8 input channels (the padded stem): channels padded to 16 in shared memory.
  add(conv_problem(conv_params(1, 12, 16, 8, 64, 3, 1, 1)), 16, 16, 64, 32, 0, {step(K::kRelu)});
  // 5x5, pad 2, bf16, f32 out; 32 -> 48 (N not a multiple of the warp tile).
  add(conv_problem(conv_params(2, 11, 16, 32, 48, 5, 1, 2), DType::kBF16, DType::kF32), 4, 16, 32, 32,
      5, {step(K::kScale), step(K::kBias)});
  // Stems reading an NCHW input: the graph's f32 input with 3 channels (weights loaded by
  // element, 2 persistent CTAs), and an f16 one with 8 channels over 2 images.
  auto nchw = [](const contraction::Conv2dParams& cp, DType in) {
    TestProblem p;
    p.is_conv = true;
    p.conv = cp;
    p.what = "nchw_conv" + std::to_string(cp.kh) + "x" + std::to_string(cp.kw) + "_s" +
             std::to_string(cp.stride_h) + "_d" + std::to_string(cp.dilation_h) + "_n" +
             std::to_string(cp.n) + "_h" + std::to_string(cp.h) + "_w" + std::to_string(cp.w) +
             "_ci" + std::to_string(cp.ci) + "_co" + std::to_string(cp.co);
    finish(p, contraction::conv2d_nchw_input_maps(cp, {in, DType::kF16, DType::kF16}), DType::kF16);
    return p;
  };
  add(nchw(conv_params(1, 20, 32, 3, 64, 3, 1, 1), DType::kF32), 16, 16, 64, 32, 2,
      {step(K::kBias), step(K::kRelu)});
  add(nchw(conv_params(2, 9, 16, 8, 32, 3, 1, 1), DType::kF16), 4, 16, 32, 32, 0, {step(K::kBias)});
  // Small f32 stems whose width is no multiple of the tile (the halo kernel is their only Tensor
  // Core path, whatever it wastes): 10 of 16 columns; 9 columns into 5 output channels.
  add(nchw(conv_params(2, 6, 10, 3, 16, 3, 1, 1), DType::kF32), 16, 16, 64, 16, 0,
      {step(K::kBias)});
  add(nchw(conv_params(1, 7, 9, 4, 5, 3, 1, 1), DType::kF32), 32, 16, 64, 8, 0, {step(K::kRelu)});
  // Strided and dilated stems over NCHW (columns staged by stride phase): ResNet's 7x7/2 over
  // the fp32 input, 3 persistent CTAs walking 12 tiles (two buffers), odd sizes; MobileNet's
  // 3x3/2 into 32 channels, a CTA per tile; AlexNet's 11x11/4 (61 k16 steps, 2-byte weight
  // copies); a dilated 3x3 over an 8-channel f16 input.
  add(nchw(conv_params(2, 29, 35, 3, 64, 7, 2, 3), DType::kF32), 8, 16, 64, 32, 3,
      {step(K::kBias), step(K::kRelu)});
  add(nchw(conv_params(1, 33, 47, 3, 32, 3, 2, 1), DType::kF32), 16, 16, 64, 32, 0,
      {step(K::kBias), step(K::kSilu)});
  add(nchw(conv_params(1, 47, 51, 3, 64, 11, 4, 2), DType::kF32), 8, 16, 64, 32, 0,
      {step(K::kRelu)});
  add(nchw(conv_params(2, 13, 21, 8, 32, 3, 1, 2, 2), DType::kF16), 8, 16, 32, 32, 2,
      {step(K::kBias)});
  // A strided window over 16 channels (two 8-channel chunks per tap, columns by stride phase)
  // on the row chains (HaloConvKernel::mainloop_chains, as the tap-pair stems above): 5x5/2,
  // warps of 2 output rows, 2 CTAs walking 6 tiles.
  add(nchw(conv_params(2, 21, 37, 16, 32, 5, 2, 2), DType::kF16), 8, 16, 32, 32, 2,
      {step(K::kBias), step(K::kRelu)});
  // Tap pairs on stems beyond the model list: Inception's 3x3/2 without padding (odd output
  // width, the last pair's second column past the image), a 2-channel 5x5/2, and a
  // 4-channel f16 input under an even 4x4 window (no zero tap in its last pair).
  add(nchw(conv_params(2, 31, 29, 3, 32, 3, 2, 0), DType::kF32), 8, 16, 64, 32, 3, {step(K::kBias), step(K::kRelu)});
  add(nchw(conv_params(1, 26, 30, 2, 16, 5, 2, 2), DType::kF32), 8, 16, 64, 16, 0, {step(K::kBias)});
  add(nchw(conv_params(2, 17, 22, 4, 32, 4, 2, 1), DType::kF16), 4, 16, 32, 32, 2, {step(K::kRelu)});
  // Grayscale stems over NCHW (one channel: its index drops out of the maps): the f32 input
  // 3x3/1 (an 8-channel chunk, 7 of its channels zero), 2 persistent CTAs walking 8 tiles;
  // 7x7/2 as tap pairs (a 4-channel slot, 3 zero), odd sizes, 3 CTAs walking 8 tiles; and an f16
  // input under a 5x5/2, a CTA per tile.
  add(nchw(conv_params(2, 13, 21, 1, 32, 3, 1, 1), DType::kF32), 8, 16, 64, 32, 2,
      {step(K::kBias), step(K::kRelu)});
  add(nchw(conv_params(2, 29, 35, 1, 64, 7, 2, 3), DType::kF32), 8, 16, 64, 32, 3,
      {step(K::kBias), step(K::kRelu)});
  add(nchw(conv_params(1, 26, 30, 1, 16, 5, 2, 2), DType::kF16), 8, 16, 64, 16, 0,
      {step(K::kBias)});
  // A QDQ model's stem (float: 3 channels), storing int8 for the int8 max pool after it
  // (fold-qdq): quantized, then the relu on the integers (fold_requantize's form).
  {
    TestProblem p = nchw(conv_params(2, 29, 35, 3, 64, 7, 2, 3), DType::kF32);
    p.e.out_dtype = DType::kI8;
    add(std::move(p), 8, 16, 64, 32, 3, {step(K::kBias), step(K::kQuantize, 0.05f), step(K::kRelu)});
  }
  // The same stem reading the QDQ model's int8 input itself (fuse folds the input's
  // DequantizeLinear: its scale is S): tap pairs over odd sizes into int8, and a stride-1 3x3
  // (8-channel chunks) into f16.
  {
    TestProblem p = nchw(conv_params(2, 29, 35, 3, 64, 7, 2, 3), DType::kI8);
    p.e.out_dtype = DType::kI8;
    add(std::move(p), 8, 16, 64, 32, 3,
        {step(K::kScale), step(K::kBias), step(K::kQuantize, 0.05f), step(K::kRelu)});
  }
  add(nchw(conv_params(1, 20, 32, 3, 64, 3, 1, 1), DType::kI8), 16, 16, 64, 32, 2,
      {step(K::kScale), step(K::kBias), step(K::kRelu)});
  // Tap pairs over NHWC stems of at most 4 channels (bench-op's one-node stems): pixels of
  // 2 * ci bytes staged through registers into 4-channel slots. ResNet's 7x7/2 over 3
  // channels, odd height and width (the last tile column's pixels and the last pair's second
  // column past the image), 3 persistent CTAs walking 12 tiles;
  // MobileNet's 3x3/2 into 32 channels, a CTA per tile; 4 channels in bf16 (one 8-byte load per
  // pixel); 2 channels under a 5x5/2 (one 4-byte load); and ResNet's stem storing int8.
  add(conv_problem(conv_params(2, 29, 35, 3, 64, 7, 2, 3)), 8, 16, 64, 32, 3,
      {step(K::kBias), step(K::kRelu)});
  add(conv_problem(conv_params(1, 33, 47, 3, 32, 3, 2, 1)), 16, 16, 64, 32, 0,
      {step(K::kBias), step(K::kSilu)});
  add(conv_problem(conv_params(2, 17, 22, 4, 32, 3, 2, 1), DType::kBF16, DType::kBF16), 4, 16, 32,
      32, 2, {step(K::kRelu)});
  add(conv_problem(conv_params(1, 26, 30, 2, 16, 5, 2, 2)), 8, 16, 64, 16, 0, {step(K::kBias)});
  // Grayscale NHWC stems: pixels of one 2-byte channel (one load each) into the 4-channel slots,
  // ResNet's 7x7/2 over odd sizes with 3 CTAs walking 8 tiles, and a 3x3/2 in bf16.
  add(conv_problem(conv_params(2, 29, 35, 1, 64, 7, 2, 3)), 8, 16, 64, 32, 3,
      {step(K::kBias), step(K::kRelu)});
  add(conv_problem(conv_params(1, 33, 47, 1, 32, 3, 2, 1), DType::kBF16, DType::kBF16), 16, 16, 64,
      32, 0, {step(K::kBias), step(K::kSilu)});
  {
    TestProblem p = conv_problem(conv_params(2, 29, 35, 3, 64, 7, 2, 3), DType::kF16, DType::kI8);
    add(std::move(p), 8, 16, 64, 32, 3,
        {step(K::kBias), step(K::kQuantize, 0.05f), step(K::kRelu)});
  }
  // Widths that are no multiple of the tile: the right-edge slabs store 5 (and 8) pixels, with
  // a residual read into registers, and with a depth_to_space store.
  add(conv_problem(conv_params(2, 7, 37, 32, 64, 3, 1, 1)), 4, 16, 64, 32, 3,
      {step(K::kBias), step(K::kResidualAdd)});
  {
    TestProblem p = conv_problem(conv_params(1, 6, 40, 16, 32, 3, 1, 1));
    p.e.store.kind = contraction::StoreMap::Kind::kDepthToSpace;
    p.e.store.block = 2;
    p.e.store.dcr = true;
    p.e.store.out_h = 6;
    p.e.store.out_w = 40;
    add(std::move(p), 4, 32, 32, 32, 0, {step(K::kBias)});
  }
  // 'valid' 3x3 (no padding): the window never leaves the image.
  add(conv_problem(conv_params(1, 18, 34, 32, 32, 3, 1, 0)), 8, 16, 32, 32, 0, {});

  // Grouped convolutions (kernels::HaloLayout): a CTA keeps one slice of whole groups, each
  // n8 fragment its own group's channels. `ctas` below slices x tiles makes each CTA walk
  // several tiles of its slice.
  auto grouped = [&](TestProblem p, int th, int tw, int wm, int wn, int ctas, int groups,
                     std::vector<contraction::EpilogueStep> steps) {
    p.s = kernels::halo_schedule(p.c, th, tw, wm, wn, ctas, groups);
    p.e.steps = std::move(steps);
    v.push_back(std::move(p));
  };
  // ResNeXt's (widened) groups of 8: 13 groups in slices of 4 (the last holds one), two groups
  // per 16-wide warp tile, 14 wide (the tile's last 2 columns computed and not stored).
  grouped(conv_problem(conv_params(1, 14, 14, 104, 104, 3, 1, 1, 1, 13)), 8, 16, 64, 16, 8, 4,
          {step(K::kBias), step(K::kRelu)});
  // Stride 2, batch 2, 6 groups of 8 in slices of 4; residual add (read into registers).
  grouped(conv_problem(conv_params(2, 15, 15, 48, 48, 3, 2, 1, 1, 6)), 4, 16, 32, 16, 0, 4,
          {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
  // Groups of 16 (one per warp tile), dilation 2; bf16, f32 out.
  grouped(conv_problem(conv_params(1, 12, 20, 64, 64, 3, 1, 2, 2, 4), DType::kBF16, DType::kF32), 4,
          16, 32, 16, 3, 2, {step(K::kScale), step(K::kBias)});
  // Groups of 32: a group spans two 16-wide warp tiles.
  grouped(conv_problem(conv_params(2, 9, 16, 128, 128, 3, 1, 1, 1, 4)), 2, 16, 32, 16, 4, 2,
          {step(K::kSilu)});
  // RegNet-Y-1.6GF's groups of 24 (3 chunks per tap: the upper lanes of a k16 step read another
  // tap), 5 groups in slices of 2 whose warp tile is both groups; stride 2.
  grouped(conv_problem(conv_params(2, 13, 11, 120, 120, 3, 2, 1, 1, 5)), 4, 16, 16, 48, 6, 2,
          {step(K::kBias), step(K::kRelu)});
  // 5x5 over 5 groups of 8 in slices of 2 (8-wide warp tiles of one group), residual.
  grouped(conv_problem(conv_params(1, 11, 13, 40, 40, 5, 1, 2, 1, 5)), 4, 16, 32, 8, 0, 2,
          {step(K::kResidualAdd)});
  // A QDQ model's grouped convs storing int8 (fuse gives them the quantize): groups of 8 and
  // RegNet's of 24, quantized, then the relu on the integers (fold_requantize's form).
  grouped(conv_problem(conv_params(1, 14, 14, 104, 104, 3, 1, 1, 1, 13), DType::kF16, DType::kI8), 8, 16, 64,
          16, 8, 4, {step(K::kBias), step(K::kQuantize, 0.05f), step(K::kRelu)});
  grouped(conv_problem(conv_params(2, 13, 11, 120, 120, 3, 2, 1, 1, 5), DType::kF16, DType::kI8), 4, 16, 16,
          48, 6, 2, {step(K::kBias), step(K::kRelu), step(K::kQuantize, 0.1f)});
  return v;
}

// Packed-groups problems (contraction/grouped.h): grouped convolutions whose N tile holds
// several whole groups, each n8 fragment one group's. Channels per group 8 (two groups per
// 16-wide warp tile), 16, 32 and 64 (a group wider than the warp tile); group counts that the
// tile does not divide (13 groups of 8 in tiles of 8: the last tile holds 5); stride 2,
// dilation 2, 1x1, batch 2, bias + activation, residual, bf16 and an f32 output.
inline std::vector<TestProblem> packed_group_problems() {
  using K = contraction::EpilogueOpKind;
  std::vector<TestProblem> v;
  auto add = [&](TestProblem p, int bm, int bn, int bk, int wm, int wn, int stages, int groups,
                 std::vector<contraction::EpilogueStep> steps) {
    p.s = tc_schedule(bm, bn, bk, wm, wn, stages);
    p.s.a_vec = std::min(p.s.a_vec, p.c.a_vec);
    p.s.b_vec = std::min(p.s.b_vec, p.c.b_vec);
    p.s.groups_per_tile = groups;
    p.e.steps = std::move(steps);
    v.push_back(std::move(p));
  };
  // RegNet-Y's 8-channel groups: 13 groups, 8 per tile (the second tile holds 5), 4 taps per
  // k-tile (K = 72: the third k-tile computes one k16 step and skips the other).
  add(conv_problem(conv_params(1, 14, 14, 104, 104, 3, 1, 1, 1, 13)), 64, 64, 32, 64, 16, 3, 8,
      {step(K::kBias), step(K::kRelu)});
  // Stride 2, batch 2, 6 groups of 8 (48 channels) in tiles of 4 groups: 32 wide.
  add(conv_problem(conv_params(2, 15, 15, 48, 48, 3, 2, 1, 1, 6)), 32, 32, 32, 32, 16, 4, 4,
      {step(K::kBias), step(K::kSilu)});
  // ResNeXt's 16- and 32-channel groups, residual add.
  add(conv_problem(conv_params(2, 10, 9, 256, 256, 3, 1, 1, 1, 16)), 64, 64, 32, 32, 32, 4, 4,
      {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
  add(conv_problem(conv_params(1, 7, 7, 256, 256, 3, 1, 1, 1, 8)), 32, 64, 32, 16, 32, 3, 2,
      {step(K::kScale), step(K::kBias)});
  // 64 channels per group: a group spans two 32-wide warp tiles; dilation 2; bf16, f32 out.
  add(conv_problem(conv_params(1, 12, 12, 128, 128, 3, 1, 2, 2, 2), DType::kBF16, DType::kF32), 64, 64,
      64, 32, 32, 3, 1, {step(K::kBias)});
  // 1x1 grouped, 16 -> 32 channels per group: K = 16, one k-tile of 32 columns whose second
  // k16 step is skipped.
  add(conv_problem(conv_params(2, 6, 6, 64, 128, 1, 1, 0, 1, 4)), 64, 64, 32, 32, 32, 2, 2,
      {step(K::kHardSwish)});
  // RegNet-Y-1.6GF's groups of 24, padded to 32 in shared memory (the view reads zeros past
  // 24): 5 groups in tiles of 2 (48 channels, the third tile holds one), 48-wide warp tiles of
  // two groups; batch 2, stride 2.
  add(conv_problem(conv_params(2, 13, 11, 120, 120, 3, 2, 1, 1, 5)), 64, 48, 64, 16, 48, 3, 2,
      {step(K::kBias), step(K::kRelu)});
  add(conv_problem(conv_params(1, 9, 9, 72, 72, 3, 1, 1, 1, 3)), 32, 48, 64, 16, 48, 2, 2,
      {step(K::kResidualAdd)});
  // 5 groups of 16 in tiles of 4 (the second tile holds one), 5x5 window.
  add(conv_problem(conv_params(1, 11, 13, 80, 80, 5, 1, 2, 1, 5)), 32, 64, 32, 32, 16, 3, 4,
      {step(K::kBias), step(K::kClip, 0.0f, 6.0f)});
  // A QDQ model's grouped conv storing int8 (a last quantize step): RegNet's groups of 8 and
  // ResNeXt's of 16. fuse gives grouped convs other than depthwise ones no quantize yet; these
  // are the check that would let it (the int8 store through the packed kernel's slab).
  add(conv_problem(conv_params(2, 14, 14, 104, 104, 3, 1, 1, 1, 13), DType::kF16, DType::kI8), 64, 64,
      32, 64, 16, 3, 8, {step(K::kBias), step(K::kRelu), step(K::kQuantize, 0.05f)});
  add(conv_problem(conv_params(1, 10, 9, 256, 256, 3, 2, 1, 1, 16), DType::kF16, DType::kI8), 64, 64,
      32, 32, 32, 4, 4, {step(K::kBias), step(K::kQuantize, 0.1f), step(K::kMul, 0.1f), step(K::kRelu),
                         step(K::kQuantize, 0.05f)});
  return v;
}

}  // namespace tessel::kernels::cuda::testing
