// Tests of the elementwise op family (ops/elementwise.cc, ops/elementwise_data.cc). Expected
// values are hand-computed unless a comment says they come from onnxruntime 1.20.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <string>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace tessel {
namespace {

using testing::all_close;
using testing::run1;
using testing::run_op;
using testing::user_error;

Tensor f32(Shape shape, const std::vector<float>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor i64(Shape shape, const std::vector<int64_t>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor i32(Shape shape, const std::vector<int32_t>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor i8(Shape shape, const std::vector<int8_t>& v) {
  return Tensor::from_vector(std::move(shape), v);
}
Tensor u8(Shape shape, const std::vector<uint8_t>& v) {
  return Tensor::from_vector(std::move(shape), v);
}

// A 16-bit float tensor from raw bits.
Tensor bits16(DType dtype, Shape shape, const std::vector<uint16_t>& bits) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < bits.size(); ++i) t.data_u16()[i] = bits[i];
  return t;
}
std::vector<uint16_t> bits_of(const Tensor& t) {
  return std::vector<uint16_t>(t.data_u16(), t.data_u16() + t.numel());
}

// ---- activations -------------------------------------------------------------------------

TEST(Relu, ZeroesNegativesAndPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = run1("Relu", {f32({5}, {-2, -0.5f, 0, 3, nan})});
  EXPECT_TRUE(all_close(y, f32({5}, {0, 0, 0, 3, nan})));
}

TEST(Relu, Int32) {
  Tensor y = run1("Relu", {i32({3}, {-7, 0, 9})});
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{0, 0, 9}));
}

TEST(Activations, MatchOnnxruntime) {
  // Expected outputs computed by onnxruntime 1.20 (CPU) on these inputs.
  const Tensor x = f32({7}, {-3, -1, -0.5f, 0, 0.5f, 1, 3});
  struct Case {
    const char* op;
    ir::Attributes attrs;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"Sigmoid",
       {},
       {0.047425866f, 0.26894143f, 0.37754071f, 0.5f, 0.62245929f, 0.7310586f, 0.95257413f}},
      {"HardSigmoid", {{"alpha", 0.25}, {"beta", 0.4}}, {0, 0.15f, 0.275f, 0.4f, 0.525f, 0.65f, 1}},
      {"HardSwish", {}, {0, -0.33333331f, -0.20833333f, 0, 0.29166666f, 0.66666669f, 3}},
      {"Tanh",
       {},
       {-0.99505472f, -0.76159418f, -0.46211717f, 0, 0.46211717f, 0.76159418f, 0.99505472f}},
      {"Softplus",
       {},
       {0.048587352f, 0.31326169f, 0.47407699f, 0.69314718f, 0.97407699f, 1.3132617f, 3.0485873f}},
      {"Elu", {{"alpha", 0.5}}, {-0.47510648f, -0.31606027f, -0.19673467f, 0, 0.5f, 1, 3}},
      {"LeakyRelu", {{"alpha", 0.1}}, {-0.3f, -0.1f, -0.05f, 0, 0.5f, 1, 3}},
  };
  for (const Case& c : cases) {
    Tensor y = run1(c.op, {x}, c.attrs);
    EXPECT_TRUE(all_close(y, f32({7}, c.want))) << c.op;
  }
}

TEST(Activations, MishSeluSoftsignByTheirFormulas) {
  // Python's math on the formulas: x tanh(log1p(e^x)) (YOLOv4's Mish, opset 18), SELU with
  // ONNX's default alpha and gamma, x / (1 + |x|).
  const Tensor x = f32({7}, {-3, -1, -0.5f, 0, 0.5f, 1, 3});
  EXPECT_TRUE(all_close(run1("Mish", {x}), f32({7}, {-0.14564746f, -0.30340146f, -0.22074377f, 0, 0.37524521f,
                                                     0.86509839f, 2.986535f})));
  EXPECT_TRUE(all_close(run1("Selu", {x}), f32({7}, {-1.67056873f, -1.11133074f, -0.69175819f, 0, 0.52535049f,
                                                     1.05070099f, 3.15210296f})));
  EXPECT_TRUE(all_close(run1("Softsign", {x}), f32({7}, {-0.75f, -0.5f, -0.33333333f, 0, 0.33333333f, 0.5f, 0.75f})));
  EXPECT_TRUE(all_close(run1("Shrink", {x}, {{"lambd", 0.75}, {"bias", 0.25}}),
                        f32({7}, {-2.75f, -0.75f, 0, 0, 0, 0.75f, 2.75f})));
  EXPECT_THROW(run1("Celu", {x}, {{"alpha", 0.0}}), UserError);
}

