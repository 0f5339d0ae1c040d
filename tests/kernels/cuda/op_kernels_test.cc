// The non-contraction op kernels (kernels/cuda/op_kernels.h) without a GPU: which nodes are
// accepted (and why others are not), which kernel shape each gets, and that every generated
// translation unit compiles with NVRTC. One compile per op kind (NVRTC takes about a second
// each); the results against the CPU reference run in tests/gpu/op_kernels_gpu_test.cc.
#include <gtest/gtest.h>

#include "kernels/cuda/op_kernels.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "device/cuda_api.h"
#include "kernels/cuda/nvrtc_test_util.h"

namespace tessel::kernels::cuda {
namespace {

struct Input {
  ir::TensorType type;
  Tensor constant;  // defined: a constant input
};

// A one-node graph with inferred output types.
ir::Graph one_node(const std::string& op, const std::vector<Input>& inputs, ir::Attributes attrs = {},
                   int outputs = 1) {
  ir::Graph g;
  std::vector<ir::ValueId> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (inputs[i].constant.defined()) {
      ins.push_back(g.add_constant(name, inputs[i].constant));
    } else {
      ins.push_back(g.add_value(name, inputs[i].type));
      g.inputs.push_back(ins.back());
    }
  }
  std::vector<ir::ValueId> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i), {}));
  g.add_node(op, "node", ins, outs, std::move(attrs));
  g.outputs = outs;
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

using Ints = std::vector<int64_t>;

Input act(DType t, Shape s) { return {{t, std::move(s)}, {}}; }
Input ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return {{DType::kI64, {n}}, Tensor::from_vector<int64_t>({n}, v)};
}

// Emits, checks the source for `expect`, compiles for each arch.
OpKernelSource emit_and_compile(const ir::Graph& g, const std::string& expect,
                                const std::vector<std::string>& archs = {"sm_90a"}) {
  const ir::Node& n = g.nodes[0];
  const std::optional<std::string> why = can_emit_op(g, n);
  EXPECT_FALSE(why) << *why;
  OpKernelSource ks = emit_op(g, n);
  EXPECT_NE(ks.source.find(expect), std::string::npos) << ks.source;
  EXPECT_GE(ks.grid[0], 1u);
  EXPECT_LE(ks.grid[0], 132u * 16);
  for (const std::string& arch : archs) {
    device::CompileOptions options;
    options.arch = arch;
    options.headers = ks.headers;
    const device::CompiledKernel k = device::compile(ks.source, ks.name + ".cu", options);
    EXPECT_FALSE(k.cubin.empty()) << arch << "\n" << ks.source;
  }
  return ks;
}

class OpKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { device::set_cache_dir(""); }
};

TEST_F(OpKernelsTest, CastAndFlatCopiesUseSixteenByteFragments) {
  // f32 -> f16: 8 elements per item (16-byte stores), loaded as two 16-byte f32 chunks.
  emit_and_compile(one_node("Cast", {act(DType::kF32, {1, 3, 16, 24})}, {{"to", int64_t{10}}}),
                   "Frag<f16, 8> f;", {"sm_80", "sm_90a"});
  emit_and_compile(one_node("Flatten", {act(DType::kF16, {2, 5, 1, 1})}, {{"axis", int64_t{1}}}),
                   "Frag<f16, 2> f;");  // 10 elements: the widest V dividing 10
}

