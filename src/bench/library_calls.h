// What the baselines' files share about calling cuDNN and cuBLASLt: the one handle per library
// and process, and status checks that turn a failed call into a LibraryError naming the call.
// Internal to src/bench/.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

namespace tessel::bench {

// Created on first use (a UserError "no CUDA device: ..." where there is none), never
// destroyed: creating one costs tens of milliseconds, and destroying it during static
// destruction races the driver's shutdown. Both libraries go through the CUDA runtime, which
// uses the device's primary context, the same one tessel's runtime retains, so buffers pass
// between them freely.
cudnnHandle_t cudnn_handle();
cublasLtHandle_t cublaslt_handle();

// Throw LibraryError "cuDNN call <call> failed: <status>" or "cuBLASLt call <call> failed:
// <name> (<text>)".
void check_cudnn(cudnnStatus_t status, const char* call);
void check_cublas(cublasStatus_t status, const char* call);

}  // namespace tessel::bench

#define TESSEL_CUDNN_CHECK(call) ::tessel::bench::check_cudnn((call), #call)
#define TESSEL_CUBLAS_CHECK(call) ::tessel::bench::check_cublas((call), #call)
