// The KernelSet of the host: the CPU kernels, memcpy, and waits that block.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/half_float.h"
#include "runtime/executor/kernel_set.h"

namespace loom::runtime {
namespace {

// f32 views of a kernel call's tensors, for the f32 CPU kernels: an f32
// tensor is used in place; a bf16 one is widened into scratch (operands) or
// computed in scratch and rounded into place by commit() (results). The
// executor has checked that every float tensor is f32 or bf16.
class F32Args {
 public:
  const float* in(Ref ref, int64_t count) {
    if (ref.dtype == comm::DType::kFloat32) return ref.f32();
    std::vector<float>& wide = scratch_.emplace_back(count);
    const uint16_t* bits = static_cast<const uint16_t*>(ref.data);
    for (int64_t i = 0; i < count; ++i) wide[i] = comm::bfloat16ToFloat(bits[i]);
    return wide.data();
  }
  float* out(Ref ref, int64_t count) {
    if (ref.dtype == comm::DType::kFloat32) return ref.f32();
    std::vector<float>& wide = scratch_.emplace_back(count);
    results_.push_back({ref, &wide});
    return wide.data();
  }
  absl::Status commit() {
    for (const auto& [ref, wide] : results_) {
      uint16_t* bits = static_cast<uint16_t*>(ref.data);
      for (size_t i = 0; i < wide->size(); ++i) bits[i] = comm::floatToBfloat16((*wide)[i]);
    }
    results_.clear();
    return absl::OkStatus();
  }

 private:
  std::deque<std::vector<float>> scratch_;  // stable addresses
  std::vector<std::pair<Ref, std::vector<float>*>> results_;
};

class CpuKernelSet : public KernelSet {
 public:
  std::string name() const override { return "CPU"; }
  comm::Device device() const override { return comm::Device::cpu(); }
  bool hostAddressable() const override { return true; }
  std::unique_ptr<BlockSource> blockSource() override { return runtime::hostBlockSource(); }
  absl::Status activate() override { return absl::OkStatus(); }
  absl::Status await(comm::Work& work, absl::Duration timeout) override {
    return work.wait(timeout);
  }
  absl::Status synchronize() override { return absl::OkStatus(); }
  void* scalars() override { return scalars_; }

  // Host memory is the device's: the arena allocates the same way, and a
  // copy is a memcpy that is done when it returns.
  std::unique_ptr<BlockSource> hostBlockSource() override { return runtime::hostBlockSource(); }
  absl::StatusOr<CopyFence> copyAsync(void* dst, const void* src, size_t bytes,
                                      CopyDirection direction) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return CopyFence{.event = nullptr, .direction = direction};
  }
  absl::Status finishCopy(const CopyFence&) override { return absl::OkStatus(); }

  absl::Status copy(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status copy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                      size_t height) override {
    if (width == 0) return absl::OkStatus();
    for (size_t row = 0; row < height; ++row) {
      std::memcpy(static_cast<char*>(dst) + row * dst_pitch,
                  static_cast<const char*>(src) + row * src_pitch, width);
    }
    return absl::OkStatus();
  }
  absl::Status zero2D(void* dst, size_t pitch, size_t width, size_t height) override {
    if (width == 0) return absl::OkStatus();
    for (size_t row = 0; row < height; ++row)
      std::memset(static_cast<char*>(dst) + row * pitch, 0, width);
    return absl::OkStatus();
  }
  absl::Status upload(void* dst, const void* host, size_t bytes) override {
    return copy(dst, host, bytes);
  }
  absl::Status download(void* host, const void* src, size_t bytes) override {
    return copy(host, src, bytes);
  }

