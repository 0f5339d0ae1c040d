// QuantizeLinear and DequantizeLinear on the GPU (kernels/cuda/op_elementwise.cc) against the
// CPU reference (ops/quantized.cc), bit for bit: one-node graphs over chosen inputs (exact
// ties x / scale = k + 0.5, saturation at both ends, infinities, NaN, random values that are
// never zero), each launched twice over outputs poisoned with different bytes so that an
// element the kernel never writes fails whatever its expected value; then a QDQ residual
// block (DQ -> Add -> Relu -> Q) compiled whole and run by the engine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "compiler/cnn_blocks.h"
#include "core/half.h"
#include "device/cuda_api.h"
#include "gpu/gpu_test_util.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "kernels/cuda/op_kernels.h"
#include "passes/pipeline.h"
#include "runtime/cpu/executor.h"

namespace tessel::kernels::cuda {
namespace {

namespace rt = device;
using Ints = std::vector<int64_t>;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.type_str() == b.type_str() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The first element where got and want differ, for the failure message.
std::string first_difference(const Tensor& got, const Tensor& want) {
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(got.raw() + i * dtype_size(want.dtype()),
                    want.raw() + i * dtype_size(want.dtype()), dtype_size(want.dtype())) != 0)
      return "element " + std::to_string(i) + ": got " + std::to_string(got.get_f64(i)) +
             ", want " + std::to_string(want.get_f64(i));
  return "none";
}

// `op` over `inputs` (graph inputs, uploaded as the ABI passes constants too) at `opset`: the
// generated kernel's output equals the CPU reference's byte for byte. Returns the source.
std::string expect_exact(const std::string& op, const std::vector<Tensor>& inputs,
                         ir::Attributes attrs = {}, int64_t opset = 17) {
  ir::Graph g;
  g.opset = opset;
  std::vector<ir::ValueId> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(g.add_value("in" + std::to_string(i), {inputs[i].dtype(), inputs[i].shape()}));
    g.inputs.push_back(ins.back());
  }
  const ir::ValueId out = g.add_value("out", {});
  g.add_node(op, "node", ins, {out}, std::move(attrs));
  g.outputs = {out};
  ir::infer_types(g, ir::OpRegistry::global());
  const Tensor want = runtime::cpu::run_graph(g, inputs)[0];

  const std::optional<std::string> cannot = can_emit_op(g, g.nodes[0]);
  EXPECT_FALSE(cannot) << *cannot;
  if (cannot) return "";
  const OpKernelSource ks = emit_op(g, g.nodes[0]);
  const ::tessel::testing::OpKernelRun kernel(ks);
  for (uint8_t poison : {uint8_t{0xff}, uint8_t{0x5a}}) {
    const Tensor got = kernel.run(inputs, {want}, poison)[0];
    EXPECT_TRUE(same_bytes(got, want))
        << op << " " << want.type_str() << ", poison " << int{poison} << ", first difference at "
        << first_difference(got, want) << "\n"
        << ks.source;
  }
  return ks.source;
}

Tensor f32(Shape s, std::vector<double> v) {
  return Tensor::from_doubles(DType::kF32, std::move(s), v);
}
Tensor of(DType t, Shape s, std::vector<double> v) {
  return Tensor::from_doubles(t, std::move(s), v);
}

// Uniform in ±[lo, hi] with random signs: never zero.
std::vector<double> random_values(int64_t n, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = (neg(rng) ? -1 : 1) * mag(rng);
  return v;
}

// Integers in [lo, hi] other than 0.
std::vector<double> random_ints(int64_t n, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) do
      x = d(rng);
    while (x == 0);
  return v;
}

// x for a per-tensor scale `s` (a power of two) and element count n: every exact tie
// (k + 0.5) * s for k in [-300, 300), values that saturate at both ends of any 8-bit range
// (±1e30, ±inf, ±1e6 s), NaN, then random multiples of s in ±[0.01, 300].
std::vector<double> edge_values(int64_t n, double s, std::mt19937& rng) {
  std::vector<double> v;
  for (int k = -300; k < 300; ++k) v.push_back((k + 0.5) * s);
  const double inf = std::numeric_limits<double>::infinity();
  for (double e : {1e30, -1e30, inf, -inf, std::nan(""), 1e6 * s, -1e6 * s}) v.push_back(e);
  const std::vector<double> r = random_values(n, 0.01 * s, 300 * s, rng);
  v.insert(v.end(), r.begin(), r.end());
  v.resize(static_cast<size_t>(n));
  return v;
}