TEST(Activations, DefaultAttributes) {
  // LeakyRelu alpha 0.01, HardSigmoid 0.2/0.5, Elu alpha 1.
  const Tensor x = f32({2}, {-2, 1});
  EXPECT_TRUE(all_close(run1("LeakyRelu", {x}), f32({2}, {-0.02f, 1})));
  EXPECT_TRUE(all_close(run1("HardSigmoid", {x}), f32({2}, {0.1f, 0.7f})));
  EXPECT_TRUE(all_close(run1("Elu", {x}), f32({2}, {std::expm1(-2.0f), 1})));
}

TEST(Activations, Float64) {
  Tensor x = Tensor::from_vector<double>({2}, {-1.0, 2.0});
  Tensor y = run1("Sigmoid", {x});
  ASSERT_EQ(y.dtype(), DType::kF64);
  EXPECT_DOUBLE_EQ(y.data<double>()[0], 1.0 / (1.0 + std::exp(1.0)));
  EXPECT_DOUBLE_EQ(y.data<double>()[1], 1.0 / (1.0 + std::exp(-2.0)));
}

TEST(Activations, Float16IsComputedInF32AndRoundedOnce) {
  // Input and expected f16 bits from onnxruntime 1.20: Sigmoid of [-4, -1.5, 0, 0.7, 2.5].
  Tensor x = bits16(DType::kF16, {5}, {50176, 48640, 0, 14746, 16640});
  Tensor y = run1("Sigmoid", {x});
  ASSERT_EQ(y.dtype(), DType::kF16);
  EXPECT_EQ(bits_of(y), (std::vector<uint16_t>{9371, 12758, 14336, 14681, 15205}));
}

TEST(Activations, IntegerInputIsUserErrorNamingNode) {
  std::string msg = user_error([] { run1("Sigmoid", {i32({1}, {1})}); });
  EXPECT_CONTAINS(msg, "Sigmoid 'node'");
  EXPECT_CONTAINS(msg, "i32");
}

// ---- Gelu ---------------------------------------------------------------------------------

// Gelu by ONNX's formulas, in double.
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, MatchesOnnxruntime) {
  // Expected outputs computed by onnxruntime 1.20 (CPU, opset 20) on these inputs.
  const Tensor x = f32({9}, {-6, -3, -1, -0.5f, 0, 0.5f, 1, 3, 6});
  EXPECT_TRUE(all_close(run1("Gelu", {x}, {}, 20),
                        f32({9}, {0, -0.00404968858f, -0.158655256f, -0.154268771f, 0, 0.345731229f,
                                  0.841344714f, 2.99595022f, 6})));
  EXPECT_TRUE(all_close(run1("Gelu", {x}, {{"approximate", std::string("tanh")}}, 20),
                        f32({9}, {0, -0.00363752246f, -0.158807963f, -0.154285997f, 0, 0.345714003f,
                                  0.841192007f, 2.99636269f, 6})));
  EXPECT_TRUE(all_close(run1("Gelu", {x}, {{"approximate", std::string("none")}}, 20),
                        run1("Gelu", {x}, {}, 20)));
}

TEST(Gelu, f32_f64_f16_against_the_formulas_in_double) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-5, 5);
  std::vector<double> v(200);
  for (double& e : v) e = u(rng);
  const Tensor x64 = Tensor::from_vector<double>({200}, v);
  for (const char* approximate : {"none", "tanh"}) {
    const bool tanh = std::string(approximate) == "tanh";
    const ir::Attributes attrs{{"approximate", std::string(approximate)}};
    struct Case {
      DType dtype;
      double rtol, atol;
    };
    for (const Case& c : {Case{DType::kF64, 1e-13, 1e-15}, Case{DType::kF32, 1e-6, 1e-7},
                          Case{DType::kF16, 1e-3, 1e-4}}) {
      // Expected values start from the inputs as stored in the tested dtype.
      const Tensor x = x64.cast(c.dtype);
      Tensor want(DType::kF64, {200});
      for (int64_t i = 0; i < 200; ++i)
        want.set_f64(i, tanh ? gelu_tanh(x.get_f64(i)) : gelu_erf(x.get_f64(i)));
      const Tensor y = run1("Gelu", {x}, attrs, 20);
      EXPECT_EQ(y.dtype(), c.dtype);
      EXPECT_TRUE(all_close(y, want, c.rtol, c.atol)) << approximate << " " << dtype_name(c.dtype);
    }
  }
}

