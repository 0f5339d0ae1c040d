// The tessel.* ops (src/ops/tessel_*.cc): hand-computed values, agreement with the ONNX ops
// they generalise (through explicit Transpose nodes, independently of any pass), and the
// errors their schemas raise. They live beside the pass tests because the passes are their
// only producers.
#include <gtest/gtest.h>

#include "ir/infer.h"
#include "ir/parser.h"
#include "passes/pass_test_util.h"
#include "runtime/cpu/executor.h"

namespace tessel {
namespace {

// Runs a graph on the given input values (converted to each input's dtype) and returns output
// 0 as doubles, after checking that the declared output type is the inferred one.
std::vector<double> run(const std::string& text, const std::vector<std::vector<double>>& inputs) {
  ir::Graph g = ir::parse_graph(text);
  ir::Graph inferred = g;
  ir::infer_types(inferred, ir::OpRegistry::global());
  EXPECT_EQ(inferred.type(inferred.outputs[0]).str(), g.type(g.outputs[0]).str());
  std::vector<Tensor> ins;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::TensorType& t = g.type(g.inputs[i]);
    ins.push_back(Tensor::from_doubles(t.dtype, t.shape, inputs.at(i)));
  }
  const Tensor out = runtime::cpu::run_graph(g, ins).at(0);
  std::vector<double> r;
  for (int64_t i = 0; i < out.numel(); ++i) r.push_back(out.get_f64(i));
  return r;
}

// The UserError that type inference raises on the graph, or "" if none.
std::string infer_error(const std::string& text) {
  ir::Graph g = ir::parse_graph(text);
  try {
    ir::infer_types(g, ir::OpRegistry::global());
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

using V = std::vector<double>;

// y[co] = sum_ci x[ci] * w[co, 0, 0, ci] + b[co] with OHWI w: co0 = 1+2, co1 = 1-2,
// co2 = 0.5+4 (+1 bias).
constexpr char kPointwise[] = R"(graph @g opset 17 {
  input %x : f32[1,1,1,2]
  const %w : f32[3,1,1,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  %y = tessel.Conv(%x, %w, %b) EPILOGUE : f32[1,1,1,3] @"c"
  output %y
})";

std::string with(std::string text, const std::string& key, const std::string& value) {
  return text.replace(text.find(key), key.size(), value);
}

TEST(TesselConv, OhwiWeightsAndBias) {
  EXPECT_EQ(run(with(kPointwise, "EPILOGUE", ""), {{1, 2}}), (V{3, -1, 5.5}));
}

TEST(TesselConv, ClipStep) {
  const std::string attrs =
      R"({epilogue = ["clip"], epilogue_alpha = [0.0], epilogue_beta = [4.0]})";
  EXPECT_EQ(run(with(kPointwise, "EPILOGUE", attrs), {{1, 2}}), (V{3, 0, 4}));
}

// 3x3 image 1..9, kernel [[1, 0], [0, -1]], stride 2, pads [t, l, b, r] = [0, 0, 1, 1]:
// windows at (0,0): 1 - 5, (0,2): 3 - pad, (2,0): 7 - pad, (2,2): 9. Then leaky_relu(0.5).
TEST(TesselConv, PadsAreTopLeftBottomRight) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,3,3,1]
  const %w : f32[1,2,2,1] = [1.0, 0.0, 0.0, -1.0]
  %y = tessel.Conv(%x, %w) {strides = [2, 2], pads = [0, 0, 1, 1], epilogue = ["leaky_relu"], epilogue_alpha = [0.5], epilogue_beta = [0.0]} : f32[1,2,2,1] @"c"
  output %y
})";
  EXPECT_EQ(run(text, {{1, 2, 3, 4, 5, 6, 7, 8, 9}}), (V{-2, 3, 7, 9}));
}

// [3, -1, 5.5] + R [-5, 2, 0] = [-2, 1, 5.5], then relu.
TEST(TesselConv, ResidualThenRelu) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,1,1,2]
  input %r : f32[1,1,1,3]
  const %w : f32[3,1,1,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  %y = tessel.Conv(%x, %w, %b, %r) {epilogue = ["add_residual", "relu"]} : f32[1,1,1,3] @"c"
  output %y
})";
  EXPECT_EQ(run(text, {{1, 2}, {-5, 2, 0}}), (V{0, 1, 5.5}));
}

