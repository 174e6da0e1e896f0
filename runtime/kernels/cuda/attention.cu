// Causal attention, forward and backward, as fused tiled kernels in the
// style of FlashAttention-2 (docs/runtime_cuda_kernels.md).
//
// Every kernel works on 32 x 32 tiles of (query, key) positions with 128
// threads: 4 threads share a tile row and each owns 8 of its columns and a
// quarter of the head dim (d = lane4 + 4j) of the row's accumulators. Tiles
// are staged in shared memory as fp32 with a row stride of head_dim + 1 so
// that the 8 rows a warp touches sit in distinct banks. The math is SIMT
// fp32 (FMA pipes, not tensor cores), for both float and bf16 inputs.
//
// Forward: one block per (query tile, head, batch) walks the key tiles up
// to the diagonal with an online softmax (running max m, sum l) and writes
// out and lse = m + log l. Backward: delta = rowsum(dO * O) is recomputed
// per query tile from out; one kernel per (key tile, kv head, batch) loops
// over the query tiles (and the query heads of its GQA group) and
// accumulates dK and dV in registers; a second kernel per (query tile,
// head, batch) accumulates dQ. Splitting dQ from dK/dV costs one more
// recomputation of the probabilities but needs no atomics, so the result is
// deterministic.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"

namespace loom::runtime::cuda {
namespace {

using detail::fromFloat;
using detail::kFullMask;
using detail::launched;
using detail::toFloat;

constexpr int kTile = 32;
constexpr int kThreads = 128;
constexpr int kLanesPerRow = kThreads / kTile;      // 4
constexpr int kColsPerLane = kTile / kLanesPerRow;  // 8
constexpr int kPadded = kTile + 1;                  // row stride of a score tile

// Sum over the 4 lanes of a tile row (adjacent lanes of one warp).
__device__ __forceinline__ float rowSum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  v += __shfl_xor_sync(kFullMask, v, 2);
  return v;
}
__device__ __forceinline__ float rowMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
  return v;
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// Copies rows [first, first + kTile) of one head (row s at base + s *
// stride) into a padded fp32 tile, zero past `seq`.
template <typename T>
__device__ void loadTile(const T* base, int64_t stride, int64_t first, int64_t seq, int head_dim,
                         float* tile) {
  const int ld = head_dim + 1;
  for (int i = threadIdx.x; i < kTile * head_dim; i += blockDim.x) {
    const int r = i / head_dim;
    const int d = i % head_dim;
    tile[r * ld + d] = first + r < seq ? toFloat(base[(first + r) * stride + d]) : 0.0f;
  }
}

struct Geometry {
  int64_t batch;
  int64_t seq;
  int64_t heads;
  int64_t kv_heads;
  int head_dim;
  int64_t group;      // query heads per kv head
  int64_t q_stride;   // elements between positions in q/out
  int64_t kv_stride;  // elements between positions in k/v
  int tiles;          // ceil(seq / kTile)
  float scale;
};

template <typename T, int kMaxDim>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(const T* q, const T* k, const T* v, T* out, float* lse, Geometry g) {
  extern __shared__ float smem[];
  const int ld = g.head_dim + 1;
  float* s_q = smem;
  float* s_k = s_q + kTile * ld;
  float* s_v = s_k + kTile * ld;
  float* s_p = s_v + kTile * ld;
  // Later query tiles see more keys: start them first.
  const int q_tile = g.tiles - 1 - static_cast<int>(blockIdx.x);
  const int64_t h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = static_cast<int64_t>(q_tile) * kTile;
  const T* q_head = q + b * g.seq * g.q_stride + h * g.head_dim;
  const int64_t kv_offset = b * g.seq * g.kv_stride + (h / g.group) * g.head_dim;
  const int row = threadIdx.x / kLanesPerRow;
  const int lane4 = threadIdx.x % kLanesPerRow;
  const int64_t query = q0 + row;

  loadTile(q_head, g.q_stride, q0, g.seq, g.head_dim, s_q);
  float acc[kMaxDim / kLanesPerRow] = {};
  float m = -INFINITY;
  float l = 0.0f;
  for (int kt = 0; kt <= q_tile; ++kt) {
    const int64_t k0 = static_cast<int64_t>(kt) * kTile;
    __syncthreads();  // the previous tile's readers are done
    loadTile(k + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_k);
    loadTile(v + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_v);
    __syncthreads();
    float s[kColsPerLane];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int c = lane4 + kLanesPerRow * j;
      const int64_t key = k0 + c;
      s[j] = key <= query && key < g.seq ? g.scale * dot(s_q + row * ld, s_k + c * ld, g.head_dim)
                                         : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    // Key k0 <= q0 <= query always lies in the tile, so m_new is finite.
    const float m_new = fmaxf(m, rowMax(tile_max));
    const float correction = expf(m - m_new);
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const float p = expf(s[j] - m_new);
      p_sum += p;
      s_p[row * kPadded + lane4 + kLanesPerRow * j] = p;
    }
    l = l * correction + rowSum(p_sum);
    m = m_new;
    __syncwarp();  // a row's 4 lanes share one warp
#pragma unroll
    for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) acc[j] *= correction;
    for (int c = 0; c < kTile; ++c) {
      const float p = s_p[row * kPadded + c];
      const float* v_row = s_v + c * ld;
#pragma unroll
      for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
        const int d = lane4 + kLanesPerRow * j;
        if (d < g.head_dim) acc[j] += p * v_row[d];
      }
    }
  }
  if (query >= g.seq) return;
  const float inverse = 1.0f / l;
  T* out_row = out + b * g.seq * g.q_stride + query * g.q_stride + h * g.head_dim;