TEST(Gelu, StaysAccurateForLargeNegativeInputs) {
  // 1 + erf(x / sqrt(2)) cancels to 0 in f32 below about -5.5; Gelu is x * Phi(x), tiny but
  // not 0 there. Phi(-8) = 0.5 * erfc(8 / sqrt(2)) = 6.22096057e-16 (Python's math.erfc).
  const Tensor y = run1("Gelu", {f32({1}, {-8})}, {}, 20);
  EXPECT_NEAR(y.get_f64(0) / (-8 * 6.22096057e-16), 1.0, 1e-5);
}

TEST(Gelu, RejectsUnknownApproximationAndIntegers) {
  std::string msg = user_error([] {
    run1("Gelu", {f32({1}, {1})}, {{"approximate", std::string("fast")}}, 20);
  });
  EXPECT_CONTAINS(msg, "Gelu 'node'");
  EXPECT_CONTAINS(msg, "approximate is \"fast\", expected \"none\" or \"tanh\"");
  msg = user_error([] { run1("Gelu", {f32({1}, {1})}, {{"approximate", int64_t{1}}}, 20); });
  EXPECT_CONTAINS(msg, "Gelu 'node': attribute 'approximate' is");
  msg = user_error([] { run1("Gelu", {i32({1}, {1})}, {}, 20); });
  EXPECT_CONTAINS(msg, "Gelu 'node'");
  EXPECT_CONTAINS(msg, "input 0 has dtype i32");
}

// ---- Clip ---------------------------------------------------------------------------------

TEST(Clip, MinAndMaxInputs) {
  Tensor y = run1("Clip", {f32({4}, {-5, -1, 2, 9}), f32({}, {-2}), f32({}, {3})}, {}, 13);
  EXPECT_TRUE(all_close(y, f32({4}, {-2, -1, 2, 3})));
}

TEST(Clip, OmittedMinKeepsLowValues) {
  Tensor y = run1("Clip", {f32({3}, {-100, 0, 100}), Tensor(), f32({}, {1})}, {}, 13);
  EXPECT_TRUE(all_close(y, f32({3}, {-100, 0, 1})));
}

TEST(Clip, MinAboveMaxGivesMax) {
  // ONNX: when min > max every value becomes max.
  Tensor y = run1("Clip", {f32({3}, {-1, 5, 10}), f32({}, {6}), f32({}, {2})}, {}, 13);
  EXPECT_TRUE(all_close(y, f32({3}, {2, 2, 2})));
}

TEST(Clip, Int8) {
  Tensor y = run1("Clip", {i8({4}, {-128, -3, 4, 127}), i8({}, {-5}), i8({}, {5})}, {}, 13);
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{-5, -3, 4, 5}));
}

TEST(Clip, AttributeFormOfOpset6) {
  Tensor y = run1("Clip", {f32({3}, {-3, 0.5f, 3})}, {{"min", -1.0}, {"max", 1.0}}, 6);
  EXPECT_TRUE(all_close(y, f32({3}, {-1, 0.5f, 1})));
}

TEST(Clip, AttributeFormOnIntegersIsUserError) {
  std::string msg = user_error([] { run1("Clip", {i8({1}, {1})}, {{"min", 0.0}}, 6); });
  EXPECT_CONTAINS(msg, "Clip 'node'");
  EXPECT_CONTAINS(msg, "float inputs only");
}

TEST(Clip, NonScalarBoundIsUserError) {
  std::string msg = user_error([] { run1("Clip", {f32({2}, {1, 2}), f32({2}, {0, 0})}, {}, 13); });
  EXPECT_CONTAINS(msg, "Clip 'node'");
  EXPECT_CONTAINS(msg, "scalar");
}

// ---- PRelu --------------------------------------------------------------------------------

TEST(PRelu, PerChannelSlopeBroadcastsToInput) {
  Tensor x = f32({1, 2, 1, 2}, {-1, 2, -3, 4});
  Tensor slope = f32({2, 1, 1}, {0.5f, 0.25f});
  Tensor y = run1("PRelu", {x, slope});
  EXPECT_TRUE(all_close(y, f32({1, 2, 1, 2}, {-0.5f, 2, -0.75f, 4})));
}