TEST_F(OpKernelsTest, LayoutTransposeIsTiledOthersGather) {
  const OpKernelSource nhwc = emit_and_compile(
      one_node("Transpose", {act(DType::kF16, {2, 3, 17, 33})}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}),
      "kB = 2, kR = 3, kC = 561", {"sm_80", "sm_90a"});
  EXPECT_NE(nhwc.source.find("Transpose2D<Problem>"), std::string::npos);
  // 3 rows (channels): one thread per column, 2 x 561 of them in blocks of 256.
  EXPECT_EQ(nhwc.grid[0], (2u * 561 + 255) / 256);
  const OpKernelSource wide = emit_and_compile(
      one_node("Transpose", {act(DType::kF16, {2, 40, 17, 33})}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}),
      "kB = 2, kR = 40, kC = 561", {"sm_80"});
  EXPECT_EQ(wide.grid[0], 2u * 2 * 18);  // 2 batches x 2 x 18 tiles of 32x32
  // Swapping two middle dims keeps the innermost contiguous: 16-byte loads and stores.
  const OpKernelSource mid = emit_and_compile(
      one_node("Transpose", {act(DType::kF16, {2, 3, 4, 8})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
      "source strides [96, 8, 32, 1]");
  EXPECT_NE(mid.source.find("s.load("), std::string::npos);
}

TEST_F(OpKernelsTest, ChannelPadAndConcatAndSplitAndSlice) {
  emit_and_compile(one_node("Pad", {act(DType::kF16, {1, 5, 7, 3}), ints({0, 0, 0, 0, 0, 0, 0, 5})}),
                   "Frag<f16, 8> f;");  // one 16-byte store per pixel, 3 guarded loads
  emit_and_compile(one_node("Concat", {act(DType::kF16, {1, 3, 3, 64}), act(DType::kF16, {1, 3, 3, 96}),
                                       act(DType::kF16, {1, 3, 3, 24})},
                            {{"axis", int64_t{3}}}),
                   "if (i < 72)");  // the first input's 9 * 64 / 8 items
  emit_and_compile(one_node("Split", {act(DType::kF32, {2, 6, 5})}, {{"axis", int64_t{1}}}, 2),
                   "p.out[1]");
  emit_and_compile(one_node("Slice", {act(DType::kF32, {4, 10}), ints({1, 9}), ints({4, 0}), ints({0, 1}),
                                      ints({1, -2})}),
                   "source strides [10, -2]");
}

TEST_F(OpKernelsTest, ElementwiseBroadcastReusesScalars) {
  // [32] broadcast over [1, 8, 8, 32]: merged to [64, 32]; the bias is loaded V-wide.
  emit_and_compile(one_node("Add", {act(DType::kF16, {1, 8, 8, 32}), act(DType::kF16, {32})}),
                   "merged extents [64, 32]", {"sm_80", "sm_90a"});
  // Clip with scalar bounds as inputs: each loaded once per fragment.
  emit_and_compile(one_node("Clip", {act(DType::kF32, {3, 7}), act(DType::kF32, {}), act(DType::kF32, {})}),
                   "((x0 < x1 ? x1 : x0) > x2 ? x2 : (x0 < x1 ? x1 : x0))");
}

TEST_F(OpKernelsTest, PoolsAndDepthToSpace) {
  emit_and_compile(one_node("tessel.MaxPool", {act(DType::kF16, {1, 9, 9, 24})},
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                             {"ceil_mode", int64_t{1}}}),
                   "kOH = 4, kOW = 4", {"sm_80", "sm_90a"});
  emit_and_compile(one_node("tessel.AveragePool", {act(DType::kF32, {2, 7, 7, 6})},
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"count_include_pad", int64_t{1}}}),
                   "kCountIncludePad = true");
  // A mean over the pixels: [N, H*W, C]; 5 vector columns, 1024 threads (204 row lanes of 5).
  emit_and_compile(one_node("tessel.GlobalAveragePool", {act(DType::kF16, {2, 5, 5, 40})}),
                   "kOuter = 2, kR = 25, kInner = 40;\n  static constexpr int kVec = 8, kCols = 5, kThreads = 1024;");
  emit_and_compile(one_node("tessel.DepthToSpace", {act(DType::kF16, {1, 4, 5, 32})},
                            {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}),
                   "source strides");
}

// Every op kernel enters through grid_dependency_wait: the engine launches it as a programmatic
// dependent of the kernel before it, so on sm_90 nothing may touch memory before the wait.
TEST_F(OpKernelsTest, EveryKindWaitsOnTheGridBeforeItBeforeTouchingMemory) {
  const std::vector<ir::Graph> graphs = {
      one_node("Cast", {act(DType::kF32, {1, 3, 16, 24})}, {{"to", int64_t{10}}}),
      one_node("Add", {act(DType::kF16, {2, 8, 8, 16}), act(DType::kF16, {2, 8, 8, 16})}),
      one_node("tessel.MaxPool", {act(DType::kF16, {1, 9, 9, 24})},
               {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}}),
      one_node("tessel.GlobalAveragePool", {act(DType::kF16, {2, 5, 5, 40})}),
      one_node("Softmax", {act(DType::kF32, {4, 100})}, {{"axis", int64_t{-1}}}),
  };
  for (const ir::Graph& g : graphs) {
    const OpKernelSource ks = emit_op(g, g.nodes[0]);
    SCOPED_TRACE(ks.name);
    EXPECT_TRUE(ks.grid_dependent);
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const testing::Compiled out = testing::nvrtc_compile(ks, arch);
      ASSERT_TRUE(out.ok) << out.log;
      EXPECT_EQ(testing::grid_dependency_problem(out.ptx, std::string(arch) == "sm_90a"), "") << arch;
    }
  }
}

TEST_F(OpKernelsTest, GroupedConvWithEpilogueAndStoreMap) {
  // MobileNet-v2's depthwise layer: clip(0, 6) epilogue, f32 bias, 16-byte channel vectors.
  emit_and_compile(one_node("tessel.Conv", {act(DType::kF16, {1, 16, 16, 96}), act(DType::kF16, {96, 3, 3, 1}),
                                            act(DType::kF32, {96})},
                            {{"group", int64_t{96}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"strides", std::vector<int64_t>{2, 2}}, {"epilogue", std::vector<std::string>{"clip"}},
                             {"epilogue_alpha", std::vector<double>{0.0}}, {"epilogue_beta", std::vector<double>{6.0}}}),
                   "v = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);", {"sm_80", "sm_90a"});
  // Grouped (4 in / 2 out channels per group), residual, depth_to_space store.
  emit_and_compile(one_node("tessel.Conv", {act(DType::kF32, {1, 5, 6, 8}), act(DType::kF32, {4, 3, 3, 4}),
                                            act(DType::kF32, {4}), act(DType::kF32, {1, 5, 6, 4})},
                            {{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"epilogue", std::vector<std::string>{"add_residual", "relu"}},
                             {"store", std::string("depth_to_space")}, {"block", int64_t{2}},
                             {"mode", std::string("CRD")}}),
                   "kCig = 4, kCog = 2");
}

