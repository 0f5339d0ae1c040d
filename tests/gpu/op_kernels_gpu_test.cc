// The non-contraction op kernels on the GPU against the CPU reference executor: each case is
// a one-node graph run by runtime::cpu::run_graph and by its generated kernel on the same
// random inputs (never zero, so a kernel that drops a term shows), with the outputs poisoned
// (0xff bytes: NaN for floats) before the launch, so that an element the kernel never writes
// fails. Odd shapes exercise the narrow-vector and tail paths.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "gpu/gpu_test_util.h"
#include "kernels/cuda/op_kernels.h"
#include "ir/infer.h"
#include "ir/op_registry.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"

namespace tessel::kernels::cuda {
namespace {

namespace rt = device;

struct Input {
  ir::TensorType type;
  Tensor constant;  // defined: a constant input (uploaded like any other, per the ABI)
  bool absent = false;  // an omitted operand (kNoValue), given a placeholder buffer
};
Input act(DType t, Shape s) { return {{t, std::move(s)}, {}}; }
Input none() { return {{}, {}, true}; }
Input ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return {{DType::kI64, {n}}, Tensor::from_vector<int64_t>({n}, v)};
}

// Values in ±[0.25, 2]: non-zero, of both signs, exact-ish in f16.
Tensor random_tensor(const ir::TensorType& t, std::mt19937& rng) {
  std::uniform_real_distribution<double> mag(0.25, 2.0);
  std::bernoulli_distribution neg(0.5);
  std::vector<double> v(static_cast<size_t>(numel(t.shape)));
  std::uniform_int_distribution<int> int8(-128, 127), uint8(0, 255);  // integers: every code
  for (double& x : v)
    x = t.dtype == DType::kBool ? 1.0
        : t.dtype == DType::kI8 ? int8(rng)
        : t.dtype == DType::kU8 ? uint8(rng)
                                : (neg(rng) ? -1 : 1) * mag(rng);
  return Tensor::from_doubles(t.dtype, t.shape, v);
}

// sqrt(sum (a - b)^2 / sum b^2); NaN anywhere (a poisoned, unwritten element) fails.
double relative_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    if (std::isnan(a) != std::isnan(b)) return INFINITY;
    if (std::isnan(b)) continue;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// `depthwise_tiling`: a depthwise conv's kernel with this tiling instead of the chooser's.
void check_op(const std::string& op, const std::vector<Input>& inputs, ir::Attributes attrs = {},
              int outputs = 1, const std::string& depthwise_tiling = "") {
  std::string why;
  if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  ir::Graph g;
  std::mt19937 rng(1234);
  std::vector<ir::ValueId> ins;
  std::vector<Tensor> all, graph_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (inputs[i].absent) {
      ins.push_back(ir::kNoValue);
      all.push_back(Tensor(DType::kF32, {1}));
    } else if (inputs[i].constant.defined()) {
      ins.push_back(g.add_constant(name, inputs[i].constant));
      all.push_back(inputs[i].constant);
    } else {
      ins.push_back(g.add_value(name, inputs[i].type));
      g.inputs.push_back(ins.back());
      all.push_back(random_tensor(inputs[i].type, rng));
      graph_inputs.push_back(all.back());
    }
  }
  std::vector<ir::ValueId> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i), {}));
  g.add_node(op, "node", ins, outs, std::move(attrs));
  g.outputs = outs;
  ir::infer_types(g, ir::OpRegistry::global());
  const std::vector<Tensor> want = runtime::cpu::run_graph(g, graph_inputs);

  const std::optional<std::string> cannot =
      depthwise_tiling.empty() ? can_emit_op(g, g.nodes[0])
                               : cannot_tile_depthwise(g, g.nodes[0], depthwise_tiling);
  ASSERT_FALSE(cannot) << *cannot;
  const OpKernelSource ks = depthwise_tiling.empty()
                                ? emit_op(g, g.nodes[0])
                                : emit_depthwise(g, g.nodes[0], depthwise_tiling);
  const std::vector<Tensor> got = ::tessel::testing::OpKernelRun(ks).run(all, want, 0xff);
  for (int j = 0; j < outputs; ++j) {
    if (want[j].dtype() == DType::kI8 || want[j].dtype() == DType::kU8) {
      // A fused quantize (by the reciprocal, after fp32 sums in another order) may land one
      // step from the reference's division where the value sits on a rounding tie: at most
      // one step, on at most 1% of the elements.
      int64_t off = 0, far = 0;
      for (int64_t i = 0; i < want[j].numel(); ++i) {
        const double d = std::abs(got[j].get_f64(i) - want[j].get_f64(i));
        off += d != 0;
        far += d > 1;
      }
      EXPECT_EQ(far, 0) << op << " output " << j << "\n" << ks.source;
      // Only a quantizing op rounds: an int8 max pool moves the integers unchanged.
      EXPECT_LE(off, op == "tessel.MaxPool" ? 0 : want[j].numel() / 100) << op << " output " << j;
      continue;
    }
    const double tol = want[j].dtype() == DType::kF16 || want[j].dtype() == DType::kBF16 ? 1e-2 : 1e-5;
    EXPECT_LE(relative_l2(got[j], want[j]), tol) << op << " output " << j << "\n" << ks.source;
  }
}

using Ints = std::vector<int64_t>;

TEST(OpKernelsGpu, Cast) {
  check_op("Cast", {act(DType::kF32, {1, 3, 16, 24})}, {{"to", int64_t{10}}});
  check_op("Cast", {act(DType::kF16, {1, 3, 5, 7})}, {{"to", int64_t{1}}});
  // A uint8 image input, and an int8 tensor, into floats.
  check_op("Cast", {act(DType::kU8, {2, 16, 18, 3})}, {{"to", int64_t{10}}});
  check_op("Cast", {act(DType::kI8, {3, 40})}, {{"to", int64_t{1}}});
}

TEST(OpKernelsGpu, CopiesAndReshapes) {
  check_op("Flatten", {act(DType::kF16, {2, 5, 1, 1})}, {{"axis", int64_t{1}}});
  check_op("Reshape", {act(DType::kF32, {3, 7}), ints({7, 3})});
}

