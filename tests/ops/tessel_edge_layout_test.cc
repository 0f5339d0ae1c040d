// The graph-edge attributes of the tessel contractions (ops/tessel_epilogue.h): store = "nchw" /
// "depth_to_space_nchw", out_dtype and input_layout = "nchw". Hand-computed values, bitwise
// agreement of each folded node with the unfolded Transpose / Cast chain it replaces (the fold
// must change no number: the CPU reference is the GPU's ground truth), the errors, and the
// textual IR round trip.
#include <gtest/gtest.h>

#include <random>

#include "ir/equal.h"
#include "ir/infer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ops/op_test_util.h"
#include "runtime/cpu/executor.h"

namespace tessel {
namespace {

using V = std::vector<double>;

// Inputs of `g` filled from a seeded generator (values in [-2, 2], rounded to each dtype).
std::vector<Tensor> random_inputs(const ir::Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(-2.0, 2.0);
  std::vector<Tensor> ins;
  for (ir::ValueId v : g.inputs) {
    Tensor t(g.type(v).dtype, g.type(v).shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, uni(rng));
    ins.push_back(t);
  }
  return ins;
}

// Output 0 of the graph, after checking that its declared types are the inferred ones.
Tensor run(const std::string& text, const std::vector<Tensor>& inputs) {
  ir::Graph g = ir::parse_graph(text);
  ir::Graph inferred = g;
  ir::infer_types(inferred, ir::OpRegistry::global());
  EXPECT_EQ(inferred.type(inferred.outputs[0]).str(), g.type(g.outputs[0]).str());
  return runtime::cpu::run_graph(g, inputs).at(0);
}

V values(const Tensor& t) {
  V r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_f64(i));
  return r;
}

// The two graphs give the same bits on the same random inputs (the folded one's inputs are
// the unfolded one's: same names, order and types).
void expect_bitwise_same(const std::string& folded, const std::string& unfolded) {
  const std::vector<Tensor> ins = random_inputs(ir::parse_graph(unfolded), 7);
  const Tensor a = run(folded, ins), b = run(unfolded, ins);
  EXPECT_EQ(a.type_str(), b.type_str());
  EXPECT_TRUE(bitwise_equal(a, b)) << "folded " << ::testing::PrintToString(values(a))
                                   << "\nunfolded " << ::testing::PrintToString(values(b));
}

std::string infer_error(const std::string& text) {
  ir::Graph g = ir::parse_graph(text);
  return testing::user_error([&] { ir::infer_types(g, ir::OpRegistry::global()); });
}

std::string with(std::string text, const std::string& key, const std::string& value) {
  return text.replace(text.find(key), key.size(), value);
}

// A 1x1 conv over two NHWC pixels (x = [[1, 2], [3, -1]]): y[p, co] = x[p] . w[co] + b[co],
// w = [[1, 1], [1, -1], [0.5, 2]], b = [0, 0, 1]:
//   pixel 0: [3, -1, 5.5], pixel 1: [2, 4, 0.5].
constexpr char kPointwise[] = R"(graph @g opset 17 {
  input %x : f32[1,1,2,2]
  const %w : f32[3,1,1,2] = [1.0, 1.0, 1.0, -1.0, 0.5, 2.0]
  const %b : f32[3] = [0.0, 0.0, 1.0]
  %y = tessel.Conv(%x, %w, %b) ATTRS : TYPE @"c"
  output %y
})";

std::string pointwise(const std::string& attrs, const std::string& type) {
  return with(with(kPointwise, "ATTRS", attrs), "TYPE", type);
}

TEST(TesselConvEdge, NchwStoreIsChannelMajor) {
  const Tensor x = Tensor::from_doubles(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, -1});
  EXPECT_EQ(values(run(pointwise("", "f32[1,1,2,3]"), {x})), (V{3, -1, 5.5, 2, 4, 0.5}));
  EXPECT_EQ(values(run(pointwise(R"({store = "nchw"})", "f32[1,3,1,2]"), {x})),
            (V{3, 2, -1, 4, 5.5, 0.5}));
}

