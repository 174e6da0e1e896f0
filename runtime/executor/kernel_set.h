// KernelSet: the memory moves and kernels the executor's bound instructions
// call, for one device. The executor checks every shape once at bind time
// and then calls these with raw pointers into the device's memory, so one
// binding serves both devices: the host with the CPU kernels (this file's
// cpuKernelSet) and a CUDA GPU with the CUDA kernels on one compute stream
// (cuda_kernel_set.h). Calls on a CUDA set only enqueue work; results are
// there for later calls on the same set, and for the host after download().
#ifndef LOOM_RUNTIME_EXECUTOR_KERNEL_SET_H_
#define LOOM_RUNTIME_EXECUTOR_KERNEL_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/tensor.h"
#include "comm/work.h"
#include "plan/rope_frequency.h"
#include "runtime/executor/caching_allocator.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {

// A tensor in a KernelSet's memory: its first element and their type.
struct Ref {
  void* data = nullptr;
  comm::DType dtype = comm::DType::kFloat32;

  // The tensor `elements` elements further on.
  Ref at(int64_t elements) const {
    return {static_cast<char*>(data) + elements * static_cast<int64_t>(comm::dtypeSize(dtype)),
            dtype};
  }
  float* f32() const { return static_cast<float*>(data); }
};

// Offload's copies between device memory and the executor's host arena
// (docs/planner_offload.md): which way one goes, and the event that tells
// when it is done (null on the CPU, which copies at once).
enum class CopyDirection { kToHost, kToDevice };
struct CopyFence {
  void* event = nullptr;
  CopyDirection direction = CopyDirection::kToHost;
};

class KernelSet {
 public:
  virtual ~KernelSet() = default;

  // "CPU" or "CUDA", for messages.
  virtual std::string name() const = 0;
  // The device of the tensors handed to process groups.
  virtual comm::Device device() const = 0;
  // Whether the host can read and write the device's memory directly
  // (checkpoint views then point at the buffers themselves).
  virtual bool hostAddressable() const = 0;
  // Where the caching allocator gets its blocks.
  virtual std::unique_ptr<BlockSource> blockSource() = 0;
  // Makes the calling thread use this set's device and stream (CUDA: the
  // current device and nccl's current stream, so that collectives the
  // thread issues start after the work it queued).
  virtual absl::Status activate() = 0;
  // Orders later calls after `work`: the CPU waits for it (up to
  // `timeout`), a CUDA stream waits on its event and the host goes on.
  virtual absl::Status await(comm::Work& work, absl::Duration timeout) = 0;
  // Waits until everything queued so far has run.
  virtual absl::Status synchronize() = 0;
  // 64 bytes of device memory owned by the set (not counted by the
  // allocator), for the gradient norm and the clip coefficient.
  virtual void* scalars() = 0;
  // Refuses, at bind time, shapes the device's kernels cannot run.
  virtual absl::Status checkAttention(const cpu::AttentionShape&) const { return absl::OkStatus(); }
  virtual absl::Status checkReduceSum(size_t /*rank*/) const { return absl::OkStatus(); }

  // ---- Host memory (offload) ------------------------------------------------
  // Where the executor's host arena (offloaded states, gradients copied to
  // the host) gets its blocks: the host's memory, pinned on a GPU machine
  // (cudaHostAlloc) so that copies run asynchronously at the link's speed.
  virtual std::unique_ptr<BlockSource> hostBlockSource() = 0;
  // Starts copying `bytes` from `src` to `dst`, one in device memory and the
  // other in the host arena as `direction` says, after the work queued on
  // the compute stream before it, on the set's copy stream. The CPU copies
  // at once.
  virtual absl::StatusOr<CopyFence> copyAsync(void* dst, const void* src, size_t bytes,
                                              CopyDirection direction) = 0;
  // Waits for a copy: the host until it is done (so its host memory may be
  // read, or reused), and the compute stream orders later work after it.
  virtual absl::Status finishCopy(const CopyFence& fence) = 0;

