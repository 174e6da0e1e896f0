// softmax (+grad) over the last dim, one block per row, and reduce_sum over
// any set of dims. Every reduction has a fixed order, so results repeat.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"

namespace loom::runtime::cuda {
namespace {

using detail::blockMax;
using detail::blockSum;
using detail::fromFloat;
using detail::launched;
using detail::rowThreads;
using detail::toFloat;

template <typename T>
__global__ void softmaxKernel(const T* x, T* y, int64_t n) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) max = fmaxf(max, toFloat(xr[j]));
  max = blockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(toFloat(xr[j]) - max);
  const float inverse = 1.0f / blockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    yr[j] = fromFloat<T>(expf(toFloat(xr[j]) - max) * inverse);
  }
}

template <typename T>
__global__ void softmaxGradKernel(const T* y, const T* dy, T* dx, int64_t n) {
  __shared__ float scratch[32];
  const int64_t base = blockIdx.x * n;
  float weighted = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    weighted += toFloat(dy[base + j]) * toFloat(y[base + j]);
  }
  weighted = blockSum(weighted, scratch);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    dx[base + j] = fromFloat<T>(toFloat(y[base + j]) * (toFloat(dy[base + j]) - weighted));
  }
}

// A row-major index space over some of x's dims, with x's strides, so that
// the flat index i of that space maps to the offset of its element in x.
struct IndexSpace {
  int rank = 0;
  int64_t size[kMaxReduceRank] = {};
  int64_t stride[kMaxReduceRank] = {};
};

__device__ int64_t offsetOf(int64_t index, const IndexSpace& space) {
  int64_t offset = 0;
  for (int d = space.rank - 1; d >= 0; --d) {
    offset += (index % space.size[d]) * space.stride[d];
    index /= space.size[d];
  }
  return offset;
}

// The last dim is reduced: one block per output element, its threads walk
// the reduced elements, consecutive threads on consecutive addresses.
template <typename T>
__global__ void reduceRowsKernel(const T* x, T* out, IndexSpace kept, IndexSpace reduced,
                                 int64_t reduce_count) {
  __shared__ float scratch[32];
  const int64_t base = offsetOf(blockIdx.x, kept);
  float sum = 0.0f;
  for (int64_t r = threadIdx.x; r < reduce_count; r += blockDim.x) {
    sum += toFloat(x[base + offsetOf(r, reduced)]);
  }
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = fromFloat<T>(sum);
}

// The last dim is kept: threadIdx.x walks 32 consecutive outputs (coalesced
// reads), threadIdx.y splits the reduced elements, and the kColumnSplit
// partial sums are then added in order.
constexpr int kColumnSplit = 8;

template <typename T>
__global__ void reduceColumnsKernel(const T* x, T* out, IndexSpace kept, IndexSpace reduced,
                                    int64_t out_count, int64_t reduce_count) {
  __shared__ float partial[kColumnSplit][detail::kWarpSize];
  const int64_t o = blockIdx.x * static_cast<int64_t>(detail::kWarpSize) + threadIdx.x;
  float sum = 0.0f;
  if (o < out_count) {
    const int64_t base = offsetOf(o, kept);
    for (int64_t r = threadIdx.y; r < reduce_count; r += kColumnSplit) {
      sum += toFloat(x[base + offsetOf(r, reduced)]);
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && o < out_count) {
    for (int s = 1; s < kColumnSplit; ++s) sum += partial[s][threadIdx.x];
    out[o] = fromFloat<T>(sum);
  }
}

}  // namespace

template <typename T>
Status softmax(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t stream) {
  softmaxKernel<<<static_cast<unsigned>(rows), rowThreads(n), 0, stream>>>(x, y, n);
  return launched("softmax");
}

template <typename T>
Status softmaxGrad(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, cudaStream_t stream) {
  softmaxGradKernel<<<static_cast<unsigned>(rows), rowThreads(n), 0, stream>>>(y, dy, dx, n);
  return launched("softmaxGrad");
}

template <typename T>
Status reduceSum(const T* x, std::span<const int64_t> shape, std::span<const int64_t> dims, T* out,
                 cudaStream_t stream) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank < 1 || rank > kMaxReduceRank) {
    return Status::invalidArgument("reduceSum: rank " + std::to_string(rank) + " is outside [1, " +
                                   std::to_string(kMaxReduceRank) +
                                   "]; merge adjacent dims that are reduced (or kept) together");
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank || (i > 0 && dims[i] <= dims[i - 1])) {
      return Status::invalidArgument(
          "reduceSum: dims must be strictly increasing and within "
          "rank " +
          std::to_string(rank) + "; got dims[" + std::to_string(i) +
          "] = " + std::to_string(dims[i]));
    }
  }
  IndexSpace kept;
  IndexSpace reduced;
  int64_t out_count = 1;
  int64_t reduce_count = 1;
  int64_t stride = 1;
  bool last_reduced = false;
  // Fill both spaces from the last dim backwards, then reverse them.
  for (int64_t d = rank - 1; d >= 0; --d) {
    bool is_reduced = false;
    for (const int64_t r : dims) is_reduced = is_reduced || r == d;
    IndexSpace& space = is_reduced ? reduced : kept;
    space.size[space.rank] = shape[d];
    space.stride[space.rank] = stride;
    ++space.rank;
    (is_reduced ? reduce_count : out_count) *= shape[d];
    if (d == rank - 1) last_reduced = is_reduced;
    stride *= shape[d];
  }
  for (IndexSpace* space : {&kept, &reduced}) {
    for (int i = 0, j = space->rank - 1; i < j; ++i, --j) {
      std::swap(space->size[i], space->size[j]);
      std::swap(space->stride[i], space->stride[j]);
    }
  }
  if (last_reduced) {
    reduceRowsKernel<<<static_cast<unsigned>(out_count), rowThreads(reduce_count, 256), 0,
                       stream>>>(x, out, kept, reduced, reduce_count);
  } else {
    const auto blocks =
        static_cast<unsigned>((out_count + detail::kWarpSize - 1) / detail::kWarpSize);
    reduceColumnsKernel<<<blocks, dim3(detail::kWarpSize, kColumnSplit), 0, stream>>>(
        x, out, kept, reduced, out_count, reduce_count);
  }
  return launched("reduceSum");
}

#define LOOM_INSTANTIATE_REDUCE(T)                                                               \
  template Status softmax<T>(const T*, T*, int64_t, int64_t, cudaStream_t);                      \
  template Status softmaxGrad<T>(const T*, const T*, T*, int64_t, int64_t, cudaStream_t);        \
  template Status reduceSum<T>(const T*, std::span<const int64_t>, std::span<const int64_t>, T*, \
                               cudaStream_t);

LOOM_INSTANTIATE_REDUCE(float)
LOOM_INSTANTIATE_REDUCE(bf16)

#undef LOOM_INSTANTIATE_REDUCE

}  // namespace loom::runtime::cuda
