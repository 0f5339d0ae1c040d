// contraction_of, the translation of tessel.Conv / tessel.Gemm attributes into the index
// maps and epilogue the contraction generator consumes. Expected extents are computed by hand
// from ONNX's output-size formula floor((in + pads - d*(k-1) - 1) / s) + 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "kernels/contraction/contraction.h"
#include "core/error.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "ops/tessel_epilogue.h"
#include "compiler/lowering.h"

namespace tessel::compiler {
namespace {

using contraction::EpilogueOpKind;
using contraction::StoreMap;
using Ints = std::vector<int64_t>;

Tensor ones(DType t, Shape s) {
  return Tensor::from_doubles(t, s, std::vector<double>(static_cast<size_t>(numel(s)), 1.0));
}

// A one-node graph: activations are inputs, W and B constants, R an input when given.
struct OneNode {
  ir::Graph g;
  ir::Node& node() { return g.nodes[0]; }
};

OneNode make(const std::string& op, const ir::TensorType& x, const Shape& w, bool bias,
             const std::optional<Shape>& residual, ir::Attributes attrs,
             const std::vector<ops::EpilogueStep>& steps = {},
             const ops::StoreMap& store = {}) {
  OneNode r;
  ir::Graph& g = r.g;
  std::vector<ir::ValueId> ins = {g.add_value("x", x), g.add_constant("w", ones(x.dtype, w))};
  g.inputs.push_back(ins[0]);
  ins.push_back(bias ? g.add_constant("b", ones(DType::kF32, {w[0]})) : ir::kNoValue);
  if (residual) {
    ins.push_back(g.add_value("r", {x.dtype, *residual}));
    g.inputs.push_back(ins.back());
  }
  while (!ins.empty() && ins.back() == ir::kNoValue) ins.pop_back();
  const ir::ValueId y = g.add_value("y", {});
  ir::Node& n = g.add_node(op, "layer", ins, {y}, std::move(attrs));
  ops::write_epilogue(n, steps);
  if (op == "tessel.Conv") ops::write_store(n, store);
  g.outputs = {y};
  ir::infer_types(g, ir::OpRegistry::global());
  return r;
}

int dim_index(const contraction::IndexMaps& m, const std::string& name) {
  for (size_t i = 0; i < m.dims.size(); ++i)
    if (m.dims[i].name == name) return static_cast<int>(i);
  ADD_FAILURE() << "no dim " << name << " in " << m.str();
  return 0;
}

TEST(ContractionOf, ConvGeometry) {
  OneNode r = make("tessel.Conv", {DType::kF16, {1, 9, 10, 8}}, {16, 3, 3, 8}, false, {},
                   {{"strides", Ints{2, 1}}, {"pads", Ints{1, 2, 0, 1}}, {"dilations", Ints{2, 1}}});
  EXPECT_EQ(r.g.type(r.g.outputs[0]).str(), "f16[1,3,11,16]");
  const ContractionSpec s = contraction_of(r.g, r.node());
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->m, 1 * 3 * 11);
  EXPECT_EQ(m.contraction->n, 16);
  EXPECT_EQ(m.contraction->k, 3 * 3 * 8);
  EXPECT_EQ(m.contraction->batch, 1);
  EXPECT_FALSE(m.contraction->operands_swapped);
  EXPECT_TRUE(m.tensor_cores);
  // A's row index is 2*oh + 2*kh - 1, its column index ow + kw - 2.
  const auto& row = s.maps.a.index[1];
  const auto& col = s.maps.a.index[2];
  EXPECT_EQ(row.coeffs[dim_index(s.maps, "oh")], 2);
  EXPECT_EQ(row.coeffs[dim_index(s.maps, "kh")], 2);
  EXPECT_EQ(row.offset, -1);
  EXPECT_EQ(col.coeffs[dim_index(s.maps, "ow")], 1);
  EXPECT_EQ(col.coeffs[dim_index(s.maps, "kw")], 1);
  EXPECT_EQ(col.offset, -2);
  EXPECT_TRUE(s.epilogue.steps.empty());
  EXPECT_TRUE(s.extra_inputs.empty());
  EXPECT_EQ(s.epilogue.store.kind, StoreMap::Kind::kPlain);
  EXPECT_EQ(s.epilogue.out_dtype, DType::kF16);
}

// Bias first (the ops add it to the accumulator), then the node's steps in order, each
// operand numbered by first use: B -> extra[0], R -> extra[1].
TEST(ContractionOf, ConvBiasResidualRelu) {
  OneNode r = make("tessel.Conv", {DType::kF16, {2, 5, 5, 8}}, {8, 3, 3, 8}, true,
                   Shape{2, 5, 5, 8}, {{"pads", Ints{1, 1, 1, 1}}},
                   {{ops::EpilogueKind::kAddResidual}, {ops::EpilogueKind::kRelu}});
  const ContractionSpec s = contraction_of(r.g, r.node());
  ASSERT_EQ(s.epilogue.steps.size(), 3u);
  EXPECT_EQ(s.epilogue.steps[0].kind, EpilogueOpKind::kBias);
  EXPECT_EQ(s.epilogue.steps[0].operand, 0);
  EXPECT_EQ(s.epilogue.steps[1].kind, EpilogueOpKind::kResidualAdd);
  EXPECT_EQ(s.epilogue.steps[1].operand, 1);
  EXPECT_EQ(s.epilogue.steps[2].kind, EpilogueOpKind::kRelu);
  EXPECT_EQ(s.extra_inputs, (std::vector<int>{kBiasInput, kResidualInput}));
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->m, 2 * 5 * 5);
}