TEST_F(OpKernelsTest, SoftmaxTakesOneWarpPerContiguousRow) {
  // Last axis (opset 17 default -1): 6 rows of 1000 logits, 8 warps (rows) per block.
  const OpKernelSource rows =
      emit_and_compile(one_node("Softmax", {act(DType::kF16, {2, 3, 1000})}), "kOuter = 6, kN = 1000, kInner = 1");
  EXPECT_NE(rows.source.find("SoftmaxRows<Problem>::run"), std::string::npos);
  EXPECT_EQ(rows.grid[0], 1u);
  // A middle axis is strided: one thread per (outer, inner) pair.
  const OpKernelSource strided = emit_and_compile(
      one_node("Softmax", {act(DType::kF32, {2, 5, 3})}, {{"axis", int64_t{1}}}), "kOuter = 2, kN = 5, kInner = 3");
  EXPECT_NE(strided.source.find("SoftmaxStrided<Problem>"), std::string::npos);
  // LogSoftmax: the same kernels, x - max - log(sum).
  emit_and_compile(one_node("LogSoftmax", {act(DType::kF16, {2, 3, 1000})}), "kInner = 1;\n  static constexpr bool kLog = true;");
  emit_and_compile(one_node("LogSoftmax", {act(DType::kF32, {2, 5, 3})}, {{"axis", int64_t{1}}}),
                   "kInner = 3;\n  static constexpr bool kLog = true;");
}

TEST_F(OpKernelsTest, ReduceMeanOverOneRunOfDimsIsAMeanOverTheMiddleDim) {
  // NHWC spatial mean (squeeze-excite, the classifier's pool): [N, H*W, C], the columns kernel.
  const OpKernelSource spatial = emit_and_compile(
      one_node("ReduceMean", {act(DType::kF16, {32, 112, 112, 32})}, {{"axes", Ints{1, 2}}}),
      "kOuter = 32, kR = 12544, kInner = 32;\n  static constexpr int kVec = 8, kCols = 4, kThreads = 1024;");
  EXPECT_NE(spatial.source.find("ReduceColumns<Problem>::run"), std::string::npos);
  EXPECT_NE(spatial.source.find("kKind = tessel::kReduceMean;"), std::string::npos);
  EXPECT_EQ(spatial.grid[0], 32u);  // one block per image: the sum's order never depends on the grid
  // Many (image, column chunk) blocks: 256 threads each.
  const OpKernelSource wide = emit_and_compile(
      one_node("ReduceMean", {act(DType::kF16, {32, 7, 7, 2048})}, {{"axes", Ints{1, 2}}}),
      "kOuter = 32, kR = 49, kInner = 2048;\n  static constexpr int kVec = 8, kCols = 32, kThreads = 256;");
  EXPECT_EQ(wide.grid[0], 32u * 8u);
  // Unit dims do not break the run; the innermost run is a row mean, a warp per row.
  const OpKernelSource rows = emit_and_compile(
      one_node("ReduceMean", {act(DType::kF32, {6, 1, 5, 7})}, {{"axes", Ints{-1, 2}}, {"keepdims", int64_t{0}}}),
      "kOuter = 6, kR = 35, kInner = 1;");
  EXPECT_NE(rows.source.find("ReduceRows<Problem>::run"), std::string::npos);
  EXPECT_EQ(rows.grid[0], 1u);  // 6 rows, 8 warps per block
  emit_and_compile(one_node("ReduceMean", {act(DType::kF32, {3, 4})}, {{"keepdims", int64_t{0}}}),
                   "kOuter = 1, kR = 12, kInner = 1;");
}

TEST_F(OpKernelsTest, LrnReadsItsChannelWindowInEitherLayout) {
  // NHWC: the channels are contiguous (kInner 1); size 5 takes 2 channels each side.
  emit_and_compile(one_node("tessel.LRN", {act(DType::kF16, {2, 5, 7, 24})}, {{"size", int64_t{5}}}),
                   "kOuter = 70, kC = 24, kInner = 1;\n  static constexpr i64 kBefore = 2, kAfter = 2;");
  // Channels-first of rank 3, an even size (1 before, 2 after), alpha over size folded.
  emit_and_compile(one_node("LRN", {act(DType::kF32, {2, 6, 10})},
                            {{"size", int64_t{4}}, {"alpha", 0.5}, {"beta", 0.5}, {"bias", 2.0}}),
                   "kOuter = 2, kC = 6, kInner = 10;\n  static constexpr i64 kBefore = 1, kAfter = 2;\n"
                   "  static constexpr float kAlphaOverSize = 0.125f, kBeta = 0.5f, kBias = 2.0f;");
}

