// The contraction kernel generator without a GPU: every kernel variant of a representative
// matrix compiles with NVRTC for sm_80 and sm_90a, and its PTX holds the instructions its
// path promises (mma.sync / ldmatrix / cp.async for Tensor Cores, fp32 FMA and no mma for
// SIMT); can_implement() rejects illegal schedules with a reason; the generated source has
// the gathers, checks and store arithmetic the index maps call for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "device/cuda_api.h"
#include "device/device_info.h"
#include "kernels/contraction/grouped.h"
#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/nvrtc_test_util.h"
#include "kernels/default_schedule.h"
#include "kernels/kernel_rules.h"

namespace tessel::kernels::cuda::testing {
namespace {

using contraction::EpilogueOpKind;
using contraction::StoreMap;
using K = contraction::EpilogueOpKind;


bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TestProblem with(TestProblem p, const kernels::Schedule& s, std::vector<contraction::EpilogueStep> steps = {}) {
  p.s = s;
  p.e.steps = std::move(steps);
  return p;
}

// The variant matrix: schedules x GEMM layouts x conv kinds x epilogue steps x store maps x
// SIMT, each feature at least once, 24 kernels in all.
std::vector<TestProblem> variants() {
  std::vector<TestProblem> v;
  v.push_back(with(conv_problem(conv_params(2, 56, 56, 64, 64, 3, 1, 1)),
                   tc_schedule(128, 128, 32, 64, 64, 3), {step(K::kBias), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(1, 28, 28, 64, 128, 1, 1, 0)),
                   tc_schedule(128, 64, 32, 64, 32, 4), {step(K::kScale), step(K::kBias)}));
  v.push_back(with(conv_problem(conv_params(1, 30, 30, 32, 64, 3, 2, 1)),
                   tc_schedule(64, 64, 64, 32, 32, 3), {step(K::kLeakyRelu, 0.1f)}));
  v.push_back(with(conv_problem(conv_params(1, 30, 30, 32, 32, 3, 1, 2, 2)),
                   tc_schedule(64, 128, 32, 32, 64, 2), {step(K::kClip, 0.0f, 6.0f)}));
  v.push_back(with(conv_problem(conv_params(1, 40, 40, 8, 64, 3, 1, 1)),
                   tc_schedule(128, 128, 32, 64, 64, 5), {step(K::kSigmoid)}));
  v.push_back(with(conv_problem(conv_params(1, 40, 40, 4, 64, 3, 1, 1)),
                   tc_schedule(128, 64, 32, 64, 32, 3, 1, 4, 4), {step(K::kHardSwish)}));
  v.push_back(with(conv_problem(conv_params(1, 224, 224, 3, 64, 7, 2, 3)),
                   tc_schedule(128, 64, 32, 64, 32, 3, 1, 1, 1), {step(K::kSilu)}));
  v.push_back(with(conv_problem(conv_params(1, 32, 32, 2, 32, 3, 1, 1)),
                   tc_schedule(64, 32, 32, 32, 16, 3, 1, 2, 2), {step(K::kResidualAdd)}));
  v.push_back(with(conv_problem(conv_params(2, 20, 20, 64, 64, 3, 1, 1, 1, 2)),
                   tc_schedule(64, 32, 32, 32, 32, 3), {step(K::kBias)}));
  // Wide groups as a batch (kernels::dense_groups_wide): 2 groups of 112, stride 2, residual.
  v.push_back(with(conv_problem(conv_params(2, 14, 14, 224, 224, 3, 2, 1, 1, 2)),
                   tc_schedule(64, 64, 64, 32, 32, 3), {step(K::kBias), step(K::kResidualAdd)}));
  v.push_back(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 128, 3, 1, 1)), false),
                   tc_schedule(128, 128, 32, 64, 64, 3), {step(K::kBias)}));
  v.push_back(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 64, 3, 1, 1)), true),
                   tc_schedule(128, 64, 32, 64, 32, 3), {step(K::kRelu)}));
  TestProblem slice = conv_problem(conv_params(1, 28, 28, 64, 32, 1, 1, 0));
  slice.e.store.kind = StoreMap::Kind::kChannelSlice;
  slice.e.store.ld = 96;
  slice.e.store.channel_offset = 32;
  v.push_back(with(slice, tc_schedule(64, 32, 64, 32, 32, 4), {step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(1, 14, 14, 256, 256, 3, 1, 1)),
                   tc_schedule(64, 64, 64, 32, 32, 4, 3), {step(K::kResidualAdd), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(32, 28, 28, 128, 128, 3, 1, 1)),
                   tc_schedule(256, 128, 32, 64, 64, 3)));
  v.push_back(with(gemm_problem(100, 72, 56, "NN"), tc_schedule(64, 64, 32, 32, 32, 3)));
  v.push_back(with(gemm_problem(512, 64, 512, "NT"), tc_schedule(64, 64, 64, 32, 32, 4, 2)));
  v.push_back(with(gemm_problem(512, 64, 512, "TN"), tc_schedule(64, 64, 32, 32, 32, 3)));
  v.push_back(with(gemm_problem(4096, 4096, 4096, "NN", DType::kBF16, DType::kF32),
                   tc_schedule(128, 256, 32, 64, 64, 3)));
  v.push_back(with(gemm_problem(255, 129, 1001, "NT"), tc_schedule(128, 128, 32, 64, 64, 3, 1, 1, 1),
                   {step(K::kBias)}));
  v.push_back(with(gemm_problem(1, 1000, 2048, "NT"), tc_schedule(32, 64, 64, 32, 32, 4, 8, 8, 8, 1)));
  v.push_back(with(conv_problem(conv_params(1, 64, 64, 3, 64, 3, 1, 1)),
                   simt_schedule(64, 64, 16, 32, 16, 1, 1), {step(K::kBias), step(K::kRelu)}));
  v.push_back(with(gemm_problem(77, 65, 33, "NN", DType::kF32, DType::kF32),
                   simt_schedule(64, 64, 16, 32, 32, 1, 1)));
  v.push_back(with(gemm_problem(128, 96, 64, "TN"), simt_schedule(64, 64, 32, 32, 32, 8, 8),
                   {step(K::kBias), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1), DType::kF16, DType::kF32),
                   tc_schedule(64, 64, 32, 32, 32, 3), {step(K::kResidualAdd)}));
  // An asymmetric QDQ pair after the conv (fuse's fake quantization of a QUInt8 activation).
  v.push_back(with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1)), tc_schedule(64, 64, 32, 32, 32, 3),
                   {step(K::kBias), step(K::kRound, 0.05f), step(K::kClip, -116.0f, 139.0f), step(K::kMul, 0.05f)}));
  return v;
}

// Hopper-only variants: wgmma from 128B-swizzled shared memory (compiled for sm_90a only).
std::vector<TestProblem> wgmma_variants() {
  std::vector<TestProblem> v;
  v.push_back(with(conv_problem(conv_params(2, 56, 56, 64, 64, 3, 1, 1)),
                   wgmma_schedule(128, 128, 64, 64, 128, 4), {step(K::kBias), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(1, 40, 40, 8, 64, 3, 1, 1)),
                   wgmma_schedule(128, 64, 64, 64, 64, 3, 1, 8, 8), {step(K::kResidualAdd)}));
  v.push_back(with(conv_problem(conv_params(1, 64, 64, 3, 64, 7, 2, 3)),
                   wgmma_schedule(64, 64, 64, 64, 64, 4, 1, 1, 1), {step(K::kScale), step(K::kBias)}));
  v.push_back(with(gemm_problem(4096, 4096, 4096, "NN"), wgmma_schedule(128, 256, 64, 64, 256, 4)));
  v.push_back(with(gemm_problem(512, 256, 512, "TN", DType::kBF16, DType::kBF16),
                   wgmma_schedule(128, 128, 64, 128, 128, 3)));
  v.push_back(with(gemm_problem(32, 4096, 25088, "NT"), wgmma_schedule(64, 128, 64, 64, 128, 4, 7)));
  v.push_back(with(conv_problem(conv_params(2, 9, 9, 224, 224, 3, 1, 1, 1, 2)),
                   wgmma_schedule(64, 128, 64, 64, 128, 4),
                   {step(K::kBias), step(K::kResidualAdd)}));
  // The TMA kernel: tiled A (GEMM, 1x1), im2col A (3x3, strided 1x1).
  v.push_back(with(gemm_problem(4096, 4096, 4096, "NT"), kernels::tma_schedule(64, 256, 4, 8, 0)));
  v.push_back(with(conv_problem(conv_params(32, 56, 56, 64, 256, 1, 1, 0)), kernels::tma_schedule(128, 128, 5, 8, 0),
                   {step(K::kBias), step(K::kResidualAdd), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(32, 28, 28, 128, 128, 3, 1, 1)), kernels::tma_schedule(128, 128, 4, 8, 0),
                   {step(K::kBias), step(K::kRelu)}));
  v.push_back(with(conv_problem(conv_params(8, 56, 56, 256, 512, 1, 2, 0), DType::kBF16, DType::kBF16),
                   kernels::tma_schedule(256, 64, 3, 8, 0)));
  // Cooperative (both consumer warpgroups on each tile): 256x128 over a GEMM, 128x256 over an
  // im2col conv with the residual's bulk loads.
  v.push_back(with(gemm_problem(4096, 4096, 4096, "NT"), kernels::tma_schedule(256, 128, 3, 8, 0, true),
                   {step(K::kBias), step(K::kGelu)}));
  v.push_back(with(conv_problem(conv_params(8, 28, 28, 128, 256, 3, 1, 1)), kernels::tma_schedule(128, 256, 3, 1, 0, true),
                   {step(K::kResidualAdd), step(K::kRelu)}));
  // depth_to_space: DCR by bulk stores of a 4-D map (pixel pairs of 64 and 32 channels), CRD
  // by the slab's.
  v.push_back(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 128, 3, 1, 1)), true),
                   kernels::tma_schedule(128, 128, 4, 8, 0), {step(K::kBias)}));
  v.push_back(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 64, 3, 1, 1)), true),
                   kernels::tma_schedule(256, 64, 4, 8, 0, true), {step(K::kBias)}));
  v.push_back(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 128, 3, 1, 1)), false),
                   kernels::tma_schedule(128, 128, 4, 8, 0), {step(K::kBias)}));
  // B stored (K, N): MN-major panels, wgmma's transposed B.
  v.push_back(with(gemm_problem(4096, 4096, 4096, "NN"), kernels::tma_schedule(256, 128, 3, 8, 0, true)));
  v.push_back(with(gemm_problem(512, 256, 512, "NN", DType::kBF16, DType::kBF16), kernels::tma_schedule(128, 64, 5, 1, 0)));
  // im2col A with the residual's bulk loads (a 3x3 residual conv, bf16).
  v.push_back(with(conv_problem(conv_params(4, 14, 14, 64, 64, 3, 1, 1), DType::kBF16, DType::kBF16),
                   kernels::tma_schedule(64, 64, 8, 1, 0), {step(K::kResidualAdd), step(K::kRelu)}));
  {  // int8: wgmma k32 from 128-element k-tiles
    kernels::Schedule s = kernels::tma_schedule(128, 128, 5, 8, 0);
    s.block_k = 128;
    v.push_back(with(conv_problem(conv_params(32, 28, 28, 128, 128, 3, 1, 1), DType::kI8, DType::kF16), s,
                     {step(K::kScale), step(K::kBias), step(K::kRelu)}));
    kernels::Schedule coop = kernels::tma_schedule(256, 128, 3, 8, 0, true);
    coop.block_k = 128;
    v.push_back(with(conv_problem(conv_params(32, 14, 14, 256, 256, 3, 1, 1), DType::kI8, DType::kI8), coop,
                     {step(K::kMul, 0.01f), step(K::kBias), step(K::kRelu), step(K::kQuantize, 0.05f)}));
    // int8 outputs with an int8 residual: the 64-byte swizzled boxes and the residual's map.
    kernels::Schedule s64 = kernels::tma_schedule(64, 64, 8, 1, 0);
    s64.block_k = 128;
    v.push_back(with(conv_problem(conv_params(32, 14, 14, 256, 1024, 1, 1, 0), DType::kI8, DType::kI8), s64,
                     {step(K::kMul, 0.01f), step(K::kBias), step(K::kScaledResidualAdd, 0.5f), step(K::kRelu),
                      step(K::kQuantize, 0.05f)}));
  }
  return v;
}