// An identity 1x1 conv over 8 channels [0..7], stored by depth_to_space with block 2 (C' = 2).
// DCR: out[i, j, c] = y[(2i + j) * 2 + c] -> 0..7 in order.
// CRD: out[i, j, c] = y[4c + 2i + j]      -> (0,0): [0, 4], (0,1): [1, 5], (1,0): [2, 6], ...
std::string depth_to_space_conv(const std::string& mode) {
  std::string w;
  for (int o = 0; o < 8; ++o)
    for (int i = 0; i < 8; ++i) w += std::string(w.empty() ? "" : ", ") + (o == i ? "1.0" : "0.0");
  return R"(graph @g opset 17 {
  input %x : f32[1,1,1,8]
  const %w : f32[8,1,1,8] = [)" +
         w + R"(]
  %y = tessel.Conv(%x, %w) {store = "depth_to_space", block = 2, mode = ")" +
         mode +
         R"("} : f32[1,2,2,2] @"c"
  output %y
})";
}

TEST(TesselConv, DepthToSpaceStore) {
  const V x = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(run(depth_to_space_conv("DCR"), {x}), (V{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(run(depth_to_space_conv("CRD"), {x}), (V{0, 4, 1, 5, 2, 6, 3, 7}));
}

// fp16 activations and weights with an fp32 bias; the output is fp16, rounded once. With
// x = [1, 2^-11], w = [1, 1], b = 2^-11 the exact result 1 + 2^-10 is an fp16 number; rounding
// the sum x.w = 1 + 2^-11 to fp16 first (a tie, to even: 1) would give 1 + 2^-11 -> 1 again.
TEST(TesselConv, Fp16WithFp32BiasRoundsOnce) {
  const char* text = R"(graph @g opset 17 {
  input %x : f16[1,1,1,2]
  const %w : f16[1,1,1,2] = [1.0, 1.0]
  const %b : f32[1] = [0.00048828125]
  %y = tessel.Conv(%x, %w, %b) : f16[1,1,1,1] @"c"
  output %y
})";
  EXPECT_EQ(run(text, {{1.0, 0.00048828125}}), (V{1.0009765625}));
}

// Against ONNX's Conv (NCHW, OIHW) with every window attribute, the layouts converted by
// explicit Transposes (the weight's at run time, so no pass is involved).
TEST(TesselConv, MatchesOnnxConvWithGroupsStridesDilations) {
  std::string w, b;
  for (int i = 0; i < 4 * 2 * 3 * 2; ++i)
    w += std::string(i ? ", " : "") + std::to_string((i * 37 % 17 - 8) / 8.0);
  const char* attrs = "group = 2, strides = [2, 1], pads = [1, 0, 2, 1], dilations = [1, 2]";
  const std::string onnx = std::string(R"(graph @g opset 17 {
  input %x : f32[2,4,7,6]
  const %w : f32[4,2,3,2] = [)") +
                           w + R"(]
  const %b : f32[4] = [0.5, -0.25, 1.0, 0.0]
  %y = Conv(%x, %w, %b) {)" +
                           attrs + R"(} : f32[2,4,4,5] @"c"
  output %y
})";
  const std::string tessel = std::string(R"(graph @g opset 17 {
  input %x : f32[2,4,7,6]
  const %w : f32[4,2,3,2] = [)") +
                             w + R"(]
  const %b : f32[4] = [0.5, -0.25, 1.0, 0.0]
  %xt = Transpose(%x) {perm = [0, 2, 3, 1]} : f32[2,7,6,4] @"xt"
  %wt = Transpose(%w) {perm = [0, 2, 3, 1]} : f32[4,3,2,2] @"wt"
  %yt = tessel.Conv(%xt, %wt, %b) {)" +
                             attrs + R"(} : f32[2,4,5,4] @"c"
  %y = Transpose(%yt) {perm = [0, 3, 1, 2]} : f32[2,4,4,5] @"yt"
  output %y
})";
  testing::expect_same_numerics(ir::parse_graph(onnx), ir::parse_graph(tessel));
}

// The depth_to_space store (a 6-D view transpose of the NHWC result) against the conv followed
// by tessel.DepthToSpace (ONNX's NCHW DepthToSpace between transposes): two implementations.
TEST(TesselConv, DepthToSpaceStoreMatchesSeparateOp) {
  std::string w;
  for (int i = 0; i < 8 * 3 * 3 * 2; ++i)
    w += std::string(i ? ", " : "") + std::to_string((i * 29 % 13 - 6) / 6.0);
  for (const char* mode : {"DCR", "CRD"}) {
    const std::string head = std::string(R"(graph @g opset 17 {
  input %x : f32[1,3,4,2]
  const %w : f32[8,3,3,2] = [)") +
                             w + "]\n";
    const std::string fused =
        head +
        R"(  %y = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1], store = "depth_to_space", block = 2, mode = ")" +
        mode + R"("} : f32[1,6,8,2] @"c"
  output %y
})";
    const std::string separate =
        head + R"(  %c = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1]} : f32[1,3,4,8] @"c"
  %y = tessel.DepthToSpace(%c) {blocksize = 2, mode = ")" +
        mode + R"("} : f32[1,6,8,2] @"d"
  output %y
})";
    testing::expect_same_numerics(ir::parse_graph(fused), ir::parse_graph(separate));
  }
}

