// The CUDA KernelSet against the host's on the same operands: the bf16
// calls that run natively, the mixes that go through f32 staging (a bf16
// dgamma or table gradient, an f32 operand among bf16 ones), and the
// precision and optimizer calls. Skipped, with CUDA's reason, where no GPU
// is usable.
//
// Exact where both sides do the same fp32 operations on the same values
// (elementwise ops, conversions, chunk sums, token-ordered table sums,
// AdamW); otherwise max |cuda - cpu| / max |cpu| within fp32 tolerances
// for fp32 results and 1e-2 for bf16 results (their own rounding is 2^-9).
#include "runtime/executor/cuda_kernel_set.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/half_float.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor/kernel_set.h"
#include "runtime/optim/adamw.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr comm::DType kF32 = comm::DType::kFloat32;
constexpr comm::DType kBf16 = comm::DType::kBFloat16;
constexpr double kBf16Tolerance = 1e-2;

std::vector<float> randomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

// One tensor on both sides, with the same dtype and the same bits: host
// memory for the CPU set, device memory for the CUDA set.
class Twin {
 public:
  Twin(comm::DType dtype, const std::vector<float>& values) : Twin(dtype, values.size()) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype_ == kF32) {
        std::memcpy(host_.data() + i * 4, &values[i], 4);
      } else {
        const uint16_t bits = comm::floatToBfloat16(values[i]);
        std::memcpy(host_.data() + i * 2, &bits, 2);
      }
    }
    EXPECT_EQ(cudaMemcpy(device_, host_.data(), host_.size(), cudaMemcpyHostToDevice), cudaSuccess);
    // The set's stream does not wait for the default stream.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // Uninitialised: all bits set (NaN), so an element nobody writes shows.
  Twin(comm::DType dtype, size_t count)
      : dtype_(dtype),
        count_(count),
        host_(std::max<size_t>(count, 1) * comm::dtypeSize(dtype), 0xff) {
    EXPECT_EQ(cudaMalloc(&device_, host_.size()), cudaSuccess);
    EXPECT_EQ(cudaMemset(device_, 0xff, host_.size()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;
  ~Twin() { cudaFree(device_); }

  Ref host() { return {host_.data(), dtype_}; }
  Ref device() { return {device_, dtype_}; }

  std::vector<float> hostValues() const { return widen(host_); }
  // Waits for the set's stream first.
  std::vector<float> deviceValues(KernelSet& cuda) const {
    std::vector<unsigned char> bytes(host_.size());
    EXPECT_TRUE(cuda.download(bytes.data(), device_, bytes.size()).ok());
    return widen(bytes);
  }

 private:
  std::vector<float> widen(const std::vector<unsigned char>& bytes) const {
    std::vector<float> values(count_);
    for (size_t i = 0; i < count_; ++i) {
      if (dtype_ == kF32) {
        std::memcpy(&values[i], bytes.data() + i * 4, 4);
      } else {
        uint16_t bits = 0;
        std::memcpy(&bits, bytes.data() + i * 2, 2);
        values[i] = comm::bfloat16ToFloat(bits);
      }
    }
    return values;
  }

  comm::DType dtype_;
  size_t count_;
  std::vector<unsigned char> host_;
  void* device_ = nullptr;
};

std::vector<uint32_t> bitsOf(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = std::bit_cast<uint32_t>(values[i]);
  return bits;
}

void expectClose(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-30;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " is " << got[i];
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / scale);
  }
  EXPECT_LE(worst, tolerance) << what;
}

class CudaKernelSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string reason = cudaDeviceUnavailableReason(0); !reason.empty())
      GTEST_SKIP() << reason;
    absl::StatusOr<std::unique_ptr<KernelSet>> set = cudaKernelSet(0);
    ASSERT_TRUE(set.ok()) << set.status();
    cuda_ = *std::move(set);
    ASSERT_TRUE(cuda_->activate().ok());
  }

  std::unique_ptr<KernelSet> cpu_ = cpuKernelSet();
  std::unique_ptr<KernelSet> cuda_;
};

