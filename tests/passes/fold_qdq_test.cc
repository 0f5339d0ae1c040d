// fold-qdq: Before/Expected and same numerics on the CPU executor (the int8 tessel.Conv's
// reference against the dequantized float conv it replaces).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "pass_test_util.h"

namespace tessel {
namespace {

using testing::small_ints;

// A post-layout QDQ conv: X quantized per tensor, W per output channel, both symmetric int8.
// Powers of two as scales keep S = sx * sw exact in f32.
// ci: X's channels; wci: W's input channels (ci / group); co: 2, or 1 (then zw, sw and b are
// those of the first channel).
std::string qdq_conv(const std::string& conv_attrs, const std::string& zw = "0, 0", int ci = 8,
                     int wci = 8, int co = 2) {
  const std::string c = std::to_string(ci), wc = std::to_string(wci), o = std::to_string(co);
  const bool one = co == 1;
  return R"(graph @g opset 17 {
  input %x : f32[1,3,3,)" + c + R"(]
  const %sx : f32[] = [0.0625]
  const %zx : i8[] = [0]
  const %wq : i8[)" + o + ",3,3," + wc + "] = [" + small_ints(9 * co * wci) + R"(]
  const %sw : f32[)" + o + "] = [" + (one ? "0.125" : "0.125, 0.25") + R"(]
  const %zw : i8[)" + o + "] = [" + (one ? zw.substr(0, zw.find(',')) : zw) + R"(]
  const %b : f32[)" + o + "] = [" + (one ? "0.5" : "0.5, -0.25") + R"(]
  %xq = QuantizeLinear(%x, %sx, %zx) : i8[1,3,3,)" + c + R"(] @"qx"
  %xd = DequantizeLinear(%xq, %sx, %zx) : f32[1,3,3,)" + c + R"(] @"dqx"
  %wd = DequantizeLinear(%wq, %sw, %zw) {axis = 0} : f32[)" + o + ",3,3," + wc + R"(] @"dqw"
  %y = tessel.Conv(%xd, %wd, %b) {)" + conv_attrs + R"(} : f32[1,3,3,)" + o + R"(] @"conv"
  output %y
})";
}

TEST(FoldQdq, QdqConvBecomesInt8ConvWithDequantizationScale) {
  testing::expect_pass_result("fold-qdq", qdq_conv("pads = [1, 1, 1, 1]"), R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %zx : i8[] = [0]
  const %wq : i8[2,3,3,8] = [)" + small_ints(144) + R"(]
  const %b : f32[2] = [0.5, -0.25]
  const %s : f32[2] = [0.0078125, 0.015625]
  %xq = QuantizeLinear(%x, %sx, %zx) : i8[1,3,3,8] @"qx"
  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"conv"
  output %y
})");
}

// A dense layer: tessel.Gemm(A [M, K], W [N, K]) alike.
TEST(FoldQdq, QdqGemmBecomesInt8Gemm) {
  testing::expect_pass_result("fold-qdq", R"(graph @g opset 17 {
  input %a : f32[2,8]
  const %sa : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %wq : i8[3,8] = [)" + small_ints(24) + R"(]
  const %sw : f32[3] = [0.125, 0.25, 0.5]
  const %b : f32[3] = [0.5, -0.25, 1.0]
  %aq = QuantizeLinear(%a, %sa, %z) : i8[2,8] @"qa"
  %ad = DequantizeLinear(%aq, %sa, %z) : f32[2,8] @"dqa"
  %wd = DequantizeLinear(%wq, %sw) {axis = 0} : f32[3,8] @"dqw"
  %y = tessel.Gemm(%ad, %wd, %b) : f32[2,3] @"fc"
  output %y
})",
                              R"(graph @g opset 17 {
  input %a : f32[2,8]
  const %sa : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %wq : i8[3,8] = [)" + small_ints(24) + R"(]
  const %b : f32[3] = [0.5, -0.25, 1.0]
  const %s : f32[3] = [0.0078125, 0.015625, 0.03125]
  %aq = QuantizeLinear(%a, %sa, %z) : i8[2,8] @"qa"
  %y = tessel.Gemm(%aq, %wq, %b, _, %s) : f32[2,3] @"fc"
  output %y
})");
}