TEST(TesselConv, Errors) {
  const std::string base = kPointwise;
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({auto_pad = "SAME_UPPER"})")),
            "tessel.Conv 'c': unknown attribute 'auto_pad' (expected strides, pads, dilations, "
            "group, epilogue, epilogue_alpha, epilogue_beta, store, block, mode, out_dtype, "
            "input_layout, int8_refusal, prologue)");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({epilogue = ["add_residual"]})")),
            "tessel.Conv 'c': epilogue step 'add_residual' needs the residual input R");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({epilogue = ["swish"]})")),
            "tessel.Conv 'c': unknown epilogue step 'swish' (known: relu, leaky_relu, clip, "
            "sigmoid, hardswish, silu, gelu, gelu_tanh, add_residual, mul, quantize, add_residual_scaled, "
            "tanh, mish, hard_sigmoid, elu, round, silu_qgate, quantize_unit)");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE",
                             R"({epilogue = ["quantize_unit"], epilogue_alpha = [5.0], epilogue_beta = [2.5]})")),
            "tessel.Conv 'c': epilogue step 'quantize_unit' needs integral bounds lo < hi within "
            "[-4194304, 4194304], got [5, 2.5]");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({epilogue = ["clip"], epilogue_alpha = [0.0]})")),
            "tessel.Conv 'c': epilogue step 'clip' needs 'epilogue_alpha' and 'epilogue_beta'");
  EXPECT_EQ(
      infer_error(with(base, "EPILOGUE", R"({epilogue = ["relu"], epilogue_alpha = [0.0, 1.0]})")),
      "tessel.Conv 'c': 'epilogue_alpha' has 2 values, expected one per epilogue step (1)");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({store = "depth_to_space", block = 2})")),
            "tessel.Conv 'c': 3 output channels are not divisible by block^2 = 4 (store = "
            "depth_to_space)");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({store = "depth_to_space", block = 0})")),
            "tessel.Conv 'c': block 0 must be positive");
  EXPECT_EQ(
      infer_error(with(base, "EPILOGUE", R"({store = "depth_to_space", block = 1, mode = "RCD"})")),
      "tessel.Conv 'c': mode 'RCD' is not supported (DCR, CRD)");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({block = 2})")),
            "tessel.Conv 'c': 'block' and 'mode' apply only to the depth_to_space stores");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({epilogue = [1, 2]})")),
            "tessel.Conv 'c': attribute 'epilogue' is ints, expected a list of strings");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({store = "nhcw"})")),
            "tessel.Conv 'c': store 'nhcw' is not supported (nhwc, nchw, depth_to_space, "
            "depth_to_space_nchw)");
  // The ONNX Conv's own check, reported for the tessel node.
  EXPECT_EQ(infer_error(with(with(base, "f32[1,1,1,2]", "f32[1,1,1,4]"), "EPILOGUE", "")),
            "tessel.Conv 'c': weight W [3,1,1,2] has 2 input channels per group, expected 4 / "
            "group 1");
  EXPECT_EQ(infer_error(with(base, "EPILOGUE", R"({strides = [0, 1]})")),
            "tessel.Conv 'c': attribute 'strides' value 0 must be >= 1 (checked as ONNX Conv on "
            "the NCHW view)");
  // Bias: f32 or X's dtype, one per output channel.
  EXPECT_EQ(infer_error(with(with(base, "f32[3] = [0.0, 0.0, 1.0]", "f64[3] = [0.0, 0.0, 1.0]"),
                             "EPILOGUE", "")),
            "tessel.Conv 'c': bias B has dtype f64, expected f32");
  EXPECT_EQ(infer_error(with(with(base, "f32[3] = [0.0, 0.0, 1.0]", "f32[2] = [0.0, 1.0]"),
                             "EPILOGUE", "")),
            "tessel.Conv 'c': bias B has shape [2], expected [3] (one value per output channel)");
}

TEST(TesselConv, ResidualMustMatchThePreStoreOutput) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,1,1,2]
  input %r : f32[1,1,1,2]
  const %w : f32[3,1,1,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  %y = tessel.Conv(%x, %w, _, %r) {epilogue = ["add_residual"]} : f32[1,1,1,3] @"c"
  output %y
})";
  EXPECT_EQ(infer_error(text),
            "tessel.Conv 'c': residual R is f32[1,1,1,2], expected "
            "f32[1,1,1,3] (the output before the store)");
  EXPECT_EQ(infer_error(with(text, R"( {epilogue = ["add_residual"]})", "")),
            "tessel.Conv 'c': residual input R is given, so the epilogue needs exactly one "
            "'add_residual' step, it has 0");
}

