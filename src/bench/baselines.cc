// cuDNN and cuBLASLt baselines.
#include "bench/baselines.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "bench/library_calls.h"

namespace tessel::bench {
namespace {

namespace rt = device;

void require_device() {
  std::string reason;
  TESSEL_USER_CHECK(rt::cuda_available(&reason)) << "no CUDA device: " << reason;
}

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_FWD_ALGO_COUNT:
      break;
  }
  return "?";
}

// "tensor-op" where the algorithm runs on Tensor Cores.
const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default-math";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor-op-conversion";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "?";
}

// The algorithm search may try workspaces up to this size; larger ones are not worth a
// baseline (tessel's kernels use none or a small split-K buffer).
constexpr size_t kMaxConvWorkspace = size_t{1} << 30;
// The least workspace the search gets. cudnnGetConvolutionForwardWorkspaceSize answers for
// one engine per algorithm, while Find tries several, and a Tensor Core engine may need more
// than the answer: on an H100 with cuDNN 9.14, every 1x1 stride-1 conv whose choice came back
// with 0 B was IMPLICIT_GEMM without Tensor Cores (10-20x slower than PyTorch's cuDNN call),
// while the 1x1 convs given a search workspace chose Tensor Core engines that take a few KiB.
constexpr size_t kMinSearchWorkspace = size_t{64} << 20;

}  // namespace

void check_cudnn(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw LibraryError(std::string("cuDNN call ") + call + " failed: " + cudnnGetErrorString(s));
}

void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw LibraryError(std::string("cuBLASLt call ") + call + " failed: " +
                       cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")");
  }
}

cudnnHandle_t cudnn_handle() {
  static cudnnHandle_t handle = [] {
    require_device();
    cudnnHandle_t h = nullptr;
    TESSEL_CUDNN_CHECK(cudnnCreate(&h));
    return h;
  }();
  return handle;
}

cublasLtHandle_t cublaslt_handle() {
  static cublasLtHandle_t handle = [] {
    require_device();
    cublasLtHandle_t h = nullptr;
    TESSEL_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  }();
  return handle;
}

cublasStatus_t cublaslt_first_algo(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                   cublasLtMatmulHeuristicResult_t* result, int* returned) {
  cublasLtMatmulPreference_t pref = nullptr;
  TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_owner(pref, cublasLtMatmulPreferenceDestroy);
  const size_t max_workspace = kCublasLtWorkspace;
  TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace)));
  *returned = 0;
  return cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), op, a, b, c, c, pref, 1, result, returned);
}

std::string cublaslt_algo_name(const cublasLtMatmulHeuristicResult_t& result) {
  auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&result.algo, attr, &v, sizeof(v), &written);
    return v;
  };
  std::ostringstream name;
  name << "algo " << config(CUBLASLT_ALGO_CONFIG_ID) << " tile "
       << config(CUBLASLT_ALGO_CONFIG_TILE_ID) << " stages "
       << config(CUBLASLT_ALGO_CONFIG_STAGES_ID) << " split-k "
       << static_cast<int32_t>(config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) << ", workspace "
       << result.workspaceSize << " B";
  return name.str();
}

