// CUDA kernels for every `nn` op, forward and backward, with the semantics of
// the CPU kernels in runtime/kernels/cpu/cpu_kernels.h (see
// docs/runtime_cuda_kernels.md). Plain C++: nvcc compiles the kernels and g++
// compiles the callers from this same header.
//
// Convention. Every pointer is a DEVICE pointer unless a comment says
// otherwise. Every call enqueues its work on `stream` (the trailing argument)
// and returns a Status without synchronising: launch errors and argument
// errors come back at once, faults inside a kernel surface as the status of a
// later call or synchronisation, as everywhere in CUDA. Scalar results (the
// losses) are written to device memory so nothing syncs. Sizes follow the CPU
// kernels' preconditions (every size > 0, buffers hold what their shape says,
// no aliasing unless stated); limits the CPU kernels do not have (head_dim,
// reduceSum's rank) are checked and refused with a message.
//
// Dtypes. `T` is float or __nv_bfloat16 (`bf16` below); bf16 kernels read and
// write bf16 and compute in fp32 registers, rounding each result once to
// nearest even. Gradients of parameters that are sums over tokens (dgamma,
// dbeta, the embedding table) are always fp32, as are the losses, the vocab
// maxima and statistics, and AdamW's moments and master copy; `convert`
// rounds an fp32 result into a bf16 tensor.
// Kernels with a cross-block reduction take a caller-owned workspace whose
// size a `...WorkspaceBytes` function gives, so results are deterministic
// (no atomics) and nothing allocates per call.
#ifndef LOOM_RUNTIME_KERNELS_CUDA_CUDA_KERNELS_H_
#define LOOM_RUNTIME_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "plan/rope_frequency.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime::cuda {

using bf16 = __nv_bfloat16;

// What every call returns: OK, a CUDA runtime error, a cuBLAS status or a
// refused argument (cudaErrorInvalidValue), with a message naming the op.
class [[nodiscard]] Status {
 public:
  Status() = default;

  // OK for cudaSuccess; otherwise "<what>: <error name> (<error string>)".
  static Status fromCuda(cudaError_t error, const std::string& what);
  // OK for CUBLAS_STATUS_SUCCESS (0); otherwise "<what>: <cuBLAS status>".
  static Status fromCublas(int status, const std::string& what);
  // cudaErrorInvalidValue with `message` as is.
  static Status invalidArgument(const std::string& message);

  bool ok() const { return cuda_error_ == cudaSuccess && cublas_status_ == 0; }
  // cudaSuccess unless CUDA itself failed or an argument was refused.
  cudaError_t cudaError() const { return cuda_error_; }
  // 0 unless cuBLAS failed.
  int cublasStatus() const { return cublas_status_; }
  // "" when OK.
  const std::string& message() const { return message_; }

 private:
  cudaError_t cuda_error_ = cudaSuccess;
  int cublas_status_ = 0;
  std::string message_;
};

// Why these kernels cannot run here ("no usable GPU: CUDA driver version is
// insufficient for CUDA runtime version", or a GPU older than sm_90, which
// the library's code does not target), or "" when device 0 can run them.
std::string deviceUnavailableReason();

// ---- Matrix products (cuBLASLt) --------------------------------------------

