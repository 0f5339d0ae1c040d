// The graph-edge forms of the contraction kernels on a GPU (fuse.cc folds a network's first
// and last layout changes into its convs):
//  - NCHW stores (kNchw, kDepthToSpaceNchw) on mma.sync, wgmma (Hopper) and SIMT schedules,
//    in the conv's fp16 or in fp32 (rounded to fp16 first), with residuals read NCHW, on output
//    widths that allow 16-byte vectors down the slab's columns and on odd ones (scalars);
//  - convs reading an NCHW fp32 or fp16 input (conv2d_nchw_input_maps) on the SIMT kernel;
//  - the engine on a small super-resolution net whose only kernels are its convs.
// Outputs are poisoned (NaN) before each launch and compared with the CPU double reference of
// tests/codegen/contraction_reference.h, which places results NHWC: the NCHW expectation is its
// permutation. Skipped where no CUDA device is present, except the lowering checks, which need
// none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "kernels/cuda/contraction_problems.h"
#include "kernels/cuda/contraction_reference.h"
#include "core/half.h"
#include "gpu/gpu_test_util.h"
#include "ir/infer.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "runtime/cpu/executor.h"
#include "device/cuda_api.h"
#include "runtime/engine.h"
#include "compiler/lowering.h"

namespace tessel::kernels::cuda::testing {
namespace {

namespace rt = device;
using ::tessel::testing::build_all;
using ::tessel::testing::upload;
using contraction::StoreMap;
using K = contraction::EpilogueOpKind;

class EdgeStoreGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!rt::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    arch_ = rt::device_info().arch();
    rt::set_cache_dir("");  // every kernel compiled fresh
  }
  bool hopper() const { return arch_ == "sm_90a"; }
  std::string arch_;
};

// Element i = (n, y, x, ch) of an NHWC [N, H, W, C] buffer: its NCHW position
// ((n*C + ch)*H + y)*W + x.
int64_t nchw_position(const Shape& nhwc, int64_t i) {
  const int64_t c = nhwc[3], w = nhwc[2], h = nhwc[1];
  const int64_t ch = i % c, x = i / c % w, y = i / (c * w) % h, n = i / (c * w * h);
  return ((n * c + ch) * h + y) * w + x;
}

// The stored NHWC shape of a problem whose store is NCHW: [N, OH*b, OW*b, Co/b^2].
Shape stored_nhwc(const TestProblem& p) {
  const StoreMap& st = p.e.store;
  const int64_t b = st.kind == StoreMap::Kind::kDepthToSpaceNchw ? st.block : 1;
  const Shape& c = p.c.maps.c.shape;
  return {c[0], c[1] * b, c[2] * b, c[3] / (b * b)};
}

// `p` with its NCHW store replaced by the NHWC one it permutes (reference_output places those).
TestProblem nhwc_twin(const TestProblem& p) {
  TestProblem q = p;
  if (p.e.store.kind == StoreMap::Kind::kNchw) q.e.store.kind = StoreMap::Kind::kPlain;
  if (p.e.store.kind == StoreMap::Kind::kDepthToSpaceNchw) q.e.store.kind = StoreMap::Kind::kDepthToSpace;
  return q;
}

bool nchw_store(const TestProblem& p) {
  return p.e.store.kind == StoreMap::Kind::kNchw || p.e.store.kind == StoreMap::Kind::kDepthToSpaceNchw;
}

std::string describe(const TestProblem& p) {
  std::string s = p.what + "_" + p.s.name() + "_" + std::string(dtype_name(p.c.a_dtype)) + "_to_" +
                  std::string(dtype_name(p.e.out_dtype));
  if (p.e.store.kind == StoreMap::Kind::kNchw) s += "_nchw";
  if (p.e.store.kind == StoreMap::Kind::kDepthToSpaceNchw) s += "_d2s_nchw";
  for (const auto& st : p.e.steps) s += "_" + TestProblem::step_name(st.kind);
  return s;
}