// An identity 1x1 conv over 8 channels [0..7] at one pixel, depth_to_space by 2 (C' = 2) and
// stored NCHW: out[c, i, j] = y[co]. DCR: co = (2i + j) * 2 + c -> c = 0: [0, 2, 4, 6], c = 1:
// [1, 3, 5, 7]. CRD: co = 4c + 2i + j -> [0, 1, 2, 3], [4, 5, 6, 7].
TEST(TesselConvEdge, DepthToSpaceNchwStore) {
  std::string w;
  for (int o = 0; o < 8; ++o)
    for (int i = 0; i < 8; ++i) w += std::string(w.empty() ? "" : ", ") + (o == i ? "1.0" : "0.0");
  auto text = [&](const char* mode) {
    return std::string(R"(graph @g opset 17 {
  input %x : f32[1,1,1,8]
  const %w : f32[8,1,1,8] = [)") +
           w + R"(]
  %y = tessel.Conv(%x, %w) {store = "depth_to_space_nchw", block = 2, mode = ")" + mode +
           R"("} : f32[1,2,2,2] @"c"
  output %y
})";
  };
  const Tensor x = Tensor::from_doubles(DType::kF32, {1, 1, 1, 8}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(values(run(text("DCR"), {x})), (V{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(values(run(text("CRD"), {x})), (V{0, 1, 2, 3, 4, 5, 6, 7}));
}

// The conv's value is rounded to its own dtype, then converted: x . w + b = 1 + 2^-12 is a tie
// between the fp16 numbers 1 and 1 + 2^-10, rounded to even (1). A store that rounded once to
// fp32 would give 1.000244140625.
TEST(TesselConvEdge, OutDtypeRoundsToTheConvDtypeFirst) {
  const char* text = R"(graph @g opset 17 {
  input %x : f16[1,1,1,1]
  const %w : f16[1,1,1,1] = [1.0]
  const %b : f32[1] = [0.000244140625]
  %y = tessel.Conv(%x, %w, %b) {out_dtype = "f32"} : f32[1,1,1,1] @"c"
  output %y
})";
  EXPECT_EQ(values(run(text, {Tensor::from_doubles(DType::kF16, {1, 1, 1, 1}, {1.0})})), (V{1.0}));
}

// X read NCHW and converted to W's dtype: x0 = 1 + 2^-11 (fp32) is a tie between the fp16
// numbers 1 and 1 + 2^-10, rounded to even (1), so y = 1 + 2^-11 -> 1 again. Reading x0 as it
// is would give 1 + 2^-10 = 1.0009765625, an fp16 number.
TEST(TesselConvEdge, NchwInputIsConvertedToTheWeightsDtype) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,2,1,1]
  const %w : f16[1,1,1,2] = [1.0, 1.0]
  %y = tessel.Conv(%x, %w) {input_layout = "nchw"} : f16[1,1,1,1] @"c"
  output %y
})";
  const Tensor x = Tensor::from_doubles(DType::kF32, {1, 2, 1, 1}, {1.00048828125, 0.00048828125});
  EXPECT_EQ(values(run(text, {x})), (V{1.0}));
}

// The fp16 stem and tail of a network, folded and unfolded: a 3x3 conv over an NCHW fp32
// input (Cast, Transpose, zero channel Pad before it; weights padded to 8 channels) and a conv
// storing NCHW fp32 (Transpose, Cast after it). Same bits.
constexpr char kWeights3[] = "WEIGHTS";

std::string weights(int co, int kh, int kw, int ci, int ci_padded, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::string w;
  for (int i = 0; i < co * kh * kw * ci_padded; ++i) {
    const double v = i % ci_padded < ci ? uni(rng) : 0.0;
    w += std::string(w.empty() ? "" : ", ") + std::to_string(static_cast<float>(v));
  }
  return w;
}

