// The mixed-precision moves: dtype conversion and the chunk sums that finish
// a reduction accumulated wider than its wire type. Both are grid-stride
// loops; every element is rounded once, to nearest even.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"

namespace loom::runtime::cuda {
namespace {

using detail::elementwiseBlocks;
using detail::fromFloat;
using detail::kElementwiseThreads;
using detail::launched;
using detail::toFloat;

template <typename TIn, typename TOut>
__global__ void convertKernel(const TIn* src, TOut* dst, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = fromFloat<TOut>(toFloat(src[i]));
  }
}

// Chunk 0 starts the sum (as the CPU's, so a lone -0 stays -0); the adds and
// the division are the round-to-nearest intrinsics, in chunk order.
template <typename TIn, typename TOut>
__global__ void sumChunksKernel(const TIn* src, int64_t chunks, int64_t count, bool average,
                                TOut* dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = toFloat(src[i]);
    for (int64_t c = 1; c < chunks; ++c) sum = __fadd_rn(sum, toFloat(src[c * count + i]));
    if (average) sum = __fdiv_rn(sum, static_cast<float>(chunks));
    dst[i] = fromFloat<TOut>(sum);
  }
}

}  // namespace

template <typename TIn, typename TOut>
Status convert(const TIn* src, TOut* dst, int64_t count, cudaStream_t stream) {
  if (count <= 0) return Status();
  convertKernel<<<elementwiseBlocks(count), kElementwiseThreads, 0, stream>>>(src, dst, count);
  return launched("convert");
}

template <typename TIn, typename TOut>
Status sumChunks(const TIn* src, int64_t chunks, int64_t count, bool average, TOut* dst,
                 cudaStream_t stream) {
  if (chunks < 1) {
    return Status::invalidArgument("sumChunks: " + std::to_string(chunks) +
                                   " chunks; a sum needs at least one");
  }
  if (count <= 0) return Status();
  sumChunksKernel<<<elementwiseBlocks(count), kElementwiseThreads, 0, stream>>>(src, chunks, count,
                                                                                average, dst);
  return launched("sumChunks");
}

#define LOOM_INSTANTIATE_PRECISION(TIn, TOut)                                   \
  template Status convert<TIn, TOut>(const TIn*, TOut*, int64_t, cudaStream_t); \
  template Status sumChunks<TIn, TOut>(const TIn*, int64_t, int64_t, bool, TOut*, cudaStream_t);

LOOM_INSTANTIATE_PRECISION(float, float)
LOOM_INSTANTIATE_PRECISION(float, bf16)
LOOM_INSTANTIATE_PRECISION(bf16, float)
LOOM_INSTANTIATE_PRECISION(bf16, bf16)

#undef LOOM_INSTANTIATE_PRECISION

}  // namespace loom::runtime::cuda
