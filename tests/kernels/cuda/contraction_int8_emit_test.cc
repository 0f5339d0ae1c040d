// int8 contractions in the mma.sync generator, without a GPU: each variant compiles with NVRTC
// for sm_80 and sm_90a and its PTX holds m16n8k32 .s8 with plain (never .trans) ldmatrix, the
// loads its vectors promise and the int32 -> fp32 conversion; the plan sizes 1-byte tiles and
// int8 stores; can_implement refuses what the int8 path does not take, with the reason; the
// default schedule is an mma.sync one the generator implements, and its name round-trips.
#include <gtest/gtest.h>

#include <optional>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device/device_info.h"
#include "kernels/arch.h"
#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/nvrtc_test_util.h"
#include "kernels/default_schedule.h"
#include "kernels/estimate.h"
#include "kernels/test_devices.h"

namespace tessel::kernels::cuda::testing {
namespace {

using contraction::StoreMap;
using K = contraction::EpilogueOpKind;

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TestProblem i8conv(const contraction::Conv2dParams& cp, DType out = DType::kI8) {
  return conv_problem(cp, DType::kI8, out);
}
TestProblem i8gemm(int64_t m, int64_t n, int64_t k, DType out = DType::kI8,
                   const char* layout = "NT") {
  return gemm_problem(m, n, k, layout, DType::kI8, out);
}

// An int8 schedule: 16-byte vectors where the operands allow them.
TestProblem with(TestProblem p, kernels::Schedule s,
                 std::vector<contraction::EpilogueStep> steps = {},
                 std::optional<DType> residual = std::nullopt) {
  s.a_vec = std::min(16, p.c.a_vec);
  s.b_vec = std::min(16, p.c.b_vec);
  p.s = s;
  p.e.steps = std::move(steps);
  p.e.residual_dtype = residual;
  return p;
}

std::vector<TestProblem> int8_variants() {
  std::vector<TestProblem> v;
  // 3x3 pad 1, dequantize + bias + relu into f16 (a float consumer).
  v.push_back(with(i8conv(conv_params(2, 28, 28, 64, 64, 3, 1, 1), DType::kF16),
                   tc_schedule(128, 128, 64, 64, 64, 3),
                   {step(K::kMul, 1e-3f), step(K::kBias), step(K::kRelu)}));
  // 1x1 requantized to int8: scale, bias, relu, quantize.
  v.push_back(with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)),
                   tc_schedule(128, 64, 64, 64, 32, 4),
                   {step(K::kScale), step(K::kBias), step(K::kRelu), step(K::kQuantize, 0.5f)}));
  // Strided 3x3, the int32 sums as f32.
  v.push_back(with(i8conv(conv_params(1, 30, 30, 32, 64, 3, 2, 1), DType::kF32),
                   tc_schedule(64, 64, 64, 32, 32, 3)));
  // ci = 6: 2-byte vectors through registers; K = 54 in one k-tile of 64.
  v.push_back(with(i8conv(conv_params(1, 32, 32, 6, 32, 3, 1, 1)),
                   tc_schedule(64, 32, 64, 32, 16, 3), {step(K::kQuantize, 4.0f)}));
  // ci = 8: 8-byte cp.async; an int8 residual added at its scale, then requantized.
  v.push_back(with(i8conv(conv_params(1, 20, 20, 8, 64, 3, 1, 1)),
                   tc_schedule(64, 64, 128, 32, 32, 3),
                   {step(K::kMul, 0.01f), step(K::kBias), step(K::kScaledResidualAdd, 0.05f),
                    step(K::kRelu), step(K::kQuantize, 0.1f)}));
  // An f16 output with an int8 residual (residual_dtype).
  v.push_back(with(i8conv(conv_params(1, 14, 14, 64, 64, 1, 1, 0), DType::kF16),
                   tc_schedule(64, 64, 64, 32, 32, 2),
                   {step(K::kMul, 1e-3f), step(K::kScaledResidualAdd, 0.02f)}, DType::kI8));
  // Split-K: int32 partials.
  v.push_back(with(i8gemm(200, 72, 512, DType::kF32), tc_schedule(64, 64, 128, 32, 32, 3, 2)));
  // The largest tile.
  v.push_back(with(i8gemm(512, 512, 512), tc_schedule(256, 128, 64, 64, 64, 3),
                   {step(K::kQuantize, 64.0f)}));
  // Channels-first int8 store (16 pixels per vector along m).
  TestProblem nchw = i8conv(conv_params(1, 16, 16, 32, 32, 1, 1, 0));
  nchw.e.store.kind = StoreMap::Kind::kNchw;
  nchw.e.store.out_h = nchw.e.store.out_w = 16;
  v.push_back(with(nchw, tc_schedule(64, 32, 64, 32, 32, 3), {step(K::kQuantize, 8.0f)}));
  // A channel slice at offset 3 of 101 channels: single-byte stores.
  TestProblem slice = i8conv(conv_params(1, 8, 8, 32, 32, 1, 1, 0));
  slice.e.store.kind = StoreMap::Kind::kChannelSlice;
  slice.e.store.ld = 101;
  slice.e.store.channel_offset = 3;
  v.push_back(with(slice, tc_schedule(64, 32, 64, 32, 16, 3), {step(K::kQuantize, 8.0f)}));
  return v;
}