#pragma unroll
  for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
    const int d = lane4 + kLanesPerRow * j;
    if (d < g.head_dim) out_row[d] = fromFloat<T>(acc[j] * inverse);
  }
  if (lse != nullptr && lane4 == 0) lse[(b * g.heads + h) * g.seq + query] = m + logf(l);
}

// delta = sum_d dO[row, d] O[row, d] for the tile row of this thread's
// group of 4 lanes (dO from the shared tile, O from global memory).
template <typename T, int kMaxDim>
__device__ float rowDelta(const float* s_do_row, const T* out_head, int64_t stride, int64_t query,
                          const Geometry& g) {
  float partial = 0.0f;
  if (query < g.seq) {
    const T* o_row = out_head + query * stride;
#pragma unroll
    for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
      const int d = threadIdx.x % kLanesPerRow + kLanesPerRow * j;
      if (d < g.head_dim) partial += s_do_row[d] * toFloat(o_row[d]);
    }
  }
  return rowSum(partial);
}

template <typename T, int kMaxDim>
__global__ void __launch_bounds__(kThreads)
    attentionGradQKernel(const T* q, const T* k, const T* v, const T* out, const T* dout,
                         const float* lse, T* dq, Geometry g) {
  extern __shared__ float smem[];
  const int ld = g.head_dim + 1;
  float* s_q = smem;
  float* s_do = s_q + kTile * ld;
  float* s_k = s_do + kTile * ld;
  float* s_v = s_k + kTile * ld;
  float* s_ds = s_v + kTile * ld;
  const int q_tile = g.tiles - 1 - static_cast<int>(blockIdx.x);
  const int64_t h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = static_cast<int64_t>(q_tile) * kTile;
  const int64_t q_offset = b * g.seq * g.q_stride + h * g.head_dim;
  const int64_t kv_offset = b * g.seq * g.kv_stride + (h / g.group) * g.head_dim;
  const int row = threadIdx.x / kLanesPerRow;
  const int lane4 = threadIdx.x % kLanesPerRow;
  const int64_t query = q0 + row;

  loadTile(q + q_offset, g.q_stride, q0, g.seq, g.head_dim, s_q);
  loadTile(dout + q_offset, g.q_stride, q0, g.seq, g.head_dim, s_do);
  __syncthreads();
  const float delta = rowDelta<T, kMaxDim>(s_do + row * ld, out + q_offset, g.q_stride, query, g);
  const float row_lse = query < g.seq ? lse[(b * g.heads + h) * g.seq + query] : 0.0f;
  float acc[kMaxDim / kLanesPerRow] = {};
  for (int kt = 0; kt <= q_tile; ++kt) {
    const int64_t k0 = static_cast<int64_t>(kt) * kTile;
    __syncthreads();
    loadTile(k + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_k);
    loadTile(v + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_v);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int c = lane4 + kLanesPerRow * j;
      const int64_t key = k0 + c;
      float ds = 0.0f;
      if (key <= query && query < g.seq) {
        const float p = expf(g.scale * dot(s_q + row * ld, s_k + c * ld, g.head_dim) - row_lse);
        const float dp = dot(s_do + row * ld, s_v + c * ld, g.head_dim);
        ds = p * (dp - delta);
      }
      s_ds[row * kPadded + c] = ds;
    }
    __syncwarp();
    for (int c = 0; c < kTile; ++c) {
      const float ds = s_ds[row * kPadded + c];
      const float* k_row = s_k + c * ld;
#pragma unroll
      for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
        const int d = lane4 + kLanesPerRow * j;
        if (d < g.head_dim) acc[j] += ds * k_row[d];
      }
    }
  }
  if (query >= g.seq) return;
  T* dq_row = dq + q_offset + query * g.q_stride;