// An int8 contraction reads a float residual in its own dtype (f32, f16 or bf16), no other.
TEST(TesselConv, Int8ContractionsFloatResidualDtypes) {
  const std::string text = R"(graph @g opset 17 {
  input %x : i8[1,1,1,2]
  input %r : RDTYPE[1,1,1,3]
  const %w : i8[3,1,1,2] = [1, 1, 1, -1, 2, 2]
  const %s : f32[3] = [0.5, 0.25, 0.125]
  %y = tessel.Conv(%x, %w, _, %r, %s) {epilogue = ["add_residual"]} : f32[1,1,1,3] @"c"
  output %y
})";
  for (const char* ok : {"f32", "f16", "bf16"}) EXPECT_EQ(infer_error(with(text, "RDTYPE", ok)), "") << ok;
  EXPECT_EQ(infer_error(with(text, "RDTYPE", "f64")),
            "tessel.Conv 'c': residual R is f64[1,1,1,3], expected f32, f16 or bf16 of shape "
            "[1,1,1,3] (the output before the store)");
}

// A [1,2] x W[3,2]^T + b = [3, -1, 5.5]; + R [1, 1, -6] = [4, 0, -0.5]; relu.
TEST(TesselGemm, BiasResidualRelu) {
  const char* text = R"(graph @g opset 17 {
  input %a : f32[1,2]
  input %r : f32[1,3]
  const %w : f32[3,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  %y = tessel.Gemm(%a, %w, %b, %r) {epilogue = ["add_residual", "relu"]} : f32[1,3] @"fc"
  output %y
})";
  EXPECT_EQ(run(text, {{1, 2}, {1, 1, -6}}), (V{4, 0, 0}));
  EXPECT_EQ(infer_error(with(text, R"({epilogue)", R"({store = "nhwc", epilogue)")),
            "tessel.Gemm 'fc': unknown attribute 'store' (expected epilogue, epilogue_alpha, "
            "epilogue_beta, out_dtype, trans_a, trans_b, int8_refusal)");
}

// A stored [K, M] = [2, 1] and W stored [K, N] = [2, 3] (bench-op's TN and NN GEMM layouts):
// y = a^T w by hand, [1, 2] x [[1, 1, 0.5], [1, -1, 2]] = [3, -1, 4.5].
TEST(TesselGemm, TransposedOperands) {
  const char* text = R"(graph @g opset 17 {
  input %a : f32[2,1]
  const %w : f32[2,3] = [1.0, 1.0, 0.5, 1.0, -1.0, 2.0]
  %y = tessel.Gemm(%a, %w) {trans_a = 1, trans_b = 0} : f32[1,3] @"fc"
  output %y
})";
  EXPECT_EQ(run(text, {{1, 2}}), (V{3, -1, 4.5}));
  EXPECT_EQ(infer_error(with(text, "trans_a = 1", "trans_a = 2")),
            "tessel.Gemm 'fc': attribute 'trans_a' is 2, expected 0 or 1");
}

// NHWC [1,2,2,2]: channel 0 is [1, 2, 3, 4] and channel 1 is [8, 7, 6, 5] over the 2x2 image.
std::string nhwc_op(const std::string& op, const std::string& attrs, const std::string& out) {
  return R"(graph @g opset 17 {
  input %x : f32[1,2,2,2]
  %y = )" +
         op + "(%x) " + attrs + " : " + out + R"( @"p"
  output %y
})";
}

TEST(TesselLayoutOps, PoolsReduceEachChannel) {
  const V x = {1, 8, 2, 7, 3, 6, 4, 5};
  EXPECT_EQ(run(nhwc_op("tessel.MaxPool", "{kernel_shape = [2, 2]}", "f32[1,1,1,2]"), {x}),
            (V{4, 8}));
  EXPECT_EQ(run(nhwc_op("tessel.AveragePool", "{kernel_shape = [2, 2]}", "f32[1,1,1,2]"), {x}),
            (V{2.5, 6.5}));
  EXPECT_EQ(run(nhwc_op("tessel.GlobalAveragePool", "", "f32[1,1,1,2]"), {x}), (V{2.5, 6.5}));
  // Pads and strides are ONNX's: 2x2 windows at stride 2 over the image padded by 1 each
  // cover one pixel, so the result is the input.
  EXPECT_EQ(
      run(nhwc_op("tessel.MaxPool",
                  "{kernel_shape = [2, 2], pads = [1, 1, 1, 1], strides = [2, 2]}", "f32[1,2,2,2]"),
          {x}),
      (V{1, 8, 2, 7, 3, 6, 4, 5}));
}