TEST(TesselConvEdge, FoldedStemMatchesCastTransposePad) {
  const std::string unfolded = with(R"(graph @g opset 17 {
  input %x : f32[1,3,5,6]
  const %w : f16[4,3,3,8] = [WEIGHTS]
  const %b : f32[4] = [0.5, -0.25, 0.125, 1.0]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]
  %h = Cast(%x) {to = 10} : f16[1,3,5,6] @"cast"
  %t = Transpose(%h) {perm = [0, 2, 3, 1]} : f16[1,5,6,3] @"transpose"
  %p = Pad(%t, %pads) : f16[1,5,6,8] @"pad"
  %y = tessel.Conv(%p, %w, %b) {pads = [1, 1, 1, 1]} : f16[1,5,6,4] @"c"
  output %y
})",
                                    kWeights3, weights(4, 3, 3, 3, 8, 1));
  const std::string folded = with(R"(graph @g opset 17 {
  input %x : f32[1,3,5,6]
  const %w : f16[4,3,3,3] = [WEIGHTS]
  const %b : f32[4] = [0.5, -0.25, 0.125, 1.0]
  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], input_layout = "nchw"} : f16[1,5,6,4] @"c"
  output %y
})",
                                  kWeights3, weights(4, 3, 3, 3, 3, 1));
  expect_bitwise_same(folded, unfolded);
}

TEST(TesselConvEdge, FoldedTailMatchesTransposeCast) {
  const std::string head = with(R"(graph @g opset 17 {
  input %x : f16[2,4,5,8]
  const %w : f16[3,3,3,8] = [WEIGHTS]
  const %b : f32[3] = [0.5, -0.25, 0.125]
)",
                                kWeights3, weights(3, 3, 3, 8, 8, 2));
  expect_bitwise_same(
      head + R"(  %y = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], epilogue = ["leaky_relu"], epilogue_alpha = [0.1], epilogue_beta = [0.0], store = "nchw", out_dtype = "f32"} : f32[2,3,4,5] @"c"
  output %y
})",
      head + R"(  %c = tessel.Conv(%x, %w, %b) {pads = [1, 1, 1, 1], epilogue = ["leaky_relu"], epilogue_alpha = [0.1], epilogue_beta = [0.0]} : f16[2,4,5,3] @"c"
  %t = Transpose(%c) {perm = [0, 3, 1, 2]} : f16[2,3,4,5] @"transpose"
  %y = Cast(%t) {to = 1} : f32[2,3,4,5] @"cast"
  output %y
})");
}

TEST(TesselConvEdge, DepthToSpaceNchwMatchesTransposeOfDepthToSpace) {
  const std::string head = with(R"(graph @g opset 17 {
  input %x : f32[1,3,4,2]
  const %w : f32[8,3,3,2] = [WEIGHTS]
)",
                                kWeights3, weights(8, 3, 3, 2, 2, 3));
  for (const char* mode : {"DCR", "CRD"}) {
    expect_bitwise_same(
        head + R"(  %y = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1], store = "depth_to_space_nchw", block = 2, mode = ")" +
            mode + R"("} : f32[1,2,6,8] @"c"
  output %y
})",
        head + R"(  %c = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1], store = "depth_to_space", block = 2, mode = ")" +
            mode + R"("} : f32[1,6,8,2] @"c"
  %y = Transpose(%c) {perm = [0, 3, 1, 2]} : f32[1,2,6,8] @"transpose"
  output %y
})");
  }
}

TEST(TesselGemmEdge, OutDtypeMatchesCast) {
  const std::string head = with(R"(graph @g opset 17 {
  input %a : f16[3,8]
  const %w : f16[5,8] = [WEIGHTS]
)",
                                kWeights3, weights(5, 1, 1, 8, 8, 4));
  expect_bitwise_same(head + R"(  %y = tessel.Gemm(%a, %w) {out_dtype = "f32"} : f32[3,5] @"fc"
  output %y
})",
                      head + R"(  %c = tessel.Gemm(%a, %w) : f16[3,5] @"fc"
  %y = Cast(%c) {to = 1} : f32[3,5] @"cast"
  output %y
})");
}