// onnxruntime's default QUInt8 activations: a uint8 X with zero point 0 (after a ReLU, which the
// quantizer drops) is the int8 contraction's A as it is; one with another zero point stays
// float and says why (its zero padding would be z, and the sums would lack -z * sum(w)).
TEST(FoldQdq, Uint8InputOfZeroPointZeroIsTheInt8ConvsA) {
  auto model = [](const std::string& zx) {
    std::string m = qdq_conv("pads = [1, 1, 1, 1]");
    m.replace(m.find("const %zx : i8[] = [0]"), 22, "const %zx : u8[] = [" + zx + "]");
    m.replace(m.find(": i8[1,3,3,8] @\"qx\""), 14, ": u8[1,3,3,8]");
    return m;
  };
  testing::expect_pass_result("fold-qdq", model("0"), R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %sx : f32[] = [0.0625]
  const %zx : u8[] = [0]
  const %wq : i8[2,3,3,8] = [)" + small_ints(144) + R"(]
  const %b : f32[2] = [0.5, -0.25]
  const %s : f32[2] = [0.0078125, 0.015625]
  %xq = QuantizeLinear(%x, %sx, %zx) : u8[1,3,3,8] @"qx"
  %y = tessel.Conv(%xq, %wq, %b, _, %s) {pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"conv"
  output %y
})");
  const std::string before = model("128");
  ir::Graph g = passes::run_passes(ir::parse_graph(before), {"fold-qdq"}, {});
  const ir::Node& conv = g.nodes.back();
  ASSERT_EQ(conv.op, "tessel.Conv");
  EXPECT_EQ(conv.get_string("int8_refusal", ""),
            "the input has zero point 128: the int8 kernels read activations of zero point 0 (whose "
            "padding is the real 0)");
  EXPECT_EQ(g.type(conv.inputs[0]).dtype, DType::kF32);
  testing::expect_same_numerics(ir::parse_graph(before), g);
}

// A uint8 X quantized from a grouped conv's output that is not depthwise stays float: those
// kernels store no uint8, and a QuantizeLinear kernel of its own would cost more than the int8
// conv saves. From a depthwise conv's, whose kernels store uint8, it is the int8 conv's X.
TEST(FoldQdq, Uint8InputFromAGroupedConvStaysFloatFromADepthwiseOneNot) {
  auto model = [](int group) {
    const int wci = 8 / group;
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %wd : f32[8,3,3,)" + std::to_string(wci) + "] = [" + small_ints(72 * wci) + R"(]
  const %sx : f32[] = [0.0625]
  const %zx : u8[] = [0]
  const %wq : i8[2,1,1,8] = [)" + small_ints(16) + R"(]
  const %sw : f32[2] = [0.125, 0.25]
  const %zw : i8[2] = [0, 0]
  %d = tessel.Conv(%x, %wd) {group = )" + std::to_string(group) + R"(, pads = [1, 1, 1, 1]} : f32[1,3,3,8] @"dw"
  %xq = QuantizeLinear(%d, %sx, %zx) : u8[1,3,3,8] @"qx"
  %xd = DequantizeLinear(%xq, %sx, %zx) : f32[1,3,3,8] @"dqx"
  %w = DequantizeLinear(%wq, %sw, %zw) {axis = 0} : f32[2,1,1,8] @"dqw"
  %y = tessel.Conv(%xd, %w) : f32[1,3,3,2] @"project"
  output %y
})";
  };
  for (const int group : {4, 8}) {
    SCOPED_TRACE(group);
    const std::string before = model(group);
    ir::Graph g = passes::run_passes(ir::parse_graph(before), {"fold-qdq"}, {});
    const ir::Node& conv = g.nodes.back();
    ASSERT_EQ(conv.op, "tessel.Conv");
    if (group == 4) {
      EXPECT_EQ(conv.get_string("int8_refusal", ""),
                "the input is uint8 from a grouped conv, whose kernels store no uint8: a "
                "QuantizeLinear kernel of its own would cost more than the int8 conv saves");
      EXPECT_EQ(g.type(conv.inputs[0]).dtype, DType::kF32);
    } else {
      EXPECT_FALSE(conv.has_attr("int8_refusal"));
      EXPECT_EQ(g.type(conv.inputs[0]).dtype, DType::kU8);
    }
    testing::expect_same_numerics(ir::parse_graph(before), g);
  }
}