#pragma unroll
  for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
    const int d = lane4 + kLanesPerRow * j;
    if (d < g.head_dim) dq_row[d] = fromFloat<T>(acc[j] * g.scale);
  }
}

template <typename T, int kMaxDim>
__global__ void __launch_bounds__(kThreads)
    attentionGradKvKernel(const T* q, const T* k, const T* v, const T* out, const T* dout,
                          const float* lse, T* dk, T* dv, Geometry g) {
  extern __shared__ float smem[];
  const int ld = g.head_dim + 1;
  float* s_k = smem;
  float* s_v = s_k + kTile * ld;
  float* s_q = s_v + kTile * ld;
  float* s_do = s_q + kTile * ld;
  float* s_pt = s_do + kTile * ld;        // P^T: [key][query]
  float* s_dst = s_pt + kTile * kPadded;  // dS^T
  float* s_lse = s_dst + kTile * kPadded;
  float* s_delta = s_lse + kTile;
  // Early key tiles are seen by more query tiles: they come first anyway.
  const int k_tile = static_cast<int>(blockIdx.x);
  const int64_t kv_head = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t k0 = static_cast<int64_t>(k_tile) * kTile;
  const int64_t kv_offset = b * g.seq * g.kv_stride + kv_head * g.head_dim;
  const int key_row = threadIdx.x / kLanesPerRow;
  const int lane4 = threadIdx.x % kLanesPerRow;
  const int64_t key = k0 + key_row;

  loadTile(k + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_k);
  loadTile(v + kv_offset, g.kv_stride, k0, g.seq, g.head_dim, s_v);
  float acc_dk[kMaxDim / kLanesPerRow] = {};
  float acc_dv[kMaxDim / kLanesPerRow] = {};
  for (int64_t h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
    const int64_t q_offset = b * g.seq * g.q_stride + h * g.head_dim;
    for (int qt = k_tile; qt < g.tiles; ++qt) {
      const int64_t q0 = static_cast<int64_t>(qt) * kTile;
      __syncthreads();
      loadTile(q + q_offset, g.q_stride, q0, g.seq, g.head_dim, s_q);
      loadTile(dout + q_offset, g.q_stride, q0, g.seq, g.head_dim, s_do);
      __syncthreads();
      {
        // Here the thread's tile row is a query row.
        const int64_t query = q0 + key_row;
        const float delta =
            rowDelta<T, kMaxDim>(s_do + key_row * ld, out + q_offset, g.q_stride, query, g);
        if (lane4 == 0) {
          s_delta[key_row] = delta;
          s_lse[key_row] = query < g.seq ? lse[(b * g.heads + h) * g.seq + query] : 0.0f;
        }
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        const int r = lane4 + kLanesPerRow * j;
        const int64_t query = q0 + r;
        float p = 0.0f;
        float ds = 0.0f;
        if (key <= query && query < g.seq) {
          p = expf(g.scale * dot(s_k + key_row * ld, s_q + r * ld, g.head_dim) - s_lse[r]);
          const float dp = dot(s_v + key_row * ld, s_do + r * ld, g.head_dim);
          ds = p * (dp - s_delta[r]);
        }
        s_pt[key_row * kPadded + r] = p;
        s_dst[key_row * kPadded + r] = ds;
      }
      __syncwarp();
      for (int r = 0; r < kTile; ++r) {
        const float p = s_pt[key_row * kPadded + r];
        const float ds = s_dst[key_row * kPadded + r];
        const float* q_row = s_q + r * ld;
        const float* do_row = s_do + r * ld;
#pragma unroll
        for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
          const int d = lane4 + kLanesPerRow * j;
          if (d < g.head_dim) {
            acc_dv[j] += p * do_row[d];
            acc_dk[j] += ds * q_row[d];
          }
        }
      }
    }
  }
  if (key >= g.seq) return;
  T* dk_row = dk + kv_offset + key * g.kv_stride;
  T* dv_row = dv + kv_offset + key * g.kv_stride;