class Int8VariantCompiles : public ::testing::TestWithParam<TestProblem> {};

TEST_P(Int8VariantCompiles, ForSm80AndSm90aOnM16N8K32) {
  const TestProblem& p = GetParam();
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_FALSE(why) << *why;
  const KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_TRUE(has(ks.source, "using Element = s8;")) << ks.source;
  EXPECT_TRUE(has(ks.source, "accumulate i32"));
  EXPECT_TRUE(has(ks.source, "MmaKernel<Problem>::run(p)"));
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Compiled out = nvrtc_compile(ks, arch);
    ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
    const std::string& ptx = out.ptx;
    EXPECT_TRUE(has(ptx, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
    EXPECT_FALSE(has(ptx, "m16n8k16"));
    EXPECT_TRUE(has(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    EXPECT_FALSE(has(ptx, ".trans"));
    EXPECT_TRUE(has(ptx, "cvt.rn.f32.s32")) << "int32 accumulators staged as fp32";
    // Quantize and the int8 store round by adding 1.5 * 2^23 (the float 0f4B400000), and an
    // int8 residual converts by it, with no quarter-rate cvt.rni or cvt.f32.s8.
    EXPECT_FALSE(has(ptx, "cvt.rni"));
    EXPECT_FALSE(has(ptx, "cvt.rn.f32.s8"));
    const bool int8_epilogue = p.e.out_dtype == DType::kI8 || p.e.residual_dtype == DType::kI8;
    EXPECT_TRUE(!int8_epilogue || has(ptx, "0f4B400000"));
    for (int vec : {p.s.a_vec, p.s.b_vec}) {
      // 16, 8 and 4 bytes by cp.async; 2 bytes through registers.
      const std::string expected = vec == 16  ? "], 16, %r"
                                   : vec == 8 ? "], 8, %r"
                                   : vec == 4 ? "], 4, %r"
                                              : "ld.global.nc.u16";
      EXPECT_TRUE(has(ptx, expected)) << "vec " << vec;
    }
  }
}

std::string variant_name(const ::testing::TestParamInfo<TestProblem>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}
INSTANTIATE_TEST_SUITE_P(Int8, Int8VariantCompiles, ::testing::ValuesIn(int8_variants()),
                         variant_name);

// onnxruntime's uint8 activations (zero point 0) as A: mma.sync .u8.s8 (sm_80, sm_90a) and the
// TMA kernel's wgmma .u8.s8 (sm_90a), a QuantizeLinear to uint8 (round, clip(0, 255)) saturated
// and rounded by the u8 store's float add, and a uint8 residual converted by the same constant.
TEST(Uint8Emit, U8ActivationsCompileOnImmaAndWgmma) {
  const std::vector<contraction::EpilogueStep> to_u8 = {step(K::kScale), step(K::kBias), step(K::kRound, 0.5f),
                                                        step(K::kClip, 0.0f, 255.0f)};
  const std::vector<contraction::EpilogueStep> residual_u8 = {
      step(K::kMul, 0.01f),        step(K::kBias),           step(K::kRound, 0.0625f), step(K::kClip, -128.0f, 127.0f),
      step(K::kMul, 0.0625f),      step(K::kScaledResidualAdd, 0.05f), step(K::kRound, 0.1f),
      step(K::kClip, 0.0f, 255.0f)};
  std::vector<TestProblem> mma = {
      with(conv_problem(conv_params(1, 28, 28, 64, 64, 3, 1, 1), DType::kI8, DType::kU8, DType::kU8),
           tc_schedule(128, 64, 64, 64, 32, 3), to_u8),
      with(conv_problem(conv_params(1, 14, 14, 64, 256, 1, 1, 0), DType::kI8, DType::kU8, DType::kU8),
           tc_schedule(64, 64, 64, 32, 32, 3), residual_u8, DType::kU8),
      with(gemm_problem(64, 1000, 2048, "NT", DType::kI8, DType::kF32, DType::kU8), tc_schedule(64, 64, 128, 32, 32, 3, 2)),
  };
  for (const TestProblem& p : mma) {
    SCOPED_TRACE(p.name());
    ASSERT_EQ(p.c.a_dtype, DType::kU8);
    ASSERT_TRUE(p.tensor_cores);
    const auto why = can_implement(p.c, p.e, p.s);
    ASSERT_FALSE(why) << *why;
    const KernelSource ks = emit(p.c, p.e, p.s);
    EXPECT_TRUE(has(ks.source, "using Element = u8q;")) << ks.source;
    if (p.e.out_dtype == DType::kU8) {
      EXPECT_TRUE(has(ks.source, "using Out = u8q;"));
      EXPECT_TRUE(has(ks.source, "static constexpr int kQuantizedOut = 1;")) << ks.source;
      EXPECT_TRUE(has(ks.source, ", 0.0f, 255.0f);  // quantize to uint8 by 1 / ")) << ks.source;
    }
    for (const char* arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(arch);
      const Compiled out = nvrtc_compile(ks, arch);
      ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
      EXPECT_TRUE(has(out.ptx, "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32"));
      EXPECT_FALSE(has(out.ptx, ".s32.s8.s8"));
      EXPECT_FALSE(has(out.ptx, "cvt.rni"));
    }
  }
  kernels::Schedule s = kernels::tma_schedule(128, 128, 4, 8, 0);
  s.block_k = 64;
  for (const TestProblem& p :
       {with(conv_problem(conv_params(8, 14, 14, 64, 256, 1, 1, 0), DType::kI8, DType::kU8, DType::kU8), s,
             residual_u8, DType::kU8),
        with(conv_problem(conv_params(8, 14, 14, 64, 64, 3, 1, 1), DType::kI8, DType::kU8, DType::kU8), s, to_u8)}) {
    SCOPED_TRACE(p.name());
    const auto why = can_implement(p.c, p.e, p.s);
    ASSERT_FALSE(why) << *why;
    const KernelSource ks = emit(p.c, p.e, p.s);
    EXPECT_TRUE(has(ks.source, "TmaWgmmaKernel<Problem>"));
    const Compiled out = nvrtc_compile(ks, "sm_90a");
    ASSERT_TRUE(out.ok) << out.log << "\n" << ks.source;
    EXPECT_TRUE(has(out.ptx, "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.s8")) << "u8 A by s8 weights";
    EXPECT_FALSE(has(out.ptx, "k32.s32.s8.s8"));
  }
}

// The dequantization scale and the bias lead the epilogue as one FFMA whose operands the
// mma.sync kernel loads once per channel; the steps after them (after_lead) read none.
TEST(Int8Emit, ScaleAndBiasLeadTheEpilogue) {
  const TestProblem p = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                             {step(K::kScale), step(K::kBias), step(K::kRelu), step(K::kQuantize, 0.5f)});
  const std::string src = emit(p.c, p.e, p.s).source;
  EXPECT_TRUE(has(src, "static constexpr bool kHasLead = true;"));
  EXPECT_TRUE(has(src, "return Lead{load_f32(p.extra[0], ch), load_f32(p.extra[1], ch)};"));
  EXPECT_TRUE(has(src, "return fmaf(v, l.scale, l.bias); }"));
  const size_t after = src.find("static float after_lead(");
  ASSERT_NE(after, std::string::npos);
  const std::string body = src.substr(after, src.find("return v;", after) - after);
  EXPECT_FALSE(has(body, "load_f32")) << body;
  // The relu before the quantize is its saturation's lower bound (one clamp fewer per output).
  EXPECT_FALSE(has(body, "// relu")) << body;
  EXPECT_TRUE(has(body, "v = saturate_s8_f(v, 2.0f, 0.0f, 127.0f);")) << body;
  // A relu with no quantize after it stays a step of its own.
  const TestProblem f16_out = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                                   {step(K::kScale), step(K::kBias), step(K::kRelu)});
  EXPECT_TRUE(has(emit(f16_out.c, f16_out.e, f16_out.s).source, "fmaxf(v, 0.0f);  // relu"));
  // Without a scale or bias the lead is the identity, not an FFMA by 1 and 0 (which would turn
  // -0 into +0).
  const TestProblem none = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                                {step(K::kQuantize, 0.5f)});
  const std::string plain = emit(none.c, none.e, none.s).source;
  EXPECT_TRUE(has(plain, "static constexpr bool kHasLead = false;"));
  EXPECT_TRUE(has(plain, "static float apply_lead(Lead l, float v) { return v; }"));
}