// Runs `p` twice on random data (the output poisoned each time) and compares with the CPU
// reference, permuted to NCHW for the NCHW stores; the residual is uploaded in the stored
// layout. Stores of fp16 results in fp32 must hold fp16 numbers.
void run_and_check(const TestProblem& p, const ContractionKernel& k, std::mt19937& rng) {
  SCOPED_TRACE(describe(p));
  const auto& c = p.c;
  HostOperands h;
  std::vector<char> a_bytes, b_bytes, scale_bytes, bias_bytes, res_bytes;
  h.a = random_tensor(rng, numel(c.maps.a.shape), c.a_dtype, a_bytes);
  h.b = random_tensor(rng, numel(c.maps.b.shape), c.b_dtype, b_bytes);
  const int64_t channels = c.maps.c.shape.back();
  h.scale = random_tensor(rng, channels, DType::kF32, scale_bytes, 0.5f, 1.5f);
  h.bias = random_tensor(rng, channels, DType::kF32, bias_bytes);
  const TestProblem twin = nhwc_twin(p);
  const int64_t out_n = output_elements(twin);
  const size_t elem = dtype_size(p.e.out_dtype);
  const bool has_residual = std::any_of(p.e.steps.begin(), p.e.steps.end(),
                                        [](const auto& s) { return s.kind == K::kResidualAdd; });
  const bool nchw = nchw_store(p);
  const Shape shape = nchw ? stored_nhwc(p) : Shape{};
  if (has_residual) {
    h.residual = random_tensor(rng, out_n, p.e.out_dtype, res_bytes);  // NHWC, as the reference reads it
    if (nchw) {
      std::vector<char> moved(res_bytes.size());
      for (int64_t i = 0; i < out_n; ++i)
        std::memcpy(moved.data() + nchw_position(shape, i) * elem, res_bytes.data() + i * elem, elem);
      res_bytes = std::move(moved);
    }
  }
  std::vector<double> want = reference_output(twin, h);
  if (nchw) {
    std::vector<double> moved(want.size());
    for (int64_t i = 0; i < out_n; ++i) moved[nchw_position(shape, i)] = want[i];
    want = std::move(moved);
  }
  rt::DeviceBuffer da = upload(a_bytes), db = upload(b_bytes), dscale = upload(scale_bytes),
                   dbias = upload(bias_bytes);
  rt::DeviceBuffer dres = upload(has_residual ? res_bytes : std::vector<char>(16));
  const size_t out_bytes = out_n * elem;
  rt::DeviceBuffer dout(out_bytes);
  rt::DeviceBuffer ws(std::max<size_t>(k.source().workspace_bytes, 16));
  ws.fill_bytes(0);
  KernelArgs args;
  args.a = da.ptr();
  args.b = db.ptr();
  args.c = dout.ptr();
  args.extra = {dscale.ptr(), dbias.ptr(), dres.ptr()};
  args.workspace = ws.ptr();
  const bool rounded = c.maps.c.dtype == DType::kF16 && p.e.out_dtype == DType::kF32;
  for (int launch = 0; launch < 2; ++launch) {
    dout.fill_bytes(0xff);  // NaN in f16, bf16 and f32
    k.launch(args, nullptr);
    rt::synchronize();
    std::vector<char> got_bytes(out_bytes);
    dout.download(got_bytes.data(), out_bytes);
    const std::vector<double> got = to_doubles(got_bytes, p.e.out_dtype);
    const Comparison cmp = compare(got, want);
    EXPECT_EQ(cmp.nan, 0) << "unwritten or NaN outputs (launch " << launch << ")";
    EXPECT_LE(cmp.rel_l2, 1e-2) << "relative L2 error (launch " << launch << ")";
    if (rounded) {
      int64_t not_f16 = 0;
      for (double v : got) not_f16 += !std::isnan(v) && half_to_float(float_to_half(float(v))) != float(v);
      EXPECT_EQ(not_f16, 0) << "fp32 outputs that are no fp16 numbers: the store skipped the rounding";
    }
  }
}