// A cuBLASLt handle, its workspace and a per-shape plan cache (descriptors
// plus the heuristic's algorithm). Create one per device and reuse it: calls
// allocate nothing once a shape's plan is cached. Not thread-safe, and the
// workspace is shared, so use one handle per concurrently running stream.
class CublasLtHandle {
 public:
  // 32 MiB is cuBLAS's recommended workspace on Hopper.
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  static Status create(std::unique_ptr<CublasLtHandle>* handle,
                       size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  // How many (shape, dtype, layout, alignment) plans are cached.
  size_t cachedPlans() const;

  struct Impl;  // Defined in gemm.cu.
  Impl& impl() { return *impl_; }

 private:
  explicit CublasLtHandle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The GEMMs take TIn = float with TOut = float (fp32 compute, no TF32), or
// TIn = bf16 with TOut = bf16 or float; all accumulate in fp32.

// nn.linear: y[rows, out] = x[rows, in] w[in, out] (+ bias[out]); `bias` may
// be null. The bias is added by cuBLASLt's epilogue.
template <typename TIn, typename TOut>
Status linear(CublasLtHandle& handle, const TIn* x, const TIn* w, const TOut* bias, TOut* y,
              int64_t rows, int64_t in, int64_t out, cudaStream_t stream);
// nn.matmul: out[rows, n] = lhs[rows, k] rhs[k, n].
template <typename TIn, typename TOut>
Status matmul(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out, int64_t rows,
              int64_t k, int64_t n, cudaStream_t stream);
// transpose_rhs: out[rows, n] = lhs[rows, k] rhs[n, k]^T.
template <typename TIn, typename TOut>
Status matmulTransposeRhs(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out,
                          int64_t rows, int64_t k, int64_t n, cudaStream_t stream);
// transpose_lhs: out[m, n] = lhs[rows, m]^T rhs[rows, n], summed over rows.
template <typename TIn, typename TOut>
Status matmulTransposeLhs(CublasLtHandle& handle, const TIn* lhs, const TIn* rhs, TOut* out,
                          int64_t rows, int64_t m, int64_t n, cudaStream_t stream);

// ---- Normalisation ----------------------------------------------------------

// nn.rms_norm: y = x / sqrt(mean(x^2) + eps) * gamma, one block per row.
template <typename T>
Status rmsNorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t hidden, float epsilon,
               cudaStream_t stream);
size_t rmsNormGradWorkspaceBytes(int64_t rows, int64_t hidden);
// nn.rms_norm_grad: writes dx and dgamma (fp32, overwritten).
template <typename T>
Status rmsNormGrad(const T* x, const T* gamma, const T* dy, T* dx, float* dgamma, int64_t rows,
                   int64_t hidden, float epsilon, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream);

// nn.layer_norm with the biased variance (two-pass mean and variance).
template <typename T>
Status layerNorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t hidden,
                 float epsilon, cudaStream_t stream);
size_t layerNormGradWorkspaceBytes(int64_t rows, int64_t hidden);
// nn.layer_norm_grad: writes dx, dgamma and dbeta (fp32, overwritten).
template <typename T>
Status layerNormGrad(const T* x, const T* gamma, const T* dy, T* dx, float* dgamma, float* dbeta,
                     int64_t rows, int64_t hidden, float epsilon, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream);

// ---- Attention family -------------------------------------------------------

// As cpu::AttentionShape: q/out [batch, seq, heads, head_dim], k/v
// [batch, seq, kv_heads, head_dim]; query head h reads kv head
// h / (heads / kv_heads).
struct AttentionShape {
  int64_t batch;
  int64_t seq;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
};

// The fused attention kernels hold a head row in registers.
inline constexpr int64_t kMaxAttentionHeadDim = 128;

// nn.rope on x[batch, seq, heads, head_dim] (head_dim even): rotates pairs
// (i, i + D/2) by s * theta^(-2i/D), the frequency scaled as `scaling` says
// (plan/rope_frequency.h, the CPU's formula), negated when `inverse`; the
// angle's cos/sin in double as on the CPU. `y` may equal `x`.
template <typename T>
Status rope(const T* x, T* y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
            float theta, bool inverse, const plan::RopeScaling& scaling, cudaStream_t stream);

// nn.attention, causal, scale 1/sqrt(head_dim), head_dim <= 128: a fused
// tiled kernel with an online softmax. Writes out and, unless `lse` is null,
// the rows' logsumexp lse[batch, heads, seq] (fp32) for the backward.
template <typename T>
Status attention(const T* q, const T* k, const T* v, T* out, float* lse,
                 const AttentionShape& shape, cudaStream_t stream);
