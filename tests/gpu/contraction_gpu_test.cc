// Generated contraction kernels on a GPU: numerics against a CPU reference on 200+ random
// problems (odd M/N/K, batch 1, stride 2, dilation 2, 1x1 and 7x7, ci = 8/4/3, grouped
// conv, GEMM in every layout, every epilogue step and store map, split-K, SIMT), against a
// naive GPU kernel on the largest public workloads, and the SASS of Tensor Core kernels.
// Skipped with the reason where no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/contraction_reference.h"
#include "core/half.h"
#include "gpu/gpu_test_util.h"
#include "device/cuda_api.h"
#include "kernels/default_schedule.h"

namespace tessel::kernels::cuda::testing {
namespace {

namespace rt = device;
using ::tessel::testing::build_all;
using ::tessel::testing::upload;
using contraction::EpilogueOpKind;
using contraction::StoreMap;

class ContractionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    info_ = rt::device_info();
    rt::set_cache_dir("");  // every kernel is compiled fresh: the cache is tested elsewhere
  }
  rt::DeviceInfo info_;
};

// A problem's operands on the host (as values and as the device's bytes) and on the device.
struct Operands {
  HostOperands h;
  std::vector<char> a, b, scale, bias, residual;
};

// Runs `k` on `o` `launches` times, its output poisoned before each; returns each launch's
// output as doubles.
std::vector<std::vector<double>> launch(const TestProblem& p, const ContractionKernel& k,
                                        const Operands& o, int launches) {
  rt::DeviceBuffer da = upload(o.a), db = upload(o.b), dscale = upload(o.scale),
                   dbias = upload(o.bias);
  rt::DeviceBuffer dres = upload(o.residual.empty() ? std::vector<char>(16) : o.residual);
  const size_t out_bytes = output_elements(p) * dtype_size(p.e.out_dtype);
  rt::DeviceBuffer dout(out_bytes);
  rt::DeviceBuffer ws(std::max<size_t>(k.source().workspace_bytes, 16));
  ws.fill_bytes(0);  // split-K tile counters start at zero; each launch leaves them zero
  KernelArgs args;
  args.a = da.ptr();
  args.b = db.ptr();
  args.c = dout.ptr();
  args.extra = {dscale.ptr(), dbias.ptr(), dres.ptr()};
  args.workspace = ws.ptr();
  std::vector<std::vector<double>> outs;
  for (int i = 0; i < launches; ++i) {
    dout.fill_bytes(0xff);  // NaN in f16, bf16 and f32
    k.launch(args, nullptr);
    rt::synchronize();
    std::vector<char> got_bytes(out_bytes);
    dout.download(got_bytes.data(), out_bytes);
    outs.push_back(to_doubles(got_bytes, p.e.out_dtype));
  }
  return outs;
}

// Runs one problem on random data and compares with the CPU reference.
void run_and_check(const TestProblem& p, const ContractionKernel& k, std::mt19937& rng) {
  SCOPED_TRACE(p.name());
  const auto& c = p.c;
  Operands o;
  o.h.a = random_tensor(rng, numel(c.maps.a.shape), c.a_dtype, o.a);
  o.h.b = random_tensor(rng, numel(c.maps.b.shape), c.b_dtype, o.b);
  const int64_t channels = c.maps.c.shape.back();
  o.h.scale = random_tensor(rng, channels, DType::kF32, o.scale, 0.5f, 1.5f);
  o.h.bias = random_tensor(rng, channels, DType::kF32, o.bias);
  const bool has_residual = std::any_of(p.e.steps.begin(), p.e.steps.end(), [](const auto& s) {
    return s.kind == EpilogueOpKind::kResidualAdd;
  });
  if (has_residual) o.h.residual = random_tensor(rng, output_elements(p), p.e.out_dtype, o.residual);
  const std::vector<double> want = reference_output(p, o.h);
  // Twice: the second launch checks that split-K counters were reset and nothing depends on
  // leftovers of the first.
  const std::vector<std::vector<double>> got = launch(p, k, o, 2);
  for (int i = 0; i < 2; ++i) {
    const Comparison cmp = compare(got[i], want);
    EXPECT_EQ(cmp.nan, 0) << "unwritten or NaN outputs (launch " << i << ")";
    EXPECT_EQ(cmp.stray_writes, 0) << "writes outside the store map's positions";
    EXPECT_LE(cmp.rel_l2, 1e-2) << "relative L2 error (launch " << i << ")";
  }
}

// Builds every problem's kernel (in parallel), then runs each on random data against the CPU
// reference; a kernel that does not build fails the test.
void build_and_check(const std::vector<TestProblem>& ps, const std::string& arch, std::mt19937& rng) {
  std::vector<std::string> errors;
  auto kernels = build_all(ps, arch, errors);
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_TRUE(kernels[i]) << ps[i].name() << ": build failed: " << errors[i];
    SCOPED_TRACE(ps[i].name());
    run_and_check(ps[i], *kernels[i], rng);
  }
}

// ---- Random problems ------------------------------------------------------------------------
const std::vector<kernels::Schedule>& tc_schedules() {
  static const std::vector<kernels::Schedule> s = {
      tc_schedule(128, 128, 32, 64, 64, 3), tc_schedule(128, 64, 32, 64, 32, 4),
      tc_schedule(64, 64, 32, 32, 32, 3),   tc_schedule(64, 128, 64, 32, 64, 2),
      tc_schedule(128, 256, 32, 64, 64, 3), tc_schedule(256, 128, 32, 64, 64, 4),
      tc_schedule(64, 64, 64, 32, 32, 5),   tc_schedule(32, 64, 32, 32, 32, 3),
      tc_schedule(128, 128, 64, 64, 64, 4), tc_schedule(64, 32, 32, 32, 16, 2),
      tc_schedule(32, 64, 64, 16, 32, 3),   tc_schedule(64, 64, 128, 32, 32, 3),
      tc_schedule(32, 32, 64, 16, 16, 4)};
  return s;
}

const std::vector<kernels::Schedule>& wgmma_schedules() {
  static const std::vector<kernels::Schedule> s = {
      wgmma_schedule(128, 128, 64, 64, 128, 4), wgmma_schedule(128, 64, 64, 64, 64, 4),
      wgmma_schedule(64, 128, 64, 64, 128, 3),  wgmma_schedule(128, 256, 64, 64, 256, 4),
      wgmma_schedule(256, 128, 64, 128, 128, 3), wgmma_schedule(64, 64, 64, 64, 64, 5),
      wgmma_schedule(128, 128, 128, 128, 128, 3)};
  return s;
}