class VariantCompiles : public ::testing::TestWithParam<TestProblem> {};

TEST_P(VariantCompiles, ForSm80AndSm90aWithTheIntendedInstructions) {
  const TestProblem& p = GetParam();
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_FALSE(why) << *why;
  const KernelSource ks = emit(p.c, p.e, p.s);
  const bool tc = p.s.instruction == kernels::Instruction::kMmaSync;
  const bool wgmma = p.s.instruction == kernels::Instruction::kWgmma;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    if (wgmma && std::string(arch) != "sm_90a") continue;
    SCOPED_TRACE(arch);
    const Compiled out = nvrtc_compile(ks, arch);
    ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
    EXPECT_EQ(out.cubin.substr(0, 4), "\x7f" "ELF");
    const std::string& ptx = out.ptx;
    // Launched as a programmatic dependent: nothing touches memory before the grid it follows
    // is complete.
    EXPECT_TRUE(ks.grid_dependent);
    EXPECT_EQ(grid_dependency_problem(ptx, std::string(arch) == "sm_90a"), "");
    if (tc) {
      const std::string type = p.c.a_dtype == DType::kBF16 ? "bf16" : "f16";
      EXPECT_TRUE(has(ptx, "mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type + ".f32"));
      // K-major operands load with ldmatrix, MN-major ones with ldmatrix.trans.
      const bool a_mn = p.c.a_major == contraction::Major::kMN, b_mn = p.c.b_major == contraction::Major::kMN;
      EXPECT_EQ(has(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), !a_mn || !b_mn);
      EXPECT_EQ(has(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), a_mn || b_mn);
      for (int vec : {p.s.a_vec, p.s.b_vec}) {
        // 16-byte vectors: cp.async (.cg, or .ca for window rows); 8 and 4 bytes: cp.async.ca;
        // 2 bytes: through registers.
        const std::string expected = vec == 8   ? "], 16, %r"
                                     : vec == 4 ? "], 8, %r"
                                     : vec == 2 ? "], 4, %r"
                                                : "ld.global.nc.u16";
        EXPECT_TRUE(has(ptx, expected)) << "vec " << vec;
      }
      EXPECT_TRUE(has(ptx, "cp.async.wait_group"));
    } else if (p.s.mainloop == kernels::Mainloop::kTma) {
      const std::string type = p.c.a_dtype == DType::kBF16 ? "bf16" : "f16";
      if (p.c.a_dtype == DType::kI8) {
        EXPECT_TRUE(has(ptx, "wgmma.mma_async.sync.aligned.m64n" + std::to_string(p.s.warp_n) + "k32.s32.s8.s8"));
      } else {
        EXPECT_TRUE(has(ptx, "wgmma.mma_async.sync.aligned.m64n" + std::to_string(p.s.warp_n) + "k16.f32." +
                                 type + "." + type));
      }
      const bool im2col = p.c.a_gather;
      // A, B and (f16, bf16, int8 outputs of a plain store) C for the bulk stores; a residual
      // of a 16-bit output's type: a fourth map, C's over the residual, for its bulk loads.
      const bool residual = std::any_of(p.e.steps.begin(), p.e.steps.end(), [](const auto& st) {
        return st.kind == K::kResidualAdd || st.kind == K::kScaledResidualAdd;
      });
      // A DCR depth_to_space of 16-wide rows without a residual: a 4-D map (the variants' pixel
      // pairs are 32 or 64 channels); CRD keeps the slab's stores.
      const bool d2s = p.e.store.kind == StoreMap::Kind::kDepthToSpace;
      const bool tma_store =
          p.e.out_dtype != DType::kF32 && (!d2s || (p.e.store.dcr && !residual && p.e.store.out_w % 16 == 0));
      const bool residual_map = tma_store && residual;  // the residual has the output's type
      EXPECT_EQ(has(ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.im2col"), im2col);
      // B: K-major [N, taps, C] in 3-D boxes, MN-major (K, N) in 2-D ones.
      const bool b_mn = p.c.b_major == contraction::Major::kMN;
      EXPECT_EQ(has(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"), !im2col || residual_map || b_mn);
      EXPECT_EQ(has(ptx, "cp.async.bulk.tensor.3d.shared::cluster.global.tile"), !b_mn);
      EXPECT_TRUE(has(ptx, "mbarrier.try_wait.parity"));
      EXPECT_TRUE(has(ptx, "mbarrier.arrive.expect_tx"));
      EXPECT_FALSE(has(ptx, "cp.async.cg")) << "no thread-issued copies";
      EXPECT_FALSE(has(ptx, "mma.sync"));
      // 128 accumulators per consumer thread or more: a producer warpgroup whose registers the
      // consumers take (384 threads); fewer: the producer warp (288).
      const bool big = p.s.warp_m * p.s.warp_n >= 128 * 128;
      EXPECT_EQ(has(ptx, "setmaxnreg.inc.sync.aligned.u32 232"), big);
      EXPECT_EQ(has(ptx, "setmaxnreg.dec.sync.aligned.u32 40"), big);
      EXPECT_EQ(ks.block[0], big ? 384u : 288u);
      ASSERT_EQ(ks.tensor_maps.size(), residual_map ? 4u : tma_store ? 3u : 2u);
      EXPECT_EQ(ks.tensor_maps[0].mode == device::TensorMapSpec::Mode::kIm2col, im2col);
      EXPECT_EQ(ks.tensor_maps[0].operand, 0);
      EXPECT_EQ(ks.tensor_maps[1].operand, 1);
      EXPECT_EQ(has(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), tma_store && !d2s);
      EXPECT_EQ(has(ptx, "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"), tma_store && d2s);
      if (tma_store && !d2s) {
        EXPECT_EQ(ks.tensor_maps[2].operand, 2);
        // Swizzled for the register epilogue's staging: rows of 128 bytes (16-bit) or 64 (int8).
        EXPECT_EQ(ks.tensor_maps[2].swizzle, dtype_size(p.e.out_dtype) == 2 ? device::TensorMapSpec::Swizzle::k128B
                                                                           : device::TensorMapSpec::Swizzle::k64B);
        EXPECT_EQ(ks.tensor_maps[2].dims[0], static_cast<uint64_t>(p.c.n));
      }
      if (residual_map) {
        device::TensorMapSpec c_over_residual = ks.tensor_maps[2];
        c_over_residual.operand = ks.tensor_maps[3].operand;
        EXPECT_EQ(ks.tensor_maps[3], c_over_residual) << "the residual is read through C's map";
        EXPECT_GE(ks.tensor_maps[3].operand, kParamWordExtra) << "an epilogue operand's word";
      }
    } else if (wgmma) {
      const std::string type = p.c.a_dtype == DType::kBF16 ? "bf16" : "f16";
      EXPECT_TRUE(has(ptx, "wgmma.mma_async.sync.aligned.m64n" + std::to_string(p.s.warp_n) + "k16.f32." +
                               type + "." + type));
      EXPECT_TRUE(has(ptx, "fence.proxy.async.shared::cta"));
      EXPECT_TRUE(has(ptx, "wgmma.wait_group.sync.aligned"));
      EXPECT_TRUE(has(ptx, p.s.a_vec == 1 ? "ld.global.nc.u16" : "cp.async"));
      EXPECT_FALSE(has(ptx, "mma.sync"));
    } else {
      EXPECT_FALSE(has(ptx, "mma.sync"));
      EXPECT_TRUE(has(ptx, "fma.rn.f32"));
    }
  }
}

std::string test_name(const ::testing::TestParamInfo<TestProblem>& info) {
  std::string n = info.param.name();
  for (char& ch : n) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}
INSTANTIATE_TEST_SUITE_P(Matrix, VariantCompiles, ::testing::ValuesIn(variants()), test_name);
INSTANTIATE_TEST_SUITE_P(Hopper, VariantCompiles, ::testing::ValuesIn(wgmma_variants()), test_name);

// ---- can_implement ------------------------------------------------------------------------
void expect_rejected(const TestProblem& p, const std::string& reason) {
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_TRUE(why) << p.name() << " was accepted";
  EXPECT_TRUE(has(*why, reason)) << "got: " << *why << "\nwanted: " << reason;
}

TEST(CanImplement, RejectsIllegalSchedulesWithReasons) {
  const TestProblem conv = conv_problem(conv_params(1, 28, 28, 64, 64, 3, 1, 1));
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 48, 64, 3)), "does not divide block tile");
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 64, 64, 6)), "6 stages (2 to 5)");
  expect_rejected(with(conv, tc_schedule(128, 128, 16, 64, 64, 3)), "block_k=16: mma.sync needs a multiple of 32");
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 64, 8, 3)), "mma.sync needs multiples of 16");
  expect_rejected(with(conv, tc_schedule(256, 256, 32, 16, 16, 3)), "threads per CTA (at most 1024)");
  expect_rejected(with(conv, tc_schedule(256, 256, 64, 64, 64, 5)), "bytes of shared memory");
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 64, 64, 3, 7)), "leaves a split empty");
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 64, 64, 3, 100)), "split_k=100 with 18 k-tiles");
  expect_rejected(with(conv, wgmma_schedule(128, 128, 32, 64, 128, 4)), "block_k=32: wgmma reads k in 64-element rows");
  expect_rejected(with(conv, wgmma_schedule(128, 96, 64, 64, 96, 4)), "wgmma needs m a multiple of 64 and n 64, 128 or 256");
  expect_rejected(with(conv, wgmma_schedule(128, 256, 64, 128, 256, 4)), "needs more than 128 accumulators per thread");
  expect_rejected(with(conv, wgmma_schedule(128, 128, 64, 64, 128, 2)), "2 stages (3 to 5 for wgmma)");
  kernels::Schedule simt_split = simt_schedule(64, 64, 16, 32, 16, 8, 8);
  simt_split.split_k = 2;
  expect_rejected(with(conv, simt_split), "does not split K");

  const TestProblem ci4 = conv_problem(conv_params(1, 28, 28, 4, 64, 3, 1, 1));
  expect_rejected(with(ci4, tc_schedule(128, 64, 32, 64, 32, 3)), "a_vec=8 exceeds the 4 elements A can be read in");
  const TestProblem f32 = gemm_problem(64, 64, 64, "NN", DType::kF32, DType::kF32);
  expect_rejected(with(f32, tc_schedule(64, 64, 32, 32, 32, 3, 1, 4, 4)),
                  "Tensor Cores need f16 or bf16 operands of one type, or int8");
  // 2-byte vectors of a 128x64 A tile over 128 threads: 64 per thread, beyond the row mask.
  expect_rejected(with(conv, tc_schedule(128, 128, 64, 64, 64, 3, 1, 1, 8)),
                  "A tile needs 64 loads per thread per k-tile (at most 32)");
  expect_rejected(with(conv, tc_schedule(32, 32, 64, 32, 32, 3, 1, 1, 8)),
                  "A tile (32x64, vec 1): 64 vectors per row do not divide 32 threads");

  TestProblem bad_d2s = d2s(conv_problem(conv_params(1, 8, 8, 64, 18, 3, 1, 1)), false);
  expect_rejected(with(bad_d2s, tc_schedule(64, 64, 32, 32, 32, 3)), "does not divide N=18");
  TestProblem bad_operand = with(conv, tc_schedule(64, 64, 32, 32, 32, 3), {step(K::kBias)});
  bad_operand.e.steps[0].operand = 5;
  expect_rejected(bad_operand, "epilogue operand index 5 outside [0, 4)");
  TestProblem int_out = with(conv, tc_schedule(64, 64, 32, 32, 32, 3));
  int_out.e.out_dtype = DType::kI32;
  expect_rejected(int_out, "output dtype i32");
  TestProblem bad_slice = with(conv, tc_schedule(64, 64, 32, 32, 32, 3));
  bad_slice.e.store.kind = StoreMap::Kind::kChannelSlice;
  bad_slice.e.store.ld = 96;
  bad_slice.e.store.channel_offset = 48;
  expect_rejected(bad_slice, "channel slice [48, 112) exceeds the buffer's 96 channels");
}

