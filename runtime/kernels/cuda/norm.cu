// rms_norm and layer_norm, forward and backward. The forwards run one block
// per row: a block reduction gives the row's statistics, then the block
// writes the row. The backwards run a fixed grid of blocks that stride over
// the rows; each block writes dx rows and accumulates its dgamma (dbeta)
// partial sums in its own workspace row, and a second kernel adds the
// partials column by column in a fixed order, so results are deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"

namespace loom::runtime::cuda {
namespace {

using detail::blockSum;
using detail::fromFloat;
using detail::launched;
using detail::rowThreads;
using detail::toFloat;

// Blocks of the backward kernels (one partial row each). Fixed, so that the
// summation order does not depend on the device.
constexpr int64_t kMaxGradBlocks = 256;

int64_t gradBlocks(int64_t rows) { return std::min(rows, kMaxGradBlocks); }

template <typename T>
__global__ void rmsNormKernel(const T* x, const T* gamma, T* y, int64_t hidden, float epsilon) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * hidden;
  T* yr = y + blockIdx.x * hidden;
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float v = toFloat(xr[j]);
    squares += v * v;
  }
  squares = blockSum(squares, scratch);
  const float scale = 1.0f / sqrtf(squares / static_cast<float>(hidden) + epsilon);
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    yr[j] = fromFloat<T>(toFloat(xr[j]) * scale * toFloat(gamma[j]));
  }
}

template <typename T>
__global__ void rmsNormGradKernel(const T* x, const T* gamma, const T* dy, T* dx, float* partial,
                                  int64_t rows, int64_t hidden, float epsilon) {
  __shared__ float scratch[32];
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  // Only this thread touches its columns of the partial row.
  float* dgamma = partial + blockIdx.x * hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) dgamma[j] = 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * hidden;
    const T* dyr = dy + r * hidden;
    T* dxr = dx + r * hidden;
    float squares = 0.0f;
    float g_x = 0.0f;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float v = toFloat(xr[j]);
      squares += v * v;
      g_x += toFloat(dyr[j]) * toFloat(gamma[j]) * v;
    }
    squares = blockSum(squares, scratch);
    g_x = blockSum(g_x, scratch);
    const float scale = 1.0f / sqrtf(squares * inverse_n + epsilon);
    // mean(g xhat) with g = dy gamma, xhat = x scale.
    const float mean_g_xhat = g_x * scale * inverse_n;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float dyj = toFloat(dyr[j]);
      const float xhat = toFloat(xr[j]) * scale;
      dxr[j] = fromFloat<T>(scale * (dyj * toFloat(gamma[j]) - xhat * mean_g_xhat));
      dgamma[j] += dyj * xhat;
    }
  }
}

// A row's mean and 1 / sqrt(biased variance + epsilon), by the whole block.
// Two passes (mean, then squared deviations) avoid E[x^2] - E[x]^2's
// cancellation; the second read hits the cache.
template <typename T>
__device__ void rowMeanAndScale(const T* xr, int64_t hidden, float epsilon, float* scratch,
                                float* mean, float* scale) {
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) sum += toFloat(xr[j]);
  *mean = blockSum(sum, scratch) * inverse_n;
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float d = toFloat(xr[j]) - *mean;
    squares += d * d;
  }
  *scale = 1.0f / sqrtf(blockSum(squares, scratch) * inverse_n + epsilon);
}

template <typename T>
__global__ void layerNormKernel(const T* x, const T* gamma, const T* beta, T* y, int64_t hidden,
                                float epsilon) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * hidden;
  T* yr = y + blockIdx.x * hidden;
  float mean, scale;
  rowMeanAndScale(xr, hidden, epsilon, scratch, &mean, &scale);
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    yr[j] = fromFloat<T>((toFloat(xr[j]) - mean) * scale * toFloat(gamma[j]) + toFloat(beta[j]));
  }
}

template <typename T>
__global__ void layerNormGradKernel(const T* x, const T* gamma, const T* dy, T* dx, float* partial,
                                    int64_t rows, int64_t hidden, float epsilon) {
  __shared__ float scratch[32];
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  float* dgamma = partial + blockIdx.x * hidden;
  float* dbeta = partial + (gridDim.x + blockIdx.x) * hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    dgamma[j] = 0.0f;
    dbeta[j] = 0.0f;
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * hidden;
    const T* dyr = dy + r * hidden;
    T* dxr = dx + r * hidden;
    float mean, scale;
    rowMeanAndScale(xr, hidden, epsilon, scratch, &mean, &scale);
    float g_sum = 0.0f;
    float g_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float g = toFloat(dyr[j]) * toFloat(gamma[j]);
      g_sum += g;
      g_xhat += g * (toFloat(xr[j]) - mean) * scale;
    }
    const float mean_g = blockSum(g_sum, scratch) * inverse_n;
    const float mean_g_xhat = blockSum(g_xhat, scratch) * inverse_n;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float dyj = toFloat(dyr[j]);
      const float xhat = (toFloat(xr[j]) - mean) * scale;
      dxr[j] = fromFloat<T>(scale * (dyj * toFloat(gamma[j]) - mean_g - xhat * mean_g_xhat));
      dgamma[j] += dyj * xhat;
      dbeta[j] += dyj;
    }
  }
}