TEST(TesselLayoutOps, DepthToSpace) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,1,1,8]
  %y = tessel.DepthToSpace(%x) {blocksize = 2, mode = "CRD"} : f32[1,2,2,2] @"d"
  output %y
})";
  EXPECT_EQ(run(text, {{0, 1, 2, 3, 4, 5, 6, 7}}), (V{0, 4, 1, 5, 2, 6, 3, 7}));
}

TEST(TesselLayoutOps, Errors) {
  EXPECT_EQ(infer_error(nhwc_op("tessel.MaxPool", "{kernel_shape = [2, 2], storage_order = 1}",
                                "f32[1,1,1,2]")),
            "tessel.MaxPool 'p': unknown attribute 'storage_order' (expected auto_pad, ceil_mode, "
            "dilations, kernel_shape, pads, strides)");
  // The ONNX op's check, reported for the tessel node.
  EXPECT_EQ(infer_error(nhwc_op("tessel.MaxPool", "{kernel_shape = [2]}", "f32[1,1,1,2]")),
            "tessel.MaxPool 'p': kernel_shape [2] has 1 values, expected 2 for input X [1,2,2,2] "
            "(checked as ONNX MaxPool on the NCHW view)");
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// The int8 form: X and W i8, S f32 per output channel; acc * S + B, then the steps.
constexpr char kInt8[] = R"(graph @g opset 17 {
  input %x : i8[1,1,1,2]
  const %w : i8[3,1,1,2] = [1, 1, 1, -1, 3, 2]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  const %s : f32[3] = [0.5, 0.25, 2.0]
  %y = tessel.Conv(%x, %w, %b, _, %s) EPILOGUE : YTYPE @"c"
  output %y
})";

std::string int8_conv(const std::string& epilogue, const std::string& y = "f32[1,1,1,3]") {
  return with(with(kInt8, "EPILOGUE", epilogue), "YTYPE", y);
}

// x = [4, -2]: acc = [2, 6, 8]; * S + B = [1, 1.5, 17]; quantize by 0.5 = [2, 3, 34] (ties to
// even: 1.5 / 0.5 = 3 exactly; 17 / 0.5 = 34), then mul 0.5 back.
TEST(TesselConvInt8, ScaleBiasQuantizeAndInt8Store) {
  ir::Graph g = ir::parse_graph(int8_conv(R"({epilogue = ["quantize"], epilogue_alpha = [0.5], out_dtype = "i8"})",
                                          "i8[1,1,1,3]"));
  const Tensor x = Tensor::from_doubles(DType::kI8, {1, 1, 1, 2}, {4, -2});
  const Tensor out = runtime::cpu::run_graph(g, {x}).at(0);
  EXPECT_EQ(out.dtype(), DType::kI8);
  EXPECT_EQ(out.to_i64_vector(), (std::vector<int64_t>{2, 3, 34}));
  EXPECT_EQ(run(int8_conv(""), {{4, -2}}), (V{1.0, 1.5, 17.0}));
}

TEST(TesselConvInt8, Errors) {
  EXPECT_EQ(infer_error(int8_conv("")), "");
  // W i8 with a float X.
  std::string float_x = int8_conv("");
  float_x.replace(float_x.find("i8[1,1,1,2]"), 11, "f32[1,1,1,2]");
  EXPECT_EQ(infer_error(float_x), "tessel.Conv 'c': W is i8, so X must be i8 or u8, it is f32");
  // No S.
  std::string no_s = int8_conv("");
  no_s.replace(no_s.find(", _, %s"), 7, "");
  EXPECT_EQ(infer_error(no_s),
            "tessel.Conv 'c': an int8 contraction needs its dequantization scale S f32[3] as input 4");
  // S on a float conv.
  EXPECT_EQ(infer_error(with(kPointwise, "%b) EPILOGUE", "%b, _, %b)")),
            "tessel.Conv 'c': the dequantization scale S (input 4) belongs to int8 contractions "
            "and int8 inputs, X is f32 and W f32");
  // out_dtype i8 without a last quantize step.
  EXPECT_EQ(infer_error(int8_conv(R"({out_dtype = "i8"})", "i8[1,1,1,3]")),
            "tessel.Conv 'c': out_dtype i8 stores a quantized value: the last epilogue step must be "
            "'quantize', or relu and clip steps with integral bounds after it");
  // A clip after the quantize that leaves the integers (fold_requantize writes integral ones).
  EXPECT_EQ(infer_error(int8_conv(R"({epilogue = ["quantize", "clip"], epilogue_alpha = [0.5, 0.0], )"
                                  R"(epilogue_beta = [0.0, 6.5], out_dtype = "i8"})",
                                  "i8[1,1,1,3]")),
            "tessel.Conv 'c': out_dtype i8 stores a quantized value: the last epilogue step must be "
            "'quantize', or relu and clip steps with integral bounds after it");
}