// Values of dtype t next to the ties (k + 0.5) * s, k in [-127, 127), for which a kernel
// that skipped a step of the reference's arithmetic rounds x / s to another integer: for f32,
// multiplying by the reciprocal 1 / s instead of dividing; for f16 and bf16, not rounding the
// f32 quotient to t first. (s as the kernel reads it: an f32 scale, or one exact in f16.)
std::vector<double> telling_values(DType t, float s) {
  auto in_t = [t](float f) {
    return t == DType::kF16    ? half_to_float(float_to_half(f))
           : t == DType::kBF16 ? bf16_to_float(float_to_bf16(f))
                               : f;
  };
  // The representable value d steps of t away from c (c's sign kept: |d| is small).
  auto step = [t](float c, int d) {
    if (t == DType::kF16) return half_to_float(static_cast<uint16_t>(float_to_half(c) + d));
    if (t == DType::kBF16) return bf16_to_float(static_cast<uint16_t>(float_to_bf16(c) + d));
    return bits_float(float_bits(c) + static_cast<uint32_t>(d));
  };
  std::vector<double> r;
  for (int k = -127; k < 127; ++k)
    for (int d = -8; d <= 8; ++d) {
      const float x = step((k + 0.5f) * s, d), q = x / s;
      const float right = in_t(q), wrong = t == DType::kF32 ? x * (1.0f / s) : q;
      if (std::nearbyint(right) != std::nearbyint(wrong)) r.push_back(x);
    }
  return r;
}

class QuantizeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
  std::mt19937 rng{20240611};
};

// ---- QuantizeLinear ---------------------------------------------------------------------------

// Per tensor, f32 -> u8 and i8 with zero points, over ties, saturation, NaN: 16 outputs per
// thread (a [4, 256] input) and the one-element tail path (an odd count).
TEST_F(QuantizeGpu, f32_per_tensor_ties_saturation_nan) {
  for (int64_t n : {int64_t{1024}, int64_t{1031}}) {
    const Tensor x = f32(n == 1024 ? Shape{4, 256} : Shape{n}, edge_values(n, 0.25, rng));
    const std::string src =
        expect_exact("QuantizeLinear", {x, f32({}, {0.25}), of(DType::kU8, {}, {128})});
    if (n == 1024) {
      EXPECT_NE(src.find("Frag<u8, 16> y;"), std::string::npos) << src;
    }
    expect_exact("QuantizeLinear", {x, f32({}, {0.25}), of(DType::kI8, {}, {-3})});
    expect_exact("QuantizeLinear", {x, f32({1}, {0.25}), of(DType::kI8, {1}, {100})});
  }
}

// Scales that are no power of two: the quotient is a correctly rounded f32 division. Near
// ties where x * (1 / s) rounds to another integer than x / s, and 0.7f / 0.2f, the tie 3.5 in
// f32 (4) but 3.4999999 in double (3).
TEST_F(QuantizeGpu, f32_divides_rather_than_multiplies_by_the_reciprocal) {
  std::vector<double> v = telling_values(DType::kF32, 0.037f);
  EXPECT_GE(v.size(), 32u);
  const std::vector<double> r = random_values(4096 - static_cast<int64_t>(v.size()), 0.001, 4, rng);
  v.insert(v.end(), r.begin(), r.end());
  v[v.size() - 1] = 0.7f;
  v[v.size() - 2] = -0.7f;
  const Tensor x = f32({4096}, v);
  expect_exact("QuantizeLinear", {x, f32({}, {0.037f}), of(DType::kI8, {}, {0})});
  expect_exact("QuantizeLinear", {x, f32({}, {0.2f}), of(DType::kU8, {}, {7})});
  expect_exact("QuantizeLinear", {x, f32({}, {0.0173}), of(DType::kI8, {}, {1})});
}

// Without a zero point the output is u8 with zero point 0: negatives saturate to 0.
TEST_F(QuantizeGpu, f32_without_zero_point_is_u8) {
  expect_exact("QuantizeLinear", {f32({3, 40}, edge_values(120, 0.5, rng)), f32({}, {0.5})});
}