TEST(OpKernelsGpu, Transpose) {
  check_op("Transpose", {act(DType::kF16, {2, 3, 17, 33})}, {{"perm", Ints{0, 2, 3, 1}}});
  // Tiled (more than 8 channels), and a short row of 8 / 9 either way.
  check_op("Transpose", {act(DType::kF16, {2, 40, 5, 7})}, {{"perm", Ints{0, 2, 3, 1}}});
  check_op("Transpose", {act(DType::kF32, {3, 8, 6, 5})}, {{"perm", Ints{0, 2, 3, 1}}});
  check_op("Transpose", {act(DType::kF16, {1, 9, 11, 8})}, {{"perm", Ints{0, 3, 1, 2}}});
  check_op("Transpose", {act(DType::kF16, {1, 40, 37, 3})}, {{"perm", Ints{0, 3, 1, 2}}});
  check_op("Transpose", {act(DType::kF16, {2, 3, 4, 8})}, {{"perm", Ints{0, 2, 1, 3}}});
  check_op("Transpose", {act(DType::kF32, {2, 3, 4, 5})}, {{"perm", Ints{3, 1, 0, 2}}});
}

TEST(OpKernelsGpu, Pad) {
  check_op("Pad", {act(DType::kF16, {1, 5, 7, 3}), ints({0, 0, 0, 0, 0, 0, 0, 5})});
  check_op("Pad", {act(DType::kF32, {2, 3, 5}), ints({0, 1, 2, 1, 0, 3}), act(DType::kF32, {})});
  // Reflect (ReflectionPad2d, also wider than the axis: periodic) and edge.
  check_op("Pad", {act(DType::kF16, {1, 6, 5, 8}), ints({0, 1, 1, 0, 0, 1, 1, 0})}, {{"mode", std::string("reflect")}});
  check_op("Pad", {act(DType::kF32, {2, 3, 4}), ints({0, 5, 1, 0, 2, 6})}, {{"mode", std::string("reflect")}});
  check_op("Pad", {act(DType::kF32, {2, 3, 4}), ints({1, 2, 0, 0, 3, 1})}, {{"mode", std::string("edge")}});
}

TEST(OpKernelsGpu, ConcatSplitSlice) {
  check_op("Concat", {act(DType::kF16, {1, 3, 3, 64}), act(DType::kF16, {1, 3, 3, 96}), act(DType::kF16, {1, 3, 3, 24})},
           {{"axis", int64_t{3}}});
  check_op("Concat", {act(DType::kF16, {1, 7, 7, 3}), act(DType::kF16, {1, 7, 7, 5})}, {{"axis", int64_t{3}}});
  check_op("Split", {act(DType::kF32, {2, 6, 5})}, {{"axis", int64_t{1}}}, 2);
  check_op("Slice", {act(DType::kF32, {4, 10}), ints({1, 9}), ints({4, 0}), ints({0, 1}), ints({1, -2})});
}

// Every float Reduce* op on the three kernels: the columns one (spatial dims of NHWC data; a
// 1155-row one with its unrolled loop, remainder and 1024 threads), the rows one (innermost
// dims) and the one-thread-per-output one (two runs of dims). ReduceProd over few elements (a
// product of many leaves the range); ReduceLogSum over positive constants (log of a sum).
// The activations and the per-element math that came after the first GPU kernels, against the
// CPU reference (their semantics there are checked by ONNX's conformance cases).
TEST(OpKernelsGpu, MoreActivationsAndMath) {
  for (const char* op : {"Selu", "Celu", "ThresholdedRelu", "Softsign", "Softplus", "Mish", "Shrink"}) {
    SCOPED_TRACE(op);
    check_op(op, {act(DType::kF16, {2, 5, 7, 24})});
    check_op(op, {act(DType::kF32, {3, 17})});
  }
  check_op("Selu", {act(DType::kF32, {3, 17})}, {{"alpha", 1.5}, {"gamma", 2.0}});
  check_op("Shrink", {act(DType::kF32, {3, 17})}, {{"lambd", 1.0}, {"bias", 0.5}});
  check_op("ThresholdedRelu", {act(DType::kF32, {3, 17})}, {{"alpha", 0.5}});
  for (const char* op : {"Round", "Sin", "Cos", "Sign"}) {
    SCOPED_TRACE(op);
    check_op(op, {act(DType::kF32, {4, 9, 5})});
  }
}

TEST(OpKernelsGpu, EveryFloatReduction) {
  auto reduce = [](const std::string& op, Input x, Ints axes) {
    if (op == "ReduceSum") check_op(op, {std::move(x), ints(axes)});
    else check_op(op, {std::move(x)}, {{"axes", axes}});
  };
  for (const std::string op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                               "ReduceLogSumExp"}) {
    SCOPED_TRACE(op);
    reduce(op, act(DType::kF16, {4, 33, 35, 24}), {1, 2});
    reduce(op, act(DType::kF32, {3, 7, 7, 520}), {1, 2});
    reduce(op, act(DType::kBF16, {70, 300}), {-1});
    reduce(op, act(DType::kF32, {3, 4, 5}), {0, 2});
  }
  reduce("ReduceProd", act(DType::kF32, {2, 3, 3, 16}), {1, 2});
  reduce("ReduceProd", act(DType::kF32, {6, 9}), {-1});
  std::mt19937 rng(7);
  Tensor positive = random_tensor({DType::kF32, {2, 6, 6, 24}}, rng);
  for (int64_t i = 0; i < positive.numel(); ++i) positive.set_f64(i, std::fabs(positive.get_f64(i)));
  check_op("ReduceLogSum", {{{DType::kF32, {2, 6, 6, 24}}, positive}}, {{"axes", Ints{1, 2}}});
  // LogSumExp of large values: the running maximum keeps exp in range (plain exp overflows).
  Tensor large = random_tensor({DType::kF32, {5, 64}}, rng);
  for (int64_t i = 0; i < large.numel(); ++i) large.set_f64(i, 100.0 + 20.0 * large.get_f64(i));
  check_op("ReduceLogSumExp", {{{DType::kF32, {5, 64}}, large}}, {{"axes", Ints{-1}}});
}

TEST(OpKernelsGpu, MatMulOfActivations) {
  check_op("MatMul", {act(DType::kF16, {2, 4, 9, 16}), act(DType::kF16, {4, 16, 7})});
  check_op("MatMul", {act(DType::kF32, {3, 70, 40}), act(DType::kF32, {3, 40, 33})});  // edge tiles, k > 32
  check_op("MatMul", {act(DType::kF32, {16}), act(DType::kF32, {16, 5})});
  check_op("MatMul", {act(DType::kBF16, {5, 64}), act(DType::kBF16, {64})});
}

