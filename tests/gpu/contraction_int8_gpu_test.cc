// int8 contractions on a GPU (mma.sync m16n8k32, int32 accumulators): NHWC convolutions (1x1,
// 3x3 pad 1, strided, K not a multiple of the k-tile, M and N partial tiles, 2-byte loads) and
// K-major GEMMs with split-K, on random int8 operands (never zero), against the CPU reference's
// exact integer sums:
//  - no epilogue steps: the int32 sum converted to the output (f32 exactly, f16 rounded once),
//    bit-exact;
//  - dequantize, scale, bias, activations into a float output: within the output's rounding;
//  - requantized int8 outputs (kQuantize, scaled int8 residuals): within one int8 step, almost
//    all exact.
// u8 A operands (onnxruntime's default QUInt8 activations, zero point 0: mma.sync .u8.s8 and
// wgmma .u8.s8), values 1..255, through the same recipes and the uint8 ones: a QuantizeLinear to
// uint8 as round, clip(0, 255) and a u8 store, a uint8 residual.
// Every output is poisoned before each of two launches with two different bytes: the launches
// must agree bit for bit, and positions outside the store map must keep the poison. Skipped with
// the reason where no CUDA device is present.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "device/cuda_api.h"
#include "gpu/gpu_test_util.h"
#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/contraction_reference.h"
#include "kernels/default_schedule.h"

namespace tessel::kernels::cuda::testing {
namespace {

namespace rt = device;
using contraction::EpilogueOpKind;
using contraction::EpilogueStep;
using contraction::StoreMap;
using ::tessel::testing::build_all;
using ::tessel::testing::upload;
using K = EpilogueOpKind;

class ContractionInt8GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    info_ = rt::device_info();
    rt::set_cache_dir("");
  }
  rt::DeviceInfo info_;
};

// Operand magnitudes: 1..127 (a u8 A: 1..255), except where the raw sums are stored as f16,
// which must keep them in its range (1..15: sums of a few thousand, rounded to f16's 11 bits).
int operand_max_abs(const TestProblem& p) {
  return p.e.steps.empty() && p.e.out_dtype == DType::kF16 ? 15 : 127;
}
bool u8_a(const TestProblem& p) { return p.c.a_dtype == DType::kU8; }
int a_max(const TestProblem& p) { return u8_a(p) ? 2 * operand_max_abs(p) + 1 : operand_max_abs(p); }

// The standard deviation of one int32 sum of K products of random_int8 (random_uint8) values
// (uniform magnitudes 1..M: E[x^2] = (M + 1)(2M + 1) / 6; the weights' signs make the products'
// mean 0): what the epilogues' scales are chosen against, so that dequantized values are O(1)
// and quantized ones span int8.
double sum_std(const TestProblem& p) {
  auto mean_square = [](double m) { return (m + 1) * (2 * m + 1) / 6; };
  return std::sqrt(static_cast<double>(p.c.k) * mean_square(a_max(p)) * mean_square(operand_max_abs(p)));
}

// Epilogue recipes of an int8 layer, each with its output dtype.
enum class Recipe {
  kExactF32,        // the int32 sums as f32: bit-exact
  kExactF16,        // the int32 sums rounded to f16 once: bit-exact
  kDequantF16,      // mul (dequantize), scale, bias, relu -> f16
  kDequantF32,      // mul, bias, clip(0, 6) -> f32
  kDequantBf16,     // mul, scale, bias, silu -> bf16
  kRequant,         // scale, bias, relu, quantize -> i8
  kResidualI8,      // mul, bias, scaled int8 residual, relu, quantize -> i8
  kResidualF16Out,  // mul, bias, scaled int8 residual -> f16 (residual_dtype i8)
  // A float residual in its own dtype (choose-precision's f16 beside an fp16 conv, as the
  // downsample branch tessel quantize leaves float):
  kResidualF16,         // mul, bias, f16 residual, relu -> f16
  kResidualF16Requant,  // mul, bias, f16 residual, relu, quantize -> i8
  // The forms fuse leaves after ops::fold_requantize, whose clamps after a quantize the
  // generated code merges into its saturation (emit.cc):
  kRequantRelu,       // scale, bias, quantize, relu -> i8
  kResidualRequant,   // mul, bias, quantize, mul, scaled int8 residual, quantize, clip -> i8
  // onnxruntime's uint8 activations (fuse's QuantizeLinear to uint8, zero point 0):
  kRequantU8,    // scale, bias, round, clip(0, 255) -> u8
  // ResNet's conv3: a fake quantization of zero point 128, the block's uint8 input as the
  // scaled residual, then the QuantizeLinear to uint8 (the dropped ReLU) -> u8
  kResidualU8,   // mul, bias, round, clip(-128, 127), mul, scaled u8 residual, round, clip(0, 255)
  // onnxruntime's QDQ EfficientNet: the expansion conv's int8 output, dequantized, through a
  // SiLU whose gate is quantized to int8 and back (fuse's silu_qgate), quantized again -> i8
  kSiluQGate,    // mul, bias, quantize, mul, silu_qgate(1/127, 1/127), quantize
  // unit-quantize's forms (ops::fold_unit_quantize): the lead's FFMA saturates to [0, 1]
  // (fma.rn.sat), one FFMA rounds with the magic number, the store takes its low byte:
  kRequantUnit,     // scale, bias, quantize_unit(-128, 127) -> i8
  kResidualUnit,    // scale, bias, quantize_unit(-128, 127), mul, scaled int8 residual (saturated),
                    // quantize_unit(0, 127) -> i8: ResNet's residual epilogue
  kRequantUnitU8,   // scale, bias, quantize_unit(0, 255) -> u8
  kUnitDequantF16,  // scale, bias, quantize_unit(-128, 127), mul, relu -> f16
  kUnitGeneric,     // mul, bias, quantize_unit(-3, 90) -> i8: no lead (sat_f), an odd lower bound
};
constexpr Recipe kRecipes[] = {Recipe::kExactF32,   Recipe::kExactF16,      Recipe::kDequantF16,
                               Recipe::kDequantF32, Recipe::kDequantBf16,   Recipe::kRequant,
                               Recipe::kResidualI8, Recipe::kResidualF16Out, Recipe::kRequantRelu,
                               Recipe::kResidualRequant, Recipe::kResidualF16,
                               Recipe::kResidualF16Requant, Recipe::kRequantU8, Recipe::kResidualU8,
                               Recipe::kSiluQGate, Recipe::kRequantUnit, Recipe::kResidualUnit,
                               Recipe::kRequantUnitU8, Recipe::kUnitDequantF16, Recipe::kUnitGeneric};