// ---- The plan -------------------------------------------------------------------------------
// unit-quantize's epilogue (ops::fold_unit_quantize): the lead's FFMA saturates (fma.rn.sat),
// each rounding is one FFMA with the magic number (the dequantizing mul after it one more),
// the residual's FFMA saturates for the last rounding, whose magic bits the store keeps: no
// clamps (fminf / fmaxf) and no float adds.
TEST(Int8Plan, QuantizeUnitSaturatesInTheFfmaBeforeIt) {
  const TestProblem p = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                             {step(K::kScale), step(K::kBias), step(K::kQuantizeUnit, -128.0f, 127.0f),
                              step(K::kMul, 1.0f / 128), step(K::kScaledResidualAdd, 1.0f / 256),
                              step(K::kQuantizeUnit, 0.0f, 127.0f)},
                             DType::kI8);
  const std::string src = emit(p.c, p.e, p.s).source;
  EXPECT_TRUE(has(src, "static float apply_lead(Lead l, float v) { return fma_sat(v, l.scale, l.bias); }")) << src;
  EXPECT_TRUE(has(src, "v = __fmaf_rn(unit_round_magic(v, -128.0f, 127.0f), 0.0078125f, -98304.0f);"));
  EXPECT_TRUE(has(src, "v = fma_sat(0.00390625f, residual, v);"));
  EXPECT_TRUE(has(src, "v = unit_round_magic(v, 0.0f, 127.0f);  // quantize_unit: the store takes the low byte"));
  EXPECT_TRUE(has(src, "static constexpr int kQuantizedOut = 2;"));
  EXPECT_FALSE(has(src, "sat_f(v)"));
  EXPECT_FALSE(has(src, "saturate_s8_f"));
  // No lead to saturate in (a mul first): sat_f; a float output: the magic number removed.
  const TestProblem g = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0), DType::kF16),
                             tc_schedule(128, 64, 64, 64, 32, 3),
                             {step(K::kMul, 0.01f), step(K::kBias), step(K::kQuantizeUnit, -3.0f, 90.0f)});
  const std::string gsrc = emit(g.c, g.e, g.s).source;
  EXPECT_TRUE(has(gsrc, "return v; }")) << gsrc;  // apply_lead: nothing to apply
  EXPECT_TRUE(has(gsrc, "    v = sat_f(v);\n    v = __fsub_rn(unit_round_magic(v, -3.0f, 90.0f), kRoundingMagic);"));
  EXPECT_TRUE(has(gsrc, "static constexpr int kQuantizedOut = 0;"));
}

