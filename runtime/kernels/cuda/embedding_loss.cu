// Embedding lookup and its gradient, cross-entropy (+grad) and the
// vocab-parallel cross-entropy pieces. Row kernels run one block per token;
// token sums of the loss are taken in double by a single block in a fixed
// order, as the CPU kernels do. Logits of type T are read as their fp32
// values; the losses, maxima and statistics are fp32 whatever T is.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"
#include "runtime/kernels/ignore_label.h"

namespace loom::runtime::cuda {
namespace {

using detail::blockMax;
using detail::blockSum;
using detail::fromFloat;
using detail::kFullMask;
using detail::kWarpSize;
using detail::launched;
using detail::rowThreads;
using detail::toFloat;

template <typename T, typename Id>
__global__ void embeddingKernel(const Id* ids, const T* table, T* out, int64_t hidden,
                                int64_t row_begin, int64_t table_rows) {
  const int64_t row = static_cast<int64_t>(ids[blockIdx.x]) - row_begin;
  T* dst = out + blockIdx.x * hidden;
  if (row >= 0 && row < table_rows) {
    const T* src = table + row * hidden;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) dst[j] = src[j];
  } else {
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) dst[j] = fromFloat<T>(0.0f);
  }
}

// Each block owns kGradRowsPerBlock table rows. It scans all ids in token
// order, compacts the tokens that land in its rows (order kept) and adds
// their dy rows, so every element is summed in token order without atomics:
// the result is deterministic and equals the CPU kernel's. Scanning the ids
// once per block costs tokens * table_rows / kGradRowsPerBlock id reads,
// which stay in L2.
constexpr int64_t kGradRowsPerBlock = 64;
constexpr int kGradThreads = 256;

template <typename T, typename Id>
__global__ void embeddingGradKernel(const Id* ids, const T* dy, float* dtable, int64_t tokens,
                                    int64_t hidden, int64_t row_begin, int64_t table_rows) {
  __shared__ int64_t matched[kGradThreads];
  __shared__ int warp_counts[kGradThreads / kWarpSize];
  const int64_t first_row = blockIdx.x * kGradRowsPerBlock;
  const int64_t my_rows = min(kGradRowsPerBlock, table_rows - first_row);
  float* my_table = dtable + first_row * hidden;
  for (int64_t i = threadIdx.x; i < my_rows * hidden; i += blockDim.x) my_table[i] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  for (int64_t chunk = 0; chunk < tokens; chunk += kGradThreads) {
    const int64_t t = chunk + threadIdx.x;
    const int64_t row = t < tokens ? static_cast<int64_t>(ids[t]) - row_begin - first_row : -1;
    const bool mine = row >= 0 && row < my_rows;
    const unsigned ballot = __ballot_sync(kFullMask, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0;
    int count = 0;
    for (int w = 0; w < kGradThreads / kWarpSize; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      count += warp_counts[w];
    }
    if (mine) matched[before + __popc(ballot & ((1u << lane) - 1u))] = t;
    __syncthreads();
    for (int m = 0; m < count; ++m) {
      const int64_t token = matched[m];
      const int64_t local_row = static_cast<int64_t>(ids[token]) - row_begin - first_row;
      const T* src = dy + token * hidden;
      float* dst = my_table + local_row * hidden;
      for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) dst[j] += toFloat(src[j]);
    }
    __syncthreads();
  }
}

// One block per token: (double) logsumexp(row) - row[label], with the
// logsumexp in float as the CPU's softmaxRow.
template <typename T, typename Label>
__global__ void crossEntropyRowsKernel(const T* logits, const Label* labels, double* losses,
                                       int64_t vocab) {
  __shared__ float scratch[32];
  // An ignored token adds 0 (the branch is uniform over the block).
  if (static_cast<int64_t>(labels[blockIdx.x]) == kIgnoreLabel) {
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.0;
    return;
  }
  const T* row = logits + blockIdx.x * vocab;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) max = fmaxf(max, toFloat(row[j]));
  max = blockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(toFloat(row[j]) - max);
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) {
    const float lse = max + logf(sum);
    losses[blockIdx.x] =
        static_cast<double>(lse) -
        static_cast<double>(toFloat(row[static_cast<int64_t>(labels[blockIdx.x])]));
  }
}

// *loss = mean of the per-token values; one block, fixed order.
constexpr int kMeanThreads = 1024;

__global__ void meanKernel(const double* values, float* loss, int64_t count) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += values[i];
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(count));
}

__global__ void vocabMeanKernel(const float* stats, float* loss, int64_t tokens) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    if (isinf(stats[2 * t + 1])) continue;  // an ignored token
    sum += log(static_cast<double>(stats[2 * t])) - static_cast<double>(stats[2 * t + 1]);
  }
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(tokens));
}