DType out_dtype(Recipe r) {
  switch (r) {
    case Recipe::kExactF32:
    case Recipe::kDequantF32:
      return DType::kF32;
    case Recipe::kExactF16:
    case Recipe::kDequantF16:
    case Recipe::kResidualF16Out:
    case Recipe::kResidualF16:
    case Recipe::kUnitDequantF16:
      return DType::kF16;
    case Recipe::kDequantBf16:
      return DType::kBF16;
    case Recipe::kRequant:
    case Recipe::kResidualI8:
    case Recipe::kRequantRelu:
    case Recipe::kResidualRequant:
    case Recipe::kResidualF16Requant:
    case Recipe::kSiluQGate:
    case Recipe::kRequantUnit:
    case Recipe::kResidualUnit:
    case Recipe::kUnitGeneric:
      return DType::kI8;
    case Recipe::kRequantU8:
    case Recipe::kResidualU8:
    case Recipe::kRequantUnitU8:
      return DType::kU8;
  }
  return DType::kF32;
}

// Sets the epilogue (and output dtype) of recipe `r` on an int8 problem.
void apply(Recipe r, TestProblem& p) {
  p.e.out_dtype = out_dtype(r);
  p.e.residual_dtype.reset();
  p.e.steps = {step(K::kMul, 1.0f)};  // anything but none: sum_std's magnitudes
  const float sigma = static_cast<float>(sum_std(p));
  const float dequant = 2.0f / sigma;  // dequantized sums ~ N(0, 2)
  switch (r) {
    case Recipe::kExactF32:
    case Recipe::kExactF16:
      p.e.steps = {};
      break;
    case Recipe::kDequantF16:
      p.e.steps = {step(K::kMul, dequant), step(K::kScale), step(K::kBias), step(K::kRelu)};
      break;
    case Recipe::kDequantF32:
      p.e.steps = {step(K::kMul, dequant), step(K::kBias), step(K::kClip, 0.0f, 6.0f)};
      break;
    case Recipe::kDequantBf16:
      p.e.steps = {step(K::kMul, dequant), step(K::kScale), step(K::kBias), step(K::kSilu)};
      break;
    case Recipe::kRequant:
      // Scaled sums of deviation ~sigma, quantized at sigma / 40: most in range, some saturate.
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kRelu),
                   step(K::kQuantize, sigma / 40.0f)};
      break;
    case Recipe::kResidualI8:
      // N(0, 2) + bias + residual / 64 (up to 2), quantized at 1/32: saturates at +-4.
      p.e.steps = {step(K::kMul, dequant), step(K::kBias), step(K::kScaledResidualAdd, 1.0f / 64),
                   step(K::kRelu), step(K::kQuantize, 1.0f / 32)};
      break;
    case Recipe::kResidualF16Out:
      p.e.steps = {step(K::kMul, dequant), step(K::kBias), step(K::kScaledResidualAdd, 0.03125f)};
      p.e.residual_dtype = DType::kI8;
      break;
    case Recipe::kResidualF16:
      p.e.steps = {step(K::kMul, dequant), step(K::kBias), step(K::kResidualAdd), step(K::kRelu)};
      p.e.residual_dtype = DType::kF16;
      break;
    case Recipe::kResidualF16Requant:
      // N(0, 2) + bias + residual (up to 1), quantized at 1/32: saturates at +4.
      p.e.steps = {step(K::kMul, dequant), step(K::kBias), step(K::kResidualAdd), step(K::kRelu),
                   step(K::kQuantize, 1.0f / 32)};
      p.e.residual_dtype = DType::kF16;
      break;
    case Recipe::kRequantRelu:
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kQuantize, sigma / 40.0f), step(K::kRelu)};
      break;
    case Recipe::kResidualRequant:
      // N(0, 2) + bias on a grid of 1/16 (saturating at +-8), + residual / 64, on a grid of
      // 1/32 clamped to [-3, 90]: both bounds reached.
      p.e.steps = {step(K::kMul, dequant),        step(K::kBias),
                   step(K::kQuantize, 1.0f / 16), step(K::kMul, 1.0f / 16),
                   step(K::kScaledResidualAdd, 1.0f / 64), step(K::kQuantize, 1.0f / 32),
                   step(K::kClip, -3.0f, 90.0f)};
      break;
    case Recipe::kRequantU8:
      // Scaled sums of deviation ~sigma on a grid of sigma / 60: the negative half clamps to 0,
      // some saturate at 255.
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kRound, sigma / 60.0f), step(K::kClip, 0.0f, 255.0f)};
      break;
    case Recipe::kResidualU8:
      // N(0, 2) + bias on a grid of 1/16 (zero point 128: [-8, 7.94]), + residual / 64 (up to
      // 4), on a grid of 1/32 clamped to [0, 255]: both bounds reached.
      p.e.steps = {step(K::kMul, dequant),
                   step(K::kBias),
                   step(K::kRound, 1.0f / 16),
                   step(K::kClip, -128.0f, 127.0f),
                   step(K::kMul, 1.0f / 16),
                   step(K::kScaledResidualAdd, 1.0f / 64),
                   step(K::kRound, 1.0f / 32),
                   step(K::kClip, 0.0f, 255.0f)};
      p.e.residual_dtype = DType::kU8;
      break;
    case Recipe::kSiluQGate:
      // N(0, 2) + bias on a grid of 1/32 (saturating at +-4), through the quantized SiLU (the
      // gate on a grid of 1/127: a gate rounded the other way moves the value by at most 4/127,
      // less than one output step), on a grid of 1/24.
      p.e.steps = {step(K::kMul, dequant),
                   step(K::kBias),
                   step(K::kQuantize, 1.0f / 32),
                   step(K::kMul, 1.0f / 32),
                   step(K::kSiluQuantizedGate, 1.0f / 127, 1.0f / 127),
                   step(K::kQuantize, 1.0f / 24)};
      break;
    // The lead's scales and biases put its values around [0, 1] (lead_ranges).
    case Recipe::kRequantUnit:
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kQuantizeUnit, -128.0f, 127.0f)};
      break;
    case Recipe::kResidualUnit:
      // q / 128 in [-1, 1] plus residual / 256 in [-1/2, 1/2]: both ends of [0, 1] saturate.
      p.e.steps = {step(K::kScale),
                   step(K::kBias),
                   step(K::kQuantizeUnit, -128.0f, 127.0f),
                   step(K::kMul, 1.0f / 128),
                   step(K::kScaledResidualAdd, 1.0f / 256),
                   step(K::kQuantizeUnit, 0.0f, 127.0f)};
      break;
    case Recipe::kRequantUnitU8:
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kQuantizeUnit, 0.0f, 255.0f)};
      break;
    case Recipe::kUnitDequantF16:
      p.e.steps = {step(K::kScale), step(K::kBias), step(K::kQuantizeUnit, -128.0f, 127.0f),
                   step(K::kMul, 1.0f / 64), step(K::kRelu)};
      break;
    case Recipe::kUnitGeneric:
      p.e.steps = {step(K::kMul, 1.0f / (4.0f * sigma)), step(K::kBias), step(K::kQuantizeUnit, -3.0f, 90.0f)};
      break;
  }
}

