// Squared norm and clip coefficient on the device; see cuda_clip.h.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "runtime/executor/cuda_clip.h"

namespace loom::runtime::cuda_clip {
namespace {

constexpr int kThreads = 256;

// One partial sum per block, threads striding over the grid, then a tree
// in shared memory: the order depends only on the launch shape.
__device__ __forceinline__ double widen(float g) { return g; }
__device__ __forceinline__ double widen(__nv_bfloat16 g) { return __bfloat162float(g); }

template <typename T>
__global__ void squaredNormPartials(const T* grads, int64_t count, double* partials) {
  __shared__ double sums[kThreads];
  double sum = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const double g = widen(grads[i]);
    sum += g * g;
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void addPartials(const double* partials, int blocks, int64_t copies, double* total) {
  double sum = 0.0;
  for (int b = 0; b < blocks; ++b) sum += partials[b];
  *total += sum / static_cast<double>(copies);
}

__global__ void coefficientKernel(const double* total, double max_norm, float* coefficient) {
  *coefficient = static_cast<float>(fmin(1.0, max_norm / (sqrt(*total) + 1e-6)));
}

template <typename T>
cudaError_t launchSquaredNorm(const T* grads, int64_t count, int64_t copies, double* scratch,
                              double* total, cudaStream_t stream) {
  squaredNormPartials<<<kSquaredNormBlocks, kThreads, 0, stream>>>(grads, count, scratch);
  addPartials<<<1, 1, 0, stream>>>(scratch, kSquaredNormBlocks, copies, total);
  return cudaGetLastError();
}

}  // namespace

cudaError_t addSquaredNorm(const float* grads, int64_t count, int64_t copies, double* scratch,
                           double* total, cudaStream_t stream) {
  return launchSquaredNorm(grads, count, copies, scratch, total, stream);
}

cudaError_t addSquaredNorm(const __nv_bfloat16* grads, int64_t count, int64_t copies,
                           double* scratch, double* total, cudaStream_t stream) {
  return launchSquaredNorm(grads, count, copies, scratch, total, stream);
}

cudaError_t clipCoefficient(const double* total, double max_norm, float* coefficient,
                            cudaStream_t stream) {
  coefficientKernel<<<1, 1, 0, stream>>>(total, max_norm, coefficient);
  return cudaGetLastError();
}

}  // namespace loom::runtime::cuda_clip