TEST(OpKernelsGpu, CumSumGatherElementsMod) {
  check_op("CumSum", {act(DType::kF32, {3, 50, 4}), ints({1})});
  check_op("CumSum", {act(DType::kF32, {3, 5, 40}), ints({-1})}, {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}});
  const Tensor idx = Tensor::from_vector<int64_t>({2, 3}, {0, -1, 2, 1, 1, 0});
  check_op("GatherElements", {act(DType::kF16, {3, 4}), {{DType::kI64, {2, 3}}, idx}}, {{"axis", int64_t{1}}});
  check_op("GatherElements", {act(DType::kF32, {3, 4}), {{DType::kI64, {2, 3}}, idx}}, {{"axis", int64_t{0}}});
  check_op("Mod", {act(DType::kF32, {4, 7}), act(DType::kF32, {7})}, {{"fmod", int64_t{1}}});
}

TEST(OpKernelsGpu, ExpandAndTile) {
  check_op("Expand", {act(DType::kF16, {6, 1}), ints({2, 6, 5})});
  check_op("Expand", {act(DType::kF32, {1, 3, 1, 8}), ints({2, 1, 4, 1})});
  check_op("Tile", {act(DType::kF32, {2, 3}), ints({2, 2})});
  check_op("Tile", {act(DType::kF16, {1, 4, 3, 8}), ints({2, 1, 3, 2})});
}

TEST(OpKernelsGpu, ArgMaxArgMin) {
  // Random values in ±[0.25, 2] of f16 tie now and then: select_last_index decides those.
  for (const char* op : {"ArgMax", "ArgMin"}) {
    SCOPED_TRACE(op);
    check_op(op, {act(DType::kF16, {2, 21, 8, 8})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
    check_op(op, {act(DType::kF16, {2, 9, 9, 40})}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}});
    check_op(op, {act(DType::kF32, {5, 300})}, {{"axis", int64_t{0}}});
  }
}

TEST(OpKernelsGpu, ComparisonsLogicAndWhere) {
  // Random values in ±[0.25, 2] of the same shape rarely tie: Equal against itself does.
  for (const char* op : {"Greater", "GreaterOrEqual", "Less", "LessOrEqual"})
    check_op(op, {act(DType::kF32, {3, 5, 7}), act(DType::kF32, {7})});
  check_op("Where", {act(DType::kBool, {3, 1, 7}), act(DType::kF16, {3, 5, 7}), act(DType::kF16, {7})});
  check_op("Not", {act(DType::kBool, {33})});
  for (const char* op : {"And", "Or", "Xor"}) check_op(op, {act(DType::kBool, {4, 9}), act(DType::kBool, {9})});
}

TEST(OpKernelsGpu, VariadicMaxMinSumMean) {
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    SCOPED_TRACE(op);
    check_op(op, {act(DType::kF16, {2, 4, 5, 8}), act(DType::kF16, {2, 4, 5, 8}), act(DType::kF16, {8})});
    check_op(op, {act(DType::kF32, {3, 7}), act(DType::kF32, {3, 7})});
    check_op(op, {act(DType::kF32, {3, 7})});
  }
}

TEST(OpKernelsGpu, SpaceToDepth) {
  check_op("tessel.SpaceToDepth", {act(DType::kF16, {2, 8, 6, 24})}, {{"blocksize", int64_t{2}}});
  check_op("tessel.SpaceToDepth", {act(DType::kF32, {1, 9, 12, 3})}, {{"blocksize", int64_t{3}}});
  check_op("SpaceToDepth", {act(DType::kF32, {2, 5, 8, 4})}, {{"blocksize", int64_t{2}}});
}

TEST(OpKernelsGpu, Lrn) {
  check_op("tessel.LRN", {act(DType::kF16, {2, 5, 7, 24})}, {{"size", int64_t{5}}});
  check_op("tessel.LRN", {act(DType::kF32, {1, 3, 4, 7})}, {{"size", int64_t{4}}, {"alpha", 0.5}, {"bias", 2.0}});
  check_op("LRN", {act(DType::kF32, {2, 6, 10})}, {{"size", int64_t{3}}, {"beta", 0.5}});
  check_op("LRN", {act(DType::kF16, {1, 16, 5, 5})}, {{"size", int64_t{5}}, {"alpha", 1e-2}});
}

TEST(OpKernelsGpu, GroupNormalization) {
  auto vec = [](DType t, int64_t c) { return act(t, {c}); };
  // NHWC, 6 groups of 4 (the graph's opset 17: per-group affine), and channels-first rank 3.
  check_op("tessel.GroupNormalization", {act(DType::kF16, {2, 9, 11, 24}), vec(DType::kF16, 6), vec(DType::kF16, 6)},
           {{"num_groups", int64_t{6}}});
  check_op("GroupNormalization", {act(DType::kF32, {2, 8, 50}), vec(DType::kF32, 4), vec(DType::kF32, 4)},
           {{"num_groups", int64_t{4}}, {"epsilon", 1e-3}});
}

TEST(OpKernelsGpu, InstanceNormalization) {
  auto per_channel = [](DType t, int64_t c) { return act(t, {c}); };
  // NHWC: 1155 pixels of 24 channels (3 vectors, 1024 threads), and 520 channels in chunks.
  check_op("tessel.InstanceNormalization",
           {act(DType::kF16, {2, 33, 35, 24}), per_channel(DType::kF16, 24), per_channel(DType::kF16, 24)});
  check_op("tessel.InstanceNormalization",
           {act(DType::kF32, {3, 7, 9, 520}), per_channel(DType::kF32, 520), per_channel(DType::kF32, 520)},
           {{"epsilon", 1e-3}});
  // Channels-first of rank 3 and 4 (a 4-D one that stayed NCHW).
  check_op("InstanceNormalization",
           {act(DType::kF32, {2, 6, 50}), per_channel(DType::kF32, 6), per_channel(DType::kF32, 6)});
  check_op("InstanceNormalization",
           {act(DType::kF16, {1, 5, 17, 19}), per_channel(DType::kF16, 5), per_channel(DType::kF16, 5)});
}

TEST(OpKernelsGpu, Softmax) {
  check_op("Softmax", {act(DType::kF16, {4, 1000})});                  // warp per row, n > 32
  check_op("Softmax", {act(DType::kF32, {37, 10})});                   // n < 32: idle lanes
  check_op("Softmax", {act(DType::kF32, {2, 5, 3})}, {{"axis", int64_t{1}}});  // strided axis
  check_op("Softmax", {act(DType::kF16, {3, 4, 6})}, {{"axis", int64_t{0}}});
  check_op("LogSoftmax", {act(DType::kF16, {4, 1000})});
  check_op("LogSoftmax", {act(DType::kF32, {2, 5, 3})}, {{"axis", int64_t{1}}});
}