TEST(CanImplement, RejectsWhatTheTmaKernelCannotMapWithReasons) {
  const TestProblem conv = conv_problem(conv_params(2, 28, 28, 64, 64, 3, 1, 1));
  EXPECT_FALSE(can_implement(conv.c, conv.e, kernels::tma_schedule(128, 64, 4, 8, 0)));
  kernels::Schedule k128 = kernels::tma_schedule(128, 64, 4, 8, 0);
  k128.block_k = 128;
  expect_rejected(with(conv, k128),
                  "block_k=128: the TMA kernel moves k-tiles of one 128- or 64-byte row (64 or 32 elements)");
  kernels::Schedule k32 = kernels::tma_schedule(128, 64, 4, 8, 0);
  k32.block_k = 32;  // one 64-byte row
  EXPECT_FALSE(can_implement(conv.c, conv.e, k32));
  kernels::Schedule split = kernels::tma_schedule(128, 64, 4, 8, 0);
  split.split_k = 2;
  expect_rejected(with(conv, split), "the TMA kernel does not split K");
  expect_rejected(with(conv, kernels::tma_schedule(128, 64, 9, 8, 0)), "9 stages (2 to 8 for the TMA kernel)");
  // Cooperative: the warpgroup tile is half of the CTA tile's rows, and only that.
  EXPECT_FALSE(can_implement(conv.c, conv.e, kernels::tma_schedule(128, 128, 4, 8, 0, /*cooperative=*/true)));
  kernels::Schedule quarter = kernels::tma_schedule(256, 128, 3, 8, 0);
  quarter.warp_m = 64;
  expect_rejected(with(conv, quarter), "warpgroup tile 64x128 is neither the CTA tile 256x128");
  kernels::Schedule split_n = kernels::tma_schedule(128, 128, 4, 8, 0);
  split_n.warp_n = 64;
  expect_rejected(with(conv, split_n), "warpgroup tile 128x64 is neither the CTA tile 128x128");
  expect_rejected(with(conv, kernels::tma_schedule(256, 256, 3, 8, 0, true)),
                  "needs more than 128 accumulators per thread");
  expect_rejected(with(conv, kernels::tma_schedule(128, 256, 3, 8, 0)), "needs more than 128 accumulators per thread");
  // ci = 4: 8-byte pixels, no 16-byte multiple for the map's strides.
  expect_rejected(with(conv_problem(conv_params(1, 28, 28, 4, 64, 3, 1, 1)), kernels::tma_schedule(128, 64, 4, 8, 0)),
                  "a multiple of 16");
  expect_rejected(with(conv_problem(conv_params(2, 10, 10, 64, 64, 3, 1, 1, 1, 4)), kernels::tma_schedule(128, 64, 4, 8, 0)),
                  "one GEMM (no batch or group dims");
  // B stored (K, N) is read MN-major (16-bit, 128-byte k-tiles); A stored (K, M) is not.
  const TestProblem nn = gemm_problem(256, 256, 256, "NN");
  EXPECT_FALSE(can_implement(nn.c, nn.e, kernels::tma_schedule(128, 64, 4, 8, 0)));
  expect_rejected(with(gemm_problem(256, 256, 256, "TN"), kernels::tma_schedule(128, 64, 4, 8, 0)),
                  "the TMA kernel reads A K-major, and B K-major or (a 16-bit GEMM's) MN-major");
  kernels::Schedule nn_half = kernels::tma_schedule(128, 64, 4, 8, 0);
  nn_half.block_k = 32;
  expect_rejected(with(gemm_problem(256, 256, 256, "NN"), nn_half),
                  "block_k=32: an MN-major B takes k-tiles of one 128-byte row of A");
  const TestProblem f32 = gemm_problem(64, 64, 64, "NT", DType::kF32, DType::kF32);
  expect_rejected(with(f32, kernels::tma_schedule(64, 64, 4, 8, 0)), "Tensor Cores need f16 or bf16 operands of one type, or int8");
}

TEST(TmaLayout, MapsTheOperandsOfGemmsAndConvolutions) {
  // 1x1 stride 1: A is a plain (M, K) matrix.
  const TestProblem pw = conv_problem(conv_params(2, 7, 9, 96, 64, 1, 1, 0));
  const auto l1 = kernels::tma_layout(pw.c, kernels::tma_schedule(128, 64, 4, 8, 0));
  ASSERT_TRUE(l1);
  EXPECT_FALSE(l1->a_im2col);
  EXPECT_EQ(l1->a.dims[0], 96u);
  EXPECT_EQ(l1->a.dims[1], 2u * 7 * 9);
  EXPECT_EQ(l1->a.strides[0], 96u * 2);
  EXPECT_EQ(l1->a.box[1], 128u);
  EXPECT_EQ(l1->chunks, 2);  // 96 channels: one full chunk, one half zero-filled
  EXPECT_EQ(l1->a.swizzle, device::TensorMapSpec::Swizzle::k128B);
  // In 64-byte rows (32 channels each, the 64-byte swizzle): three full chunks.
  kernels::Schedule half = kernels::tma_schedule(128, 64, 4, 8, 0);
  half.block_k = 32;
  const auto l1h = kernels::tma_layout(pw.c, half);
  ASSERT_TRUE(l1h);
  EXPECT_EQ(l1h->chunks, 3);
  EXPECT_EQ(l1h->a.box[0], 32u);
  EXPECT_EQ(l1h->a.swizzle, device::TensorMapSpec::Swizzle::k64B);
  EXPECT_EQ(l1h->b.swizzle, device::TensorMapSpec::Swizzle::k64B);
  EXPECT_EQ(l1->b.dims[2], 64u);
  // 3x3 stride 2 pad 1 over 13x11 (out 7x6): window origins -1, 1, ... along each dim.
  const TestProblem s2 = conv_problem(conv_params(3, 13, 11, 40, 72, 3, 2, 1));
  const auto l2 = kernels::tma_layout(s2.c, kernels::tma_schedule(128, 128, 4, 8, 0));
  ASSERT_TRUE(l2);
  EXPECT_TRUE(l2->a_im2col);
  EXPECT_EQ(l2->taps, 9);
  EXPECT_EQ(l2->a.element_strides[1], 2u);
  EXPECT_EQ(l2->a.lower[0], -1);
  EXPECT_EQ(l2->a.lower[1], -1);
  // Last origin along w: (6 - 1) * 2 - 1 = 9 = (11 - 1) + upper; along h: 6 * 2 - 1 = 11 = 12 + upper.
  EXPECT_EQ(l2->a.upper[0], -1);
  EXPECT_EQ(l2->a.upper[1], -1);
  EXPECT_EQ(l2->a.pixels_per_column, 128u);
  EXPECT_EQ(l2->b.dims[0], 40u);
  EXPECT_EQ(l2->b.dims[1], 9u);
  EXPECT_EQ(l2->b.strides[1], 9u * 40 * 2);
}