// Left in float, each with its reason, and the weights' DequantizeLinear folded to constants.
TEST(FoldQdq, RefusedConvsStayFloatAndSayWhy) {
  struct Case {
    std::string before, why;
  };
  const Case cases[] = {
      {qdq_conv("pads = [1, 1, 1, 1]", "0, 3"), "the weight has a non-zero zero point (asymmetric)"},
      {qdq_conv("group = 2", "0, 0", 8, 4), "grouped convolution: the int8 kernels take group 1 only"},
      {qdq_conv("pads = [1, 1, 1, 1]", "0, 0", 4, 4), "4 input channels: int8 needs a multiple of 8"},
      {qdq_conv("pads = [1, 1, 1, 1]", "0, 0", 8, 8, 1),
       "one output channel: the int8 kernels store rows of output channels (N), which one "
       "channel does not make; the float kernels take it"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    ir::Graph g = passes::run_passes(ir::parse_graph(c.before), {"fold-qdq"}, {});
    int convs = 0;
    for (const ir::Node& n : g.nodes) {
      if (n.op == "DequantizeLinear") {
        EXPECT_FALSE(g.value(n.inputs[0]).is_constant()) << n.label();
      }
      if (n.op != "tessel.Conv") continue;
      ++convs;
      EXPECT_EQ(n.get_string("int8_refusal", ""), c.why);
      EXPECT_EQ(g.type(n.inputs[1]).dtype, DType::kF32);
      EXPECT_TRUE(g.value(n.inputs[1]).is_constant());
    }
    EXPECT_EQ(convs, 1);
    testing::expect_same_numerics(ir::parse_graph(c.before), g);
  }
}

// The RGB stem: convert-layout pads its 3 channels to 8 after the DequantizeLinear; it stays
// float and says so.
TEST(FoldQdq, PaddedStemStaysFloatAndSaysWhy) {
  const std::string before = R"(graph @g opset 17 {
  input %x : f32[1,3,3,3]
  const %sx : f32[] = [0.0625]
  const %zx : i8[] = [0]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]
  const %wq : i8[2,3,3,8] = [)" + small_ints(144) + R"(]
  const %sw : f32[2] = [0.125, 0.25]
  %xq = QuantizeLinear(%x, %sx, %zx) : i8[1,3,3,3] @"qx"
  %xd = DequantizeLinear(%xq, %sx, %zx) : f32[1,3,3,3] @"dqx"
  %xp = Pad(%xd, %pads) : f32[1,3,3,8] @"pad"
  %wd = DequantizeLinear(%wq, %sw) {axis = 0} : f32[2,3,3,8] @"dqw"
  %y = tessel.Conv(%xp, %wd) {pads = [1, 1, 1, 1]} : f32[1,3,3,2] @"stem"
  output %y
})";
  ir::Graph g = passes::run_passes(ir::parse_graph(before), {"fold-qdq"}, {});
  const ir::Node& conv = g.nodes.back();
  ASSERT_EQ(conv.op, "tessel.Conv");
  EXPECT_EQ(conv.get_string("int8_refusal", ""),
            "3 input channels, padded to a multiple of 8 in float: the conv stays fp16 (an int8 "
            "conv over so few channels would be slower than the fp16 one)");
  EXPECT_EQ(g.type(conv.inputs[1]).dtype, DType::kF32);
  testing::expect_same_numerics(ir::parse_graph(before), g);
}

// A post-layout QDQ depthwise conv: 8 channels, a 3x3 window at stride 2 over a 5x5 image,
// W quantized per channel. `x_dq` is X's DequantizeLinear line after its "%xd = ", with its
// scale and zero point (`x_params`: their declarations); `extra_output` another graph output;
// `group` 4: a grouped conv of 2 channels per group instead.
std::string qdq_depthwise(const std::string& x_params, const std::string& x_dq,
                          const std::string& qtype = "i8", const std::string& extra_output = "",
                          int group = 8) {
  const int per_group = 8 / group;
  const std::string w_shape = "8,3,3," + std::to_string(per_group);
  return R"(graph @g opset 17 {
  input %x : f32[1,5,5,8]
)" + x_params + R"(
  const %wq : i8[)" + w_shape + "] = [" + small_ints(72 * per_group) + R"(]
  const %sw : f32[8] = [0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25]
  const %zw : i8[8] = [0, 0, 0, 0, 0, 0, 0, 0]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  %xq = QuantizeLinear(%x, %sq, %zq) : )" + qtype + R"([1,5,5,8] @"qx"
  %xd = )" + x_dq + R"( : f32[1,5,5,8] @"dqx"
  %wd = DequantizeLinear(%wq, %sw, %zw) {axis = 0} : f32[)" + w_shape + R"(] @"dqw"
  %y = tessel.Conv(%xd, %wd, %b) {group = )" + std::to_string(group) +
         R"(, pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,8] @"dw"
  output %y
)" + extra_output + "}";
}