// Per channel of NHWC activations (axis 3, and its spelling -1): the scales and zero points
// are loaded 16 wide with the channels; C = 24 gives 8-wide fragments.
TEST_F(QuantizeGpu, f32_per_channel_nhwc) {
  for (int64_t c : {int64_t{48}, int64_t{24}}) {
    const Shape shape{2, 5, 7, c};
    const Tensor scale = f32({c}, random_values(c, 0.005, 0.05, rng));
    const std::vector<float> s = scale.to_f32_vector();
    std::vector<double> v = random_values(numel(shape), 0.01, 8, rng);
    for (int64_t i = 0; i < c; ++i) v[static_cast<size_t>(i)] = (i - c / 2 + 0.5) * s[i];  // ties
    v[static_cast<size_t>(c)] = 1e9;
    const Tensor x = f32(shape, v);
    const std::string src = expect_exact(
        "QuantizeLinear", {x, scale, of(DType::kI8, {c}, random_ints(c, -20, 20, rng))},
        {{"axis", int64_t{3}}});
    if (c == 48) {
      EXPECT_NE(src.find("Frag<float, 16> a1;"), std::string::npos) << src;
    }
    expect_exact("QuantizeLinear", {x, scale, of(DType::kU8, {c}, random_ints(c, 1, 255, rng))},
                 {{"axis", int64_t{-1}}});
  }
}

// Per index of axis 1 of NCHW data and of axis 0: the parameter is loaded once per fragment.
TEST_F(QuantizeGpu, f32_per_axis_other_axes) {
  const Tensor x = f32({2, 3, 5, 7}, random_values(210, 0.01, 4, rng));
  expect_exact("QuantizeLinear",
               {x, f32({3}, {0.01, 0.02, 0.03}), of(DType::kU8, {3}, {1, 128, 250})},
               {{"axis", int64_t{1}}});
  expect_exact(
      "QuantizeLinear",
      {f32({6, 32}, random_values(192, 0.01, 4, rng)), f32({6}, random_values(6, 0.01, 0.04, rng)),
       of(DType::kI8, {6}, random_ints(6, -9, 9, rng))},
      {{"axis", int64_t{0}}});
}

// f16 x and scale (opset 19): the quotient is rounded to f16 before the tie break, as the
// reference does; with scale 2 the odd integers x = 2k + 1 are exact ties. bf16 x per channel.
TEST_F(QuantizeGpu, f16_and_bf16_inputs) {
  std::vector<double> v = random_values(2048, 0.01, 300, rng);
  for (int k = -200; k < 200; ++k) v[static_cast<size_t>(k + 200)] = 2 * k + 1;
  const Tensor x = of(DType::kF16, {8, 256}, v);
  const std::string src = expect_exact(
      "QuantizeLinear", {x, of(DType::kF16, {}, {2}), of(DType::kI8, {}, {-5})}, {}, 19);
  EXPECT_NE(src.find("to_float(from_float<f16>(__fdiv_rn(x0, x1)))"), std::string::npos) << src;
  expect_exact("QuantizeLinear", {x, of(DType::kF16, {}, {0.037}), of(DType::kU8, {}, {100})}, {},
               19);
  // Quotients that only the rounding to f16 (bf16) makes ties, or moves past one.
  const float s16 = half_to_float(float_to_half(0.037f));
  const std::vector<double> h = telling_values(DType::kF16, s16);
  EXPECT_GE(h.size(), 100u);
  expect_exact("QuantizeLinear",
               {of(DType::kF16, {static_cast<int64_t>(h.size())}, h), of(DType::kF16, {}, {s16}),
                of(DType::kI8, {}, {0})},
               {}, 19);
  const std::vector<double> b = telling_values(DType::kBF16, 0.037f);
  EXPECT_GE(b.size(), 100u);
  expect_exact("QuantizeLinear", {of(DType::kBF16, {static_cast<int64_t>(b.size())}, b),
                                  f32({}, {0.037f}), of(DType::kI8, {}, {0})});
  const Tensor xb = of(DType::kBF16, {3, 4, 32}, random_values(384, 0.01, 3, rng));
  expect_exact("QuantizeLinear",
               {xb, f32({32}, random_values(32, 0.005, 0.03, rng)),
                of(DType::kI8, {32}, random_ints(32, -4, 4, rng))},
               {{"axis", int64_t{2}}});
}

