// Every CUDA kernel against the CPU kernel of the same op on random inputs
// (fixed seeds), in fp32 and bf16. Skipped, with CUDA's reason, where no GPU
// is usable.
//
// Errors are measured as max |gpu - cpu| / max |cpu| over the whole output,
// as the CPU kernels' own tests do. Tolerances (docs/runtime_cuda_kernels.md):
//   - fp32 elementwise: 1e-5 (expf/tanhf against glibc, a few ulps,
//     magnified by gelu_grad's 1 - tanh^2), add/mul/bias_add exact;
//   - fp32 reductions, GEMMs, attention: 1e-5 to 5e-5 (summation order);
//   - bf16 outputs: 1e-2 (the output's own rounding is 2^-9 of the largest
//     element; the rest is fp32 summation order);
//   - bf16 inputs with fp32 outputs (GEMM, dgamma): 1e-5, as in fp32: the
//     CPU reference runs on the same bf16-rounded inputs;
//   - embedding_grad and AdamW: bit for bit;
//   - convert, sumChunks and AdamW with an fp32 master (master, moments
//     and the rounded bf16 params): bit for bit against the host's
//     rounding (comm/half_float.h) and the CPU executor's arithmetic.
// Outputs are pre-filled with NaN so an element a kernel forgets to write
// fails the comparison.
#include "runtime/kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "comm/half_float.h"
#include "gtest/gtest.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/ignore_label.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime::cuda {
namespace {

constexpr double kBf16Tolerance = 1e-2;

// ---- Host-side bf16 ---------------------------------------------------------

// Round to nearest even, as __float2bfloat16_rn (inputs here are finite).
bf16 toBf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  __nv_bfloat16_raw raw;
  raw.x = static_cast<uint16_t>(bits >> 16);
  return bf16(raw);
}

float fromBf16(bf16 value) {
  const __nv_bfloat16_raw raw = value;
  const uint32_t bits = static_cast<uint32_t>(raw.x) << 16;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

template <typename T>
T fromFloat(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return toBf16(v);
  }
}

template <typename T>
float toFloat(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return fromBf16(v);
  }
}

// The values as T holds them: what the CPU reference must see.
template <typename T>
std::vector<float> asStored(std::vector<float> values) {
  for (float& v : values) v = toFloat(fromFloat<T>(v));
  return values;
}

std::vector<float> randomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

// ---- Device buffers ---------------------------------------------------------

// A device array freed on scope exit; new arrays hold NaN (all bits set).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(T);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, 0xff, bytes), cudaSuccess);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(other.count_) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  T* get() const { return data_; }
  size_t size() const { return count_; }

  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), count_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // Waits for all work on the device first.
  std::vector<T> download() const {
    std::vector<T> host(count_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// A device array of T holding `values` (rounded to T).
template <typename T>
class Tensor : public DeviceArray<T> {
 public:
  explicit Tensor(const std::vector<float>& values) : DeviceArray<T>(values.size()) {
    std::vector<T> host(values.size());
    for (size_t i = 0; i < values.size(); ++i) host[i] = fromFloat<T>(values[i]);
    this->upload(host);
  }
  explicit Tensor(size_t count) : DeviceArray<T>(count) {}

  std::vector<float> values() const {
    const std::vector<T> host = this->download();
    std::vector<float> out(host.size());
    for (size_t i = 0; i < host.size(); ++i) out[i] = toFloat(host[i]);
    return out;
  }
};

template <typename Id>
DeviceArray<Id> deviceIds(const std::vector<Id>& ids) {
  DeviceArray<Id> out(ids.size());
  out.upload(ids);
  return out;
}

// ---- Comparison -------------------------------------------------------------

void expectClose(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  scale = std::max(scale, 1e-30);
  double worst = 0.0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
      return;
    }
    const double error = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
    if (error > worst) {
      worst = error;
      worst_index = i;
    }
  }
  EXPECT_LE(worst, tolerance) << what << ": worst element " << worst_index << " is "
                              << got[worst_index] << ", want " << want[worst_index]
                              << " (max |want| " << scale << ", " << got.size() << " elements)";
}

template <typename T>
double tolerance(double fp32) {
  return std::is_same_v<T, float> ? fp32 : kBf16Tolerance;
}

template <typename T>
const char* dtypeName() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}

#define EXPECT_OK(expr)                                    \
  do {                                                     \
    const ::loom::runtime::cuda::Status _s = (expr);       \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s.message(); \
  } while (false)

// Every test skips, with the reason, where the kernels cannot run.
class CudaKernelsTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = deviceUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
};

// ---- Matrix products ---------------------------------------------------------

template <typename TIn, typename TOut>
void checkGemms(CublasLtHandle& handle, cudaStream_t stream, int64_t rows, int64_t k, int64_t n,
                size_t misalign, uint32_t seed) {
  const double tol = std::is_same_v<TOut, float> ? 1e-5 : kBf16Tolerance;
  const std::string what = std::string(dtypeName<TIn>()) + "->" + dtypeName<TOut>() + " " +
                           std::to_string(rows) + "x" + std::to_string(k) + "x" +
                           std::to_string(n) + " offset " + std::to_string(misalign);
  // A misaligned view (offset by `misalign` elements) checks that plans are
  // chosen for the buffers' real alignment.
  auto view = [&](const std::vector<float>& values) {
    std::vector<float> padded(misalign, 0.0f);
    padded.insert(padded.end(), values.begin(), values.end());
    return padded;
  };
  const std::vector<float> x = asStored<TIn>(randomVector(rows * k, seed));
  const std::vector<float> w = asStored<TIn>(randomVector(k * n, seed + 1));
  const std::vector<float> bias = asStored<TOut>(randomVector(n, seed + 2));
  const std::vector<float> wt = asStored<TIn>(randomVector(n * k, seed + 3));
  const std::vector<float> dy = asStored<TIn>(randomVector(rows * n, seed + 4));
  Tensor<TIn> x_d(view(x)), w_d(view(w)), wt_d(view(wt)), dy_d(view(dy));
  Tensor<TOut> bias_d(view(bias));
  Tensor<TOut> y_d(rows * n + misalign), y2_d(rows * n + misalign), yt_d(rows * n + misalign),
      dw_d(k * n + misalign);
  auto strip = [&](const std::vector<float>& values) {
    return std::vector<float>(values.begin() + static_cast<int64_t>(misalign), values.end());
  };

  std::vector<float> want(rows * n);
  cpu::linear(x.data(), w.data(), bias.data(), want.data(), rows, k, n);
  EXPECT_OK((linear<TIn, TOut>(handle, x_d.get() + misalign, w_d.get() + misalign,
                               bias_d.get() + misalign, y_d.get() + misalign, rows, k, n, stream)));
  expectClose(strip(y_d.values()), want, tol, "linear+bias " + what);

  cpu::matmul(x.data(), w.data(), want.data(), rows, k, n);
  EXPECT_OK((linear<TIn, TOut>(handle, x_d.get() + misalign, w_d.get() + misalign, nullptr,
                               y2_d.get() + misalign, rows, k, n, stream)));
  expectClose(strip(y2_d.values()), want, tol, "linear " + what);
  EXPECT_OK((matmul<TIn, TOut>(handle, x_d.get() + misalign, w_d.get() + misalign,
                               y2_d.get() + misalign, rows, k, n, stream)));
  expectClose(strip(y2_d.values()), want, tol, "matmul " + what);

  cpu::matmulTransposeRhs(x.data(), wt.data(), want.data(), rows, k, n);
  EXPECT_OK((matmulTransposeRhs<TIn, TOut>(handle, x_d.get() + misalign, wt_d.get() + misalign,
                                           yt_d.get() + misalign, rows, k, n, stream)));
  expectClose(strip(yt_d.values()), want, tol, "matmulTransposeRhs " + what);

  std::vector<float> want_dw(k * n);
  cpu::matmulTransposeLhs(x.data(), dy.data(), want_dw.data(), rows, k, n);
  EXPECT_OK((matmulTransposeLhs<TIn, TOut>(handle, x_d.get() + misalign, dy_d.get() + misalign,
                                           dw_d.get() + misalign, rows, k, n, stream)));
  expectClose(strip(dw_d.values()), want_dw, tol, "matmulTransposeLhs " + what);
}