// The per-channel scale's and bias's ranges: [0.5, 1.5] and [-1, 1]; where a quantize_unit
// reads the value (unit-quantize's forms), scales near 1 / (4 sigma) and biases near 1/2, so
// that the values spread over [0, 1] and past both of its ends.
struct LeadRanges {
  float scale_lo, scale_hi, bias_lo, bias_hi;
};
LeadRanges lead_ranges(const TestProblem& p) {
  const bool unit = std::any_of(p.e.steps.begin(), p.e.steps.end(),
                                [](const EpilogueStep& s) { return s.kind == K::kQuantizeUnit; });
  if (!unit) return {0.5f, 1.5f, -1.0f, 1.0f};
  const float f = static_cast<float>(1.0 / (4.0 * sum_std(p)));
  return {0.5f * f, 1.5f * f, 0.3f, 0.7f};
}

bool has_residual(const TestProblem& p) {
  return std::any_of(p.e.steps.begin(), p.e.steps.end(), [](const EpilogueStep& s) {
    return s.kind == K::kResidualAdd || s.kind == K::kScaledResidualAdd;
  });
}
bool byte_output(const TestProblem& p) { return p.e.out_dtype == DType::kI8 || p.e.out_dtype == DType::kU8; }
bool exact(const TestProblem& p) { return p.e.steps.empty() && !byte_output(p); }

// The device value of reference value `v` stored as `t` where the value path is exact (one
// rounding of an exactly representable float sum); else `v`.
double stored(double v, DType t) {
  switch (t) {
    case DType::kF16:
      return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::kBF16:
      return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    case DType::kF32:
      return static_cast<float>(v);
    case DType::kI8:
      return std::min(std::max(std::nearbyint(v), -128.0), 127.0);
    case DType::kU8:
      return std::min(std::max(std::nearbyint(v), 0.0), 255.0);
    default:
      return v;
  }
}

struct Int8Check {
  int64_t checked = 0, mismatched = 0, off_by_one = 0, poison_lost = 0, launches_differ = 0;
  double worst = 0;  // largest error over its tolerance
};

// Runs `p` on random int8 operands twice and compares with the CPU reference.
Int8Check run_int8(const TestProblem& p, const ContractionKernel& k, std::mt19937& rng) {
  const auto& c = p.c;
  HostOperands h;
  std::vector<char> a_bytes, b_bytes, scale_bytes, bias_bytes, res_bytes;
  h.a = u8_a(p) ? random_uint8(rng, numel(c.maps.a.shape), a_bytes, a_max(p))
                : random_int8(rng, numel(c.maps.a.shape), a_bytes, operand_max_abs(p));
  h.b = random_int8(rng, numel(c.maps.b.shape), b_bytes, operand_max_abs(p));
  const int64_t channels = c.maps.c.shape.back();
  const LeadRanges lr = lead_ranges(p);
  h.scale = random_tensor(rng, channels, DType::kF32, scale_bytes, lr.scale_lo, lr.scale_hi);
  h.bias = random_tensor(rng, channels, DType::kF32, bias_bytes, lr.bias_lo, lr.bias_hi);
  const int64_t out_n = output_elements(p);
  const DType res_dtype = p.e.residual_dtype.value_or(p.e.out_dtype);
  if (has_residual(p)) h.residual = random_tensor(rng, out_n, res_dtype, res_bytes);
  rt::DeviceBuffer da = upload(a_bytes), db = upload(b_bytes), dscale = upload(scale_bytes),
                   dbias = upload(bias_bytes);
  rt::DeviceBuffer dres = upload(has_residual(p) ? res_bytes : std::vector<char>(16));
  const size_t elem = dtype_size(p.e.out_dtype);
  const size_t out_bytes = out_n * elem;
  rt::DeviceBuffer dout(std::max<size_t>(out_bytes, 16));
  rt::DeviceBuffer ws(std::max<size_t>(k.source().workspace_bytes, 16));
  ws.fill_bytes(0);

  KernelArgs args;
  args.a = da.ptr();
  args.b = db.ptr();
  args.c = dout.ptr();
  args.extra = {dscale.ptr(), dbias.ptr(), dres.ptr()};
  args.workspace = ws.ptr();
  const std::vector<double> want = reference_output(p, h);

  // Two launches, poisoned with different bytes (0xff is NaN in the float types, -1 in int8):
  // a position the kernel skips keeps the poison and the launches disagree there.
  const uint8_t poison[2] = {0xff, 0x5a};
  std::vector<char> got[2];
  for (int launch = 0; launch < 2; ++launch) {
    dout.fill_bytes(poison[launch]);
    k.launch(args, nullptr);
    rt::synchronize();
    got[launch].resize(out_bytes);
    dout.download(got[launch].data(), out_bytes);
  }
  Int8Check r;
  const std::vector<double> values = to_doubles(got[0], p.e.out_dtype);
  double rms = 0;
  int64_t defined = 0;
  for (double w : want)
    if (!std::isnan(w)) rms += w * w, ++defined;
  rms = std::sqrt(rms / std::max<int64_t>(defined, 1));
  // Float outputs of float epilogues: the output's rounding of the value (2^-8 for bf16, 2^-11
  // for f16, a few f32 ulps) plus the epilogue's own fp32 rounding near cancellations.
  const DType t = p.e.out_dtype;
  const double rel = t == DType::kBF16 ? 1.0 / 128 : t == DType::kF16 ? 1.0 / 1024 : 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {  // outside the store map: the poison stays
      for (size_t b = 0; b < elem; ++b)
        r.poison_lost += static_cast<uint8_t>(got[1][i * elem + b]) != poison[1];
      continue;
    }
    ++r.checked;
    if (std::memcmp(&got[0][i * elem], &got[1][i * elem], elem) != 0) ++r.launches_differ;
    const double v = values[i];
    if (byte_output(p)) {
      const double diff = std::abs(v - stored(want[i], t));
      r.off_by_one += diff == 1;
      r.mismatched += diff > 1;
      r.worst = std::max(r.worst, diff);
    } else if (exact(p)) {
      const bool same = v == stored(want[i], t);
      r.mismatched += !same;
      r.worst = std::max(r.worst, same ? 0.0 : 2.0);
    } else {
      const double tol = rel * std::abs(want[i]) + 1e-5 * rms + 1e-30;
      const double err = std::isnan(v) ? INFINITY : std::abs(v - want[i]) / tol;
      r.mismatched += err > 1;
      r.worst = std::max(r.worst, err);
    }
  }
  return r;
}