TEST_F(OpKernelsTest, ReflectAndEdgePadsMapEachCoordinateIntoTheSource) {
  // ReflectionPad2d(1) of a style-transfer net in NHWC: H and W padded, one element per item.
  const OpKernelSource reflect = emit_and_compile(
      one_node("Pad", {act(DType::kF16, {1, 6, 5, 8}), ints({0, 1, 1, 0, 0, 1, 1, 0})}, {{"mode", std::string("reflect")}}),
      "const i64 s0 = pad_reflect(c0 - 1, 6);\n    const i64 s1 = pad_reflect(c1 - 1, 5);");
  EXPECT_EQ(reflect.source.find("pad ="), std::string::npos) << "no pad value in reflect mode";
  emit_and_compile(one_node("Pad", {act(DType::kF32, {2, 3}), ints({2, 0, 1, 3})}, {{"mode", std::string("edge")}}),
                   "pad_edge(c0 - 2, 2)");
}

TEST_F(OpKernelsTest, MatMulOfActivationsBroadcastsItsBatchDims) {
  // Attention: [2, 4, 9, 16] x [4, 16, 7] -> [2, 4, 9, 7]; B broadcast along the first dim.
  emit_and_compile(one_node("MatMul", {act(DType::kF16, {2, 4, 9, 16}), act(DType::kF16, {4, 16, 7})}),
                   "kBatch = 8, kM = 9, kN = 7, kK = 16;\n  static constexpr int kBatchDims = 2;\n"
                   "  static constexpr i64 kBatchExtent[] = {2, 4, 1}, kAStride[] = {576, 144, 0}, kBStride[] = {0, 112, 0};");
  // A vector times a matrix: [16] x [16, 5].
  emit_and_compile(one_node("MatMul", {act(DType::kF32, {16}), act(DType::kF32, {16, 5})}),
                   "kBatch = 1, kM = 1, kN = 5, kK = 16;");
  const ir::Graph ints_mm = one_node("MatMul", {act(DType::kI64, {2, 3}), act(DType::kI64, {3, 2})});
  EXPECT_EQ(can_emit_op(ints_mm, ints_mm.nodes[0]).value_or(""),
            "MatMul 'node': input dtype i64 has no GPU MatMul kernel (f32, f16, bf16; integer products are "
            "shape arithmetic)");
}

TEST_F(OpKernelsTest, CumSumAndGatherElements) {
  emit_and_compile(one_node("CumSum", {act(DType::kF32, {3, 5, 4}), ints({1})}, {{"reverse", int64_t{1}}}),
                   "kOuter = 3, kN = 5, kInner = 4;\n  static constexpr bool kExclusive = false, kReverse = true;");
  const Tensor idx = Tensor::from_vector<int64_t>({2, 3}, {0, -1, 2, 1, 1, 0});
  emit_and_compile(one_node("GatherElements", {act(DType::kF16, {3, 4}), {{DType::kI64, {2, 3}}, idx}},
                            {{"axis", int64_t{1}}}),
                   "if (k < 0) k += 4;");
  const Tensor bad = Tensor::from_vector<int64_t>({1, 1}, {5});
  const ir::Graph out_of_range = one_node("GatherElements", {act(DType::kF16, {3, 4}), {{DType::kI64, {1, 1}}, bad}});
  EXPECT_EQ(can_emit_op(out_of_range, out_of_range.nodes[0]).value_or(""), "GatherElements 'node': index 5 out of range");
}

TEST_F(OpKernelsTest, ExpandAndTileAreStridedCopies) {
  // Expand [C, 1] to [N, C, W]: the source stands still along N and W (stride 0).
  emit_and_compile(one_node("Expand", {act(DType::kF16, {6, 1}), ints({2, 6, 5})}),
                   "extents [2, 6, 5], source strides [0, 1, 0], destination strides [30, 5, 1]");
  // Tile [2, 3] by [2, 2]: [repeat, row, repeat, column].
  emit_and_compile(one_node("Tile", {act(DType::kF32, {2, 3}), ints({2, 2})}),
                   "extents [2, 2, 2, 3], source strides [0, 3, 0, 1], destination strides [12, 6, 3, 1]");
}

TEST_F(OpKernelsTest, ArgMaxAndArgMinAlongAnAxis) {
  // A segmentation head's class map: the channels of NCHW logits (axis 1), keepdims 0.
  emit_and_compile(one_node("ArgMax", {act(DType::kF16, {2, 21, 8, 8})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}),
                   "kOuter = 2, kN = 21, kInner = 64;\n  static constexpr bool kMax = true, kSelectLast = false;");
  emit_and_compile(one_node("ArgMin", {act(DType::kF32, {3, 7})}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}}),
                   "kOuter = 3, kN = 7, kInner = 1;\n  static constexpr bool kMax = false, kSelectLast = true;");
}

