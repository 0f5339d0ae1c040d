// Library baselines that tessel's kernels are measured against: cuDNN for conv2d, cuBLASLt for
// GEMM, fp16 in and out with fp32 accumulation, and int8 in with int32 accumulation and an int8
// output (int8_reference.h defines what the int8 ones compute). Each is set up once per
// workload (algorithm search, workspace) and then enqueued any number of times on any operands
// of that shape.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bench/workloads.h"
#include "core/error.h"
#include "device/cuda_api.h"

namespace tessel::bench {

// Device addresses of one problem's operands. conv2d: a = x (NHWC), b = w (co,kh,kw,ci/groups),
// c = y (NHWC). GEMM: a = A, b = B, c = C, stored as the workload's layout says (fp16), or
// A (m,k) and B (n,k) row-major (int8). An int8 problem's epilogue constants: for a conv, fp32
// scale and bias per output channel; for a GEMM, scale is one fp32 alpha and bias is 0.
struct Operands {
  uint64_t a = 0, b = 0, c = 0;
  uint64_t scale = 0, bias = 0;
};

// A cuDNN or cuBLASLt call failed (e.g. no algorithm supports the problem). The benchmark
// reports it for the workload and goes on with the next.
class LibraryError : public Error {
 public:
  using Error::Error;
};

// cuDNN's legacy convolution API (cudnnConvolutionForward): NHWC fp16 tensors, fp32 compute,
// Tensor Core math, the algorithm that cudnnFindConvolutionForwardAlgorithmEx measured fastest
// (rank 0), or its rank-th after that. enqueue() sets the stream on cuDNN's handle before the
// call, so it can be captured into a CUDA graph on the capturing stream.
class CudnnConv {
 public:
  // Runs the algorithm search on `operands` (it overwrites operands.c); throws LibraryError
  // where it measured no algorithm of that rank.
  CudnnConv(const ConvWorkload& w, const Operands& operands, int rank = 0);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void enqueue(const Operands& operands, void* stream) const;
  // "IMPLICIT_PRECOMP_GEMM tensor-op, workspace 0 B"
  const std::string& algorithm() const { return algorithm_; }
  // For the report: each algorithm's cudnnGetConvolutionForwardWorkspaceSize, then every
  // result of the search, fastest first: "GetWorkspaceSize: IMPLICIT_GEMM 0 B; ... Find with
  // 67108864 B of workspace: IMPLICIT_PRECOMP_GEMM tensor-op 0.0123 ms 2048 B; ..."
  const std::string& search() const { return search_; }

 private:
  struct Descriptors;  // cuDNN handles, kept out of this header
  std::unique_ptr<Descriptors> d_;
  device::DeviceBuffer workspace_;
  std::string algorithm_, search_;
};

// cuBLASLt matmul: fp16 A, B, C, CUBLAS_COMPUTE_32F, the heuristic's first algorithm with up
// to 32 MiB of workspace. Row-major C = A B is computed as the column-major C^T = B^T A^T.
// enqueue() passes its stream to cublasLtMatmul, so it can be captured into a CUDA graph.
class CublasLtGemm {
 public:
  explicit CublasLtGemm(const GemmWorkload& g);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  void enqueue(const Operands& operands, void* stream) const;
  // "algo 21 tile 18 stages 12 split-k 1"
  const std::string& algorithm() const { return algorithm_; }

 private:
  struct Descriptors;  // cuBLASLt handles
  std::unique_ptr<Descriptors> d_;
  device::DeviceBuffer workspace_;
  std::string algorithm_;
};

// What an int8 baseline writes: the whole epilogue rounded to int8 (what was asked for), or,
// where the library had no engine for that, a part of it in a wider type. The report names it,
// so that a time is never read as something it did not compute.
enum class Int8Output {
  kInt8,   // int8: the epilogue, rounded half to even and saturated
  kFloat,  // fp32: the epilogue before rounding
  kInt32,  // int32: the accumulators, no epilogue
};
std::string_view int8_output_name(Int8Output o);  // "int8", "fp32", "int32"
// Bytes per output element.
size_t int8_output_bytes(Int8Output o);

// Why the cuDNN int8 baseline does not take a conv2d workload, before any GPU work: cuDNN's
// int8 convolutions read NHWC int8 in whole 4-channel vectors, so ci and co must be multiples
// of 4 ("ci=3 is not a multiple of 4 ..."); and only ungrouped convolutions are built here.
// nullopt where it does.
std::optional<std::string> cudnn_int8_refusal(const ConvWorkload& w);

// cuDNN 9's graph API (the backend descriptors; the legacy int8 cudnnConvolutionForward paths
// are deprecated): x int8 NHWC, w int8 (co, kh, kw, ci), compute type INT32, then pointwise
// MUL by the per-channel scale, ADD of the per-channel bias, RELU_FWD, written as int8. Where
// the engine heuristics offer nothing that builds for that graph, it falls back, in order, to
// the same graph with an INT32 virtual accumulator, then to the epilogue written as fp32, then
// to the convolution alone written as int32; output() and variant() say which one runs. Of the
// plans the heuristics order first, up to a few are built and timed on `operands` (c is
// overwritten), and the fastest is kept. enqueue() sets the stream on cuDNN's handle first, so
// it can be captured into a CUDA graph. Throws LibraryError where nothing builds.
class CudnnInt8Conv {
 public:
  CudnnInt8Conv(const ConvWorkload& w, const Operands& operands);
  ~CudnnInt8Conv();
  CudnnInt8Conv(const CudnnInt8Conv&) = delete;
  CudnnInt8Conv& operator=(const CudnnInt8Conv&) = delete;