// ---- tessel.MulQuantizeLinear -----------------------------------------------------------------

// A squeeze-excite gate: f16 features [N,H,W,C] times a per-image, per-channel gate [N,1,1,C],
// quantized per tensor by the scale's reciprocal, bit for bit against the reference; features
// whose products sit on quantization ties (gate 1, feature (k + 0.5) s, s a power of two); C =
// 48 (16 outputs per thread) and 24 (8); f32 and bf16 operands; u8 without a zero point.
TEST_F(QuantizeGpu, mul_quantize_squeeze_excite_gates) {
  for (int64_t c : {int64_t{48}, int64_t{24}}) {
    const Shape features{2, 7, 5, c}, gate{2, 1, 1, c};
    std::vector<double> x = random_values(numel(features), 0.01, 6, rng);
    std::vector<double> g = random_values(numel(gate), 0.05, 1, rng);
    g[0] = 1;  // the first channel of image 0: products equal to the features ...
    for (int64_t p = 0; p < 35; ++p) x[static_cast<size_t>(p * c)] = (p - 17 + 0.5) * 0.03125;  // ... on ties
    const std::string src =
        expect_exact("tessel.MulQuantizeLinear", {of(DType::kF16, features, x), of(DType::kF16, gate, g),
                                                  f32({}, {0.03125}), of(DType::kI8, {}, {0})});
    EXPECT_NE(src.find("__fmul_rn(__fmul_rn(x0, x1), __frcp_rn(x2))"), std::string::npos) << src;
    EXPECT_NE(src.find(c == 48 ? "Frag<i8, 16> y;" : "Frag<i8, 8> y;"), std::string::npos) << src;
    expect_exact("tessel.MulQuantizeLinear", {of(DType::kF16, features, x), of(DType::kF16, gate, g),
                                              f32({}, {0.0173}), of(DType::kI8, {}, {-3})});
    expect_exact("tessel.MulQuantizeLinear",
                 {f32(features, x), f32(gate, g), f32({1}, {0.037f}), of(DType::kU8, {1}, {128})});
    expect_exact("tessel.MulQuantizeLinear",
                 {of(DType::kBF16, features, x), of(DType::kBF16, gate, g), f32({}, {0.05})});
  }
}

// The gate over int8 features (integer-readers: the features' DequantizeLinear folded into the
// op as a_scale and a_zero_point): i8 and u8 codes, C = 64 and 48 (16 per thread) and 24 (8);
// a_scale / y_scale = 1/2 with a gate of 1 puts every odd code's product on a tie.
TEST_F(QuantizeGpu, mul_quantize_reads_int8_features) {
  for (int64_t c : {int64_t{64}, int64_t{48}, int64_t{24}}) {
    const Shape features{2, 7, 5, c}, gate{2, 1, 1, c};
    std::vector<double> g = random_values(numel(gate), 0.05, 1, rng);
    g[0] = 1;
    const Tensor xi = of(DType::kI8, features, random_ints(numel(features), -128, 127, rng));
    const std::string src = expect_exact(
        "tessel.MulQuantizeLinear", {xi, of(DType::kF16, gate, g), f32({}, {0.0625}), of(DType::kI8, {}, {0}),
                                     f32({}, {0.03125})});
    EXPECT_NE(src.find("__fmul_rn(__fmul_rn(x0, x1), __fdiv_rn(x4, x2))"), std::string::npos) << src;
    const std::string frag = c == 24 ? "Frag<i8, 8> a0;" : "Frag<i8, 16> a0;";
    EXPECT_NE(src.find(frag), std::string::npos) << src;
    expect_exact("tessel.MulQuantizeLinear", {xi, of(DType::kF16, gate, g), f32({}, {0.0173}),
                                              of(DType::kI8, {}, {-3}), f32({}, {0.041})});
    const Tensor xu = of(DType::kU8, features, random_ints(numel(features), 0, 255, rng));
    expect_exact("tessel.MulQuantizeLinear", {xu, f32(gate, g), f32({1}, {0.037f}), of(DType::kU8, {1}, {128}),
                                              f32({}, {0.02}), of(DType::kU8, {}, {131})});
  }
}

// ---- tessel.QLinearReduceMean -----------------------------------------------------------------