// Row windows: a tiled A map over the NHWC input whose box is a pixel run of one output row
// plus the window's width, one per (kernel row, k-tile); B for the row's taps in the same
// stage; the name's "_rw" round-trips. Refused where the runs would cross rows, a box would
// exceed 256 pixels, the stride along the width is not 1, or A is a plain matrix.
TEST(TmaLayout, RowWindowsBoxAPixelRunPerKernelRow) {
  const TestProblem p = conv_problem(conv_params(1, 36, 256, 64, 64, 3, 1, 1));
  kernels::Schedule s = kernels::tma_schedule(128, 64, 4, 8, 0);
  s.row_windows = true;
  EXPECT_EQ(s.name(), "tma_128x64x64_s4_r8_c0_rw");
  EXPECT_EQ(kernels::parse_schedule(s.name(), p.c), s);
  const auto l = kernels::tma_layout(p.c, s);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->a_row_windows);
  EXPECT_EQ(l->a_box_rows, 130);
  EXPECT_EQ(l->a.mode, device::TensorMapSpec::Mode::kTiled);
  EXPECT_EQ(l->a.box, (std::array<uint32_t, 5>{64, 130, 1, 1, 0}));
  EXPECT_EQ(l->a.dims, (std::array<uint64_t, 5>{64, 256, 36, 1, 0}));
  // Stages of A's 136 rows (17 swizzle atoms) and B's 3 taps x 64 rows, 128 bytes each.
  const KernelSource ks = emit(p.c, p.e, s);
  kernels::Schedule plain = s;
  plain.row_windows = false;
  EXPECT_EQ(ks.smem_bytes - emit(p.c, p.e, plain).smem_bytes, 4u * ((136 + 192) - (128 + 64)) * 128);
  const Compiled out = nvrtc_compile(ks, "sm_90a");
  ASSERT_TRUE(out.ok) << out.log;
  EXPECT_TRUE(has(out.ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.tile"));
  EXPECT_FALSE(has(out.ptx, "im2col"));
  std::string why;
  for (const TestProblem& bad : {conv_problem(conv_params(1, 36, 200, 64, 64, 3, 1, 1)),   // 200 = 1.56 runs
                                 conv_problem(conv_params(1, 36, 256, 64, 64, 3, 2, 1)),   // stride 2
                                 gemm_problem(512, 64, 576, "NT")}) {
    EXPECT_FALSE(kernels::tma_layout(bad.c, s, &why)) << bad.name();
    EXPECT_NE(why.find("row windows"), std::string::npos) << why;
  }
  kernels::Schedule wide = kernels::tma_schedule(256, 64, 3, 8, 0, true);
  wide.row_windows = true;
  EXPECT_FALSE(kernels::tma_layout(p.c, wide, &why));
  EXPECT_NE(why.find("at most 256"), std::string::npos) << why;
}

// A DCR depth_to_space output of the TMA kernel is stored by bulk tensor stores through a
// 4-D map {b*C', W, b, images*H} of the shuffled image; what it cannot box keeps the slab's
// stores (no C map).
TEST(TmaStoreMap, DepthToSpaceIsAFourDimensionalMapOfPixelPairs) {
  using Swizzle = device::TensorMapSpec::Swizzle;
  const kernels::Schedule s = kernels::tma_schedule(128, 128, 4, 8, 0);
  auto c_map = [](const TestProblem& p) -> std::optional<device::TensorMapSpec> {
    const KernelSource ks = emit(p.c, p.e, p.s);
    if (ks.tensor_maps.size() < 3) return std::nullopt;
    return ks.tensor_maps[2];
  };
  // 64 -> 128 channels over two 36x64 images, block 2: C' = 32, pixel pairs of 64 channels.
  const TestProblem wide = with(d2s(conv_problem(conv_params(2, 36, 64, 64, 128, 3, 1, 1)), true), s, {step(K::kBias)});
  const auto m = c_map(wide);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rank, 4);
  EXPECT_EQ(m->dims, (std::array<uint64_t, 5>{64, 64, 2, 2 * 36, 0}));
  EXPECT_EQ(m->strides, (std::array<uint64_t, 4>{64 * 2, 64 * 64 * 2, 2 * 64 * 64 * 2, 0}));
  EXPECT_EQ(m->box, (std::array<uint32_t, 5>{64, 16, 1, 1, 0}));
  EXPECT_EQ(m->swizzle, Swizzle::k128B);
  const std::string src = emit(wide.c, wide.e, wide.s).source;
  EXPECT_NE(src.find("kTmaStoreD2s = 64, kTmaStoreD2sWidth = 64"), std::string::npos) << src;
  // 64 -> 64: C' = 16, pairs of 32 channels; a chunk's 64 columns are both rows i, in 64-byte rows.
  const TestProblem narrow = with(d2s(conv_problem(conv_params(1, 36, 64, 64, 64, 3, 1, 1)), true),
                                  kernels::tma_schedule(256, 64, 4, 8, 0, true), {step(K::kBias)});
  const auto n = c_map(narrow);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->dims, (std::array<uint64_t, 5>{32, 64, 2, 36, 0}));
  EXPECT_EQ(n->box, (std::array<uint32_t, 5>{32, 16, 2, 1, 0}));
  EXPECT_EQ(n->swizzle, Swizzle::k64B);
  // No C map: CRD order, rows of 40 (no 16-pixel box stays in one row), a residual, pixel
  // pairs of 16 channels (64 -> 32), a channel slice of a concat buffer.
  TestProblem crd = wide;
  crd.e.store.dcr = false;
  EXPECT_FALSE(c_map(crd));
  EXPECT_FALSE(c_map(with(d2s(conv_problem(conv_params(1, 36, 40, 64, 128, 3, 1, 1)), true), s, {step(K::kBias)})));
  EXPECT_FALSE(c_map(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 128, 3, 1, 1)), true), s,
                          {step(K::kResidualAdd)})));
  EXPECT_FALSE(c_map(with(d2s(conv_problem(conv_params(1, 36, 64, 64, 32, 3, 1, 1)), true),
                          kernels::tma_schedule(128, 64, 4, 8, 0), {step(K::kBias)})));
  TestProblem sliced = wide;
  sliced.e.store.ld = 48;
  sliced.e.store.channel_offset = 16;
  EXPECT_FALSE(c_map(sliced));
}

TEST(CanImplement, EmitRefusesWhatCanImplementRejects) {
  TestProblem p = with(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1)), tc_schedule(128, 128, 32, 64, 64, 9));
  EXPECT_THROW(emit(p.c, p.e, p.s), InternalError);
}

// ---- Generated source ----------------------------------------------------------------------
TEST(EmittedSource, Conv3x3PaddingIsOneUnsignedCompareAndKAdvancesWithoutDivision) {
  const TestProblem p = with(conv_problem(conv_params(1, 56, 56, 64, 64, 3, 1, 1)),
                             tc_schedule(128, 64, 32, 64, 32, 3), {step(K::kBias)});
  const std::string src = emit(p.c, p.e, p.s).source;
  // oh + kh - 1 and ow + kw - 1 checked against 56 (tensor dims 1 and 2 of A).
  EXPECT_TRUE(has(src, "u32(row1_[it] + k1_) < 56u && u32(row2_[it] + k2_) < 56u")) << src;
  EXPECT_TRUE(has(src, "row1_[it] = x_oh - 1;"));
  // ci = 64 >= block_k = 32: one compare-and-subtract per carry, no division.
  EXPECT_TRUE(has(src, "x_ci += 32;\n      if (x_ci >= 64) { x_ci -= 64; ++x_kw; }\n"
                       "      if (x_kw >= 3) { x_kw -= 3; ++x_kh; }"));
  // The bias leads the epilogue: its operand loads once per channel (lead_of) in kernels
  // whose threads keep their channels.
  EXPECT_TRUE(has(src, "return Lead{1.0f, load_f32(p.extra[1], ch)};"));
  EXPECT_TRUE(has(src, "static float apply_lead(Lead l, float v) { return v + l.bias; }"));
  EXPECT_TRUE(has(src, "return after_lead(p, apply_lead(lead_of(p, ch), v), ch, residual);"));
  // A's rows are re-read one pixel over at the next kw: cached in L1. B's are not.
  EXPECT_TRUE(has(src, "struct GatherA {\n    static constexpr int kIters = 4;\n    static constexpr bool kReuseInL1 = true;"));
  EXPECT_TRUE(has(src, "struct GatherB {\n    static constexpr int kIters = 2;\n    static constexpr bool kReuseInL1 = false;"));
  EXPECT_TRUE(has(src, "static constexpr int kStoreVec = 8;"));
  EXPECT_TRUE(has(src, "#include \"tessel_mma.cuh\""));
}

TEST(EmittedSource, SmallChannelsCarryByDivisionAndUnpaddedConvHasNoChecks) {
  const TestProblem ci8 = with(conv_problem(conv_params(1, 20, 20, 8, 64, 3, 1, 1)),
                               tc_schedule(64, 64, 32, 32, 32, 3));
  EXPECT_TRUE(has(emit(ci8.c, ci8.e, ci8.s).source, "x_kw += x_ci / 8;\n      x_ci %= 8;"));
  const TestProblem one = with(conv_problem(conv_params(1, 20, 20, 64, 64, 1, 1, 0)),
                               tc_schedule(64, 64, 32, 32, 32, 3));
  const std::string src = emit(one.c, one.e, one.s).source;
  EXPECT_FALSE(has(src, "row1_"));
  EXPECT_FALSE(has(src, "kReuseInL1 = true"));
  EXPECT_TRUE(has(src, "return ((row_ok_ >> it) & 1u) && k_ok_;"));
}

TEST(EmittedSource, StoreMaps) {
  const TestProblem crd = with(d2s(conv_problem(conv_params(1, 10, 12, 64, 64, 3, 1, 1)), false),
                               tc_schedule(64, 64, 32, 32, 32, 3));
  std::string src = emit(crd.c, crd.e, crd.s).source;
  EXPECT_TRUE(has(src, "const int img = m / 120, oh = m / 12 % 10, ow = m % 12;")) << src;
  EXPECT_TRUE(has(src, "const int ch = n / 4, i = n / 2 % 2, j = n % 2;"));
  EXPECT_TRUE(has(src, "return ((Index(img) * 20 + oh * 2 + i) * 24 + ow * 2 + j) * 16 + 0 + ch;"));
  // Output channels are 4 apart in n: 8-element stores need 32 n per warp (warp_n = 32).
  EXPECT_TRUE(has(src, "kStoreVec = 8;")) << src;
  EXPECT_TRUE(has(src, "kStoreNStride = 4;"));
  const TestProblem dcr = with(d2s(conv_problem(conv_params(1, 10, 12, 64, 64, 3, 1, 1)), true),
                               tc_schedule(64, 64, 32, 32, 32, 3));
  EXPECT_TRUE(has(emit(dcr.c, dcr.e, dcr.s).source, "const int i = n / 32, j = n / 16 % 2, ch = n % 16;"));

  TestProblem slice = with(conv_problem(conv_params(1, 28, 28, 64, 32, 1, 1, 0)), tc_schedule(64, 32, 32, 32, 32, 3));
  slice.e.store.kind = StoreMap::Kind::kChannelSlice;
  slice.e.store.ld = 100;
  slice.e.store.channel_offset = 34;
  src = emit(slice.c, slice.e, slice.s).source;
  EXPECT_TRUE(has(src, "return Index(m) * 100 + 34 + n;"));
  EXPECT_TRUE(has(src, "kStoreVec = 2;")) << "offset 34 and ld 100 allow 2-element (4-byte) vectors";

  const TestProblem grouped = with(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1, 1, 4)),
                                   tc_schedule(64, 16, 32, 32, 16, 3), {step(K::kBias)});
  src = emit(grouped.c, grouped.e, grouped.s).source;
  // Group g (the batch dim) writes channels [16 g, 16 g + 16) and reads bias[16 g + n].
  EXPECT_TRUE(has(src, "return Index(m) * 64 + n + Index(x_g) * 16;")) << src;
  EXPECT_TRUE(has(src, "return int(n + Index(x_g) * 16);"));
}