TEST(PRelu, SlopeThatWouldGrowTheInputIsUserError) {
  // [2,1] broadcasts with [1,3] to [2,3], but PRelu's output must keep the input's shape.
  std::string msg = user_error([] {
    run1("PRelu", {f32({1, 3}, {1, 2, 3}), f32({2, 1}, {1, 1})});
  });
  EXPECT_CONTAINS(msg, "PRelu 'node'");
}

// ---- binary arithmetic ----------------------------------------------------------------------

TEST(Add, BroadcastsBothInputs) {
  // a: [2,1,3], b: [4,1] -> [2,4,3]; out[i][j][k] = a[i][0][k] + b[j][0].
  std::vector<float> av(6), bv(4), want;
  for (int i = 0; i < 6; ++i) av[i] = static_cast<float>(i);
  for (int j = 0; j < 4; ++j) bv[j] = 100.0f * static_cast<float>(j + 1);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(av[i * 3 + k] + bv[j]);
  Tensor y = run1("Add", {f32({2, 1, 3}, av), f32({4, 1}, bv)});
  EXPECT_TRUE(all_close(y, f32({2, 4, 3}, want)));
}

TEST(Add, PerChannelBiasOnNCHW) {
  // The shape of a conv bias add: [2,3,2,2] + [3,1,1].
  std::vector<float> xv(24), want(24);
  for (int i = 0; i < 24; ++i) {
    xv[i] = static_cast<float>(i);
    want[i] = xv[i] + 10.0f * static_cast<float>((i / 4) % 3);
  }
  Tensor y = run1("Add", {f32({2, 3, 2, 2}, xv), f32({3, 1, 1}, {0, 10, 20})});
  EXPECT_TRUE(all_close(y, f32({2, 3, 2, 2}, want)));
}

TEST(Add, ScalarOperandOnEitherSide) {
  EXPECT_TRUE(all_close(run1("Sub", {f32({}, {10}), f32({3}, {1, 2, 3})}), f32({3}, {9, 8, 7})));
  EXPECT_TRUE(
      all_close(run1("Sub", {f32({3}, {1, 2, 3}), f32({1}, {10})}), f32({3}, {-9, -8, -7})));
  Tensor rank0 = run1("Mul", {f32({}, {2}), f32({}, {3})});
  EXPECT_TRUE(bitwise_equal(rank0, f32({}, {6})));
}

TEST(Add, ZeroSizedBroadcast) {
  Tensor y = run1("Add", {f32({0, 3}, {}), f32({1, 3}, {1, 2, 3})});
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
}

TEST(Add, IncompatibleShapesAreUserErrorNamingNode) {
  std::string msg = user_error([] {
    run1("Add", {f32({2, 3}, std::vector<float>(6)), f32({4}, std::vector<float>(4))});
  });
  EXPECT_CONTAINS(msg, "Add 'node'");
  EXPECT_CONTAINS(msg, "[2,3]");
  EXPECT_CONTAINS(msg, "[4]");
}

TEST(Add, MixedDtypesAreUserError) {
  std::string msg = user_error([] { run1("Mul", {f32({1}, {1}), i64({1}, {1})}); });
  EXPECT_CONTAINS(msg, "Mul 'node'");
}

TEST(Add, BoolIsUserError) {
  Tensor b = Tensor::from_vector<bool>({1}, {true});
  EXPECT_CONTAINS(user_error([&] { run1("Add", {b, b}); }), "bool");
}