TEST_F(CudaKernelSetTest, Bf16NormGradientsRoundTheirFp32SumsOnce) {
  const int64_t rows = 300, hidden = 129;  // more rows than the kernels' 256 blocks
  const float eps = 1e-5f;
  for (const comm::DType dgamma_type : {kBf16, kF32}) {
    const std::string what = dgamma_type == kBf16 ? "bf16 dgamma" : "f32 dgamma";
    const double tol = dgamma_type == kBf16 ? kBf16Tolerance : 2e-5;
    Twin x(kBf16, randomVector(rows * hidden, 1, -2.0f, 2.0f)),
        gamma(kBf16, randomVector(hidden, 2, 0.5f, 1.5f)), beta(kBf16, randomVector(hidden, 3)),
        dy(kBf16, randomVector(rows * hidden, 4)), dx(kBf16, rows * hidden),
        dgamma(dgamma_type, hidden), dbeta(dgamma_type, hidden);
    for (KernelSet* k : {cpu_.get(), cuda_.get()}) {
      const bool host = k == cpu_.get();
      auto ref = [&](Twin& t) { return host ? t.host() : t.device(); };
      ASSERT_TRUE(
          k->rmsNormGrad(ref(x), ref(gamma), ref(dy), ref(dx), ref(dgamma), rows, hidden, eps)
              .ok());
    }
    expectClose(dx.deviceValues(*cuda_), dx.hostValues(), kBf16Tolerance,
                "rmsNormGrad dx, " + what);
    expectClose(dgamma.deviceValues(*cuda_), dgamma.hostValues(), tol, "rmsNormGrad " + what);
    for (KernelSet* k : {cpu_.get(), cuda_.get()}) {
      const bool host = k == cpu_.get();
      auto ref = [&](Twin& t) { return host ? t.host() : t.device(); };
      ASSERT_TRUE(k->layerNormGrad(ref(x), ref(gamma), ref(dy), ref(dx), ref(dgamma), ref(dbeta),
                                   rows, hidden, eps)
                      .ok());
    }
    expectClose(dx.deviceValues(*cuda_), dx.hostValues(), kBf16Tolerance,
                "layerNormGrad dx, " + what);
    expectClose(dgamma.deviceValues(*cuda_), dgamma.hostValues(), tol, "layerNormGrad " + what);
    expectClose(dbeta.deviceValues(*cuda_), dbeta.hostValues(), tol,
                "layerNormGrad dbeta, " + what);
  }
}

TEST_F(CudaKernelSetTest, MixedOperandsAreStagedAsF32) {
  const int64_t count = 10007;
  // One fp32 operation of exact values, then one rounding: the same bits.
  Twin a(kBf16, randomVector(count, 11, -3.0f, 3.0f)),
      b(kF32, randomVector(count, 12, -3.0f, 3.0f)), sum(kF32, count), product(kBf16, count);
  ASSERT_TRUE(cpu_->add(a.host(), b.host(), sum.host(), count).ok());
  ASSERT_TRUE(cuda_->add(a.device(), b.device(), sum.device(), count).ok());
  ASSERT_TRUE(cpu_->mul(b.host(), a.host(), product.host(), count).ok());
  ASSERT_TRUE(cuda_->mul(b.device(), a.device(), product.device(), count).ok());
  EXPECT_EQ(bitsOf(sum.deviceValues(*cuda_)), bitsOf(sum.hostValues())) << "add bf16 + f32 -> f32";
  EXPECT_EQ(bitsOf(product.deviceValues(*cuda_)), bitsOf(product.hostValues()))
      << "mul f32 * bf16 -> bf16";
  // In place into a bf16 operand.
  ASSERT_TRUE(cpu_->add(a.host(), b.host(), a.host(), count).ok());
  ASSERT_TRUE(cuda_->add(a.device(), b.device(), a.device(), count).ok());
  EXPECT_EQ(bitsOf(a.deviceValues(*cuda_)), bitsOf(a.hostValues())) << "add in place";

  // A bf16 activation with an f32 gamma into an f32 result: no rounding.
  const int64_t rows = 37, hidden = 64;
  Twin x(kBf16, randomVector(rows * hidden, 13)), gamma(kF32, randomVector(hidden, 14, 0.5f, 1.5f)),
      y(kF32, rows * hidden);
  ASSERT_TRUE(cpu_->rmsNorm(x.host(), gamma.host(), y.host(), rows, hidden, 1e-5f).ok());
  ASSERT_TRUE(cuda_->rmsNorm(x.device(), gamma.device(), y.device(), rows, hidden, 1e-5f).ok());
  expectClose(y.deviceValues(*cuda_), y.hostValues(), 1e-5, "rmsNorm bf16 x, f32 gamma -> f32");

  // A GEMM whose weight is f32 and whose input and result are bf16.
  const int64_t in = 70, out = 45;
  Twin w(kF32, randomVector(in * out, 15)), bias(kBf16, randomVector(out, 16)),
      xin(kBf16, randomVector(rows * in, 17)), yw(kBf16, rows * out);
  ASSERT_TRUE(cpu_->linear(xin.host(), w.host(), bias.host(), yw.host(), rows, in, out).ok());
  ASSERT_TRUE(
      cuda_->linear(xin.device(), w.device(), bias.device(), yw.device(), rows, in, out).ok());
  expectClose(yw.deviceValues(*cuda_), yw.hostValues(), kBf16Tolerance,
              "linear bf16 x, f32 w -> bf16");

  // Attention with an f32 query and bf16 keys and values.
  const cpu::AttentionShape s{2, 37, 4, 2, 32};
  const int64_t nq = s.batch * s.seq * s.heads * s.head_dim,
                nk = s.batch * s.seq * s.kv_heads * s.head_dim;
  Twin q(kF32, randomVector(nq, 18)), k(kBf16, randomVector(nk, 19)),
      v(kBf16, randomVector(nk, 20)), o(kF32, nq);
  ASSERT_TRUE(cpu_->attention(q.host(), k.host(), v.host(), o.host(), s).ok());
  ASSERT_TRUE(cuda_->attention(q.device(), k.device(), v.device(), o.device(), s).ok());
  expectClose(o.deviceValues(*cuda_), o.hostValues(), 2e-5, "attention f32 q, bf16 k/v -> f32");
}