TEST_F(CudaKernelsTest, MatrixProductsInEveryDtypeAndLayout) {
  std::unique_ptr<CublasLtHandle> handle;
  ASSERT_TRUE(CublasLtHandle::create(&handle).ok());
  struct Shape {
    int64_t rows, k, n;
    size_t misalign;
  };
  // Odd sizes (not multiples of any tile), a single element, a larger
  // aligned product and misaligned buffers.
  for (const Shape& s : {Shape{37, 70, 45, 0}, Shape{1, 1, 1, 0}, Shape{256, 512, 384, 0},
                         Shape{33, 64, 40, 1}, Shape{130, 96, 200, 3}}) {
    checkGemms<float, float>(*handle, stream_, s.rows, s.k, s.n, s.misalign, 11);
    checkGemms<bf16, bf16>(*handle, stream_, s.rows, s.k, s.n, s.misalign, 12);
    checkGemms<bf16, float>(*handle, stream_, s.rows, s.k, s.n, s.misalign, 13);
  }
}

TEST_F(CudaKernelsTest, PlansAreCachedPerShape) {
  std::unique_ptr<CublasLtHandle> handle;
  ASSERT_TRUE(CublasLtHandle::create(&handle).ok());
  Tensor<float> x(randomVector(64 * 32, 1)), w(randomVector(32 * 48, 2)), y(64 * 48);
  EXPECT_EQ(handle->cachedPlans(), 0u);
  EXPECT_OK((matmul<float, float>(*handle, x.get(), w.get(), y.get(), 64, 32, 48, stream_)));
  EXPECT_EQ(handle->cachedPlans(), 1u);
  EXPECT_OK((matmul<float, float>(*handle, x.get(), w.get(), y.get(), 64, 32, 48, stream_)));
  EXPECT_EQ(handle->cachedPlans(), 1u);
  EXPECT_OK((matmul<float, float>(*handle, x.get(), w.get(), y.get(), 32, 32, 48, stream_)));
  EXPECT_EQ(handle->cachedPlans(), 2u);
}

// ---- Normalisation -----------------------------------------------------------

template <typename T>
void checkRmsNorm(cudaStream_t stream, int64_t rows, int64_t hidden) {
  const std::string what = std::string("rmsNorm ") + dtypeName<T>() + " rows " +
                           std::to_string(rows) + " hidden " + std::to_string(hidden);
  const float eps = 1e-5f;
  const auto x = asStored<T>(randomVector(rows * hidden, 21, -2.0f, 2.0f));
  const auto gamma = asStored<T>(randomVector(hidden, 22, 0.5f, 1.5f));
  const auto dy = asStored<T>(randomVector(rows * hidden, 23));
  Tensor<T> x_d(x), gamma_d(gamma), dy_d(dy), y_d(rows * hidden), dx_d(rows * hidden);
  Tensor<float> dgamma_d(hidden);
  const size_t bytes = rmsNormGradWorkspaceBytes(rows, hidden);
  DeviceArray<char> workspace(bytes);

  std::vector<float> y(rows * hidden), dx(rows * hidden), dgamma(hidden);
  cpu::rmsNorm(x.data(), gamma.data(), y.data(), rows, hidden, eps);
  cpu::rmsNormGrad(x.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(), rows, hidden, eps);
  EXPECT_OK(rmsNorm(x_d.get(), gamma_d.get(), y_d.get(), rows, hidden, eps, stream));
  EXPECT_OK(rmsNormGrad(x_d.get(), gamma_d.get(), dy_d.get(), dx_d.get(), dgamma_d.get(), rows,
                        hidden, eps, workspace.get(), bytes, stream));
  expectClose(y_d.values(), y, tolerance<T>(1e-5), what);
  expectClose(dx_d.values(), dx, tolerance<T>(2e-5), what + " dx");
  expectClose(dgamma_d.values(), dgamma, 2e-5, what + " dgamma");
}

template <typename T>
void checkLayerNorm(cudaStream_t stream, int64_t rows, int64_t hidden) {
  const std::string what = std::string("layerNorm ") + dtypeName<T>() + " rows " +
                           std::to_string(rows) + " hidden " + std::to_string(hidden);
  const float eps = 1e-5f;
  // An offset mean makes the two-pass variance matter.
  const auto x = asStored<T>(randomVector(rows * hidden, 31, 2.0f, 4.0f));
  const auto gamma = asStored<T>(randomVector(hidden, 32, 0.5f, 1.5f));
  const auto beta = asStored<T>(randomVector(hidden, 33));
  const auto dy = asStored<T>(randomVector(rows * hidden, 34));
  Tensor<T> x_d(x), gamma_d(gamma), beta_d(beta), dy_d(dy), y_d(rows * hidden), dx_d(rows * hidden);
  Tensor<float> dgamma_d(hidden), dbeta_d(hidden);
  const size_t bytes = layerNormGradWorkspaceBytes(rows, hidden);
  DeviceArray<char> workspace(bytes);

  std::vector<float> y(rows * hidden), dx(rows * hidden), dgamma(hidden), dbeta(hidden);
  cpu::layerNorm(x.data(), gamma.data(), beta.data(), y.data(), rows, hidden, eps);
  cpu::layerNormGrad(x.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(), dbeta.data(),
                     rows, hidden, eps);
  EXPECT_OK(
      layerNorm(x_d.get(), gamma_d.get(), beta_d.get(), y_d.get(), rows, hidden, eps, stream));
  EXPECT_OK(layerNormGrad(x_d.get(), gamma_d.get(), dy_d.get(), dx_d.get(), dgamma_d.get(),
                          dbeta_d.get(), rows, hidden, eps, workspace.get(), bytes, stream));
  expectClose(y_d.values(), y, tolerance<T>(1e-5), what);
  expectClose(dx_d.values(), dx, tolerance<T>(5e-5), what + " dx");
  expectClose(dgamma_d.values(), dgamma, 2e-5, what + " dgamma");
  expectClose(dbeta_d.values(), dbeta, 2e-5, what + " dbeta");
}

