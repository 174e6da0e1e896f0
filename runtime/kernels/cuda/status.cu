// Status messages and the device probe of the CUDA kernels (cuda_kernels.h).
#include <cublas_api.h>
#include <cuda_runtime.h>

#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime::cuda {

Status Status::fromCuda(cudaError_t error, const std::string& what) {
  Status status;
  if (error == cudaSuccess) return status;
  status.cuda_error_ = error;
  status.message_ = what + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  return status;
}

Status Status::fromCublas(int cublas_status, const std::string& what) {
  Status status;
  if (cublas_status == CUBLAS_STATUS_SUCCESS) return status;
  const auto typed = static_cast<cublasStatus_t>(cublas_status);
  status.cublas_status_ = cublas_status;
  status.message_ =
      what + ": " + cublasGetStatusName(typed) + " (" + cublasGetStatusString(typed) + ")";
  return status;
}

Status Status::invalidArgument(const std::string& message) {
  Status status;
  status.cuda_error_ = cudaErrorInvalidValue;
  status.message_ = message;
  return status;
}

std::string deviceUnavailableReason() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return std::string("no usable GPU: ") + cudaGetErrorString(error);
  }
  if (count == 0) return "no usable GPU: the driver reports 0 devices";
  cudaDeviceProp properties{};
  if (const cudaError_t error = cudaGetDeviceProperties(&properties, 0); error != cudaSuccess) {
    return std::string("no usable GPU: cudaGetDeviceProperties: ") + cudaGetErrorString(error);
  }
  // The library carries sm_90 code and compute_90 PTX (cuda.bzl), which
  // older GPUs cannot run.
  if (properties.major < 9) {
    return std::string("GPU 0 (") + properties.name + ") has compute capability " +
           std::to_string(properties.major) + "." + std::to_string(properties.minor) +
           "; //runtime/kernels/cuda is built for sm_90 and newer";
  }
  return "";
}

}  // namespace loom::runtime::cuda