// X's quantization, symmetric int8 per tensor: the QuantizeLinear's and DequantizeLinear's.
const char kInt8X[] = "  const %sq : f32[] = [0.0625]\n  const %zq : i8[] = [0]";
const char kInt8Dq[] = "DequantizeLinear(%xq, %sq, %zq)";

// small_ints(72) over OHWI [8, 3, 3, 1], channel c scaled by sw[c] = 0.5 or 0.25: the folded
// weights of qdq_depthwise.
std::string depthwise_weights() {
  std::string s;
  for (int i = 0; i < 72; ++i)
    s += (i > 0 ? ", " : "") + std::to_string(((i * 5) % 16 - 8) * (i / 9 % 2 == 0 ? 0.5 : 0.25));
  return s;
}

// A depthwise conv stays float (the int8 kernels take group 1 only) but reads Xq itself, X's
// scale its S: the form of ops/tessel_contraction_ops.cc, whose reference gives the same values.
TEST(FoldQdq, DepthwiseConvReadsTheIntegersWithTheirScale) {
  testing::expect_pass_result("fold-qdq", qdq_depthwise(kInt8X, kInt8Dq), R"(graph @g opset 17 {
  input %x : f32[1,5,5,8]
  const %sq : f32[] = [0.0625]
  const %zq : i8[] = [0]
  const %w : f32[8,3,3,1] = [)" + depthwise_weights() + R"(]
  const %b : f32[8] = [0.5, -0.25, 1.0, -1.0, 0.0, 2.0, -2.0, 0.25]
  const %s : f32[8] = [0.0625, 0.0625, 0.0625, 0.0625, 0.0625, 0.0625, 0.0625, 0.0625]
  %xq = QuantizeLinear(%x, %sq, %zq) : i8[1,5,5,8] @"qx"
  %y = tessel.Conv(%xq, %w, %b, _, %s) {group = 8, int8_refusal = "grouped convolution: the int8 kernels take group 1 only", pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,8] @"dw"
  output %y
})");
}

// Depthwise convs that keep reading the dequantized X, each saying why; a grouped conv of
// several channels per group is no depthwise conv. The same values.
TEST(FoldQdq, DepthwiseConvsThatKeepAFloatInputSayWhy) {
  const std::string grouped = "grouped convolution: the int8 kernels take group 1 only";
  const std::string stays = grouped + "; its input stays float: ";
  struct Case {
    std::string before, why;
  };
  const Case cases[] = {
      {qdq_depthwise(
           "  const %sq : f32[] = [0.0625]\n  const %zq : i8[] = [0]\n"
           "  const %sc : f32[8] = [0.0625, 0.125, 0.0625, 0.125, 0.0625, 0.125, 0.0625, 0.125]\n"
           "  const %zc : i8[8] = [0, 0, 0, 0, 0, 0, 0, 0]",
           "DequantizeLinear(%xq, %sc, %zc) {axis = 3}"),
       stays + "the input's scale has 8 values, neither one nor one per output channel"},
      {qdq_depthwise("  const %sq : f32[] = [0.0625]\n  const %zq : i8[] = [3]", kInt8Dq),
       stays + "the input has a non-zero zero point (asymmetric)"},
      {qdq_depthwise("  const %sq : f32[] = [0.0625]\n  const %zq : u8[] = [0]", kInt8Dq, "u8"),
       stays + "the input is u8, not int8"},
      {qdq_depthwise(kInt8X, kInt8Dq, "i8", "  output %xd\n"),
       stays + "its DequantizeLinear has other readers"},
      {qdq_depthwise(kInt8X, kInt8Dq, "i8", "", 4), grouped},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    ir::Graph g = passes::run_passes(ir::parse_graph(c.before), {"fold-qdq"}, {});
    const ir::Node& conv = g.nodes.back();
    ASSERT_EQ(conv.op, "tessel.Conv");
    EXPECT_EQ(conv.get_string("int8_refusal", ""), c.why);
    EXPECT_EQ(g.type(conv.inputs[0]).dtype, DType::kF32);
    EXPECT_EQ(conv.inputs.size(), 3u) << "no S";
    testing::expect_same_numerics(ir::parse_graph(c.before), g);
  }
}