struct CudnnConv::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

  ~Descriptors() {
    // Destroy calls only fail on null or invalid handles, which these are not.
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

CudnnConv::CudnnConv(const ConvWorkload& c, const Operands& operands, int rank)
    : d_(std::make_unique<Descriptors>()) {
  cudnnHandle_t h = cudnn_handle();
  // The handle keeps the stream of the last enqueue, which may be a graph's stream destroyed
  // since; the search runs on the default stream.
  TESSEL_CUDNN_CHECK(cudnnSetStream(h, nullptr));
  auto i = [](int64_t v) { return static_cast<int>(v); };  // the parser bounds them to int
  TESSEL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_->x));
  TESSEL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_->y));
  TESSEL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_->w));
  TESSEL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_->conv));
  // Dimensions are given in NCHW order; the format says how they are laid out in memory.
  TESSEL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, i(c.n),
                                                i(c.ci), i(c.h), i(c.w)));
  // NHWC filters are (k, r, s, c/groups) in memory: the workload's (co, kh, kw, ci/groups).
  TESSEL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d_->w, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, i(c.co),
                                                i(c.ci / c.groups), i(c.kh), i(c.kw)));
  TESSEL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d_->conv, i(c.pad), i(c.pad), i(c.stride),
                                                     i(c.stride), i(c.dilation), i(c.dilation),
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TESSEL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d_->conv, i(c.groups)));
  // Tensor Core math allowed (fp16 data needs no conversion, so ALLOW_CONVERSION would add
  // nothing); the search also measures the algorithms without it.
  TESSEL_CUDNN_CHECK(cudnnSetConvolutionMathType(d_->conv, CUDNN_TENSOR_OP_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  TESSEL_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(d_->conv, d_->x, d_->w, &on, &oc, &oh, &ow));
  TESSEL_ICHECK(on == c.n && oc == c.co && oh == c.oh() && ow == c.ow())
      << c.name << ": cuDNN's output " << on << "x" << oc << "x" << oh << "x" << ow
      << " differs from the workload's " << c.n << "x" << c.co << "x" << c.oh() << "x" << c.ow();
  TESSEL_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d_->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, on, oc, oh, ow));

  // Give the search the workspace that the hungriest algorithm asks for (up to a cap), and
  // never less than kMinSearchWorkspace, so that it measures every engine it can run. What
  // each algorithm asked for goes into the report with what the search measured.
  std::ostringstream search;
  search << "GetWorkspaceSize:";
  size_t search_bytes = kMinSearchWorkspace;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a);
    size_t bytes = 0;
    const cudnnStatus_t st =
        cudnnGetConvolutionForwardWorkspaceSize(h, d_->x, d_->w, d_->conv, d_->y, algo, &bytes);
    search << " " << algo_name(algo) << " ";
    if (st != CUDNN_STATUS_SUCCESS) {
      search << cudnnGetErrorString(st) << ";";
      continue;
    }
    search << bytes << " B;";
    if (bytes <= kMaxConvWorkspace) search_bytes = std::max(search_bytes, bytes);
  }
  rt::DeviceBuffer search_workspace(search_bytes);
  // An algorithm may come back once per math type, so there can be more results than
  // algorithms; asking for fewer than the maximum could cut the list.
  int max_results = 0;
  TESSEL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_results));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(
      std::max<size_t>(static_cast<size_t>(max_results), CUDNN_CONVOLUTION_FWD_ALGO_COUNT));
  int returned = 0;
  TESSEL_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      h, d_->x, reinterpret_cast<void*>(operands.a), d_->w, reinterpret_cast<void*>(operands.b),
      d_->conv, d_->y, reinterpret_cast<void*>(operands.c), static_cast<int>(perf.size()),
      &returned, perf.data(), reinterpret_cast<void*>(search_workspace.ptr()), search_bytes));
  perf.resize(static_cast<size_t>(std::max(returned, 0)));

  // Results come sorted by time, failures last. Every one is kept for the report: when the
  // choice looks wrong, the list says what else cuDNN measured.
  search << " Find with " << search_bytes << " B of workspace:";
  const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
  int usable = 0;
  for (const cudnnConvolutionFwdAlgoPerf_t& p : perf) {
    search << " " << algo_name(p.algo) << " " << math_name(p.mathType);
    if (p.status == CUDNN_STATUS_SUCCESS) {
      search << " " << p.time << " ms " << p.memory << " B;";
      if (p.memory <= search_bytes && usable++ == rank) best = &p;
    } else {
      search << " " << cudnnGetErrorString(p.status) << ";";
    }
  }
  search_ = search.str();
  if (!best) {
    throw LibraryError(rank == 0 ? "cuDNN has no forward algorithm for " + c.name + " (" + c.shape() +
                                       "); " + search_
                                 : "cuDNN's search ran " + std::to_string(usable) +
                                       " algorithm(s) for " + c.name + ", none ranked " +
                                       std::to_string(rank + 1));
  }

  d_->algo = best->algo;
  // The math type the algorithm was measured with is the one it must run with.
  TESSEL_CUDNN_CHECK(cudnnSetConvolutionMathType(d_->conv, best->mathType));
  workspace_ = rt::DeviceBuffer(best->memory);
  std::ostringstream name;
  name << algo_name(best->algo) << " " << math_name(best->mathType) << ", workspace "
       << best->memory << " B";
  algorithm_ = name.str();
}

CudnnConv::~CudnnConv() = default;