  // ---- Memory (device pointers unless named host) ---------------------------
  virtual absl::Status copy(void* dst, const void* src, size_t bytes) = 0;
  // `height` rows of `width` bytes, rows `src_pitch` / `dst_pitch` apart.
  virtual absl::Status copy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t height) = 0;
  virtual absl::Status zero2D(void* dst, size_t pitch, size_t width, size_t height) = 0;
  virtual absl::Status upload(void* dst, const void* host, size_t bytes) = 0;
  // Waits for the work queued before it, then copies to the host.
  virtual absl::Status download(void* host, const void* src, size_t bytes) = 0;

  // ---- Kernels: cpu_kernels.h's semantics, f32 or bf16 ----------------------
  // Every float tensor is a Ref and may be f32 or bf16, each on its own:
  // a kernel reads bf16 elements as their exact f32 values, computes in f32
  // as the f32 kernel does (sums over tokens, such as dgamma, dbeta and the
  // table gradient, included) and rounds each bf16 result once, to nearest
  // even. Scalars named float* (losses, vocab max and statistics) are f32.
  virtual absl::Status linear(Ref x, Ref w, Ref bias, Ref y, int64_t rows, int64_t in,
                              int64_t out) = 0;  // bias.data may be null
  virtual absl::Status matmul(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k, int64_t n) = 0;
  virtual absl::Status matmulTransposeRhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k,
                                          int64_t n) = 0;
  virtual absl::Status matmulTransposeLhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t m,
                                          int64_t n) = 0;
  virtual absl::Status rmsNorm(Ref x, Ref gamma, Ref y, int64_t rows, int64_t hidden,
                               float eps) = 0;
  virtual absl::Status rmsNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, int64_t rows,
                                   int64_t hidden, float eps) = 0;
  virtual absl::Status layerNorm(Ref x, Ref gamma, Ref beta, Ref y, int64_t rows, int64_t hidden,
                                 float eps) = 0;
  virtual absl::Status layerNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, Ref dbeta,
                                     int64_t rows, int64_t hidden, float eps) = 0;
  virtual absl::Status rope(Ref x, Ref y, int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, float theta, bool inverse,
                            const plan::RopeScaling& scaling) = 0;
  virtual absl::Status attention(Ref q, Ref k, Ref v, Ref out,
                                 const cpu::AttentionShape& shape) = 0;
  virtual absl::Status attentionGrad(Ref q, Ref k, Ref v, Ref dout, Ref dq, Ref dk, Ref dv,
                                     const cpu::AttentionShape& shape) = 0;
  virtual absl::Status softmax(Ref x, Ref y, int64_t rows, int64_t n) = 0;
  virtual absl::Status softmaxGrad(Ref y, Ref dy, Ref dx, int64_t rows, int64_t n) = 0;
  virtual absl::Status silu(Ref x, Ref y, int64_t count) = 0;
  virtual absl::Status siluGrad(Ref x, Ref dy, Ref dx, int64_t count) = 0;
  virtual absl::Status gelu(Ref x, Ref y, int64_t count) = 0;
  virtual absl::Status geluGrad(Ref x, Ref dy, Ref dx, int64_t count) = 0;
  virtual absl::Status add(Ref a, Ref b, Ref out, int64_t count) = 0;
  virtual absl::Status mul(Ref a, Ref b, Ref out, int64_t count) = 0;
  virtual absl::Status biasAdd(Ref x, Ref bias, Ref y, int64_t rows, int64_t out) = 0;
  // `shape` and `dims` are host arrays.
  virtual absl::Status reduceSum(Ref x, std::span<const int64_t> shape,
                                 std::span<const int64_t> dims, Ref out) = 0;
  virtual absl::Status embedding(const int32_t* ids, Ref table, Ref out, int64_t tokens,
                                 int64_t hidden, int64_t row_begin, int64_t table_rows) = 0;
  // Overwrites dtable.
  virtual absl::Status embeddingGrad(const int32_t* ids, Ref dy, Ref dtable, int64_t tokens,
                                     int64_t hidden, int64_t row_begin, int64_t table_rows) = 0;
  // *loss (device) = the mean cross-entropy.
  virtual absl::Status crossEntropy(Ref logits, const int32_t* labels, float* loss, int64_t tokens,
                                    int64_t vocab) = 0;
  // `dloss` is a host value.
  virtual absl::Status crossEntropyGrad(Ref logits, const int32_t* labels, float dloss, float scale,
                                        Ref dlogits, int64_t tokens, int64_t vocab) = 0;
  virtual absl::Status vocabMax(Ref logits, float* max, int64_t tokens, int64_t local,
                                int64_t valid) = 0;
  virtual absl::Status vocabStats(Ref logits, const int32_t* labels, const float* max, float* stats,
                                  int64_t tokens, int64_t local, int64_t valid,
                                  int64_t row_begin) = 0;
  virtual absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) = 0;
  virtual absl::Status vocabCrossEntropyGrad(Ref logits, const int32_t* labels, const float* max,
                                             const float* stats, float dloss, float scale,
                                             Ref dlogits, int64_t tokens, int64_t local,
                                             int64_t valid, int64_t row_begin) = 0;

  // ---- Precision ---------------------------------------------------------------
  // dst = src converted element by element (f32 <-> bf16, rounding to
  // nearest even; the same type copies).
  virtual absl::Status convert(Ref src, Ref dst, int64_t count) = 0;
  // dst[i] = the sum over c < chunks of src[c * count + i], added in f32 in
  // chunk order (so every rank and every device gets the same bits), divided
  // by `chunks` when `average`, rounded once to dst's type. A reduction whose
  // plan accumulates wider than its wire type ends here.
  virtual absl::Status sumChunks(Ref src, int64_t chunks, int64_t count, bool average, Ref dst) = 0;

  // ---- Optimizer ---------------------------------------------------------------
  // *total (a device double) += optim::localSquaredNorm(grads) / copies.
  virtual absl::Status addSquaredNorm(Ref grads, int64_t count, int64_t copies, double* total) = 0;
  // *coefficient (device) = optim::clipCoefficient(*total, max_norm).
  virtual absl::Status clipCoefficient(const double* total, double max_norm,
                                       float* coefficient) = 0;
  // optim::adamwStep, the gradients first scaled by *grad_scale (device)
  // when it is given and below 1, as optim::scaleGradients would; `grads`
  // is not modified. Without `master`, params are f32 and updated in place.
  // With an f32 `master` copy (mixed precision), the step updates the
  // master and params (bf16) become the master rounded to nearest even.
  virtual absl::Status adamw(const optim::AdamWConfig& config, int64_t step, Ref params, Ref grads,
                             float* exp_avg, float* exp_avg_sq, float* master, int64_t count,
                             const float* grad_scale) = 0;
};

// The host and the CPU kernels.
std::unique_ptr<KernelSet> cpuKernelSet();

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_KERNEL_SET_H_