// dlogits = (softmax - onehot) * factor, each element rounded once to T.
template <typename T, typename Label>
__global__ void crossEntropyGradKernel(const T* logits, const Label* labels, float factor,
                                       T* dlogits, int64_t vocab) {
  __shared__ float scratch[32];
  const T* row = logits + blockIdx.x * vocab;
  T* out = dlogits + blockIdx.x * vocab;
  const auto label = static_cast<int64_t>(labels[blockIdx.x]);
  if (label == kIgnoreLabel) {
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) out[j] = fromFloat<T>(0.0f);
    return;
  }
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) max = fmaxf(max, toFloat(row[j]));
  max = blockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(toFloat(row[j]) - max);
  const float inverse = 1.0f / blockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    float p = expf(toFloat(row[j]) - max) * inverse;
    if (j == label) p -= 1.0f;
    out[j] = fromFloat<T>(p * factor);
  }
}

template <typename T>
__global__ void vocabMaxKernel(const T* logits, float* max, int64_t local, int64_t valid) {
  __shared__ float scratch[32];
  const T* row = logits + blockIdx.x * local;
  float m = -INFINITY;
  for (int64_t r = threadIdx.x; r < valid; r += blockDim.x) m = fmaxf(m, toFloat(row[r]));
  m = blockMax(m, scratch);
  if (threadIdx.x == 0) max[blockIdx.x] = m;
}

// The exponentials and their sum in double, as the CPU kernel.
template <typename T>
__global__ void vocabStatsKernel(const T* logits, const int32_t* labels, const float* max,
                                 float* stats, int64_t local, int64_t valid, int64_t row_begin) {
  __shared__ double scratch[32];
  const T* row = logits + blockIdx.x * local;
  const auto m = static_cast<double>(max[blockIdx.x]);
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < valid; r += blockDim.x) {
    sum += exp(static_cast<double>(toFloat(row[r])) - m);
  }
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) {
    const int64_t label = static_cast<int64_t>(labels[blockIdx.x]) - row_begin;
    stats[2 * blockIdx.x] = static_cast<float>(sum);
    // An ignored token's +inf survives the sum over vocabulary shards.
    stats[2 * blockIdx.x + 1] = labels[blockIdx.x] == kIgnoreLabel ? INFINITY
                                : label >= 0 && label < valid
                                    ? toFloat(row[label]) - max[blockIdx.x]
                                    : 0.0f;
  }
}

template <typename T>
__global__ void vocabCrossEntropyGradKernel(const T* logits, const int32_t* labels,
                                            const float* max, const float* stats, float factor,
                                            T* dlogits, int64_t local, int64_t valid,
                                            int64_t row_begin) {
  const T* row = logits + blockIdx.x * local;
  T* out = dlogits + blockIdx.x * local;
  const float m = max[blockIdx.x];
  const float inverse = 1.0f / stats[2 * blockIdx.x];
  const int64_t label = static_cast<int64_t>(labels[blockIdx.x]) - row_begin;
  const bool ignored = labels[blockIdx.x] == kIgnoreLabel;
  for (int64_t r = threadIdx.x; r < local; r += blockDim.x) {
    float g = 0.0f;
    if (r < valid && !ignored) {
      g = expf(toFloat(row[r]) - m) * inverse * factor;
      if (r == label) g -= factor;
    }
    out[r] = fromFloat<T>(g);
  }
}

}  // namespace

template <typename T, typename Id>
Status embedding(const Id* ids, const T* table, T* out, int64_t tokens, int64_t hidden,
                 int64_t row_begin, int64_t table_rows, cudaStream_t stream) {
  embeddingKernel<<<static_cast<unsigned>(tokens), rowThreads(hidden, 256), 0, stream>>>(
      ids, table, out, hidden, row_begin, table_rows);
  return launched("embedding");
}