TEST(Int8Plan, OneByteTilesInt8StoresAndInt32Partials) {
  // 128x64x64, 3 stages: (128 + 64) rows of 64 bytes per stage.
  const TestProblem p = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)),
                             tc_schedule(128, 64, 64, 64, 32, 3), {step(K::kQuantize, 0.5f)});
  KernelSource ks = emit(p.c, p.e, p.s);
  EXPECT_EQ(ks.smem_bytes, 3u * (128 + 64) * 64);
  EXPECT_EQ(ks.smem_bytes, kernels::smem_bytes(p.c, p.s));
  EXPECT_TRUE(has(ks.source, "static constexpr int kStoreVec = 8;"))
      << "8 int8 outputs per store (16 would conflict in the staging slab)";
  EXPECT_TRUE(has(ks.source, "static constexpr int kAVec = 16, kBVec = 16;"));
  EXPECT_TRUE(has(ks.source, "using Out = s8;"));
  // The last quantize only saturates: the int8 store rounds (store_s8<false>).
  EXPECT_TRUE(has(ks.source, "v = saturate_s8_f(v, 2.0f, -128.0f, 127.0f);  // quantize to int8 by 1 / 0.5f"));
  EXPECT_FALSE(has(ks.source, "quantize_s8_f"));
  EXPECT_TRUE(has(ks.source, "static constexpr int kQuantizedOut = 1;"));
  // A quantize that is not the last step rounds: the steps after it read an integer.
  const TestProblem requant = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                                   {step(K::kQuantize, 0.5f), step(K::kMul, 0.5f), step(K::kQuantize, 0.25f)});
  ks = emit(requant.c, requant.e, requant.s);
  // Its rounding's second add and the dequantizing mul are one fma by -1.5 * 2^23 * m.
  EXPECT_TRUE(has(ks.source, "v = quantize_mul_s8_f(v, 2.0f, -128.0f, 127.0f, 0.5f, -6291456.0f);"));
  EXPECT_FALSE(has(ks.source, "v *= 0.5f;"));
  EXPECT_TRUE(has(ks.source, "v = saturate_s8_f(v, 4.0f, -128.0f, 127.0f);"));
  // A multiplier of 24 significant bits is rounded to 22, so that the product with 1.5 * 2^23
  // is exact; the relative change stays within 2^-22.
  const double m24 = 0.7;  // 0.7f is 0x3F333333: 24 significant bits
  const TestProblem odd = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                               {step(K::kQuantize, 0.5f), step(K::kMul, static_cast<float>(m24)), step(K::kQuantize, 0.25f)});
  const std::string src = emit(odd.c, odd.e, odd.s).source;
  const size_t at = src.find("quantize_mul_s8_f(v, 2.0f, -128.0f, 127.0f, ");
  ASSERT_NE(at, std::string::npos) << src;
  const char* args = src.c_str() + at + std::strlen("quantize_mul_s8_f(v, 2.0f, -128.0f, 127.0f, ");
  char* end = nullptr;
  // The literals round-trip the floats (9 significant digits): read back as floats.
  const double m = static_cast<float>(std::strtod(args, &end));
  const double c = static_cast<float>(std::strtod(end + 3, nullptr));  // past "f, "
  int e = 0;
  const double f = std::frexp(m, &e);
  EXPECT_EQ(std::ldexp(f, 22), std::nearbyint(std::ldexp(f, 22))) << "22 significant bits: " << m;
  EXPECT_LE(std::abs(m / static_cast<float>(m24) - 1.0), std::ldexp(1.0, -22));
  EXPECT_NE(m, static_cast<double>(static_cast<float>(m24))) << "the multiplier had 24 bits";
  EXPECT_EQ(c, -12582912.0 * m);
  // Relu and integral clips after a quantize (ops::fold_requantize's form) narrow its
  // saturation while their intervals nest; the value stays quantized. A clip that does not
  // nest (here [-3, -1] after relu's [0, 127]) is a step of its own, and then the store
  // saturates again.
  const TestProblem folded = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                                  {step(K::kQuantize, 0.5f), step(K::kRelu), step(K::kClip, -3.0f, 90.0f)});
  ks = emit(folded.c, folded.e, folded.s);
  EXPECT_TRUE(has(ks.source, "v = saturate_s8_f(v, 2.0f, 0.0f, 90.0f);  // quantize to int8 by 1 / 0.5f"));
  EXPECT_FALSE(has(ks.source, "fmaxf(v, 0.0f)")) << "the relu went into the quantize";
  EXPECT_TRUE(has(ks.source, "static constexpr int kQuantizedOut = 1;"));
  const TestProblem apart = with(i8conv(conv_params(1, 28, 28, 64, 128, 1, 1, 0)), tc_schedule(128, 64, 64, 64, 32, 3),
                                 {step(K::kQuantize, 0.5f), step(K::kRelu), step(K::kClip, -3.0f, -1.0f)});
  ks = emit(apart.c, apart.e, apart.s);
  EXPECT_TRUE(has(ks.source, "v = quantize_s8_f(v, 2.0f, 0.0f, 127.0f);"));
  EXPECT_TRUE(has(ks.source, "v = clip_f(v, -3.0f, -1.0f);"));
  EXPECT_TRUE(has(ks.source, "static constexpr int kQuantizedOut = 0;"));
  // An f16 output reading an int8 residual.
  const TestProblem r =
      with(i8conv(conv_params(1, 14, 14, 64, 64, 1, 1, 0), DType::kF16),
           tc_schedule(64, 64, 64, 32, 32, 3), {step(K::kScaledResidualAdd, 0.25f)}, DType::kI8);
  ks = emit(r.c, r.e, r.s);
  EXPECT_TRUE(has(ks.source, "using Out = f16;"));
  EXPECT_TRUE(has(ks.source, "using Residual = s8;"));
  EXPECT_TRUE(has(ks.source, "static constexpr int kResidual = 2;"));
  EXPECT_TRUE(has(ks.source, "v += 0.25f * residual;"));
  // Split-K 4 over 8 k-tiles of 128: [tiles][splits][64 x 64] int32 partials and the counters.
  const TestProblem sk =
      with(i8gemm(128, 128, 1024, DType::kF32), tc_schedule(64, 64, 128, 32, 32, 3, 4));
  ks = emit(sk.c, sk.e, sk.s);
  EXPECT_EQ(ks.grid[0], 4u * 4);
  EXPECT_EQ(ks.workspace_bytes, 4u * 4 * 64 * 64 * 4 + 4 * 4);
  // A channel slice at an odd offset stores single bytes.
  TestProblem slice =
      with(i8conv(conv_params(1, 8, 8, 32, 32, 1, 1, 0)), tc_schedule(64, 32, 64, 32, 16, 3));
  slice.e.store.kind = StoreMap::Kind::kChannelSlice;
  slice.e.store.ld = 101;
  slice.e.store.channel_offset = 3;
  EXPECT_TRUE(has(emit(slice.c, slice.e, slice.s).source, "static constexpr int kStoreVec = 1;"));
}

