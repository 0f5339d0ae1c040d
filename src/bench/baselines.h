// Library baselines that tessel's kernels are measured against: cuDNN for conv2d, cuBLASLt for
// GEMM, both fp16 in and out with fp32 accumulation, each set up once per workload (algorithm
// search, workspace) and then enqueued any number of times on any operands of that shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/workloads.h"
#include "core/error.h"
#include "device/cuda_api.h"

namespace tessel::bench {

// Device addresses of one problem's operands. conv2d: a = x (NHWC), b = w (co,kh,kw,ci/groups),
// c = y (NHWC). GEMM: a = A, b = B, c = C, stored as the workload's layout says.
struct Operands {
  uint64_t a = 0, b = 0, c = 0;
};

// A cuDNN or cuBLASLt call failed (e.g. no algorithm supports the problem). The benchmark
// reports it for the workload and goes on with the next.
class LibraryError : public Error {
 public:
  using Error::Error;
};

// cuDNN's legacy convolution API (cudnnConvolutionForward): NHWC fp16 tensors, fp32 compute,
// Tensor Core math, the algorithm that cudnnFindConvolutionForwardAlgorithmEx measured fastest.
// enqueue() sets the stream on cuDNN's handle before the call, so it can be captured into a
// CUDA graph on the capturing stream.
class CudnnConv {
 public:
  // Runs the algorithm search on `operands` (it overwrites operands.c).
  CudnnConv(const ConvWorkload& w, const Operands& operands);
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

// Library versions, for the benchmark's report: "cuDNN 9.14.0", "cuBLASLt 13.0.0".
std::string cudnn_version();
std::string cublaslt_version();

}  // namespace tessel::bench