void expect_matches(const TestProblem& p, const Int8Check& r) {
  SCOPED_TRACE(p.name());
  EXPECT_GT(r.checked, 0);
  EXPECT_EQ(r.launches_differ, 0)
      << "the two launches disagree (unwritten outputs keep the poison)";
  EXPECT_EQ(r.poison_lost, 0) << "writes outside the store map's positions";
  EXPECT_EQ(r.mismatched, 0) << "of " << r.checked << " outputs; worst error / tolerance "
                             << r.worst << (exact(p) ? " (bit-exact expected)" : "");
  // Requantized outputs: a value within float rounding of a .5 boundary may round either way.
  EXPECT_LE(r.off_by_one * 1000, r.checked) << "outputs one int8 step off";
}

// ---- The problems -----------------------------------------------------------------------------
TestProblem i8conv(const contraction::Conv2dParams& cp) {
  return conv_problem(cp, DType::kI8, DType::kI8);
}
TestProblem i8gemm(int64_t m, int64_t n, int64_t k) {
  return gemm_problem(m, n, k, "NT", DType::kI8, DType::kI8);
}
// A u8 A (onnxruntime's uint8 activations) by i8 weights.
TestProblem u8conv(const contraction::Conv2dParams& cp) {
  return conv_problem(cp, DType::kI8, DType::kI8, DType::kU8);
}
TestProblem u8gemm(int64_t m, int64_t n, int64_t k) {
  return gemm_problem(m, n, k, "NT", DType::kI8, DType::kI8, DType::kU8);
}

// An int8 schedule with the widest vectors the operands allow.
kernels::Schedule i8s(const TestProblem& p, int bm, int bn, int bk, int wm, int wn, int stages,
                      int split = 1) {
  kernels::Schedule s = tc_schedule(bm, bn, bk, wm, wn, stages, split);
  s.a_vec = std::min(16, p.c.a_vec);
  s.b_vec = std::min(16, p.c.b_vec);
  return s;
}

TestProblem make(TestProblem p, Recipe r, int bm, int bn, int bk, int wm, int wn, int stages,
                 int split = 1) {
  apply(r, p);
  p.s = i8s(p, bm, bn, bk, wm, wn, stages, split);
  return p;
}

// The TMA kernel (wgmma k32, int32 accumulators; sm_90a): 128-element k-tiles, or 64-element
// ones (`block_k` 64: one 64-byte row, the 64-byte swizzle).
// `cooperative`: both consumer warpgroups on each tile.
TestProblem tma(TestProblem p, Recipe r, int bm, int bn, int stages, int ctas, int block_k = 128,
                bool cooperative = false) {
  apply(r, p);
  p.s = kernels::tma_schedule(bm, bn, stages, 8, ctas, cooperative);
  p.s.block_k = block_k;
  return p;
}