TEST_F(CudaKernelsTest, Norms) {
  // hidden 1 and large odd sizes; more rows than the backward's 256 blocks.
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{3, 1}, {5, 37}, {300, 64}, {7, 2048}, {2, 8191}, {520, 129}}) {
    checkRmsNorm<float>(stream_, rows, hidden);
    checkRmsNorm<bf16>(stream_, rows, hidden);
    checkLayerNorm<float>(stream_, rows, hidden);
    checkLayerNorm<bf16>(stream_, rows, hidden);
  }
}

// ---- Attention family ----------------------------------------------------------

template <typename T>
void checkRope(cudaStream_t stream, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
               const plan::RopeScaling& scaling = {}) {
  const int64_t count = batch * seq * heads * dim;
  const std::string what = std::string("rope ") + dtypeName<T>() + " S " + std::to_string(seq) +
                           " D " + std::to_string(dim) + " factor " +
                           std::to_string(scaling.factor);
  const auto x = asStored<T>(randomVector(count, 41));
  for (const bool inverse : {false, true}) {
    std::vector<float> want(count);
    cpu::rope(x.data(), want.data(), batch, seq, heads, dim, 10000.0f, inverse, scaling);
    Tensor<T> x_d(x), y_d(count);
    EXPECT_OK(
        rope(x_d.get(), y_d.get(), batch, seq, heads, dim, 10000.0f, inverse, scaling, stream));
    expectClose(y_d.values(), want, tolerance<T>(2e-6), what + (inverse ? " inverse" : ""));
    // In place.
    EXPECT_OK(
        rope(x_d.get(), x_d.get(), batch, seq, heads, dim, 10000.0f, inverse, scaling, stream));
    expectClose(x_d.values(), want, tolerance<T>(2e-6), what + " in place");
  }
}

TEST_F(CudaKernelsTest, Rope) {
  checkRope<float>(stream_, 2, 37, 3, 16);
  checkRope<bf16>(stream_, 2, 37, 3, 16);
  // Far positions: the angle's phase must survive (cos/sin in double).
  checkRope<float>(stream_, 1, 5000, 2, 128);
  checkRope<bf16>(stream_, 1, 5000, 2, 128);
  checkRope<float>(stream_, 3, 1, 1, 2);
  // Frequency scaling: linear, and Llama 3.1's bands.
  checkRope<float>(stream_, 2, 37, 3, 16, {.factor = 4.0});
  const plan::RopeScaling llama3 = {
      .factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_positions = 64};
  checkRope<float>(stream_, 1, 5000, 2, 128, llama3);
  checkRope<bf16>(stream_, 2, 37, 3, 16, llama3);
}

// logsumexp of each causal score row, in double, [B, H, S].
std::vector<float> referenceLse(const std::vector<float>& q, const std::vector<float>& k,
                                const cpu::AttentionShape& s) {
  std::vector<float> lse(s.batch * s.heads * s.seq);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> scores(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dot += static_cast<double>(q[((b * s.seq + i) * s.heads + h) * s.head_dim + d]) *
                   k[((b * s.seq + j) * s.kv_heads + h / group) * s.head_dim + d];
          }
          scores[j] = dot * scale;
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0.0;
        for (double v : scores) sum += std::exp(v - max);
        lse[(b * s.heads + h) * s.seq + i] = static_cast<float>(max + std::log(sum));
      }
    }
  }
  return lse;
}

template <typename T>
void checkAttention(cudaStream_t stream, const AttentionShape& shape) {
  const cpu::AttentionShape cs{shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_dim};
  const std::string what = std::string("attention ") + dtypeName<T>() + " B" +
                           std::to_string(shape.batch) + " S" + std::to_string(shape.seq) + " H" +
                           std::to_string(shape.heads) + "/" + std::to_string(shape.kv_heads) +
                           " D" + std::to_string(shape.head_dim);
  const int64_t q_count = shape.batch * shape.seq * shape.heads * shape.head_dim;
  const int64_t kv_count = shape.batch * shape.seq * shape.kv_heads * shape.head_dim;
  const auto q = asStored<T>(randomVector(q_count, 51));
  const auto k = asStored<T>(randomVector(kv_count, 52));
  const auto v = asStored<T>(randomVector(kv_count, 53));
  const auto dout = asStored<T>(randomVector(q_count, 54));
  Tensor<T> q_d(q), k_d(k), v_d(v), dout_d(dout), out_d(q_count), dq_d(q_count), dk_d(kv_count),
      dv_d(kv_count);
  Tensor<float> lse_d(shape.batch * shape.heads * shape.seq);

  std::vector<float> out(q_count), dq(q_count), dk(kv_count), dv(kv_count);
  cpu::attention(q.data(), k.data(), v.data(), out.data(), cs);
  cpu::attentionGrad(q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(),
                     cs);
  EXPECT_OK(attention(q_d.get(), k_d.get(), v_d.get(), out_d.get(), lse_d.get(), shape, stream));
  expectClose(out_d.values(), out, tolerance<T>(2e-5), what);
  expectClose(lse_d.values(), referenceLse(q, k, cs), 1e-5, what + " lse");
  EXPECT_OK(attentionGrad(q_d.get(), k_d.get(), v_d.get(), out_d.get(), dout_d.get(), lse_d.get(),
                          dq_d.get(), dk_d.get(), dv_d.get(), shape, stream));
  expectClose(dq_d.values(), dq, tolerance<T>(5e-5), what + " dq");
  expectClose(dk_d.values(), dk, tolerance<T>(5e-5), what + " dk");
  expectClose(dv_d.values(), dv, tolerance<T>(5e-5), what + " dv");
}

TEST_F(CudaKernelsTest, AttentionForwardAndBackward) {
  // seq 1, seq not a multiple of the 32-row tiles, one full tile plus one,
  // GQA groups of 2, 3 and 4, head_dim 8 to 128 including non-powers of 2.
  for (const AttentionShape& shape :
       {AttentionShape{1, 1, 1, 1, 8}, AttentionShape{2, 37, 4, 4, 64},
        AttentionShape{1, 100, 8, 2, 128}, AttentionShape{2, 65, 6, 3, 40},
        AttentionShape{1, 130, 4, 1, 80}, AttentionShape{1, 33, 2, 2, 127}}) {
    checkAttention<float>(stream_, shape);
    checkAttention<bf16>(stream_, shape);
  }
}