// ---- Refusals -------------------------------------------------------------------------------
void expect_rejected(const TestProblem& p, const std::string& reason) {
  const auto why = can_implement(p.c, p.e, p.s);
  ASSERT_TRUE(why) << p.name() << " was accepted";
  EXPECT_TRUE(has(*why, reason)) << "got: " << *why << "\nwanted: " << reason;
}

TEST(Int8CanImplement, RefusesWhatTheInt8PathDoesNotTakeWithReasons) {
  const TestProblem conv = i8conv(conv_params(1, 28, 28, 64, 64, 3, 1, 1));
  // MN-major operands: ldmatrix .trans moves 16-bit elements.
  expect_rejected(
      with(i8gemm(256, 256, 256, DType::kI8, "NN"), tc_schedule(64, 64, 64, 32, 32, 3)),
      "B is N-major: int8 operands must be K-major (ldmatrix .trans moves 16-bit elements only)");
  expect_rejected(with(i8gemm(256, 256, 256, DType::kI8, "TN"), tc_schedule(64, 64, 64, 32, 32, 3)),
                  "A is M-major: int8 operands must be K-major");
  // wgmma, halo and SIMT kernels take no int8.
  expect_rejected(with(conv, wgmma_schedule(128, 128, 64, 64, 128, 4)),
                  "int8 on wgmma runs in the TMA kernel only");
  TestProblem halo = conv;
  halo.s = kernels::halo_schedule(conv.c, 8, 16, 64, 32, 0);
  expect_rejected(halo, "the halo kernel needs f16 or bf16 weights, not i8");
  expect_rejected(with(conv, simt_schedule(64, 64, 16, 32, 16, 4, 4)),
                  "the SIMT kernel reads f16, bf16 or f32 operands, not i8");
  // k-tiles of two k32 steps; vectors of 2 to 16 bytes.
  expect_rejected(with(conv, tc_schedule(128, 128, 32, 64, 64, 3)),
                  "block_k=32: int8 mma.sync needs a multiple of 64 (two k32 steps per k-tile)");
  TestProblem narrow = with(conv, tc_schedule(64, 64, 64, 32, 32, 3));
  narrow.s.a_vec = 1;
  expect_rejected(narrow, "a_vec=1: int8 loads move at least 2 elements");
  TestProblem wide = with(conv, tc_schedule(64, 64, 64, 32, 32, 3));
  wide.s.b_vec = 32;
  expect_rejected(wide, "b_vec=32 is not 1, 2, 4, 8 or 16");
  // Rows of 192 bytes do not swizzle.
  expect_rejected(with(conv, tc_schedule(96, 64, 192, 32, 32, 3)),
                  "shared-memory rows of 192 elements cannot be swizzled");
  // Packed groups take 16-bit operands; the dense kernel runs the groups as a batch.
  const TestProblem grouped = i8conv(conv_params(1, 14, 14, 64, 64, 3, 1, 1, 1, 4));
  TestProblem packed = with(grouped, tc_schedule(64, 16, 64, 32, 16, 3));
  packed.s.groups_per_tile = 1;
  expect_rejected(packed, "packed groups run f16 or bf16 operands, not i8");
  EXPECT_FALSE(
      can_implement(grouped.c, grouped.e, with(grouped, tc_schedule(64, 16, 64, 32, 16, 3)).s));
  std::string why;
  EXPECT_FALSE(kernels::packed_groups_schedule(grouped.c, device::known_device("sm_90a"), &why));
  EXPECT_TRUE(has(why, "int8 operands")) << why;
  // Operands of two dtypes, and an output the epilogue cannot store.
  TestProblem mixed;
  finish(mixed,
         contraction::gemm_maps(64, 64, 64, *contraction::parse_gemm_layout("NT"),
                                {DType::kF16, DType::kI8, DType::kF32}),
         DType::kF16);
  mixed.s = tc_schedule(64, 64, 64, 32, 32, 3);
  expect_rejected(mixed, "Tensor Cores need f16 or bf16 operands of one type, or int8 ones (A f16, B i8)");
  TestProblem i32_out = with(conv, tc_schedule(64, 64, 64, 32, 32, 3));
  i32_out.e.out_dtype = DType::kI32;
  expect_rejected(i32_out, "output dtype i32 (f16, bf16, f32, i8 or u8 expected)");
  TestProblem i32_res = with(conv, tc_schedule(64, 64, 64, 32, 32, 3),
                             {step(K::kScaledResidualAdd, 1.0f)}, DType::kI32);
  expect_rejected(i32_res, "residual dtype i32 (f16, bf16, f32, i8 or u8 expected)");
}

