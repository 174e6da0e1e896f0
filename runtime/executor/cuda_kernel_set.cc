// The CUDA KernelSet: every call enqueues on one non-blocking compute stream.
#include "runtime/executor/cuda_kernel_set.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
int64_t queryElements(const cpu::AttentionShape& s) {
  return s.batch * s.seq * s.heads * s.head_dim;
}
int64_t keyElements(const cpu::AttentionShape& s) {
  return s.batch * s.seq * s.kv_heads * s.head_dim;
}

using cuda::bf16;
constexpr comm::DType kF32 = comm::DType::kFloat32;
constexpr comm::DType kBf16 = comm::DType::kBFloat16;

bf16* bf(Ref ref) { return static_cast<bf16*>(ref.data); }

// Whether a bf16 kernel can take every one of these tensors; an absent
// optional one (a null bias) takes any type.
bool allBf16(std::initializer_list<Ref> refs) {
  return std::all_of(refs.begin(), refs.end(),
                     [](const Ref& r) { return r.data == nullptr || r.dtype == kBf16; });
}

absl::Status unsupported(const char* op, std::initializer_list<Ref> refs) {
  std::string types;
  for (const Ref& r : refs) {
    absl::StrAppend(&types, types.empty() ? "" : ", ", std::string(comm::dtypeName(r.dtype)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the CUDA ", op, " takes f32 and bf16 tensors; got ", types));
}

// Device scratch for staged tensors: blocks that stay allocated while the
// set lives, handed out in order from the first at every call (reset()).
// A call that needs more than the blocks hold adds a block, at least as
// large as all earlier ones together, without freeing or synchronising
// (queued kernels may still read the others). A call's requests land where
// they landed the step before, so the steady state allocates nothing.
class StagingArena {
 public:
  StagingArena() = default;
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;

  // Frees every block; the caller has synchronised the stream.
  void release() {
    for (const Block& b : blocks_) cudaFree(b.data);
    blocks_.clear();
    reset();
  }
  void reset() {
    block_ = 0;
    offset_ = 0;
  }
  absl::StatusOr<void*> take(size_t bytes) {
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    for (; block_ < blocks_.size(); ++block_, offset_ = 0) {
      if (offset_ + bytes <= blocks_[block_].bytes) {
        void* at = static_cast<char*>(blocks_[block_].data) + offset_;
        offset_ += bytes;
        return at;
      }
    }
    size_t held = 0;
    for (const Block& b : blocks_) held += b.bytes;
    const size_t size = std::max({bytes, held, kMinBlockBytes});
    void* data = nullptr;
    if (cudaMalloc(&data, size) != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is not sticky; clear it
      return absl::ResourceExhaustedError(absl::StrCat(
          "CUDA memory exhausted: ", size, " bytes of staging for bf16 <-> f32 operands"));
    }
    blocks_.push_back({data, size});
    block_ = blocks_.size() - 1;
    offset_ = bytes;
    return data;
  }

 private:
  static constexpr size_t kAlignment = 256;
  static constexpr size_t kMinBlockBytes = size_t{1} << 20;
  struct Block {
    void* data;
    size_t bytes;
  };
  std::vector<Block> blocks_;
  size_t block_ = 0;
  size_t offset_ = 0;
};

// f32 views of one call's tensors on the device, as the CPU set's F32Args:
// an f32 tensor is used in place; a bf16 one is widened into staging
// (operands) or computed there and rounded into place by run() (results).
// The conversions and the kernel are enqueued in that order on the stream.
// A failure to stage is kept and returned by run() before any kernel runs.
class F32Args {
 public:
  F32Args(StagingArena& arena, cudaStream_t stream) : arena_(arena), stream_(stream) {
    arena_.reset();
  }

  // Null for an absent tensor (null data).
  const float* in(Ref ref, int64_t count) {
    if (ref.data == nullptr || ref.dtype == kF32) return ref.f32();
    float* wide = stage(ref, count);
    if (wide != nullptr) {
      status_ = fromKernel(cuda::convert<bf16, float>(bf(ref), wide, count, stream_));
    }
    return status_.ok() ? wide : nullptr;
  }
  float* out(Ref ref, int64_t count) {
    if (ref.data == nullptr || ref.dtype == kF32) return ref.f32();
    float* wide = stage(ref, count);
    if (wide != nullptr) results_.push_back({ref, wide, count});
    return wide;
  }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

  // Launches the kernel (a callable returning cuda::Status) unless staging
  // failed, then rounds the staged results into their bf16 tensors.
  template <typename Launch>
  absl::Status run(Launch launch) {
    if (!status_.ok()) return status_;
    if (absl::Status s = fromKernel(launch()); !s.ok()) return s;
    for (const Result& r : results_) {
      absl::Status s = fromKernel(cuda::convert<float, bf16>(r.wide, bf(r.ref), r.count, stream_));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  struct Result {
    Ref ref;
    float* wide;
    int64_t count;
  };

  float* stage(Ref ref, int64_t count) {
    if (!status_.ok()) return nullptr;
    if (ref.dtype != kBf16) {
      status_ = unsupported("kernel set", {ref});
      return nullptr;
    }
    absl::StatusOr<void*> block = arena_.take(static_cast<size_t>(count) * sizeof(float));
    if (!block.ok()) {
      status_ = block.status();
      return nullptr;
    }
    return static_cast<float*>(*block);
  }

  StagingArena& arena_;
  cudaStream_t stream_;
  absl::Status status_;
  std::vector<Result> results_;
};

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

// Pinned host memory for the executor's host arena: copies from and to it
// are asynchronous DMA at the link's speed (pageable memory would be staged
// by the driver and block the host). Zeroing is the host's: a block comes
// back to the arena only after the copies that used it were waited for.
class PinnedBlockSource : public BlockSource {
 public:
  void* allocate(size_t bytes) override {
    void* block = nullptr;
    if (cudaHostAlloc(&block, std::max<size_t>(bytes, 1), cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is not sticky; clear it
      return nullptr;
    }
    return block;
  }
  void free(void* block) override { cudaFreeHost(block); }
  void zero(void* block, size_t bytes) override { std::memset(block, 0, bytes); }
};

class CudaKernelSet : public KernelSet {
 public:
  CudaKernelSet(int device, cudaStream_t stream, cudaStream_t copy_stream,
                std::unique_ptr<cuda::CublasLtHandle> blas, void* scalars)
      : device_(device),
        stream_(stream),
        copy_stream_(copy_stream),
        blas_(std::move(blas)),
        scalars_(scalars) {}

  ~CudaKernelSet() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
    cudaStreamDestroy(copy_stream_);
    // Collectives this thread issues later must not order after a dead stream.
    if (comm::nccl::currentCudaStream() == stream_) comm::nccl::setCurrentCudaStream(nullptr);
    blas_.reset();
    if (workspace_ != nullptr) cudaFree(workspace_);
    staging_.release();
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
      return absl::InvalidArgumentError(
          absl::StrCat("head_dim ", s.head_dim, " is outside the CUDA attention kernel's [1, ",
                       cuda::kMaxAttentionHeadDim, "]; run this model with --device=cpu"));
    }
    if (s.heads > 65535 || s.batch > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("the CUDA attention kernel takes at most 65535 heads and batch rows; got ",
                       s.heads, " heads and ", s.batch, " rows"));
    }
    return absl::OkStatus();
  }
  absl::Status checkReduceSum(size_t rank) const override {
    if (rank > static_cast<size_t>(cuda::kMaxReduceRank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the CUDA reduce_sum takes rank <= ", cuda::kMaxReduceRank, "; got rank ", rank));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<BlockSource> hostBlockSource() override {
    return std::make_unique<PinnedBlockSource>();
  }
  // The copy stream waits for the compute stream's work so far (the
  // tensor is ready), copies, and records the event finishCopy waits on.
  absl::StatusOr<CopyFence> copyAsync(void* dst, const void* src, size_t bytes,
                                      CopyDirection direction) override {
    const bool toHost = direction == CopyDirection::kToHost;
    const std::string what = toHost ? "copying to the host" : "copying to the GPU";
    absl::StatusOr<cudaEvent_t> ready = takeEvent();
    if (!ready.ok()) return ready.status();
    absl::Status s = fromCuda(cudaEventRecord(*ready, stream_), what);
    if (s.ok()) s = fromCuda(cudaStreamWaitEvent(copy_stream_, *ready, 0), what);
    // A waited event may be recorded again: the wait holds its state.
    events_.push_back(*ready);
    if (!s.ok()) return s;
    if (bytes > 0) {
      s = fromCuda(cudaMemcpyAsync(dst, src, bytes,
                                   toHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                   copy_stream_),
                   what);
      if (!s.ok()) return s;
    }
    absl::StatusOr<cudaEvent_t> done = takeEvent();
    if (!done.ok()) return done.status();
    if (s = fromCuda(cudaEventRecord(*done, copy_stream_), what); !s.ok()) {
      events_.push_back(*done);
      return s;
    }
    return CopyFence{.event = *done, .direction = direction};
  }
  absl::Status finishCopy(const CopyFence& fence) override {
    auto event = static_cast<cudaEvent_t>(fence.event);
    absl::Status s = fromCuda(cudaEventSynchronize(event), "waiting for a host copy");
    if (s.ok() && fence.direction == CopyDirection::kToDevice) {
      s = fromCuda(cudaStreamWaitEvent(stream_, event, 0), "ordering after a copy to the GPU");
    }
    events_.push_back(event);
    return s;
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

  // ---- Kernels ---------------------------------------------------------------
  // Each op runs natively when its float tensors are all bf16 (the bf16
  // templates) or when a template takes its mix (bf16 GEMM inputs with an
  // f32 result, fp32 dgamma/dbeta and table gradients, logits of either
  // type); any other mix runs the f32 kernel on F32Args' staged views, as
  // the CPU set does.
  absl::Status linear(Ref x, Ref w, Ref bias, Ref y, int64_t rows, int64_t in,
                      int64_t out) override {
    const bool bias_as_y = bias.data == nullptr || bias.dtype == y.dtype;
    if (allBf16({x, w}) && bias_as_y) {
      if (y.dtype == kBf16) {
        return fromKernel(cuda::linear<bf16, bf16>(*blas_, bf(x), bf(w), bf(bias), bf(y), rows, in,
                                                   out, stream_));
      }
      if (y.dtype == kF32) {
        return fromKernel(cuda::linear<bf16, float>(*blas_, bf(x), bf(w), bias.f32(), y.f32(), rows,
                                                    in, out, stream_));
      }
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, rows * in);
    const float* wf = a.in(w, in * out);
    const float* biasf = a.in(bias, out);
    float* yf = a.out(y, rows * out);
    return a.run([&] {
      return cuda::linear<float, float>(*blas_, xf, wf, biasf, yf, rows, in, out, stream_);
    });
  }
  absl::Status matmul(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k, int64_t n) override {
    if (allBf16({lhs, rhs})) {
      if (out.dtype == kBf16) {
        return fromKernel(
            cuda::matmul<bf16, bf16>(*blas_, bf(lhs), bf(rhs), bf(out), rows, k, n, stream_));
      }
      if (out.dtype == kF32) {
        return fromKernel(
            cuda::matmul<bf16, float>(*blas_, bf(lhs), bf(rhs), out.f32(), rows, k, n, stream_));
      }
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(lhs, rows * k);
    const float* r = a.in(rhs, k * n);
    float* o = a.out(out, rows * n);
    return a.run([&] { return cuda::matmul<float, float>(*blas_, l, r, o, rows, k, n, stream_); });
  }
  absl::Status matmulTransposeRhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k,
                                  int64_t n) override {
    if (allBf16({lhs, rhs})) {
      if (out.dtype == kBf16) {
        return fromKernel(cuda::matmulTransposeRhs<bf16, bf16>(*blas_, bf(lhs), bf(rhs), bf(out),
                                                               rows, k, n, stream_));
      }
      if (out.dtype == kF32) {
        return fromKernel(cuda::matmulTransposeRhs<bf16, float>(*blas_, bf(lhs), bf(rhs), out.f32(),
                                                                rows, k, n, stream_));
      }
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(lhs, rows * k);
    const float* r = a.in(rhs, n * k);
    float* o = a.out(out, rows * n);
    return a.run([&] {
      return cuda::matmulTransposeRhs<float, float>(*blas_, l, r, o, rows, k, n, stream_);
    });
  }
  absl::Status matmulTransposeLhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t m,
                                  int64_t n) override {
    if (allBf16({lhs, rhs})) {
      if (out.dtype == kBf16) {
        return fromKernel(cuda::matmulTransposeLhs<bf16, bf16>(*blas_, bf(lhs), bf(rhs), bf(out),
                                                               rows, m, n, stream_));
      }
      if (out.dtype == kF32) {
        return fromKernel(cuda::matmulTransposeLhs<bf16, float>(*blas_, bf(lhs), bf(rhs), out.f32(),
                                                                rows, m, n, stream_));
      }
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(lhs, rows * m);
    const float* r = a.in(rhs, rows * n);
    float* o = a.out(out, m * n);
    return a.run([&] {
      return cuda::matmulTransposeLhs<float, float>(*blas_, l, r, o, rows, m, n, stream_);
    });
  }
  absl::Status rmsNorm(Ref x, Ref gamma, Ref y, int64_t rows, int64_t hidden, float eps) override {
    if (allBf16({x, gamma, y})) {
      return fromKernel(cuda::rmsNorm<bf16>(bf(x), bf(gamma), bf(y), rows, hidden, eps, stream_));
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, rows * hidden);
    const float* g = a.in(gamma, hidden);
    float* yf = a.out(y, rows * hidden);
    return a.run([&] { return cuda::rmsNorm<float>(xf, g, yf, rows, hidden, eps, stream_); });
  }
  absl::Status rmsNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, int64_t rows,
                           int64_t hidden, float eps) override {
    const size_t bytes = cuda::rmsNormGradWorkspaceBytes(rows, hidden);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    const int64_t n = rows * hidden;
    // The kernels write dgamma in fp32; a bf16 one is rounded from staging.
    F32Args a(staging_, stream_);
    float* dg = a.out(dgamma, hidden);
    if (allBf16({x, gamma, dy, dx})) {
      return a.run([&] {
        return cuda::rmsNormGrad<bf16>(bf(x), bf(gamma), bf(dy), bf(dx), dg, rows, hidden, eps, *ws,
                                       bytes, stream_);
      });
    }
    const float* xf = a.in(x, n);
    const float* g = a.in(gamma, hidden);
    const float* dyf = a.in(dy, n);
    float* dxf = a.out(dx, n);
    return a.run([&] {
      return cuda::rmsNormGrad<float>(xf, g, dyf, dxf, dg, rows, hidden, eps, *ws, bytes, stream_);
    });
  }
  absl::Status layerNorm(Ref x, Ref gamma, Ref beta, Ref y, int64_t rows, int64_t hidden,
                         float eps) override {
    if (allBf16({x, gamma, beta, y})) {
      return fromKernel(
          cuda::layerNorm<bf16>(bf(x), bf(gamma), bf(beta), bf(y), rows, hidden, eps, stream_));
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, rows * hidden);
    const float* g = a.in(gamma, hidden);
    const float* b = a.in(beta, hidden);
    float* yf = a.out(y, rows * hidden);
    return a.run([&] { return cuda::layerNorm<float>(xf, g, b, yf, rows, hidden, eps, stream_); });
  }
  absl::Status layerNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, Ref dbeta, int64_t rows,
                             int64_t hidden, float eps) override {
    const size_t bytes = cuda::layerNormGradWorkspaceBytes(rows, hidden);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    const int64_t n = rows * hidden;
    F32Args a(staging_, stream_);
    float* dg = a.out(dgamma, hidden);
    float* db = a.out(dbeta, hidden);
    if (allBf16({x, gamma, dy, dx})) {
      return a.run([&] {
        return cuda::layerNormGrad<bf16>(bf(x), bf(gamma), bf(dy), bf(dx), dg, db, rows, hidden,
                                         eps, *ws, bytes, stream_);
      });
    }
    const float* xf = a.in(x, n);
    const float* g = a.in(gamma, hidden);
    const float* dyf = a.in(dy, n);
    float* dxf = a.out(dx, n);
    return a.run([&] {
      return cuda::layerNormGrad<float>(xf, g, dyf, dxf, dg, db, rows, hidden, eps, *ws, bytes,
                                        stream_);
    });
  }
  absl::Status rope(Ref x, Ref y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                    float theta, bool inverse, const plan::RopeScaling& scaling) override {
    if (allBf16({x, y})) {
      return fromKernel(cuda::rope<bf16>(bf(x), bf(y), batch, seq, heads, head_dim, theta, inverse,
                                         scaling, stream_));
    }
    const int64_t n = batch * seq * heads * head_dim;
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, n);
    float* yf = a.out(y, n);
    return a.run([&] {
      return cuda::rope<float>(xf, yf, batch, seq, heads, head_dim, theta, inverse, scaling,
                               stream_);
    });
  }
  absl::Status attention(Ref q, Ref k, Ref v, Ref out, const cpu::AttentionShape& shape) override {
    const cuda::AttentionShape s = cudaShape(shape);
    if (allBf16({q, k, v, out})) {
      return fromKernel(cuda::attention<bf16>(bf(q), bf(k), bf(v), bf(out), nullptr, s, stream_));
    }
    F32Args a(staging_, stream_);
    const float* qf = a.in(q, queryElements(shape));
    const float* kf = a.in(k, keyElements(shape));
    const float* vf = a.in(v, keyElements(shape));
    float* of = a.out(out, queryElements(shape));
    return a.run([&] { return cuda::attention<float>(qf, kf, vf, of, nullptr, s, stream_); });
  }
  // The plan keeps neither the forward's output nor its logsumexp, which
  // the CUDA backward needs: recompute both into the workspace (one more
  // attention forward per layer, as activation recomputation would). In
  // bf16 the recomputed output is bf16, as FlashAttention's backward reads.
  absl::Status attentionGrad(Ref q, Ref k, Ref v, Ref dout, Ref dq, Ref dk, Ref dv,
                             const cpu::AttentionShape& shape) override {
    if (allBf16({q, k, v, dout, dq, dk, dv})) {
      return attentionGradAs<bf16>(bf(q), bf(k), bf(v), bf(dout), bf(dq), bf(dk), bf(dv), shape);
    }
    F32Args a(staging_, stream_);
    const float* qf = a.in(q, queryElements(shape));
    const float* kf = a.in(k, keyElements(shape));
    const float* vf = a.in(v, keyElements(shape));
    const float* doutf = a.in(dout, queryElements(shape));
    float* dqf = a.out(dq, queryElements(shape));
    float* dkf = a.out(dk, keyElements(shape));
    float* dvf = a.out(dv, keyElements(shape));
    if (!a.ok()) return a.status();
    if (absl::Status st = attentionGradAs<float>(qf, kf, vf, doutf, dqf, dkf, dvf, shape);
        !st.ok()) {
      return st;
    }
    return a.run([] { return cuda::Status(); });
  }
  absl::Status softmax(Ref x, Ref y, int64_t rows, int64_t n) override {
    if (allBf16({x, y})) return fromKernel(cuda::softmax<bf16>(bf(x), bf(y), rows, n, stream_));
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, rows * n);
    float* yf = a.out(y, rows * n);
    return a.run([&] { return cuda::softmax<float>(xf, yf, rows, n, stream_); });
  }
  absl::Status softmaxGrad(Ref y, Ref dy, Ref dx, int64_t rows, int64_t n) override {
    if (allBf16({y, dy, dx})) {
      return fromKernel(cuda::softmaxGrad<bf16>(bf(y), bf(dy), bf(dx), rows, n, stream_));
    }
    F32Args a(staging_, stream_);
    const float* yf = a.in(y, rows * n);
    const float* dyf = a.in(dy, rows * n);
    float* dxf = a.out(dx, rows * n);
    return a.run([&] { return cuda::softmaxGrad<float>(yf, dyf, dxf, rows, n, stream_); });
  }
  absl::Status silu(Ref x, Ref y, int64_t count) override {
    if (allBf16({x, y})) return fromKernel(cuda::silu<bf16>(bf(x), bf(y), count, stream_));
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, count);
    float* yf = a.out(y, count);
    return a.run([&] { return cuda::silu<float>(xf, yf, count, stream_); });
  }
  absl::Status siluGrad(Ref x, Ref dy, Ref dx, int64_t count) override {
    if (allBf16({x, dy, dx})) {
      return fromKernel(cuda::siluGrad<bf16>(bf(x), bf(dy), bf(dx), count, stream_));
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, count);
    const float* dyf = a.in(dy, count);
    float* dxf = a.out(dx, count);
    return a.run([&] { return cuda::siluGrad<float>(xf, dyf, dxf, count, stream_); });
  }
  absl::Status gelu(Ref x, Ref y, int64_t count) override {
    if (allBf16({x, y})) return fromKernel(cuda::gelu<bf16>(bf(x), bf(y), count, stream_));
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, count);
    float* yf = a.out(y, count);
    return a.run([&] { return cuda::gelu<float>(xf, yf, count, stream_); });
  }
  absl::Status geluGrad(Ref x, Ref dy, Ref dx, int64_t count) override {
    if (allBf16({x, dy, dx})) {
      return fromKernel(cuda::geluGrad<bf16>(bf(x), bf(dy), bf(dx), count, stream_));
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, count);
    const float* dyf = a.in(dy, count);
    float* dxf = a.out(dx, count);
    return a.run([&] { return cuda::geluGrad<float>(xf, dyf, dxf, count, stream_); });
  }
  absl::Status add(Ref lhs, Ref rhs, Ref out, int64_t count) override {
    if (allBf16({lhs, rhs, out})) {
      return fromKernel(cuda::add<bf16>(bf(lhs), bf(rhs), bf(out), count, stream_));
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(lhs, count);
    const float* r = a.in(rhs, count);
    float* o = a.out(out, count);
    return a.run([&] { return cuda::add<float>(l, r, o, count, stream_); });
  }
  absl::Status mul(Ref lhs, Ref rhs, Ref out, int64_t count) override {
    if (allBf16({lhs, rhs, out})) {
      return fromKernel(cuda::mul<bf16>(bf(lhs), bf(rhs), bf(out), count, stream_));
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(lhs, count);
    const float* r = a.in(rhs, count);
    float* o = a.out(out, count);
    return a.run([&] { return cuda::mul<float>(l, r, o, count, stream_); });
  }
  absl::Status biasAdd(Ref x, Ref bias, Ref y, int64_t rows, int64_t out) override {
    if (allBf16({x, bias, y})) {
      return fromKernel(cuda::biasAdd<bf16>(bf(x), bf(bias), bf(y), rows, out, stream_));
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, rows * out);
    const float* b = a.in(bias, out);
    float* yf = a.out(y, rows * out);
    return a.run([&] { return cuda::biasAdd<float>(xf, b, yf, rows, out, stream_); });
  }
  absl::Status reduceSum(Ref x, std::span<const int64_t> shape, std::span<const int64_t> dims,
                         Ref out) override {
    if (allBf16({x, out})) {
      return fromKernel(cuda::reduceSum<bf16>(bf(x), shape, dims, bf(out), stream_));
    }
    int64_t total = 1;
    int64_t kept = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      total *= shape[d];
      if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) {
        kept *= shape[d];
      }
    }
    F32Args a(staging_, stream_);
    const float* xf = a.in(x, total);
    float* o = a.out(out, kept);
    return a.run([&] { return cuda::reduceSum<float>(xf, shape, dims, o, stream_); });
  }
  absl::Status embedding(const int32_t* ids, Ref table, Ref out, int64_t tokens, int64_t hidden,
                         int64_t row_begin, int64_t table_rows) override {
    if (allBf16({table, out})) {
      return fromKernel(cuda::embedding<bf16, int32_t>(ids, bf(table), bf(out), tokens, hidden,
                                                       row_begin, table_rows, stream_));
    }
    F32Args a(staging_, stream_);
    const float* t = a.in(table, table_rows * hidden);
    float* o = a.out(out, tokens * hidden);
    return a.run([&] {
      return cuda::embedding<float, int32_t>(ids, t, o, tokens, hidden, row_begin, table_rows,
                                             stream_);
    });
  }
  // The kernel sums rows in fp32 whatever dy is; a bf16 table gradient is
  // rounded from staging.
  absl::Status embeddingGrad(const int32_t* ids, Ref dy, Ref dtable, int64_t tokens, int64_t hidden,
                             int64_t row_begin, int64_t table_rows) override {
    if (dtable.dtype == kBf16) {
      return embeddingGradToBf16(ids, dy, dtable, tokens, hidden, row_begin, table_rows);
    }
    F32Args a(staging_, stream_);
    float* dt = a.out(dtable, table_rows * hidden);
    if (dy.dtype == kBf16) {
      return a.run([&] {
        return cuda::embeddingGrad<bf16, int32_t>(ids, bf(dy), dt, tokens, hidden, row_begin,
                                                  table_rows, stream_);
      });
    }
    return a.run([&] {
      return cuda::embeddingGrad<float, int32_t>(ids, dy.f32(), dt, tokens, hidden, row_begin,
                                                 table_rows, stream_);
    });
  }
  absl::Status crossEntropy(Ref logits, const int32_t* labels, float* loss, int64_t tokens,
                            int64_t vocab) override {
    const size_t bytes = cuda::crossEntropyWorkspaceBytes(tokens);
    absl::StatusOr<void*> ws = workspace(bytes);
    if (!ws.ok()) return ws.status();
    if (logits.dtype == kBf16) {
      return fromKernel(cuda::crossEntropy<bf16, int32_t>(bf(logits), labels, loss, tokens, vocab,
                                                          *ws, bytes, stream_));
    }
    return fromKernel(cuda::crossEntropy<float, int32_t>(logits.f32(), labels, loss, tokens, vocab,
                                                         *ws, bytes, stream_));
  }
  absl::Status crossEntropyGrad(Ref logits, const int32_t* labels, float dloss, float scale,
                                Ref dlogits, int64_t tokens, int64_t vocab) override {
    if (allBf16({logits, dlogits})) {
      return fromKernel(cuda::crossEntropyGrad<bf16, int32_t>(bf(logits), labels, dloss, scale,
                                                              bf(dlogits), tokens, vocab, stream_));
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(logits, tokens * vocab);
    float* d = a.out(dlogits, tokens * vocab);
    return a.run([&] {
      return cuda::crossEntropyGrad<float, int32_t>(l, labels, dloss, scale, d, tokens, vocab,
                                                    stream_);
    });
  }
  absl::Status vocabMax(Ref logits, float* max, int64_t tokens, int64_t local,
                        int64_t valid) override {
    if (logits.dtype == kBf16) {
      return fromKernel(cuda::vocabMax<bf16>(bf(logits), max, tokens, local, valid, stream_));
    }
    return fromKernel(cuda::vocabMax<float>(logits.f32(), max, tokens, local, valid, stream_));
  }
  absl::Status vocabStats(Ref logits, const int32_t* labels, const float* max, float* stats,
                          int64_t tokens, int64_t local, int64_t valid,
                          int64_t row_begin) override {
    if (logits.dtype == kBf16) {
      return fromKernel(cuda::vocabStats<bf16>(bf(logits), labels, max, stats, tokens, local, valid,
                                               row_begin, stream_));
    }
    return fromKernel(cuda::vocabStats<float>(logits.f32(), labels, max, stats, tokens, local,
                                              valid, row_begin, stream_));
  }
  absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) override {
    return fromKernel(cuda::vocabCrossEntropy(stats, loss, tokens, stream_));
  }
  absl::Status vocabCrossEntropyGrad(Ref logits, const int32_t* labels, const float* max,
                                     const float* stats, float dloss, float scale, Ref dlogits,
                                     int64_t tokens, int64_t local, int64_t valid,
                                     int64_t row_begin) override {
    if (allBf16({logits, dlogits})) {
      return fromKernel(cuda::vocabCrossEntropyGrad<bf16>(bf(logits), labels, max, stats, dloss,
                                                          scale, bf(dlogits), tokens, local, valid,
                                                          row_begin, stream_));
    }
    F32Args a(staging_, stream_);
    const float* l = a.in(logits, tokens * local);
    float* d = a.out(dlogits, tokens * local);
    return a.run([&] {
      return cuda::vocabCrossEntropyGrad<float>(l, labels, max, stats, dloss, scale, d, tokens,
                                                local, valid, row_begin, stream_);
    });
  }

  // ---- Precision ---------------------------------------------------------------
  absl::Status convert(Ref src, Ref dst, int64_t count) override {
    if (src.dtype == dst.dtype) {
      return copy(dst.data, src.data, static_cast<size_t>(count) * comm::dtypeSize(src.dtype));
    }
    if (src.dtype == kF32 && dst.dtype == kBf16) {
      return fromKernel(cuda::convert<float, bf16>(src.f32(), bf(dst), count, stream_));
    }
    if (src.dtype == kBf16 && dst.dtype == kF32) {
      return fromKernel(cuda::convert<bf16, float>(bf(src), dst.f32(), count, stream_));
    }
    return unsupported("convert", {src, dst});
  }
  absl::Status sumChunks(Ref src, int64_t chunks, int64_t count, bool average, Ref dst) override {
    if (src.dtype == kF32 && dst.dtype == kF32) {
      return fromKernel(
          cuda::sumChunks<float, float>(src.f32(), chunks, count, average, dst.f32(), stream_));
    }
    if (src.dtype == kF32 && dst.dtype == kBf16) {
      return fromKernel(
          cuda::sumChunks<float, bf16>(src.f32(), chunks, count, average, bf(dst), stream_));
    }
    if (src.dtype == kBf16 && dst.dtype == kF32) {
      return fromKernel(
          cuda::sumChunks<bf16, float>(bf(src), chunks, count, average, dst.f32(), stream_));
    }
    if (src.dtype == kBf16 && dst.dtype == kBf16) {
      return fromKernel(
          cuda::sumChunks<bf16, bf16>(bf(src), chunks, count, average, bf(dst), stream_));
    }
    return unsupported("sumChunks", {src, dst});
  }

  // ---- Optimizer ---------------------------------------------------------------
  absl::Status addSquaredNorm(Ref grads, int64_t count, int64_t copies, double* total) override {
    absl::StatusOr<void*> ws = workspace(cuda_clip::kSquaredNormBlocks * sizeof(double));
    if (!ws.ok()) return ws.status();
    auto* scratch = static_cast<double*>(*ws);
    const cudaError_t error =
        grads.dtype == kBf16
            ? cuda_clip::addSquaredNorm(bf(grads), count, copies, scratch, total, stream_)
            : cuda_clip::addSquaredNorm(grads.f32(), count, copies, scratch, total, stream_);
    return fromCuda(error, "launching the squared gradient norm");
  }
  absl::Status clipCoefficient(const double* total, double max_norm, float* coefficient) override {
    return fromCuda(cuda_clip::clipCoefficient(total, max_norm, coefficient, stream_),
                    "launching the clip coefficient");
  }
  // One launch per bucket whatever the types: the grads are read as they
  // are (bf16 or f32) and a master's rounded copy is written in the same pass.
  absl::Status adamw(const optim::AdamWConfig& config, int64_t step, Ref params, Ref grads,
                     float* exp_avg, float* exp_avg_sq, float* master, int64_t count,
                     const float* grad_scale) override {
    if (master == nullptr) {
      if (params.dtype != kF32) {
        return absl::InvalidArgumentError(absl::StrCat("AdamW on ",
                                                       std::string(comm::dtypeName(params.dtype)),
                                                       " parameters needs an f32 master copy"));
      }
      if (grads.dtype == kBf16) {
        return fromKernel(cuda::adamwStep<bf16>(config, step, params.f32(), bf(grads), exp_avg,
                                                exp_avg_sq, count, grad_scale, stream_));
      }
      return fromKernel(cuda::adamwStep<float>(config, step, params.f32(), grads.f32(), exp_avg,
                                               exp_avg_sq, count, grad_scale, stream_));
    }
    if (params.dtype == kBf16 && grads.dtype == kBf16) {
      return fromKernel(cuda::adamwStepWithMaster<bf16, bf16>(config, step, bf(params), bf(grads),
                                                              exp_avg, exp_avg_sq, master, count,
                                                              grad_scale, stream_));
    }
    if (params.dtype == kBf16) {
      return fromKernel(cuda::adamwStepWithMaster<bf16, float>(config, step, bf(params),
                                                               grads.f32(), exp_avg, exp_avg_sq,
                                                               master, count, grad_scale, stream_));
    }
    if (grads.dtype == kBf16) {
      return fromKernel(cuda::adamwStepWithMaster<float, bf16>(config, step, params.f32(),
                                                               bf(grads), exp_avg, exp_avg_sq,
                                                               master, count, grad_scale, stream_));
    }
    return fromKernel(cuda::adamwStepWithMaster<float, float>(config, step, params.f32(),
                                                              grads.f32(), exp_avg, exp_avg_sq,
                                                              master, count, grad_scale, stream_));
  }

  // A bf16 table gradient, summed in f32 and rounded once, a block of rows at
  // a time: the f32 sums of at most kTableGradChunkBytes are staged, not a
  // whole f32 table (2 GiB for a 128K x 4K vocabulary). Each block's kernel
  // scans every token id and adds its rows' tokens in token order, so every
  // row's sum is the one the whole-table kernel computes.
  absl::Status embeddingGradToBf16(const int32_t* ids, Ref dy, Ref dtable, int64_t tokens,
                                   int64_t hidden, int64_t row_begin, int64_t table_rows) {
    static constexpr int64_t kTableGradChunkBytes = int64_t{64} << 20;
    const int64_t rows_per_chunk =
        std::max<int64_t>(1, kTableGradChunkBytes / (hidden * static_cast<int64_t>(sizeof(float))));
    for (int64_t first = 0; first < table_rows; first += rows_per_chunk) {
      const int64_t rows = std::min(rows_per_chunk, table_rows - first);
      F32Args a(staging_, stream_);
      float* sums = a.out(dtable.at(first * hidden), rows * hidden);
      absl::Status s = a.run([&] {
        return dy.dtype == kBf16
                   ? cuda::embeddingGrad<bf16, int32_t>(ids, bf(dy), sums, tokens, hidden,
                                                        row_begin + first, rows, stream_)
                   : cuda::embeddingGrad<float, int32_t>(ids, dy.f32(), sums, tokens, hidden,
                                                         row_begin + first, rows, stream_);
      });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  absl::Status attentionGradAs(const T* q, const T* k, const T* v, const T* dout, T* dq, T* dk,
                               T* dv, const cpu::AttentionShape& shape) {
    const size_t out_bytes = static_cast<size_t>(queryElements(shape)) * sizeof(T);
    const size_t lse_offset = (out_bytes + 255) & ~size_t{255};
    const size_t lse_bytes =
        static_cast<size_t>(shape.batch * shape.heads * shape.seq) * sizeof(float);
    absl::StatusOr<void*> ws = workspace(lse_offset + lse_bytes);
    if (!ws.ok()) return ws.status();
    T* out = static_cast<T*>(*ws);
    float* lse = reinterpret_cast<float*>(static_cast<char*>(*ws) + lse_offset);
    const cuda::AttentionShape s = cudaShape(shape);
    if (absl::Status st = fromKernel(cuda::attention<T>(q, k, v, out, lse, s, stream_)); !st.ok()) {
      return st;
    }
    return fromKernel(cuda::attentionGrad<T>(q, k, v, out, dout, lse, dq, dk, dv, s, stream_));
  }

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

  // An event from the free list, or a new one (without timing: cheaper).
  absl::StatusOr<cudaEvent_t> takeEvent() {
    if (!events_.empty()) {
      cudaEvent_t event = events_.back();
      events_.pop_back();
      return event;
    }
    cudaEvent_t event = nullptr;
    if (absl::Status s = fromCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                  "creating a copy event");
        !s.ok()) {
      return s;
    }
    return event;
  }

  int device_;
  cudaStream_t stream_;
  // Offload's copies between device and host memory, beside compute; the
  // events their fences hand out, reused once waited.
  cudaStream_t copy_stream_;
  std::vector<cudaEvent_t> events_;
  std::unique_ptr<cuda::CublasLtHandle> blas_;
  void* scalars_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // bf16 <-> f32 staging of mixed-type calls (F32Args); apart from the
  // workspace, which a staged call may need at the same time.
  StagingArena staging_;
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
  cudaStream_t copy_stream = nullptr;
  if (absl::Status s =
          fromCuda(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), where);
      !s.ok()) {
    cudaStreamDestroy(stream);
    return s;
  }
  auto destroyStreams = [&] {
    cudaStreamDestroy(copy_stream);
    cudaStreamDestroy(stream);
  };
  std::unique_ptr<cuda::CublasLtHandle> blas;
  if (cuda::Status s = cuda::CublasLtHandle::create(&blas); !s.ok()) {
    destroyStreams();
    return absl::InternalError(absl::StrCat(where, ": ", s.message()));
  }
  void* scalars = nullptr;
  if (absl::Status s = fromCuda(cudaMalloc(&scalars, 64), where); !s.ok()) {
    destroyStreams();
    return s;
  }
  return std::unique_ptr<KernelSet>(
      new CudaKernelSet(device, stream, copy_stream, std::move(blas), scalars));
}

}  // namespace loom::runtime