// fuse's fake quantization, round(s) -> clip(qmin - z, qmax - z) -> mul(s'), is the int8
// quantize's arithmetic over the clip's range: saturate, round by the float add, and the
// dequantizing multiply fused into the rounding's second add. A round with no integral clamp
// after it is rintf.
TEST(EmittedSource, FakeQuantizationIsOneSaturatedRoundingAndAnFma) {
  const TestProblem fq = with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1)), tc_schedule(64, 64, 32, 32, 32, 3),
                              {step(K::kBias), step(K::kRound, 0.5f), step(K::kClip, -116.0f, 139.0f),
                               step(K::kMul, 0.5f), step(K::kRelu)});
  std::string src = emit(fq.c, fq.e, fq.s).source;
  EXPECT_TRUE(has(src, "v = quantize_mul_s8_f(v, 2.0f, -116.0f, 139.0f, 0.5f, -6291456.0f);  // fake quantization")) << src;
  EXPECT_FALSE(has(src, "rintf")) << src;
  EXPECT_FALSE(has(src, "clip_f")) << "the clip is the saturation";
  EXPECT_TRUE(has(src, "v = fmaxf(v, 0.0f);  // relu")) << "the steps after the mul stay";
  EXPECT_TRUE(has(src, "static constexpr int kQuantizedOut = 0;"));
  // Without the mul (a hand-written epilogue): saturated and rounded, not multiplied.
  const TestProblem no_mul = with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1)),
                                  tc_schedule(64, 64, 32, 32, 32, 3), {step(K::kRound, 0.5f), step(K::kClip, 0.0f, 255.0f)});
  EXPECT_TRUE(has(emit(no_mul.c, no_mul.e, no_mul.s).source, "v = quantize_s8_f(v, 2.0f, 0.0f, 255.0f);"));
  // A clip that is not integral is no saturation of the integers: rintf, then the clip.
  const TestProblem alone = with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1)), tc_schedule(64, 64, 32, 32, 32, 3),
                                 {step(K::kRound, 0.5f), step(K::kClip, 0.0f, 6.5f)});
  src = emit(alone.c, alone.e, alone.s).source;
  EXPECT_TRUE(has(src, "v = rintf(v * 2.0f);  // round to the grid of 0.5f")) << src;
  EXPECT_TRUE(has(src, "v = clip_f(v, 0.0f, 6.5f);"));
}

TEST(EmittedSource, LaunchGeometryOfTheSeedWorkloadsStaysInGridX) {
  // The seed report: 32x300x300x64 3x3 failed with grid.z = 90000 > 65535.
  const TestProblem p = with(conv_problem(conv_params(32, 300, 300, 64, 64, 3, 1, 1)),
                             tc_schedule(128, 64, 32, 64, 32, 3));
  const KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_EQ(ks.grid[0], 22500u);  // 2,880,000 rows / 128
  EXPECT_EQ(ks.grid[1], 1u);
  EXPECT_EQ(ks.grid[2], 1u);
  EXPECT_EQ(ks.block[0], 128u);
  EXPECT_EQ(ks.smem_bytes, 3u * (128 + 64) * 32 * 2);
  EXPECT_EQ(ks.workspace_bytes, 0u);
  // 4K EDSR tail: 14.7M output pixels still one grid dimension.
  const TestProblem tail = with(conv_problem(conv_params(1, 2880, 5120, 16, 3, 3, 1, 1)),
                                tc_schedule(128, 32, 32, 32, 32, 3, 1, 8, 8));
  EXPECT_EQ(emit(tail.c, tail.e, tail.s).grid[0], 115200u);
}

TEST(EmittedSource, SplitKWorkspaceAndWideIndices) {
  const TestProblem p = with(gemm_problem(512, 64, 512, "NT"), tc_schedule(64, 64, 64, 32, 32, 4, 2));
  const KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_EQ(ks.grid[0], 8u * 1 * 2);
  EXPECT_EQ(ks.workspace_bytes, 8u * 2 * 64 * 64 * 4 + 8 * 4);
  EXPECT_TRUE(has(ks.source, "using Index = int;"));
  const TestProblem big = with(conv_problem(conv_params(64, 1024, 1024, 64, 64, 1, 1, 0)),
                               tc_schedule(128, 64, 32, 64, 32, 3));
  EXPECT_TRUE(has(emit(big.c, big.e, big.s).source, "using Index = long long;"));
  const TestProblem leaky = with(conv_problem(conv_params(1, 8, 8, 64, 64, 1, 1, 0)),
                                 tc_schedule(64, 64, 32, 32, 32, 3), {step(K::kLeakyRelu, 0.1f)});
  EXPECT_TRUE(has(emit(leaky.c, leaky.e, leaky.s).source, "v = v < 0.0f ? v * 0.100000001f : v;"));
}