TEST_F(CudaKernelsTest, AttentionIsCausalAndDeterministic) {
  const AttentionShape shape{1, 70, 2, 1, 32};
  const int64_t q_count = shape.batch * shape.seq * shape.heads * shape.head_dim;
  const int64_t kv_count = shape.batch * shape.seq * shape.kv_heads * shape.head_dim;
  auto q = randomVector(q_count, 61), k = randomVector(kv_count, 62),
       v = randomVector(kv_count, 63);
  Tensor<float> q_d(q), k_d(k), v_d(v), dout_d(randomVector(q_count, 64)), out_d(q_count),
      lse_d(shape.heads * shape.seq);
  EXPECT_OK(attention(q_d.get(), k_d.get(), v_d.get(), out_d.get(), lse_d.get(), shape, stream_));
  const std::vector<float> before = out_d.values();
  // Changing position t = 40 leaves every earlier output bit-identical.
  const int64_t t = 40;
  for (int64_t d = 0; d < shape.head_dim; ++d) {
    for (int64_t h = 0; h < shape.heads; ++h) q[(t * shape.heads + h) * shape.head_dim + d] += 1;
    k[t * shape.head_dim + d] += 1;
    v[t * shape.head_dim + d] += 1;
  }
  Tensor<float> q2(q), k2(k), v2(v);
  EXPECT_OK(attention(q2.get(), k2.get(), v2.get(), out_d.get(), nullptr, shape, stream_));
  const std::vector<float> after = out_d.values();
  const int64_t row = shape.heads * shape.head_dim;
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + t * row, after.begin()));
  EXPECT_FALSE(std::equal(before.begin() + t * row, before.begin() + (t + 1) * row,
                          after.begin() + t * row));
  // Two backward runs give identical bits (no atomics).
  EXPECT_OK(attention(q_d.get(), k_d.get(), v_d.get(), out_d.get(), lse_d.get(), shape, stream_));
  Tensor<float> dq1(q_count), dk1(kv_count), dv1(kv_count), dq2(q_count), dk2(kv_count),
      dv2(kv_count);
  EXPECT_OK(attentionGrad(q_d.get(), k_d.get(), v_d.get(), out_d.get(), dout_d.get(), lse_d.get(),
                          dq1.get(), dk1.get(), dv1.get(), shape, stream_));
  EXPECT_OK(attentionGrad(q_d.get(), k_d.get(), v_d.get(), out_d.get(), dout_d.get(), lse_d.get(),
                          dq2.get(), dk2.get(), dv2.get(), shape, stream_));
  EXPECT_EQ(dq1.values(), dq2.values());
  EXPECT_EQ(dk1.values(), dk2.values());
  EXPECT_EQ(dv1.values(), dv2.values());
}

// ---- Softmax, elementwise and reductions -----------------------------------------

template <typename T>
void checkSoftmax(cudaStream_t stream, int64_t rows, int64_t n) {
  const std::string what = std::string("softmax ") + dtypeName<T>() + " n " + std::to_string(n);
  const auto x = asStored<T>(randomVector(rows * n, 71, -5.0f, 5.0f));
  const auto dy = asStored<T>(randomVector(rows * n, 72));
  std::vector<float> y(rows * n), dx(rows * n);
  cpu::softmax(x.data(), y.data(), rows, n);
  // The grad takes the op's output; give both sides the same stored one.
  const auto y_stored = asStored<T>(y);
  cpu::softmaxGrad(y_stored.data(), dy.data(), dx.data(), rows, n);
  Tensor<T> x_d(x), dy_d(dy), y_d(rows * n), ys_d(y_stored), dx_d(rows * n);
  EXPECT_OK(softmax(x_d.get(), y_d.get(), rows, n, stream));
  EXPECT_OK(softmaxGrad(ys_d.get(), dy_d.get(), dx_d.get(), rows, n, stream));
  expectClose(y_d.values(), y, tolerance<T>(1e-5), what);
  expectClose(dx_d.values(), dx, tolerance<T>(2e-5), what + " grad");
}

TEST_F(CudaKernelsTest, Softmax) {
  for (const auto& [rows, n] :
       {std::pair<int64_t, int64_t>{3, 1}, {5, 7}, {4, 1000}, {2, 5000}, {64, 33}}) {
    checkSoftmax<float>(stream_, rows, n);
    checkSoftmax<bf16>(stream_, rows, n);
  }
}