// ---- Schedules ------------------------------------------------------------------------------
const device::DeviceInfo kA100 = kernels::testing::device_of(108, 163 * 1024, 8, 0);
const device::DeviceInfo kH100 = kernels::testing::device_of(132, 227 * 1024, 9, 0);

TEST(Int8Schedule, DefaultsAreMmaSyncOrTmaWithDoubledBlockKAndNamesRoundTrip) {
  const std::vector<TestProblem> problems = {
      i8conv(conv_params(32, 56, 56, 64, 64, 3, 1, 1)),   // ResNet-50 stage 1, batch 32
      i8conv(conv_params(32, 56, 56, 256, 64, 1, 1, 0)),  // its 1x1 reduce
      i8conv(conv_params(1, 14, 14, 256, 256, 3, 1, 1)),  // batch 1: few tiles, split-K
      i8conv(conv_params(8, 28, 28, 128, 128, 3, 2, 1)),  // strided
      i8gemm(32, 1000, 2048, DType::kF32),                // a classifier
      i8gemm(4096, 4096, 4096),
  };
  for (const device::DeviceInfo& device : {kA100, kH100}) {
    for (const TestProblem& p : problems) {
      SCOPED_TRACE(p.what + " on sm_" + std::to_string(device.cc_major * 10 + device.cc_minor));
      const kernels::Schedule s = kernels::default_schedule(p.c, device);
      if (s.mainloop == kernels::Mainloop::kTma) {  // Hopper: wgmma k32 over 128-byte k-tiles,
        EXPECT_EQ(device.cc_major, 9) << s.name();  // or 64-byte ones for 64 channels per tap
        EXPECT_TRUE(s.block_k == 128 || s.block_k == 64) << s.name();
      } else {
        EXPECT_EQ(s.instruction, kernels::Instruction::kMmaSync) << s.name();
        EXPECT_EQ(s.block_k % 64, 0) << s.name();
        EXPECT_EQ(s.a_vec, std::min(16, p.c.a_vec));
        EXPECT_EQ(s.b_vec, std::min(16, p.c.b_vec));
      }
      const auto why = can_implement(p.c, p.e, s);
      EXPECT_FALSE(why) << s.name() << ": " << *why;
      EXPECT_EQ(kernels::parse_schedule(s.name(), p.c), s) << s.name();
    }
  }
  // The big GEMM takes a large tile with k-tiles of 64 bytes or more, 16-byte vectors.
  const kernels::Schedule big = kernels::default_schedule(problems.back().c, kH100);
  EXPECT_GE(big.block_m * big.block_n, 128 * 128) << big.name();
  if (big.mainloop != kernels::Mainloop::kTma) {
    EXPECT_TRUE(has(big.name(), "_v16x16")) << big.name();
  }
  const auto parsed =
      kernels::parse_schedule("tc_128x128x64_s3_w64x64_sk1_r8_v16x16", problems.back().c);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->block_k, 64);
  EXPECT_EQ(parsed->a_vec, 16);
  EXPECT_EQ(parsed->name(), "tc_128x128x64_s3_w64x64_sk1_r8_v16x16");
}