TEST_F(OpKernelsTest, ComparisonsLogicAndWhere) {
  emit_and_compile(one_node("Greater", {act(DType::kF32, {3, 5}), act(DType::kF32, {5})}), "(x0 > x1 ? 1.f : 0.f)");
  emit_and_compile(one_node("And", {act(DType::kBool, {3, 5}), act(DType::kBool, {3, 5})}), "from_float<b8>");
  emit_and_compile(one_node("Not", {act(DType::kBool, {7})}), "(x0 != 0.f ? 0.f : 1.f)");
  emit_and_compile(one_node("Where", {act(DType::kBool, {3, 1}), act(DType::kF16, {3, 5}), act(DType::kF16, {5})}),
                   "(x0 != 0.f ? x1 : x2)");
  auto reason = [](const ir::Graph& g) { return can_emit_op(g, g.nodes[0]).value_or(""); };
  EXPECT_EQ(reason(one_node("Less", {act(DType::kI64, {3}), act(DType::kI64, {3})})),
            "Less 'node': only float operands have a GPU comparison kernel (integer ones are shape arithmetic)");
}

TEST_F(OpKernelsTest, VariadicOpsFoldTheirOperands) {
  // Three broadcast operands (a feature-pyramid sum), NaN-propagating Max, Mean's division.
  const OpKernelSource sum = emit_and_compile(
      one_node("Sum", {act(DType::kF16, {2, 4, 4, 8}), act(DType::kF16, {2, 4, 4, 8}), act(DType::kF16, {8})}),
      "float a = x0; a += x1; a += x2; return a;");
  emit_and_compile(one_node("Max", {act(DType::kF32, {3, 5}), act(DType::kF32, {3, 5}), act(DType::kF32, {5})}),
                   "a = a >= x2 || a != a ? a : x2;");
  emit_and_compile(one_node("Mean", {act(DType::kF32, {3, 5}), act(DType::kF32, {3, 5})}), "a /= 2.f;");
  emit_and_compile(one_node("Min", {act(DType::kF32, {3, 5})}), "float a = x0; return a;");
}

TEST_F(OpKernelsTest, SpaceToDepthIsAStridedCopyInEitherLayout) {
  emit_and_compile(one_node("tessel.SpaceToDepth", {act(DType::kF16, {2, 8, 6, 24})}, {{"blocksize", int64_t{2}}}),
                   "tessel.SpaceToDepth");
  emit_and_compile(one_node("SpaceToDepth", {act(DType::kF32, {1, 3, 9, 6})}, {{"blocksize", int64_t{3}}}),
                   "SpaceToDepth");
  const ir::Graph odd = one_node("SpaceToDepth", {act(DType::kF32, {1, 3, 9, 6})}, {{"blocksize", int64_t{3}}});
  EXPECT_FALSE(can_emit_op(odd, odd.nodes[0]));
}

TEST_F(OpKernelsTest, GroupNormalizationInEitherLayout) {
  // A diffusion UNet's GroupNorm(32) over 128 channels in NHWC: 4 channels per group; before
  // opset 21 scale and bias are per group (kPerGroupAffine).
  emit_and_compile(one_node("tessel.GroupNormalization",
                            {act(DType::kF16, {2, 16, 16, 128}), act(DType::kF16, {32}), act(DType::kF16, {32})},
                            {{"num_groups", int64_t{32}}}),
                   "kNhwc = true, kPerGroupAffine = true;\n"
                   "  static constexpr i64 kImages = 2, kGroups = 32, kC = 128, kPerGroup = 4, kPixels = 256;");
}

TEST_F(OpKernelsTest, InstanceNormalizationInEitherLayout) {
  // NHWC: columns of 64x64 pixels per (image, 8-channel vector), 1024 threads (4 blocks).
  const OpKernelSource nhwc = emit_and_compile(
      one_node("tessel.InstanceNormalization",
               {act(DType::kF16, {2, 64, 64, 128}), act(DType::kF16, {128}), act(DType::kF16, {128})}),
      "kOuter = 2, kR = 4096, kInner = 128;\n  static constexpr int kVec = 8, kCols = 16, kThreads = 1024;");
  EXPECT_NE(nhwc.source.find("InstanceNormColumns<Problem>::run"), std::string::npos);
  EXPECT_EQ(nhwc.grid[0], 2u);
  // Channels-first of rank 3: rows of pixels, channel = row % C.
  emit_and_compile(one_node("InstanceNormalization",
                            {act(DType::kF32, {2, 6, 50}), act(DType::kF32, {6}), act(DType::kF32, {6})},
                            {{"epsilon", 1e-3}}),
                   "static constexpr i64 kOuter = 12, kR = 50, kC = 6;");
  // Fused activations (fuse's epilogue attribute) finish each output: ReLU, then SiLU.
  emit_and_compile(one_node("tessel.InstanceNormalization",
                            {act(DType::kF16, {1, 4, 4, 16}), act(DType::kF16, {16}), act(DType::kF16, {16})},
                            {{"epilogue", std::vector<std::string>{"relu", "silu"}}}),
                   "static float act(float v) {\n    v = v < 0.f ? 0.f : v;\n    v = silu_f(v);\n");
}