// onnxruntime's uint8 activations (zero point 0) as X of the int8 contraction, and a
// QuantizeLinear to uint8 as its epilogue round(s), clip(0, 255) with out_dtype u8. x = [200, 3]:
// acc = [203, 197, 606]; * S + B = [101.5, 49.25, 1213]; by 0.5: 203, 98.5 -> 98 (ties to
// even), 2426 -> 255 (saturated).
TEST(TesselConvInt8, Uint8InputAndStore) {
  std::string text = int8_conv(R"({epilogue = ["round", "clip"], epilogue_alpha = [0.5, 0.0], )"
                               R"(epilogue_beta = [0.0, 255.0], out_dtype = "u8"})",
                               "u8[1,1,1,3]");
  text.replace(text.find("i8[1,1,1,2]"), 11, "u8[1,1,1,2]");
  ir::Graph g = ir::parse_graph(text);
  const Tensor x = Tensor::from_doubles(DType::kU8, {1, 1, 1, 2}, {200, 3});
  const Tensor out = runtime::cpu::run_graph(g, {x}).at(0);
  EXPECT_EQ(out.dtype(), DType::kU8);
  EXPECT_EQ(out.to_i64_vector(), (std::vector<int64_t>{203, 98, 255}));
  // A clip that leaves [0, 255] (an int8 quantize alone reaches -128) is no u8 value.
  for (const char* steps : {R"({epilogue = ["quantize"], epilogue_alpha = [0.5], out_dtype = "u8"})",
                            R"({epilogue = ["round", "clip"], epilogue_alpha = [0.5, -1.0], )"
                            R"(epilogue_beta = [0.0, 255.0], out_dtype = "u8"})"}) {
    EXPECT_EQ(infer_error(int8_conv(steps, "u8[1,1,1,3]")),
              "tessel.Conv 'c': out_dtype u8 stores an integer of [0, 255]: the epilogue must end with "
              "'quantize' or 'round' and then relu and clip steps with integral bounds that keep it in "
              "that range")
        << steps;
  }
}

// An int8 contraction's scaled residual R may be uint8 (zero point 0): v + alpha * R.
TEST(TesselConvInt8, Uint8ScaledResidual) {
  std::string text = int8_conv(R"({epilogue = ["add_residual_scaled"], epilogue_alpha = [0.5]})");
  text.replace(text.find("%b, _, %s"), 9, "%b, %r, %s");
  text.replace(text.find("  const %w"), 0, "  input %r : RTYPE[1,1,1,3]\n");
  // acc * S + B = [1, 1.5, 17] (x = [4, -2]) plus R / 2 = [100, 0.5, 127.5].
  EXPECT_EQ(run(with(text, "RTYPE", "u8"), {{4, -2}, {198, 0, 221}}), (V{100.0, 1.5, 127.5}));
  EXPECT_EQ(infer_error(with(text, "RTYPE", "i32")),
            "tessel.Conv 'c': residual R is i32[1,1,1,3], expected i8 or u8 of shape [1,1,1,3] (the "
            "output before the store)");
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// The int8-input form (fold-qdq's depthwise conv over a QDQ model's int8 activation): X i8,
// W float (here f16: the integers are exact in it), S f32 [C]: conv(X, W) * S + B, in W's dtype.
// A 1x2 image of 2 channels, x = [4, -128 | -2, 127], under a 1x2 window: c0 = 4 * 0.5 - 2 * 1.5
// = -1, c1 = -128 * 0.25 + 127 * -1 = -159; * S [0.5, 0.125] + B [1, 2] = [0.5, -17.875].
constexpr char kInt8Input[] = R"(graph @g opset 17 {
  input %x : XTYPE
  const %w : f16[2,1,2,1] = [0.5, 1.5, 0.25, -1.0]
  const %b : f32[2] = [1.0, 2.0]
  const %s : f32[2] = [0.5, 0.125]
  %y = tessel.Conv(%x, %w, %b, _, %s) ATTRS : f16[1,1,1,2] @"c"
  output %y
})";

std::string int8_input_conv(const std::string& attrs, const std::string& x = "i8[1,1,2,2]") {
  return with(with(kInt8Input, "XTYPE", x), "ATTRS", attrs);
}