// The mean of int8 codes requantized, bit for bit against the reference: a squeeze-excite mean
// over NHWC pixels (the columns kernel; C = 48, 40, 13 and 6, 7x5 to 112x112 pixels),
// u8 codes with zero points, the rows kernel (the reduced dim innermost), the any-axes kernel,
// and pairs whose means sit on ties (x_scale = y_scale, codes summing to odd numbers over 2).
TEST_F(QuantizeGpu, qlinear_reduce_mean) {
  const ir::Attributes pixels = {{"axes", Ints{1, 2}}, {"keepdims", int64_t{1}}};
  for (const Shape& s : {Shape{2, 7, 5, 48}, Shape{2, 7, 5, 40}, Shape{2, 112, 112, 32}}) {
    const Tensor xi = of(DType::kI8, s, random_ints(numel(s), -128, 127, rng));
    const std::string src = expect_exact("tessel.QLinearReduceMean",
                                         {xi, f32({}, {0.05}), of(DType::kI8, {}, {0}), f32({}, {0.0173}),
                                          of(DType::kI8, {}, {0})},
                                         pixels);
    EXPECT_NE(src.find("ReduceColumns"), std::string::npos) << src;
    const Tensor xu = of(DType::kU8, s, random_ints(numel(s), 0, 255, rng));
    expect_exact("tessel.QLinearReduceMean",
                 {xu, f32({}, {0.05}), of(DType::kU8, {}, {131}), f32({}, {0.021}), of(DType::kU8, {}, {128})},
                 pixels);
    expect_exact("tessel.QLinearReduceMean", {xi, f32({}, {0.05}), of(DType::kI8, {}, {-2}), f32({}, {0.03})},
                 pixels);  // u8 out, no y zero point
  }
  // Odd channel counts: one code per vector (13 channels), two (6 u8 channels).
  expect_exact("tessel.QLinearReduceMean",
               {of(DType::kI8, {2, 7, 5, 13}, random_ints(910, -128, 127, rng)), f32({}, {0.05}),
                of(DType::kI8, {}, {0}), f32({}, {0.02}), of(DType::kI8, {}, {0})},
               pixels);
  expect_exact("tessel.QLinearReduceMean",
               {of(DType::kU8, {2, 9, 9, 6}, random_ints(972, 0, 255, rng)), f32({}, {0.05}),
                of(DType::kU8, {}, {3}), f32({}, {0.02}), of(DType::kU8, {}, {3})},
               pixels);
  const Tensor rows = of(DType::kI8, {6, 50}, random_ints(300, -128, 127, rng));
  const std::string src = expect_exact("tessel.QLinearReduceMean",
                                       {rows, f32({}, {0.05}), of(DType::kI8, {}, {1}), f32({}, {0.011}),
                                        of(DType::kI8, {}, {-5})},
                                       {{"axes", Ints{1}}, {"keepdims", int64_t{0}}});
  EXPECT_NE(src.find("ReduceRows"), std::string::npos) << src;
  const Tensor any = of(DType::kI8, {2, 3, 4, 5, 8}, random_ints(960, -128, 127, rng));
  expect_exact("tessel.QLinearReduceMean",
               {any, f32({}, {0.05}), of(DType::kI8, {}, {0}), f32({}, {0.04}), of(DType::kI8, {}, {0})},
               {{"axes", Ints{1, 3}}, {"keepdims", int64_t{1}}});
  std::vector<double> ties = random_ints(32, -128, 126, rng);
  for (int64_t k = 0; k < 16; ++k) ties[static_cast<size_t>(16 + k)] = ties[static_cast<size_t>(k)] + 1;
  expect_exact("tessel.QLinearReduceMean",
               {of(DType::kI8, {1, 2, 1, 16}, ties), f32({}, {0.05}), of(DType::kI8, {}, {0}), f32({}, {0.05}),
                of(DType::kI8, {}, {0})},
               pixels);
}

// ---- DequantizeLinear -------------------------------------------------------------------------

