// The CUDA KernelSet: every call enqueues on one non-blocking compute stream.
#include "runtime/executor/cuda_kernel_set.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/nccl/nccl_backend.h"
#include "runtime/executor/cuda_clip.h"
#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime {
namespace {

absl::Status fromCuda(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

// A refused argument is the caller's mistake; anything else is CUDA's.
absl::Status fromKernel(const cuda::Status& status) {
  if (status.ok()) return absl::OkStatus();
  if (status.cudaError() == cudaErrorInvalidValue && status.cublasStatus() == 0) {
    return absl::InvalidArgumentError(status.message());
  }
  return absl::InternalError(status.message());
}

cuda::AttentionShape cudaShape(const cpu::AttentionShape& s) {
  return {s.batch, s.seq, s.heads, s.kv_heads, s.head_dim};
}

// Device memory for the caching allocator. A block is zeroed on the
// compute stream, so the zeroing follows every earlier use of the block
// (all of which the stream has been ordered after when it is released).
class DeviceBlockSource : public BlockSource {
 public:
  explicit DeviceBlockSource(cudaStream_t stream) : stream_(stream) {}
  void* allocate(size_t bytes) override {
    void* block = nullptr;
    if (cudaMalloc(&block, bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is not sticky; clear it
      return nullptr;
    }
    return block;
  }
  void free(void* block) override { cudaFree(block); }
  void zero(void* block, size_t bytes) override {
    if (bytes > 0) cudaMemsetAsync(block, 0, bytes, stream_);
  }

 private:
  cudaStream_t stream_;
};

class CudaKernelSet : public KernelSet {
 public:
  CudaKernelSet(int device, cudaStream_t stream, std::unique_ptr<cuda::CublasLtHandle> blas,
                void* scalars)
      : device_(device), stream_(stream), blas_(std::move(blas)), scalars_(scalars) {}

  ~CudaKernelSet() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    // Collectives this thread issues later must not order after a dead stream.
    if (comm::nccl::currentCudaStream() == stream_) comm::nccl::setCurrentCudaStream(nullptr);
    blas_.reset();
    if (workspace_ != nullptr) cudaFree(workspace_);
    cudaFree(scalars_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "CUDA"; }
  comm::Device device() const override { return comm::Device::cuda(device_); }
  bool hostAddressable() const override { return false; }
  std::unique_ptr<BlockSource> blockSource() override {
    return std::make_unique<DeviceBlockSource>(stream_);
  }
  absl::Status activate() override {
    comm::nccl::setCurrentCudaStream(stream_);
    return fromCuda(cudaSetDevice(device_), absl::StrCat("selecting GPU ", device_));
  }
  absl::Status await(comm::Work& work, absl::Duration) override {
    comm::nccl::CudaStreamGuard guard(stream_);
    return work.synchronize();
  }
  absl::Status synchronize() override {
    return fromCuda(cudaStreamSynchronize(stream_), "waiting for the compute stream");
  }
  void* scalars() override { return scalars_; }

  absl::Status checkAttention(const cpu::AttentionShape& s) const override {
    if (s.head_dim < 1 || s.head_dim > cuda::kMaxAttentionHeadDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head_dim ", s.head_dim, " is outside the CUDA attention kernel's [1, ",
          cuda::kMaxAttentionHeadDim, "]; run this model with --device=cpu"));
    }
    if (s.heads > 65535 || s.batch > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the CUDA attention kernel takes at most 65535 heads and batch rows; got ", s.heads,
          " heads and ", s.batch, " rows"));
    }
    return absl::OkStatus();
  }
  absl::Status checkReduceSum(size_t rank) const override {
    if (rank > static_cast<size_t>(cuda::kMaxReduceRank)) {
      return absl::InvalidArgumentError(absl::StrCat("the CUDA reduce_sum takes rank <= ",
                                                     cuda::kMaxReduceRank, "; got rank ", rank));
    }
    return absl::OkStatus();
  }

  absl::Status copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    return fromCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }
  absl::Status copy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                      size_t height) override {
    if (width == 0 || height == 0) return absl::OkStatus();
    if (height == 1) return copy(dst, src, width);
    return fromCuda(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height,
                                      cudaMemcpyDeviceToDevice, stream_),
                    absl::StrCat("2-d copy of ", height, " rows of ", width, " bytes"));
  }
  absl::Status zero2D(void* dst, size_t pitch, size_t width, size_t height) override {
    if (width == 0 || height == 0) return absl::OkStatus();
    if (height == 1) return fromCuda(cudaMemsetAsync(dst, 0, width, stream_), "zeroing");
    return fromCuda(cudaMemset2DAsync(dst, pitch, 0, width, height, stream_), "2-d zeroing");
  }
  absl::Status upload(void* dst, const void* host, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    // From pageable memory the call returns once `host` has been staged, so
    // the caller may reuse it at once.
    return fromCuda(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_),
                    "copying to the GPU");
  }
  absl::Status download(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) {
      absl::Status s = fromCuda(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_),
                                "copying from the GPU");
      if (!s.ok()) return s;
    }
    return synchronize();
  }

  absl::Status linear(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                      int64_t in, int64_t out) override {
    return fromKernel(cuda::linear<float, float>(*blas_, x, w, bias, y, rows, in, out, stream_));
  }
  absl::Status matmul(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k,
                      int64_t n) override {
    return fromKernel(cuda::matmul<float, float>(*blas_, lhs, rhs, out, rows, k, n, stream_));
  }
  absl::Status matmulTransposeRhs(const float* lhs, const float* rhs, float* out, int64_t rows,
                                  int64_t k, int64_t n) override {
    return fromKernel(
        cuda::matmulTransposeRhs<float, float>(*blas_, lhs, rhs, out, rows, k, n, stream_));
  }
  absl::Status matmulTransposeLhs(const float* lhs, const float* rhs, float* out, int64_t rows,
                                  int64_t m, int64_t n) override {
    return fromKernel(
        cuda::matmulTransposeLhs<float, float>(*blas_, lhs, rhs, out, rows, m, n, stream_));
  }
  absl::Status rmsNorm(const float* x, const float* gamma, float* y, int64_t rows, int64_t hidden,
                       float eps) override {
    return fromKernel(cuda::rmsNorm<float>(x, gamma, y, rows, hidden, eps, stream_));
  }
  absl::Status rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                           float* dgamma, int64_t rows, int64_t hidden, float eps) override {
    const size_t bytes = cuda::rmsNormGradWorkspaceBytes(rows, hidden);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    return fromKernel(cuda::rmsNormGrad<float>(x, gamma, dy, dx, dgamma, rows, hidden, eps, *ws,
                                               bytes, stream_));
  }
  absl::Status layerNorm(const float* x, const float* gamma, const float* beta, float* y,
                         int64_t rows, int64_t hidden, float eps) override {
    return fromKernel(cuda::layerNorm<float>(x, gamma, beta, y, rows, hidden, eps, stream_));
  }
  absl::Status layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                             float* dgamma, float* dbeta, int64_t rows, int64_t hidden,
                             float eps) override {
    const size_t bytes = cuda::layerNormGradWorkspaceBytes(rows, hidden);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    return fromKernel(cuda::layerNormGrad<float>(x, gamma, dy, dx, dgamma, dbeta, rows, hidden, eps,
                                                 *ws, bytes, stream_));
  }
  absl::Status rope(const float* x, float* y, int64_t batch, int64_t seq, int64_t heads,
                    int64_t head_dim, float theta, bool inverse) override {
    return fromKernel(
        cuda::rope<float>(x, y, batch, seq, heads, head_dim, theta, inverse, stream_));
  }
  absl::Status attention(const float* q, const float* k, const float* v, float* out,
                         const cpu::AttentionShape& shape) override {
    return fromKernel(cuda::attention<float>(q, k, v, out, nullptr, cudaShape(shape), stream_));
  }
  // The plan keeps neither the forward's output nor its logsumexp, which
  // the CUDA backward needs: recompute both into the workspace (one more
  // attention forward per layer, as activation recomputation would).
  absl::Status attentionGrad(const float* q, const float* k, const float* v, const float* dout,
                             float* dq, float* dk, float* dv,
                             const cpu::AttentionShape& shape) override {
    const size_t outBytes = static_cast<size_t>(shape.batch * shape.seq * shape.heads *
                                                shape.head_dim) * sizeof(float);
    const size_t lseOffset = (outBytes + 255) & ~size_t{255};
    const size_t lseBytes = static_cast<size_t>(shape.batch * shape.heads * shape.seq) * sizeof(float);
    absl::StatusOr<void*> ws = workspace(lseOffset + lseBytes);
    if (!ws.ok()) return ws.status();
    float* out = static_cast<float*>(*ws);
    float* lse = reinterpret_cast<float*>(static_cast<char*>(*ws) + lseOffset);
    const cuda::AttentionShape s = cudaShape(shape);
    if (absl::Status st = fromKernel(cuda::attention<float>(q, k, v, out, lse, s, stream_)); !st.ok()) {
      return st;
    }
    return fromKernel(cuda::attentionGrad<float>(q, k, v, out, dout, lse, dq, dk, dv, s, stream_));
  }
  absl::Status softmax(const float* x, float* y, int64_t rows, int64_t n) override {
    return fromKernel(cuda::softmax<float>(x, y, rows, n, stream_));
  }
  absl::Status softmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                           int64_t n) override {
    return fromKernel(cuda::softmaxGrad<float>(y, dy, dx, rows, n, stream_));
  }
  absl::Status silu(const float* x, float* y, int64_t count) override {
    return fromKernel(cuda::silu<float>(x, y, count, stream_));
  }
  absl::Status siluGrad(const float* x, const float* dy, float* dx, int64_t count) override {
    return fromKernel(cuda::siluGrad<float>(x, dy, dx, count, stream_));
  }
  absl::Status gelu(const float* x, float* y, int64_t count) override {
    return fromKernel(cuda::gelu<float>(x, y, count, stream_));
  }
  absl::Status geluGrad(const float* x, const float* dy, float* dx, int64_t count) override {
    return fromKernel(cuda::geluGrad<float>(x, dy, dx, count, stream_));
  }
  absl::Status add(const float* a, const float* b, float* out, int64_t count) override {
    return fromKernel(cuda::add<float>(a, b, out, count, stream_));
  }
  absl::Status mul(const float* a, const float* b, float* out, int64_t count) override {
    return fromKernel(cuda::mul<float>(a, b, out, count, stream_));
  }
  absl::Status biasAdd(const float* x, const float* bias, float* y, int64_t rows,
                       int64_t out) override {
    return fromKernel(cuda::biasAdd<float>(x, bias, y, rows, out, stream_));
  }
  absl::Status reduceSum(const float* x, std::span<const int64_t> shape,
                         std::span<const int64_t> dims, float* out) override {
    return fromKernel(cuda::reduceSum<float>(x, shape, dims, out, stream_));
  }
  absl::Status embedding(const int32_t* ids, const float* table, float* out, int64_t tokens,
                         int64_t hidden, int64_t row_begin, int64_t table_rows) override {
    return fromKernel(cuda::embedding<float, int32_t>(ids, table, out, tokens, hidden, row_begin,
                                                      table_rows, stream_));
  }
  absl::Status embeddingGrad(const int32_t* ids, const float* dy, float* dtable, int64_t tokens,
                             int64_t hidden, int64_t row_begin, int64_t table_rows) override {
    return fromKernel(cuda::embeddingGrad<float, int32_t>(ids, dy, dtable, tokens, hidden, row_begin,
                                                          table_rows, stream_));
  }
  absl::Status crossEntropy(const float* logits, const int32_t* labels, float* loss, int64_t tokens,
                            int64_t vocab) override {
    const size_t bytes = cuda::crossEntropyWorkspaceBytes(tokens);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    return fromKernel(
        cuda::crossEntropy<int32_t>(logits, labels, loss, tokens, vocab, *ws, bytes, stream_));
  }
  absl::Status crossEntropyGrad(const float* logits, const int32_t* labels, float dloss, float scale,
                                float* dlogits, int64_t tokens, int64_t vocab) override {
    return fromKernel(cuda::crossEntropyGrad<int32_t>(logits, labels, dloss, scale, dlogits, tokens,
                                                      vocab, stream_));
  }
  absl::Status vocabMax(const float* logits, float* max, int64_t tokens, int64_t local,
                        int64_t valid) override {
    return fromKernel(cuda::vocabMax(logits, max, tokens, local, valid, stream_));
  }
  absl::Status vocabStats(const float* logits, const int32_t* labels, const float* max, float* stats,
                          int64_t tokens, int64_t local, int64_t valid, int64_t row_begin) override {
    return fromKernel(
        cuda::vocabStats(logits, labels, max, stats, tokens, local, valid, row_begin, stream_));
  }
  absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) override {
    return fromKernel(cuda::vocabCrossEntropy(stats, loss, tokens, stream_));
  }
  absl::Status vocabCrossEntropyGrad(const float* logits, const int32_t* labels, const float* max,
                                     const float* stats, float dloss, float scale, float* dlogits,
                                     int64_t tokens, int64_t local, int64_t valid,
                                     int64_t row_begin) override {
    return fromKernel(cuda::vocabCrossEntropyGrad(logits, labels, max, stats, dloss, scale, dlogits,
                                                  tokens, local, valid, row_begin, stream_));
  }

  absl::Status addSquaredNorm(const float* grads, int64_t count, int64_t copies,
                              double* total) override {
    absl::StatusOr<void*> ws = workspace(cuda_clip::kSquaredNormBlocks * sizeof(double));
    if (!ws.ok()) return ws.status();
    return fromCuda(cuda_clip::addSquaredNorm(grads, count, copies, static_cast<double*>(*ws), total,
                                              stream_),
                    "launching the squared gradient norm");
  }
  absl::Status clipCoefficient(const double* total, double max_norm, float* coefficient) override {
    return fromCuda(cuda_clip::clipCoefficient(total, max_norm, coefficient, stream_),
                    "launching the clip coefficient");
  }
  absl::Status adamw(const optim::AdamWConfig& config, int64_t step, float* params, float* grads,
                     float* exp_avg, float* exp_avg_sq, int64_t count,
                     const float* grad_scale) override {
    return fromKernel(
        cuda::adamwStep(config, step, params, grads, exp_avg, exp_avg_sq, count, grad_scale, stream_));
  }

 private:
  // One scratch block for every kernel that needs one: they run one after
  // another on the stream. It grows to the largest request, which happens
  // in the first step (shapes repeat every step), so later steps do not
  // call cudaMalloc.
  absl::StatusOr<void*> workspace(size_t bytes) {
    if (bytes <= workspace_bytes_) return workspace_;
    if (workspace_ != nullptr) {
      // Kernels queued earlier may still use the old block.
      if (absl::Status s = synchronize(); !s.ok()) return s;
      cudaFree(workspace_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    }
    if (absl::Status s = fromCuda(cudaMalloc(&workspace_, bytes),
                                  absl::StrCat("allocating ", bytes, " bytes of kernel workspace"));
        !s.ok()) {
      workspace_ = nullptr;
      return s;
    }
    workspace_bytes_ = bytes;
    return workspace_;
  }

  int device_;
  cudaStream_t stream_;
  std::unique_ptr<cuda::CublasLtHandle> blas_;
  void* scalars_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace

std::string cudaDeviceUnavailableReason(int device) {
  if (std::string reason = cuda::deviceUnavailableReason(); !reason.empty()) return reason;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return "no usable GPU: cudaGetDeviceCount failed";
  if (device < 0 || device >= count) {
    return absl::StrCat("GPU ", device, " was asked for, but this host has ", count,
                        " (LOCAL_RANK picks the GPU; start at most one rank per GPU)");
  }
  return "";
}

absl::StatusOr<std::unique_ptr<KernelSet>> cudaKernelSet(int device) {
  if (device < 0) {
    const char* local = std::getenv("LOCAL_RANK");
    if (local == nullptr || !absl::SimpleAtoi(local, &device) || device < 0) device = 0;
  }
  const std::string where = absl::StrCat("setting up GPU ", device);
  if (std::string reason = cudaDeviceUnavailableReason(device); !reason.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": ", reason));
  }
  if (absl::Status s = fromCuda(cudaSetDevice(device), where); !s.ok()) return s;
  cudaStream_t stream = nullptr;
  if (absl::Status s = fromCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), where);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<cuda::CublasLtHandle> blas;
  if (cuda::Status s = cuda::CublasLtHandle::create(&blas); !s.ok()) {
    cudaStreamDestroy(stream);
    return absl::InternalError(absl::StrCat(where, ": ", s.message()));
  }
  void* scalars = nullptr;
  if (absl::Status s = fromCuda(cudaMalloc(&scalars, 64), where); !s.ok()) {
    cudaStreamDestroy(stream);
    return s;
  }
  return std::unique_ptr<KernelSet>(new CudaKernelSet(device, stream, std::move(blas), scalars));
}

}  // namespace loom::runtime