TEST(TesselConvInt8Input, DepthwiseReadsTheIntegersAndScales) {
  EXPECT_EQ(run(int8_input_conv("{group = 2}"), {{4, -128, -2, 127}}), (V{0.5, -17.875}));
  // A quantize step after it: -17.875 / 0.25 = -71.5, a tie, to the even -72.
  std::string quantized = int8_input_conv(
      R"({group = 2, epilogue = ["quantize"], epilogue_alpha = [0.25], out_dtype = "i8"})");
  quantized = with(quantized, ": f16[1,1,1,2]", ": i8[1,1,1,2]");
  EXPECT_EQ(run(quantized, {{4, -128, -2, 127}}), (V{2, -72}));
}

// A stem reading a QDQ model's int8 input in NCHW (fuse's fold of its DequantizeLinear): the same
// numbers as the NHWC depthwise conv above, X's planes in NCHW order; and dense (group 1).
TEST(TesselConvInt8Input, NchwStemsReadTheIntegersAndScale) {
  EXPECT_EQ(run(int8_input_conv(R"({group = 2, input_layout = "nchw"})", "i8[1,2,1,2]"), {{4, -2, -128, 127}}),
            (V{0.5, -17.875}));
  // Group 1, X's planes [4, -128] and [-2, 127], W OHWI: c0 = 4 * 0.5 - 2 * 0.25 - 128 * 1.5 +
  // 127 * -1 = -317.5, c1 = 4 - 2 - 128 + 127 = 1; * S [0.5, 0.125] + B [1, 2] = [-157.75, 2.125].
  std::string dense = with(int8_input_conv(R"({input_layout = "nchw"})", "i8[1,2,1,2]"),
                           "f16[2,1,2,1] = [0.5, 1.5, 0.25, -1.0]",
                           "f16[2,1,2,2] = [0.5, 0.25, 1.5, -1.0, 1.0, 1.0, 1.0, 1.0]");
  EXPECT_EQ(run(dense, {{4, -128, -2, 127}}), (V{-157.75, 2.125}));
}

TEST(TesselConvInt8Input, OnlyDepthwiseConvsAndStemsWithTheirScaleTakeIt) {
  EXPECT_EQ(infer_error(int8_input_conv("{group = 2}")), "");
  const std::string only_depthwise =
      "only a depthwise tessel.Conv (group = channels, W [C, KH, KW, 1]) over an NHWC X without "
      "an affine prologue, or a conv reading NCHW X without a prologue (a stem), reads int8 with "
      "float weights";
  // Two channels in one group (W [2, 1, 2, 2] would be the dense conv's; group 1 reads 2).
  std::string dense = with(int8_input_conv("{}"), "f16[2,1,2,1] = [0.5, 1.5, 0.25, -1.0]",
                           "f16[2,1,2,2] = [0.5, 1.5, 0.25, -1.0, 1.0, 1.0, 1.0, 1.0]");
  EXPECT_EQ(infer_error(dense), "tessel.Conv 'c': X is i8 and W f16: " + only_depthwise);
  // A stem with an affine prologue.
  std::string prologue = with(int8_input_conv(R"({group = 2, input_layout = "nchw", prologue = "affine"})",
                                              "i8[1,2,1,2]"),
                              "_, %s)", "_, %s, %p)");
  prologue = with(prologue, "  %y =", "  const %p : f32[2,2] = [1.0, 1.0, 0.0, 0.0]\n  %y =");
  EXPECT_EQ(infer_error(prologue), "tessel.Conv 'c': X is i8 and W f16: " + only_depthwise);
  std::string no_s = int8_input_conv("{group = 2}");
  no_s = with(no_s, ", _, %s)", ")");
  EXPECT_EQ(infer_error(no_s),
            "tessel.Conv 'c': an int8 input needs its dequantization scale S f32[2] as input 4");
  EXPECT_EQ(infer_error(with(int8_input_conv("{group = 2}"), "%s : f32[2]", "%s : f16[2]")),
            "tessel.Conv 'c': an int8 input needs its dequantization scale S f32[2] as input 4, "
            "it is f16[2]");
  EXPECT_EQ(infer_error(int8_input_conv("{group = 2}", "u8[1,1,2,2]")),
            "tessel.Conv 'c': input X has dtype u8, expected f32, f16, bf16 or f64");
  EXPECT_EQ(infer_error(R"(graph @g opset 17 {
  input %a : i8[1,2]
  const %w : f32[3,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %s : f32[3] = [0.5, 0.5, 0.5]
  %y = tessel.Gemm(%a, %w, _, _, %s) : f32[1,3] @"c"
  output %y
})"),
            "tessel.Gemm 'c': A is i8 and W f32: " + only_depthwise);
}