const std::vector<kernels::Schedule>& tc_candidates() {
  static const std::vector<kernels::Schedule> s = {
      tc_schedule(128, 64, 32, 64, 32, 3), tc_schedule(64, 64, 32, 32, 32, 3),
      tc_schedule(128, 32, 32, 32, 32, 3), tc_schedule(64, 32, 64, 32, 16, 4),
      tc_schedule(64, 64, 32, 32, 32, 3, 2)};  // split-K: the fixup slab goes through the same store
  return s;
}

const std::vector<kernels::Schedule>& wgmma_candidates() {
  static const std::vector<kernels::Schedule> s = {wgmma_schedule(128, 64, 64, 64, 64, 4),
                                                wgmma_schedule(64, 128, 64, 64, 128, 3)};
  return s;
}

// A schedule of the requested instruction the generator accepts, the candidates tried in a
// random order, with the widest vectors it accepts (at most match()'s, halved until legal: an
// NCHW stem's B is read along kw, not along its contiguous ci), or false.
bool pick(TestProblem& p, kernels::Instruction instr, std::mt19937& rng) {
  std::vector<kernels::Schedule> cands;
  if (instr == kernels::Instruction::kMmaSync) cands = tc_candidates();
  if (instr == kernels::Instruction::kWgmma) cands = wgmma_candidates();
  if (instr == kernels::Instruction::kSimt)
    cands = {simt_schedule(64, 64, 16, 32, 16, 8, 8), simt_schedule(64, 64, 32, 32, 32, 8, 8)};
  std::shuffle(cands.begin(), cands.end(), rng);
  for (kernels::Schedule s : cands) {
    for (int a = std::min(s.a_vec, p.c.a_vec); a >= 1; a /= 2) {
      for (int b = std::min(s.b_vec, p.c.b_vec); b >= 1; b /= 2) {
        s.a_vec = a;
        s.b_vec = b;
        if (!can_implement(p.c, p.e, s)) {
          p.s = s;
          return true;
        }
      }
    }
  }
  return false;
}

void store_nchw(TestProblem& p, bool depth_to_space) {
  p.e.store.kind = depth_to_space ? StoreMap::Kind::kDepthToSpaceNchw : StoreMap::Kind::kNchw;
  p.e.store.out_h = p.c.maps.c.shape[1];
  p.e.store.out_w = p.c.maps.c.shape[2];
  if (depth_to_space) p.e.store.block = 2;
}

void check_all(const std::vector<TestProblem>& ps, const std::string& arch, std::mt19937& rng) {
  std::vector<std::string> errors;
  const auto kernels = build_all(ps, arch, errors);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!kernels[i]) {
      ADD_FAILURE() << describe(ps[i]) << ": " << errors[i];
      continue;
    }
    run_and_check(ps[i], *kernels[i], rng);
  }
}

// Random convolutions stored NCHW. Widths 16/32/48 give 8-element (fp16) or 4-element (fp32)
// vectors, 20/24 narrower ones, 7/29 scalars; depth_to_space NCHW always stores scalars.
std::vector<TestProblem> random_nchw_problems(std::mt19937& rng, bool hopper) {
  const int64_t widths[] = {16, 32, 48, 20, 24, 7, 29};
  const int64_t out_channels[] = {3, 8, 16, 24, 64, 12};
  std::vector<kernels::Instruction> instrs = {kernels::Instruction::kMmaSync, kernels::Instruction::kSimt};
  if (hopper) instrs.push_back(kernels::Instruction::kWgmma);
  std::vector<TestProblem> ps;
  for (int i = 0; ps.size() < 48 && i < 400; ++i) {
    const int64_t w = widths[rng() % 7], h = 1 + rng() % 12, n = 1 + rng() % 2;
    const int64_t ci = int64_t{8} << (rng() % 3);
    const int64_t co = out_channels[rng() % 6];
    const int64_t k = rng() % 3 == 0 ? 1 : 3;
    const int64_t stride = rng() % 5 == 0 ? 2 : 1;
    const bool d2s = co % 4 == 0 && rng() % 4 == 0;
    const DType out = rng() % 2 ? DType::kF32 : DType::kF16;
    TestProblem p = conv_problem(conv_params(n, h, w * stride, ci, co, k, stride, k / 2), DType::kF16,
                                 DType::kF16);
    p.e.out_dtype = out;
    store_nchw(p, d2s);
    p.e.steps = {step(K::kBias)};
    if (rng() % 3 == 0) p.e.steps.push_back(step(K::kLeakyRelu, 0.1f));
    if (rng() % 3 == 0) p.e.steps.push_back(step(K::kResidualAdd));
    if (!pick(p, instrs[ps.size() % instrs.size()], rng)) continue;
    ps.push_back(std::move(p));
  }
  return ps;
}