TEST_F(OpKernelsTest, ReduceMeanOverSeveralRunsSplitsKeptAndReducedDims) {
  // Axes 0 and 2 of [3, 4, 5]: two runs, the general kernel (kept dim 1, stride 5).
  emit_and_compile(one_node("ReduceMean", {act(DType::kF32, {3, 4, 5})}, {{"axes", Ints{0, 2}}}),
                   "kKeptExtent[] = {4, 1}, kKeptStride[] = {5, 0}");
}

TEST_F(OpKernelsTest, EveryFloatReductionHasAKernel) {
  // The same kernels with their accumulator (ReduceKind). Opset 17: axes an attribute, an input
  // for ReduceSum (since 13).
  auto reduce = [](const std::string& op, Input x, Ints axes) {
    if (op == "ReduceSum") return one_node(op, {std::move(x), ints(axes)});
    return one_node(op, {std::move(x)}, {{"axes", axes}});
  };
  for (const auto& [op, kind] : std::vector<std::pair<std::string, std::string>>{
           {"ReduceSum", "kReduceSum"},       {"ReduceMax", "kReduceMax"},
           {"ReduceMin", "kReduceMin"},       {"ReduceProd", "kReduceProd"},
           {"ReduceSumSquare", "kReduceSumSquare"}, {"ReduceL1", "kReduceL1"},
           {"ReduceL2", "kReduceL2"},         {"ReduceLogSum", "kReduceLogSum"},
           {"ReduceLogSumExp", "kReduceLogSumExp"}}) {
    SCOPED_TRACE(op);
    // Spatial (columns), innermost (rows) and two runs (one thread per output).
    emit_and_compile(reduce(op, act(DType::kF16, {2, 9, 9, 40}), {1, 2}), "kKind = tessel::" + kind + ";");
    emit_and_compile(reduce(op, act(DType::kF32, {4, 3, 50}), {-1}), "kKind = tessel::" + kind + ";");
    emit_and_compile(reduce(op, act(DType::kF32, {3, 4, 5}), {0, 2}), "kKind = tessel::" + kind + ";");
  }
  // LogSumExp's two-word partials: 512 threads where the blocks are few.
  emit_and_compile(reduce("ReduceLogSumExp", act(DType::kF16, {2, 30, 30, 16}), {1, 2}), "kThreads = 512;");
  // The identity (no axes, noop_with_empty_axes) is a sum of one element, whatever the op.
  emit_and_compile(one_node("ReduceL2", {act(DType::kF32, {3, 4})}, {{"noop_with_empty_axes", int64_t{1}}}),
                   "kKind = tessel::kReduceSum;");
  // GlobalMaxPool in NHWC: a max over the pixels.
  emit_and_compile(one_node("tessel.GlobalMaxPool", {act(DType::kF16, {2, 5, 5, 40})}),
                   "kKind = tessel::kReduceMax;\n  static constexpr i64 kOuter = 2, kR = 25, kInner = 40;");
}

TEST_F(OpKernelsTest, UnsupportedNodesSayWhy) {
  auto reason = [](const ir::Graph& g) {
    const std::optional<std::string> why = can_emit_op(g, g.nodes[0]);
    return why.value_or("");
  };
  EXPECT_EQ(reason(one_node("tessel.Conv", {act(DType::kF16, {1, 4, 4, 8}), act(DType::kF16, {8, 1, 1, 8})})),
            "tessel.Conv 'node': group 1 convolutions are contractions (contraction_kernel.h)");
  EXPECT_EQ(reason(one_node("tessel.Conv", {act(DType::kF16, {1, 4, 4, 8}), act(DType::kF16, {8, 1, 1, 4})},
                            {{"group", int64_t{2}}, {"store", std::string("nchw")}})),
            "tessel.Conv 'node': a grouped convolution with an NCHW store, input_layout, or an "
            "out_dtype other than int8 (a depthwise one's: or uint8) after a last quantize step "
            "(only group-1 convolutions take them)");
  EXPECT_EQ(reason(one_node("CumSum", {act(DType::kF32, {2, 10}), {{DType::kI64, {}}, {}}})),
            "CumSum 'node': the axis (input 1) must be a constant");
  EXPECT_EQ(reason(one_node("ReduceMean", {act(DType::kI32, {2, 10})}, {{"axes", Ints{1}}})),
            "ReduceMean 'node': input dtype i32 has no GPU kernel (f32, f16, bf16; integer reductions "
            "need exact accumulation)");
  EXPECT_EQ(reason(one_node("Cast", {act(DType::kF32, {2})}, {{"to", int64_t{11}}})),
            "Cast 'node': output dtype f64 has no GPU kernel (f32, f16, bf16, i64, i32, i8, u8, bool)");
}

Input tensor(DType t, Shape s, std::vector<double> v) {
  Tensor c = Tensor::from_doubles(t, s, v);
  return {{t, std::move(s)}, std::move(c)};
}