template <typename T>
void checkElementwise(cudaStream_t stream, int64_t count) {
  const std::string what = std::string(dtypeName<T>()) + " count " + std::to_string(count);
  // 1e-5: gelu's grad takes 1 - tanh^2, which magnifies tanhf's last ulp.
  const double tol = tolerance<T>(1e-5);
  const auto a = asStored<T>(randomVector(count, 81, -6.0f, 6.0f));
  const auto b = asStored<T>(randomVector(count, 82, -3.0f, 3.0f));
  const auto g = asStored<T>(randomVector(count, 83));
  Tensor<T> a_d(a), b_d(b), g_d(g), out_d(count), out2_d(count);
  std::vector<float> want(count), want2(count), tmp(count);

  cpu::silu(a.data(), want.data(), count);
  EXPECT_OK(silu(a_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "silu " + what);
  cpu::siluGrad(a.data(), g.data(), want.data(), count);
  EXPECT_OK(siluGrad(a_d.get(), g_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "siluGrad " + what);
  cpu::gelu(a.data(), want.data(), count);
  EXPECT_OK(gelu(a_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "gelu " + what);
  cpu::geluGrad(a.data(), g.data(), want.data(), count);
  EXPECT_OK(geluGrad(a_d.get(), g_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "geluGrad " + what);
  cpu::add(a.data(), b.data(), want.data(), count);
  EXPECT_OK(add(a_d.get(), b_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tolerance<T>(0.0), "add " + what);
  cpu::mul(a.data(), b.data(), want.data(), count);
  EXPECT_OK(mul(a_d.get(), b_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tolerance<T>(0.0), "mul " + what);

  // siluMul = mul(silu(a), b); its grads via the CPU chain rule.
  cpu::silu(a.data(), tmp.data(), count);
  cpu::mul(tmp.data(), b.data(), want.data(), count);
  EXPECT_OK(siluMul(a_d.get(), b_d.get(), out_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "siluMul " + what);
  cpu::mul(tmp.data(), g.data(), want2.data(), count);  // db = dout silu(a)
  cpu::mul(g.data(), b.data(), tmp.data(), count);
  cpu::siluGrad(a.data(), tmp.data(), want.data(), count);  // da = silu'(a) dout b
  EXPECT_OK(siluMulGrad(a_d.get(), b_d.get(), g_d.get(), out_d.get(), out2_d.get(), count, stream));
  expectClose(out_d.values(), want, tol, "siluMulGrad da " + what);
  expectClose(out2_d.values(), want2, tol, "siluMulGrad db " + what);

  // In place: out aliases an input.
  cpu::add(a.data(), b.data(), want.data(), count);
  EXPECT_OK(add(a_d.get(), b_d.get(), a_d.get(), count, stream));
  expectClose(a_d.values(), want, tolerance<T>(0.0), "add in place " + what);
}

TEST_F(CudaKernelsTest, Elementwise) {
  for (const int64_t count : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    checkElementwise<float>(stream_, count);
    checkElementwise<bf16>(stream_, count);
  }
}

TEST_F(CudaKernelsTest, ElementwiseBeyondOneGridPass) {
  // More elements than the grid covers in one pass (65536 blocks x 256), so
  // the grid-stride loop must come round again.
  const int64_t count = (int64_t{1} << 24) + 7;
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i) x[i] = static_cast<float>(i % 1001) / 100.0f - 5.0f;
  std::vector<float> want(count);
  cpu::silu(x.data(), want.data(), count);
  Tensor<float> x_d(x), y_d(count);
  EXPECT_OK(silu(x_d.get(), y_d.get(), count, stream_));
  expectClose(y_d.values(), want, 1e-5, "silu over 2^24 + 7 elements");
}

template <typename T>
void checkBiasAdd(cudaStream_t stream, int64_t rows, int64_t out) {
  const auto x = asStored<T>(randomVector(rows * out, 91));
  const auto bias = asStored<T>(randomVector(out, 92));
  std::vector<float> want(rows * out);
  cpu::biasAdd(x.data(), bias.data(), want.data(), rows, out);
  Tensor<T> x_d(x), bias_d(bias), y_d(rows * out);
  EXPECT_OK(biasAdd(x_d.get(), bias_d.get(), y_d.get(), rows, out, stream));
  expectClose(y_d.values(), want, tolerance<T>(0.0), std::string("biasAdd ") + dtypeName<T>());
  EXPECT_OK(biasAdd(x_d.get(), bias_d.get(), x_d.get(), rows, out, stream));
  expectClose(x_d.values(), want, tolerance<T>(0.0), "biasAdd in place");
}

TEST_F(CudaKernelsTest, BiasAdd) {
  checkBiasAdd<float>(stream_, 37, 45);
  checkBiasAdd<bf16>(stream_, 37, 45);
  checkBiasAdd<float>(stream_, 1, 1);
}

template <typename T>
void checkReduceSum(cudaStream_t stream, const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& dims) {
  const int64_t count =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  int64_t out_count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) {
      out_count *= shape[d];
    }
  }
  std::string what = std::string("reduceSum ") + dtypeName<T>() + " dims {";
  for (int64_t d : dims) what += std::to_string(d) + ",";
  what += "}";
  const auto x = asStored<T>(randomVector(count, 101));
  std::vector<float> want(out_count);
  cpu::reduceSum(x.data(), shape, dims, want.data());
  Tensor<T> x_d(x), out_d(out_count);
  EXPECT_OK(reduceSum(x_d.get(), std::span<const int64_t>(shape), std::span<const int64_t>(dims),
                      out_d.get(), stream));
  expectClose(out_d.values(), want, tolerance<T>(1e-5), what);
}

TEST_F(CudaKernelsTest, ReduceSumOverEveryDimSubset) {
  const std::vector<int64_t> shape = {3, 5, 4, 6};
  for (int mask = 0; mask < 16; ++mask) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < 4; ++d) {
      if (mask & (1 << d)) dims.push_back(d);
    }
    checkReduceSum<float>(stream_, shape, dims);
    checkReduceSum<bf16>(stream_, shape, dims);
  }
  // A bias gradient (columns), row sums and one long full reduction.
  checkReduceSum<float>(stream_, {3000, 70}, {0});
  checkReduceSum<float>(stream_, {70, 3000}, {1});
  checkReduceSum<float>(stream_, {100003}, {0});
}

// ---- Embedding and loss ------------------------------------------------------------

template <typename T, typename Id>
void checkEmbedding(cudaStream_t stream, int64_t row_begin, int64_t table_rows, int64_t vocab) {
  const int64_t tokens = 300;
  const int64_t hidden = 37;
  const std::string what = std::string("embedding ") + dtypeName<T>() + " id" +
                           std::to_string(8 * sizeof(Id)) + " rows [" + std::to_string(row_begin) +
                           ", +" + std::to_string(table_rows) + ")";
  std::mt19937 rng(111);
  // Ids over the whole vocabulary, so some fall outside this shard, with
  // repeats (300 tokens over a small vocab).
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<Id> ids(tokens);
  for (Id& id : ids) id = static_cast<Id>(pick(rng));
  const auto table = asStored<T>(randomVector(table_rows * hidden, 112));
  const auto dy = asStored<T>(randomVector(tokens * hidden, 113));
  std::vector<float> out(tokens * hidden), dtable(table_rows * hidden);
  cpu::embedding(ids.data(), table.data(), out.data(), tokens, hidden, row_begin, table_rows);
  cpu::embeddingGrad(ids.data(), dy.data(), dtable.data(), tokens, hidden, row_begin, table_rows);
  DeviceArray<Id> ids_d = deviceIds(ids);
  Tensor<T> table_d(table), dy_d(dy), out_d(tokens * hidden);
  Tensor<float> dtable_d(table_rows * hidden);
  EXPECT_OK((embedding<T, Id>(ids_d.get(), table_d.get(), out_d.get(), tokens, hidden, row_begin,
                              table_rows, stream)));
  EXPECT_OK((embeddingGrad<T, Id>(ids_d.get(), dy_d.get(), dtable_d.get(), tokens, hidden,
                                  row_begin, table_rows, stream)));
  // A copy and token-ordered sums: exact.
  EXPECT_EQ(out_d.values(), out) << what;
  EXPECT_EQ(dtable_d.values(), dtable) << what << " grad";
}

TEST_F(CudaKernelsTest, EmbeddingWholeAndSharded) {
  checkEmbedding<float, int32_t>(stream_, 0, 50, 50);
  checkEmbedding<float, int64_t>(stream_, 0, 50, 50);
  checkEmbedding<bf16, int32_t>(stream_, 0, 50, 50);
  // A vocab shard: rows [40, 110) of 200, more than one 64-row grad block.
  checkEmbedding<float, int32_t>(stream_, 40, 70, 200);
  checkEmbedding<float, int64_t>(stream_, 40, 70, 200);
  checkEmbedding<bf16, int64_t>(stream_, 40, 70, 200);
  // A table larger than the token count.
  checkEmbedding<float, int32_t>(stream_, 0, 1000, 1000);
}

// The loss is fp32 computed from the logits' exact values, so bf16 logits
// keep fp32's tolerance; only the bf16 gradient has its own rounding.
template <typename T, typename Label>
void checkCrossEntropy(cudaStream_t stream, int64_t tokens, int64_t vocab) {
  const std::string what = std::string("crossEntropy ") + dtypeName<T>() + " label" +
                           std::to_string(8 * sizeof(Label)) + " vocab " + std::to_string(vocab);
  const auto logits = asStored<T>(randomVector(tokens * vocab, 121, -8.0f, 8.0f));
  std::mt19937 rng(122);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<Label> labels(tokens);
  for (Label& l : labels) l = static_cast<Label>(pick(rng));
  // Every fifth token has no target: zero loss and a zero gradient row.
  for (size_t t = 3; t < labels.size(); t += 5) labels[t] = static_cast<Label>(kIgnoreLabel);
  const float dloss = 0.75f;
  const float scale = 1.0f / 64.0f;  // 1/N of a larger batch
  const float want_loss = cpu::crossEntropy(logits.data(), labels.data(), tokens, vocab);
  std::vector<float> want_grad(tokens * vocab);
  cpu::crossEntropyGrad(logits.data(), labels.data(), dloss, scale, want_grad.data(), tokens,
                        vocab);
  DeviceArray<Label> labels_d = deviceIds(labels);
  Tensor<T> logits_d(logits), grad_d(tokens * vocab);
  Tensor<float> loss_d(1);
  const size_t bytes = crossEntropyWorkspaceBytes(tokens);
  DeviceArray<char> workspace(bytes);
  EXPECT_OK(crossEntropy(logits_d.get(), labels_d.get(), loss_d.get(), tokens, vocab,
                         workspace.get(), bytes, stream));
  EXPECT_OK(crossEntropyGrad(logits_d.get(), labels_d.get(), dloss, scale, grad_d.get(), tokens,
                             vocab, stream));
  expectClose(loss_d.values(), {want_loss}, 2e-6, what);
  expectClose(grad_d.values(), want_grad, tolerance<T>(1e-5), what + " grad");
}

TEST_F(CudaKernelsTest, CrossEntropy) {
  checkCrossEntropy<float, int32_t>(stream_, 37, 1000);
  checkCrossEntropy<float, int64_t>(stream_, 37, 1000);
  checkCrossEntropy<float, int32_t>(stream_, 5, 32003);
  checkCrossEntropy<float, int64_t>(stream_, 1, 1);
  checkCrossEntropy<bf16, int32_t>(stream_, 37, 1000);
  checkCrossEntropy<bf16, int64_t>(stream_, 5, 32003);
  checkCrossEntropy<bf16, int32_t>(stream_, 1, 1);
}

// Each vocab-parallel kernel on one padded shard against the CPU's. The
// maxima and statistics are fp32 from the logits' exact values, so bf16
// logits keep fp32's tolerances there.
template <typename T>
void checkVocabShard(cudaStream_t stream) {
  const std::string what = std::string(" ") + dtypeName<T>();
  // This shard holds vocab rows [64, 128) in 70 local rows: 6 rows of
  // padding, which hold huge values that must never be read.
  const int64_t tokens = 41, local = 70, valid = 64, row_begin = 64;
  auto logits = randomVector(tokens * local, 131, -8.0f, 8.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = valid; r < local; ++r) logits[t * local + r] = 1e30f;
  }
  logits = asStored<T>(logits);
  std::mt19937 rng(132);
  std::uniform_int_distribution<int32_t> pick(0, 199);  // some labels on this shard
  std::vector<int32_t> labels(tokens);
  for (int32_t& l : labels) l = pick(rng);
  for (int64_t t = 3; t < tokens; t += 5) labels[t] = kIgnoreLabel;
  std::vector<float> max(tokens), stats(2 * tokens), grad(tokens * local);
  cpu::vocabMax(logits.data(), max.data(), tokens, local, valid);
  cpu::vocabStats(logits.data(), labels.data(), max.data(), stats.data(), tokens, local, valid,
                  row_begin);
  const float loss = cpu::vocabCrossEntropy(stats.data(), tokens);
  cpu::vocabCrossEntropyGrad(logits.data(), labels.data(), max.data(), stats.data(), 0.5f,
                             1.0f / 41.0f, grad.data(), tokens, local, valid, row_begin);

  DeviceArray<int32_t> labels_d = deviceIds(labels);
  Tensor<T> logits_d(logits), grad_d(tokens * local);
  Tensor<float> max_d(tokens), stats_d(2 * tokens), loss_d(1);
  EXPECT_OK(vocabMax(logits_d.get(), max_d.get(), tokens, local, valid, stream));
  EXPECT_EQ(max_d.values(), max) << "vocabMax" << what;
  // Continue from the CPU's max so each kernel is checked on its own.
  Tensor<float> cpu_max_d(max);
  EXPECT_OK(vocabStats(logits_d.get(), labels_d.get(), cpu_max_d.get(), stats_d.get(), tokens,
                       local, valid, row_begin, stream));
  // An ignored token's statistic is the +inf marker; the rest compare.
  std::vector<float> got_stats = stats_d.values(), want_stats = stats;
  for (int64_t t = 3; t < tokens; t += 5) {
    EXPECT_TRUE(std::isinf(got_stats[2 * t + 1]) && std::isinf(want_stats[2 * t + 1]))
        << "vocabStats" << what << " token " << t << " is ignored";
    got_stats[2 * t + 1] = want_stats[2 * t + 1] = 0.0f;
  }
  expectClose(got_stats, want_stats, 1e-6, "vocabStats" + what);
  Tensor<float> cpu_stats_d(stats);
  EXPECT_OK(vocabCrossEntropy(cpu_stats_d.get(), loss_d.get(), tokens, stream));
  expectClose(loss_d.values(), {loss}, 1e-6, "vocabCrossEntropy" + what);
  EXPECT_OK(vocabCrossEntropyGrad(logits_d.get(), labels_d.get(), cpu_max_d.get(),
                                  cpu_stats_d.get(), 0.5f, 1.0f / 41.0f, grad_d.get(), tokens,
                                  local, valid, row_begin, stream));
  expectClose(grad_d.values(), grad, tolerance<T>(2e-6), "vocabCrossEntropyGrad" + what);
}

TEST_F(CudaKernelsTest, VocabParallelCrossEntropy) {
  checkVocabShard<float>(stream_);
  checkVocabShard<bf16>(stream_);

  // The shards of a vocab-parallel run give the unsharded loss.
  const int64_t tokens = 41;
  std::mt19937 rng(132);
  std::uniform_int_distribution<int32_t> pick(0, 199);
  std::vector<int32_t> labels(tokens);
  for (int32_t& l : labels) l = pick(rng);
  DeviceArray<int32_t> labels_d = deviceIds(labels);
  Tensor<float> loss_d(1);
  const int64_t vocab = 200;
  const auto full = randomVector(tokens * vocab, 133, -8.0f, 8.0f);
  const float whole = cpu::crossEntropy(full.data(), labels.data(), tokens, vocab);
  std::vector<float> global_max(tokens, -std::numeric_limits<float>::infinity());
  std::vector<float> global_stats(2 * tokens, 0.0f);
  for (int64_t begin = 0; begin < vocab; begin += 64) {
    const int64_t rows = std::min<int64_t>(64, vocab - begin);
    std::vector<float> shard(tokens * 64, 0.0f);
    for (int64_t t = 0; t < tokens; ++t) {
      std::copy_n(&full[t * vocab + begin], rows, &shard[t * 64]);
    }
    Tensor<float> shard_d(shard), shard_max(tokens);
    EXPECT_OK(vocabMax(shard_d.get(), shard_max.get(), tokens, 64, rows, stream_));
    const auto m = shard_max.values();
    for (int64_t t = 0; t < tokens; ++t) global_max[t] = std::max(global_max[t], m[t]);
  }
  Tensor<float> global_max_d(global_max);
  for (int64_t begin = 0; begin < vocab; begin += 64) {
    const int64_t rows = std::min<int64_t>(64, vocab - begin);
    std::vector<float> shard(tokens * 64, 0.0f);
    for (int64_t t = 0; t < tokens; ++t) {
      std::copy_n(&full[t * vocab + begin], rows, &shard[t * 64]);
    }
    Tensor<float> shard_d(shard), shard_stats(2 * tokens);
    EXPECT_OK(vocabStats(shard_d.get(), labels_d.get(), global_max_d.get(), shard_stats.get(),
                         tokens, 64, rows, begin, stream_));
    const auto s = shard_stats.values();
    for (int64_t i = 0; i < 2 * tokens; ++i) global_stats[i] += s[i];
  }
  Tensor<float> global_stats_d(global_stats);
  EXPECT_OK(vocabCrossEntropy(global_stats_d.get(), loss_d.get(), tokens, stream_));
  expectClose(loss_d.values(), {whole}, 1e-5, "vocab shards vs whole");
}

// ---- Precision ---------------------------------------------------------------------

uint16_t bitsOf(bf16 value) {
  const __nv_bfloat16_raw raw = value;
  return raw.x;
}

// The bits of each float, so that -0 differs from 0 and NaNs compare.
std::vector<uint32_t> bitsOf(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = std::bit_cast<uint32_t>(values[i]);
  return bits;
}

// What a T result holds: the host's rounding of the fp32 value.
template <typename T>
float roundedTo(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return comm::bfloat16ToFloat(comm::floatToBfloat16(value));
  }
}

