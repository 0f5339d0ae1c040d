// match(): classification, majorness, vectors, gathers and remarks, on the op builders'
// maps and on hand-written ones; numerically, the GEMM view of every builder's maps is
// checked against values computed by onnxruntime / numpy.
#include <gtest/gtest.h>

#include <string>

#include "kernels/contraction/contraction.h"
#include "kernels/contraction/ops_maps.h"
#include "core/error.h"
#include "eval_util.h"

namespace tessel::contraction {
namespace {

using testing::evaluate_gemm_view;
using testing::evaluate_maps;
using testing::test_data;

std::vector<std::string> names(const Contraction& c, const std::vector<int>& group) {
  std::vector<std::string> out;
  for (int j : group) out.push_back(c.maps.dims[j].name);
  return out;
}

bool has_remark(const MatchResult& r, const std::string& needle) {
  for (const Remark& x : r.remarks)
    if (x.text.find(needle) != std::string::npos) return true;
  return false;
}

std::string all_remarks(const MatchResult& r) {
  std::string s;
  for (const Remark& x : r.remarks) s += x.text + "\n";
  return s;
}

Contraction matched(const IndexMaps& maps) {
  MatchResult r = match(maps);
  EXPECT_TRUE(r.contraction.has_value()) << all_remarks(r);
  return r.contraction.value_or(Contraction{});
}

// Row-major (rows, cols) -> its transpose, stored (cols, rows).
std::vector<double> transposed(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<double> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return t;
}

// ---- GEMM ------------------------------------------------------------------------------

TEST(MatchGemm, NNIsRowMajorAAndRowMajorB) {
  MatchResult r = match(gemm_maps(512, 64, 512, {false, false}));
  ASSERT_TRUE(r.contraction);
  const Contraction& c = *r.contraction;
  EXPECT_TRUE(r.tensor_cores) << all_remarks(r);
  EXPECT_TRUE(r.remarks.empty());
  EXPECT_EQ(c.batch, 1);
  EXPECT_EQ(c.m, 512);
  EXPECT_EQ(c.n, 64);
  EXPECT_EQ(c.k, 512);
  EXPECT_EQ(names(c, c.m_dims), std::vector<std::string>{"m"});
  EXPECT_EQ(names(c, c.n_dims), std::vector<std::string>{"n"});
  EXPECT_EQ(names(c, c.k_dims), std::vector<std::string>{"k"});
  EXPECT_TRUE(c.batch_dims.empty());
  EXPECT_EQ(c.a_major, Major::kK);   // A (m, k): k contiguous
  EXPECT_EQ(c.b_major, Major::kMN);  // B (k, n): n contiguous
  EXPECT_EQ(c.a_vec, 8);
  EXPECT_EQ(c.b_vec, 8);
  EXPECT_FALSE(c.a_gather);
  EXPECT_FALSE(c.b_gather);
  EXPECT_FALSE(c.operands_swapped);
  EXPECT_EQ(c.acc_dtype, DType::kF32);
  EXPECT_EQ(c.flops(), 2 * 512 * 64 * 512);
}

TEST(MatchGemm, MajornessFollowsTheStoredLayout) {
  struct Case {
    const char* layout;
    Major a, b;
  };
  // contraction.h: A kK = (m, k), kMN = (k, m); B kK = (n, k), kMN = (k, n).
  for (Case x : {Case{"NN", Major::kK, Major::kMN}, Case{"NT", Major::kK, Major::kK},
                 Case{"TN", Major::kMN, Major::kMN}, Case{"TT", Major::kMN, Major::kK}}) {
    SCOPED_TRACE(x.layout);
    Contraction c = matched(gemm_maps(512, 64, 512, *parse_gemm_layout(x.layout)));
    EXPECT_EQ(c.a_major, x.a);
    EXPECT_EQ(c.b_major, x.b);
    EXPECT_EQ(c.m, 512);
    EXPECT_EQ(c.n, 64);
    EXPECT_FALSE(c.a_gather || c.b_gather);
  }
}

TEST(MatchGemm, EveryLayoutComputesTheSameProduct) {
  // numpy: A = d((3,4), 1); B = d((4,2), 2); print((A @ B).flatten()), d as in test_data.
  const std::vector<double> expected = {6, 3, -18, 29, 31, -28};
  std::vector<double> a = test_data({3, 4}, 1), b = test_data({4, 2}, 2);
  for (const char* name : {"NN", "NT", "TN", "TT"}) {
    SCOPED_TRACE(name);
    GemmLayout layout = *parse_gemm_layout(name);
    IndexMaps maps = gemm_maps(3, 2, 4, layout);
    std::vector<double> sa = layout.trans_a ? transposed(a, 3, 4) : a;
    std::vector<double> sb = layout.trans_b ? transposed(b, 4, 2) : b;
    EXPECT_EQ(evaluate_maps(maps, sa, sb), expected);
    EXPECT_EQ(evaluate_gemm_view(matched(maps), sa, sb), expected);
  }
}

TEST(MatchGemm, EmptyReductionIsAContractionWithoutTensorCores) {
  MatchResult r = match(gemm_maps(4, 4, 0, {}));
  ASSERT_TRUE(r.contraction);
  EXPECT_EQ(r.contraction->k, 0);
  EXPECT_FALSE(r.tensor_cores);
  ASSERT_EQ(r.remarks.size(), 1u) << all_remarks(r);
  EXPECT_EQ(r.remarks[0].text.rfind("K=0", 0), 0u) << r.remarks[0].text;
}

TEST(MatchGemm, OperandTypesDecideEligibility) {
  MatchResult i64 = match(gemm_maps(64, 64, 64, {}, {DType::kI64, DType::kI64, DType::kI64}));
  ASSERT_TRUE(i64.contraction);
  EXPECT_FALSE(i64.tensor_cores);
  EXPECT_EQ(all_remarks(i64), "dtype i64 operands: Tensor Cores take f16/bf16/i8\n");
  EXPECT_EQ(i64.contraction->acc_dtype, DType::kI64);
  EXPECT_EQ(i64.contraction->a_vec, 2);  // 16-byte vectors of 8-byte elements

  MatchResult mixed = match(gemm_maps(64, 64, 64, {}, {DType::kF16, DType::kBF16, DType::kF16}));
  EXPECT_FALSE(mixed.tensor_cores);
  EXPECT_TRUE(has_remark(mixed, "A is f16 but B is bf16")) << all_remarks(mixed);

  MatchResult f32 = match(gemm_maps(64, 64, 64, {}, {DType::kF32, DType::kI8, DType::kF32}));
  EXPECT_TRUE(has_remark(f32, "dtype f32 operand A: Tensor Cores take f16/bf16/i8"))
      << all_remarks(f32);
  EXPECT_FALSE(has_remark(f32, "operand B:"));

  MatchResult i8 = match(gemm_maps(64, 64, 64, {}, {DType::kI8, DType::kI8, DType::kI32}));
  EXPECT_TRUE(i8.tensor_cores) << all_remarks(i8);
  EXPECT_EQ(i8.contraction->a_vec, 16);
  EXPECT_EQ(i8.contraction->acc_dtype, DType::kI32);

  EXPECT_TRUE(
      match(gemm_maps(64, 64, 64, {}, {DType::kBF16, DType::kBF16, DType::kF32})).tensor_cores);
}

TEST(MatchGemm, NarrowAndMisalignedVectors) {
  // K = 12: vectors of 4; K = 6: of 2 (both eligible, silently); K = 5: single elements,
  // still eligible (2-byte register-path loads), with a note on each operand.
  EXPECT_EQ(matched(gemm_maps(64, 64, 12, {false, true})).a_vec, 4);
  MatchResult k6 = match(gemm_maps(64, 64, 6, {false, true}));
  EXPECT_EQ(k6.contraction->a_vec, 2);
  EXPECT_TRUE(k6.tensor_cores);
  EXPECT_TRUE(k6.remarks.empty()) << all_remarks(k6);
  MatchResult k5 = match(gemm_maps(64, 64, 5, {false, true}));
  EXPECT_TRUE(k5.tensor_cores) << all_remarks(k5);
  EXPECT_EQ(k5.contraction->a_vec, 1);
  EXPECT_EQ(all_remarks(k5),
            "A: k=5 is not a multiple of 8: 2-byte loads; pad it to 8 for full-width loads\n"
            "B: k=5 is not a multiple of 8: 2-byte loads; pad it to 8 for full-width loads\n");

  // 8-bit operands need 2-byte vectors: K = 5 leaves i8 without Tensor Cores (K = 6 would not).
  MatchResult i8 =
      match(gemm_maps(64, 64, 5, {false, true}, {DType::kI8, DType::kI8, DType::kI32}));
  EXPECT_FALSE(i8.tensor_cores);
  EXPECT_TRUE(has_remark(i8,
                         "A: k=5 is not a multiple of 16: pad it to 16 for Tensor Cores "
                         "(SIMT kernel used)"))
      << all_remarks(i8);
  EXPECT_TRUE(match(gemm_maps(64, 64, 6, {false, true}, {DType::kI8, DType::kI8, DType::kI32}))
                  .tensor_cores);

  // A reads columns 1..16 of an (m, 18) buffer: plain (no padding, one row stride), but a
  // vector starting at an odd column is misaligned.
  IndexMaps maps = gemm_maps(64, 64, 16, {false, true});
  maps.a.shape = {64, 18};
  maps.a.index[1].offset = 1;
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction);
  EXPECT_FALSE(r.contraction->a_gather);
  EXPECT_EQ(r.contraction->a_vec, 1);
  EXPECT_TRUE(r.tensor_cores);
  EXPECT_EQ(all_remarks(r),
            "A: offset 1 on the contiguous dim 'k' misaligns vectors: 2-byte loads\n");