// QuantizeLinear per tensor: 16 codes per thread (one 16-byte store), the f32 quotient a
// correctly rounded division; per channel of NHWC data (axis 3): the scales and zero points
// loaded 16 wide with the channels.
TEST_F(OpKernelsTest, QuantizeLinearStoresSixteenCodesPerThread) {
  const OpKernelSource per_tensor = emit_and_compile(
      one_node("QuantizeLinear", {act(DType::kF32, {1, 8, 8, 32}), tensor(DType::kF32, {}, {0.5}),
                                  tensor(DType::kU8, {}, {128})}),
      "quantize<u8>(__fdiv_rn(x0, x1), static_cast<int>(x2))", {"sm_80", "sm_90a"});
  EXPECT_NE(per_tensor.source.find("Frag<u8, 16> y;"), std::string::npos) << per_tensor.source;
  EXPECT_NE(per_tensor.source.find("Frag<float, 1> a1;"), std::string::npos) << per_tensor.source;
  const OpKernelSource per_channel = emit_and_compile(
      one_node("QuantizeLinear", {act(DType::kF32, {2, 7, 7, 64}), act(DType::kF32, {64}), act(DType::kI8, {64})},
               {{"axis", int64_t{3}}}),
      "merged extents [98, 64]");
  EXPECT_NE(per_channel.source.find("Frag<float, 16> a1;"), std::string::npos) << per_channel.source;
  EXPECT_NE(per_channel.source.find("Frag<i8, 16> a2;"), std::string::npos) << per_channel.source;
  // Without a zero point: u8 with zero point 0. f16 input: the quotient rounded to f16 first.
  emit_and_compile(one_node("QuantizeLinear", {act(DType::kF32, {40}), tensor(DType::kF32, {}, {0.5})}),
                   "quantize<u8>(__fdiv_rn(x0, x1), 0)");
  emit_and_compile(one_node("QuantizeLinear", {act(DType::kF16, {4, 8}), tensor(DType::kF16, {}, {0.5}),
                                               tensor(DType::kI8, {}, {1})}),
                   "quantize<i8>(to_float(from_float<f16>(__fdiv_rn(x0, x1))), static_cast<int>(x2))");
}

// DequantizeLinear: per channel along axis 1 of NCHW data, the parameter is one value per
// fragment ([C, 1, 1] broadcast); i32 input; f16 output.
TEST_F(OpKernelsTest, DequantizeLinearPerAxisAndTypes) {
  const OpKernelSource nchw = emit_and_compile(
      one_node("DequantizeLinear", {act(DType::kU8, {2, 3, 4, 8}), act(DType::kF32, {3}), act(DType::kU8, {3})}),
      "merged extents [2, 3, 32]", {"sm_80", "sm_90a"});
  EXPECT_NE(nchw.source.find("Frag<u8, 16> a0;"), std::string::npos) << nchw.source;
  EXPECT_NE(nchw.source.find("Frag<float, 1> a1;"), std::string::npos) << nchw.source;
  EXPECT_NE(nchw.source.find("y.v[v] = from_float<float>(__fmul_rn(x0 - x2, x1));"), std::string::npos)
      << nchw.source;
  emit_and_compile(one_node("DequantizeLinear", {act(DType::kI32, {64}), tensor(DType::kF32, {}, {0.01})}),
                   "from_float<float>(__fmul_rn(x0, x1))");
  ir::Graph f16 = one_node("DequantizeLinear", {act(DType::kI8, {5, 16}), act(DType::kF16, {16}), act(DType::kI8, {16})},
                           {{"axis", int64_t{-1}}});
  emit_and_compile(f16, "Frag<f16, 16> y;");
}

// int8 data movement is a copy, and a Cast from i8/u8 (a uint8 image input) converts exactly;
// int8 arithmetic other than Q/DQ, and casts into i8/u8, are refused.
TEST_F(OpKernelsTest, Int8TensorsMoveButOnlyQuantizationComputes) {
  emit_and_compile(one_node("Transpose", {act(DType::kU8, {2, 5, 7, 24})}, {{"perm", Ints{0, 3, 1, 2}}}),
                   "Transpose2D<Problem>");
  emit_and_compile(one_node("Pad", {act(DType::kI8, {1, 5, 7, 3}), ints({0, 0, 0, 0, 0, 0, 0, 13})}),
                   "convert<i8>(i64(0))");
  emit_and_compile(one_node("Concat", {act(DType::kI8, {1, 3, 3, 16}), act(DType::kI8, {1, 3, 3, 48})},
                            {{"axis", int64_t{3}}}),
                   "Frag<i8, 16> f;");
  auto reason = [](const ir::Graph& g) { return can_emit_op(g, g.nodes[0]).value_or(""); };
  emit_and_compile(one_node("Cast", {act(DType::kU8, {2, 16, 18, 3})}, {{"to", int64_t{10}}}),
                   "convert<f16>(");
  emit_and_compile(one_node("Cast", {act(DType::kI8, {4, 8})}, {{"to", int64_t{1}}}), "convert<float>(");
  EXPECT_EQ(reason(one_node("Cast", {act(DType::kF32, {4})}, {{"to", int64_t{2}}})),
            "Cast 'node': Cast of i8/u8 tensors has no GPU kernel (only QuantizeLinear, "
            "DequantizeLinear, data movement, and a Cast from them take them)");
  // An int8 or uint8 max pool (fold-qdq's) compares and stores the integers (packed f16x2 of
  // 1024 + x, exact).
  emit_and_compile(one_node("tessel.MaxPool", {act(DType::kI8, {1, 4, 4, 32})}, {{"kernel_shape", Ints{2, 2}}}),
                   "using T = i8;");
  emit_and_compile(one_node("tessel.MaxPool", {act(DType::kU8, {1, 4, 4, 32})}, {{"kernel_shape", Ints{2, 2}}}),
                   "using T = u8;");

  EXPECT_EQ(reason(one_node("QuantizeLinear", {act(DType::kI32, {4}), tensor(DType::kF32, {}, {2})})),
            "QuantizeLinear 'node': input x of dtype i32 has no GPU kernel (f32, f16, bf16; the "
            "reference divides i32 in double)");
}

