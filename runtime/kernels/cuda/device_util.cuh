// Helpers shared by the kernel files of //runtime/kernels/cuda: dtype
// conversion, warp and block reductions with a fixed summation order, and the
// launch-status check. Internal to the library.
#ifndef LOOM_RUNTIME_KERNELS_CUDA_DEVICE_UTIL_CUH_
#define LOOM_RUNTIME_KERNELS_CUDA_DEVICE_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime::cuda::detail {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 fromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename V>
__device__ __forceinline__ V warpSum(V v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// Reduces over the whole block (blockDim.x a multiple of 32, at most 1024)
// and returns the result to every thread. `scratch` holds 32 values; the
// trailing barrier lets the caller reuse it at once. The order of the sum
// depends only on blockDim, so results repeat run to run.
template <typename V, typename Op>
__device__ V blockReduce(V v, V* scratch, V identity, Op op) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarpSize;
    v = lane < warps ? scratch[lane] : identity;
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      v = op(v, __shfl_xor_sync(kFullMask, v, offset));
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const V result = scratch[0];
  __syncthreads();
  return result;
}

struct SumOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename V>
__device__ V blockSum(V v, V* scratch) {
  return blockReduce(v, scratch, V(0), SumOp());
}
__device__ inline float blockMax(float v, float* scratch) {
  return blockReduce(v, scratch, -INFINITY, MaxOp());
}

// Threads for a one-block-per-row kernel over rows of n elements: enough to
// cover the row once (rounded to a warp), between 32 and 1024.
inline int rowThreads(int64_t n, int max_threads = 1024) {
  const int64_t warps = (n + kWarpSize - 1) / kWarpSize;
  return static_cast<int>(std::clamp<int64_t>(warps * kWarpSize, kWarpSize, max_threads));
}

// Grid for a grid-stride elementwise kernel of `count` elements: at most
// enough blocks to cover it once, capped so huge tensors loop instead.
constexpr int kElementwiseThreads = 256;
inline unsigned elementwiseBlocks(int64_t count) {
  const int64_t blocks = (count + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

// The status of the launch just made: launch errors (no device, bad
// configuration) are reported now; faults inside the kernel surface later.
inline Status launched(const char* op) {
  return Status::fromCuda(cudaGetLastError(), std::string("launching ") + op);
}

}  // namespace loom::runtime::cuda::detail

#endif  // LOOM_RUNTIME_KERNELS_CUDA_DEVICE_UTIL_CUH_