std::vector<TestProblem> fixed_problems(bool hopper) {
  std::vector<TestProblem> v;
  if (hopper) {
    // Tiled A (1x1, GEMM), im2col A (3x3, strided, channels not a multiple of 128), every
    // recipe, M/N tails, persistent CTAs with both warpgroups busy.
    v.push_back(tma(i8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kExactF32, 128, 64, 5, 2));
    v.push_back(tma(i8conv(conv_params(2, 14, 14, 64, 64, 1, 1, 0)), Recipe::kResidualI8, 64, 64, 6, 3));
    v.push_back(tma(i8conv(conv_params(1, 17, 13, 32, 48, 3, 1, 1)), Recipe::kExactF16, 128, 64, 4, 1));
    v.push_back(tma(i8conv(conv_params(2, 15, 15, 160, 64, 3, 2, 1)), Recipe::kDequantF32, 64, 128, 4, 2));
    v.push_back(tma(i8conv(conv_params(1, 14, 14, 128, 64, 3, 1, 1)), Recipe::kResidualF16Out, 128, 64, 5, 0));
    v.push_back(tma(i8gemm(300, 200, 512), Recipe::kRequant, 128, 128, 4, 2));
    v.push_back(tma(i8gemm(130, 260, 1024), Recipe::kDequantF16, 64, 256, 3, 3));
    // int8 outputs in the register epilogue's 64-byte swizzled boxes, their int8 residual by
    // bulk loads: 4 chunks per tile over few CTAs (both boxes, both barrier phases), N tails.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualI8, 128, 128, 4, 2));
    v.push_back(tma(i8gemm(200, 136, 256), Recipe::kRequant, 64, 256, 3, 1));
    v.push_back(tma(i8conv(conv_params(3, 9, 9, 96, 72, 3, 1, 1)), Recipe::kResidualI8, 64, 128, 6, 1));
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualRequant, 128, 64, 4, 2));
    v.push_back(tma(i8conv(conv_params(2, 11, 9, 64, 136, 3, 1, 1)), Recipe::kRequantRelu, 64, 64, 4, 1));
    // 64-byte rows (64 channels per k-tile): ResNet's layer-1 shapes (1x1 64 -> 256 with the
    // requantized int8 residual, 3x3 64 -> 64 by im2col), channels of one and a half rows
    // (96: a full row and a half-empty one; 48: one partial row), 2 k32 steps per k-tile.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualRequant, 128, 128, 4, 2, 64));
    v.push_back(tma(i8conv(conv_params(2, 11, 9, 64, 64, 3, 1, 1)), Recipe::kRequantRelu, 128, 64, 6, 1, 64));
    v.push_back(tma(i8conv(conv_params(2, 13, 11, 96, 72, 3, 2, 1)), Recipe::kExactF32, 64, 128, 5, 3, 64));
    v.push_back(tma(i8gemm(130, 200, 64), Recipe::kDequantF16, 64, 256, 3, 2, 64));
    v.push_back(tma(i8conv(conv_params(1, 9, 7, 48, 64, 3, 1, 1)), Recipe::kResidualI8, 64, 64, 8, 1, 64));
    // int8 stores of a DCR depth_to_space by bulk tensor stores of the 4-D map (tessel_tma.cuh,
    // kTmaStoreD2s): 64 -> 128 = 32 channels x 2x2, rows of 64 (j, c) in the 64-byte swizzle,
    // two images of 16-wide rows, an M tail; and 48-wide rows, which keep the slab's stores.
    for (const int w : {16, 48}) {
      TestProblem p = i8conv(conv_params(2, 9, w, 64, 128, 3, 1, 1));
      p.e.store.kind = StoreMap::Kind::kDepthToSpace;
      p.e.store.block = 2;
      p.e.store.dcr = true;
      p.e.store.out_h = 9;
      p.e.store.out_w = w;
      v.push_back(tma(std::move(p), Recipe::kRequant, 128, 128, 4, 2, 64));
    }
    // f16 residuals (the slab path: not the output's type), into i8 and into f16.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualF16Requant, 128, 128, 4, 2, 64));
    // EfficientNet's expansion conv with its quantized SiLU (silu_qgate) into int8.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 384, 1, 1, 0)), Recipe::kSiluQGate, 128, 128, 4, 2, 64));
    v.push_back(tma(i8gemm(130, 200, 512), Recipe::kResidualF16, 64, 128, 4, 2));
    // u8 A (wgmma .u8.s8): ResNet's shapes under onnxruntime's uint8 activations, tiled and
    // im2col A, 128- and 64-element k-tiles, u8 stores in the register epilogue's boxes and a
    // u8 residual by bulk loads.
    v.push_back(tma(u8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualU8, 128, 128, 4, 2, 64));
    v.push_back(tma(u8conv(conv_params(2, 11, 9, 64, 64, 3, 1, 1)), Recipe::kRequantU8, 128, 64, 6, 1, 64));
    v.push_back(tma(u8conv(conv_params(2, 15, 15, 160, 64, 3, 2, 1)), Recipe::kDequantF32, 64, 128, 4, 2));
    v.push_back(tma(u8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kExactF32, 128, 64, 5, 2));
    v.push_back(tma(u8gemm(200, 136, 256), Recipe::kRequantU8, 64, 256, 3, 1));
    v.push_back(tma(u8conv(conv_params(1, 14, 14, 128, 64, 3, 1, 1)), Recipe::kResidualF16Out, 128, 64, 5, 0));
    // Cooperative: a requantized int8 residual by bulk loads over several tiles per CTA, an
    // im2col conv with M ending in the first warpgroup's half, 64-byte rows, f32 output.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualRequant, 256, 128, 3, 2, 128, true));
    v.push_back(tma(i8conv(conv_params(2, 13, 11, 128, 200, 3, 1, 1)), Recipe::kRequantRelu, 128, 256, 3, 1, 128, true));
    v.push_back(tma(u8conv(conv_params(2, 11, 9, 64, 64, 3, 1, 1)), Recipe::kRequantU8, 128, 64, 6, 1, 64, true));
    v.push_back(tma(i8gemm(300, 200, 512), Recipe::kExactF32, 256, 64, 4, 2, 128, true));
    // unit-quantize's epilogues: ResNet's residual one in the register epilogue (bulk-loaded
    // int8 residual, cooperative and not), requantized int8 and uint8, a float output.
    v.push_back(tma(i8conv(conv_params(2, 20, 20, 64, 256, 1, 1, 0)), Recipe::kResidualUnit, 256, 128, 3, 2, 64, true));
    v.push_back(tma(i8conv(conv_params(2, 14, 14, 64, 64, 1, 1, 0)), Recipe::kResidualUnit, 64, 128, 6, 3));
    v.push_back(tma(i8conv(conv_params(2, 11, 9, 64, 136, 3, 1, 1)), Recipe::kRequantUnit, 64, 64, 4, 1));
    v.push_back(tma(u8conv(conv_params(2, 11, 9, 64, 64, 3, 1, 1)), Recipe::kRequantUnitU8, 128, 64, 6, 1, 64));
    v.push_back(tma(i8gemm(130, 200, 512), Recipe::kUnitDequantF16, 64, 128, 4, 2));
    v.push_back(tma(i8conv(conv_params(1, 14, 14, 128, 72, 1, 1, 0)), Recipe::kUnitGeneric, 128, 64, 5, 2));
    // The defaults' int8 windowed tiles (kernels::default_large_gemm, default_one_wave_window):
    // the cooperative 256x64 in 6 stages of 64-byte rows over a 3x3 64 -> 64 conv, with the
    // bulk-loaded residual and without, uint8 A, three tiles on one CTA, the last ending in the
    // second warpgroup's rows; the ping-pong 128x128 in 4 stages over 18 k-tiles (3x3, 256
    // channels), an N tail, four tiles on one CTA.
    v.push_back(tma(i8conv(conv_params(2, 19, 17, 64, 64, 3, 1, 1)), Recipe::kResidualUnit, 256, 64, 6, 1, 64, true));
    v.push_back(tma(u8conv(conv_params(2, 19, 17, 64, 64, 3, 1, 1)), Recipe::kRequantUnitU8, 256, 64, 6, 1, 64, true));
    v.push_back(tma(i8conv(conv_params(2, 9, 9, 256, 136, 3, 1, 1)), Recipe::kResidualUnit, 128, 128, 4, 1));
    // The defaults' int8 1x1 tiles of 4 k-tiles or more (default_large_gemm): the cooperative
    // 256x64 in 4 stages of 128-byte rows, 8 tiles on one CTA, the bulk-loaded residual; the
    // cooperative 256x128 over a strided 1x1 (im2col), 3 N tiles, M ending in the first
    // warpgroup's rows.
    v.push_back(tma(i8conv(conv_params(2, 14, 14, 512, 256, 1, 1, 0)), Recipe::kResidualUnit, 256,
                    64, 4, 1, 128, true));
    v.push_back(tma(i8conv(conv_params(2, 9, 9, 512, 384, 1, 2, 0)), Recipe::kResidualUnit, 256,
                    128, 3, 1, 128, true));
    // A 1x1 conv whose K is one 64-byte row on the cooperative 256x64 in 64-byte k-tiles: the
    // bulk-loaded residual over 5 tiles on one CTA; uint8 A, strided (im2col), an f16 output.
    v.push_back(tma(i8conv(conv_params(2, 19, 17, 64, 64, 1, 1, 0)), Recipe::kResidualUnit, 256, 64,
                    6, 1, 64, true));
    v.push_back(tma(u8conv(conv_params(2, 15, 15, 64, 128, 1, 2, 0)), Recipe::kDequantF16, 256, 64,
                    6, 1, 64, true));
  }
  // unit-quantize's epilogues on mma.sync: the lead applied in the fragments (saturated there).
  v.push_back(make(i8conv(conv_params(2, 14, 14, 64, 256, 1, 1, 0)), Recipe::kResidualUnit, 128, 128, 64, 64, 64, 3));
  v.push_back(make(u8conv(conv_params(1, 17, 13, 32, 48, 3, 1, 1)), Recipe::kRequantUnitU8, 64, 64, 128, 32, 32, 3));
  v.push_back(make(i8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kUnitGeneric, 64, 64, 64, 32, 32, 4));
  // u8 A (mma.sync .u8.s8): 1x1, 3x3 pad 1 (the zero pad is the real 0), strided, K tails,
  // 2-byte loads, split-K, u8 and i8 stores, u8 and i8 residuals.
  v.push_back(make(u8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kExactF32, 128, 64, 64, 64, 32, 3));
  v.push_back(make(u8conv(conv_params(1, 17, 13, 32, 48, 3, 1, 1)), Recipe::kRequantU8, 64, 64, 128, 32, 32, 3));
  v.push_back(make(u8conv(conv_params(2, 15, 15, 64, 64, 3, 2, 1)), Recipe::kDequantF16, 128, 128, 64, 64, 64, 3));
  v.push_back(make(u8conv(conv_params(1, 20, 20, 8, 64, 3, 1, 1)), Recipe::kRequant, 64, 64, 64, 32, 32, 3));
  v.push_back(make(u8conv(conv_params(1, 16, 16, 6, 32, 3, 1, 1)), Recipe::kExactF32, 64, 32, 64, 32, 16, 3));
  v.push_back(make(u8conv(conv_params(2, 14, 14, 64, 256, 1, 1, 0)), Recipe::kResidualU8, 128, 128, 64, 64, 64, 3));
  v.push_back(make(u8conv(conv_params(2, 14, 14, 64, 64, 1, 1, 0)), Recipe::kResidualI8, 64, 64, 64, 32, 32, 3));
  v.push_back(make(u8gemm(130, 260, 1024), Recipe::kExactF32, 64, 64, 128, 32, 32, 3, 4));
  v.push_back(make(u8gemm(300, 200, 512), Recipe::kRequantU8, 256, 128, 64, 64, 64, 3));
  {
    TestProblem q = make(u8conv(conv_params(1, 9, 7, 32, 29, 3, 1, 1)), Recipe::kRequantU8, 64, 32, 64, 32, 16, 3);
    q.e.store.kind = StoreMap::Kind::kChannelSlice;
    q.e.store.ld = 37;
    q.e.store.channel_offset = 3;
    v.push_back(std::move(q));
  }
  // 1x1 (a plain GEMM of the pixels), M and N partial tiles: 2*13*11 = 286 pixels, 96 channels.
  v.push_back(make(i8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kExactF32, 128, 64, 64,
                   64, 32, 3));
  // int8 stores through depth_to_space (a QDQ super-resolution net's upsampling convs, which
  // take the QuantizeLinear after the pixel shuffle: fuse): 64 -> 128 = 32 channels x 2x2 DCR
  // (16-byte vectors of 16 channels), 64 -> 64 = 16 x 2x2 CRD, odd sizes, partial tiles.
  for (const bool dcr : {true, false}) {
    TestProblem p = i8conv(conv_params(1, 9, 13, 64, dcr ? 128 : 64, 3, 1, 1));
    p.e.store.kind = StoreMap::Kind::kDepthToSpace;
    p.e.store.block = 2;
    p.e.store.dcr = dcr;
    p.e.store.out_h = 9;
    p.e.store.out_w = 13;
    v.push_back(make(std::move(p), dcr ? Recipe::kRequant : Recipe::kRequantRelu, 64, 64, 64, 32, 32, 3));
  }
  v.push_back(make(i8conv(conv_params(2, 13, 11, 64, 96, 1, 1, 0)), Recipe::kRequant, 64, 64, 64,
                   32, 32, 4));
  // EfficientNet's expansion conv (24 -> 144 at 56x56, scaled down) with its quantized SiLU.
  v.push_back(make(i8conv(conv_params(2, 14, 14, 32, 144, 1, 1, 0)), Recipe::kSiluQGate, 64, 64, 64, 32, 32, 3));
  // 3x3 pad 1, N = 48 of a 64-wide tile.
  v.push_back(make(i8conv(conv_params(1, 17, 13, 32, 48, 3, 1, 1)), Recipe::kExactF16, 128, 64, 64,
                   64, 32, 3));
  v.push_back(make(i8conv(conv_params(1, 17, 13, 32, 48, 3, 1, 1)), Recipe::kDequantF16, 64, 64,
                   128, 32, 32, 3));
  // Strided 3x3 and 5x5.
  v.push_back(make(i8conv(conv_params(2, 15, 15, 64, 64, 3, 2, 1)), Recipe::kDequantF32, 128, 128,
                   64, 64, 64, 3));
  v.push_back(make(i8conv(conv_params(1, 19, 17, 16, 40, 5, 2, 2)), Recipe::kRequant, 64, 32, 64,
                   32, 16, 3));
  // K not a multiple of the k-tile: ci = 8, K = 72 over k-tiles of 64 (the second tile's
  // second k32 step is skipped); ci = 24, K = 216 over 128.
  v.push_back(make(i8conv(conv_params(1, 20, 20, 8, 64, 3, 1, 1)), Recipe::kExactF32, 64, 64, 64,
                   32, 32, 3));
  v.push_back(make(i8conv(conv_params(2, 9, 9, 24, 32, 3, 1, 1)), Recipe::kDequantBf16, 32, 32, 128,
                   16, 16, 4));
  // ci = 6: 2-byte vectors through registers (K = 54 in one k-tile).
  v.push_back(make(i8conv(conv_params(1, 16, 16, 6, 32, 3, 1, 1)), Recipe::kExactF32, 64, 32, 64,
                   32, 16, 3));
  // Scaled int8 residuals: requantized, and into f16 (the residual's own dtype).
  v.push_back(make(i8conv(conv_params(2, 14, 14, 64, 64, 1, 1, 0)), Recipe::kResidualI8, 64, 64, 64,
                   32, 32, 3));
  v.push_back(make(i8conv(conv_params(1, 14, 14, 128, 64, 3, 1, 1)), Recipe::kResidualF16Out, 128,
                   64, 64, 64, 32, 4));
  // f16 residuals into i8 and f16 (M and N tails).
  v.push_back(make(i8conv(conv_params(2, 13, 11, 64, 256, 1, 1, 0)), Recipe::kResidualF16Requant, 128,
                   128, 64, 64, 64, 4));
  v.push_back(make(i8gemm(200, 72, 256), Recipe::kResidualF16, 64, 64, 64, 32, 32, 3));
  // Grouped conv as a batch of channel slices (2 groups of 32).
  v.push_back(make(i8conv(conv_params(1, 10, 10, 64, 64, 3, 1, 1, 1, 2)), Recipe::kRequant, 64, 32,
                   64, 32, 32, 3));
  // GEMMs: partial tiles, K = 100 (4-element vectors), split-K with int32 partials, 256x128.
  v.push_back(make(i8gemm(200, 72, 100), Recipe::kExactF32, 64, 64, 64, 32, 32, 3));
  v.push_back(make(i8gemm(130, 260, 1024), Recipe::kExactF32, 64, 64, 128, 32, 32, 3, 4));
  v.push_back(make(i8gemm(64, 1000, 2048), Recipe::kDequantF16, 32, 64, 128, 32, 32, 4, 8));
  v.push_back(make(i8gemm(300, 200, 512), Recipe::kRequant, 256, 128, 64, 64, 64, 3));
  v.push_back(make(i8gemm(96, 96, 256), Recipe::kResidualI8, 32, 32, 256, 16, 16, 2));
  v.push_back(make(i8conv(conv_params(2, 14, 14, 64, 256, 1, 1, 0)), Recipe::kResidualRequant, 128, 128,
                   64, 64, 64, 3));
  v.push_back(make(i8conv(conv_params(1, 15, 13, 64, 72, 3, 1, 1)), Recipe::kRequantRelu, 64, 64, 64,
                   32, 32, 3));
  // Store maps: channels-first int8 (16-pixel vectors along m), a channel slice at offset 3.
  {
    TestProblem p = make(i8conv(conv_params(1, 16, 16, 32, 40, 1, 1, 0)), Recipe::kRequant, 64, 32,
                         64, 32, 32, 3);
    p.e.store.kind = StoreMap::Kind::kNchw;
    p.e.store.out_h = p.e.store.out_w = 16;
    v.push_back(std::move(p));
    TestProblem q = make(i8conv(conv_params(1, 9, 7, 32, 29, 3, 1, 1)), Recipe::kResidualI8, 64, 32,
                         64, 32, 16, 3);
    q.e.store.kind = StoreMap::Kind::kChannelSlice;
    q.e.store.ld = 37;
    q.e.store.channel_offset = 3;
    v.push_back(std::move(q));
  }
  return v;
}