TEST(Int8Schedule, TheSpaceIsMmaSyncOrTmaAndImplementable) {
  const TestProblem p = i8conv(conv_params(2, 28, 28, 64, 128, 3, 2, 1));
  const std::vector<kernels::Schedule> space = kernels::enumerate_schedules(p.c, kH100);
  ASSERT_GT(space.size(), 100u);
  int rejected = 0, tma = 0;
  for (const kernels::Schedule& s : space) {
    const bool is_tma = s.mainloop == kernels::Mainloop::kTma;
    tma += is_tma;
    EXPECT_TRUE(s.instruction == kernels::Instruction::kMmaSync || is_tma) << s.name();
    EXPECT_EQ(s.block_k % 64, 0);
    const auto why = can_implement(p.c, p.e, s);
    if (why && ++rejected <= 5) ADD_FAILURE() << s.name() << ": " << *why;
  }
  EXPECT_EQ(rejected, 0) << "of " << space.size();
  EXPECT_GT(tma, 10) << "the TMA kernel's int8 schedules on Hopper";
}

TEST(Int8Estimate, RanksOnTheInt8TensorCoreRate) {
  for (const device::DeviceInfo& device : {kA100, kH100})
    EXPECT_EQ(kernels::arch_facts(device).mma_s8_ops_per_clk,
              2 * kernels::arch_facts(device).mma_flops_per_clk);
  EXPECT_EQ(kernels::arch_facts(kH100).wgmma_s8_ops_per_clk,
            2 * kernels::arch_facts(kH100).wgmma_flops_per_clk);
  // A math-bound GEMM: the int8 kernel moves the bytes of the f16 one per k-tile and does
  // twice the work per instruction, so it is estimated faster.
  const TestProblem f16 = gemm_problem(4096, 4096, 4096, "NT");
  const TestProblem i8 = i8gemm(4096, 4096, 4096);
  const kernels::Schedule s16 = tc_schedule(128, 128, 32, 64, 64, 3);
  const kernels::Schedule s8 = with(i8, tc_schedule(128, 128, 64, 64, 64, 3)).s;
  EXPECT_LT(kernels::estimate(i8.c, s8, kH100).cycles,
            0.75 * kernels::estimate(f16.c, s16, kH100).cycles);
}