  // An odd row stride misaligns every other row.
  maps.a.index[1].offset = 0;
  maps.a.shape = {64, 17};
  r = match(maps);
  EXPECT_EQ(r.contraction->a_vec, 1);
  EXPECT_EQ(all_remarks(r),
            "A: its contiguous tensor dim has extent 17, so vectors would straddle rows: 2-byte "
            "loads\n");
}

// ---- MatMul ----------------------------------------------------------------------------

TEST(MatchMatMul, BroadcastBatchIsABatchWithStrideZero) {
  // A [2,1,3,4] x B [3,4,2]: A broadcasts over b1, B over b0.
  IndexMaps maps = matmul_maps({2, 1, 3, 4}, {3, 4, 2});
  EXPECT_EQ(maps.c.shape, (Shape{2, 3, 3, 2}));
  Contraction c = matched(maps);
  EXPECT_EQ(names(c, c.batch_dims), (std::vector<std::string>{"b0", "b1"}));
  EXPECT_EQ(c.batch, 6);
  EXPECT_EQ(c.m, 3);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 4);
  std::vector<int64_t> sa = element_strides(c.maps.a, c.maps.dims.size());
  std::vector<int64_t> sb = element_strides(c.maps.b, c.maps.dims.size());
  EXPECT_EQ(sa[c.batch_dims[1]], 0);  // A broadcast along b1
  EXPECT_EQ(sb[c.batch_dims[0]], 0);  // B broadcast along b0
  // The flat batch index needs a decomposition to address either operand.
  EXPECT_TRUE(c.a_gather);
  EXPECT_TRUE(c.b_gather);
  // numpy: np.matmul(d((2,1,3,4), 1), d((3,4,2), 2)).flatten()
  const std::vector<double> expected = {6,  3,   -18, 29,  31,  -28, 7,   -31, -29, 7,  -40, 53,
                                        15, -13, 23,  37,  -13, -22, 14,  -9,  19,  0,  -42, 2,
                                        19, -27, 4,   -44, 52,  13,  -21, 7,   9,   -6, -16, -6};
  std::vector<double> a = test_data({2, 1, 3, 4}, 1), b = test_data({3, 4, 2}, 2);
  EXPECT_EQ(evaluate_maps(maps, a, b), expected);
  EXPECT_EQ(evaluate_gemm_view(c, a, b), expected);
}