// DequantizeLinear -> max pool -> QuantizeLinear to the same scale: the pool runs on the int8
// values and writes the QuantizeLinear's output (same numbers on the CPU executor); uint8 values
// of zero point 0 too. Another scale or a second reader of the pool keep the float pool.
TEST(FoldQdq, MaxPoolBetweenQdqOfOneScaleRunsOnInt8) {
  auto model = [](const std::string& s2, const std::string& extra_output, const std::string& qtype) {
    return R"(graph @g opset 17 {
  input %x : f32[1,6,6,8]
  const %s : f32[] = [0.0625]
  const %s2 : f32[] = [)" + s2 + R"(]
  const %z : )" + qtype + R"([] = [0]
  %xq = QuantizeLinear(%x, %s, %z) : )" + qtype + R"([1,6,6,8] @"qx"
  %xd = DequantizeLinear(%xq, %s, %z) : f32[1,6,6,8] @"dqx"
  %p = tessel.MaxPool(%xd) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,8] @"pool"
  %pq = QuantizeLinear(%p, %s2, %z) : )" + qtype + R"([1,3,3,8] @"qp"
  output %pq
)" + extra_output + "}";
  };
  testing::expect_pass_result("fold-qdq", model("0.0625", "", "i8"), R"(graph @g opset 17 {
  input %x : f32[1,6,6,8]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %xq = QuantizeLinear(%x, %s, %z) : i8[1,6,6,8] @"qx"
  %p = tessel.MaxPool(%xq) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : i8[1,3,3,8] @"pool"
  output %p
})");
  // uint8 with zero point 0 (onnxruntime's activations after a ReLU) alike.
  testing::expect_pass_result("fold-qdq", model("0.0625", "", "u8"), R"(graph @g opset 17 {
  input %x : f32[1,6,6,8]
  const %s : f32[] = [0.0625]
  const %z : u8[] = [0]
  %xq = QuantizeLinear(%x, %s, %z) : u8[1,6,6,8] @"qx"
  %p = tessel.MaxPool(%xq) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : u8[1,3,3,8] @"pool"
  output %p
})");
  for (const std::string& kept : {model("0.125", "", "i8"), model("0.0625", "  output %p\n", "i8")})
    testing::expect_pass_result("fold-qdq", kept, kept);
}

// A stem's max pool whose output is quantized: Q is monotone, so Q(MaxPool(r)) =
// MaxPool(Q(r)) exactly, and the QuantizeLinear moves before the pool (for fuse to take into
// the conv before it), the pool then running on int8. Kept where r or the pool's output has
// another reader, where r is a graph input (no producer to store int8), and for a per-channel
// QuantizeLinear.
TEST(FoldQdq, QuantizeAfterAMaxPoolMovesBeforeIt) {
  auto model = [](const std::string& extra, const std::string& pool_input = "r") {
    return R"(graph @g opset 17 {
  input %x : f32[1,6,6,8]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %r = Relu(%x) : f32[1,6,6,8] @"relu"
  %p = tessel.MaxPool(%)" + pool_input + R"() {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,8] @"pool"
  %q = QuantizeLinear(%p, %s, %z) : i8[1,3,3,8] @"qp"
  output %q
)" + extra + "}";
  };
  testing::expect_pass_result("fold-qdq", model(""), R"(graph @g opset 17 {
  input %x : f32[1,6,6,8]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %r = Relu(%x) : f32[1,6,6,8] @"relu"
  %rq = QuantizeLinear(%r, %s, %z) : i8[1,6,6,8] @"r_QuantizeLinear"
  %q = tessel.MaxPool(%rq) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : i8[1,3,3,8] @"pool"
  output %q
})", 0.0, 0.0);
  for (const std::string& kept :
       {model("  output %r\n"), model("  output %p\n"), model("  output %r\n", "x")})
    testing::expect_pass_result("fold-qdq", kept, kept);
  const std::string per_channel = R"(graph @g opset 17 {
  input %x : f32[1,6,6,2]
  const %s : f32[2] = [0.0625, 0.125]
  const %z : i8[2] = [0, 0]
  %r = Relu(%x) : f32[1,6,6,2] @"relu"
  %p = tessel.MaxPool(%r) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,3,3,2] @"pool"
  %q = QuantizeLinear(%p, %s, %z) {axis = 3} : i8[1,3,3,2] @"qp"
  output %q
})";
  testing::expect_pass_result("fold-qdq", per_channel, per_channel);
}