TEST_F(EdgeStoreGpu, RandomNchwStoresMatchCpuReference) {
  std::mt19937 rng(2024);
  const std::vector<TestProblem> ps = random_nchw_problems(rng, hopper());
  ASSERT_GE(ps.size(), 40u);
  check_all(ps, arch_, rng);
}

// The super-resolution net's tail at a size where every slab row is full: 64 -> 3 channels,
// fp32 NCHW with 16-byte stores, on each instruction.
TEST_F(EdgeStoreGpu, SuperResolutionTailShapes) {
  std::mt19937 rng(7);
  std::vector<TestProblem> ps;
  std::vector<kernels::Instruction> instrs = {kernels::Instruction::kMmaSync, kernels::Instruction::kSimt};
  if (hopper()) instrs.push_back(kernels::Instruction::kWgmma);
  for (kernels::Instruction instr : instrs) {
    TestProblem p = conv_problem(conv_params(1, 36, 64, 16, 3, 3, 1, 1));
    p.e.out_dtype = DType::kF32;
    store_nchw(p, false);
    p.e.steps = {step(K::kBias)};
    ASSERT_TRUE(pick(p, instr, rng)) << describe(p);
    ps.push_back(p);
  }
  check_all(ps, arch_, rng);
}

// Stems reading their input NCHW (fp32: the graph input as it is; fp16 too) with fp16
// weights, on SIMT; stored NHWC fp16 or NCHW fp32.
std::vector<TestProblem> stem_problems(std::mt19937& rng) {
  std::vector<TestProblem> ps;
  const int64_t channels[] = {1, 3, 4, 8, 16};
  for (int i = 0; i < 16; ++i) {
    const int64_t ci = channels[rng() % 5];
    const int64_t k = ci > 1 && rng() % 4 == 0 ? 1 : 3;  // a 1x1 window over 1 channel has no K
    const contraction::Conv2dParams cp =
        conv_params(1 + rng() % 2, 3 + rng() % 20, 5 + rng() % 40, ci, 8 << (rng() % 3), k, 1, k / 2);
    const DType a = i % 4 == 3 ? DType::kF16 : DType::kF32;
    TestProblem p;
    p.what = "stem_conv" + std::to_string(cp.kh) + "_n" + std::to_string(cp.n) + "_h" + std::to_string(cp.h) +
             "_w" + std::to_string(cp.w) + "_ci" + std::to_string(cp.ci) + "_co" + std::to_string(cp.co);
    const contraction::MatchResult m =
        contraction::match(contraction::conv2d_nchw_input_maps(cp, {a, DType::kF16, DType::kF16}));
    EXPECT_TRUE(m.contraction) << p.what;
    if (!m.contraction) continue;
    p.c = *m.contraction;
    p.e.out_dtype = DType::kF16;
    p.e.steps = {step(K::kBias), step(K::kRelu)};
    if (i % 2) {
      p.e.out_dtype = DType::kF32;
      store_nchw(p, false);
    }
    EXPECT_TRUE(pick(p, kernels::Instruction::kSimt, rng)) << describe(p);
    ps.push_back(p);
  }
  return ps;
}