TEST(Arithmetic, IntegersWrapAround) {
  EXPECT_EQ(run1("Add", {i8({2}, {127, -128}), i8({2}, {1, -1})}).to_i64_vector(),
            (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(run1("Mul", {i32({1}, {65536}), i32({1}, {65536})}).to_i64_vector(),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(run1("Sub", {u8({1}, {3}), u8({1}, {5})}).to_i64_vector(), (std::vector<int64_t>{254}));
}

TEST(Arithmetic, Float64AndUint8) {
  Tensor a = Tensor::from_vector<double>({2}, {1.5, -2.0});
  Tensor b = Tensor::from_vector<double>({2}, {0.25, 4.0});
  EXPECT_TRUE(all_close(run1("Mul", {a, b}), Tensor::from_vector<double>({2}, {0.375, -8.0})));
  EXPECT_EQ(run1("Add", {u8({2}, {200, 7}), u8({2}, {55, 8})}).to_i64_vector(),
            (std::vector<int64_t>{255, 15}));
}

TEST(Arithmetic, Float16AddRoundsOnce) {
  // 1 + 2^-11 is exactly halfway between two halves: round to even gives 1.0 (0x3c00);
  // 1 + 3*2^-11 rounds up to 1 + 2^-9 (0x3c02).
  Tensor a = bits16(DType::kF16, {2}, {0x3c00, 0x3c00});
  Tensor b = bits16(DType::kF16, {2}, {float_to_half(1.0f / 2048), float_to_half(3.0f / 2048)});
  EXPECT_EQ(bits_of(run1("Add", {a, b})), (std::vector<uint16_t>{0x3c00, 0x3c02}));
}

TEST(Div, IntegerDivisionTruncatesTowardZero) {
  // As ONNX's reference (numpy true division cast back to int) and C do.
  Tensor y = run1("Div", {i32({5}, {-7, 7, -7, 7, std::numeric_limits<int32_t>::min()}),
                          i32({5}, {2, 2, -2, -2, -1})});
  EXPECT_EQ(y.to_i64_vector(),
            (std::vector<int64_t>{-3, 3, 3, -3, std::numeric_limits<int32_t>::min()}));
}

TEST(Div, Uint8AndFloat) {
  EXPECT_EQ(run1("Div", {u8({2}, {23, 255}), u8({2}, {5, 16})}).to_i64_vector(),
            (std::vector<int64_t>{4, 15}));
  Tensor y = run1("Div", {f32({2}, {1, 3}), f32({2}, {0, 4})});
  EXPECT_EQ(y.data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y.data<float>()[1], 0.75f);
}

TEST(Div, IntegerDivisionByZeroIsUserError) {
  std::string msg = user_error([] { run1("Div", {i64({2}, {1, 2}), i64({2}, {1, 0})}); });
  EXPECT_CONTAINS(msg, "Div 'node'");
  EXPECT_CONTAINS(msg, "division by zero");
}

// ---- Identity, Dropout ----------------------------------------------------------------------

TEST(Identity, CopiesAnyDtype) {
  Tensor x = i64({2, 2}, {1, -2, 3, 1LL << 40});
  Tensor y = run1("Identity", {x});
  EXPECT_TRUE(bitwise_equal(x, y));
  Tensor b = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_TRUE(bitwise_equal(b, run1("Identity", {b})));
}

TEST(Dropout, InferenceIsIdentityWithAllTrueMask) {
  Tensor x = f32({2, 2}, {1, -2, 3, -4});
  std::vector<Tensor> y = run_op("Dropout", {x, f32({}, {0.5f})}, {}, 2, 13);
  EXPECT_TRUE(bitwise_equal(y[0], x));
  ASSERT_EQ(y[1].dtype(), DType::kBool);
  EXPECT_EQ(y[1].to_i64_vector(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(Dropout, TrainingModeIsUserError) {
  Tensor t = Tensor::from_vector<bool>({}, {true});
  std::string msg = user_error([&] {
    run1("Dropout", {f32({1}, {1}), f32({}, {0.5f}), t}, {}, 13);
  });
  EXPECT_CONTAINS(msg, "Dropout 'node'");
  EXPECT_CONTAINS(msg, "training_mode");
  // Without a ratio the default of 0.5 applies.
  EXPECT_CONTAINS(user_error([&] {
                    run1("Dropout", {f32({1}, {1}), Tensor(), t}, {}, 13);
                  }),
                  "training_mode");
}

TEST(Dropout, TrainingWithZeroRatioIsIdentity) {
  Tensor x = f32({3}, {1, 2, 3});
  Tensor t = Tensor::from_vector<bool>({}, {true});
  EXPECT_TRUE(bitwise_equal(run1("Dropout", {x, f32({}, {0}), t}, {}, 13), x));
}

// ---- Cast -------------------------------------------------------------------------------------

ir::Attributes to(DType t) { return {{"to", int64_t{dtype_info(t).onnx_type}}}; }

TEST(Cast, FloatToIntegerTruncatesTowardZero) {
  Tensor y = run1("Cast", {f32({4}, {-2.7f, 2.7f, -0.5f, 100.0f})}, to(DType::kI32));
  ASSERT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.to_i64_vector(), (std::vector<int64_t>{-2, 2, 0, 100}));
}

TEST(Cast, IntegerNarrowingWrapsAround) {
  // The ONNX spec's example: 200 -> -56 in int8.
  EXPECT_EQ(run1("Cast", {i64({3}, {200, -1, 256})}, to(DType::kI8)).to_i64_vector(),
            (std::vector<int64_t>{-56, -1, 0}));
  EXPECT_EQ(run1("Cast", {i32({2}, {-1, 258})}, to(DType::kU8)).to_i64_vector(),
            (std::vector<int64_t>{255, 2}));
}

TEST(Cast, BoolConversions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor b = run1("Cast", {f32({4}, {0.0f, -0.0f, 2.5f, nan})}, to(DType::kBool));
  ASSERT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 1}));
  Tensor f = run1("Cast", {Tensor::from_vector<bool>({2}, {true, false})}, to(DType::kF32));
  EXPECT_TRUE(all_close(f, f32({2}, {1, 0})));
}

TEST(Cast, F32ToF16RoundsToNearestEven) {
  Tensor y =
      run1("Cast", {f32({3}, {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65520.0f})}, to(DType::kF16));
  EXPECT_EQ(bits_of(y), (std::vector<uint16_t>{0x3c00, 0x3c02, 0x7c00}));
}

TEST(Cast, F32ToBf16TruncatesAsOnnxReference) {
  // onnx/reference/ops/op_cast.py truncates (float32_to_bfloat16(truncate=True)) and the backend
  // test test_cast_FLOAT_to_BFLOAT16 expects 0x3ef5eeb0 -> 0x3ef5 (nearest even would be 0x3ef6).
  Tensor y = run1(
      "Cast", {f32({3}, {bits_float(0x3ef5eeb0u), -1.5f, std::numeric_limits<float>::quiet_NaN()})},
      to(DType::kBF16));
  const std::vector<uint16_t> b = bits_of(y);
  EXPECT_EQ(b[0], 0x3ef5);
  EXPECT_EQ(b[1], 0xbfc0);
  EXPECT_TRUE(std::isnan(bf16_to_float(b[2])));
}

TEST(Cast, EveryPairOfDtypesRoundTripsSmallValues) {
  const DType all[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8,
                       DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};
  for (DType from : all) {
    for (DType dst : all) {
      const bool boolean = from == DType::kBool || dst == DType::kBool;
      const std::vector<double> values =
          boolean ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{0, 1, 7, 100};
      Tensor x = Tensor::from_doubles(from, {4}, values);
      Tensor y = run1("Cast", {x}, to(dst));
      ASSERT_EQ(y.dtype(), dst);
      Tensor back = run1("Cast", {y}, to(from));
      EXPECT_TRUE(bitwise_equal(back, x)) << dtype_name(from) << " -> " << dtype_name(dst);
    }
  }
}

TEST(Cast, UnsupportedTargetIsUserErrorNamingIt) {
  std::string msg = user_error([] { run1("Cast", {f32({1}, {1})}, {{"to", int64_t{8}}}); });
  EXPECT_CONTAINS(msg, "Cast 'node'");
  EXPECT_CONTAINS(msg, "STRING");
}

// ---- Constant ----------------------------------------------------------------------------------

TEST(Constant, ValueTensor) {
  Tensor v = i64({2}, {4, -5});
  EXPECT_TRUE(bitwise_equal(run1("Constant", {}, {{"value", v}}), v));
}

TEST(Constant, ScalarAndListForms) {
  Tensor f = run1("Constant", {}, {{"value_floats", std::vector<double>{0.5, 2}}});
  EXPECT_TRUE(bitwise_equal(f, f32({2}, {0.5f, 2})));
  Tensor i = run1("Constant", {}, {{"value_int", int64_t{7}}});
  EXPECT_TRUE(bitwise_equal(i, i64({}, {7})));
  Tensor s = run1("Constant", {}, {{"value_float", 1.25}});
  EXPECT_TRUE(bitwise_equal(s, f32({}, {1.25f})));
}

TEST(Constant, MissingOrDuplicateValueIsUserError) {
  EXPECT_CONTAINS(user_error([] { run1("Constant", {}); }), "Constant 'node'");
  EXPECT_CONTAINS(user_error([] {
                    run1("Constant", {}, {{"value_int", int64_t{1}}, {"value_float", 1.0}});
                  }),
                  "exactly one");
}

}  // namespace
}  // namespace tessel