const std::vector<kernels::Schedule>& tma_schedules() {
  // Few persistent CTAs in most, so that both consumer warpgroups and several tiles per CTA
  // (the ring across tile boundaries) are exercised on small problems.
  static const std::vector<kernels::Schedule> s = {
      kernels::tma_schedule(128, 128, 4, 8, 2), kernels::tma_schedule(64, 256, 4, 8, 0),
      kernels::tma_schedule(128, 128, 5, 8, 3), kernels::tma_schedule(64, 128, 6, 8, 1),
      kernels::tma_schedule(128, 64, 4, 8, 5),  kernels::tma_schedule(256, 64, 3, 8, 2),
      kernels::tma_schedule(64, 64, 2, 1, 3),
      // Cooperative: both consumer warpgroups on each tile.
      kernels::tma_schedule(256, 128, 3, 8, 2, true), kernels::tma_schedule(128, 64, 4, 1, 3, true),
      kernels::tma_schedule(128, 256, 3, 8, 0, true)};
  return s;
}

// Picks a schedule the generator accepts: Tensor Cores (with vectors narrowed to what the
// operands allow; on Hopper a third wgmma, a third TMA where it maps the operands) unless
// `simt`, then SIMT.
bool pick_schedule(TestProblem& p, std::mt19937& rng, bool simt, bool hopper) {
  std::vector<kernels::Schedule> cands;
  const bool tc_types = p.c.a_dtype == p.c.b_dtype && p.c.a_dtype != DType::kF32;
  if (!simt && tc_types) {
    const unsigned draw = rng() % 3;
    std::vector<kernels::Schedule> all = !hopper || draw == 0 ? tc_schedules()
                                         : draw == 1          ? wgmma_schedules()
                                                              : tma_schedules();
    std::shuffle(all.begin(), all.end(), rng);
    if (hopper && draw == 2) {  // TMA where it maps the operands, else the other kernels
      for (const auto& s : tc_schedules()) all.push_back(s);
    }
    for (auto s : all) {
      s.a_vec = std::min(s.a_vec, p.c.a_vec);
      s.b_vec = std::min(s.b_vec, p.c.b_vec);
      const int64_t k_tiles = (p.c.k + s.block_k - 1) / s.block_k;
      const bool tma = s.mainloop == kernels::Mainloop::kTma;
      if (!tma && rng() % 4 == 0 && k_tiles >= 4) s.split_k = 2 + static_cast<int>(rng() % 3);
      if (rng() % 3 == 0) s.raster = 1;
      cands.push_back(s);
    }
  }
  for (auto s : {simt_schedule(64, 64, 16, 32, 16, 8, 8), simt_schedule(64, 64, 32, 32, 32, 8, 8)}) {
    s.a_vec = std::min(s.a_vec, p.c.a_vec);
    s.b_vec = std::min(s.b_vec, p.c.b_vec);
    cands.push_back(s);
  }
  for (const auto& s : cands) {
    if (!can_implement(p.c, p.e, s)) {
      p.s = s;
      return true;
    }
  }
  return false;
}

std::vector<TestProblem> random_problems(std::mt19937& rng, int count, bool hopper) {
  std::vector<TestProblem> out;
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  auto uni = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  const EpilogueOpKind kinds[] = {EpilogueOpKind::kScale,   EpilogueOpKind::kBias,
                                  EpilogueOpKind::kRelu,    EpilogueOpKind::kLeakyRelu,
                                  EpilogueOpKind::kClip,    EpilogueOpKind::kSigmoid,
                                  EpilogueOpKind::kHardSwish, EpilogueOpKind::kSilu,
                                  EpilogueOpKind::kResidualAdd, EpilogueOpKind::kGelu,
                                  EpilogueOpKind::kGeluTanh, EpilogueOpKind::kTanh,
                                  EpilogueOpKind::kMish, EpilogueOpKind::kHardSigmoid,
                                  EpilogueOpKind::kElu, EpilogueOpKind::kRound};
  constexpr int kKinds = sizeof(kinds) / sizeof(kinds[0]);
  int attempt = 0;
  while (static_cast<int>(out.size()) < count && attempt++ < count * 20) {
    const int idx = static_cast<int>(out.size());
    const DType in = rng() % 5 == 0 ? DType::kBF16 : DType::kF16;
    const DType outt = idx % 7 == 3 ? DType::kF32 : (in == DType::kBF16 && rng() % 2 ? DType::kBF16 : DType::kF16);
    TestProblem p;
    if (rng() % 5 < 3) {
      const int k = pick({1, 1, 3, 3, 3, 5, 7});
      const int stride = pick({1, 1, 2});
      const int dil = k > 1 && rng() % 5 == 0 ? 2 : 1;
      const int groups = pick({1, 1, 1, 1, 2, 4});
      const int cig = pick({8, 8, 16, 16, 24, 32, 64, 128, 4, 3, 2, 5, 1});
      const int cog = rng() % 2 ? 4 * uni(1, 20) : uni(1, 80);
      const int ext = (k - 1) * dil + 1;
      const int h = uni(std::max(1, ext - 2 * (k / 2)), 24), w = uni(std::max(1, ext - 2 * (k / 2)), 24);
      const int pad = uni(0, k / 2);
      if (h + 2 * pad < ext || w + 2 * pad < ext) continue;
      p = conv_problem(conv_params(pick({1, 1, 2, 3}), h, w, cig * groups, cog * groups, k, stride,
                                   pad, dil, groups),
                       in, outt);
    } else {
      const char* layouts[] = {"NN", "NT", "TN", "TT"};
      p = gemm_problem(uni(1, 300), uni(1, 300), uni(1, 400), layouts[rng() % 4], in, outt);
    }
    // Epilogue: every step kind in turn, plus random extras.
    // (hard_sigmoid with its ONNX defaults: at (0.1, 1.5) it would be 1 almost everywhere.)
    const EpilogueOpKind first = kinds[idx % kKinds];
    p.e.steps.push_back(first == EpilogueOpKind::kHardSigmoid ? step(first, 0.2f, 0.5f) : step(first, 0.1f, 1.5f));
    if (rng() % 2) p.e.steps.push_back(step(kinds[rng() % kKinds], 0.2f, 2.0f));
    std::stable_sort(p.e.steps.begin(), p.e.steps.end(), [](const auto& x, const auto& y) {
      return x.kind == EpilogueOpKind::kScale && y.kind != EpilogueOpKind::kScale;
    });
    int residuals = 0;
    for (auto& s : p.e.steps) residuals += s.kind == EpilogueOpKind::kResidualAdd;
    if (residuals > 1) continue;
    // Store map: mostly plain; channel slices and depth_to_space where the shape allows.
    const int64_t cout = p.c.maps.c.shape.back();
    const int sm = static_cast<int>(rng() % 8);
    if (sm == 0) {
      p.e.store.kind = StoreMap::Kind::kChannelSlice;
      p.e.store.channel_offset = pick({0, 8, 16, 3});
      p.e.store.ld = p.e.store.channel_offset + cout + pick({0, 8, 5});
    } else if (sm <= 2 && p.is_conv && p.c.batch == 1 && cout % 4 == 0) {
      p.e.store.kind = StoreMap::Kind::kDepthToSpace;
      p.e.store.block = 2;
      p.e.store.dcr = rng() % 2;
      p.e.store.out_h = p.c.maps.c.shape[1];
      p.e.store.out_w = p.c.maps.c.shape[2];
    }
    if (!pick_schedule(p, rng, rng() % 7 == 0, hopper)) continue;
    out.push_back(std::move(p));
  }
  return out;
}