// Without a bias the residual is operand 0; alpha and beta travel with their steps.
TEST(ContractionOf, ResidualWithoutBiasAndParameters) {
  OneNode r = make("tessel.Conv", {DType::kF32, {1, 4, 4, 4}}, {4, 1, 1, 4}, false,
                   Shape{1, 4, 4, 4}, {},
                   {{ops::EpilogueKind::kLeakyRelu, 0.125, 0.0},
                    {ops::EpilogueKind::kAddResidual},
                    {ops::EpilogueKind::kClip, -1.5, 6.0}});
  const ContractionSpec s = contraction_of(r.g, r.node());
  ASSERT_EQ(s.epilogue.steps.size(), 3u);
  EXPECT_EQ(s.epilogue.steps[0].kind, EpilogueOpKind::kLeakyRelu);
  EXPECT_FLOAT_EQ(s.epilogue.steps[0].alpha, 0.125f);
  EXPECT_EQ(s.epilogue.steps[1].kind, EpilogueOpKind::kResidualAdd);
  EXPECT_EQ(s.epilogue.steps[1].operand, 0);
  EXPECT_EQ(s.epilogue.steps[2].kind, EpilogueOpKind::kClip);
  EXPECT_FLOAT_EQ(s.epilogue.steps[2].alpha, -1.5f);
  EXPECT_FLOAT_EQ(s.epilogue.steps[2].beta, 6.0f);
  EXPECT_EQ(s.extra_inputs, (std::vector<int>{kResidualInput}));
  EXPECT_EQ(s.epilogue.out_dtype, DType::kF32);
}

// depth_to_space CRD by 2 over the pre-store [1, 4, 6, 32]: the store map carries the conv's
// output extents (4 x 6), not the stored ones (8 x 12).
TEST(ContractionOf, DepthToSpaceCrdStore) {
  ops::StoreMap store;
  store.kind = ops::StoreMap::Kind::kDepthToSpace;
  store.block = 2;
  store.dcr = false;
  OneNode r = make("tessel.Conv", {DType::kF16, {1, 4, 6, 8}}, {32, 3, 3, 8}, true, {},
                   {{"pads", Ints{1, 1, 1, 1}}}, {}, store);
  EXPECT_EQ(r.g.type(r.g.outputs[0]).str(), "f16[1,8,12,8]");
  const ContractionSpec s = contraction_of(r.g, r.node());
  EXPECT_EQ(s.epilogue.store.kind, StoreMap::Kind::kDepthToSpace);
  EXPECT_EQ(s.epilogue.store.block, 2);
  EXPECT_FALSE(s.epilogue.store.dcr);
  EXPECT_EQ(s.epilogue.store.out_h, 4);
  EXPECT_EQ(s.epilogue.store.out_w, 6);
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->m, 4 * 6);
  EXPECT_EQ(m.contraction->n, 32);
}