TEST_F(EdgeStoreGpu, NchwInputStemsOnSimt) {
  std::mt19937 rng(99);
  check_all(stem_problems(rng), arch_, rng);
}

// ---- The engine -----------------------------------------------------------------------------

// A small super-resolution net with an odd output width (scalar NCHW stores): the fp16 engine
// runs its four convs and nothing else, and agrees with the CPU executor.
TEST_F(EdgeStoreGpu, EngineRunsOnlyTheConvs) {
  ::tessel::testing::IrWriter w(13);
  w.input("x", "f32[1,3,5,7]");
  ::tessel::testing::conv_weight(w, "head_w", 16, 3, 3);
  ::tessel::testing::conv_weight(w, "body_w", 16, 16, 3);
  ::tessel::testing::conv_weight(w, "up_w", 64, 16, 3);
  ::tessel::testing::conv_weight(w, "tail_w", 3, 16, 3);
  w.constant("tail_b", {3}, -0.1, 0.1);
  w.node(R"(%h = Conv(%x, %head_w) {pads = [1, 1, 1, 1]} : f32[1,16,5,7] @"head")");
  w.node(R"(%c = Conv(%h, %body_w) {pads = [1, 1, 1, 1]} : f32[1,16,5,7] @"body")");
  w.node(R"(%s = Add(%c, %h) : f32[1,16,5,7] @"add")");
  w.node(R"(%u = Conv(%s, %up_w) {pads = [1, 1, 1, 1]} : f32[1,64,5,7] @"up")");
  w.node(R"(%d = DepthToSpace(%u) {blocksize = 2, mode = "CRD"} : f32[1,16,10,14] @"d2s")");
  w.node(R"(%y = Conv(%d, %tail_w, %tail_b) {pads = [1, 1, 1, 1]} : f32[1,3,10,14] @"tail")");
  const ir::Graph g = w.graph("y");
  using runtime::Engine;
  Session s = ::tessel::testing::compile_session(g);
  runtime::Engine& e = *s.engine();
  std::map<std::string, int> ops;
  for (const ir::Node& n : s.graph()->nodes) ++ops[n.op];
  EXPECT_EQ(ops, (std::map<std::string, int>{{"tessel.Conv", 4}}));
  EXPECT_EQ(e.stats().kernels, 4);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> x(3 * 5 * 7);
  for (double& v : x) v = uni(rng);
  const std::vector<Tensor> inputs = {Tensor::from_doubles(DType::kF32, {1, 3, 5, 7}, x)};
  const Tensor want = runtime::cpu::run_graph(g, inputs).at(0);
  const Tensor got = e.run(inputs).at(0);
  ASSERT_EQ(got.type_str(), "f32[1,3,10,14]");
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = got.get_f64(i) - want.get_f64(i);
    ASSERT_FALSE(std::isnan(got.get_f64(i))) << "element " << i;
    num += d * d;
    den += want.get_f64(i) * want.get_f64(i);
  }
  EXPECT_LE(std::sqrt(num / den), 2e-2);
}

// ---- The lowering (no device needed) ------------------------------------------------------

namespace eng = compiler;

// One tessel.Conv reading %x (and %r) with weights `w_type` of constant 0.5, typed by inference.
ir::Graph conv_graph(const std::string& inputs, const std::string& w_type, const Shape& w_shape,
                     const std::string& conv) {
  std::string w;
  for (int64_t i = 0; i < numel(w_shape); ++i) w += std::string(i ? ", " : "") + "0.5";
  ir::Graph g = ir::parse_graph("graph @g opset 17 {\n" + inputs + "  const %w : " + w_type +
                                shape_str(w_shape) + " = [" + w + "]\n  " + conv + "\n  output %y\n}");
  ir::infer_types(g, ir::OpRegistry::global());
  return g;
}