// Inception's concat: Q(Concat(a, b)) = Concat(Q(a), Q(b)) per tensor, so each branch's chain
// ends at a QuantizeLinear that fuse takes into its epilogue. Kept where an input has another
// reader (DenseNet's features: quantized once per concat that reads them), where the concat
// has one, and for a per-channel QuantizeLinear.
TEST(FoldQdq, QuantizeAfterAConcatMovesToItsInputs) {
  auto model = [](const std::string& extra) {
    return R"(graph @g opset 17 {
  input %a : f32[1,3,3,8]
  input %b : f32[1,3,3,16]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %c = Concat(%a, %b) {axis = 3} : f32[1,3,3,24] @"cat"
  %q = QuantizeLinear(%c, %s, %z) : i8[1,3,3,24] @"qcat"
  output %q
)" + extra + "}";
  };
  testing::expect_pass_result("fold-qdq", model(""), R"(graph @g opset 17 {
  input %a : f32[1,3,3,8]
  input %b : f32[1,3,3,16]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %qa = QuantizeLinear(%a, %s, %z) : i8[1,3,3,8] @"a_QuantizeLinear"
  %qb = QuantizeLinear(%b, %s, %z) : i8[1,3,3,16] @"b_QuantizeLinear"
  %q = Concat(%qa, %qb) {axis = 3} : i8[1,3,3,24] @"cat"
  output %q
})");
  for (const std::string& kept : {model("  output %a\n"), model("  output %c\n")})
    testing::expect_pass_result("fold-qdq", kept, kept);
  const std::string per_channel = R"(graph @g opset 17 {
  input %a : f32[1,3,3,2]
  input %b : f32[1,3,3,2]
  const %s : f32[4] = [0.0625, 0.125, 0.25, 0.5]
  const %z : i8[4] = [0, 0, 0, 0]
  %c = Concat(%a, %b) {axis = 3} : f32[1,3,3,4] @"cat"
  %q = QuantizeLinear(%c, %s, %z) {axis = 3} : i8[1,3,3,4] @"qcat"
  output %q
})";
  testing::expect_pass_result("fold-qdq", per_channel, per_channel);
}

// DenseNet's concat of features quantized to scales of their own, then quantized again (each
// feature has another reader, the later concats, so the QuantizeLinear cannot move to the
// inputs): the concat of the integers, dequantized per channel by a 1x1 depthwise conv of unit
// weights, before the QuantizeLinear. The same values (q * s in f32). Kept where the concat
// has another reader, an input is no DequantizeLinear, or one dequantizes per channel.
TEST(FoldQdq, ConcatOfDequantizedIntegersKeepsTheIntegers) {
  auto model = [](const std::string& d2, const std::string& extra) {
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,2]
  input %y : f32[1,3,3,2]
  const %s1 : f32[] = [0.0625]
  const %s2 : f32[] = [0.25]
  const %s2c : f32[2] = [0.25, 0.5]
  const %t : f32[] = [0.125]
  const %z : i8[] = [0]
  const %z2 : i8[2] = [0, 0]
  %q1 = QuantizeLinear(%x, %s1, %z) : i8[1,3,3,2] @"q1"
  %q2 = QuantizeLinear(%y, %s2, %z) : i8[1,3,3,2] @"q2"
  %d1 = DequantizeLinear(%q1, %s1, %z) : f32[1,3,3,2] @"d1"
  )" + d2 + R"(
  %c = Concat(%d1, %d2) {axis = 3} : f32[1,3,3,4] @"cat"
  %r = QuantizeLinear(%c, %t, %z) : i8[1,3,3,4] @"qcat"
  output %r
  output %d1
)" + extra + "}";
  };
  const std::string d2 = R"(%d2 = DequantizeLinear(%q2, %s2, %z) : f32[1,3,3,2] @"d2")";
  const std::string before = model(d2, "");
  testing::expect_pass_result("fold-qdq", before, R"(graph @g opset 17 {
  input %x : f32[1,3,3,2]
  input %y : f32[1,3,3,2]
  const %s1 : f32[] = [0.0625]
  const %s2 : f32[] = [0.25]
  const %t : f32[] = [0.125]
  const %z : i8[] = [0]
  const %cat_dequantize.unit_weights : f32[4,1,1,1] = [1.0, 1.0, 1.0, 1.0]
  const %cat_dequantize.dequant_scale : f32[4] = [0.0625, 0.0625, 0.25, 0.25]
  %q1 = QuantizeLinear(%x, %s1, %z) : i8[1,3,3,2] @"q1"
  %q2 = QuantizeLinear(%y, %s2, %z) : i8[1,3,3,2] @"q2"
  %d1 = DequantizeLinear(%q1, %s1, %z) : f32[1,3,3,2] @"d1"
  %c.integers = Concat(%q1, %q2) {axis = 3} : i8[1,3,3,4] @"cat"
  %c = tessel.Conv(%c.integers, %cat_dequantize.unit_weights, _, _, %cat_dequantize.dequant_scale) {group = 4, int8_refusal = "a concat of int8 tensors of different scales, dequantized per channel (before its QuantizeLinear): a 1x1 depthwise conv that reads the integers"} : f32[1,3,3,4] @"cat_dequantize"
  %r = QuantizeLinear(%c, %t, %z) : i8[1,3,3,4] @"qcat"
  output %r
  output %d1
})");
  testing::expect_same_numerics(ir::parse_graph(before), passes::run_passes(ir::parse_graph(before), {"fold-qdq"}, {}));
  for (const std::string& kept :
       {model(d2, "  output %c\n"), model(R"(%d2 = Relu(%y) : f32[1,3,3,2] @"d2")", ""),
        model(R"(%d2 = DequantizeLinear(%q2, %s2c, %z2) {axis = 3} : f32[1,3,3,2] @"d2")", "")}) {
    SCOPED_TRACE(kept);
    const ir::Graph g = passes::run_passes(ir::parse_graph(kept), {"fold-qdq"}, {});
    int convs = 0;
    for (const ir::Node& n : g.nodes) {
      convs += n.op == "tessel.Conv";
      if (n.op == "Concat") {
        EXPECT_NE(g.type(n.outputs[0]).dtype, DType::kI8);
      }
    }
    EXPECT_EQ(convs, 0);
  }
}