  void enqueue(const Operands& operands, void* stream) const;
  Int8Output output() const { return output_; }
  // "conv(int8 x, int8 w; int32 acc) -> mul scale -> add bias -> relu -> int8"
  const std::string& variant() const { return variant_; }
  // "engine 3 (runtime-compiled, tensor-core), workspace 0 B"
  const std::string& algorithm() const { return algorithm_; }
  // Every graph tried and every plan built or refused, with their times.
  const std::string& search() const { return search_; }

 private:
  struct Plan;  // cuDNN descriptors, kept out of this header
  std::unique_ptr<Plan> plan_;
  device::DeviceBuffer workspace_;
  Int8Output output_ = Int8Output::kInt8;
  std::string variant_, algorithm_, search_;
};

// Why the cuBLASLt int8 baseline does not take a GEMM workload: its int8 (IMMA) kernels need
// the leading dimensions (k for A and B, n for C) and cuBLAS's m (our n) multiples of 4.
std::optional<std::string> cublaslt_int8_refusal(const GemmWorkload& g);

// cuBLASLt int8 matmul: CUBLAS_COMPUTE_32I, A (m,k) and B (n,k) int8 row-major whatever the
// workload's layout says (cuBLAS's "TN", the one its int8 kernels take: both operands
// K-contiguous), C (m,n) row-major int8, with scale type fp32. Two epilogues:
//  - a scalar alpha: C = saturate(round(alpha * A B^T)) (the GEMM workloads). Where the
//    heuristic has nothing for an int8 C, it falls back to C int32 with scale type int32 and
//    alpha 1 (the accumulators); output() says which;
//  - per column n, the conv epilogue: C = saturate(round(relu(A B^T * scale[n] + bias[n]))),
//    scale as a device alpha vector (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST) and
//    bias through CUBLASLT_EPILOGUE_RELU_BIAS, both read from Operands::scale and ::bias at
//    each enqueue: a 1x1 stride-1 conv run as a GEMM (as_gemm) on the conv's own buffers.
//    No fallback: cuDNN's graph is the conv's other candidate.
class CublasLtInt8Gemm {
 public:
  CublasLtInt8Gemm(const GemmWorkload& g, float alpha);
  struct PerChannel {};
  CublasLtInt8Gemm(const GemmWorkload& g, PerChannel);
  ~CublasLtInt8Gemm();
  CublasLtInt8Gemm(const CublasLtInt8Gemm&) = delete;
  CublasLtInt8Gemm& operator=(const CublasLtInt8Gemm&) = delete;

  void enqueue(const Operands& operands, void* stream) const;
  Int8Output output() const { return output_; }
  // "A (m,k) int8 x B (n,k) int8; int32 acc -> alpha -> int8"
  const std::string& variant() const { return variant_; }
  const std::string& algorithm() const { return algorithm_; }

 private:
  struct Descriptors;  // cuBLASLt handles
  std::unique_ptr<Descriptors> d_;
  device::DeviceBuffer workspace_;
  float alpha_ = 1;
  bool per_channel_ = false;
  Int8Output output_ = Int8Output::kInt8;
  std::string variant_, algorithm_;

  // Sets up the descriptors and the heuristic's algorithm for C of type `out`; false, with the
  // reason added to `tried`, where the heuristic has none.
  bool try_setup(const GemmWorkload& g, Int8Output out, std::string* tried);
};

// Library versions, for the benchmark's report: "cuDNN 9.14.0", "cuBLASLt 13.0.0".
std::string cudnn_version();
std::string cublaslt_version();

}  // namespace tessel::bench
