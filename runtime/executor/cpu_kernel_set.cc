// The KernelSet of the host: the CPU kernels, memcpy, and waits that block.
#include <cstring>
#include <memory>
#include <string>

#include "runtime/executor/kernel_set.h"

namespace loom::runtime {
namespace {

class CpuKernelSet : public KernelSet {
 public:
  std::string name() const override { return "CPU"; }
  comm::Device device() const override { return comm::Device::cpu(); }
  bool hostAddressable() const override { return true; }
  std::unique_ptr<BlockSource> blockSource() override { return hostBlockSource(); }
  absl::Status activate() override { return absl::OkStatus(); }
  absl::Status await(comm::Work& work, absl::Duration timeout) override { return work.wait(timeout); }
  absl::Status synchronize() override { return absl::OkStatus(); }
  void* scalars() override { return scalars_; }

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
    for (size_t row = 0; row < height; ++row) std::memset(static_cast<char*>(dst) + row * pitch, 0, width);
    return absl::OkStatus();
  }
  absl::Status upload(void* dst, const void* host, size_t bytes) override { return copy(dst, host, bytes); }
  absl::Status download(void* host, const void* src, size_t bytes) override { return copy(host, src, bytes); }

  absl::Status linear(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                      int64_t in, int64_t out) override {
    cpu::linear(x, w, bias, y, rows, in, out);
    return absl::OkStatus();
  }
  absl::Status matmul(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k,
                      int64_t n) override {
    cpu::matmul(lhs, rhs, out, rows, k, n);
    return absl::OkStatus();
  }
  absl::Status matmulTransposeRhs(const float* lhs, const float* rhs, float* out, int64_t rows,
                                  int64_t k, int64_t n) override {
    cpu::matmulTransposeRhs(lhs, rhs, out, rows, k, n);
    return absl::OkStatus();
  }
  absl::Status matmulTransposeLhs(const float* lhs, const float* rhs, float* out, int64_t rows,
                                  int64_t m, int64_t n) override {
    cpu::matmulTransposeLhs(lhs, rhs, out, rows, m, n);
    return absl::OkStatus();
  }
  absl::Status rmsNorm(const float* x, const float* gamma, float* y, int64_t rows, int64_t hidden,
                       float eps) override {
    cpu::rmsNorm(x, gamma, y, rows, hidden, eps);
    return absl::OkStatus();
  }
  absl::Status rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                           float* dgamma, int64_t rows, int64_t hidden, float eps) override {
    cpu::rmsNormGrad(x, gamma, dy, dx, dgamma, rows, hidden, eps);
    return absl::OkStatus();
  }
  absl::Status layerNorm(const float* x, const float* gamma, const float* beta, float* y,
                         int64_t rows, int64_t hidden, float eps) override {
    cpu::layerNorm(x, gamma, beta, y, rows, hidden, eps);
    return absl::OkStatus();
  }
  absl::Status layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                             float* dgamma, float* dbeta, int64_t rows, int64_t hidden,
                             float eps) override {
    cpu::layerNormGrad(x, gamma, dy, dx, dgamma, dbeta, rows, hidden, eps);
    return absl::OkStatus();
  }
  absl::Status rope(const float* x, float* y, int64_t batch, int64_t seq, int64_t heads,
                    int64_t head_dim, float theta, bool inverse) override {
    cpu::rope(x, y, batch, seq, heads, head_dim, theta, inverse);
    return absl::OkStatus();
  }
  absl::Status attention(const float* q, const float* k, const float* v, float* out,
                         const cpu::AttentionShape& shape) override {
    cpu::attention(q, k, v, out, shape);
    return absl::OkStatus();
  }
  absl::Status attentionGrad(const float* q, const float* k, const float* v, const float* dout,
                             float* dq, float* dk, float* dv,
                             const cpu::AttentionShape& shape) override {
    cpu::attentionGrad(q, k, v, dout, dq, dk, dv, shape);
    return absl::OkStatus();
  }
  absl::Status softmax(const float* x, float* y, int64_t rows, int64_t n) override {
    cpu::softmax(x, y, rows, n);
    return absl::OkStatus();
  }
  absl::Status softmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                           int64_t n) override {
    cpu::softmaxGrad(y, dy, dx, rows, n);
    return absl::OkStatus();
  }
  absl::Status silu(const float* x, float* y, int64_t count) override {
    cpu::silu(x, y, count);
    return absl::OkStatus();
  }
  absl::Status siluGrad(const float* x, const float* dy, float* dx, int64_t count) override {
    cpu::siluGrad(x, dy, dx, count);
    return absl::OkStatus();
  }
  absl::Status gelu(const float* x, float* y, int64_t count) override {
    cpu::gelu(x, y, count);
    return absl::OkStatus();
  }
  absl::Status geluGrad(const float* x, const float* dy, float* dx, int64_t count) override {
    cpu::geluGrad(x, dy, dx, count);
    return absl::OkStatus();
  }
  absl::Status add(const float* a, const float* b, float* out, int64_t count) override {
    cpu::add(a, b, out, count);
    return absl::OkStatus();
  }
  absl::Status mul(const float* a, const float* b, float* out, int64_t count) override {
    cpu::mul(a, b, out, count);
    return absl::OkStatus();
  }
  absl::Status biasAdd(const float* x, const float* bias, float* y, int64_t rows,
                       int64_t out) override {
    cpu::biasAdd(x, bias, y, rows, out);
    return absl::OkStatus();
  }
  absl::Status reduceSum(const float* x, std::span<const int64_t> shape,
                         std::span<const int64_t> dims, float* out) override {
    cpu::reduceSum(x, shape, dims, out);
    return absl::OkStatus();
  }
  absl::Status embedding(const int32_t* ids, const float* table, float* out, int64_t tokens,
                         int64_t hidden, int64_t row_begin, int64_t table_rows) override {
    cpu::embedding(ids, table, out, tokens, hidden, row_begin, table_rows);
    return absl::OkStatus();
  }
  absl::Status embeddingGrad(const int32_t* ids, const float* dy, float* dtable, int64_t tokens,
                             int64_t hidden, int64_t row_begin, int64_t table_rows) override {
    cpu::embeddingGrad(ids, dy, dtable, tokens, hidden, row_begin, table_rows);
    return absl::OkStatus();
  }
  absl::Status crossEntropy(const float* logits, const int32_t* labels, float* loss, int64_t tokens,
                            int64_t vocab) override {
    *loss = cpu::crossEntropy(logits, labels, tokens, vocab);
    return absl::OkStatus();
  }
  absl::Status crossEntropyGrad(const float* logits, const int32_t* labels, float dloss, float scale,
                                float* dlogits, int64_t tokens, int64_t vocab) override {
    cpu::crossEntropyGrad(logits, labels, dloss, scale, dlogits, tokens, vocab);
    return absl::OkStatus();
  }
  absl::Status vocabMax(const float* logits, float* max, int64_t tokens, int64_t local,
                        int64_t valid) override {
    cpu::vocabMax(logits, max, tokens, local, valid);
    return absl::OkStatus();
  }
  absl::Status vocabStats(const float* logits, const int32_t* labels, const float* max, float* stats,
                          int64_t tokens, int64_t local, int64_t valid, int64_t row_begin) override {
    cpu::vocabStats(logits, labels, max, stats, tokens, local, valid, row_begin);
    return absl::OkStatus();
  }
  absl::Status vocabCrossEntropy(const float* stats, float* loss, int64_t tokens) override {
    *loss = cpu::vocabCrossEntropy(stats, tokens);
    return absl::OkStatus();
  }
  absl::Status vocabCrossEntropyGrad(const float* logits, const int32_t* labels, const float* max,
                                     const float* stats, float dloss, float scale, float* dlogits,
                                     int64_t tokens, int64_t local, int64_t valid,
                                     int64_t row_begin) override {
    cpu::vocabCrossEntropyGrad(logits, labels, max, stats, dloss, scale, dlogits, tokens, local, valid,
                               row_begin);
    return absl::OkStatus();
  }

  absl::Status addSquaredNorm(const float* grads, int64_t count, int64_t copies,
                              double* total) override {
    *total += optim::localSquaredNorm(grads, count) / copies;
    return absl::OkStatus();
  }
  absl::Status clipCoefficient(const double* total, double max_norm, float* coefficient) override {
    *coefficient = optim::clipCoefficient(*total, max_norm);
    return absl::OkStatus();
  }
  absl::Status adamw(const optim::AdamWConfig& config, int64_t step, float* params, float* grads,
                     float* exp_avg, float* exp_avg_sq, int64_t count,
                     const float* grad_scale) override {
    if (grad_scale != nullptr && *grad_scale < 1.0f) optim::scaleGradients(grads, count, *grad_scale);
    optim::adamwStep(config, step, params, grads, exp_avg, exp_avg_sq, count);
    return absl::OkStatus();
  }

 private:
  alignas(64) unsigned char scalars_[64] = {};
};

}  // namespace

std::unique_ptr<KernelSet> cpuKernelSet() { return std::make_unique<CpuKernelSet>(); }

}  // namespace loom::runtime