TEST(OpKernelsGpu, ReduceMean) {
  check_op("ReduceMean", {act(DType::kF16, {2, 7, 7, 24})}, {{"axes", Ints{1, 2}}});
  check_op("ReduceMean", {act(DType::kF32, {3, 4, 5})}, {{"axes", Ints{-1, 0}}, {"keepdims", int64_t{0}}});
  check_op("ReduceMean", {act(DType::kF32, {3, 4, 5})});  // all axes
  check_op("ReduceMean", {act(DType::kF32, {2, 6})}, {{"axes", Ints{1}}});
  // The columns kernel: 1155 rows (the 4-row unrolled loop and its remainder), 3 vector columns,
  // 1024 threads of which 1023 are lanes; a chunked wide one (65 vectors: 32, 32, 1); unit dims.
  check_op("ReduceMean", {act(DType::kF16, {4, 33, 35, 24})}, {{"axes", Ints{1, 2}}});
  check_op("ReduceMean", {act(DType::kF16, {40, 7, 7, 520})}, {{"axes", Ints{1, 2}}, {"keepdims", int64_t{0}}});
  check_op("ReduceMean", {act(DType::kF32, {3, 1, 50, 6})}, {{"axes", Ints{1, 2}}});
  // The rows kernel: a warp per row of 300.
  check_op("ReduceMean", {act(DType::kBF16, {70, 300})}, {{"axes", Ints{-1}}});
}

TEST(OpKernelsGpu, Elementwise) {
  check_op("Add", {act(DType::kF16, {1, 8, 8, 32}), act(DType::kF16, {32})});
  check_op("Mul", {act(DType::kF32, {2, 3, 5}), act(DType::kF32, {2, 1, 5})});
  check_op("Clip", {act(DType::kF32, {3, 7}), act(DType::kF32, {}), act(DType::kF32, {})});
  check_op("HardSwish", {act(DType::kF16, {1, 5, 5, 24})});
  check_op("LeakyRelu", {act(DType::kF16, {3, 5})}, {{"alpha", 0.1}});
  check_op("Sigmoid", {act(DType::kF32, {17})});
}

TEST(OpKernelsGpu, GeluAndLayerNorm) {
  check_op("Gelu", {act(DType::kF16, {2, 7, 7, 96})});
  check_op("Gelu", {act(DType::kF32, {33})}, {{"approximate", std::string("tanh")}});
  // ConvNeXt's channels-last LayerNorm: rows of C, scale and bias of C; C < 32 and C > 32.
  check_op("LayerNormalization",
           {act(DType::kF16, {2, 7, 7, 96}), act(DType::kF16, {96}), act(DType::kF16, {96})},
           {{"axis", int64_t{-1}}, {"epsilon", 1e-6}});
  check_op("LayerNormalization", {act(DType::kF32, {5, 3, 20}), act(DType::kF32, {3, 20})},
           {{"axis", int64_t{1}}});
}

// Gather of constant indices (negative ones from the end), along a middle and the first axis.
TEST(OpKernelsGpu, Gather) {
  const Tensor idx = Tensor::from_vector<int64_t>({2, 2}, {2, 0, -1, 1});
  check_op("Gather", {act(DType::kF16, {3, 4, 5}), {{DType::kI64, {2, 2}}, idx}},
           {{"axis", int64_t{1}}});
  check_op("Gather", {act(DType::kF32, {6, 3}), {{DType::kI64, {}}, Tensor::from_vector<int64_t>({}, {-6})}});
}