TEST(EdgeStoreLowering, NchwStoreInAnotherDtype) {
  const ir::Graph g = conv_graph("  input %x : f16[2,6,10,8]\n", "f16", {3, 3, 3, 8},
                                 R"(%y = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1], store = "nchw", out_dtype = "f32"} : f32[2,3,6,10] @"tail")");
  const eng::ContractionSpec s = eng::contraction_of(g, g.nodes[0]);
  EXPECT_EQ(s.epilogue.store.kind, StoreMap::Kind::kNchw);
  EXPECT_EQ(s.epilogue.out_dtype, DType::kF32);
  EXPECT_EQ(s.maps.c.dtype, DType::kF16);  // the conv's value, rounded before the fp32 store
  EXPECT_EQ(s.maps.c.shape, (Shape{2, 6, 10, 3}));
  EXPECT_EQ(s.epilogue.str(), "store f32 nchw(out=6x10)");
}

TEST(EdgeStoreLowering, DepthToSpaceNchw) {
  const ir::Graph g = conv_graph("  input %x : f16[1,6,10,8]\n", "f16", {12, 1, 1, 8},
                                 R"(%y = tessel.Conv(%x, %w) {store = "depth_to_space_nchw", block = 2, mode = "DCR"} : f16[1,3,12,20] @"up")");
  EXPECT_EQ(eng::contraction_of(g, g.nodes[0]).epilogue.str(),
            "store f16 depth_to_space_nchw(block=2, DCR, out=6x10)");
}

// The stem reads the fp32 NCHW input: A is [N, C, H, W] fp32 in the maps, which match() keeps
// off the Tensor Cores (the engine's SIMT fallback).
TEST(EdgeStoreLowering, NchwInputStem) {
  const ir::Graph g = conv_graph("  input %x : f32[1,3,12,20]\n", "f16", {16, 3, 3, 3},
                                 R"(%y = tessel.Conv(%x, %w) {pads = [1, 1, 1, 1], input_layout = "nchw"} : f16[1,12,20,16] @"head")");
  const eng::ContractionSpec s = eng::contraction_of(g, g.nodes[0]);
  EXPECT_EQ(s.maps.a.shape, (Shape{1, 3, 12, 20}));
  EXPECT_EQ(s.maps.a.dtype, DType::kF32);
  EXPECT_EQ(s.maps.b.dtype, DType::kF16);
  const contraction::MatchResult m = contraction::match(s.maps);
  ASSERT_TRUE(m.contraction);
  EXPECT_FALSE(m.tensor_cores);
  EXPECT_EQ(m.contraction->m, 12 * 20);
  EXPECT_EQ(m.contraction->k, 27);
}

// R is given NHWC in the conv's dtype; the kernel would read it at the stored positions: refused
// before an NCHW store. Before another out_dtype it is read in its own (Epilogue::residual_dtype).
TEST(EdgeStoreLowering, ResidualWithAnEdgeStore) {
  const std::string inputs = "  input %x : f16[1,4,4,8]\n  input %r : f16[1,4,4,8]\n";
  const ir::Graph nchw = conv_graph(inputs, "f16", {8, 1, 1, 8},
                                    R"(%y = tessel.Conv(%x, %w, _, %r) {epilogue = ["add_residual"], store = "nchw"} : f16[1,8,4,4] @"c")");
  try {
    eng::contraction_of(nchw, nchw.nodes[0]);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "tessel.Conv 'c': a residual add before a nchw store has no GPU epilogue "
                           "(the kernel reads R in the stored layout)");
  }
  const ir::Graph f32 = conv_graph(inputs, "f16", {8, 1, 1, 8},
                                   R"(%y = tessel.Conv(%x, %w, _, %r) {epilogue = ["add_residual"], out_dtype = "f32"} : f32[1,4,4,8] @"c")");
  const eng::ContractionSpec s = eng::contraction_of(f32, f32.nodes[0]);
  EXPECT_EQ(s.epilogue.out_dtype, DType::kF32);
  ASSERT_TRUE(s.epilogue.residual_dtype);
  EXPECT_EQ(*s.epilogue.residual_dtype, DType::kF16);
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