// Every i8 and u8 code with a zero point, per tensor: 16 codes per thread in, four 16-byte
// f32 stores out; and an odd count.
TEST_F(QuantizeGpu, dequantize_per_tensor) {
  std::vector<double> codes;
  for (int k = 0; k < 1024; ++k) codes.push_back(k % 256);
  const Tensor q_u8 = of(DType::kU8, {4, 256}, codes);
  for (double& c : codes) c -= 128;
  const Tensor q_i8 = of(DType::kI8, {4, 256}, codes);
  const std::string src =
      expect_exact("DequantizeLinear", {q_u8, f32({}, {0.0173}), of(DType::kU8, {}, {131})});
  EXPECT_NE(src.find("Frag<u8, 16> a0;"), std::string::npos) << src;
  EXPECT_NE(src.find("__fmul_rn(x0 - x2, x1)"), std::string::npos) << src;
  expect_exact("DequantizeLinear", {q_i8, f32({}, {0.31}), of(DType::kI8, {}, {-7})});
  expect_exact("DequantizeLinear", {q_i8, f32({}, {0.31})});
  expect_exact("DequantizeLinear", {of(DType::kI8, {3, 11}, random_ints(33, -128, 127, rng)),
                                    f32({1}, {0.5}), of(DType::kI8, {1}, {3})});
}

// Per channel of NHWC (axis 3) and along axis 1 of NCHW; u8 with zero points.
TEST_F(QuantizeGpu, dequantize_per_axis) {
  const Tensor q = of(DType::kU8, {2, 3, 5, 40}, random_ints(1200, 1, 255, rng));
  expect_exact("DequantizeLinear",
               {q, f32({40}, random_values(40, 0.001, 0.1, rng)),
                of(DType::kU8, {40}, random_ints(40, 1, 255, rng))},
               {{"axis", int64_t{3}}});
  expect_exact("DequantizeLinear",
               {q, f32({3}, random_values(3, 0.001, 0.1, rng)), of(DType::kU8, {3}, {0, 128, 255})},
               {{"axis", int64_t{1}}});
  const Tensor qi = of(DType::kI8, {2, 3, 5, 40}, random_ints(1200, -128, 127, rng));
  expect_exact("DequantizeLinear", {qi, f32({5}, random_values(5, 0.001, 0.1, rng))},
               {{"axis", int64_t{2}}});
}

// i32 (a quantized bias): values beyond 2^24 round to f32 before the zero point is subtracted,
// as the reference does.
TEST_F(QuantizeGpu, dequantize_i32) {
  std::vector<double> v = random_ints(256, -100000, 100000, rng);
  for (double e : {16777217.0, -16777219.0, 2147483647.0, -2147483648.0, 33554435.0})
    v.push_back(e);
  v.resize(264, 12345);
  const Tensor q = of(DType::kI32, {264}, v);
  expect_exact("DequantizeLinear", {q, f32({}, {0.000123}), of(DType::kI32, {}, {16777215})});
  expect_exact("DequantizeLinear", {q, f32({}, {0.5})});
}

// Into f16 and bf16 (the scale's dtype, opset 19): the f32 product rounded once.
TEST_F(QuantizeGpu, dequantize_to_f16_and_bf16) {
  const Tensor q = of(DType::kI8, {2, 64}, random_ints(128, -128, 127, rng));
  expect_exact("DequantizeLinear", {q, of(DType::kF16, {}, {0.0173}), of(DType::kI8, {}, {5})}, {},
               19);
  expect_exact("DequantizeLinear",
               {q, of(DType::kBF16, {64}, random_values(64, 0.001, 0.1, rng)),
                of(DType::kI8, {64}, random_ints(64, -9, 9, rng))},
               {{"axis", int64_t{1}}}, 19);
}

// ---- A QDQ block through the whole compiler -------------------------------------------------