// Fixed problems the random draw must not miss: the seed shapes' features at small scale.
std::vector<TestProblem> fixed_problems(bool hopper) {
  std::vector<TestProblem> v;
  auto add = [&](TestProblem p, const kernels::Schedule& s, std::vector<contraction::EpilogueStep> steps) {
    p.e.steps = std::move(steps);
    p.s = s;
    p.s.a_vec = std::min(p.s.a_vec, p.c.a_vec);
    p.s.b_vec = std::min(p.s.b_vec, p.c.b_vec);
    v.push_back(std::move(p));
  };
  using K = EpilogueOpKind;
  add(conv_problem(conv_params(1, 17, 13, 8, 24, 3, 1, 1)), tc_schedule(128, 64, 32, 64, 32, 3),
      {step(K::kBias), step(K::kRelu)});  // batch 1, ci = 8
  add(conv_problem(conv_params(1, 15, 15, 4, 16, 3, 2, 1)), tc_schedule(64, 64, 32, 32, 32, 4),
      {step(K::kBias)});  // ci = 4, stride 2
  add(conv_problem(conv_params(1, 23, 23, 3, 64, 7, 2, 3)), tc_schedule(128, 64, 32, 64, 32, 3),
      {step(K::kScale), step(K::kBias), step(K::kRelu)});  // resnet conv1 in small: ci = 3
  add(conv_problem(conv_params(2, 14, 14, 32, 48, 3, 1, 2, 2)), tc_schedule(64, 128, 64, 32, 64, 3),
      {step(K::kLeakyRelu, 0.1f)});  // dilation 2
  add(conv_problem(conv_params(3, 7, 7, 64, 96, 1, 1, 0)), tc_schedule(64, 64, 32, 32, 32, 4, 2),
      {step(K::kResidualAdd), step(K::kRelu)});  // 1x1, split-K 2 (K = 64: one k-tile each)
  add(conv_problem(conv_params(1, 9, 9, 256, 64, 3, 1, 1)), tc_schedule(64, 64, 32, 32, 32, 3, 8),
      {step(K::kBias), step(K::kSilu)});  // split-K 8
  add(conv_problem(conv_params(2, 10, 10, 64, 64, 3, 1, 1, 1, 4)), tc_schedule(64, 64, 32, 32, 16, 3),
      {step(K::kHardSwish)});  // grouped conv, 16 channels per group
  // Wide groups as a batch of dense GEMMs (kernels::dense_groups_wide): RegNet-Y-16GF's groups
  // of 112 channels, the second N tile of each group 48 wide; stride 2 with a residual; bf16.
  add(conv_problem(conv_params(2, 9, 9, 224, 224, 3, 1, 1, 1, 2)),
      tc_schedule(64, 64, 64, 32, 32, 3), {step(K::kBias), step(K::kRelu)});
  add(conv_problem(conv_params(1, 13, 11, 336, 336, 3, 2, 1, 1, 3)),
      tc_schedule(128, 64, 32, 32, 64, 3), {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
  // ... storing int8 (a QDQ model's grouped conv, whose quantize fuse gives it).
  add(conv_problem(conv_params(2, 9, 9, 224, 224, 3, 1, 1, 1, 2), DType::kF16, DType::kI8),
      tc_schedule(64, 64, 64, 32, 32, 3), {step(K::kBias), step(K::kQuantize, 0.2f), step(K::kRelu)});
  // An asymmetric QDQ pair (onnxruntime's QUInt8 activations, zero point 116) as fuse's fake
  // quantization: saturated to u8's range less the zero point, rounded, dequantized; on a
  // dense conv, a grouped one (its own kernels) and a GEMM.
  const std::vector<contraction::EpilogueStep> fake_quant = {step(K::kBias), step(K::kRound, 0.05f),
                                                             step(K::kClip, -116.0f, 139.0f), step(K::kMul, 0.05f)};
  add(conv_problem(conv_params(2, 15, 17, 64, 48, 3, 1, 1)), tc_schedule(64, 64, 32, 32, 32, 3), fake_quant);
  add(conv_problem(conv_params(2, 10, 10, 64, 64, 3, 1, 1, 1, 4)), tc_schedule(64, 64, 32, 32, 16, 3), fake_quant);
  add(gemm_problem(200, 96, 256, "NT"), tc_schedule(64, 64, 64, 32, 32, 3), fake_quant);
  add(conv_problem(conv_params(2, 7, 7, 96, 96, 3, 1, 1, 1, 2), DType::kBF16, DType::kBF16),
      tc_schedule(32, 64, 64, 16, 32, 4), {step(K::kSilu)});
  // Groups as the batch with split-K (the defaults split small images of long K): each split's
  // partials per (group, tile).
  add(conv_problem(conv_params(1, 7, 7, 240, 240, 3, 1, 1, 1, 2)),
      tc_schedule(32, 64, 64, 16, 32, 3, 4), {step(K::kBias), step(K::kResidualAdd)});
  // One output channel (N = 1, the operands unswapped, M = b*oh*ow): a 7x7 conv with a
  // sigmoid (CBAM's spatial attention), and a 1x1 one split over K.
  add(conv_problem(conv_params(2, 11, 13, 16, 1, 7, 1, 3)), tc_schedule(64, 32, 64, 32, 16, 3),
      {step(K::kBias), step(K::kSigmoid)});
  add(conv_problem(conv_params(3, 9, 10, 64, 1, 1, 1, 0)), tc_schedule(64, 32, 32, 32, 16, 3, 2),
      {step(K::kRelu)});
  add(gemm_problem(1, 1000, 2048, "NT"), tc_schedule(32, 64, 64, 32, 32, 4, 8),
      {step(K::kBias)});  // resnet fc, batch 1
  // A dense layer to one output, N = 1 with the operands unswapped (M = 67), and a squeeze-excite
  // conv to one channel over 1x1 images (M = b): the SIMT kernel, as the default pick runs them.
  const TestProblem dense_to_one = gemm_problem(67, 1, 520, "NT");
  add(dense_to_one, kernels::simt_schedule(dense_to_one.c), {step(K::kBias), step(K::kSigmoid)});
  const TestProblem se_to_one = conv_problem(conv_params(5, 1, 1, 24, 1, 1, 1, 0));
  add(se_to_one, kernels::simt_schedule(se_to_one.c), {step(K::kBias)});
  // A dense layer over one input feature (K = 1, an outer product), read one element at a time
  // and zero-filled to the k tile, as the default pick runs it.
  add(gemm_problem(40, 10, 1, "NT"), tc_schedule(32, 32, 64, 16, 16, 4), {step(K::kBias), step(K::kRelu)});
  add(gemm_problem(511, 63, 1001, "NN"), tc_schedule(64, 64, 32, 32, 32, 3),
      {step(K::kSigmoid)});  // odd M, N, K (vec 1)
  add(gemm_problem(512, 16, 512, "TN"), tc_schedule(64, 32, 64, 32, 16, 4),
      {step(K::kClip, 0.0f, 6.0f)});
  for (TestProblem& p : halo_problems()) v.push_back(std::move(p));
  for (TestProblem& p : packed_group_problems()) v.push_back(std::move(p));
  if (hopper) {
    add(conv_problem(conv_params(2, 30, 30, 64, 128, 3, 1, 1)), wgmma_schedule(128, 128, 64, 64, 128, 4),
        {step(K::kBias), step(K::kRelu)});
    add(gemm_problem(300, 200, 520, "NN"), wgmma_schedule(128, 256, 64, 64, 256, 4), {});
    add(gemm_problem(257, 130, 1000, "TN"), wgmma_schedule(128, 128, 64, 64, 128, 3, 4), {step(K::kBias)});
    add(conv_problem(conv_params(1, 23, 23, 3, 64, 7, 2, 3)), wgmma_schedule(64, 64, 64, 64, 64, 4),
        {step(K::kRelu)});  // ci = 3 through registers
    add(gemm_problem(64, 512, 4096, "NT", DType::kBF16, DType::kBF16), wgmma_schedule(64, 128, 64, 64, 128, 5, 8),
        {step(K::kSilu)});
    // The cp.async wgmma kernel with groups as its batch (2 groups of 112, N tile 128), which
    // the defaults and the tuner do not offer it (kernels::runs_groups_as_batch).
    add(conv_problem(conv_params(2, 9, 9, 224, 224, 3, 1, 1, 1, 2)),
        wgmma_schedule(64, 128, 64, 64, 128, 4), {step(K::kBias), step(K::kResidualAdd)});
    // TMA: tiled A (GEMM, 1x1 stride 1) and im2col A (3x3 pad 1, stride 2, dilation 2, 7x7,
    // a 1x1 stride-2 downsample), M, N and K tails in every one (K: channels not a multiple
    // of 64), batches of images that a tile's pixels run across.
    add(gemm_problem(300, 200, 520, "NT"), kernels::tma_schedule(64, 256, 4, 8, 2), {step(K::kBias)});
    add(gemm_problem(77, 70, 72, "NT", DType::kBF16, DType::kBF16), kernels::tma_schedule(64, 64, 2, 1, 1),
        {step(K::kRelu)});
    add(conv_problem(conv_params(3, 7, 9, 64, 96, 1, 1, 0)), kernels::tma_schedule(128, 128, 4, 8, 0),
        {step(K::kResidualAdd), step(K::kRelu)});
    add(conv_problem(conv_params(2, 30, 30, 64, 128, 3, 1, 1)), kernels::tma_schedule(128, 128, 5, 8, 4),
        {step(K::kBias), step(K::kRelu)});
    add(conv_problem(conv_params(3, 13, 11, 40, 72, 3, 2, 1)), kernels::tma_schedule(128, 128, 4, 8, 1),
        {step(K::kScale), step(K::kBias)});
    add(conv_problem(conv_params(2, 14, 14, 32, 48, 3, 1, 2, 2)), kernels::tma_schedule(64, 128, 6, 8, 3),
        {step(K::kLeakyRelu, 0.1f)});
    add(conv_problem(conv_params(2, 16, 15, 24, 64, 7, 2, 3)), kernels::tma_schedule(128, 64, 4, 8, 0),
        {step(K::kSilu)});
    add(conv_problem(conv_params(4, 15, 15, 128, 200, 1, 2, 0)), kernels::tma_schedule(256, 64, 3, 8, 2),
        {step(K::kBias)});
    // The residual through its own tensor map into the register epilogue's staging boxes
    // (kTmaResidual): few persistent CTAs, so that each warp's chunks run on over several tiles
    // and both boxes and both barrier phases turn over; 1, 2 and 4 chunks per tile; M and N
    // tails; bf16; a channel slice of a wider buffer, whose residual is read at the slice.
    add(conv_problem(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), kernels::tma_schedule(64, 256, 4, 1, 3),
        {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
    add(gemm_problem(200, 136, 72, "NT", DType::kBF16, DType::kBF16), kernels::tma_schedule(64, 64, 3, 1, 2),
        {step(K::kResidualAdd), step(K::kBias)});
    add(conv_problem(conv_params(2, 12, 12, 32, 72, 3, 1, 1)), kernels::tma_schedule(128, 64, 4, 8, 1),
        {step(K::kResidualAdd)});
    add(conv_problem(conv_params(3, 10, 10, 64, 120, 1, 1, 0)), kernels::tma_schedule(128, 128, 4, 1, 2),
        {step(K::kScale), step(K::kResidualAdd), step(K::kRelu)});
    v.back().e.store.kind = StoreMap::Kind::kChannelSlice;
    v.back().e.store.channel_offset = 16;
    v.back().e.store.ld = 16 + 120 + 8;
    // 64-byte rows (k-tiles of 32 channels, the 64-byte swizzle): a 3x3 of 32 channels by
    // im2col, a GEMM whose K = 96 leaves its last row half full, with a residual.
    kernels::Schedule half = kernels::tma_schedule(128, 64, 5, 8, 2);
    half.block_k = 32;
    add(conv_problem(conv_params(2, 15, 13, 32, 64, 3, 1, 1)), half, {step(K::kBias), step(K::kRelu)});
    kernels::Schedule half_res = kernels::tma_schedule(64, 128, 4, 1, 1);
    half_res.block_k = 32;
    add(gemm_problem(150, 136, 96, "NT"), half_res, {step(K::kResidualAdd), step(K::kBias)});
    // Row windows (Schedule::row_windows): one A box per (kernel row, k-tile) over a 128- or
    // 64-pixel run of one output row plus the window's width, each tap a shifted descriptor.
    // 3x3 pad 1 over two images (the first and last rows and columns in the padding), 96
    // channels (a half-empty second k-tile) into N = 96 of a 128-wide tile; 5x5 pad 2
    // dilation 2 (shifts of 0, 2, ..., 8 rows); cooperative 128x64 with a residual by bulk
    // loads; 64-pixel runs in bf16; few CTAs, so that each walks several tiles.
    auto rows = [](kernels::Schedule sch) {
      sch.row_windows = true;
      return sch;
    };
    add(conv_problem(conv_params(2, 7, 128, 96, 96, 3, 1, 1)), rows(kernels::tma_schedule(128, 128, 2, 8, 3)),
        {step(K::kBias), step(K::kRelu)});
    add(conv_problem(conv_params(1, 9, 128, 64, 64, 5, 1, 4, 2)), rows(kernels::tma_schedule(128, 64, 3, 8, 2)),
        {step(K::kBias)});
    add(conv_problem(conv_params(2, 6, 128, 64, 64, 3, 1, 1)), rows(kernels::tma_schedule(128, 64, 3, 1, 2, true)),
        {step(K::kBias), step(K::kResidualAdd)});
    add(conv_problem(conv_params(3, 5, 64, 128, 64, 3, 1, 1), DType::kBF16, DType::kBF16),
        rows(kernels::tma_schedule(64, 64, 4, 8, 3)), {step(K::kSilu)});
    // ... in 64-byte rows (32 channels per k-tile: shifts of one 64-byte row, half a 128-byte
    // line), 32 -> 64 and a 96-channel input of three chunks, cooperative.
    kernels::Schedule half_rows = rows(kernels::tma_schedule(128, 64, 6, 8, 2));
    half_rows.block_k = 32;
    add(conv_problem(conv_params(2, 6, 128, 32, 64, 3, 1, 1)), half_rows, {step(K::kBias)});
    kernels::Schedule half_coop = rows(kernels::tma_schedule(128, 64, 5, 1, 3, true));
    half_coop.block_k = 32;
    add(conv_problem(conv_params(1, 7, 256, 96, 64, 3, 1, 1)), half_coop, {step(K::kRelu)});
    // DCR depth_to_space stores by bulk tensor stores of a 4-D map (tessel_tma.cuh,
    // kTmaStoreD2s): 64 -> 128 (2x2 x 32: rows of 64 (j, c), one i per chunk) over two
    // images with an M tail; 32 -> 64 cooperative in half rows (2x2 x 16: 32 (j, c) of both i
    // per chunk, the 64-byte swizzle), few CTAs; bf16 64 -> 256 (2x2 x 64: two chunks per i).
    add(d2s(conv_problem(conv_params(2, 17, 32, 64, 128, 3, 1, 1)), true), kernels::tma_schedule(128, 128, 4, 8, 2),
        {step(K::kBias), step(K::kLeakyRelu, 0.1f)});
    kernels::Schedule coop_half = kernels::tma_schedule(256, 64, 4, 1, 2, true);
    coop_half.block_k = 32;
    add(d2s(conv_problem(conv_params(1, 20, 48, 32, 64, 3, 1, 1)), true), coop_half, {step(K::kBias)});
    add(d2s(conv_problem(conv_params(2, 9, 16, 64, 256, 3, 1, 1), DType::kBF16, DType::kBF16), true),
        kernels::tma_schedule(128, 256, 3, 8, 1, true), {step(K::kRelu)});
    // Cooperative (both consumer warpgroups on each tile, half its rows each): few CTAs, so
    // that each walks several tiles and the ring turns over across them; M tails that end in
    // the first warpgroup's half (M = 300: the last tile's rows 256-299 are warpgroup 0's) and
    // in the second's (M = 450); N and K tails; im2col with the residual's bulk loads; slab
    // epilogue (f32 output); int8 below.
    add(gemm_problem(300, 200, 520, "NT"), kernels::tma_schedule(256, 128, 3, 8, 1, true), {step(K::kBias)});
    add(gemm_problem(450, 136, 200, "NT", DType::kBF16, DType::kBF16), kernels::tma_schedule(128, 64, 4, 1, 2, true),
        {step(K::kResidualAdd), step(K::kRelu)});
    add(conv_problem(conv_params(3, 13, 11, 64, 200, 3, 1, 1)), kernels::tma_schedule(128, 256, 3, 8, 2, true),
        {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)});
    add(conv_problem(conv_params(2, 15, 15, 96, 128, 3, 2, 1)), kernels::tma_schedule(256, 128, 3, 1, 0, true),
        {step(K::kGelu)});
    v.back().e.out_dtype = DType::kF32;
    // B stored (K, N) (MN-major panels of 64 columns, wgmma's transposed B): ping-pong and
    // cooperative, N tails inside a panel and a whole panel past N (N = 200 in 256-wide tiles),
    // K tails (rows past K arrive as zeros), a residual by bulk loads, bf16. (B's rows must be
    // 16-byte multiples: N = 70 halves would be refused.)
    add(gemm_problem(300, 200, 520, "NN"), kernels::tma_schedule(128, 256, 3, 8, 1, true), {step(K::kBias)});
    add(gemm_problem(450, 136, 200, "NN", DType::kBF16, DType::kBF16), kernels::tma_schedule(128, 128, 4, 1, 2),
        {step(K::kResidualAdd), step(K::kRelu)});
    add(gemm_problem(77, 72, 72, "NN"), kernels::tma_schedule(64, 64, 2, 1, 1), {step(K::kSilu)});
  }
  return v;
}

// Every fixed problem's schedule is one the generator takes: checked without a GPU, so that a
// problem added with a hand-written schedule fails here and not first on the GPU machine.
TEST(ContractionFixedProblems, SchedulesAreLegal) {
  for (const TestProblem& p : fixed_problems(/*hopper=*/true)) {
    const auto why = can_implement(p.c, p.e, p.s);
    EXPECT_FALSE(why) << p.name() << ": " << *why;
  }
}

TEST_F(ContractionGpuTest, RandomProblemsMatchCpuReference) {
  std::mt19937 rng(20240611);
  const bool hopper = info_.arch() == "sm_90a";
  std::vector<TestProblem> ps = fixed_problems(hopper);
  for (auto& p : random_problems(rng, 200, hopper)) ps.push_back(std::move(p));
  ASSERT_GE(ps.size(), 200u);
  std::vector<std::string> errors;
  auto kernels = build_all(ps, info_.arch(), errors);
  int tc = 0, wg = 0, tma = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!kernels[i]) {
      ADD_FAILURE() << ps[i].name() << ": build failed: " << errors[i];
      continue;
    }
    tc += ps[i].s.instruction != kernels::Instruction::kSimt;
    wg += ps[i].s.instruction == kernels::Instruction::kWgmma;
    tma += ps[i].s.mainloop == kernels::Mainloop::kTma;
    try {
      run_and_check(ps[i], *kernels[i], rng);
    } catch (const std::exception& e) {
      ADD_FAILURE() << ps[i].name() << ": " << e.what();
    }
  }
  EXPECT_GE(tc, 120) << "most random problems should take a Tensor Core path";
  if (hopper) {
    EXPECT_GE(wg, 30) << "wgmma kernels among them on Hopper";
    EXPECT_GE(tma, 15) << "TMA kernels among them on Hopper";
  }
}

// Each activation of the epilogue, pointwise against its definition in double: a GEMM whose
// outputs are exactly the inputs swept over [-12, 12] (A's first column, the rest 0, times a B
// of ones in its first row), each activation alone, stored f32 so that the epilogue's fp32
// result is what is compared, element by element (the random problems' relative L2 over a
// whole output would not see a tail gone wrong).
constexpr int64_t kSweepM = 4801, kSweepN = 8, kSweepK = 16;

std::vector<TestProblem> activation_sweeps() {
  using K = EpilogueOpKind;
  const std::vector<contraction::EpilogueStep> activations = {
      step(K::kGelu),    step(K::kGeluTanh), step(K::kSilu), step(K::kSigmoid),
      step(K::kTanh),    step(K::kMish),     step(K::kElu, 1.0f), step(K::kHardSwish)};
  std::vector<TestProblem> ps;
  for (const contraction::EpilogueStep& a : activations) {
    TestProblem p = gemm_problem(kSweepM, kSweepN, kSweepK, "NN", DType::kF16, DType::kF32);
    p.e.steps = {a};
    p.s = tc_schedule(64, 64, 32, 32, 32, 3);
    p.s.a_vec = std::min(p.s.a_vec, p.c.a_vec);
    p.s.b_vec = std::min(p.s.b_vec, p.c.b_vec);
    ps.push_back(std::move(p));
  }
  return ps;
}

TEST(ContractionFixedProblems, ActivationSweepsAreLegal) {
  for (const TestProblem& p : activation_sweeps()) {
    const auto why = can_implement(p.c, p.e, p.s);
    EXPECT_FALSE(why) << p.name() << ": " << *why;
  }
}

TEST_F(ContractionGpuTest, EpilogueActivationsMatchTheirDefinitionsPointwise) {
  constexpr int64_t kM = kSweepM, kN = kSweepN, kK = kSweepK;
  const std::vector<TestProblem> ps = activation_sweeps();
  Operands o;
  o.h.a.assign(kM * kK, 0.0f);
  o.h.b.assign(kK * kN, 0.0f);
  for (int64_t i = 0; i < kM; ++i)  // f16 values, 1/200 apart
    o.h.a[i * kK] = from_bits(to_bits(-12.0f + 24.0f * i / (kM - 1), DType::kF16), DType::kF16);
  for (int64_t j = 0; j < kN; ++j) o.h.b[j] = 1.0f;
  auto bytes = [](const std::vector<float>& v, DType t) {
    std::vector<char> out(v.size() * dtype_size(t));
    for (size_t i = 0; i < v.size(); ++i) {
      if (t == DType::kF32) {
        std::memcpy(out.data() + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = to_bits(v[i], t);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  };
  o.h.scale.assign(kN, 1.0f);
  o.h.bias.assign(kN, 0.0f);
  o.a = bytes(o.h.a, DType::kF16);
  o.b = bytes(o.h.b, DType::kF16);
  o.scale = bytes(o.h.scale, DType::kF32);
  o.bias = bytes(o.h.bias, DType::kF32);
  std::vector<std::string> errors;
  auto kernels = build_all(ps, info_.arch(), errors);
  for (size_t i = 0; i < ps.size(); ++i) {
    SCOPED_TRACE(ps[i].name());
    ASSERT_TRUE(kernels[i]) << "build failed: " << errors[i];
    const std::vector<double> want = reference_output(ps[i], o.h);
    const std::vector<double> got = launch(ps[i], *kernels[i], o, 1).at(0);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    int64_t worst_at = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      // A few fp32 ulps of the value, or of 1 near 0.
      const double err = std::abs(got[j] - want[j]) / (1e-6 + 2e-6 * std::abs(want[j]));
      if (!(err <= worst)) worst = err, worst_at = static_cast<int64_t>(j);
    }
    EXPECT_LE(worst, 1.0) << "at x = " << o.h.a[worst_at / kN * kK] << ": got " << got[worst_at]
                          << ", want " << want[worst_at];
  }
}

// A small representative subset for compute-sanitizer (memcheck, racecheck), where kernels
// run orders of magnitude slower: one problem per (instruction, store map, split-K, ...) kind,
// taken from the fixed problems, smallest first.
TEST_F(ContractionGpuTest, SanitizerSubsetMatchesCpuReference) {
  std::mt19937 rng(7);
  std::vector<TestProblem> all = fixed_problems(info_.arch() == "sm_90a");
  std::sort(all.begin(), all.end(), [](const TestProblem& a, const TestProblem& b) {
    return a.c.flops() < b.c.flops();
  });
  std::vector<TestProblem> ps;
  std::set<std::string> kinds;
  for (TestProblem& p : all) {
    std::string kind = std::to_string(static_cast<int>(p.s.instruction)) + "/" +
                       std::to_string(static_cast<int>(p.s.mainloop)) + "/" +
                       std::to_string(static_cast<int>(p.e.store.kind)) + "/" +
                       std::to_string(p.s.split_k > 1) + "/" + std::to_string(p.is_conv) + "/" +
                       std::to_string(p.s.groups_per_tile > 0);
    // The TMA kernel with a residual (its bulk loads) and without, ping-pong and cooperative.
    if (p.s.mainloop == kernels::Mainloop::kTma)
      kind += "/" + std::to_string(std::any_of(p.e.steps.begin(), p.e.steps.end(), [](const auto& st) {
                return st.kind == EpilogueOpKind::kResidualAdd;
              })) + (p.s.warp_m != p.s.block_m ? "/coop" : "") +
              (p.c.b_major == contraction::Major::kMN ? "/bmn" : "") + (p.s.row_windows ? "/rw" : "");
    // The halo kernel with one buffer (a CTA per tile) and with two (CTAs walking tiles), and
    // a stem staged as tap pairs, from NCHW planes and from NHWC pixels.
    if (const std::optional<kernels::HaloLayout> l = kernels::halo_layout(p.c, p.s))
      kind += "/" + std::to_string(l->buffers) +
              (l->tap_pairs ? (l->window.nchw_input ? "/pairs/nchw" : "/pairs/nhwc") : "");
    if (kinds.insert(kind).second) ps.push_back(std::move(p));
  }
  ASSERT_GE(ps.size(), 6u);
  build_and_check(ps, info_.arch(), rng);
}

// The grayscale stems among the halo problems (one input channel, whose index drops out of the
// maps), on their own: also run with every fixed problem above, but quick to select when a
// change touches how the halo kernel pads a stem's channels.
TEST_F(ContractionGpuTest, GrayscaleStemsMatchCpuReference) {
  std::mt19937 rng(11);
  std::vector<TestProblem> ps;
  for (TestProblem& p : halo_problems())
    if (p.is_conv && p.conv.ci == 1) ps.push_back(std::move(p));
  ASSERT_EQ(ps.size(), 5u);
  build_and_check(ps, info_.arch(), rng);
}

// ---- Largest public workloads against a naive GPU kernel ----------------------------------
// One thread per output element, fp32 sums in the obvious loop order: slow, but independent
// of everything the generator does. Also a hash-based fill for inputs too large to upload.
const char* kNaiveSource = R"(
__device__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
extern "C" __global__ void fill_f16(unsigned short* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed; x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    p[i] = f2h((x & 0xffffff) * (2.0f / 16777215.0f) - 1.0f);
  }
}
// y[n, oh, ow, co] = relu(bias[co] + sum x[n, ih, iw, g*cig + ci] * w[co, kh, kw, ci])
extern "C" __global__ void naive_conv(const unsigned short* x, const unsigned short* w, const float* bias, float* y,
    int N, int H, int W, int CI, int CO, int KH, int KW, int S, int P, int D, int G, int OH, int OW) {
  long long total = (long long)N * OH * OW * CO;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < total; o += (long long)gridDim.x * blockDim.x) {
    int co = o % CO; long long r = o / CO; int ow = r % OW; r /= OW; int oh = r % OH; int n = r / OH;
    int cig = CI / G, g = co / (CO / G);
    float acc = 0.f;
    for (int kh = 0; kh < KH; ++kh) for (int kw = 0; kw < KW; ++kw) {
      int ih = oh * S + kh * D - P, iw = ow * S + kw * D - P;
      if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
      const unsigned short* xp = x + (((long long)n * H + ih) * W + iw) * CI + g * cig;
      const unsigned short* wp = w + (((long long)co * KH + kh) * KW + kw) * cig;
      for (int ci = 0; ci < cig; ++ci) acc += h2f(xp[ci]) * h2f(wp[ci]);
    }
    y[o] = fmaxf(acc + bias[co], 0.f);
  }
}
// c[m, n] = relu(bias[n] + sum_k A(m, k) B(k, n)), A stored (m,k) or (k,m) (ta), B (k,n) or (n,k) (tb).
extern "C" __global__ void naive_gemm(const unsigned short* a, const unsigned short* b, const float* bias, float* c,
    int M, int N, int K, int ta, int tb) {
  __shared__ float as[16][17], bs[16][17];
  int m = blockIdx.y * 16 + threadIdx.y, n = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    int am = blockIdx.y * 16 + threadIdx.y, bn = blockIdx.x * 16 + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = (am < M && ka < K) ? h2f(ta ? a[(long long)ka * M + am] : a[(long long)am * K + ka]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = (bn < N && kb < K) ? h2f(tb ? b[(long long)bn * K + kb] : b[(long long)kb * N + bn]) : 0.f;
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (m < M && n < N) c[(long long)m * N + n] = fmaxf(acc + bias[n], 0.f);
}
)";

struct Workload {
  std::string name;
  bool conv = false;
  contraction::Conv2dParams cp;
  int64_t m = 0, n = 0, k = 0;
  std::string layout;
  double flops = 0;
};

std::string workloads_dir() {
  if (const char* d = std::getenv("TESSEL_WORKLOADS_DIR")) return d;
  for (std::string d : {std::string(TESSEL_SOURCE_DIR) + "/shared/workloads",
                        std::string(TESSEL_SOURCE_DIR) + "/../shared/workloads"}) {
    if (std::ifstream(d + "/conv2d.csv").good()) return d;
  }
  return "";
}

std::vector<Workload> read_workloads(const std::string& dir) {
  std::vector<Workload> out;
  for (const char* file : {"conv2d.csv", "gemm.csv"}) {
    std::ifstream f(dir + "/" + file);
    for (std::string line; std::getline(f, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::stringstream ss(line);
      std::vector<std::string> col;
      for (std::string x; std::getline(ss, x, ',');) col.push_back(x);
      Workload w;
      w.name = col[0];
      if (col.size() == 12) {
        auto v = [&](int i) { return std::stoll(col[i]); };
        w.conv = true;
        w.cp = conv_params(v(1), v(2), v(3), v(4), v(5), v(6), v(8), v(9), v(10), v(11));
        w.cp.kw = v(7);
        w.flops = 2.0 * w.cp.n * w.cp.out_h() * w.cp.out_w() * w.cp.co * w.cp.kh * w.cp.kw * w.cp.ci / w.cp.groups;
      } else {
        w.m = std::stoll(col[1]);
        w.n = std::stoll(col[2]);
        w.k = std::stoll(col[3]);
        w.layout = col[4];
        w.flops = 2.0 * w.m * w.n * w.k;
      }
      out.push_back(w);
    }
  }
  return out;
}

TEST_F(ContractionGpuTest, LargestWorkloadsMatchNaiveGpuKernel) {
  const std::string dir = workloads_dir();
  if (dir.empty()) GTEST_SKIP() << "workload CSVs not found (set TESSEL_WORKLOADS_DIR)";
  std::vector<Workload> all = read_workloads(dir);
  ASSERT_FALSE(all.empty());
  // The seed's 32x300x300x64 (grid.z overflow in the original report), the ci=3 layers, and
  // the largest convolutions and GEMMs by arithmetic.
  std::vector<Workload> pick;
  std::vector<Workload> convs, gemms;
  for (const auto& w : all) {
    if (w.name == "seed_large_32_300_300_64" || w.name == "seed_edsr_head_720p" ||
        w.name == "resnet50_conv1_b32" || w.name == "seed_edsr_tail_4k") {
      pick.push_back(w);
    } else {
      (w.conv ? convs : gemms).push_back(w);
    }
  }
  auto by_flops = [](const Workload& x, const Workload& y) { return x.flops > y.flops; };
  std::sort(convs.begin(), convs.end(), by_flops);
  std::sort(gemms.begin(), gemms.end(), by_flops);
  for (size_t i = 0; i < std::min<size_t>(4, convs.size()); ++i) pick.push_back(convs[i]);
  for (size_t i = 0; i < std::min<size_t>(2, gemms.size()); ++i) pick.push_back(gemms[i]);

  std::vector<TestProblem> ps;
  for (const auto& w : pick) {
    TestProblem p = w.conv ? conv_problem(w.cp) : gemm_problem(w.m, w.n, w.k, w.layout);
    p.what = w.name;
    p.e.steps = {step(EpilogueOpKind::kBias), step(EpilogueOpKind::kRelu)};
    p.s = kernels::default_schedule(p.c, info_);
    ps.push_back(std::move(p));
  }
  std::vector<std::string> errors;
  auto kernels = build_all(ps, info_.arch(), errors);

  rt::CompileOptions opt;
  opt.arch = info_.arch();
  auto naive = rt::Module::load(rt::compile(kNaiveSource, "naive.cu", opt).cubin);
  void* fill = naive->function("fill_f16");
  auto fill_f16 = [&](rt::DeviceBuffer& buf, long long n, unsigned seed) {
    unsigned long long p = buf.ptr();
    void* args[] = {&p, &n, &seed};
    rt::LaunchConfig lc;
    lc.grid[0] = 4096;
    lc.block[0] = 256;
    rt::launch(fill, lc, args);
  };
  for (size_t i = 0; i < ps.size(); ++i) {
    const TestProblem& p = ps[i];
    SCOPED_TRACE(p.name());
    ASSERT_TRUE(kernels[i]) << errors[i];
    const auto& c = p.c;
    const int64_t na = numel(c.maps.a.shape), nb = numel(c.maps.b.shape);
    const int64_t channels = c.maps.c.shape.back(), nout = numel(c.maps.c.shape);
    rt::DeviceBuffer da(na * 2), db(nb * 2), dbias(channels * 4), dout(nout * 2), dref(nout * 4);
    rt::DeviceBuffer ws(std::max<size_t>(kernels[i]->source().workspace_bytes, 16));
    ws.fill_bytes(0);
    fill_f16(da, na, 17u + i);
    fill_f16(db, nb, 1234u + i);
    std::vector<float> bias(channels);
    std::mt19937 rng(i);
    for (auto& b : bias) b = std::uniform_real_distribution<float>(-1, 1)(rng);
    dbias.upload(bias.data(), bias.size() * 4);
    dout.fill_bytes(0xff);
    KernelArgs args;
    args.a = da.ptr();
    args.b = db.ptr();
    args.c = dout.ptr();
    args.extra = {0, dbias.ptr()};
    args.workspace = ws.ptr();
    kernels[i]->launch(args, nullptr);

    unsigned long long pa = da.ptr(), pb = db.ptr(), pbias = dbias.ptr(), pref = dref.ptr();
    rt::LaunchConfig lc;
    if (ps[i].is_conv) {
      const auto& q = p.conv;
      int v[] = {int(q.n), int(q.h), int(q.w), int(q.ci), int(q.co), int(q.kh), int(q.kw), int(q.stride_h),
                 int(q.pad_top), int(q.dilation_h), int(q.groups), int(q.out_h()), int(q.out_w())};
      void* args2[] = {&pa, &pb, &pbias, &pref, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                       &v[7], &v[8], &v[9], &v[10], &v[11], &v[12]};
      lc.grid[0] = 65535;
      lc.block[0] = 256;
      rt::launch(naive->function("naive_conv"), lc, args2);
    } else {
      int v[] = {int(p.gm), int(p.gn), int(p.gk), p.layout.trans_a ? 1 : 0, p.layout.trans_b ? 1 : 0};
      void* args2[] = {&pa, &pb, &pbias, &pref, &v[0], &v[1], &v[2], &v[3], &v[4]};
      lc.grid[0] = static_cast<unsigned>((p.gn + 15) / 16);
      lc.grid[1] = static_cast<unsigned>((p.gm + 15) / 16);
      lc.block[0] = lc.block[1] = 16;
      rt::launch(naive->function("naive_gemm"), lc, args2);
    }
    rt::synchronize();
    std::vector<char> got(nout * 2);
    std::vector<float> ref(nout);
    dout.download(got.data(), got.size());
    dref.download(ref.data(), ref.size() * 4);
    const std::vector<double> want(ref.begin(), ref.end());
    const Comparison cmp = compare(to_doubles(got, DType::kF16), want);
    EXPECT_EQ(cmp.nan, 0);
    EXPECT_LE(cmp.rel_l2, 1e-2);
  }
}

// ---- SASS -----------------------------------------------------------------------------------
TEST_F(ContractionGpuTest, TensorCoreKernelsRunHmmaAndSimtKernelsDoNot) {
  const std::string tool = ::tessel::testing::find_cuobjdump();
  if (tool.empty()) GTEST_SKIP() << "cuobjdump not found";
  TestProblem tc = conv_problem(conv_params(1, 56, 56, 64, 64, 3, 1, 1));
  tc.s = tc_schedule(128, 64, 32, 64, 32, 3);
  TestProblem simt = conv_problem(conv_params(1, 56, 56, 3, 64, 3, 1, 1));
  simt.s = simt_schedule(64, 64, 16, 32, 16, 1, 1);
  const std::string tc_sass = ::tessel::testing::dump_sass(tool, ContractionKernel::build(tc.c, tc.e, tc.s, info_.arch())->cubin());
  const std::string simt_sass =
      ::tessel::testing::dump_sass(tool, ContractionKernel::build(simt.c, simt.e, simt.s, info_.arch())->cubin());
  EXPECT_NE(tc_sass.find("HMMA.16816.F32"), std::string::npos) << tc_sass.substr(0, 2000);
  EXPECT_NE(tc_sass.find("LDSM"), std::string::npos) << "ldmatrix";
  EXPECT_NE(tc_sass.find("LDGSTS"), std::string::npos) << "cp.async";
  EXPECT_EQ(simt_sass.find("HMMA"), std::string::npos);
  EXPECT_NE(simt_sass.find("FFMA"), std::string::npos);
  if (info_.arch() == "sm_90a") {
    TestProblem wg = tc;
    wg.s = wgmma_schedule(128, 128, 64, 64, 128, 4);
    const std::string wg_sass = ::tessel::testing::dump_sass(tool, ContractionKernel::build(wg.c, wg.e, wg.s, info_.arch())->cubin());
    EXPECT_NE(wg_sass.find("HGMMA.64x128x16.F32"), std::string::npos) << wg_sass.substr(0, 2000);
    EXPECT_EQ(wg_sass.find("HMMA"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