// The runtime path: the NVRTC wrapper compiles what emit() writes, with the embedded
// templates as headers, and its cache returns the same cubin for the same kernel.
TEST(ContractionKernel, CompilesThroughTheRuntimeAndItsCache) {
  const TestProblem p = with(gemm_problem(128, 128, 128, "NT"), tc_schedule(64, 64, 32, 32, 32, 3));
  const KernelSource ks = emit(p.c, p.e, p.s);
  const std::string dir = ::testing::TempDir() + "/tessel_codegen_cache_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  device::set_cache_dir(dir);
  device::CompileOptions o;
  o.arch = "sm_90a";
  o.headers = ks.headers;
  const auto first = device::compile(ks.source, ks.name + ".cu", o);
  const auto second = device::compile(ks.source, ks.name + ".cu", o);
  device::set_cache_dir("");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(first.cubin, second.cubin);
  std::string why;
  if (!device::cuda_available(&why)) {
    EXPECT_THROW(ContractionKernel::build(p.c, p.e, p.s, "sm_90a"), UserError);
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing

// ---- Halo kernel ----------------------------------------------------------------------------
namespace tessel::kernels::cuda::testing {
namespace {

class HaloCompiles : public ::testing::TestWithParam<TestProblem> {};

// The halo kernel gathers A with plain ldmatrix (no .trans: both operands K-major in shared
// memory), loads only with 16-byte cp.async (.ca for the halo, whose pixels neighbouring
// tiles read again) and needs no operand gathers or split-K.
TEST_P(HaloCompiles, ForSm80AndSm90a) {
  const TestProblem& p = GetParam();
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_FALSE(why) << *why;
  const KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_TRUE(has(ks.source, "HaloConvKernel<Problem>::run(p)"));
  EXPECT_FALSE(has(ks.source, "struct GatherA"));
  EXPECT_EQ(ks.workspace_bytes, 0u);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Compiled out = nvrtc_compile(ks, arch);
    ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
    EXPECT_EQ(grid_dependency_problem(out.ptx, std::string(arch) == "sm_90a"), "");
    const std::string type = p.c.a_dtype == DType::kBF16 ? "bf16" : "f16";
    EXPECT_TRUE(has(out.ptx, "mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type + ".f32"));
    EXPECT_TRUE(has(out.ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    EXPECT_FALSE(has(out.ptx, ".trans"));
    const auto w = p.s.groups_per_tile > 0 ? contraction::grouped_conv_geometry(p.c)
                                           : contraction::conv_window(p.c);
    ASSERT_TRUE(w);
    // NHWC pixels by cp.async.ca (neighbouring tiles read them again), NCHW ones and tap pairs'
    // few-channel NHWC ones through registers; weights by cp.async.cg (read once), or by
    // element for a 3-channel stem.
    const bool staged = w->nchw_input || kernels::halo_tap_pairs(*w);
    EXPECT_EQ(has(out.ptx, "cp.async.ca.shared.global"), !staged);
    EXPECT_EQ(has(out.ptx, "st.shared.v4.u32"), staged);
    EXPECT_EQ(has(out.ptx, "cp.async.cg.shared.global"), w->channels % 8 == 0);
    // A QDQ model's int8 input, one byte per element.
    if (p.c.a_dtype == DType::kI8) {
      EXPECT_TRUE(has(out.ptx, "ld.global.nc.u8"));
    }
  }
}

// A strided stem reads each A fragment once per row chain (HaloConvKernel::mainloop_chains):
// ResNet's 7x7/2 over warps of 4 output rows (64x32: kMI 4, kNI 4) has, per k16 step of a kernel
// row (2 of them: 4 tap pairs), chains of kernel rows 0, 2, 4, 6 and 1, 3, 5, which read
// 4 + 3 and 4 + 2 A fragments, against 4 per kernel row and step without the chains (56); B
// still takes 2 ldmatrix.x4 per (row, step), 28. The mainloop is unrolled once in the tile loop.
TEST(HaloRowChains, StemReadsEachInputRowOncePerChain) {
  std::optional<TestProblem> stem;
  for (TestProblem& p : halo_problems()) {
    if (p.what.rfind("nchw_conv7x7_s2", 0) == 0 && p.s.warp_m == 64 && p.s.warp_n == 32) {
      stem = std::move(p);
      break;
    }
  }
  ASSERT_TRUE(stem);
  const Compiled out = nvrtc_compile(emit(stem->c, stem->e, stem->s), "sm_90a");
  ASSERT_TRUE(out.ok) << out.log;
  const std::string x4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
  int count = 0;
  for (size_t at = out.ptx.find(x4); at != std::string::npos; at = out.ptx.find(x4, at + 1)) ++count;
  EXPECT_EQ(count, 2 * ((4 + 3) + (4 + 2)) + 7 * 2 * 2);
}

// Outputs of one or two bytes stored along n from 32-channel warp tiles that N holds whole,
// without a residual, go from the fragments to memory through quad shuffles
// (HaloConvKernel::store_direct): no fp32 slab in shared memory. A residual (its reads follow
// the slab's chunks) or a last warp tile past N keeps the slab.
TEST(HaloDirectStore, FragmentsGoStraightToMemoryWithoutAResidual) {
  int direct = 0, slab = 0;
  for (const TestProblem& p : halo_problems()) {
    const bool residual = std::any_of(p.e.steps.begin(), p.e.steps.end(), [](const auto& s) {
      return s.kind == contraction::EpilogueOpKind::kResidualAdd;
    });
    const bool plain = p.e.store.kind == contraction::StoreMap::Kind::kPlain;
    const bool narrow = dtype_size(p.e.out_dtype) <= 2;
    if (p.s.warp_n != 32 || !plain || !narrow || p.s.groups_per_tile > 0) continue;
    SCOPED_TRACE(p.name());
    const bool expect_direct = !residual && p.c.n % 32 == 0;
    const Compiled out = nvrtc_compile(emit(p.c, p.e, p.s), "sm_90a");
    ASSERT_TRUE(out.ok) << out.log;
    EXPECT_EQ(has(out.ptx, "shfl.sync.bfly"), expect_direct);
    EXPECT_EQ(has(out.ptx, "st.shared.v2.f32"), !expect_direct);
    ++(expect_direct ? direct : slab);
  }
  EXPECT_GE(direct, 10);
  EXPECT_GE(slab, 2);
}

std::string halo_name(const ::testing::TestParamInfo<TestProblem>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}
INSTANTIATE_TEST_SUITE_P(Halo, HaloCompiles, ::testing::ValuesIn(halo_problems()), halo_name);

// The epilogue's slab: chunks along n read back in 16-byte loads (slab_run), not one float at
// a time (the TMA kernel's depth_to_space slabs had read 128 scalar floats per thread, 12-way
// bank conflicts; a DCR one with a residual still goes through the slab, without one it skips
// it: TmaStoreMap above); and a halo kernel storing along m (NCHW) skips the slab for its
// fragments.
TEST(SlabStores, ReadBackInSixteenByteLoadsOrNotAtAll) {
  const TestProblem tma = with(d2s(conv_problem(conv_params(1, 36, 64, 64, 128, 3, 1, 1)), true),
                               kernels::tma_schedule(128, 128, 4, 1, 0), {step(K::kBias), step(K::kResidualAdd)});
  const TestProblem mma = with(conv_problem(conv_params(1, 20, 20, 64, 64, 3, 1, 1)),
                               tc_schedule(64, 64, 32, 32, 32, 3), {step(K::kBias)});
  for (const TestProblem* p : {&tma, &mma}) {
    ASSERT_FALSE(can_implement(p->c, p->e, p->s));
    const Compiled out = nvrtc_compile(emit(p->c, p->e, p->s), "sm_90a");
    ASSERT_TRUE(out.ok) << out.log;
    SCOPED_TRACE(p->s.name());
    EXPECT_TRUE(has(out.ptx, "ld.shared.v4.f32"));
    EXPECT_FALSE(has(out.ptx, "ld.shared.f32 "));
  }
  TestProblem nchw = conv_problem(conv_params(1, 40, 48, 16, 3, 3, 1, 1), DType::kF16, DType::kF32);
  nchw.e.store.kind = StoreMap::Kind::kNchw;
  nchw.e.store.out_h = 40;
  nchw.e.store.out_w = 48;
  nchw.s = kernels::halo_schedule(nchw.c, 32, 16, 64, 8, 2);
  TestProblem nhwc = nchw;
  nhwc.e.store = StoreMap{};
  for (TestProblem* p : {&nchw, &nhwc}) {
    p->e.out_dtype = p == &nchw ? DType::kF32 : DType::kF16;
    ASSERT_FALSE(can_implement(p->c, p->e, p->s));
    const Compiled out = nvrtc_compile(emit(p->c, p->e, p->s), "sm_90a");
    ASSERT_TRUE(out.ok) << out.log;
    EXPECT_EQ(has(out.ptx, "st.shared.v2.f32"), p == &nhwc);  // the slab's writes
  }
}

TEST(HaloSchedule, LaunchesPersistentCtasOverSpatialTiles) {
  // 720p, 64 -> 64: 8x16 tiles = 90 x 80 = 7200 tiles, walked by 132 CTAs.
  const TestProblem p = conv_problem(conv_params(1, 720, 1280, 64, 64, 3, 1, 1));
  const kernels::Schedule s = kernels::halo_schedule(p.c, 8, 16, 64, 32, 132);
  EXPECT_EQ(s.name(), "halo_8x16_n64_w64x32_c132");
  EXPECT_EQ(s.block_k, 576);
  const KernelSource ks = emit(p.c, p.e, s);
  EXPECT_EQ(ks.grid[0], 132u);
  EXPECT_EQ(ks.block[0], 128u);
  // 64 rows x (576*2 + 16) B of weights + 2 buffers of 10*18 px x 144 B (128-rounded), each
  // larger than the 4 warps' staging slabs (4 x 16 x 40 floats) it also holds.
  EXPECT_EQ(ks.smem_bytes, 64u * 1168 + 2 * 25984);
  EXPECT_EQ(kernels::parse_schedule(s.name(), p.c), s);
  EXPECT_EQ(emit(p.c, p.e, kernels::halo_schedule(p.c, 8, 16, 64, 32, 0)).grid[0], 7200u);
}

// A dense stride-1 window of 16-channel steps over 16-pixel tile rows reads each input row's A
// fragment once per (column tap, channel pair) and multiplies it into every output row that
// takes it (tessel_halo.cuh, kRowReuse): the SR net's 16 -> 3 tail (32x16 tiles, 4 rows per
// warp) 6 rows x 3 column taps = 18 A ldmatrix per tile instead of 9 taps x 4 rows = 36; its
// 36 mma unchanged.
TEST(HaloSchedule, RowReuseReadsEachInputRowOnce) {
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string x4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16", x2 = "ldmatrix.sync.aligned.m8n8.x2.shared.b16";
  const TestProblem tail = conv_problem(conv_params(1, 64, 48, 16, 3, 3, 1, 1));
  const Compiled a = nvrtc_compile(emit(tail.c, tail.e, kernels::halo_schedule(tail.c, 32, 16, 64, 8, 2)), "sm_90a");
  ASSERT_TRUE(a.ok) << a.log;
  EXPECT_EQ(count(a.ptx, x4), 18u);  // A
  EXPECT_EQ(count(a.ptx, x2), 9u);   // B, one n8 tile per k16 step
  EXPECT_EQ(count(a.ptx, "mma.sync.aligned.m16n8k16"), 36u);
  // 5x5 over 32 channels (two channel pairs), 4x16 tiles of 2 rows per warp, 48 outputs in
  // 32-wide warp tiles: per (column tap, pair) 2 + 4 = 6 input rows (A) and the 5 kernel rows'
  // B (2 x4 each): 10 x (6 + 10) = 160 x4, where one read per (tap, row) took 50 x (2 + 2) = 200.
  const TestProblem wide = conv_problem(conv_params(2, 11, 16, 32, 48, 5, 1, 2), DType::kBF16, DType::kF32);
  const Compiled w = nvrtc_compile(emit(wide.c, wide.e, kernels::halo_schedule(wide.c, 4, 16, 32, 32, 5)), "sm_90a");
  ASSERT_TRUE(w.ok) << w.log;
  EXPECT_EQ(count(w.ptx, x4), 160u);
  EXPECT_EQ(count(w.ptx, "mma.sync.aligned.m16n8k16"), 50u * 2 * 4);
}

// Stems of at most 4 NCHW channels with an even horizontal stride stage 4-channel (8-byte)
// pixels in column order and walk K by (kernel row, pair of adjacent taps): ResNet's 7x7/2 stem
// K = 7 rows x 4 pairs x 8 = 224 (it was 49 taps x 8 = 392), MobileNet's 3x3/2 48 (72). A
// stride-1 stem (the SR net's head) keeps 8-channel pixels by tap.
TEST(HaloSchedule, EvenStrideStemsPairTheirTaps) {
  auto stem = [](const contraction::Conv2dParams& cp) {
    TestProblem p;
    finish(p, contraction::conv2d_nchw_input_maps(cp, {DType::kF32, DType::kF16, DType::kF16}), DType::kF16);
    return p;
  };
  const TestProblem resnet = stem(conv_params(2, 224, 224, 3, 64, 7, 2, 3));
  const kernels::Schedule s = kernels::halo_schedule(resnet.c, 16, 16, 64, 32, 264);
  EXPECT_EQ(s.block_k, 224);
  const std::optional<kernels::HaloLayout> l = kernels::halo_layout(resnet.c, s);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->tap_pairs);
  EXPECT_EQ(l->pixel_pitch, 8);
  EXPECT_EQ(l->halo_w, 15 * 2 + 8) << "an odd kernel's last pair reads one column past it";
  EXPECT_EQ(l->halo_bytes, (37 * 38 * 8 + 127) / 128 * 128);
  const std::string src = emit(resnet.c, resnet.e, s).source;
  EXPECT_TRUE(has(src, "static constexpr bool kTapPairs = true;")) << src;
  EXPECT_EQ(kernels::halo_schedule(stem(conv_params(1, 224, 224, 3, 32, 3, 2, 1)).c, 16, 16, 64, 32, 0).block_k, 48);
  const TestProblem sr = stem(conv_params(1, 720, 1280, 3, 64, 3, 1, 1));
  const kernels::Schedule s1 = kernels::halo_schedule(sr.c, 16, 16, 64, 32, 0);
  EXPECT_EQ(s1.block_k, 80);
  EXPECT_FALSE(kernels::halo_layout(sr.c, s1)->tap_pairs);
}

// The same stems over NHWC pixels of at most 4 channels (bench-op's one-node stems) take the
// same layout: 8-byte slots, K by tap pairs, the pixels staged through registers. A stride-1 NHWC stem keeps no halo kernel (its channels
// are no multiple of 8), as before.
TEST(HaloSchedule, EvenStrideNhwcStemsPairTheirTaps) {
  const TestProblem resnet = conv_problem(conv_params(32, 224, 224, 3, 64, 7, 2, 3));
  const kernels::Schedule s = kernels::halo_schedule(resnet.c, 16, 16, 64, 32, 264);
  EXPECT_EQ(s.block_k, 224);
  const std::optional<kernels::HaloLayout> l = kernels::halo_layout(resnet.c, s);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->tap_pairs);
  EXPECT_FALSE(l->window.nchw_input);
  EXPECT_EQ(l->channels_padded, 4);
  EXPECT_EQ(l->pixel_pitch, 8);
  EXPECT_EQ(l->halo_w, 15 * 2 + 8);
  EXPECT_EQ(l->halo_bytes, (37 * 38 * 8 + 127) / 128 * 128);
  const std::string src = emit(resnet.c, resnet.e, s).source;
  EXPECT_TRUE(has(src, "static constexpr bool kTapPairs = true;")) << src;
  EXPECT_TRUE(has(src, "static constexpr bool kInputNchw = false;")) << src;
  EXPECT_TRUE(has(src, "kC = 3;")) << src;
  // MobileNet's 3x3/2 over RGB: K 48; over 4 channels the same; a 2-channel 5x5/2: 5 rows of 3
  // pairs, 120 rounded up to 128.
  const TestProblem rgb = conv_problem(conv_params(32, 224, 224, 3, 32, 3, 2, 1));
  EXPECT_EQ(kernels::halo_schedule(rgb.c, 16, 16, 64, 32, 0).block_k, 48);
  const TestProblem rgba = conv_problem(conv_params(32, 224, 224, 4, 32, 3, 2, 1));
  const kernels::Schedule s4 = kernels::halo_schedule(rgba.c, 16, 16, 64, 32, 0);
  EXPECT_EQ(s4.block_k, 48);
  EXPECT_TRUE(kernels::halo_layout(rgba.c, s4)->tap_pairs);
  const TestProblem two = conv_problem(conv_params(1, 26, 30, 2, 16, 5, 2, 2));
  EXPECT_EQ(kernels::halo_schedule(two.c, 8, 16, 64, 16, 0).block_k, 128);
  TestProblem sr = conv_problem(conv_params(1, 720, 1280, 3, 64, 3, 1, 1));
  sr.s = kernels::halo_schedule(sr.c, 16, 16, 64, 32, 0);
  expect_rejected(sr, "3 input channels (a multiple of 8");
}

TEST(HaloSchedule, RejectsWhatTheKernelCannotDoWithReasons) {
  auto halo = [](TestProblem p, int th, int tw, int wm, int wn) {
    p.s = kernels::halo_schedule(p.c, th, tw, wm, wn, 0);
    return p;
  };
  const TestProblem conv = conv_problem(conv_params(1, 32, 64, 64, 64, 3, 1, 1));
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 64, 64, 3, 2, 1)), 8, 16, 32, 32),
                  "needs a stride-1, dilation-1, group-1 NHWC convolution");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 64, 64, 3, 1, 2, 2)), 8, 16, 32, 32),
                  "needs a stride-1, dilation-1, group-1 NHWC convolution");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 64, 64, 3, 1, 1, 1, 2)), 8, 16, 32, 32),
                  "needs a stride-1, dilation-1, group-1 NHWC convolution");
  expect_rejected(halo(gemm_problem(64, 64, 64, "NT"), 8, 16, 32, 32),
                  "needs a stride-1, dilation-1, group-1 NHWC convolution");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 4, 64, 3, 1, 1)), 8, 16, 32, 32),
                  "4 input channels (a multiple of 8");
  // NHWC stems of few channels: tap pairs need an even horizontal stride and dilation 1.
  expect_rejected(
      halo(conv_problem(conv_params(1, 47, 51, 3, 64, 11, 3, 2)), 8, 16, 32, 32),
      "3 input channels (a multiple of 8 for 16-byte loads; at most 4 only under an even");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 3, 64, 3, 2, 2, 2)), 8, 16, 32, 32),
                  "3 input channels (a multiple of 8");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 8, 64, 3, 2, 1)), 8, 16, 32, 32),
                  "needs a stride-1, dilation-1, group-1 NHWC convolution");
  const TestProblem nchw32 = [] {
    TestProblem p;
    finish(p, contraction::conv2d_nchw_input_maps(conv_params(1, 32, 64, 32, 64, 3, 1, 1),
                                                  {DType::kF32, DType::kF16, DType::kF16}),
           DType::kF16);
    return p;
  }();
  expect_rejected(halo(nchw32, 8, 16, 32, 32), "an NCHW input of 32 channels (at most 16");
  expect_rejected(halo(conv, 8, 24, 32, 32), "halo tile width 24");
  expect_rejected(halo(conv, 8, 16, 32, 24), "the halo kernel needs m a multiple of 16 and n 8 or");
  // Warp tiles of more accumulators than half of the halo kernels' 128 registers spill.
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 64, 128, 3, 1, 1)), 8, 16, 64, 64),
                  "warp tile 64x64: 128 accumulators per thread, more than the 64");
  expect_rejected(halo(conv_problem(conv_params(1, 32, 64, 64, 96, 3, 1, 1)), 8, 16, 64, 48),
                  "warp tile 64x48: 96 accumulators per thread");
  // Persistent CTAs: weights 128 x 1168 B and 2 buffers of 18*18 px x 144 B exceed 227 KiB.
  // One CTA per tile needs one buffer, which fits.
  TestProblem big = halo(conv_problem(conv_params(1, 32, 64, 64, 128, 3, 1, 1)), 16, 16, 64, 32);
  big.s.ctas = 1;
  expect_rejected(big, "bytes of shared memory");
  big.s.ctas = 0;
  const std::optional<kernels::HaloLayout> one = kernels::halo_layout(big.c, big.s);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->buffers, 1);
  EXPECT_EQ(one->smem_bytes(), 128u * 1168 + (18 * 18 * 144 + 127) / 128 * 128);  // 128-byte rounded
  EXPECT_EQ(kernels::halo_layout(big.c, [&] {
              kernels::Schedule s = big.s;
              s.ctas = 4;  // 4 CTAs walk the 8 tiles
              return s;
            }())->buffers, 2);
  TestProblem wg = halo(conv, 8, 16, 32, 32);
  wg.s.instruction = kernels::Instruction::kWgmma;
  expect_rejected(wg, "the halo kernel runs on mma.sync only");
  TestProblem narrow = halo(conv, 8, 16, 32, 32);
  narrow.s.block_n = 32;
  expect_rejected(narrow, "must cover N=64");
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing

// ---- Packed groups ----------------------------------------------------------------------------
namespace tessel::kernels::cuda::testing {
namespace {

class PackedGroupsCompile : public ::testing::TestWithParam<TestProblem> {};

// The packed-groups kernel is MmaKernel with groups in its N tile: K-major ldmatrix for both
// operands, cp.async loads, one CTA per (M tile, tile of groups), no split-K workspace.
TEST_P(PackedGroupsCompile, ForSm80AndSm90a) {
  const TestProblem& p = GetParam();
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_FALSE(why) << *why;
  const KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_TRUE(has(ks.source, "MmaKernel<Problem>::run(p)"));
  EXPECT_TRUE(has(ks.source, "kGroupsPerTile = " + std::to_string(p.s.groups_per_tile) + ","));
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(p.c);
  ASSERT_TRUE(l);
  const int64_t tiles = (l->groups + p.s.groups_per_tile - 1) / p.s.groups_per_tile;
  EXPECT_EQ(ks.grid[0], static_cast<unsigned>(tiles * ((p.c.m + p.s.block_m - 1) / p.s.block_m)));
  EXPECT_EQ(ks.workspace_bytes, 0u);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Compiled out = nvrtc_compile(ks, arch);
    ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
    EXPECT_TRUE(has(out.ptx, "mma.sync.aligned.m16n8k16.row.col.f32"));
    EXPECT_FALSE(has(out.ptx, ".trans"));
    EXPECT_TRUE(has(out.ptx, "cp.async"));
  }
}

INSTANTIATE_TEST_SUITE_P(Packed, PackedGroupsCompile, ::testing::ValuesIn(packed_group_problems()),
                         halo_name);

TEST(PackedGroups, ViewsFoldTheGroupsIntoN) {
  // ResNeXt-50's second stage 3x3: 32 groups of 8 channels in and out, batch 2.
  const TestProblem p = conv_problem(conv_params(2, 14, 14, 256, 256, 3, 1, 1, 1, 32));
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(p.c);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->groups, 32);
  EXPECT_EQ(l->n_per_group, 8);
  EXPECT_EQ(l->ci_per_group, 8);
  EXPECT_EQ(l->k_per_group, 72);
  const contraction::MatchResult dense = contraction::match(contraction::grouped_dense_view(p.c, *l));
  ASSERT_TRUE(dense.contraction);
  EXPECT_EQ(dense.contraction->batch, 1);
  EXPECT_EQ(dense.contraction->n, 256);
  EXPECT_EQ(dense.contraction->k, 72);
  EXPECT_EQ(dense.contraction->m, p.c.m);
  // 32 groups in tiles of 5: 7 tiles, A's channel stepped by 40, K over 40 channels per tap.
  const contraction::MatchResult packed =
      contraction::match(contraction::grouped_packed_a_view(p.c, *l, 5));
  ASSERT_TRUE(packed.contraction);
  EXPECT_EQ(packed.contraction->batch, 7);
  EXPECT_EQ(packed.contraction->k, 9 * 40);
  EXPECT_EQ(packed.contraction->a_vec, 8);
  // Not grouped: a dense conv, a GEMM, a depthwise conv (N is empty).
  EXPECT_FALSE(contraction::grouped_layout(conv_problem(conv_params(1, 8, 8, 64, 64, 3, 1, 1)).c));
  EXPECT_FALSE(contraction::grouped_layout(gemm_problem(64, 64, 64, "NT").c));
  EXPECT_FALSE(contraction::grouped_layout(conv_problem(conv_params(1, 8, 8, 32, 32, 3, 1, 1, 1, 32)).c));
}

TEST(PackedGroups, DefaultScheduleAndRefusals) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  // RegNet-Y-400MF's stage 2: 13 groups of 8 at 28x28, batch 32.
  const TestProblem regnet = conv_problem(conv_params(32, 28, 28, 104, 104, 3, 1, 1, 1, 13));
  const std::optional<kernels::Schedule> s = kernels::packed_groups_schedule(regnet.c, h100);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->groups_per_tile, 4);
  EXPECT_EQ(s->block_n, 32);
  EXPECT_EQ(s->block_k, 32);
  EXPECT_EQ(s->block_m, 64);
  EXPECT_EQ(s->stages, 3);  // K = 72: three k-tiles
  // The default is the grouped halo kernel at batch 32 (GroupedHalo below), the packed one
  // at batch 1, whose 8x16 tiles would be too few for the SMs.
  const TestProblem regnet1 = conv_problem(conv_params(1, 28, 28, 104, 104, 3, 1, 1, 1, 13));
  EXPECT_EQ(kernels::default_schedule(regnet1.c, h100).mainloop, kernels::Mainloop::kGemm);
  EXPECT_GT(kernels::default_schedule(regnet1.c, h100).groups_per_tile, 0);
  EXPECT_FALSE(can_implement(regnet.c, regnet.e, *s));
  EXPECT_EQ(kernels::parse_schedule(s->name(), regnet.c), *s);
  EXPECT_NE(s->name().find("_g4"), std::string::npos) << s->name();
  // Refused with a reason: 4 output channels per group (an n8 fragment would straddle two).
  std::string why;
  const TestProblem narrow = conv_problem(conv_params(1, 56, 56, 128, 128, 3, 1, 1, 1, 32));
  EXPECT_FALSE(kernels::packed_groups_schedule(narrow.c, h100, &why));
  EXPECT_NE(why.find("4 output channels per group"), std::string::npos) << why;
  // 24 channels per group: padded to 32 in shared memory, two groups per 48-wide tile.
  const TestProblem regnet16 = conv_problem(conv_params(32, 28, 28, 120, 120, 3, 1, 1, 1, 5));
  const std::optional<kernels::Schedule> s24 = kernels::packed_groups_schedule(regnet16.c, h100);
  ASSERT_TRUE(s24);
  EXPECT_EQ(s24->groups_per_tile, 2);
  EXPECT_EQ(s24->block_n, 48);
  EXPECT_EQ(s24->warp_n, 48);
  EXPECT_EQ(s24->block_k, 32);
  EXPECT_FALSE(can_implement(regnet16.c, regnet16.e, *s24));
  // 40 channels per group: no warp tile of 16, 32, 48 or 64 channels nests with them.
  const TestProblem odd = conv_problem(conv_params(1, 14, 14, 80, 80, 3, 1, 1, 1, 2));
  EXPECT_FALSE(kernels::packed_groups_schedule(odd.c, h100, &why));
  EXPECT_NE(why.find("40 output channels per group"), std::string::npos) << why;
  // check_schedule: block_n must be whole groups, block_k whole taps, vectors inside a group.
  kernels::Schedule bad = *s;
  bad.block_n = 48;
  EXPECT_TRUE(kernels::check_schedule(regnet.c, bad));
  bad = *s;
  bad.block_k = 36;
  EXPECT_TRUE(kernels::check_schedule(regnet.c, bad));
  bad = *s;
  bad.split_k = 2;
  EXPECT_TRUE(kernels::check_schedule(regnet.c, bad));
}