TEST(MatchMatMul, BatchOfAOnlyFoldsIntoM) {
  // [5,3,8] x [8,16]: one GEMM with M = 15, A stays a plain matrix.
  IndexMaps maps = matmul_maps({5, 3, 8}, {8, 16});
  Contraction c = matched(maps);
  EXPECT_EQ(names(c, c.m_dims), (std::vector<std::string>{"b0", "m"}));
  EXPECT_EQ(c.batch, 1);
  EXPECT_EQ(c.m, 15);
  EXPECT_FALSE(c.a_gather);
  std::vector<double> a = test_data({5, 3, 8}, 1), b = test_data({8, 16}, 2);
  EXPECT_EQ(evaluate_gemm_view(c, a, b), evaluate_maps(maps, a, b));
}

TEST(MatchMatMul, BatchOfBOnlyIsABroadcastBatch) {
  // [3,8] x [5,8,16]: batch 5 with A's batch stride 0; both plain.
  IndexMaps maps = matmul_maps({3, 8}, {5, 8, 16});
  Contraction c = matched(maps);
  EXPECT_EQ(names(c, c.batch_dims), std::vector<std::string>{"b0"});
  EXPECT_EQ(c.batch, 5);
  EXPECT_EQ(c.m, 3);
  EXPECT_EQ(element_strides(c.maps.a, c.maps.dims.size())[c.batch_dims[0]], 0);
  EXPECT_FALSE(c.a_gather);
  EXPECT_FALSE(c.b_gather);
  std::vector<double> a = test_data({3, 8}, 1), b = test_data({5, 8, 16}, 2);
  EXPECT_EQ(evaluate_gemm_view(c, a, b), evaluate_maps(maps, a, b));
}