#pragma unroll
  for (int j = 0; j < kMaxDim / kLanesPerRow; ++j) {
    const int d = lane4 + kLanesPerRow * j;
    if (d < g.head_dim) {
      dk_row[d] = fromFloat<T>(acc_dk[j] * g.scale);
      dv_row[d] = fromFloat<T>(acc_dv[j]);
    }
  }
}

Status checkShape(const char* op, const AttentionShape& shape) {
  if (shape.head_dim < 1 || shape.head_dim > kMaxAttentionHeadDim) {
    return Status::invalidArgument(std::string(op) + ": head_dim " +
                                   std::to_string(shape.head_dim) + " is outside [1, " +
                                   std::to_string(kMaxAttentionHeadDim) +
                                   "]; the fused kernel keeps a row's head_dim in registers");
  }
  if (shape.kv_heads < 1 || shape.heads % shape.kv_heads != 0) {
    return Status::invalidArgument(std::string(op) + ": heads " + std::to_string(shape.heads) +
                                   " is not a multiple of kv_heads " +
                                   std::to_string(shape.kv_heads));
  }
  if (shape.heads > 65535 || shape.batch > 65535) {
    return Status::invalidArgument(std::string(op) + ": heads " + std::to_string(shape.heads) +
                                   " and batch " + std::to_string(shape.batch) +
                                   " must be <= 65535 (grid y and z)");
  }
  return Status();
}

Geometry geometryOf(const AttentionShape& shape) {
  Geometry g;
  g.batch = shape.batch;
  g.seq = shape.seq;
  g.heads = shape.heads;
  g.kv_heads = shape.kv_heads;
  g.head_dim = static_cast<int>(shape.head_dim);
  g.group = shape.heads / shape.kv_heads;
  g.q_stride = shape.heads * shape.head_dim;
  g.kv_stride = shape.kv_heads * shape.head_dim;
  g.tiles = static_cast<int>((shape.seq + kTile - 1) / kTile);
  // As the CPU kernel: 1/sqrt in float.
  g.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  return g;
}

// Dynamic shared memory above 48 KiB must be opted into per kernel.
template <typename Kernel>
Status launchWithSharedMemory(const char* op, Kernel kernel, dim3 grid, size_t shared_bytes,
                              cudaStream_t stream, auto&&... args) {
  if (Status s =
          Status::fromCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                static_cast<int>(shared_bytes)),
                           std::string(op) + ": cudaFuncSetAttribute");
      !s.ok()) {
    return s;
  }
  kernel<<<grid, kThreads, shared_bytes, stream>>>(args...);
  return launched(op);
}

