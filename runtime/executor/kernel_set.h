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
#include "runtime/executor/caching_allocator.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {

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

  // ---- Memory (device pointers unless named host) ---------------------------
  virtual absl::Status copy(void* dst, const void* src, size_t bytes) = 0;
  // `height` rows of `width` bytes, rows `src_pitch` / `dst_pitch` apart.
  virtual absl::Status copy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t height) = 0;
  virtual absl::Status zero2D(void* dst, size_t pitch, size_t width, size_t height) = 0;
  virtual absl::Status upload(void* dst, const void* host, size_t bytes) = 0;
  // Waits for the work queued before it, then copies to the host.
  virtual absl::Status download(void* host, const void* src, size_t bytes) = 0;

  // ---- Kernels: cpu_kernels.h's semantics, f32 -------------------------------
  virtual absl::Status linear(const float* x, const float* w, const float* bias, float* y,
                              int64_t rows, int64_t in, int64_t out) = 0;
  virtual absl::Status matmul(const float* lhs, const float* rhs, float* out, int64_t rows,
                              int64_t k, int64_t n) = 0;
  virtual absl::Status matmulTransposeRhs(const float* lhs, const float* rhs, float* out,
                                          int64_t rows, int64_t k, int64_t n) = 0;
  virtual absl::Status matmulTransposeLhs(const float* lhs, const float* rhs, float* out,
                                          int64_t rows, int64_t m, int64_t n) = 0;
  virtual absl::Status rmsNorm(const float* x, const float* gamma, float* y, int64_t rows,
                               int64_t hidden, float eps) = 0;
  virtual absl::Status rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                                   float* dgamma, int64_t rows, int64_t hidden, float eps) = 0;
  virtual absl::Status layerNorm(const float* x, const float* gamma, const float* beta, float* y,
                                 int64_t rows, int64_t hidden, float eps) = 0;
  virtual absl::Status layerNormGrad(const float* x, const float* gamma, const float* dy,
                                     float* dx, float* dgamma, float* dbeta, int64_t rows,
                                     int64_t hidden, float eps) = 0;
  virtual absl::Status rope(const float* x, float* y, int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, float theta, bool inverse) = 0;
  virtual absl::Status attention(const float* q, const float* k, const float* v, float* out,
                                 const cpu::AttentionShape& shape) = 0;
  virtual absl::Status attentionGrad(const float* q, const float* k, const float* v,
                                     const float* dout, float* dq, float* dk, float* dv,
                                     const cpu::AttentionShape& shape) = 0;
  virtual absl::Status softmax(const float* x, float* y, int64_t rows, int64_t n) = 0;
  virtual absl::Status softmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                                   int64_t n) = 0;
  virtual absl::Status silu(const float* x, float* y, int64_t count) = 0;
  virtual absl::Status siluGrad(const float* x, const float* dy, float* dx, int64_t count) = 0;
  virtual absl::Status gelu(const float* x, float* y, int64_t count) = 0;
  virtual absl::Status geluGrad(const float* x, const float* dy, float* dx, int64_t count) = 0;
  virtual absl::Status add(const float* a, const float* b, float* out, int64_t count) = 0;
  virtual absl::Status mul(const float* a, const float* b, float* out, int64_t count) = 0;
  virtual absl::Status biasAdd(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t out) = 0;
  // `shape` and `dims` are host arrays.
  virtual absl::Status reduceSum(const float* x, std::span<const int64_t> shape,
                                 std::span<const int64_t> dims, float* out) = 0;
  virtual absl::Status embedding(const int32_t* ids, const float* table, float* out,
                                 int64_t tokens, int64_t hidden, int64_t row_begin,
                                 int64_t table_rows) = 0;
  // Overwrites dtable.
  virtual absl::Status embeddingGrad(const int32_t* ids, const float* dy, float* dtable,
                                     int64_t tokens, int64_t hidden, int64_t row_begin,
                                     int64_t table_rows) = 0;
  // *loss (device) = the mean cross-entropy.
  virtual absl::Status crossEntropy(const float* logits, const int32_t* labels, float* loss,
                                    int64_t tokens, int64_t vocab) = 0;
  // `dloss` is a host value.
  virtual absl::Status crossEntropyGrad(const float* logits, const int32_t* labels, float dloss,
                                        float scale, float* dlogits, int64_t tokens,
                                        int64_t vocab) = 0;
  virtual absl::Status vocabMax(const float* logits, float* max, int64_t tokens, int64_t local,
                                int64_t valid) = 0;
  virtual absl::Status vocabStats(const float* logits, const int32_t* labels, const float* max,
                                  float* stats, int64_t tokens, int64_t local, int64_t valid,
                                  int64_t row_begin) = 0;
  virtual absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) = 0;
  virtual absl::Status vocabCrossEntropyGrad(const float* logits, const int32_t* labels,
                                             const float* max, const float* stats, float dloss,
                                             float scale, float* dlogits, int64_t tokens,
                                             int64_t local, int64_t valid, int64_t row_begin) = 0;

  // ---- Optimizer ---------------------------------------------------------------
  // *total (a device double) += optim::localSquaredNorm(grads) / copies.
  virtual absl::Status addSquaredNorm(const float* grads, int64_t count, int64_t copies,
                                      double* total) = 0;
  // *coefficient (device) = optim::clipCoefficient(*total, max_norm).
  virtual absl::Status clipCoefficient(const double* total, double max_norm,
                                       float* coefficient) = 0;
  // optim::adamwStep, the gradients first scaled by *grad_scale (device)
  // when it is given and below 1, as optim::scaleGradients would.
  virtual absl::Status adamw(const optim::AdamWConfig& config, int64_t step, float* params,
                             float* grads, float* exp_avg, float* exp_avg_sq, int64_t count,
                             const float* grad_scale) = 0;
};

// The host and the CPU kernels.
std::unique_ptr<KernelSet> cpuKernelSet();

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_KERNEL_SET_H_