TEST(MatchMatMul, MatrixTimesVectorSwapsTheOperands) {
  // [2,3] x [3] -> [2]: C's only dim indexes the first input, which becomes the GEMM's B.
  IndexMaps maps = matmul_maps({2, 3}, {3});
  Contraction c = matched(maps);
  EXPECT_TRUE(c.operands_swapped);
  EXPECT_EQ(c.m, 1);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 3);
  EXPECT_EQ(c.maps.b.shape, (Shape{2, 3}));
  EXPECT_EQ(c.b_major, Major::kK);
  // numpy: np.matmul(d((2,3), 1), d((3,), 2))
  std::vector<double> a = test_data({2, 3}, 1), b = test_data({3}, 2);
  EXPECT_EQ(evaluate_maps(maps, a, b), (std::vector<double>{17, -1}));
  EXPECT_EQ(evaluate_gemm_view(c, a, b), (std::vector<double>{17, -1}));
}

// ---- conv2d NHWC -------------------------------------------------------------------------

Conv2dParams conv(int64_t n, int64_t hw, int64_t ci, int64_t co, int64_t k, int64_t stride,
                  int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  Conv2dParams p;
  p.n = n;
  p.h = p.w = hw;
  p.ci = ci;
  p.co = co;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

TEST(MatchConv, Pointwise1x1IsAPlainMatrix) {
  MatchResult r = match(conv2d_nhwc_maps(conv(1, 56, 64, 256, 1, 1, 0)));
  ASSERT_TRUE(r.contraction);
  const Contraction& c = *r.contraction;
  EXPECT_TRUE(r.tensor_cores) << all_remarks(r);
  EXPECT_EQ(c.m, 56 * 56);
  EXPECT_EQ(c.n, 256);
  EXPECT_EQ(c.k, 64);
  EXPECT_EQ(names(c, c.m_dims), (std::vector<std::string>{"oh", "ow"}));  // b=1 dropped
  EXPECT_FALSE(c.a_gather);  // A is the (3136, 64) input itself
  EXPECT_FALSE(c.b_gather);
  EXPECT_EQ(c.a_major, Major::kK);
  EXPECT_EQ(c.b_major, Major::kK);

  Contraction b32 = matched(conv2d_nhwc_maps(conv(32, 56, 64, 256, 1, 1, 0)));
  EXPECT_EQ(names(b32, b32.m_dims), (std::vector<std::string>{"b", "oh", "ow"}));
  EXPECT_EQ(b32.m, 32 * 56 * 56);
  EXPECT_FALSE(b32.a_gather);
}

// A conv to one output channel (CBAM's spatial attention, a binary mask head): co drops out
// (extent 1) and C's innermost dims are A's (img, oh, ow). The operands stay in order, M is
// those three and N is 1 -- swapped, all three would be N, which no store map takes. A GEMM
// of N = 1 over a single M dim still swaps where C's last tensor dim is that M dim
// (MatrixTimesVectorSwapsTheOperands), but not where C's last dim is the extent-1 channel.
TEST(MatchConv, OneOutputChannelKeepsTheOperandsWithNOfOne) {
  const IndexMaps maps = conv2d_nhwc_maps(conv(2, 5, 8, 1, 3, 1, 1));
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction) << all_remarks(r);
  const Contraction& c = *r.contraction;
  EXPECT_FALSE(c.operands_swapped);
  EXPECT_EQ(names(c, c.m_dims), (std::vector<std::string>{"b", "oh", "ow"}));
  EXPECT_TRUE(c.n_dims.empty());
  EXPECT_EQ(c.m, 2 * 5 * 5);
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(c.k, 72);
  const std::vector<double> x = test_data({2, 5, 5, 8}, 1), w = test_data({1, 3, 3, 8}, 2);
  EXPECT_EQ(evaluate_gemm_view(c, x, w), evaluate_maps(maps, x, w));
  // A 1x1 image at batch 4 (a squeeze-excite to one channel): C is [b, 1, 1, co], and its
  // last dim, the one the store map puts n on, is co of extent 1, not b. So unswapped: M = b,
  // N = 1. (Swapped, b was N, and no store map took it: "not supported on the GPU".)
  const IndexMaps pooled_maps = conv2d_nhwc_maps(conv(4, 1, 16, 1, 1, 1, 0));
  const Contraction pooled = matched(pooled_maps);
  EXPECT_FALSE(pooled.operands_swapped);
  EXPECT_EQ(pooled.m, 4);
  EXPECT_EQ(pooled.n, 1);
  const std::vector<double> px = test_data({4, 1, 1, 16}, 3), pw = test_data({1, 1, 1, 16}, 4);
  EXPECT_EQ(evaluate_gemm_view(pooled, px, pw), evaluate_maps(pooled_maps, px, pw));
}