TEST(OpKernelsGpu, Pools) {
  check_op("tessel.MaxPool", {act(DType::kF16, {1, 9, 9, 24})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  check_op("tessel.MaxPool", {act(DType::kF16, {1, 32, 32, 64})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  // int8 (fold-qdq's, ResNet's after the stem): 16-byte and 8-byte channel vectors.
  check_op("tessel.MaxPool", {act(DType::kI8, {2, 23, 21, 64})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  check_op("tessel.MaxPool", {act(DType::kI8, {1, 9, 9, 24})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  // Packed pairs (PackedMax): bf16 in 4-byte vectors, int8 in one word, and 3 int8 channels
  // (1-byte vectors) on the float path beside them.
  check_op("tessel.MaxPool", {act(DType::kBF16, {1, 10, 10, 6})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  check_op("tessel.MaxPool", {act(DType::kI8, {3, 7, 7, 4})},
           {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  check_op("tessel.MaxPool", {act(DType::kI8, {1, 7, 7, 3})},
           {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  // uint8 (fold-qdq's for onnxruntime's QUInt8 activations, zero point 0; the pair trick's
  // f16 1024 + x): 16-byte vectors, one word, and 1-byte vectors.
  check_op("tessel.MaxPool", {act(DType::kU8, {2, 23, 21, 64})},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  check_op("tessel.MaxPool", {act(DType::kU8, {3, 7, 7, 4})},
           {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  check_op("tessel.MaxPool", {act(DType::kU8, {1, 7, 7, 3})},
           {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  for (int64_t include : {0, 1})
    check_op("tessel.AveragePool", {act(DType::kF32, {2, 7, 7, 6})},
             {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", include}});
  check_op("tessel.AveragePool", {act(DType::kF16, {1, 8, 8, 5})},
           {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{3, 3}}, {"ceil_mode", int64_t{1}}, {"pads", Ints{1, 1, 0, 0}}});
  check_op("tessel.GlobalAveragePool", {act(DType::kF16, {2, 5, 5, 40})});
  check_op("tessel.GlobalAveragePool", {act(DType::kF32, {1, 3, 4, 7})});
  check_op("tessel.GlobalAveragePool", {act(DType::kF16, {33, 7, 7, 2048})});
  check_op("tessel.GlobalMaxPool", {act(DType::kF16, {2, 5, 5, 40})});
  check_op("tessel.GlobalMaxPool", {act(DType::kF32, {3, 17, 19, 12})});
}

TEST(OpKernelsGpu, DepthToSpace) {
  check_op("tessel.DepthToSpace", {act(DType::kF16, {1, 4, 5, 32})}, {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}});
  check_op("tessel.DepthToSpace", {act(DType::kF32, {2, 3, 3, 12})}, {{"blocksize", int64_t{2}}, {"mode", std::string("DCR")}});
}

TEST(OpKernelsGpu, DepthwiseAndGroupedConv) {
  check_op("tessel.Conv", {act(DType::kF16, {1, 16, 16, 96}), act(DType::kF16, {96, 3, 3, 1}), act(DType::kF32, {96})},
           {{"group", int64_t{96}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}},
            {"epilogue", std::vector<std::string>{"clip"}}, {"epilogue_alpha", std::vector<double>{0.0}},
            {"epilogue_beta", std::vector<double>{6.0}}});
  check_op("tessel.Conv", {act(DType::kF16, {1, 7, 9, 20}), act(DType::kF16, {20, 3, 3, 1})},
           {{"group", int64_t{20}}, {"pads", Ints{1, 1, 1, 1}}});
  check_op("tessel.Conv", {act(DType::kF32, {1, 5, 6, 8}), act(DType::kF32, {4, 3, 3, 4}), act(DType::kF32, {4}),
                           act(DType::kF32, {1, 5, 6, 4})},
           {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}},
            {"epilogue", std::vector<std::string>{"add_residual", "relu"}}, {"store", std::string("depth_to_space")},
            {"block", int64_t{2}}, {"mode", std::string("CRD")}});
  check_op("tessel.Conv", {act(DType::kF16, {1, 6, 6, 16}), act(DType::kF16, {32, 3, 3, 1}), act(DType::kF16, {32})},
           {{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}, {"store", std::string("depth_to_space")},
            {"block", int64_t{2}}, {"mode", std::string("DCR")}});
}

// A depthwise tessel.Conv (the tiled kernel, templates/tessel_depthwise.cuh): x [n, h, w, c],
// weights [c, k, k, 1], an f32 bias, "same" padding, the epilogue `steps` (clip as ReLU6,
// leaky_relu with alpha 0.1) and, with add_residual, a residual shaped like the output.
// `tiling`: run this tiling (a name, op_kernels.h) instead of the chooser's. `int8_input`: x
// int8 (every code) with its dequantization scale S (fold-qdq's int8-input form; t is W's dtype),
// 1/64 to 3/64 so that a quantize step's outputs spread over the int8 range.
void check_depthwise(DType t, Shape x, int64_t k, int64_t stride, int64_t dilation = 1,
                     const std::vector<std::string>& steps = {}, const std::string& tiling = "",
                     bool int8_input = false, bool requantize = false) {
  SCOPED_TRACE(::testing::Message() << (int8_input ? "i8 * " : "") << (requantize ? "requantized " : "")
                                    << dtype_name(t) << shape_str(x)
                                    << " k" << k << " s" << stride << " d" << dilation << " "
                                    << steps.size() << " epilogue steps " << tiling);
  const int64_t c = x[3], pad = dilation * (k - 1) / 2, span = dilation * (k - 1) + 1;
  const Shape y{x[0], (x[1] + 2 * pad - span) / stride + 1, (x[2] + 2 * pad - span) / stride + 1, c};
  std::vector<Input> inputs = {act(int8_input ? DType::kI8 : t, x), act(t, {c, k, k, 1}),
                               act(DType::kF32, {c})};
  if (std::find(steps.begin(), steps.end(), "add_residual") != steps.end()) inputs.push_back(act(t, y));
  if (int8_input) {
    inputs.resize(4, none());  // R, where no step adds it
    std::vector<double> scale(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i) scale[static_cast<size_t>(i)] = (1 + i % 3) / 64.0;
    inputs.push_back({{DType::kF32, {c}}, Tensor::from_doubles(DType::kF32, {c}, scale)});
  }
  if (requantize) {
    // Factors below and above 1 in no simple ratio (a concat's input scale over its own): the
    // integers move to another grid, some saturate.
    std::vector<double> factor(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i) factor[static_cast<size_t>(i)] = 0.43 + 0.277 * static_cast<double>(i % 5);
    inputs.push_back({{DType::kF32, {1, c}}, Tensor::from_doubles(DType::kF32, {1, c}, factor)});
  }
  ir::Attributes attrs{{"group", c},
                       {"strides", Ints{stride, stride}},
                       {"pads", Ints{pad, pad, pad, pad}},
                       {"dilations", Ints{dilation, dilation}}};
  if (requantize) attrs["prologue"] = std::string("requantize");
  if (!steps.empty()) {
    std::vector<double> alpha(steps.size(), 0.0), beta(steps.size(), 0.0);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i] == "clip") beta[i] = 6.0;
      if (steps[i] == "leaky_relu") alpha[i] = 0.1;
      if (steps[i] == "quantize" || steps[i] == "mul" || steps[i] == "round") alpha[i] = 0.05;
      if (steps[i] == "silu_qgate") alpha[i] = beta[i] = 1.0 / 127;  // the gate's int8 grid
      if (steps[i] == "quantize_unit") alpha[i] = -3.0, beta[i] = 90.0;  // unit-quantize's form
      // After a round: u8's range less a zero point of 116 (fuse's fake quantization).
      if (steps[i] == "clip" && i > 0 && steps[i - 1] == "round") alpha[i] = -116.0, beta[i] = 139.0;
    }
    // A quantize followed by nothing or by clamps (fuse's forms of a QDQ model's depthwise
    // conv, ops::fold_requantize's) stores int8.
    const auto last_q = std::find_if(steps.rbegin(), steps.rend(),
                                     [](const std::string& s) { return s == "quantize" || s == "quantize_unit"; });
    if (last_q != steps.rend() &&
        std::all_of(steps.rbegin(), last_q, [](const std::string& s) { return s == "relu" || s == "clip"; }))
      attrs["out_dtype"] = std::string("i8");
    attrs["epilogue"] = steps;
    attrs["epilogue_alpha"] = alpha;
    attrs["epilogue_beta"] = beta;
  }
  check_op("tessel.Conv", inputs, std::move(attrs), 1, tiling);
}

TEST(DepthwiseConvGpu, KernelSizesStridesDilations) {
  check_depthwise(DType::kF16, {1, 112, 112, 32}, 3, 1, 1, {"clip"});  // MobileNet-v2, ReLU6
  check_depthwise(DType::kF16, {1, 57, 57, 96}, 3, 2, 1, {"clip"});
  check_depthwise(DType::kF16, {32, 28, 28, 144}, 3, 2);
  check_depthwise(DType::kF16, {32, 14, 14, 96}, 3, 1, 1, {"relu"});
  check_depthwise(DType::kF16, {1, 30, 30, 144}, 5, 2, 1, {"silu"});  // EfficientNet
  check_depthwise(DType::kF16, {32, 14, 14, 144}, 5, 1);
  check_depthwise(DType::kF16, {1, 28, 28, 96}, 7, 1);  // ConvNeXt
  check_depthwise(DType::kF16, {32, 7, 7, 192}, 7, 1);
  check_depthwise(DType::kF16, {1, 29, 31, 24}, 3, 1, 2);  // dilation 2
  check_depthwise(DType::kF16, {2, 21, 21, 40}, 3, 2, 2);
  // 1x1 (a per-channel map, what fold-qdq makes of an unfolded norm): f16 16-byte fragments
  // over an odd pixel count, 3 channels, f32, bf16 with 1000 channels, and stride 2.
  check_depthwise(DType::kF16, {2, 9, 11, 64}, 1, 1, 1, {"relu"});
  check_depthwise(DType::kF16, {3, 5, 7, 3}, 1, 1, 1, {"sigmoid"});
  check_depthwise(DType::kF32, {2, 14, 14, 40}, 1, 1, 1, {"clip"});
  check_depthwise(DType::kBF16, {1, 13, 13, 1000}, 1, 1, 1, {});
  check_depthwise(DType::kF16, {2, 15, 15, 48}, 1, 2, 1, {"relu"});
}

TEST(DepthwiseConvGpu, ChannelTailsAndDtypes) {
  check_depthwise(DType::kF16, {2, 17, 19, 3}, 3, 1);      // 2-byte fragments
  check_depthwise(DType::kF16, {1, 15, 16, 20}, 3, 2);     // 8-byte fragments
  check_depthwise(DType::kF16, {1, 9, 9, 1000}, 3, 1);     // a partial last slab
  check_depthwise(DType::kF16, {32, 7, 7, 1000}, 3, 1, 1, {"hardswish"});
  check_depthwise(DType::kF16, {1, 13, 11, 24}, 3, 1);
  check_depthwise(DType::kF32, {2, 20, 20, 24}, 5, 1, 1, {"relu"});
  check_depthwise(DType::kF32, {1, 12, 12, 7}, 3, 2);
  check_depthwise(DType::kBF16, {1, 20, 20, 144}, 3, 2, 1, {"clip"});
}

TEST(DepthwiseConvGpu, EveryEpilogueStep) {
  for (const std::string step : {"relu", "leaky_relu", "clip", "sigmoid", "hardswish", "silu", "add_residual"})
    check_depthwise(DType::kF16, {2, 19, 23, 96}, 3, 1, 1, {step});
  // An asymmetric QDQ pair as fuse's fake quantization (a QUInt8 model's depthwise conv).
  check_depthwise(DType::kF16, {2, 19, 23, 96}, 3, 1, 1, {"round", "clip", "mul"});
  check_depthwise(DType::kF16, {1, 28, 28, 144}, 3, 2, 1, {"add_residual", "relu", "round", "clip", "mul"});
  check_depthwise(DType::kF16, {1, 28, 28, 144}, 3, 1, 1,
                  {"add_residual", "leaky_relu", "clip", "sigmoid", "hardswish", "silu", "relu"});
}

// A QDQ model's depthwise conv (MobileNet-v2's ReLU6 between QuantizeLinear/DequantizeLinear
// pairs): quantize, dequantize, clip, quantize, stored int8 by every fragment width; and the
// direct grouped kernel's int8 store.
TEST(DepthwiseConvGpu, Int8OutputAfterQuantize) {
  const std::vector<std::string> qdq = {"quantize", "mul", "clip", "quantize"};
  check_depthwise(DType::kF16, {1, 112, 112, 32}, 3, 1, 1, qdq);
  check_depthwise(DType::kF16, {32, 14, 14, 96}, 3, 2, 1, qdq);
  check_depthwise(DType::kF16, {2, 17, 19, 3}, 3, 1, 1, {"relu", "quantize"});  // 3 channels
  // The folded chain (ops::fold_requantize): the clip on the integers, clip(0, 6) here.
  check_depthwise(DType::kF16, {32, 14, 14, 96}, 3, 2, 1, {"quantize", "clip"});
  check_depthwise(DType::kF16, {2, 28, 28, 192}, 3, 1, 1, {"quantize", "relu"}, "dw_v4x16_r2x2_c2x4_s2_wr");
  // unit-quantize's form (a value the mul scales into [0, 1] for [-3, 90]), tiled and direct.
  check_depthwise(DType::kF16, {2, 28, 28, 192}, 3, 1, 1, {"mul", "quantize_unit"});
  check_depthwise(DType::kF16, {2, 17, 19, 3}, 3, 1, 1, {"mul", "quantize_unit"});
  for (int vec : {8, 4, 2, 1})
    check_depthwise(DType::kF16, {2, 28, 28, 192}, 3, 1, 1, qdq,
                    fmt::format("dw_v{}x{}_r2x2_c2x4_s2_wr", vec, 64 / vec));
  check_op("tessel.Conv", {act(DType::kF16, {2, 9, 11, 16}), act(DType::kF16, {32, 3, 3, 2}), act(DType::kF32, {32})},
           {{"group", int64_t{8}}, {"pads", Ints{1, 1, 1, 1}},
            {"epilogue", std::vector<std::string>{"relu", "quantize"}}, {"epilogue_alpha", std::vector<double>{0.0, 0.05}},
            {"epilogue_beta", std::vector<double>{0.0, 0.0}}, {"out_dtype", std::string("i8")}});
}

// onnxruntime's QUInt8 MobileNet: the depthwise conv's ReLU6 then its QuantizeLinear to uint8
// of zero point 0 (fuse's round, clip(0, 255)), stored uint8 (packed four to a word by the
// tiled kernel; single bytes; the direct grouped kernel), from f16 and from int8 inputs.
TEST(DepthwiseConvGpu, Uint8Output) {
  auto u8_dw = [](Shape x, int64_t k, int64_t stride, bool int8_input, const std::string& tiling = "") {
    const int64_t c = x[3], pad = (k - 1) / 2;
    std::vector<Input> inputs = {act(int8_input ? DType::kI8 : DType::kF16, x), act(DType::kF16, {c, k, k, 1}),
                                 act(DType::kF32, {c})};
    if (int8_input) {
      inputs.push_back(none());
      std::vector<double> scale(static_cast<size_t>(c), 1.0 / 64);
      inputs.push_back({{DType::kF32, {c}}, Tensor::from_doubles(DType::kF32, {c}, scale)});
    }
    check_op("tessel.Conv", inputs,
             {{"group", c}, {"strides", Ints{stride, stride}}, {"pads", Ints{pad, pad, pad, pad}},
              {"epilogue", std::vector<std::string>{"clip", "round", "clip"}},
              {"epilogue_alpha", std::vector<double>{0.0, 6.0 / 255, 0.0}},
              {"epilogue_beta", std::vector<double>{6.0, 0.0, 255.0}},
              {"out_dtype", std::string("u8")}},
             1, tiling);
  };
  u8_dw({2, 28, 28, 144}, 3, 1, false);
  u8_dw({2, 29, 27, 96}, 3, 2, false);
  u8_dw({1, 15, 13, 3}, 3, 1, false);   // single bytes
  u8_dw({2, 14, 14, 192}, 3, 1, true);  // int8 in, uint8 out
  for (int vec : {8, 4, 2, 1})
    u8_dw({2, 28, 28, 192}, 3, 1, false, fmt::format("dw_v{}x{}_r2x2_c2x4_s2_wr", vec, 64 / vec));
  u8_dw({1, 20, 20, 32}, 13, 1, false);  // the direct grouped kernel
}

// A QDQ model's depthwise conv reading its int8 input (fold-qdq's int8-input form: every int8
// code, scaled by S in the fma with the bias), with f16 weights unless said: MobileNet-v2's
// layers (the folded QuantizeLinear -> Clip chain after them, or the unfolded one), stride 2,
// EfficientNet's 5x5, ConvNeXt's 7x7, dilation, odd images and partial tiles; every copy width
// (16, 8, 4, 2 and 1 bytes: 96, 24, 20, 2 and 3 channels, 1000 with a partial last slab); f16
// out, a residual, f32 and bf16 weights; each fragment width by name; and a window too large
// to stage, which the direct grouped kernel reads as int8.
TEST(DepthwiseConvGpu, Int8InputKernelSizesStridesAndEdges) {
  auto int8_dw = [](DType w, Shape x, int64_t k, int64_t stride, int64_t dilation,
                    const std::vector<std::string>& steps, const std::string& tiling = "") {
    check_depthwise(w, std::move(x), k, stride, dilation, steps, tiling, true);
  };
  const std::vector<std::string> folded = {"quantize", "clip"};  // clip(0, 6): on the integers
  const std::vector<std::string> qdq = {"quantize", "mul", "clip", "quantize"};
  int8_dw(DType::kF16, {1, 112, 112, 32}, 3, 1, 1, folded);
  int8_dw(DType::kF16, {32, 56, 56, 144}, 3, 2, 1, folded);
  int8_dw(DType::kF16, {2, 57, 55, 96}, 3, 2, 1, qdq);
  int8_dw(DType::kF16, {2, 17, 19, 96}, 3, 1, 1, {});
  int8_dw(DType::kF16, {1, 30, 30, 240}, 5, 2, 1, {"silu", "quantize"});
  int8_dw(DType::kF16, {2, 15, 13, 384}, 7, 1, 1, {"quantize"});
  int8_dw(DType::kF16, {1, 29, 31, 48}, 3, 1, 2, folded);
  int8_dw(DType::kF16, {2, 21, 21, 40}, 3, 2, 2, {});
  // EfficientNet's depthwise conv: its SiLU's gate quantized to int8 and back (silu_qgate),
  // then the product quantized.
  int8_dw(DType::kF16, {2, 28, 28, 144}, 3, 1, 1, {"quantize", "mul", "silu_qgate", "quantize"});
  int8_dw(DType::kF16, {1, 30, 30, 240}, 5, 2, 1, {"silu_qgate", "quantize"});
  // 1x1 (fold-qdq's ChannelShiftOfIntegers: a norm's scale and shift of int8 values, then the
  // ReLU and QuantizeLinear before an int8 conv; DenseNet's 96 to 1024 channels at 56x56 to 7x7).
  int8_dw(DType::kF16, {32, 56, 56, 96}, 1, 1, 1, {"relu", "quantize"});
  int8_dw(DType::kF16, {2, 7, 7, 1000}, 1, 1, 1, {"relu", "quantize"});
  int8_dw(DType::kF32, {2, 14, 14, 40}, 1, 1, 1, {});
}

// The prologue "requantize" (fuse-prologue's: a QDQ DenseNet's concat requantized as the norm's
// depthwise conv loads it): DenseNet's 1x1 norms, a padded and strided 3x3 (0 requantizes to
// 0), 7x7, each fragment width by name, and the direct grouped kernel's 13x13.
TEST(DepthwiseConvGpu, Int8InputRequantizedAsLoaded) {
  auto requantized = [](Shape x, int64_t k, int64_t stride, const std::vector<std::string>& steps,
                        const std::string& tiling = "") {
    check_depthwise(DType::kF16, std::move(x), k, stride, 1, steps, tiling, true, true);
  };
  requantized({32, 56, 56, 96}, 1, 1, {"relu", "quantize"});
  requantized({2, 7, 7, 1000}, 1, 1, {"relu", "quantize"});
  requantized({2, 14, 14, 40}, 1, 1, {});
  requantized({2, 17, 19, 96}, 3, 2, {"quantize"});
  requantized({2, 15, 13, 48}, 7, 1, {"relu"});
  for (int vec : {8, 4, 2, 1})
    requantized({2, 28, 28, 192}, 3, 1, {"relu", "quantize"}, fmt::format("dw_v{}x{}_r2x2_c2x4_s2_wr", vec, 64 / vec));
  requantized({1, 20, 20, 32}, 13, 1, {"quantize"});  // the direct grouped kernel
}

TEST(DepthwiseConvGpu, Int8InputChannelTailsDtypesAndTilings) {
  auto int8_dw = [](DType w, Shape x, int64_t k, int64_t stride,
                    const std::vector<std::string>& steps, const std::string& tiling = "") {
    check_depthwise(w, std::move(x), k, stride, 1, steps, tiling, true);
  };
  int8_dw(DType::kF16, {1, 13, 11, 24}, 3, 1, {"quantize"});         // 8-byte copies
  int8_dw(DType::kF16, {1, 15, 16, 20}, 3, 2, {"quantize"});         // 4-byte copies
  int8_dw(DType::kF16, {1, 9, 9, 2}, 3, 1, {});                      // 2-byte copies
  int8_dw(DType::kF16, {2, 17, 19, 3}, 3, 1, {"relu", "quantize"});  // single bytes
  int8_dw(DType::kF16, {1, 9, 9, 1000}, 3, 1, {"quantize"});         // a partial last slab
  int8_dw(DType::kF16, {2, 19, 23, 96}, 3, 1, {"add_residual", "relu"});
  int8_dw(DType::kF32, {2, 20, 20, 24}, 5, 1, {"relu"});
  int8_dw(DType::kBF16, {1, 20, 20, 144}, 3, 2, {"clip"});
  for (int vec : {8, 4, 2, 1})
    int8_dw(DType::kF16, {2, 28, 28, 192}, 3, 1, {"quantize", "clip", "mul", "clip", "quantize"},
            fmt::format("dw_v{}x{}_r2x2_c2x4_s2_wr", vec, 64 / vec));
  int8_dw(DType::kF16, {2, 30, 31, 64}, 3, 1, {}, "dw_v4x8_r2x2_c2x4_s2_wr");
  int8_dw(DType::kF16, {4, 56, 56, 96}, 7, 1, {"add_residual"}, "dw_v2x16_r4x2_c4x4_s2_wr");
  int8_dw(DType::kF16, {1, 20, 20, 32}, 13, 1, {"quantize"});  // the direct grouped kernel
}

// Many more tiles than the grid's CTAs (each CTA strides over several), and a depthwise conv
// whose depth_to_space store scatters single elements.
TEST(DepthwiseConvGpu, LargeImageAndDepthToSpaceStore) {
  check_depthwise(DType::kF16, {2, 515, 517, 8}, 3, 1, 1, {"relu"});
  check_op("tessel.Conv", {act(DType::kF16, {1, 6, 7, 16}), act(DType::kF16, {16, 3, 3, 1}), act(DType::kF32, {16})},
           {{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}, {"store", std::string("depth_to_space")},
            {"block", int64_t{2}}, {"mode", std::string("DCR")}});
}

// Every kind of tiling by name, whatever the chooser picks today: fragments of 8, 4, 2 and 1
// f16 channels (16-, 8-, 4- and 2-byte shared reads of 16-byte copies), weights in registers and in
// shared memory, blocks of several rows and columns (with stride 2 and dilation 2 between
// the taps a thread's span row feeds), partial tiles and slabs, and two stages with several
// tiles per CTA (the persistent grid's prefetch: 8 x 112 x 112 pixels of 64 channels are
// several thousand tiles, more than 132 SMs hold at once; so are the 7x7 cases).
TEST(DepthwiseConvGpu, TilingFamilies) {
  for (const char* tiling :
       {"dw_v8x4_r4x2_c1x8_s1_ws", "dw_v8x4_r2x2_c2x4_s2_wr", "dw_v4x8_r2x2_c2x4_s2_wr",
        "dw_v4x8_r3x1_c3x4_s1_ws", "dw_v2x16_r4x1_c4x2_s2_wr", "dw_v2x16_r2x2_c4x2_s2_ws",
        "dw_v4x8_r2x2_c2x4_s1_wr_t", "dw_v1x32_r4x2_c8x1_s2_wr"}) {
    check_depthwise(DType::kF16, {8, 112, 112, 64}, 3, 1, 1, {"relu"}, tiling);
    check_depthwise(DType::kF16, {2, 30, 33, 96}, 3, 2, 1, {"clip"}, tiling);
    check_depthwise(DType::kF16, {1, 27, 25, 40}, 3, 1, 2, {}, tiling);
  }
  for (const char* tiling :
       {"dw_v2x16_r4x2_c4x4_s2_wr", "dw_v2x16_r2x2_c4x2_s1_wr", "dw_v4x8_r4x2_c2x4_s2_ws",
        "dw_v8x4_r2x4_c2x4_s2_ws", "dw_v1x32_r8x1_c4x2_s2_wr", "dw_v2x16_r4x2_c4x2_s1_wr_t"})
    check_depthwise(DType::kF16, {4, 56, 56, 96}, 7, 1, 1, {"add_residual"}, tiling);  // ConvNeXt
  for (const char* tiling :
       {"dw_v4x8_r2x2_c2x4_s2_wr", "dw_v2x16_r2x2_c4x2_s2_wr", "dw_v8x4_r4x1_c1x8_s1_ws"})
    check_depthwise(DType::kF16, {8, 28, 28, 144}, 5, 2, 1, {"silu"}, tiling);  // EfficientNet
  // f32 (4-channel copies) against a tight tolerance, and bf16.
  for (const char* tiling :
       {"dw_v4x8_r2x2_c2x4_s2_wr", "dw_v2x16_r4x1_c2x4_s1_ws", "dw_v1x32_r2x2_c2x1_s2_wr"})
    check_depthwise(DType::kF32, {2, 21, 19, 32}, 5, 1, 1, {"relu"}, tiling);
  check_depthwise(DType::kBF16, {2, 20, 20, 64}, 3, 2, 1, {"clip"}, "dw_v4x8_r2x2_c2x4_s2_wr");
}

// Under compute-sanitizer (scripts/gpu_suite.sh sanitize): partial tiles and slabs, the halo
// at every edge, zero-filled copies, several tiles per CTA, the residual read; the chooser's
// picks and named tilings of each kind (two stages over many tiles per CTA among them).
TEST(DepthwiseConvGpuSanitize, PartialTilesAndSlabs) {
  check_depthwise(DType::kF16, {2, 13, 11, 200}, 3, 2, 1, {"add_residual", "clip"});
  check_depthwise(DType::kF16, {2, 13, 11, 200}, 3, 2, 1, {"quantize"}, "", true);  // int8 in
  check_depthwise(DType::kF16, {1, 9, 10, 3}, 5, 1, 1, {}, "", true);
  check_depthwise(DType::kF16, {1, 9, 10, 40}, 7, 1);
  check_depthwise(DType::kF32, {1, 10, 9, 12}, 5, 1, 2, {"silu"});
  check_depthwise(DType::kF16, {2, 30, 31, 64}, 3, 1, 1, {}, "dw_v4x8_r2x2_c2x4_s2_wr");
  check_depthwise(DType::kF16, {2, 30, 31, 64}, 3, 1, 1, {}, "dw_v8x4_r4x2_c1x8_s1_ws");
  check_depthwise(DType::kF16, {4, 56, 56, 96}, 7, 1, 1, {"add_residual"},
                  "dw_v2x16_r4x2_c4x4_s2_wr");
  check_depthwise(DType::kF16, {4, 56, 56, 96}, 7, 1, 1, {}, "dw_v2x16_r2x2_c4x2_s1_wr");
  check_depthwise(DType::kF16, {2, 23, 21, 96}, 5, 2, 1, {}, "dw_v2x16_r2x2_c4x2_s2_ws");
}

}  // namespace
}  // namespace tessel::kernels::cuda