TEST(DenseGroups, WideGroupsNoGroupedKernelTakesRunAsABatchOnMmaSync) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  // RegNet-Y-16GF's third stage: 11 groups of 112 channels; and groups of 40. Neither grouped
  // kernel takes them (the packed one has no warp layout for them, the halo one no warp tile).
  for (const TestProblem& p : {conv_problem(conv_params(32, 14, 14, 1232, 1232, 3, 1, 1, 1, 11)),
                               conv_problem(conv_params(1, 14, 14, 80, 80, 3, 1, 1, 1, 2))}) {
    SCOPED_TRACE(p.what);
    EXPECT_FALSE(kernels::packed_groups_schedule(p.c, h100));
    EXPECT_FALSE(kernels::grouped_halo_schedule(p.c, h100));
    EXPECT_TRUE(kernels::dense_groups_wide(p.c));
    const kernels::Schedule s = kernels::default_schedule(p.c, h100);
    EXPECT_EQ(s.instruction, kernels::Instruction::kMmaSync) << s.name();
    EXPECT_EQ(s.mainloop, kernels::Mainloop::kGemm);
    EXPECT_EQ(s.groups_per_tile, 0);
    EXPECT_TRUE(kernels::runs_groups_as_batch(s));
    EXPECT_FALSE(can_implement(p.c, p.e, s));
  }
  EXPECT_FALSE(kernels::runs_groups_as_batch(wgmma_schedule(64, 128, 64, 64, 128, 4)));
  EXPECT_FALSE(kernels::runs_groups_as_batch(kernels::tma_schedule(128, 128, 4, 8, 0)));
  // Narrow groups that no grouped kernel takes stay off Tensor Cores (the direct kernel): 4
  // channels per group, depthwise, and input channels per group not a multiple of 8.
  for (const TestProblem& p : {conv_problem(conv_params(1, 56, 56, 128, 128, 3, 1, 1, 1, 32)),
                               conv_problem(conv_params(1, 14, 14, 64, 64, 3, 1, 1, 1, 64)),
                               conv_problem(conv_params(1, 14, 14, 108, 108, 3, 1, 1, 1, 3))}) {
    SCOPED_TRACE(p.what);
    EXPECT_FALSE(kernels::dense_groups_wide(p.c));
    EXPECT_EQ(kernels::default_schedule(p.c, h100).instruction, kernels::Instruction::kSimt);
  }
}

TEST(GroupedHalo, WindowLayoutAndDefault) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  // ResNeXt-50's first grouped layer at batch 32, its 32 groups of 4 widened to 16 of 8.
  const TestProblem p = conv_problem(conv_params(32, 56, 56, 128, 128, 3, 1, 1, 1, 16));
  const std::optional<contraction::ConvWindow> w = contraction::grouped_conv_geometry(p.c);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->channels, 8);
  EXPECT_EQ(w->out_channels, 8);
  EXPECT_EQ(w->channel_pitch, 128);
  EXPECT_EQ(w->out_h, 56);
  EXPECT_FALSE(contraction::conv_window(p.c));  // not a dense window
  const kernels::Schedule s = kernels::default_schedule(p.c, h100);
  EXPECT_EQ(s.name(), "halo_8x16_n32_w32x16_c1056_g4");
  EXPECT_EQ(kernels::parse_schedule(s.name(), p.c), s);
  const std::optional<kernels::HaloLayout> l = kernels::halo_layout(p.c, s);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->slices, 4);
  EXPECT_EQ(l->channels_padded, 32);      // 4 groups of 8 per halo pixel
  EXPECT_EQ(l->pixel_pitch, 80);          // 4 chunks, padded to 5
  EXPECT_EQ(l->halo_h * l->halo_w, 180);  // 10 x 18
  EXPECT_EQ(l->k_padded, 80);             // 9 taps x 8 channels, 16-rounded
  EXPECT_EQ(l->tiles, 32 * 7 * 4);
  const KernelSource ks = emit(p.c, p.e, s);
  EXPECT_EQ(ks.grid[0], 1056u);  // 264 CTAs per slice
  EXPECT_TRUE(has(ks.source, "kGroupsPerTile = 4, kGroupC = 8, kGroupN = 8, kSlices = 4"));
  // Stride 2 with 8 channels per group keeps the halo kernel; with 16 the packed one (its
  // k-tiles measured faster), as does a 7-wide output (a 16-wide tile would waste 56%).
  const TestProblem s2 = conv_problem(conv_params(32, 56, 56, 256, 256, 3, 2, 1, 1, 32));
  EXPECT_EQ(kernels::default_schedule(s2.c, h100).mainloop, kernels::Mainloop::kHalo);
  EXPECT_EQ(contraction::grouped_conv_geometry(s2.c)->stride_w, 2);
  const TestProblem s2_16 = conv_problem(conv_params(32, 56, 56, 512, 512, 3, 2, 1, 1, 32));
  EXPECT_EQ(kernels::default_schedule(s2_16.c, h100).mainloop, kernels::Mainloop::kGemm);
  const TestProblem narrow = conv_problem(conv_params(32, 7, 7, 1024, 1024, 3, 1, 1, 1, 32));
  EXPECT_EQ(kernels::default_schedule(narrow.c, h100).mainloop, kernels::Mainloop::kGemm);
}

// What `tessel tune` measures for a grouped conv: the packed kernel's variants first, then the
// grouped halo kernel's, every one legal with the node's epilogue, none twice.
TEST(GroupedHalo, TuningCandidatesAreLegalAndNearTheDefaultFirst) {
  const device::DeviceInfo& h100 = device::known_device("sm_90a");
  // RegNet-Y-400MF's 14x14 layer at batch 32: 26 groups of 8.
  const TestProblem p = conv_problem(conv_params(32, 14, 14, 208, 208, 3, 1, 1, 1, 26));
  const std::vector<kernels::Schedule> all = kernels::grouped_schedules(p.c, h100);
  ASSERT_GT(all.size(), 10u);
  std::set<std::string> names;
  size_t first_halo = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    const kernels::Schedule& s = all[i];
    EXPECT_FALSE(can_implement(p.c, p.e, s)) << s.name();
    EXPECT_TRUE(names.insert(s.name()).second) << s.name();
    EXPECT_GT(s.groups_per_tile, 0) << s.name();
    if (s.mainloop == kernels::Mainloop::kHalo)
      first_halo = std::min(first_halo, i);
    else
      EXPECT_EQ(first_halo, all.size()) << "packed after halo: " << s.name();
  }
  ASSERT_LT(first_halo, all.size());
  EXPECT_GT(first_halo, 0u);  // packed variants exist
  // The default's shape (one CTA per tile) and the whole-height tile are both candidates.
  EXPECT_EQ(names.count("halo_8x16_n32_w32x16_c0_g4"), 1u);
  EXPECT_EQ(names.count("halo_14x16_n32_w32x16_c0_g4"), 1u);
  EXPECT_EQ(names.count("halo_7x16_n32_w16x16_c0_g4"), 1u);
  // The nearest to 8 warps of 128 pixels over 32 channels comes first.
  EXPECT_EQ(all[first_halo].name(), "halo_8x16_n32_w32x16_c0_g4");
  // One of each compiles (the halo kernel with a 7-row tile: 7 warps of 16 pixels per column).
  for (const char* name : {"halo_7x16_n32_w16x16_c0_g4"}) {
    const std::optional<kernels::Schedule> s = kernels::parse_schedule(name, p.c);
    ASSERT_TRUE(s);
    const Compiled out = nvrtc_compile(emit(p.c, p.e, *s), "sm_90a");
    EXPECT_TRUE(out.ok) << out.log;
  }
  // Nothing for a dense conv.
  EXPECT_TRUE(
      kernels::grouped_schedules(conv_problem(conv_params(32, 14, 14, 64, 64, 3, 1, 1)).c, h100)
          .empty());
}

TEST(GroupedHalo, RejectsWhatTheKernelCannotDoWithReasons) {
  const TestProblem p = conv_problem(conv_params(2, 14, 14, 104, 104, 3, 1, 1, 1, 13));
  auto halo = [](TestProblem q, int wn, int groups) {
    q.s = kernels::halo_schedule(q.c, 8, 16, 32, wn, 0, groups);
    return q;
  };
  expect_rejected(halo(p, 16, 14), "14 groups per tile of 13 groups");
  TestProblem partial = halo(p, 16, 4);
  partial.s.block_n = 48;
  expect_rejected(partial, "must be 4 groups of 8 channels");
  const TestProblem g24 = conv_problem(conv_params(1, 14, 14, 96, 96, 3, 1, 1, 1, 4));
  expect_rejected(halo(g24, 16, 2), "warp tile of 16 channels does not nest with groups of 24");
  // Groups of 4 channels (ResNeXt's, before widening): no 16-byte chunk per group.
  expect_rejected(halo(conv_problem(conv_params(1, 14, 14, 128, 128, 3, 1, 1, 1, 32)), 16, 4),
                  "4 input channels (a multiple of 8");
  // A dense conv named with groups, and a grouped one without: no window for either.
  TestProblem dense = halo(conv_problem(conv_params(1, 14, 14, 64, 64, 3, 1, 1)), 16, 2);
  dense.s.block_n = 32;  // halo_schedule leaves it 0 without a grouped window
  expect_rejected(dense, "needs a grouped NHWC convolution");
  expect_rejected(halo(p, 16, 0), "needs a stride-1, dilation-1, group-1 NHWC convolution");
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