// Random int8 problems: NHWC convs and K-major GEMMs with random shapes, recipes, schedules
// (split-K, raster), store maps.
std::vector<TestProblem> random_problems(std::mt19937& rng, int count) {
  std::vector<TestProblem> out;
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  auto uni = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  const int schedules[][6] = {
      {128, 128, 64, 64, 64, 3}, {128, 64, 64, 64, 32, 4}, {64, 64, 64, 32, 32, 3},
      {64, 128, 128, 32, 64, 3}, {64, 32, 64, 32, 16, 2},  {32, 64, 128, 16, 32, 4},
      {32, 32, 64, 16, 16, 5},   {64, 64, 256, 32, 32, 2}, {256, 128, 64, 64, 64, 3}};
  for (int attempt = 0; static_cast<int>(out.size()) < count && attempt < 20 * count; ++attempt) {
    TestProblem p;
    if (rng() % 3 != 0) {
      const int k = pick({1, 3, 3, 5});
      const int stride = pick({1, 1, 2});
      const int groups = pick({1, 1, 1, 2});
      const int cig = pick({8, 16, 24, 32, 64, 6, 2, 40});
      const int cog = uni(1, 80);
      const int pad = uni(0, k / 2);
      const int h = uni(std::max(1, k - 2 * pad), 20), w = uni(std::max(1, k - 2 * pad), 20);
      const contraction::Conv2dParams cp =
          conv_params(pick({1, 1, 2}), h, w, cig * groups, cog * groups, k, stride, pad, 1, groups);
      p = rng() % 3 == 0 ? u8conv(cp) : i8conv(cp);
    } else {
      const int m = uni(1, 300), n = uni(1, 200), k = 2 * uni(1, 300);
      p = rng() % 3 == 0 ? u8gemm(m, n, k) : i8gemm(m, n, k);
    }
    if (!p.tensor_cores) continue;
    apply(kRecipes[out.size() % std::size(kRecipes)], p);
    const int64_t cout = p.c.maps.c.shape.back();
    if (rng() % 8 == 0) {
      p.e.store.kind = StoreMap::Kind::kChannelSlice;
      p.e.store.channel_offset = pick({0, 3, 16});
      p.e.store.ld = p.e.store.channel_offset + cout + pick({0, 5});
    } else if (rng() % 8 == 0 && p.is_conv && p.c.batch == 1) {
      p.e.store.kind = StoreMap::Kind::kNchw;
      p.e.store.out_h = p.c.maps.c.shape[1];
      p.e.store.out_w = p.c.maps.c.shape[2];
    }
    std::vector<kernels::Schedule> cands;
    for (const auto& x : schedules) {
      kernels::Schedule s = i8s(p, x[0], x[1], x[2], x[3], x[4], x[5]);
      const int64_t k_tiles = (p.c.k + s.block_k - 1) / s.block_k;
      if (rng() % 4 == 0 && k_tiles >= 4) s.split_k = 2 + static_cast<int>(rng() % 3);
      if (rng() % 3 == 0) s.raster = 1;
      cands.push_back(s);
    }
    std::shuffle(cands.begin(), cands.end(), rng);
    bool placed = false;
    for (const kernels::Schedule& s : cands) {
      if (can_implement(p.c, p.e, s)) continue;
      p.s = s;
      placed = true;
      break;
    }
    if (placed) out.push_back(std::move(p));
  }
  return out;
}

