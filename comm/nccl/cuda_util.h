// Small CUDA runtime helpers shared by the GPU-facing backends (nccl, and
// mpi's host staging): CUDA errors as absl::Status, and why no GPU can be
// used, so that GPU tests can say why they skip.
#ifndef LOOM_COMM_NCCL_CUDA_UTIL_H_
#define LOOM_COMM_NCCL_CUDA_UTIL_H_

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace loom::comm::nccl {

// OK for cudaSuccess; otherwise a backend error "<what>: <CUDA's message>".
absl::Status cudaStatus(cudaError_t error, std::string_view what);

// Why no GPU can be used here ("no usable GPU: CUDA driver version is
// insufficient for CUDA runtime version"), or "" when one can.
std::string cudaUnavailableReason();

}  // namespace loom::comm::nccl

#endif  // LOOM_COMM_NCCL_CUDA_UTIL_H_