// An int8 contraction's C is f32 (the int32 sums as float); its epilogue stores i8 codes. The
// estimate charges the store at the dtype the caller says it stores (the predictor passes the
// epilogue's out_dtype), and at C's dtype when told nothing (the defaults' ranking). ResNet-50's
// int8 1x1 conv 64 -> 256 at 56x56, batch 32, on the H200's schedule: the output is 4x the input,
// so four bytes per output element held it at 58 us where 21 us was measured.
TEST(Int8Estimate, ChargesTheStoreAtTheDtypeItStores) {
  const TestProblem p = with(i8conv(conv_params(32, 56, 56, 64, 256, 1, 1, 0)),
                             tc_schedule(128, 128, 64, 64, 64, 4));
  ASSERT_EQ(p.c.maps.c.dtype, DType::kF32);
  const ScheduleEstimate c_dtype = kernels::estimate(p.c, p.s, kH100);
  const ScheduleEstimate f32 = kernels::estimate(p.c, p.s, kH100, 0, 4);
  const ScheduleEstimate i8 = kernels::estimate(p.c, p.s, kH100, 0, 1);
  EXPECT_DOUBLE_EQ(f32.cycles, c_dtype.cycles);
  EXPECT_LT(i8.microseconds, 0.5 * f32.microseconds);
  // The unique DRAM traffic: the input (32 x 56 x 56 x 64 bytes), the weights and the i8 output.
  const double bytes = 32.0 * 56 * 56 * (64 + 256) + 64 * 256;
  const kernels::ArchFacts& f = kernels::arch_facts(kH100);
  EXPECT_NEAR(i8.dram_cycles, bytes / (f.dram_bytes_per_clk * kH100.sm_count), 1.0);
  // A residual read at one byte per output costs less than a 4-byte store.
  EXPECT_LT(kernels::estimate(p.c, p.s, kH100, 1, 1).cycles, f32.cycles);
  // A 16-bit contraction stores C's dtype: the same either way.
  const TestProblem h = conv_problem(conv_params(32, 56, 56, 64, 256, 1, 1, 0));
  const kernels::Schedule s16 = tc_schedule(128, 128, 32, 64, 64, 4);
  EXPECT_DOUBLE_EQ(kernels::estimate(h.c, s16, kH100, 0, 2).cycles,
                   kernels::estimate(h.c, s16, kH100).cycles);
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