// Values whose rounding matters: ties to even both ways and their
// neighbours, signed zeros, subnormals, the largest floats (which round to
// infinity) and infinities, then random bit patterns, so every magnitude.
std::vector<float> roundingCases() {
  std::vector<float> values;
  for (const uint32_t bits :
       {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0xbf808000u, 0xbf818000u, 0x00000000u,
        0x80000000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu,
        0x7f7f8000u, 0x7f7e8000u, 0x7f800000u, 0xff800000u}) {
    values.push_back(std::bit_cast<float>(bits));
  }
  std::mt19937 rng(171);
  std::uniform_int_distribution<uint32_t> any(0, 0xffffffffu);
  while (values.size() < 100003) {
    const float v = std::bit_cast<float>(any(rng));
    if (!std::isnan(v)) values.push_back(v);  // NaNs are checked on their own
  }
  return values;
}

TEST_F(CudaKernelsTest, ConvertRoundsAsTheHost) {
  const std::vector<float> values = roundingCases();
  const auto count = static_cast<int64_t>(values.size());
  Tensor<float> src(values), wide(count), same(count);
  DeviceArray<bf16> narrow(count), narrow_copy(count);
  EXPECT_OK((convert<float, bf16>(src.get(), narrow.get(), count, stream_)));
  EXPECT_OK((convert<bf16, float>(narrow.get(), wide.get(), count, stream_)));
  EXPECT_OK((convert<float, float>(src.get(), same.get(), count, stream_)));
  EXPECT_OK((convert<bf16, bf16>(narrow.get(), narrow_copy.get(), count, stream_)));
  const std::vector<bf16> got = narrow.download();
  const std::vector<bf16> got_copy = narrow_copy.download();
  const std::vector<uint32_t> got_wide = bitsOf(wide.values());
  int mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t want = comm::floatToBfloat16(values[i]);
    if (bitsOf(got[i]) != want || bitsOf(got_copy[i]) != want ||
        got_wide[i] != std::bit_cast<uint32_t>(comm::bfloat16ToFloat(want))) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "element " << i << " (" << values[i] << ", bits " << std::hex
                      << std::bit_cast<uint32_t>(values[i]) << "): bf16 " << bitsOf(got[i])
                      << ", want " << want << std::dec;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(bitsOf(same.values()), bitsOf(values)) << "f32 -> f32 copies";

  // NaN stays NaN both ways (payloads differ between libraries).
  Tensor<float> nan(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), -std::nanf("1")});
  DeviceArray<bf16> nan_narrow(2);
  Tensor<float> nan_wide(2);
  EXPECT_OK((convert<float, bf16>(nan.get(), nan_narrow.get(), 2, stream_)));
  EXPECT_OK((convert<bf16, float>(nan_narrow.get(), nan_wide.get(), 2, stream_)));
  for (const float v : nan_wide.values()) EXPECT_TRUE(std::isnan(v));
}

