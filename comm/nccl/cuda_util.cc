// CUDA error conversion and GPU availability.
#include "comm/nccl/cuda_util.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"

namespace loom::comm::nccl {

absl::Status cudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return backendError(absl::StrCat(std::string(what), ": ", cudaGetErrorName(error), " (",
                                   cudaGetErrorString(error), ")"));
}

std::string cudaUnavailableReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return absl::StrCat("no usable GPU: ", cudaGetErrorString(error));
  if (count == 0) return "no usable GPU: the driver reports 0 devices";
  return "";
}

}  // namespace loom::comm::nccl