// nn.attention_grad from the forward's `out` and `lse`: recomputes the
// probabilities tile by tile and writes dq, dk, dv (overwritten; a kv head's
// gradient sums over its query-head group). Deterministic, no atomics.
template <typename T>
Status attentionGrad(const T* q, const T* k, const T* v, const T* out, const T* dout,
                     const float* lse, T* dq, T* dk, T* dv, const AttentionShape& shape,
                     cudaStream_t stream);

// ---- Softmax, elementwise and reductions ------------------------------------

// nn.softmax over the last dim, max-shifted; one block per row.
template <typename T>
Status softmax(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t stream);
// nn.softmax_grad from softmax's output y: dx = y (dy - rowsum(dy y)).
template <typename T>
Status softmaxGrad(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, cudaStream_t stream);

// nn.silu and its grad dy s (1 + x (1 - s)).
template <typename T>
Status silu(const T* x, T* y, int64_t count, cudaStream_t stream);
template <typename T>
Status siluGrad(const T* x, const T* dy, T* dx, int64_t count, cudaStream_t stream);
// nn.gelu (tanh approximation) and its grad.
template <typename T>
Status gelu(const T* x, T* y, int64_t count, cudaStream_t stream);
template <typename T>
Status geluGrad(const T* x, const T* dy, T* dx, int64_t count, cudaStream_t stream);
// nn.add / nn.mul; `out` may equal an input.
template <typename T>
Status add(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream);
template <typename T>
Status mul(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream);

// Fused SwiGLU gate: out = silu(a) * b in one pass (nn.silu then nn.mul).
template <typename T>
Status siluMul(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream);
// Its backward: da = dout b silu'(a), db = dout silu(a).
template <typename T>
Status siluMulGrad(const T* a, const T* b, const T* dout, T* da, T* db, int64_t count,
                   cudaStream_t stream);

// nn.bias_add: y[t, o] = x[t, o] + bias[o]; y may alias x.
template <typename T>
Status biasAdd(const T* x, const T* bias, T* y, int64_t rows, int64_t out, cudaStream_t stream);

// nn.reduce_sum over `dims` (strictly increasing) of x (row-major `shape`,
// rank <= 8; `shape` and `dims` are HOST arrays); writes the kept dims in
// order. Sums in fp32, deterministically.
inline constexpr int kMaxReduceRank = 8;
template <typename T>
Status reduceSum(const T* x, std::span<const int64_t> shape, std::span<const int64_t> dims, T* out,
                 cudaStream_t stream);

// ---- Embedding and loss -----------------------------------------------------

// nn.embedding: out[t] = table[ids[t] - row_begin], a zero row for ids outside
// [row_begin, row_begin + table_rows). Id is int32_t or int64_t.
template <typename T, typename Id>
Status embedding(const Id* ids, const T* table, T* out, int64_t tokens, int64_t hidden,
                 int64_t row_begin, int64_t table_rows, cudaStream_t stream);
// nn.embedding_grad: dtable (fp32, overwritten) row r = sum of dy[t] over the
// tokens with ids[t] - row_begin == r, added in token order (so it equals the
// CPU kernel bit for bit); ids outside the rows are skipped.
template <typename T, typename Id>
Status embeddingGrad(const Id* ids, const T* dy, float* dtable, int64_t tokens, int64_t hidden,
                     int64_t row_begin, int64_t table_rows, cudaStream_t stream);

// The loss family takes logits of type T (float or bf16, read as their fp32
// values) and computes as the fp32 kernels do; losses, maxima and
// statistics are fp32, logit gradients are T. A token labelled kIgnoreLabel
// (runtime/kernels/ignore_label.h) adds 0 to the loss, still counts in its
// mean, and gets a 0 gradient row, as on the CPU.
size_t crossEntropyWorkspaceBytes(int64_t tokens);
// nn.cross_entropy: *loss (device) = mean over tokens of logsumexp(logits[t])
// - logits[t, labels[t]], the token sum in double. Label is int32_t/int64_t.
template <typename T, typename Label>
Status crossEntropy(const T* logits, const Label* labels, float* loss, int64_t tokens,
                    int64_t vocab, void* workspace, size_t workspace_bytes, cudaStream_t stream);