void CudnnConv::enqueue(const Operands& o, void* stream) const {
  cudnnHandle_t h = cudnn_handle();
  const float alpha = 1.0f, beta = 0.0f;  // fp32 scaling factors for a float compute type
  TESSEL_CUDNN_CHECK(cudnnSetStream(h, static_cast<cudaStream_t>(stream)));
  TESSEL_CUDNN_CHECK(cudnnConvolutionForward(h, &alpha, d_->x, reinterpret_cast<const void*>(o.a),
                                             d_->w, reinterpret_cast<const void*>(o.b), d_->conv,
                                             d_->algo, reinterpret_cast<void*>(workspace_.ptr()),
                                             workspace_.size(), &beta, d_->y,
                                             reinterpret_cast<void*>(o.c)));
}

struct CublasLtGemm::Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A, B, C
  cublasLtMatmulAlgo_t algo{};

  ~Descriptors() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CublasLtGemm::CublasLtGemm(const GemmWorkload& g) : d_(std::make_unique<Descriptors>()) {
  // cuBLAS is column-major, and a row-major (r, c) matrix is the column-major (c, r) matrix
  // with the same leading dimension, i.e. its transpose. So row-major C = A B is computed as
  // column-major C^T (n, m) = B^T A^T: cuBLAS's A is our B and its B is our A.
  //   our B, NN/TN: stored (k, n) row-major = column-major B^T (n, k), ld n: no transpose.
  //   our B, NT:    stored (n, k) row-major = column-major B (k, n), ld k: transpose.
  //   our A, NN/NT: stored (m, k) row-major = column-major A^T (k, m), ld k: no transpose.
  //   our A, TN:    stored (k, m) row-major = column-major A (m, k), ld m: transpose.
  const bool b_nk = g.layout == GemmLayout::kNT;
  const bool a_km = g.layout == GemmLayout::kTN;
  const cublasOperation_t trans_a = b_nk ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = a_km ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto m = static_cast<uint64_t>(g.m), n = static_cast<uint64_t>(g.n),
             k = static_cast<uint64_t>(g.k);

  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d_->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                     sizeof(trans_a)));
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                     sizeof(trans_b)));
  // Layouts describe the matrices as stored (rows, columns, leading dimension), before op.
  TESSEL_CUBLAS_CHECK(b_nk ? cublasLtMatrixLayoutCreate(&d_->a, CUDA_R_16F, k, n, k)
                           : cublasLtMatrixLayoutCreate(&d_->a, CUDA_R_16F, n, k, n));
  TESSEL_CUBLAS_CHECK(a_km ? cublasLtMatrixLayoutCreate(&d_->b, CUDA_R_16F, m, k, m)
                           : cublasLtMatrixLayoutCreate(&d_->b, CUDA_R_16F, k, m, k));
  TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_->c, CUDA_R_16F, n, m, n));

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  TESSEL_CUBLAS_CHECK(cublaslt_first_algo(d_->op, d_->a, d_->b, d_->c, &result, &returned));
  if (returned == 0) throw LibraryError("cuBLASLt has no algorithm for " + g.name);
  d_->algo = result.algo;
  workspace_ = rt::DeviceBuffer(result.workspaceSize);
  algorithm_ = cublaslt_algo_name(result);
}

CublasLtGemm::~CublasLtGemm() = default;

void CublasLtGemm::enqueue(const Operands& o, void* stream) const {
  const float alpha = 1.0f, beta = 0.0f;  // scale type CUDA_R_32F
  auto ptr = [](uint64_t p) { return reinterpret_cast<void*>(p); };
  TESSEL_CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), d_->op, &alpha, ptr(o.b), d_->a, ptr(o.a),
                                     d_->b, &beta, ptr(o.c), d_->c, ptr(o.c), d_->c, &d_->algo,
                                     ptr(workspace_.ptr()), workspace_.size(),
                                     static_cast<cudaStream_t>(stream)));
}

std::string_view int8_output_name(Int8Output o) {
  switch (o) {
    case Int8Output::kInt8:
      return "int8";
    case Int8Output::kFloat:
      return "fp32";
    case Int8Output::kInt32:
      return "int32";
  }
  return "?";
}

size_t int8_output_bytes(Int8Output o) { return o == Int8Output::kInt8 ? 1 : 4; }

std::string cudnn_version() {
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  std::ostringstream os;
  os << "cuDNN " << v / 10000 << "." << v / 100 % 100 << "." << v % 100;
  return os.str();
}

std::string cublaslt_version() {
  const size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  std::ostringstream os;
  os << "cuBLASLt " << v / 10000 << "." << v / 100 % 100 << "." << v % 100;
  return os.str();
}

}  // namespace tessel::bench