// A dense layer over one input feature: K = 1, an outer product. The reduction dim of extent
// 1 stays as K (else the contraction has no K); both operands are read element by element.
TEST(MatchMatMul, DenseLayerOverOneFeatureIsAGemmWithKOfOne) {
  const IndexMaps maps = matmul_maps({6, 1}, {1, 10});
  const Contraction c = matched(maps);
  EXPECT_EQ(c.m, 6);
  EXPECT_EQ(c.n, 10);
  EXPECT_EQ(c.k, 1);
  EXPECT_EQ(c.k_dims.size(), 1u);
  EXPECT_EQ(c.a_vec, 1);
  EXPECT_EQ(c.b_vec, 1);
  const std::vector<double> a = test_data({6, 1}, 1), b = test_data({1, 10}, 2);
  EXPECT_EQ(evaluate_gemm_view(c, a, b), evaluate_maps(maps, a, b));
}

// A dense layer to one output (a regression or binary head, a GAN discriminator's last
// layer): [4, 16] x [16, 1] -> C[4, 1], whose last dim is n of extent 1. The operands stay:
// M = 4, N = 1 (swapped, m was N on C's outer dim, which no store map takes).
TEST(MatchMatMul, DenseLayerToOneOutputKeepsTheOperands) {
  const IndexMaps maps = matmul_maps({4, 16}, {16, 1});
  const Contraction c = matched(maps);
  EXPECT_FALSE(c.operands_swapped);
  EXPECT_EQ(c.m, 4);
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(c.k, 16);
  const std::vector<double> a = test_data({4, 16}, 1), b = test_data({16, 1}, 2);
  EXPECT_EQ(evaluate_gemm_view(c, a, b), evaluate_maps(maps, a, b));
}

TEST(MatchConv, Padded3x3IsAnImplicitGemmGather) {
  MatchResult r = match(conv2d_nhwc_maps(conv(1, 56, 64, 64, 3, 1, 1)));
  ASSERT_TRUE(r.contraction);
  const Contraction& c = *r.contraction;
  EXPECT_TRUE(r.tensor_cores) << all_remarks(r);
  EXPECT_EQ(c.m, 3136);
  EXPECT_EQ(c.n, 64);
  EXPECT_EQ(c.k, 576);
  EXPECT_EQ(names(c, c.k_dims), (std::vector<std::string>{"kh", "kw", "ci"}));
  EXPECT_TRUE(c.a_gather);
  EXPECT_FALSE(c.b_gather);  // weights (co, kh, kw, ci) are a plain (64, 576) matrix
  EXPECT_EQ(c.a_vec, 8);
  EXPECT_EQ(c.b_vec, 8);

  // Without padding nothing is out of bounds, but (oh + kh) still is no single stride.
  EXPECT_TRUE(matched(conv2d_nhwc_maps(conv(1, 56, 64, 64, 3, 1, 0))).a_gather);
}

TEST(MatchConv, StridedAndDilated) {
  Contraction s2 = matched(conv2d_nhwc_maps(conv(1, 56, 128, 128, 3, 2, 1)));
  EXPECT_EQ(s2.m, 28 * 28);
  EXPECT_TRUE(s2.a_gather);
  EXPECT_EQ(s2.a_vec, 8);
  // A strided 1x1 conv reads no padding, but skips pixels: rows are not one stride apart.
  Contraction ds = matched(conv2d_nhwc_maps(conv(1, 56, 256, 512, 1, 2, 0)));
  EXPECT_EQ(ds.m, 28 * 28);
  EXPECT_TRUE(ds.a_gather);
  // Dilation 2, pad 2 keeps 56x56.
  MatchResult d2 = match(conv2d_nhwc_maps(conv(2, 56, 64, 64, 3, 1, 2, 2)));
  EXPECT_TRUE(d2.tensor_cores) << all_remarks(d2);
  EXPECT_EQ(d2.contraction->m, 2 * 56 * 56);
  EXPECT_EQ(d2.contraction->k, 576);
  EXPECT_TRUE(d2.contraction->a_gather);
}

