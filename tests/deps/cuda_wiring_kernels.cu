// A minimal CUDA kernel so the wiring test covers nvcc, the cuda_library rule
// and the statically linked CUDA runtime.
#include "tests/deps/cuda_wiring_kernels.h"

namespace loom::wiring {
namespace {

__global__ void saxpyKernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

cudaError_t launchSaxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  constexpr int kThreads = 256;
  saxpyKernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(n, a, x, y);
  return cudaGetLastError();
}

cudaError_t saxpyAttributes(cudaFuncAttributes* attributes) {
  return cudaFuncGetAttributes(attributes, saxpyKernel);
}

}  // namespace loom::wiring