void run_all(const std::vector<TestProblem>& ps, const std::string& arch, std::mt19937& rng) {
  std::vector<std::string> errors;
  auto kernels = ::tessel::testing::build_all(ps, arch, errors);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!kernels[i]) {
      ADD_FAILURE() << ps[i].name() << ": build failed: " << errors[i];
      continue;
    }
    try {
      expect_matches(ps[i], run_int8(ps[i], *kernels[i], rng));
    } catch (const std::exception& e) {
      ADD_FAILURE() << ps[i].name() << ": " << e.what();
    }
  }
}

// Every fixed problem's schedule is one the generator takes: checked without a GPU, so that a
// problem added with a hand-written schedule fails here and not first on the GPU machine.
TEST(ContractionInt8FixedProblems, SchedulesAreLegal) {
  for (const TestProblem& p : fixed_problems(/*hopper=*/true)) {
    const auto why = can_implement(p.c, p.e, p.s);
    EXPECT_FALSE(why) << p.name() << ": " << *why;
  }
}

TEST_F(ContractionInt8GpuTest, FixedAndRandomProblemsMatchCpuReference) {
  std::mt19937 rng(20261207);
  std::vector<TestProblem> ps = fixed_problems(info_.arch() == "sm_90a");
  const size_t fixed = ps.size();
  for (TestProblem& p : random_problems(rng, 48)) ps.push_back(std::move(p));
  ASSERT_GE(ps.size(), fixed + 40);
  for (const TestProblem& p : ps) ASSERT_FALSE(can_implement(p.c, p.e, p.s)) << p.name();
  run_all(ps, info_.arch(), rng);
}