TEST(MatchConv, GroupsAreABatchOverChannelSlices) {
  MatchResult r = match(conv2d_nhwc_maps(conv(1, 28, 64, 128, 3, 1, 1, 1, 2)));
  ASSERT_TRUE(r.contraction) << all_remarks(r);
  const Contraction& c = *r.contraction;
  EXPECT_TRUE(r.tensor_cores) << all_remarks(r);
  EXPECT_EQ(names(c, c.batch_dims), std::vector<std::string>{"g"});
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.m, 28 * 28);
  EXPECT_EQ(c.n, 64);
  EXPECT_EQ(c.k, 9 * 32);
  EXPECT_EQ(c.a_vec, 8);
  EXPECT_FALSE(c.b_gather);  // B's group offset 64*g is a batch stride

  // Grouped 1x1: A's channel 32*g + ci is a batch offset too, so A is plain.
  Contraction pw = matched(conv2d_nhwc_maps(conv(1, 28, 64, 128, 1, 1, 0, 1, 2)));
  EXPECT_FALSE(pw.a_gather);
  EXPECT_FALSE(pw.b_gather);
}

TEST(MatchConv, GroupedStridedDilatedAsymmetricConvComputesOnnxConv) {
  // onnxruntime Conv (NCHW, transposed from these NHWC tensors), x = d((1,7,6,4), 1),
  // w = d((6,3,2,2), 2) as (co, kh, kw, ci/g), strides [2,1], pads [1,0,2,1],
  // dilations [1,2], group 2; the output transposed back to NHWC (1,4,5,6).
  Conv2dParams p;
  p.h = 7;
  p.w = 6;
  p.ci = 4;
  p.co = 6;
  p.kh = 3;
  p.kw = 2;
  p.stride_h = 2;
  p.pad_top = 1;
  p.pad_bottom = 2;
  p.pad_right = 1;
  p.dilation_w = 2;
  p.groups = 2;
  const std::vector<double> expected = {
      55,  -1, -62, -58, -30, 96,  36,  -5,  34,  10,  74,  -37, -54,  -20, 127, 38, 8,   -41,
      -62, 48, -4,  -2,  -30, -51, -39, 17,  -33, -34, -22, 10,  -65,  2,   -35, 12, -38, -57,
      40,  -4, -63, -78, -28, 94,  106, 14,  -43, -34, 92,  62,  -26,  -54, 112, 14, 10,  12,
      -51, 31, 81,  -14, -26, 12,  -50, -61, 162, 66,  82,  -49, -104, 79,  -21, 88, -26, -125,
      -37, 59, -78, -30, -80, -14, 106, 13,  -55, -76, -26, 151, 12,   -21, 31,  4,  56,  -2,
      -15, 93, -65, 4,   -34, 42,  103, -65, -31, 10,  26,  28,  -12,  -61, 105, 54, 66,  -73,
      -32, 60, -49, 18,  -36, -40, -5,  21,  -50, -16, -12, -8};
  IndexMaps maps = conv2d_nhwc_maps(p);
  EXPECT_EQ(maps.c.shape, (Shape{1, 4, 5, 6}));
  std::vector<double> x = test_data({1, 7, 6, 4}, 1), w = test_data({6, 3, 2, 2}, 2);
  EXPECT_EQ(evaluate_maps(maps, x, w), expected);
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction);
  EXPECT_EQ(r.contraction->batch, 2);
  EXPECT_EQ(r.contraction->a_vec, 2);  // 2 channels per group
  EXPECT_TRUE(r.tensor_cores) << all_remarks(r);
  EXPECT_EQ(evaluate_gemm_view(*r.contraction, x, w), expected);
}