template <typename T, typename Id>
Status embeddingGrad(const Id* ids, const T* dy, float* dtable, int64_t tokens, int64_t hidden,
                     int64_t row_begin, int64_t table_rows, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>((table_rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock);
  embeddingGradKernel<<<blocks, kGradThreads, 0, stream>>>(ids, dy, dtable, tokens, hidden,
                                                           row_begin, table_rows);
  return launched("embeddingGrad");
}

size_t crossEntropyWorkspaceBytes(int64_t tokens) {
  return static_cast<size_t>(tokens) * sizeof(double);
}

template <typename T, typename Label>
Status crossEntropy(const T* logits, const Label* labels, float* loss, int64_t tokens,
                    int64_t vocab, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (workspace_bytes < crossEntropyWorkspaceBytes(tokens)) {
    return Status::invalidArgument("crossEntropy: workspace of " + std::to_string(workspace_bytes) +
                                   " bytes, needs " +
                                   std::to_string(crossEntropyWorkspaceBytes(tokens)) +
                                   "; size it with crossEntropyWorkspaceBytes(tokens)");
  }
  auto* losses = static_cast<double*>(workspace);
  crossEntropyRowsKernel<<<static_cast<unsigned>(tokens), rowThreads(vocab), 0, stream>>>(
      logits, labels, losses, vocab);
  if (Status s = launched("crossEntropy"); !s.ok()) return s;
  meanKernel<<<1, kMeanThreads, 0, stream>>>(losses, loss, tokens);
  return launched("crossEntropy (mean)");
}

template <typename T, typename Label>
Status crossEntropyGrad(const T* logits, const Label* labels, float dloss, float scale, T* dlogits,
                        int64_t tokens, int64_t vocab, cudaStream_t stream) {
  crossEntropyGradKernel<<<static_cast<unsigned>(tokens), rowThreads(vocab), 0, stream>>>(
      logits, labels, dloss * scale, dlogits, vocab);
  return launched("crossEntropyGrad");
}

template <typename T>
Status vocabMax(const T* logits, float* max, int64_t tokens, int64_t local, int64_t valid,
                cudaStream_t stream) {
  vocabMaxKernel<<<static_cast<unsigned>(tokens), rowThreads(valid), 0, stream>>>(logits, max,
                                                                                  local, valid);
  return launched("vocabMax");
}

template <typename T>
Status vocabStats(const T* logits, const int32_t* labels, const float* max, float* stats,
                  int64_t tokens, int64_t local, int64_t valid, int64_t row_begin,
                  cudaStream_t stream) {
  vocabStatsKernel<<<static_cast<unsigned>(tokens), rowThreads(valid), 0, stream>>>(
      logits, labels, max, stats, local, valid, row_begin);
  return launched("vocabStats");
}

Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens, cudaStream_t stream) {
  vocabMeanKernel<<<1, kMeanThreads, 0, stream>>>(stats, loss, tokens);
  return launched("vocabCrossEntropy");
}

template <typename T>
Status vocabCrossEntropyGrad(const T* logits, const int32_t* labels, const float* max,
                             const float* stats, float dloss, float scale, T* dlogits,
                             int64_t tokens, int64_t local, int64_t valid, int64_t row_begin,
                             cudaStream_t stream) {
  vocabCrossEntropyGradKernel<<<static_cast<unsigned>(tokens), rowThreads(local), 0, stream>>>(
      logits, labels, max, stats, dloss * scale, dlogits, local, valid, row_begin);
  return launched("vocabCrossEntropyGrad");
}

#define LOOM_INSTANTIATE_EMBEDDING(T, Id)                                                       \
  template Status embedding<T, Id>(const Id*, const T*, T*, int64_t, int64_t, int64_t, int64_t, \
                                   cudaStream_t);                                               \
  template Status embeddingGrad<T, Id>(const Id*, const T*, float*, int64_t, int64_t, int64_t,  \
                                       int64_t, cudaStream_t);

LOOM_INSTANTIATE_EMBEDDING(float, int32_t)
LOOM_INSTANTIATE_EMBEDDING(float, int64_t)
LOOM_INSTANTIATE_EMBEDDING(bf16, int32_t)
LOOM_INSTANTIATE_EMBEDDING(bf16, int64_t)

#define LOOM_INSTANTIATE_LOSS(T, Label)                                                           \
  template Status crossEntropy<T, Label>(const T*, const Label*, float*, int64_t, int64_t, void*, \
                                         size_t, cudaStream_t);                                   \
  template Status crossEntropyGrad<T, Label>(const T*, const Label*, float, float, T*, int64_t,   \
                                             int64_t, cudaStream_t);

LOOM_INSTANTIATE_LOSS(float, int32_t)
LOOM_INSTANTIATE_LOSS(float, int64_t)
LOOM_INSTANTIATE_LOSS(bf16, int32_t)
LOOM_INSTANTIATE_LOSS(bf16, int64_t)

#define LOOM_INSTANTIATE_VOCAB(T)                                                                 \
  template Status vocabMax<T>(const T*, float*, int64_t, int64_t, int64_t, cudaStream_t);         \
  template Status vocabStats<T>(const T*, const int32_t*, const float*, float*, int64_t, int64_t, \
                                int64_t, int64_t, cudaStream_t);                                  \
  template Status vocabCrossEntropyGrad<T>(const T*, const int32_t*, const float*, const float*,  \
                                           float, float, T*, int64_t, int64_t, int64_t, int64_t,  \
                                           cudaStream_t);

LOOM_INSTANTIATE_VOCAB(float)
LOOM_INSTANTIATE_VOCAB(bf16)

#undef LOOM_INSTANTIATE_EMBEDDING
#undef LOOM_INSTANTIATE_LOSS
#undef LOOM_INSTANTIATE_VOCAB

}  // namespace loom::runtime::cuda
