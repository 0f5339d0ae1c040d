// cuBLASLt's int8 GEMM baseline.

#include "bench/baselines.h"
#include "bench/library_calls.h"

namespace tessel::bench {

struct CublasLtInt8Gemm::Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A, B, C
  cublasLtMatmulAlgo_t algo{};

  void reset() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
    op = nullptr, a = b = c = nullptr;
  }
  ~Descriptors() { reset(); }
};

std::optional<std::string> cublaslt_int8_refusal(const GemmWorkload& g) {
  for (const auto& [name, v] : {std::pair{"n", g.n}, std::pair{"k", g.k}}) {
    if (v % 4 != 0) {
      return std::string(name) + "=" + std::to_string(v) +
             " is not a multiple of 4: cuBLASLt's int8 kernels need the leading dimensions (k "
             "of A and B, n of C) and cuBLAS's m (our n) multiples of 4";
    }
  }
  return std::nullopt;
}

CublasLtInt8Gemm::CublasLtInt8Gemm(const GemmWorkload& g, float alpha)
    : d_(std::make_unique<Descriptors>()), alpha_(alpha) {
  if (const std::optional<std::string> why = cublaslt_int8_refusal(g)) throw LibraryError(*why);
  std::string tried;
  // An int8 C with an fp32 alpha first; failing that, the int32 accumulators.
  if (try_setup(g, Int8Output::kInt8, &tried) || try_setup(g, Int8Output::kInt32, &tried)) return;
  throw LibraryError("cuBLASLt has no int8 algorithm for " + g.name + " (" + g.shape() +
                     "): " + tried);
}

CublasLtInt8Gemm::CublasLtInt8Gemm(const GemmWorkload& g, PerChannel)
    : d_(std::make_unique<Descriptors>()), per_channel_(true) {
  if (const std::optional<std::string> why = cublaslt_int8_refusal(g)) throw LibraryError(*why);
  std::string tried;
  if (try_setup(g, Int8Output::kInt8, &tried)) return;
  throw LibraryError(
      "cuBLASLt has no int8 algorithm with a per-channel scale, bias and ReLU "
      "for " +
      g.name + " (" + g.shape() + "): " + tried);
}

bool CublasLtInt8Gemm::try_setup(const GemmWorkload& g, Int8Output out, std::string* tried) {
  // Row-major C (m, n) = A (m, k) B (n, k)^T is, column-major, C^T (n, m) = B A^T with
  //   our B, stored (n, k) row-major = column-major (k, n), ld k: cuBLAS's A, transposed;
  //   our A, stored (m, k) row-major = column-major (k, m), ld k: cuBLAS's B, as it is;
  //   our C, stored (m, n) row-major = column-major (n, m), ld n.
  // So transa = T, transb = N: the "TN" that cuBLASLt's int8 kernels require. cuBLAS's rows
  // are our columns n: its per-row alpha vector and bias are per output channel.
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  const auto m = static_cast<uint64_t>(g.m), n = static_cast<uint64_t>(g.n),
             k = static_cast<uint64_t>(g.k);
  d_->reset();
  const bool int8_out = out == Int8Output::kInt8;
  const cudaDataType_t scale_type = int8_out ? CUDA_R_32F : CUDA_R_32I;
  const cudaDataType_t c_type = int8_out ? CUDA_R_8I : CUDA_R_32I;
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d_->op, CUBLAS_COMPUTE_32I, scale_type));
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                     sizeof(trans_a)));
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                     sizeof(trans_b)));
  if (per_channel_) {
    const cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;  // IMMA with an int8 C: the scale type
    TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_POINTER_MODE,
                                                       &mode, sizeof(mode)));
    TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                       &epilogue, sizeof(epilogue)));
    TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       &bias_type, sizeof(bias_type)));
  }
  TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_->a, CUDA_R_8I, k, n, k));
  TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_->b, CUDA_R_8I, k, m, k));
  TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_->c, c_type, n, m, n));

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s = cublaslt_first_algo(d_->op, d_->a, d_->b, d_->c, &result, &returned);
  if (s != CUBLAS_STATUS_SUCCESS || returned == 0) {
    *tried += std::string(tried->empty() ? "" : "; ") + "no algorithm for an " +
              std::string(int8_output_name(out)) + " C (" +
              (s == CUBLAS_STATUS_SUCCESS ? "none returned" : cublasLtGetStatusName(s)) + ")";
    return false;
  }
  d_->algo = result.algo;
  workspace_ = device::DeviceBuffer(result.workspaceSize);
  output_ = out;
  variant_ = "A (m,k) int8 x B (n,k) int8; int32 acc -> ";
  if (per_channel_)
    variant_ += "* scale[n] -> + bias[n] -> relu -> int8";
  else if (int8_out)
    variant_ += "* alpha -> int8";
  else
    variant_ += "int32 (no algorithm for an int8 C)";
  algorithm_ = cublaslt_algo_name(result);
  return true;
}

CublasLtInt8Gemm::~CublasLtInt8Gemm() = default;

void CublasLtInt8Gemm::enqueue(const Operands& o, void* stream) const {
  auto ptr = [](uint64_t p) { return reinterpret_cast<void*>(p); };
  // alpha and beta have the scale type (fp32 for an int8 C, int32 for an int32 one), and
  // alpha is the device vector of scales with a per-channel epilogue; beta stays on the host.
  const float alpha_f = alpha_, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const bool int8_out = output_ == Int8Output::kInt8;
  const void* alpha = int8_out ? static_cast<const void*>(&alpha_f) : &alpha_i;
  const void* beta = int8_out ? static_cast<const void*>(&beta_f) : &beta_i;
  if (per_channel_) {
    alpha = ptr(o.scale);
    const void* bias = ptr(o.bias);
    TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof(bias)));
  }
  TESSEL_CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), d_->op, alpha, ptr(o.b), d_->a, ptr(o.a),
                                     d_->b, beta, ptr(o.c), d_->c, ptr(o.c), d_->c, &d_->algo,
                                     ptr(workspace_.ptr()), workspace_.size(),
                                     static_cast<cudaStream_t>(stream)));
}

}  // namespace tessel::bench