TEST(MatchConv, DepthwiseIsABatchOfNarrowContractions) {
  // groups = ci = co: per group N = 1, K = kh*kw. A's contiguous dim is the group itself.
  MatchResult r = match(conv2d_nhwc_maps(conv(1, 56, 32, 32, 3, 1, 1, 1, 32)));
  ASSERT_TRUE(r.contraction) << all_remarks(r);
  const Contraction& c = *r.contraction;
  EXPECT_EQ(c.batch, 32);
  EXPECT_EQ(c.m, 56 * 56);
  EXPECT_EQ(c.n, 1);
  EXPECT_EQ(c.k, 9);
  EXPECT_FALSE(r.tensor_cores);
  EXPECT_TRUE(has_remark(r, "C's contiguous dim 'g' is a batch dim")) << all_remarks(r);
  EXPECT_TRUE(has_remark(r, "A: its contiguous dim 'g' is a batch dim")) << all_remarks(r);
  EXPECT_TRUE(has_remark(r, "B: kw=3 is not a multiple of 8")) << all_remarks(r);
}

TEST(MatchConv, DepthwiseWithMultiplierComputesOnnxConv) {
  // onnxruntime Conv, x = d((1,4,4,3), 1), w = d((6,3,3,1), 2), strides 2, pads 1, group 3.
  const std::vector<double> expected = {-17, -1, 33, 47,  -16, 12, -52, -33, -27, 15, 32, -28,
                                        39,  14, 29, -93, 6,   -6, 5,   44,  111, 57, 8,  10};
  IndexMaps maps = conv2d_nhwc_maps(conv(1, 4, 3, 6, 3, 2, 1, 1, 3));
  std::vector<double> x = test_data({1, 4, 4, 3}, 1), w = test_data({6, 3, 3, 1}, 2);
  EXPECT_EQ(evaluate_maps(maps, x, w), expected);
  Contraction c = matched(maps);
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.k, 9);
  EXPECT_EQ(evaluate_gemm_view(c, x, w), expected);
}

TEST(MatchConv, ChannelCountsDecideVectorWidth) {
  // ResNet-50's stem: ci = 3.
  MatchResult stem = match(conv2d_nhwc_maps(conv(1, 224, 3, 64, 7, 2, 3)));
  ASSERT_TRUE(stem.contraction);
  EXPECT_EQ(stem.contraction->m, 112 * 112);
  EXPECT_EQ(stem.contraction->k, 147);
  EXPECT_EQ(stem.contraction->a_vec, 1);
  EXPECT_EQ(stem.contraction->b_vec, 1);
  // Tensor Cores with 2-byte loads (2-2.5x faster than the SIMT kernel on an H100), and a
  // note on how to get full-width ones.
  EXPECT_TRUE(stem.tensor_cores) << all_remarks(stem);
  EXPECT_EQ(all_remarks(stem),
            "A: ci=3 is not a multiple of 8: 2-byte loads; pad it to 8 for full-width loads\n"
            "B: ci=3 is not a multiple of 8: 2-byte loads; pad it to 8 for full-width loads\n");

  MatchResult ci8 = match(conv2d_nhwc_maps(conv(1, 224, 8, 64, 7, 2, 3)));
  EXPECT_TRUE(ci8.tensor_cores) << all_remarks(ci8);
  EXPECT_EQ(ci8.contraction->a_vec, 8);

  MatchResult ci4 = match(conv2d_nhwc_maps(conv(1, 224, 4, 64, 7, 2, 3)));
  EXPECT_TRUE(ci4.tensor_cores) << all_remarks(ci4);  // 8-byte vectors: cp.async, no note
  EXPECT_TRUE(ci4.remarks.empty()) << all_remarks(ci4);
  EXPECT_EQ(ci4.contraction->a_vec, 4);
  EXPECT_EQ(ci4.contraction->b_vec, 4);
}

// ---- hand-written maps -------------------------------------------------------------------

AffineIndex idx(std::vector<int64_t> coeffs, int64_t offset = 0) {
  return {std::move(coeffs), offset};
}

// C[m, n] = sum_k A[m, k] B[n, k] with 4x4x8 extents, to be broken by each test.
IndexMaps small_nt() {
  IndexMaps maps;
  maps.dims = {{"m", 4, false}, {"n", 4, false}, {"k", 8, true}};
  maps.a = {DType::kF16, {4, 8}, {idx({1, 0, 0}), idx({0, 0, 1})}};
  maps.b = {DType::kF16, {4, 8}, {idx({0, 1, 0}), idx({0, 0, 1})}};
  maps.c = {DType::kF16, {4, 4}, {idx({1, 0, 0}), idx({0, 1, 0})}};
  return maps;
}