TEST(TesselConvEdge, Errors) {
  EXPECT_EQ(infer_error(pointwise(R"({store = "nhcw"})", "f32[1,3,1,2]")),
            "tessel.Conv 'c': store 'nhcw' is not supported (nhwc, nchw, depth_to_space, "
            "depth_to_space_nchw)");
  EXPECT_EQ(infer_error(pointwise(R"({store = "nchw", block = 2})", "f32[1,3,1,2]")),
            "tessel.Conv 'c': 'block' and 'mode' apply only to the depth_to_space stores");
  EXPECT_EQ(infer_error(pointwise(R"({out_dtype = "i32"})", "i32[1,1,2,3]")),
            "tessel.Conv 'c': out_dtype 'i32' is neither a float dtype, i8 nor u8 (f32, f16, bf16, f64, i8, u8)");
  EXPECT_EQ(infer_error(pointwise(R"({input_layout = "chwn"})", "f32[1,1,2,3]")),
            "tessel.Conv 'c': input_layout 'chwn' is not supported (nhwc, nchw)");
  // NCHW X: its dimension 1 is the channels. [1,1,2,2] read NCHW has 1 channel, W wants 2.
  EXPECT_EQ(infer_error(pointwise(R"({input_layout = "nchw"})", "f32[1,1,2,3]")),
            "tessel.Conv 'c': weight W [3,1,1,2] has 2 input channels per group, expected 1 / "
            "group 1");
  // An NHWC X has W's dtype; only an NCHW X is converted as it is read.
  const std::string f16_x = with(kPointwise, "input %x : f32[1,1,2,2]", "input %x : f16[1,1,2,2]");
  EXPECT_EQ(infer_error(with(with(f16_x, "ATTRS", ""), "TYPE", "f32[1,1,2,3]")),
            "tessel.Conv 'c': input W has dtype f32, expected the dtype of X (f16)");
  const char* gemm = R"(graph @g opset 17 {
  input %a : f32[2,3]
  const %w : f32[2,3] = [1.0, -1.0, 0.5, 2.0, -0.5, 0.25]
  %y = tessel.Gemm(%a, %w) {store = "nchw"} : f32[2,2] @"fc"
  output %y
})";
  EXPECT_EQ(infer_error(gemm),
            "tessel.Gemm 'fc': unknown attribute 'store' (expected epilogue, epilogue_alpha, "
            "epilogue_beta, out_dtype, trans_a, trans_b, int8_refusal)");
}

// The textual IR prints the attributes as written and parses them back to the same graph.
TEST(TesselConvEdge, TextualIrRoundTrip) {
  const char* text = R"(graph @g opset 17 {
  input %x : f32[1,3,4,4]
  const %w : f16[2,1,1,3] = [1.0, 0.5, -1.0, 2.0, 0.25, -0.5]
  %y = tessel.Conv(%x, %w) {input_layout = "nchw", out_dtype = "f32", store = "nchw"} : f32[1,2,4,4] @"c"
  output %y
})";
  const ir::Graph g = ir::parse_graph(text);
  const std::string printed = ir::print_graph(g);
  EXPECT_NE(printed.find(R"(input_layout = "nchw")"), std::string::npos) << printed;
  EXPECT_NE(printed.find(R"(out_dtype = "f32")"), std::string::npos) << printed;
  EXPECT_NE(printed.find(R"(store = "nchw")"), std::string::npos) << printed;
  EXPECT_EQ(ir::structural_diff(ir::parse_graph(printed), g), "");
  ir::verify(g, ir::OpRegistry::global());
}

}  // namespace
}  // namespace tessel
