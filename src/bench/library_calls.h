// What the baselines' files share about calling cuDNN and cuBLASLt: the one handle per library
// and process, and status checks that turn a failed call into a LibraryError naming the call.
// Internal to src/bench/.
#pragma once

#include <string>

#include <cublasLt.h>
#include <cudnn.h>

#include <cstddef>

namespace tessel::bench {

// Created on first use (a UserError "no CUDA device: ..." where there is none), never
// destroyed: creating one costs tens of milliseconds, and destroying it during static
// destruction races the driver's shutdown. Both libraries go through the CUDA runtime, which
// uses the device's primary context, the same one tessel's runtime retains, so buffers pass
// between them freely.
cudnnHandle_t cudnn_handle();
cublasLtHandle_t cublaslt_handle();

// cuBLASLt's first heuristic algorithm for `op` on layouts a, b, c (c also as D) with up to
// kCublasLtWorkspace bytes of workspace: the status of the query, and *returned (0 or 1).
inline constexpr size_t kCublasLtWorkspace = size_t{32} << 20;
cublasStatus_t cublaslt_first_algo(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                   cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                   cublasLtMatmulHeuristicResult_t* result, int* returned);

// "algo 21 tile 18 stages 12 split-k 1, workspace 0 B": a heuristic result, for the reports.
std::string cublaslt_algo_name(const cublasLtMatmulHeuristicResult_t& result);

// Throw LibraryError "cuDNN call <call> failed: <status>" or "cuBLASLt call <call> failed:
// <name> (<text>)".
void check_cudnn(cudnnStatus_t status, const char* call);
void check_cublas(cublasStatus_t status, const char* call);

}  // namespace tessel::bench

#define TESSEL_CUDNN_CHECK(call) ::tessel::bench::check_cudnn((call), #call)
#define TESSEL_CUBLAS_CHECK(call) ::tessel::bench::check_cublas((call), #call)