TEST_F(CudaKernelSetTest, EmbeddingGradIntoABf16TableEqualsTheHost) {
  const int64_t tokens = 300, hidden = 37, row_begin = 40, table_rows = 70;
  std::mt19937 rng(31);
  std::uniform_int_distribution<int32_t> pick(0, 199);
  std::vector<int32_t> ids(tokens);
  for (int32_t& id : ids) id = pick(rng);
  int32_t* ids_d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ids_d), ids.size() * sizeof(int32_t)),
            cudaSuccess);
  ASSERT_TRUE(cuda_->upload(ids_d, ids.data(), ids.size() * sizeof(int32_t)).ok());
  for (const comm::DType dy_type : {kBf16, kF32}) {
    Twin dy(dy_type, randomVector(tokens * hidden, 32)), dtable(kBf16, table_rows * hidden);
    ASSERT_TRUE(cpu_->embeddingGrad(ids.data(), dy.host(), dtable.host(), tokens, hidden, row_begin,
                                    table_rows)
                    .ok());
    ASSERT_TRUE(cuda_
                    ->embeddingGrad(ids_d, dy.device(), dtable.device(), tokens, hidden, row_begin,
                                    table_rows)
                    .ok());
    // Token-ordered fp32 sums rounded once: the same bits.
    EXPECT_EQ(bitsOf(dtable.deviceValues(*cuda_)), bitsOf(dtable.hostValues()))
        << "dy " << (dy_type == kBf16 ? "bf16" : "f32");
  }
  cudaFree(ids_d);
}

TEST_F(CudaKernelSetTest, LossesOfBf16Logits) {
  const int64_t tokens = 37, vocab = 1000;
  std::mt19937 rng(41);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> labels(tokens);
  for (int32_t& l : labels) l = pick(rng);
  int32_t* labels_d = nullptr;
  float* loss_d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&labels_d), labels.size() * sizeof(int32_t)),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&loss_d), sizeof(float)), cudaSuccess);
  ASSERT_TRUE(cuda_->upload(labels_d, labels.data(), labels.size() * sizeof(int32_t)).ok());
  Twin logits(kBf16, randomVector(tokens * vocab, 42, -8.0f, 8.0f)), grad(kBf16, tokens * vocab),
      grad_f32(kF32, tokens * vocab);
  float loss = 0.0f, loss_gpu = 0.0f;
  ASSERT_TRUE(cpu_->crossEntropy(logits.host(), labels.data(), &loss, tokens, vocab).ok());
  ASSERT_TRUE(cuda_->crossEntropy(logits.device(), labels_d, loss_d, tokens, vocab).ok());
  ASSERT_TRUE(cuda_->download(&loss_gpu, loss_d, sizeof(float)).ok());
  EXPECT_NEAR(loss_gpu, loss, 2e-6 * std::abs(loss)) << "the loss is fp32 of the exact logits";
  for (Twin* g : {&grad, &grad_f32}) {
    ASSERT_TRUE(cpu_->crossEntropyGrad(logits.host(), labels.data(), 0.75f, 1.0f / 64, g->host(),
                                       tokens, vocab)
                    .ok());
    ASSERT_TRUE(cuda_
                    ->crossEntropyGrad(logits.device(), labels_d, 0.75f, 1.0f / 64, g->device(),
                                       tokens, vocab)
                    .ok());
  }
  expectClose(grad.deviceValues(*cuda_), grad.hostValues(), kBf16Tolerance,
              "crossEntropyGrad -> bf16");
  expectClose(grad_f32.deviceValues(*cuda_), grad_f32.hostValues(), 1e-5,
              "crossEntropyGrad -> f32 (staged)");
  cudaFree(labels_d);
  cudaFree(loss_d);
}