// The CPU executor's sumChunks: chunk 0, then every later chunk added in
// fp32 in order, divided by `chunks` in fp32 when averaging.
std::vector<float> hostSumChunks(const std::vector<float>& src, int64_t chunks, int64_t count,
                                 bool average) {
  std::vector<float> sum(src.begin(), src.begin() + count);
  for (int64_t c = 1; c < chunks; ++c) {
    for (int64_t i = 0; i < count; ++i) sum[i] += src[c * count + i];
  }
  if (average) {
    for (float& v : sum) v /= static_cast<float>(chunks);
  }
  return sum;
}

template <typename TIn, typename TOut>
void checkSumChunks(cudaStream_t stream, int64_t chunks, int64_t count, bool average) {
  const std::string what = std::string("sumChunks ") + dtypeName<TIn>() + "->" + dtypeName<TOut>() +
                           " chunks " + std::to_string(chunks) + " count " + std::to_string(count) +
                           (average ? " average" : " sum");
  // Magnitudes over 2^-12..2^12, so a different order of the adds would
  // change the fp32 sum.
  std::vector<float> src = randomVector(chunks * count, 181 + static_cast<uint32_t>(chunks));
  std::mt19937 rng(182);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (float& v : src) v = std::ldexp(v, exponent(rng));
  src = asStored<TIn>(src);
  std::vector<float> want = hostSumChunks(src, chunks, count, average);
  for (float& v : want) v = roundedTo<TOut>(v);
  Tensor<TIn> src_d(src);
  Tensor<TOut> dst_d(count);
  EXPECT_OK((sumChunks<TIn, TOut>(src_d.get(), chunks, count, average, dst_d.get(), stream)));
  EXPECT_EQ(bitsOf(dst_d.values()), bitsOf(want)) << what;
  if constexpr (std::is_same_v<TIn, TOut>) {
    // In place: the result over chunk 0.
    EXPECT_OK((sumChunks<TIn, TOut>(src_d.get(), chunks, count, average, src_d.get(), stream)));
    std::vector<float> head = src_d.values();
    head.resize(count);
    EXPECT_EQ(bitsOf(head), bitsOf(want)) << what << " in place";
  }
}

TEST_F(CudaKernelsTest, SumChunksAddInChunkOrderAndRoundOnce) {
  for (const int64_t count : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    for (const int64_t chunks : {1, 3, 8}) {
      for (const bool average : {false, true}) {
        checkSumChunks<float, float>(stream_, chunks, count, average);
        checkSumChunks<float, bf16>(stream_, chunks, count, average);
        checkSumChunks<bf16, float>(stream_, chunks, count, average);
        checkSumChunks<bf16, bf16>(stream_, chunks, count, average);
      }
    }
  }
}

// ---- Optimizer ---------------------------------------------------------------------