// DenseNet's pre-activation norm: its shift, quantized, dequantized, Relu, quantized again to
// the same scale, is Relu then one QuantizeLinear (the same integers: max(Q(x), 0) = Q(relu(x))).
// Kept with another scale after the Relu, and where the first QuantizeLinear has another
// reader.
TEST(FoldQdq, RequantizedReluBetweenFloatOpsIsReluThenQuantize) {
  auto model = [](const std::string& s2, const std::string& extra) {
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %s : f32[] = [0.0625]
  const %s2 : f32[] = [)" + s2 + R"(]
  const %z : i8[] = [0]
  %q1 = QuantizeLinear(%x, %s, %z) : i8[1,3,3,8] @"q1"
  %d1 = DequantizeLinear(%q1, %s, %z) : f32[1,3,3,8] @"dq1"
  %r = Relu(%d1) : f32[1,3,3,8] @"relu"
  %q2 = QuantizeLinear(%r, %s2, %z) : i8[1,3,3,8] @"q2"
  output %q2
)" + extra + "}";
  };
  testing::expect_pass_result("fold-qdq", model("0.0625", ""), R"(graph @g opset 17 {
  input %x : f32[1,3,3,8]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  %r = Relu(%x) : f32[1,3,3,8] @"relu"
  %q2 = QuantizeLinear(%r, %s, %z) : i8[1,3,3,8] @"q2"
  output %q2
})");
  for (const std::string& kept : {model("0.125", ""), model("0.0625", "  output %q1\n")})
    testing::expect_pass_result("fold-qdq", kept, kept);
}

// A norm's per-channel scale after a DequantizeLinear (DenseNet's pre-activation, lowered by
// lower-batch-norm) is one per-channel DequantizeLinear: q * (s * a[c]). Kept where a has
// another shape than one value per channel, and where the dequantized value has another reader.
TEST(FoldQdq, ChannelScaleAfterADequantizeJoinsIt) {
  auto model = [](const std::string& a_type, const std::string& a, const std::string& extra) {
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %a : )" + a_type + " = [" + a + R"(]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %d = DequantizeLinear(%q, %s, %z) : f32[1,3,3,4] @"dq"
  %m = Mul(%d, %a) : f32[1,3,3,4] @"norm.scale"
  output %m
)" + extra + "}";
  };
  testing::expect_pass_result("fold-qdq", model("f32[4]", "0.5, 2.0, -1.0, 4.0", ""), R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %sa : f32[4] = [0.03125, 0.125, -0.0625, 0.25]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %m = DequantizeLinear(%q, %sa) {axis = 3} : f32[1,3,3,4] @"norm.scale"
  output %m
})");
  for (const std::string& kept : {model("f32[]", "0.5", ""), model("f32[4]", "0.5, 2.0, -1.0, 4.0", "  output %d\n")})
    testing::expect_pass_result("fold-qdq", kept, kept);
}