  absl::Status linear(Ref x, Ref w, Ref bias, Ref y, int64_t rows, int64_t in,
                      int64_t out) override {
    F32Args a;
    cpu::linear(a.in(x, rows * in), a.in(w, in * out), bias.data ? a.in(bias, out) : nullptr,
                a.out(y, rows * out), rows, in, out);
    return a.commit();
  }
  absl::Status matmul(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k, int64_t n) override {
    F32Args a;
    cpu::matmul(a.in(lhs, rows * k), a.in(rhs, k * n), a.out(out, rows * n), rows, k, n);
    return a.commit();
  }
  absl::Status matmulTransposeRhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t k,
                                  int64_t n) override {
    F32Args a;
    cpu::matmulTransposeRhs(a.in(lhs, rows * k), a.in(rhs, n * k), a.out(out, rows * n), rows, k,
                            n);
    return a.commit();
  }
  absl::Status matmulTransposeLhs(Ref lhs, Ref rhs, Ref out, int64_t rows, int64_t m,
                                  int64_t n) override {
    F32Args a;
    cpu::matmulTransposeLhs(a.in(lhs, rows * m), a.in(rhs, rows * n), a.out(out, m * n), rows, m,
                            n);
    return a.commit();
  }
  absl::Status rmsNorm(Ref x, Ref gamma, Ref y, int64_t rows, int64_t hidden, float eps) override {
    F32Args a;
    const int64_t n = rows * hidden;
    cpu::rmsNorm(a.in(x, n), a.in(gamma, hidden), a.out(y, n), rows, hidden, eps);
    return a.commit();
  }
  absl::Status rmsNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, int64_t rows,
                           int64_t hidden, float eps) override {
    F32Args a;
    const int64_t n = rows * hidden;
    cpu::rmsNormGrad(a.in(x, n), a.in(gamma, hidden), a.in(dy, n), a.out(dx, n),
                     a.out(dgamma, hidden), rows, hidden, eps);
    return a.commit();
  }
  absl::Status layerNorm(Ref x, Ref gamma, Ref beta, Ref y, int64_t rows, int64_t hidden,
                         float eps) override {
    F32Args a;
    const int64_t n = rows * hidden;
    cpu::layerNorm(a.in(x, n), a.in(gamma, hidden), a.in(beta, hidden), a.out(y, n), rows, hidden,
                   eps);
    return a.commit();
  }
  absl::Status layerNormGrad(Ref x, Ref gamma, Ref dy, Ref dx, Ref dgamma, Ref dbeta, int64_t rows,
                             int64_t hidden, float eps) override {
    F32Args a;
    const int64_t n = rows * hidden;
    cpu::layerNormGrad(a.in(x, n), a.in(gamma, hidden), a.in(dy, n), a.out(dx, n),
                       a.out(dgamma, hidden), a.out(dbeta, hidden), rows, hidden, eps);
    return a.commit();
  }
  absl::Status rope(Ref x, Ref y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                    float theta, bool inverse, const plan::RopeScaling& scaling) override {
    F32Args a;
    const int64_t n = batch * seq * heads * head_dim;
    cpu::rope(a.in(x, n), a.out(y, n), batch, seq, heads, head_dim, theta, inverse, scaling);
    return a.commit();
  }
  absl::Status attention(Ref q, Ref k, Ref v, Ref out, const cpu::AttentionShape& s) override {
    F32Args a;
    const int64_t nq = s.batch * s.seq * s.heads * s.head_dim;
    const int64_t nk = s.batch * s.seq * s.kv_heads * s.head_dim;
    cpu::attention(a.in(q, nq), a.in(k, nk), a.in(v, nk), a.out(out, nq), s);
    return a.commit();
  }
  absl::Status attentionGrad(Ref q, Ref k, Ref v, Ref dout, Ref dq, Ref dk, Ref dv,
                             const cpu::AttentionShape& s) override {
    F32Args a;
    const int64_t nq = s.batch * s.seq * s.heads * s.head_dim;
    const int64_t nk = s.batch * s.seq * s.kv_heads * s.head_dim;
    cpu::attentionGrad(a.in(q, nq), a.in(k, nk), a.in(v, nk), a.in(dout, nq), a.out(dq, nq),
                       a.out(dk, nk), a.out(dv, nk), s);
    return a.commit();
  }
  absl::Status softmax(Ref x, Ref y, int64_t rows, int64_t n) override {
    F32Args a;
    cpu::softmax(a.in(x, rows * n), a.out(y, rows * n), rows, n);
    return a.commit();
  }
  absl::Status softmaxGrad(Ref y, Ref dy, Ref dx, int64_t rows, int64_t n) override {
    F32Args a;
    cpu::softmaxGrad(a.in(y, rows * n), a.in(dy, rows * n), a.out(dx, rows * n), rows, n);
    return a.commit();
  }
  absl::Status silu(Ref x, Ref y, int64_t count) override {
    F32Args a;
    cpu::silu(a.in(x, count), a.out(y, count), count);
    return a.commit();
  }
  absl::Status siluGrad(Ref x, Ref dy, Ref dx, int64_t count) override {
    F32Args a;
    cpu::siluGrad(a.in(x, count), a.in(dy, count), a.out(dx, count), count);
    return a.commit();
  }
  absl::Status gelu(Ref x, Ref y, int64_t count) override {
    F32Args a;
    cpu::gelu(a.in(x, count), a.out(y, count), count);
    return a.commit();
  }
  absl::Status geluGrad(Ref x, Ref dy, Ref dx, int64_t count) override {
    F32Args a;
    cpu::geluGrad(a.in(x, count), a.in(dy, count), a.out(dx, count), count);
    return a.commit();
  }
  absl::Status add(Ref x, Ref y, Ref out, int64_t count) override {
    F32Args a;
    cpu::add(a.in(x, count), a.in(y, count), a.out(out, count), count);
    return a.commit();
  }
  absl::Status mul(Ref x, Ref y, Ref out, int64_t count) override {
    F32Args a;
    cpu::mul(a.in(x, count), a.in(y, count), a.out(out, count), count);
    return a.commit();
  }
  absl::Status biasAdd(Ref x, Ref bias, Ref y, int64_t rows, int64_t out) override {
    F32Args a;
    cpu::biasAdd(a.in(x, rows * out), a.in(bias, out), a.out(y, rows * out), rows, out);
    return a.commit();
  }
  absl::Status reduceSum(Ref x, std::span<const int64_t> shape, std::span<const int64_t> dims,
                         Ref out) override {
    int64_t total = 1, kept = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      total *= shape[d];
      if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
        kept *= shape[d];
    }
    F32Args a;
    cpu::reduceSum(a.in(x, total), shape, dims, a.out(out, kept));
    return a.commit();
  }
  absl::Status embedding(const int32_t* ids, Ref table, Ref out, int64_t tokens, int64_t hidden,
                         int64_t row_begin, int64_t table_rows) override {
    F32Args a;
    cpu::embedding(ids, a.in(table, table_rows * hidden), a.out(out, tokens * hidden), tokens,
                   hidden, row_begin, table_rows);
    return a.commit();
  }
  absl::Status embeddingGrad(const int32_t* ids, Ref dy, Ref dtable, int64_t tokens, int64_t hidden,
                             int64_t row_begin, int64_t table_rows) override {
    F32Args a;
    cpu::embeddingGrad(ids, a.in(dy, tokens * hidden), a.out(dtable, table_rows * hidden), tokens,
                       hidden, row_begin, table_rows);
    return a.commit();
  }
  absl::Status crossEntropy(Ref logits, const int32_t* labels, float* loss, int64_t tokens,
                            int64_t vocab) override {
    F32Args a;
    *loss = cpu::crossEntropy(a.in(logits, tokens * vocab), labels, tokens, vocab);
    return a.commit();
  }
  absl::Status crossEntropyGrad(Ref logits, const int32_t* labels, float dloss, float scale,
                                Ref dlogits, int64_t tokens, int64_t vocab) override {
    F32Args a;
    cpu::crossEntropyGrad(a.in(logits, tokens * vocab), labels, dloss, scale,
                          a.out(dlogits, tokens * vocab), tokens, vocab);
    return a.commit();
  }
  absl::Status vocabMax(Ref logits, float* max, int64_t tokens, int64_t local,
                        int64_t valid) override {
    F32Args a;
    cpu::vocabMax(a.in(logits, tokens * local), max, tokens, local, valid);
    return a.commit();
  }
  absl::Status vocabStats(Ref logits, const int32_t* labels, const float* max, float* stats,
                          int64_t tokens, int64_t local, int64_t valid,
                          int64_t row_begin) override {
    F32Args a;
    cpu::vocabStats(a.in(logits, tokens * local), labels, max, stats, tokens, local, valid,
                    row_begin);
    return a.commit();
  }
  absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) override {
    *loss = cpu::vocabCrossEntropy(stats, tokens);
    return absl::OkStatus();
  }
  absl::Status vocabCrossEntropyGrad(Ref logits, const int32_t* labels, const float* max,
                                     const float* stats, float dloss, float scale, Ref dlogits,
                                     int64_t tokens, int64_t local, int64_t valid,
                                     int64_t row_begin) override {
    F32Args a;
    cpu::vocabCrossEntropyGrad(a.in(logits, tokens * local), labels, max, stats, dloss, scale,
                               a.out(dlogits, tokens * local), tokens, local, valid, row_begin);
    return a.commit();
  }

  absl::Status convert(Ref src, Ref dst, int64_t count) override {
    if (src.dtype == dst.dtype) return copy(dst.data, src.data, count * comm::dtypeSize(src.dtype));
    F32Args a;
    const float* values = a.in(src, count);
    float* out = a.out(dst, count);
    if (out != values) std::memcpy(out, values, count * sizeof(float));
    return a.commit();
  }
  absl::Status sumChunks(Ref src, int64_t chunks, int64_t count, bool average, Ref dst) override {
    F32Args a;
    const float* in = a.in(src, chunks * count);
    std::vector<float> sum(in, in + count);
    for (int64_t c = 1; c < chunks; ++c) {
      const float* chunk = in + c * count;
      for (int64_t i = 0; i < count; ++i) sum[i] += chunk[i];
    }
    if (average) {
      for (float& v : sum) v /= static_cast<float>(chunks);
    }
    std::memcpy(a.out(dst, count), sum.data(), count * sizeof(float));
    return a.commit();
  }

  absl::Status addSquaredNorm(Ref grads, int64_t count, int64_t copies, double* total) override {
    F32Args a;
    *total += optim::localSquaredNorm(a.in(grads, count), count) / copies;
    return a.commit();
  }
  absl::Status clipCoefficient(const double* total, double max_norm, float* coefficient) override {
    *coefficient = optim::clipCoefficient(*total, max_norm);
    return absl::OkStatus();
  }
  absl::Status adamw(const optim::AdamWConfig& config, int64_t step, Ref params, Ref grads,
                     float* exp_avg, float* exp_avg_sq, float* master, int64_t count,
                     const float* grad_scale) override {
    if (master == nullptr && params.dtype != comm::DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("AdamW on ",
                                                     std::string(comm::dtypeName(params.dtype)),
                                                     " parameters needs an f32 master copy"));
    }
    // Clipping scales a copy: the gradients stay as the backward pass left them.
    F32Args a;
    const float* g = a.in(grads, count);
    std::vector<float> scaled;
    if (grad_scale != nullptr && *grad_scale < 1.0f) {
      scaled.assign(g, g + count);
      optim::scaleGradients(scaled.data(), count, *grad_scale);
      g = scaled.data();
    }
    float* weights = master != nullptr ? master : params.f32();
    optim::adamwStep(config, step, weights, g, exp_avg, exp_avg_sq, count);
    if (master == nullptr) return a.commit();
    return convert({master, comm::DType::kFloat32}, params, count);
  }

 private:
  alignas(64) unsigned char scalars_[64] = {};
};

}  // namespace

std::unique_ptr<KernelSet> cpuKernelSet() { return std::make_unique<CpuKernelSet>(); }

}  // namespace loom::runtime