TEST_F(CudaKernelsTest, AdamWMatchesTheCpuStepElementForElement) {
  const int64_t count = 100003;
  const optim::AdamWConfig config{
      .lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  for (const bool clip : {false, true}) {
    auto params = randomVector(count, 141);
    std::vector<float> m(count, 0.0f), v(count, 0.0f);
    Tensor<float> params_d(params), m_d(m), v_d(v), scale_d(std::vector<float>{0.37f});
    for (int64_t step = 1; step <= 5; ++step) {
      auto grads = randomVector(count, 150 + static_cast<uint32_t>(step), -2.0f, 2.0f);
      Tensor<float> grads_d(grads);
      if (clip) optim::scaleGradients(grads.data(), count, 0.37f);
      optim::adamwStep(config, step, params.data(), grads.data(), m.data(), v.data(), count);
      EXPECT_OK(adamwStep(config, step, params_d.get(), grads_d.get(), m_d.get(), v_d.get(), count,
                          clip ? scale_d.get() : nullptr, stream_));
    }
#if defined(__x86_64__)
    // x86-64 without -mfma never contracts the CPU step into FMAs, and the
    // kernel uses round-to-nearest intrinsics in the same order: same bits.
    EXPECT_EQ(params_d.values(), params) << "clip " << clip;
    EXPECT_EQ(m_d.values(), m) << "clip " << clip;
    EXPECT_EQ(v_d.values(), v) << "clip " << clip;
#else
    expectClose(params_d.values(), params, 1e-6, "adamw params");
    expectClose(m_d.values(), m, 1e-6, "adamw exp_avg");
    expectClose(v_d.values(), v, 1e-6, "adamw exp_avg_sq");
#endif
  }
}

// Mixed precision: the CPU executor runs optim::adamwStep on the f32 master
// with the gradients widened (and scaled on a copy), then rounds the master
// into the params. The kernel must give the same master and moments, and
// params that are exactly its own master rounded.
template <typename TParam, typename TGrad>
void checkAdamWWithMaster(cudaStream_t stream, bool clip) {
  const std::string what = std::string("adamw params ") + dtypeName<TParam>() + " grads " +
                           dtypeName<TGrad>() + (clip ? " clipped" : "");
  const int64_t count = 100003;
  const optim::AdamWConfig config{
      .lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  auto master = randomVector(count, 191);
  std::vector<float> m(count, 0.0f), v(count, 0.0f);
  Tensor<float> master_d(master), m_d(m), v_d(v), scale_d(std::vector<float>{0.37f});
  Tensor<TParam> params_d(asStored<TParam>(master));
  for (int64_t step = 1; step <= 5; ++step) {
    const auto grads =
        asStored<TGrad>(randomVector(count, 200 + static_cast<uint32_t>(step), -2.0f, 2.0f));
    Tensor<TGrad> grads_d(grads);
    EXPECT_OK((adamwStepWithMaster<TParam, TGrad>(config, step, params_d.get(), grads_d.get(),
                                                  m_d.get(), v_d.get(), master_d.get(), count,
                                                  clip ? scale_d.get() : nullptr, stream)));
    EXPECT_EQ(bitsOf(grads_d.values()), bitsOf(grads)) << what << ": grads are left alone";
    std::vector<float> scaled = grads;
    if (clip) optim::scaleGradients(scaled.data(), count, 0.37f);
    optim::adamwStep(config, step, master.data(), scaled.data(), m.data(), v.data(), count);
  }
  const std::vector<float> got_master = master_d.values();
#if defined(__x86_64__)
  EXPECT_EQ(bitsOf(got_master), bitsOf(master)) << what << ": master";
  EXPECT_EQ(bitsOf(m_d.values()), bitsOf(m)) << what << ": exp_avg";
  EXPECT_EQ(bitsOf(v_d.values()), bitsOf(v)) << what << ": exp_avg_sq";
#else
  expectClose(got_master, master, 1e-6, what + ": master");
  expectClose(m_d.values(), m, 1e-6, what + ": exp_avg");
  expectClose(v_d.values(), v, 1e-6, what + ": exp_avg_sq");
#endif
  std::vector<float> want_params = got_master;
  for (float& p : want_params) p = roundedTo<TParam>(p);
  EXPECT_EQ(bitsOf(params_d.values()), bitsOf(want_params)) << what << ": params = master rounded";
}

TEST_F(CudaKernelsTest, AdamWWithAnFp32MasterMatchesTheCpuStepOnTheMaster) {
  for (const bool clip : {false, true}) {
    checkAdamWWithMaster<bf16, bf16>(stream_, clip);
    checkAdamWWithMaster<bf16, float>(stream_, clip);
    checkAdamWWithMaster<float, bf16>(stream_, clip);
    checkAdamWWithMaster<float, float>(stream_, clip);
  }
}

TEST_F(CudaKernelsTest, AdamWReadsBf16GradientsAsTheirValues) {
  const int64_t count = 100003;
  const optim::AdamWConfig config{};
  auto params = randomVector(count, 211);
  std::vector<float> m(count, 0.0f), v(count, 0.0f);
  Tensor<float> params_d(params), m_d(m), v_d(v);
  for (int64_t step = 1; step <= 3; ++step) {
    auto grads = asStored<bf16>(randomVector(count, 220 + static_cast<uint32_t>(step)));
    Tensor<bf16> grads_d(grads);
    EXPECT_OK(adamwStep(config, step, params_d.get(), grads_d.get(), m_d.get(), v_d.get(), count,
                        nullptr, stream_));
    optim::adamwStep(config, step, params.data(), grads.data(), m.data(), v.data(), count);
  }
#if defined(__x86_64__)
  EXPECT_EQ(bitsOf(params_d.values()), bitsOf(params));
  EXPECT_EQ(bitsOf(m_d.values()), bitsOf(m));
  EXPECT_EQ(bitsOf(v_d.values()), bitsOf(v));
#else
  expectClose(params_d.values(), params, 1e-6, "adamw bf16 grads");
#endif
}

// As the CPU's clipping, only a coefficient below 1 scales: 1 (nothing to
// clip) and NaN (a NaN norm) give the unscaled step.
TEST_F(CudaKernelsTest, AdamWScalesOnlyBelowOne) {
  const int64_t count = 4099;
  const optim::AdamWConfig config{};
  const auto start = randomVector(count, 231);
  const auto grads = randomVector(count, 232);
  std::vector<std::vector<float>> results;
  for (const float coefficient : {-1.0f, 1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    Tensor<float> params_d(start), m_d(std::vector<float>(count, 0.0f)),
        v_d(std::vector<float>(count, 0.0f)), grads_d(grads),
        scale_d(std::vector<float>{coefficient});
    EXPECT_OK(adamwStep(config, 1, params_d.get(), grads_d.get(), m_d.get(), v_d.get(), count,
                        coefficient < 0.0f ? nullptr : scale_d.get(), stream_));
    results.push_back(params_d.values());
  }
  EXPECT_EQ(bitsOf(results[1]), bitsOf(results[0])) << "coefficient 1";
  EXPECT_EQ(bitsOf(results[2]), bitsOf(results[0])) << "coefficient NaN";
}

// ---- Determinism of the workspace reductions --------------------------------------

TEST_F(CudaKernelsTest, NormGradientsRepeatBitForBit) {
  const int64_t rows = 1000, hidden = 300;
  Tensor<float> x(randomVector(rows * hidden, 161)), gamma(randomVector(hidden, 162)),
      dy(randomVector(rows * hidden, 163)), dx(rows * hidden), dgamma1(hidden), dgamma2(hidden);
  const size_t bytes = rmsNormGradWorkspaceBytes(rows, hidden);
  DeviceArray<char> workspace(bytes);
  EXPECT_OK(rmsNormGrad(x.get(), gamma.get(), dy.get(), dx.get(), dgamma1.get(), rows, hidden,
                        1e-6f, workspace.get(), bytes, stream_));
  EXPECT_OK(rmsNormGrad(x.get(), gamma.get(), dy.get(), dx.get(), dgamma2.get(), rows, hidden,
                        1e-6f, workspace.get(), bytes, stream_));
  EXPECT_EQ(dgamma1.values(), dgamma2.values());
}

}  // namespace
}  // namespace loom::runtime::cuda