// The compiler's pick for int8 layers of ResNet-50 shape (at batch 2), run as picked.
TEST_F(ContractionInt8GpuTest, DefaultSchedulesMatchCpuReference) {
  std::mt19937 rng(5);
  std::vector<TestProblem> ps;
  auto add = [&](TestProblem p, Recipe r) {
    apply(r, p);
    p.s = kernels::default_schedule(p.c, info_);
    EXPECT_NE(p.s.instruction, kernels::Instruction::kSimt) << p.s.name();
    ps.push_back(std::move(p));
  };
  add(i8conv(conv_params(2, 56, 56, 64, 64, 3, 1, 1)), Recipe::kRequant);
  add(i8conv(conv_params(2, 56, 56, 256, 64, 1, 1, 0)), Recipe::kResidualI8);
  add(i8conv(conv_params(2, 28, 28, 128, 128, 3, 2, 1)), Recipe::kDequantF16);
  add(i8gemm(2, 1000, 2048), Recipe::kExactF32);
  // onnxruntime's uint8 activations.
  add(u8conv(conv_params(2, 56, 56, 64, 64, 3, 1, 1)), Recipe::kRequantU8);
  add(u8conv(conv_params(2, 56, 56, 64, 256, 1, 1, 0)), Recipe::kResidualU8);
  add(u8gemm(2, 1000, 2048), Recipe::kExactF32);
  // unit-quantize's forms of the same layers.
  add(i8conv(conv_params(2, 56, 56, 64, 256, 1, 1, 0)), Recipe::kResidualUnit);
  add(i8conv(conv_params(2, 56, 56, 64, 64, 3, 1, 1)), Recipe::kRequantUnit);
  run_all(ps, info_.arch(), rng);
}

// compute-sanitizer's subset (scripts/gpu_suite.sh runs *Sanitize* under memcheck and
// racecheck): small problems covering the int8 loads, split-K, int8 stores and residuals.
TEST_F(ContractionInt8GpuTest, SanitizerSubsetMatchesCpuReference) {
  std::mt19937 rng(11);
  std::vector<TestProblem> ps;
  ps.push_back(make(i8conv(conv_params(1, 9, 7, 24, 40, 3, 1, 1)), Recipe::kResidualI8, 64, 32, 64,
                    32, 16, 3));
  ps.push_back(make(i8gemm(70, 48, 512), Recipe::kExactF32, 32, 32, 64, 16, 16, 3, 4));
  ps.push_back(make(i8conv(conv_params(1, 8, 8, 6, 16, 3, 2, 1)), Recipe::kResidualF16Out, 32, 32,
                    64, 16, 16, 2));
  if (info_.arch() == "sm_90a") {
    ps.push_back(tma(i8conv(conv_params(2, 9, 7, 48, 40, 3, 1, 1)), Recipe::kResidualI8, 64, 64, 3, 2));
    ps.push_back(tma(i8gemm(70, 48, 512), Recipe::kExactF32, 64, 64, 2, 1));
    ps.push_back(tma(i8conv(conv_params(1, 9, 7, 64, 40, 3, 1, 1)), Recipe::kResidualI8, 64, 64, 3, 2, 64));
    ps.push_back(tma(i8conv(conv_params(1, 9, 7, 64, 72, 1, 1, 0)), Recipe::kResidualF16Requant, 64, 64, 3, 1, 64));
    // Cooperative: both consumer warpgroups on each tile, over several tiles per CTA.
    ps.push_back(tma(i8conv(conv_params(2, 9, 7, 64, 136, 1, 1, 0)), Recipe::kResidualI8, 128, 128, 3, 1, 128, true));
    ps.push_back(tma(i8conv(conv_params(2, 9, 7, 64, 136, 1, 1, 0)), Recipe::kResidualUnit, 256, 128, 3, 1, 64, true));
    // The defaults' 1x1 tiles: the 256x64 over K of one 64-byte row, and in 4 stages of 128-byte
    // rows over K of 4 k-tiles, several tiles on one CTA; the ping-pong 64x128, 2 tiles per
    // warpgroup.
    ps.push_back(tma(i8conv(conv_params(2, 19, 17, 64, 64, 1, 1, 0)), Recipe::kResidualUnit, 256,
                     64, 6, 1, 64, true));
    ps.push_back(tma(i8conv(conv_params(2, 9, 7, 512, 136, 1, 1, 0)), Recipe::kResidualUnit, 256,
                     64, 4, 1, 128, true));
    ps.push_back(
        tma(i8conv(conv_params(2, 9, 7, 64, 136, 1, 1, 0)), Recipe::kResidualUnit, 64, 128, 4, 1));
  }
  run_all(ps, info_.arch(), rng);
}

// The Tensor Core instruction in the SASS: IMMA (integer mma), not HMMA.
TEST_F(ContractionInt8GpuTest, KernelsRunImma) {
  const std::string tool = ::tessel::testing::find_cuobjdump();
  if (tool.empty()) GTEST_SKIP() << "cuobjdump not found";
  const TestProblem p = make(i8conv(conv_params(1, 28, 28, 64, 64, 3, 1, 1)), Recipe::kRequant, 128,
                             64, 64, 64, 32, 3);
  const std::string sass =
      ::tessel::testing::dump_sass(tool, ContractionKernel::build(p.c, p.e, p.s, info_.arch())->cubin());
  EXPECT_NE(sass.find("IMMA"), std::string::npos) << sass.substr(0, 2000);
  EXPECT_EQ(sass.find("HMMA"), std::string::npos);
  EXPECT_NE(sass.find("LDSM"), std::string::npos) << "ldmatrix";
  EXPECT_NE(sass.find("LDGSTS"), std::string::npos) << "cp.async";
  // A u8 A: the unsigned-by-signed IMMA.
  const TestProblem u = make(u8conv(conv_params(1, 28, 28, 64, 64, 3, 1, 1)), Recipe::kRequantU8, 128, 64, 64, 64, 32, 3);
  const std::string u_sass =
      ::tessel::testing::dump_sass(tool, ContractionKernel::build(u.c, u.e, u.s, info_.arch())->cubin());
  EXPECT_NE(u_sass.find(".U8.S8"), std::string::npos) << u_sass.substr(0, 2000);
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