// The op reads R before the store, the GPU epilogue after it: refused with the node named.
TEST(ContractionOf, ResidualBeforeDepthToSpaceIsRefused) {
  ops::StoreMap store;
  store.kind = ops::StoreMap::Kind::kDepthToSpace;
  store.block = 2;
  OneNode r = make("tessel.Conv", {DType::kF16, {1, 4, 6, 8}}, {32, 1, 1, 8}, false,
                   Shape{1, 4, 6, 32}, {}, {{ops::EpilogueKind::kAddResidual}}, store);
  try {
    contraction_of(r.g, r.node());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tessel.Conv 'layer': a residual add before a "
                                          "depth_to_space store", 0),
              0u)
        << e.what();
  }
}

// Depthwise: groups are the batch, one output channel and a 3x3 window per group.
TEST(ContractionOf, DepthwiseConvIsABatchedContraction) {
  OneNode r = make("tessel.Conv", {DType::kF16, {1, 6, 6, 16}}, {16, 3, 3, 1}, true, {},
                   {{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}});
  const ContractionSpec s = contraction_of(r.g, r.node());
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->batch, 16);
  EXPECT_EQ(m.contraction->k, 9);
  EXPECT_FALSE(m.tensor_cores);
}

// tessel.Gemm: A [3, 64] x W [10, 64] is the NT GEMM M = 3, N = 10, K = 64, both K-major.
TEST(ContractionOf, Gemm) {
  OneNode r = make("tessel.Gemm", {DType::kF16, {3, 64}}, {10, 64}, true, {}, {},
                   {{ops::EpilogueKind::kSigmoid}});
  EXPECT_EQ(r.g.type(r.g.outputs[0]).str(), "f16[3,10]");
  const ContractionSpec s = contraction_of(r.g, r.node());
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->m, 3);
  EXPECT_EQ(m.contraction->n, 10);
  EXPECT_EQ(m.contraction->k, 64);
  EXPECT_EQ(m.contraction->a_major, contraction::Major::kK);
  EXPECT_EQ(m.contraction->b_major, contraction::Major::kK);
  EXPECT_EQ(s.maps.b.shape, (Shape{10, 64}));
  ASSERT_EQ(s.epilogue.steps.size(), 2u);
  EXPECT_EQ(s.epilogue.steps[0].kind, EpilogueOpKind::kBias);
  EXPECT_EQ(s.epilogue.steps[1].kind, EpilogueOpKind::kSigmoid);
  EXPECT_EQ(s.extra_inputs, (std::vector<int>{kBiasInput}));
}

// trans_a / trans_b choose the operands' majorness: A stored [K, M] is M-major, W stored
// [K, N] is N-major (bench-op's TN and NN layouts); the extents are the same GEMM's.
TEST(ContractionOf, TransposedGemm) {
  OneNode r = make("tessel.Gemm", {DType::kF16, {64, 3}}, {64, 10}, false, {},
                   {{"trans_a", int64_t{1}}, {"trans_b", int64_t{0}}});
  EXPECT_EQ(r.g.type(r.g.outputs[0]).str(), "f16[3,10]");
  const contraction::MatchResult m = contraction::match(contraction_of(r.g, r.node()).maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_EQ(m.contraction->m, 3);
  EXPECT_EQ(m.contraction->n, 10);
  EXPECT_EQ(m.contraction->k, 64);
  EXPECT_NE(m.contraction->a_major, contraction::Major::kK);
  EXPECT_NE(m.contraction->b_major, contraction::Major::kK);
}

// A malformed attribute that type inference never saw (types set by hand) is a UserError
// naming the node.
TEST(ContractionOf, BadStridesNameTheNode) {
  ir::Graph g;
  const ir::ValueId x = g.add_value("x", {DType::kF16, {1, 4, 4, 8}});
  const ir::ValueId w = g.add_constant("w", ones(DType::kF16, {8, 1, 1, 8}));
  const ir::ValueId y = g.add_value("y", {DType::kF16, {1, 4, 4, 8}});
  g.add_node("tessel.Conv", "bad", {x, w}, {y}, {{"strides", Ints{1, 1, 1}}});
  try {
    contraction_of(g, g.nodes[0]);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tessel.Conv 'bad': attribute 'strides' has 3 values"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::compiler