TEST(MatchMaps, ExtentOneDimsAreIgnored) {
  IndexMaps maps = small_nt();
  maps.dims.push_back({"unit", 1, false});
  for (Access* x : {&maps.a, &maps.b, &maps.c})
    for (AffineIndex& i : x->index) i.coeffs.push_back(0);
  maps.a.index[0].coeffs[3] = 5;  // any coefficient: the dim is always 0
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction);
  EXPECT_TRUE(r.tensor_cores);
  EXPECT_EQ(r.contraction->key(), matched(small_nt()).key());
}

TEST(MatchMaps, OutputsThatAreNotAFunctionOfMAndN) {
  IndexMaps reduced_in_c = small_nt();
  reduced_in_c.c.index[1] = idx({0, 1, 1});
  reduced_in_c.c.shape = {4, 11};
  MatchResult r = match(reduced_in_c);
  EXPECT_FALSE(r.contraction);
  EXPECT_EQ(all_remarks(r), "C is not a function of M and N: reduction dim 'k' indexes C\n");

  IndexMaps unused = small_nt();
  unused.c = {DType::kF16, {4}, {idx({1, 0, 0})}};
  r = match(unused);
  EXPECT_FALSE(r.contraction);
  EXPECT_TRUE(has_remark(r, "output dim 'n' (extent 4) does not index C")) << all_remarks(r);

  IndexMaps overlapping = small_nt();  // C[m + n]: elements written several times
  overlapping.c = {DType::kF16, {7}, {idx({1, 1, 0})}};
  r = match(overlapping);
  EXPECT_FALSE(r.contraction);
  EXPECT_TRUE(has_remark(r, "does not write each element exactly once")) << all_remarks(r);

  IndexMaps strided = small_nt();  // C[m, 2n]: half of C is never written
  strided.c = {DType::kF16, {4, 8}, {idx({1, 0, 0}), idx({0, 2, 0})}};
  EXPECT_FALSE(match(strided).contraction);

  // A batch dim innermost in C, as in a depthwise conv: C[m, b] = sum_k A[b, m, k] B[b, k].
  // A contraction (batch 2 of M = 4, N = 1), not for Tensor Cores.
  IndexMaps batch_inner;
  batch_inner.dims = {{"b", 2, false}, {"m", 4, false}, {"k", 8, true}};
  batch_inner.a = {DType::kF16, {2, 4, 8}, {idx({1, 0, 0}), idx({0, 1, 0}), idx({0, 0, 1})}};
  batch_inner.b = {DType::kF16, {2, 8}, {idx({1, 0, 0}), idx({0, 0, 1})}};
  batch_inner.c = {DType::kF16, {4, 2}, {idx({0, 1, 0}), idx({1, 0, 0})}};
  r = match(batch_inner);
  ASSERT_TRUE(r.contraction) << all_remarks(r);
  EXPECT_EQ(r.contraction->batch, 2);
  EXPECT_EQ(r.contraction->m, 4);
  EXPECT_EQ(r.contraction->n, 1);
  EXPECT_FALSE(r.tensor_cores);
  EXPECT_EQ(all_remarks(r),
            "C's contiguous dim 'b' is a batch dim (it indexes both A and B): Tensor Core tiles "
            "store C as rows of N (SIMT kernel used)\n");
  std::vector<double> a = test_data({2, 4, 8}, 1), b = test_data({2, 8}, 2);
  EXPECT_EQ(evaluate_gemm_view(*r.contraction, a, b), evaluate_maps(batch_inner, a, b));
}

TEST(MatchMaps, TransposedOutputSwapsTheOperands) {
  // C[n, m]: the GEMM computes C = B * A, so the op's B becomes the GEMM's A.
  IndexMaps maps = small_nt();
  maps.c.index = {idx({0, 1, 0}), idx({1, 0, 0})};
  MatchResult r = match(maps);
  ASSERT_TRUE(r.contraction);
  EXPECT_TRUE(r.contraction->operands_swapped);
  EXPECT_EQ(names(*r.contraction, r.contraction->m_dims), std::vector<std::string>{"n"});
  std::vector<double> a = test_data({4, 8}, 1), b = test_data({4, 8}, 2);
  EXPECT_EQ(evaluate_gemm_view(*r.contraction, a, b), evaluate_maps(maps, a, b));
}

TEST(MatchMaps, MalformedMapsAreInternalErrors) {
  IndexMaps maps = small_nt();
  maps.a.index[0].coeffs.pop_back();
  EXPECT_THROW(match(maps), InternalError);
  maps = small_nt();
  maps.c.shape.push_back(1);
  EXPECT_THROW(match(maps), InternalError);
}

}  // namespace
}  // namespace tessel::contraction