// nn.cross_entropy_grad: (softmax - onehot) * dloss * scale; `dloss` and
// `scale` are host values.
template <typename T, typename Label>
Status crossEntropyGrad(const T* logits, const Label* labels, float dloss, float scale, T* dlogits,
                        int64_t tokens, int64_t vocab, cudaStream_t stream);

// Vocab-parallel cross-entropy, as the CPU kernels (docs/planner_nn.md):
// rows hold `local` logits of which the first `valid` are vocab rows
// [row_begin, row_begin + valid).
template <typename T>
Status vocabMax(const T* logits, float* max, int64_t tokens, int64_t local, int64_t valid,
                cudaStream_t stream);
template <typename T>
Status vocabStats(const T* logits, const int32_t* labels, const float* max, float* stats,
                  int64_t tokens, int64_t local, int64_t valid, int64_t row_begin,
                  cudaStream_t stream);
// *loss (device) = mean over tokens of log stats[t, 0] - stats[t, 1], in double.
Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens, cudaStream_t stream);
template <typename T>
Status vocabCrossEntropyGrad(const T* logits, const int32_t* labels, const float* max,
                             const float* stats, float dloss, float scale, T* dlogits,
                             int64_t tokens, int64_t local, int64_t valid, int64_t row_begin,
                             cudaStream_t stream);

// ---- Precision ----------------------------------------------------------------

// dst = src element by element, TIn/TOut float or bf16: bf16 -> float is
// exact, float -> bf16 rounds to nearest even (__float2bfloat16_rn), the
// same type copies.
template <typename TIn, typename TOut>
Status convert(const TIn* src, TOut* dst, int64_t count, cudaStream_t stream);
// dst[i] = sum over c < chunks (>= 1) of src[c * count + i], added in fp32
// in chunk order starting from chunk 0, then divided by `chunks` (fp32)
// when `average`, and rounded once to TOut. Deterministic: every device and
// rank gets the same bits, which equal the CPU executor's. `dst` may be
// chunk 0 of `src` when TIn == TOut.
template <typename TIn, typename TOut>
Status sumChunks(const TIn* src, int64_t chunks, int64_t count, bool average, TOut* dst,
                 cudaStream_t stream);

// ---- Optimizer --------------------------------------------------------------

// optim::adamwStep over a whole flat bucket in one launch, in torch's order
// of fp32 operations with the scalars computed in double on the host, so it
// equals the CPU step element for element. Gradients are TGrad (float or
// bf16, read as their fp32 values). `grad_scale`, if not null, is a device
// float (a clip coefficient); when it is below 1 it multiplies every
// gradient first, as optim::scaleGradients would; `grads` itself is not
// modified.
template <typename TGrad>
Status adamwStep(const optim::AdamWConfig& config, int64_t step, float* params, const TGrad* grads,
                 float* exp_avg, float* exp_avg_sq, int64_t count, const float* grad_scale,
                 cudaStream_t stream);
// Mixed precision, in the same one launch: adamwStep on the fp32 `master`
// copy (so it equals optim::adamwStep on the master element for element),
// then params (TParam: bf16, or float for a plain copy) = the new master
// rounded to nearest even.
template <typename TParam, typename TGrad>
Status adamwStepWithMaster(const optim::AdamWConfig& config, int64_t step, TParam* params,
                           const TGrad* grads, float* exp_avg, float* exp_avg_sq, float* master,
                           int64_t count, const float* grad_scale, cudaStream_t stream);

}  // namespace loom::runtime::cuda

#endif  // LOOM_RUNTIME_KERNELS_CUDA_CUDA_KERNELS_H_