// The prologue: X read as relu(X * P[0] + P[1]) per input channel before the 1x1 conv.
constexpr char kPrologue[] = R"(graph @g opset 17 {
  input %x : f32[1,1,1,2]
  const %w : f32[3,1,1,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  const %p : f32[2,2] = [2.0, -1.0, 1.0, 0.5]
  %y = tessel.Conv(%x, %w, %b, _, _, %p) ATTRS : f32[1,1,1,3] @"c"
  output %y
})";

// x = [1, 3]: x * [2, -1] + [1, 0.5] = [3, -2.5]; affine_relu reads [3, 0]: y = [3, 3, 2.5];
// affine reads [3, -2.5]: y = [0.5, 5.5, -2.5].
TEST(TesselConvPrologue, AffineThenReluBeforeTheConv) {
  EXPECT_EQ(run(with(kPrologue, "ATTRS", R"({prologue = "affine_relu"})"), {{1, 3}}), (V{3.0, 3.0, 2.5}));
  EXPECT_EQ(run(with(kPrologue, "ATTRS", R"({prologue = "affine"})"), {{1, 3}}), (V{0.5, 5.5, -2.5}));
}

TEST(TesselConvPrologue, Errors) {
  EXPECT_EQ(infer_error(with(kPrologue, "ATTRS", R"({prologue = "affine"})")), "");
  EXPECT_EQ(infer_error(with(kPrologue, "ATTRS", R"({prologue = "gelu"})")),
            "tessel.Conv 'c': prologue 'gelu' is not supported (affine, affine_relu, requantize)");
  EXPECT_EQ(infer_error(with(kPrologue, "ATTRS", "")),
            "tessel.Conv 'c': input 5 is given, so the node needs a 'prologue' attribute");
  std::string no_p = with(kPrologue, "ATTRS", R"({prologue = "affine"})");
  no_p.replace(no_p.find(", _, _, %p"), 10, "");
  EXPECT_EQ(infer_error(no_p), "tessel.Conv 'c': prologue 'affine' needs its operand P as input 5");
  std::string wrong = with(kPrologue, "ATTRS", R"({prologue = "affine"})");
  wrong.replace(wrong.find("f32[2,2]"), 8, "f32[1,4]");
  EXPECT_EQ(infer_error(wrong),
            "tessel.Conv 'c': prologue operand P is f32[1,4], expected f32[2,2] (scale and shift per "
            "input channel)");
  std::string nchw = with(kPrologue, "ATTRS", R"({input_layout = "nchw", prologue = "affine"})");
  nchw.replace(nchw.find("input %x : f32[1,1,1,2]"), 23, "input %x : f32[1,2,1,1]");
  EXPECT_EQ(infer_error(nchw),
            "tessel.Conv 'c': a prologue reads a float NHWC X (input_layout nhwc, float W)");
  EXPECT_EQ(infer_error(with(kPrologue, "ATTRS", R"({prologue = "requantize"})")),
            "tessel.Conv 'c': prologue 'requantize' reads the int8 NHWC X of a depthwise conv");
}

// The prologue "requantize": a depthwise conv's int8 X read as clamp(rne(X * P[0, c])). x = [2,
// 50]: 2 * 0.75 = 1.5 rounds to 2, 50 * 3 saturates to 127; y = [2 * 1, 127 * 2] * S = [1, 63.5].
// x = [-6, -50]: -4.5 rounds to -4 (even), -150 saturates to -128: y = [-2, -64].
constexpr char kRequantize[] = R"(graph @g opset 17 {
  input %x : f32[1,1,1,2]
  const %s : f32[] = [1.0]
  const %z : i8[] = [0]
  const %w : f32[2,1,1,1] = [1.0, 2.0]
  const %sc : f32[2] = [0.5, 0.25]
  const %p : PTYPE = PVALUES
  %q = QuantizeLinear(%x, %s, %z) : i8[1,1,1,2] @"q"
  %y = tessel.Conv(%q, %w, _, _, %sc, %p) {group = 2, prologue = "requantize"} : f32[1,1,1,2] @"c"
  output %y
})";

TEST(TesselConvPrologue, RequantizeReadsTheIntegersOnAnotherGrid) {
  const std::string g = with(with(kRequantize, "PTYPE", "f32[1,2]"), "PVALUES", "[0.75, 3.0]");
  EXPECT_EQ(run(g, {{2, 50}}), (V{1.0, 63.5}));
  EXPECT_EQ(run(g, {{-6, -50}}), (V{-2.0, -64.0}));
  EXPECT_EQ(infer_error(with(with(kRequantize, "PTYPE", "f32[2,2]"), "PVALUES", "[0.75, 3.0, 0.0, 0.0]")),
            "tessel.Conv 'c': prologue operand P is f32[2,2], expected f32[1,2] (the factor per input "
            "channel)");
}

}  // namespace
}  // namespace tessel