// out[j] = sum over b of partial[b, j], b in order.
__global__ void sumPartialsKernel(const float* partial, float* out, int64_t blocks,
                                  int64_t hidden) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= hidden) return;
  float sum = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) sum += partial[b * hidden + j];
  out[j] = sum;
}

Status sumPartials(const char* op, const float* partial, float* out, int64_t blocks, int64_t hidden,
                   cudaStream_t stream) {
  constexpr int kThreads = 256;
  sumPartialsKernel<<<static_cast<unsigned>((hidden + kThreads - 1) / kThreads), kThreads, 0,
                      stream>>>(partial, out, blocks, hidden);
  return launched(op);
}

Status checkWorkspace(const char* op, size_t have, size_t need) {
  if (have >= need) return Status();
  return Status::invalidArgument(std::string(op) + ": workspace of " + std::to_string(have) +
                                 " bytes, needs " + std::to_string(need) + "; size it with " + op +
                                 "WorkspaceBytes(rows, hidden)");
}

}  // namespace

size_t rmsNormGradWorkspaceBytes(int64_t rows, int64_t hidden) {
  return static_cast<size_t>(gradBlocks(rows) * hidden) * sizeof(float);
}

size_t layerNormGradWorkspaceBytes(int64_t rows, int64_t hidden) {
  return 2 * static_cast<size_t>(gradBlocks(rows) * hidden) * sizeof(float);
}

template <typename T>
Status rmsNorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t hidden, float epsilon,
               cudaStream_t stream) {
  rmsNormKernel<<<static_cast<unsigned>(rows), rowThreads(hidden), 0, stream>>>(x, gamma, y, hidden,
                                                                                epsilon);
  return launched("rmsNorm");
}

template <typename T>
Status rmsNormGrad(const T* x, const T* gamma, const T* dy, T* dx, float* dgamma, int64_t rows,
                   int64_t hidden, float epsilon, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
  if (Status s =
          checkWorkspace("rmsNormGrad", workspace_bytes, rmsNormGradWorkspaceBytes(rows, hidden));
      !s.ok()) {
    return s;
  }
  const int64_t blocks = gradBlocks(rows);
  auto* partial = static_cast<float*>(workspace);
  rmsNormGradKernel<<<static_cast<unsigned>(blocks), rowThreads(hidden), 0, stream>>>(
      x, gamma, dy, dx, partial, rows, hidden, epsilon);
  if (Status s = launched("rmsNormGrad"); !s.ok()) return s;
  return sumPartials("rmsNormGrad (dgamma)", partial, dgamma, blocks, hidden, stream);
}

template <typename T>
Status layerNorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t hidden,
                 float epsilon, cudaStream_t stream) {
  layerNormKernel<<<static_cast<unsigned>(rows), rowThreads(hidden), 0, stream>>>(x, gamma, beta, y,
                                                                                  hidden, epsilon);
  return launched("layerNorm");
}

template <typename T>
Status layerNormGrad(const T* x, const T* gamma, const T* dy, T* dx, float* dgamma, float* dbeta,
                     int64_t rows, int64_t hidden, float epsilon, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = checkWorkspace("layerNormGrad", workspace_bytes,
                                layerNormGradWorkspaceBytes(rows, hidden));
      !s.ok()) {
    return s;
  }
  const int64_t blocks = gradBlocks(rows);
  auto* partial = static_cast<float*>(workspace);
  layerNormGradKernel<<<static_cast<unsigned>(blocks), rowThreads(hidden), 0, stream>>>(
      x, gamma, dy, dx, partial, rows, hidden, epsilon);
  if (Status s = launched("layerNormGrad"); !s.ok()) return s;
  if (Status s = sumPartials("layerNormGrad (dgamma)", partial, dgamma, blocks, hidden, stream);
      !s.ok()) {
    return s;
  }
  return sumPartials("layerNormGrad (dbeta)", partial + blocks * hidden, dbeta, blocks, hidden,
                     stream);
}

#define LOOM_INSTANTIATE_NORM(T)                                                              \
  template Status rmsNorm<T>(const T*, const T*, T*, int64_t, int64_t, float, cudaStream_t);  \
  template Status rmsNormGrad<T>(const T*, const T*, const T*, T*, float*, int64_t, int64_t,  \
                                 float, void*, size_t, cudaStream_t);                         \
  template Status layerNorm<T>(const T*, const T*, const T*, T*, int64_t, int64_t, float,     \
                               cudaStream_t);                                                 \
  template Status layerNormGrad<T>(const T*, const T*, const T*, T*, float*, float*, int64_t, \
                                   int64_t, float, void*, size_t, cudaStream_t);

LOOM_INSTANTIATE_NORM(float)
LOOM_INSTANTIATE_NORM(bf16)

#undef LOOM_INSTANTIATE_NORM

}  // namespace loom::runtime::cuda