// An int8 residual add as QDQ models write it: x and r quantized (per tensor, and per channel
// along axis 1), dequantized, added, Relu, quantized to u8 (a graph output, so its NHWC codes
// go back to NCHW through an int8 transpose) and dequantized again. Every node runs on the
// GPU; Q/DQ's float neighbours stay f32, so the engine matches the reference exactly in both
// precisions.
ir::Graph qdq_add_relu_block() {
  ir::Graph g;
  g.opset = 17;
  const int64_t c = 16;
  const Shape shape{2, c, 5, 7};
  const ir::ValueId x = g.add_value("x", {DType::kF32, shape});
  const ir::ValueId r = g.add_value("r", {DType::kF32, shape});
  g.inputs = {x, r};
  std::vector<double> scales, zps;
  for (int64_t i = 0; i < c; ++i) scales.push_back(0.01 + 0.003 * i), zps.push_back(i * 16 + 3);
  const ir::ValueId sx = g.add_constant("sx", f32({}, {1.0 / 32}));
  const ir::ValueId zx = g.add_constant("zx", of(DType::kI8, {}, {3}));
  const ir::ValueId sr = g.add_constant("sr", f32({c}, scales));
  const ir::ValueId zr = g.add_constant("zr", of(DType::kU8, {c}, zps));
  const ir::ValueId so = g.add_constant("so", f32({}, {0.0123}));
  const ir::ValueId zo = g.add_constant("zo", of(DType::kU8, {}, {5}));
  auto v = [&](const char* name) { return g.add_value(name, {}); };
  const ir::ValueId qx = v("qx"), dx = v("dx"), qr = v("qr"), dr = v("dr"), sum = v("sum"),
                    act = v("act"), q = v("q"), y = v("y");
  g.add_node("QuantizeLinear", "q_x", {x, sx, zx}, {qx});
  g.add_node("DequantizeLinear", "dq_x", {qx, sx, zx}, {dx});
  g.add_node("QuantizeLinear", "q_r", {r, sr, zr}, {qr}, {{"axis", int64_t{1}}});
  g.add_node("DequantizeLinear", "dq_r", {qr, sr, zr}, {dr}, {{"axis", int64_t{1}}});
  g.add_node("Add", "add", {dx, dr}, {sum});
  g.add_node("Relu", "relu", {sum}, {act});
  g.add_node("QuantizeLinear", "q_out", {act, so, zo}, {q});
  g.add_node("DequantizeLinear", "dq_out", {q, so, zo}, {y});
  g.outputs = {q, y};
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

// Exactly what the compiled graph says: in fp16 the Q/DQ's float side is fp16 (choose-precision),
// so the reference runs the pipeline's graph, not the model's.
TEST_F(QuantizeGpu, qdq_add_relu_block_runs_on_the_engine_exactly) {
  const ir::Graph g = qdq_add_relu_block();
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precision_name(p));
    const Session s = tessel::testing::compile_session(g, p);
    const ir::Graph compiled = passes::run_passes(g, passes::gpu_pipeline({.precision = p}));
    for (unsigned seed : {1u, 2u}) {
      const std::vector<Tensor> inputs = tessel::testing::random_inputs(g, seed);
      const std::vector<Tensor> want = runtime::cpu::run_graph(compiled, inputs);
      const std::vector<Tensor> got = s.engine()->run(inputs);
      ASSERT_EQ(got.size(), 2u);
      for (size_t i = 0; i < 2; ++i)
        EXPECT_TRUE(same_bytes(got[i], want[i]))
            << "output " << i << " " << want[i].type_str() << ", seed " << seed << ": "
            << first_difference(got[i], want[i]);
    }
  }
}

// The QDQ block with convs (compiler/cnn_blocks.h) on the engine: Q/DQ per channel along
// NHWC's axis 3, the u8 output transposed back to NCHW as u8. The convs sum in another order
// than the reference, so a code next to a rounding boundary may move by one.
TEST_F(QuantizeGpu, qdq_conv_block_runs_on_the_engine) {
  const ir::Graph g = tessel::testing::qdq_residual_block();
  const Session s = tessel::testing::compile_session(g);
  const std::vector<Tensor> inputs = tessel::testing::random_inputs(g, 3);
  const std::vector<Tensor> want = runtime::cpu::run_graph(g, inputs);
  const std::vector<Tensor> got = s.engine()->run(inputs);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(got[0].type_str(), want[0].type_str());
  int64_t moved = 0, distinct = 0;
  std::vector<bool> seen(256, false);
  for (int64_t i = 0; i < want[0].numel(); ++i) {
    const int64_t d = got[0].get_i64(i) - want[0].get_i64(i);
    EXPECT_LE(std::abs(d), 1) << "element " << i;
    moved += d != 0;
    if (!seen[static_cast<size_t>(want[0].get_i64(i))])
      seen[static_cast<size_t>(want[0].get_i64(i))] = true, ++distinct;
  }
  EXPECT_LE(moved, want[0].numel() / 50) << moved << " of " << want[0].numel() << " codes moved";
  EXPECT_GE(distinct, 8) << "the codes should spread over the u8 range";
  EXPECT_LE(tessel::testing::relative_l2(got[1], want[1]), 2e-2);
}

}  // namespace
}  // namespace tessel::kernels::cuda