size_t tileBytes(const Geometry& g) {
  return static_cast<size_t>(kTile) * static_cast<size_t>(g.head_dim + 1) * sizeof(float);
}

template <typename T, int kMaxDim>
Status attentionForward(const T* q, const T* k, const T* v, T* out, float* lse, const Geometry& g,
                        cudaStream_t stream) {
  const size_t shared = 3 * tileBytes(g) + kTile * kPadded * sizeof(float);
  const dim3 grid(g.tiles, static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
  return launchWithSharedMemory("attention", attentionForwardKernel<T, kMaxDim>, grid, shared,
                                stream, q, k, v, out, lse, g);
}

template <typename T, int kMaxDim>
Status attentionBackward(const T* q, const T* k, const T* v, const T* out, const T* dout,
                         const float* lse, T* dq, T* dk, T* dv, const Geometry& g,
                         cudaStream_t stream) {
  const size_t kv_shared = 4 * tileBytes(g) + (2 * kTile * kPadded + 2 * kTile) * sizeof(float);
  const dim3 kv_grid(g.tiles, static_cast<unsigned>(g.kv_heads), static_cast<unsigned>(g.batch));
  if (Status s =
          launchWithSharedMemory("attentionGrad (dk, dv)", attentionGradKvKernel<T, kMaxDim>,
                                 kv_grid, kv_shared, stream, q, k, v, out, dout, lse, dk, dv, g);
      !s.ok()) {
    return s;
  }
  const size_t q_shared = 4 * tileBytes(g) + kTile * kPadded * sizeof(float);
  const dim3 q_grid(g.tiles, static_cast<unsigned>(g.heads), static_cast<unsigned>(g.batch));
  return launchWithSharedMemory("attentionGrad (dq)", attentionGradQKernel<T, kMaxDim>, q_grid,
                                q_shared, stream, q, k, v, out, dout, lse, dq, g);
}

}  // namespace

template <typename T>
Status attention(const T* q, const T* k, const T* v, T* out, float* lse,
                 const AttentionShape& shape, cudaStream_t stream) {
  if (Status s = checkShape("attention", shape); !s.ok()) return s;
  const Geometry g = geometryOf(shape);
  // A 64-wide instantiation halves the accumulators of the common head dims.
  return g.head_dim <= 64 ? attentionForward<T, 64>(q, k, v, out, lse, g, stream)
                          : attentionForward<T, 128>(q, k, v, out, lse, g, stream);
}

template <typename T>
Status attentionGrad(const T* q, const T* k, const T* v, const T* out, const T* dout,
                     const float* lse, T* dq, T* dk, T* dv, const AttentionShape& shape,
                     cudaStream_t stream) {
  if (Status s = checkShape("attentionGrad", shape); !s.ok()) return s;
  const Geometry g = geometryOf(shape);
  return g.head_dim <= 64
             ? attentionBackward<T, 64>(q, k, v, out, dout, lse, dq, dk, dv, g, stream)
             : attentionBackward<T, 128>(q, k, v, out, dout, lse, dq, dk, dv, g, stream);
}

#define LOOM_INSTANTIATE_ATTENTION(T)                                                              \
  template Status attention<T>(const T*, const T*, const T*, T*, float*, const AttentionShape&,    \
                               cudaStream_t);                                                      \
  template Status attentionGrad<T>(const T*, const T*, const T*, const T*, const T*, const float*, \
                                   T*, T*, T*, const AttentionShape&, cudaStream_t);

LOOM_INSTANTIATE_ATTENTION(float)
LOOM_INSTANTIATE_ATTENTION(bf16)

#undef LOOM_INSTANTIATE_ATTENTION

}  // namespace loom::runtime::cuda