// The op facts (ops/op_facts.cc) and the elementwise generator agree: every op whose facts
// give it the elementwise GPU kernel is emitted for plain fp16 operands, and an op whose facts
// give it none is refused with the reason.
TEST(OpKernelFacts, ElementwiseFactsMatchTheGenerator) {
  const ir::OpRegistry& r = ir::OpRegistry::global();
  int checked = 0;
  for (const std::string& op : r.names()) {
    // QuantizeLinear / DequantizeLinear take a scale: tested above.
    if (r.facts(op).gpu != ir::GpuKernel::kElementwise || r.facts(op).kind == ir::OpKind::kQuantization)
      continue;
    SCOPED_TRACE(op);
    const bool binary = r.facts(op).kind == ir::OpKind::kBroadcast;
    const bool logic = op == "And" || op == "Or" || op == "Xor" || op == "Not";
    std::vector<Input> inputs = {act(logic || op == "Where" ? DType::kBool : DType::kF16, {2, 8})};
    if (binary) inputs.push_back(act(logic ? DType::kBool : DType::kF16, {2, 8}));
    if (op == "Where") inputs.push_back(act(DType::kF16, {2, 8}));
    const ir::Graph g = one_node(op, inputs, op == "Mod" ? ir::Attributes{{"fmod", int64_t{1}}} : ir::Attributes{});
    const std::optional<std::string> why = can_emit_op(g, g.nodes[0]);
    EXPECT_FALSE(why) << *why;
    ++checked;
  }
  EXPECT_GE(checked, 20);
  // Dropout: canonicalize removes it before the GPU sees it.
  const ir::Graph dropout = one_node("Dropout", {act(DType::kF32, {2, 4})});
  ASSERT_EQ(r.facts("Dropout").gpu, ir::GpuKernel::kNone);
  EXPECT_EQ(can_emit_op(dropout, dropout.nodes[0]),
            std::optional<std::string>("Dropout 'node': op Dropout has no GPU op kernel"));
  // A Conv whose weight is computed at run time (a graph input) is no contraction: the reason
  // names the weight.
  const ir::Graph conv = one_node("Conv", {act(DType::kF16, {1, 2, 5, 5}), act(DType::kF16, {3, 2, 3, 3})});
  EXPECT_EQ(can_emit_op(conv, conv.nodes[0]),
            std::optional<std::string>("Conv 'node': op Conv runs on the GPU as a tessel contraction, "
                                       "which takes a constant weight; input 1 ('in1') is computed at run time"));
}

// The Gather, LayerNorm and GELU kernels compile; Gather refuses indices it cannot trust.
TEST(OpKernelFacts, GatherLayerNormGeluCompile) {
  const Tensor idx = Tensor::from_vector<int64_t>({2}, {2, -1});
  emit_and_compile(one_node("Gather", {act(DType::kF16, {3, 4, 5}), {{DType::kI64, {2}}, idx}},
                            {{"axis", int64_t{1}}}),
                   "tessel_op_gather");
  emit_and_compile(one_node("LayerNormalization", {act(DType::kF16, {2, 7, 7, 96}),
                                                   act(DType::kF16, {96}), act(DType::kF16, {96})}),
                   "LayerNormRows");
  emit_and_compile(one_node("Gelu", {act(DType::kF16, {4, 8})}), "erfcf");
  const ir::Graph out_of_range =
      one_node("Gather", {act(DType::kF32, {4, 2}), {{DType::kI64, {1}}, Tensor::from_vector<int64_t>({1}, {3})}});
  EXPECT_FALSE(can_emit_op(out_of_range, out_of_range.nodes[0]));
  const ir::Graph runtime_idx = one_node("Gather", {act(DType::kF32, {4, 2}), act(DType::kI64, {3})});
  EXPECT_EQ(can_emit_op(runtime_idx, runtime_idx.nodes[0]),
            std::optional<std::string>("Gather 'node': indices must be a constant (the kernel does "
                                       "not range-check)"));
}

}  // namespace
}  // namespace tessel::kernels::cuda
