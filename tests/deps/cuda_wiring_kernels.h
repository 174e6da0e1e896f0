// Host-side entry points of the CUDA wiring test's kernels (compiled by nvcc).
#ifndef LOOM_TESTS_DEPS_CUDA_WIRING_KERNELS_H_
#define LOOM_TESTS_DEPS_CUDA_WIRING_KERNELS_H_

#include <cuda_runtime.h>

namespace loom::wiring {

// y[i] = a * x[i] + y[i] for i < n, on device pointers, on `stream`.
cudaError_t launchSaxpy(int n, float a, const float* x, float* y, cudaStream_t stream);

// What the driver loaded for the saxpy kernel: binaryVersion 90 means the
// sm_90 SASS ran, ptxVersion 90 that compute_90 PTX is embedded too.
cudaError_t saxpyAttributes(cudaFuncAttributes* attributes);

}  // namespace loom::wiring

#endif  // LOOM_TESTS_DEPS_CUDA_WIRING_KERNELS_H_