// A per-channel shift after a DequantizeLinear of int8 values (DenseNet's pre-activation norm
// after each concat, its scale joined into the DequantizeLinear): a 1x1 depthwise conv of unit
// weights reading the integers, S the dequantization scale and B the shift; the same values.
// Kept: a DequantizeLinear with another reader, uint8 integers (the depthwise int8-input form
// reads int8), a shift that is not a per-channel constant.
TEST(FoldQdq, ChannelShiftOfIntegersIsADepthwiseConvReadingThem) {
  auto model = [](const std::string& z_type, const std::string& b_decl, const std::string& extra) {
    return R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  input %y : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : )" + z_type + R"([] = [0]
  const %sa : f32[4] = [0.03125, 0.125, -0.0625, 0.25]
)" + b_decl + R"(
  %q = QuantizeLinear(%x, %s, %z) : )" + z_type + R"([1,3,3,4] @"q"
  %d = DequantizeLinear(%q, %sa) {axis = 3} : f32[1,3,3,4] @"norm.scale"
  %n = Add(%d, %b) : f32[1,3,3,4] @"norm"
  %r = Relu(%n) : f32[1,3,3,4] @"relu"
  output %r
)" + extra + "}";
  };
  const std::string shift = "  const %b : f32[4] = [0.5, -0.25, 1.0, -1.0]";
  const std::string before = model("i8", shift, "");
  testing::expect_pass_result("fold-qdq", before, R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  input %y : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %norm.unit_weights : f32[4,1,1,1] = [1.0, 1.0, 1.0, 1.0]
  const %norm.shift : f32[4] = [0.5, -0.25, 1.0, -1.0]
  const %norm.dequant_scale : f32[4] = [0.03125, 0.125, -0.0625, 0.25]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %n = tessel.Conv(%q, %norm.unit_weights, %norm.shift, _, %norm.dequant_scale) {group = 4, int8_refusal = "a per-channel shift of int8 values (a norm after a DequantizeLinear): a 1x1 depthwise conv that reads the integers"} : f32[1,3,3,4] @"norm"
  %r = Relu(%n) : f32[1,3,3,4] @"relu"
  output %r
})");
  testing::expect_same_numerics(ir::parse_graph(before), passes::run_passes(ir::parse_graph(before), {"fold-qdq"}, {}));
  // A per-tensor DequantizeLinear that another node reads too (a dense block's input, which its
  // concat reads), times a per-channel Mul: S = s * a, the DequantizeLinear kept for the other.
  const std::string shared = R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %a : f32[4] = [0.5, 2.0, -1.0, 4.0]
  const %b : f32[4] = [0.5, -0.25, 1.0, -1.0]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %d = DequantizeLinear(%q, %s, %z) : f32[1,3,3,4] @"dq"
  %m = Mul(%d, %a) : f32[1,3,3,4] @"norm.scale"
  %n = Add(%m, %b) : f32[1,3,3,4] @"norm"
  output %n
  output %d
})";
  testing::expect_pass_result("fold-qdq", shared, R"(graph @g opset 17 {
  input %x : f32[1,3,3,4]
  const %s : f32[] = [0.0625]
  const %z : i8[] = [0]
  const %norm.unit_weights : f32[4,1,1,1] = [1.0, 1.0, 1.0, 1.0]
  const %norm.shift : f32[4] = [0.5, -0.25, 1.0, -1.0]
  const %norm.dequant_scale : f32[4] = [0.03125, 0.125, -0.0625, 0.25]
  %q = QuantizeLinear(%x, %s, %z) : i8[1,3,3,4] @"q"
  %d = DequantizeLinear(%q, %s, %z) : f32[1,3,3,4] @"dq"
  %n = tessel.Conv(%q, %norm.unit_weights, %norm.shift, _, %norm.dequant_scale) {group = 4, int8_refusal = "a per-channel shift of int8 values (a norm after a DequantizeLinear): a 1x1 depthwise conv that reads the integers"} : f32[1,3,3,4] @"norm"
  output %n
  output %d
})");
  testing::expect_same_numerics(ir::parse_graph(shared), passes::run_passes(ir::parse_graph(shared), {"fold-qdq"}, {}));
  for (const std::string& kept : {model("i8", shift, "  output %d\n"), model("u8", shift, ""),
                                  model("i8", "", "").replace(model("i8", "", "").find("%b)"), 3, "%y)")}) {
    SCOPED_TRACE(kept);
    const ir::Graph g = passes::run_passes(ir::parse_graph(kept), {"fold-qdq"}, {});
    int convs = 0, adds = 0;
    for (const ir::Node& n : g.nodes) {
      convs += n.op == "tessel.Conv";
      adds += n.op == "Add";
    }
    EXPECT_EQ(convs, 0);
    EXPECT_EQ(adds, 1);
  }
}

}  // namespace
}  // namespace tessel