TEST_F(CudaKernelSetTest, ConvertAndSumChunksEqualTheHost) {
  const int64_t chunks = 4, count = 5003;
  std::vector<float> values = randomVector(chunks * count, 51);
  std::mt19937 rng(52);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (float& v : values) v = std::ldexp(v, exponent(rng));
  for (const comm::DType from : {kF32, kBf16}) {
    for (const comm::DType to : {kF32, kBf16}) {
      const std::string what =
          std::string(comm::dtypeName(from)) + " -> " + std::string(comm::dtypeName(to));
      Twin src(from, values), converted(to, chunks * count), sum(to, count), mean(to, count);
      for (KernelSet* k : {cpu_.get(), cuda_.get()}) {
        const bool host = k == cpu_.get();
        auto ref = [&](Twin& t) { return host ? t.host() : t.device(); };
        ASSERT_TRUE(k->convert(ref(src), ref(converted), chunks * count).ok());
        ASSERT_TRUE(k->sumChunks(ref(src), chunks, count, false, ref(sum)).ok());
        ASSERT_TRUE(k->sumChunks(ref(src), chunks, count, true, ref(mean)).ok());
      }
      EXPECT_EQ(bitsOf(converted.deviceValues(*cuda_)), bitsOf(converted.hostValues()))
          << "convert " << what;
      EXPECT_EQ(bitsOf(sum.deviceValues(*cuda_)), bitsOf(sum.hostValues())) << "sumChunks " << what;
      EXPECT_EQ(bitsOf(mean.deviceValues(*cuda_)), bitsOf(mean.hostValues()))
          << "sumChunks average " << what;
    }
  }
}

TEST_F(CudaKernelSetTest, AdamWWithAMasterEqualsTheHost) {
  const int64_t count = 20011;
  const optim::AdamWConfig config{
      .lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const std::vector<float> start = randomVector(count, 61);
  Twin params(kBf16, start), master(kF32, start), m(kF32, std::vector<float>(count, 0.0f)),
      v(kF32, std::vector<float>(count, 0.0f));
  // The clip coefficient: a host float for the CPU, the set's device scalars for CUDA.
  const float coefficient = 0.37f;
  float* coefficient_d = static_cast<float*>(cuda_->scalars());
  ASSERT_TRUE(cuda_->upload(coefficient_d, &coefficient, sizeof(float)).ok());
  for (int64_t step = 1; step <= 4; ++step) {
    Twin grads(kBf16, randomVector(count, 70 + static_cast<uint32_t>(step), -2.0f, 2.0f));
    const bool clip = step % 2 == 0;
    ASSERT_TRUE(cpu_->adamw(config, step, params.host(), grads.host(), m.host().f32(),
                            v.host().f32(), master.host().f32(), count,
                            clip ? &coefficient : nullptr)
                    .ok());
    ASSERT_TRUE(cuda_
                    ->adamw(config, step, params.device(), grads.device(), m.device().f32(),
                            v.device().f32(), master.device().f32(), count,
                            clip ? coefficient_d : nullptr)
                    .ok());
    EXPECT_EQ(bitsOf(grads.deviceValues(*cuda_)), bitsOf(grads.hostValues()))
        << "grads are left alone";
  }
#if defined(__x86_64__)
  EXPECT_EQ(bitsOf(master.deviceValues(*cuda_)), bitsOf(master.hostValues())) << "master";
  EXPECT_EQ(bitsOf(m.deviceValues(*cuda_)), bitsOf(m.hostValues())) << "exp_avg";
  EXPECT_EQ(bitsOf(v.deviceValues(*cuda_)), bitsOf(v.hostValues())) << "exp_avg_sq";
  EXPECT_EQ(bitsOf(params.deviceValues(*cuda_)), bitsOf(params.hostValues())) << "bf16 params";
#else
  expectClose(master.deviceValues(*cuda_), master.hostValues(), 1e-6, "master");
#endif

  // Without a master, bf16 params are refused as the host refuses them.
  Twin grads(kBf16, count);
  EXPECT_THAT(cuda_->adamw(config, 1, params.device(), grads.device(), m.device().f32(),
                           v.device().f32(), nullptr, count, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs an f32 master copy")));
}

TEST_F(CudaKernelSetTest, SquaredNormOfBf16Gradients) {
  const int64_t count = 100003;
  Twin grads(kBf16, randomVector(count, 81, -3.0f, 3.0f));
  double total = 0.25;
  ASSERT_TRUE(cpu_->addSquaredNorm(grads.host(), count, 2, &total).ok());
  double* total_d = static_cast<double*>(cuda_->scalars());
  const double start = 0.25;
  ASSERT_TRUE(cuda_->upload(total_d, &start, sizeof(double)).ok());
  ASSERT_TRUE(cuda_->addSquaredNorm(grads.device(), count, 2, total_d).ok());
  double total_gpu = 0.0;
  ASSERT_TRUE(cuda_->download(&total_gpu, total_d, sizeof(double)).ok());
  // Squares of bf16 values are exact in double; only the order of the adds differs.
  EXPECT_NEAR(total_gpu, total, 1e-12 * total);
}

}  // namespace
}  // namespace loom::runtime
