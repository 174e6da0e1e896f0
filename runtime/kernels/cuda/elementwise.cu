// Elementwise kernels (silu, gelu, add, mul, the fused silu*mul, bias_add)
// and rope. All are memory-bound grid-stride loops that read T, compute in
// fp32 registers and write T once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"

namespace loom::runtime::cuda {
namespace {

using detail::elementwiseBlocks;
using detail::fromFloat;
using detail::kElementwiseThreads;
using detail::launched;
using detail::toFloat;

constexpr float kGeluA = 0.044715f;
// sqrt(2 / pi) rounded to float, as the CPU kernel's constant.
constexpr float kGeluC = static_cast<float>(0.79788456080286535588);

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

struct Silu {
  __device__ float operator()(float x) const { return x * sigmoid(x); }
};
struct SiluGrad {
  __device__ float operator()(float x, float dy) const {
    const float s = sigmoid(x);
    return dy * s * (1.0f + x * (1.0f - s));
  }
};
struct Gelu {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x)));
  }
};
struct GeluGrad {
  __device__ float operator()(float x, float dy) const {
    const float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
    return dy * (0.5f * (1.0f + t) +
                 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x));
  }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Mul {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct SiluMul {
  __device__ float operator()(float a, float b) const { return a * sigmoid(a) * b; }
};

template <typename T, typename F>
__global__ void unaryKernel(const T* x, T* y, int64_t count, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = fromFloat<T>(f(toFloat(x[i])));
  }
}

template <typename T, typename F>
__global__ void binaryKernel(const T* a, const T* b, T* out, int64_t count, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = fromFloat<T>(f(toFloat(a[i]), toFloat(b[i])));
  }
}

template <typename T>
__global__ void siluMulGradKernel(const T* a, const T* b, const T* dout, T* da, T* db,
                                  int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = toFloat(a[i]);
    const float g = toFloat(dout[i]);
    const float s = sigmoid(x);
    da[i] = fromFloat<T>(g * toFloat(b[i]) * s * (1.0f + x * (1.0f - s)));
    db[i] = fromFloat<T>(g * x * s);
  }
}

template <typename T>
__global__ void biasAddKernel(const T* x, const T* bias, T* y, int64_t rows, int64_t out) {
  const int64_t count = rows * out;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = fromFloat<T>(toFloat(x[i]) + toFloat(bias[i % out]));
  }
}

// One thread per (position s, pair i): the angle's cos/sin are computed once
// in double (the angle grows with s and float would lose its phase) and
// applied to every (batch, head) in blockIdx.y's share.
template <typename T>
__global__ void ropeKernel(const T* x, T* y, int64_t batch, int64_t seq, int64_t heads,
                           int64_t head_dim, double theta, double sign, plan::RopeScaling scaling) {
  const int64_t half = head_dim / 2;
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= seq * half) return;
  const int64_t s = index / half;
  const int64_t i = index % half;
  const double frequency = plan::ropeInverseFrequency(i, head_dim, theta, scaling);
  double sin_angle = 0.0;
  double cos_angle = 0.0;
  sincos(sign * static_cast<double>(s) * frequency, &sin_angle, &cos_angle);
  const auto c = static_cast<float>(cos_angle);
  const auto sn = static_cast<float>(sin_angle);
  for (int64_t bh = blockIdx.y; bh < batch * heads; bh += gridDim.y) {
    const int64_t b = bh / heads;
    const int64_t h = bh % heads;
    const int64_t offset = ((b * seq + s) * heads + h) * head_dim;
    // Both halves are read before either is written, so y may be x.
    const float x1 = toFloat(x[offset + i]);
    const float x2 = toFloat(x[offset + i + half]);
    y[offset + i] = fromFloat<T>(x1 * c - x2 * sn);
    y[offset + i + half] = fromFloat<T>(x2 * c + x1 * sn);
  }
}

template <typename T, typename F>
Status launchUnary(const char* op, const T* x, T* y, int64_t count, cudaStream_t stream, F f) {
  unaryKernel<<<elementwiseBlocks(count), kElementwiseThreads, 0, stream>>>(x, y, count, f);
  return launched(op);
}

template <typename T, typename F>
Status launchBinary(const char* op, const T* a, const T* b, T* out, int64_t count,
                    cudaStream_t stream, F f) {
  binaryKernel<<<elementwiseBlocks(count), kElementwiseThreads, 0, stream>>>(a, b, out, count, f);
  return launched(op);
}

}  // namespace

template <typename T>
Status silu(const T* x, T* y, int64_t count, cudaStream_t stream) {
  return launchUnary("silu", x, y, count, stream, Silu());
}

template <typename T>
Status siluGrad(const T* x, const T* dy, T* dx, int64_t count, cudaStream_t stream) {
  return launchBinary("siluGrad", x, dy, dx, count, stream, SiluGrad());
}

template <typename T>
Status gelu(const T* x, T* y, int64_t count, cudaStream_t stream) {
  return launchUnary("gelu", x, y, count, stream, Gelu());
}

template <typename T>
Status geluGrad(const T* x, const T* dy, T* dx, int64_t count, cudaStream_t stream) {
  return launchBinary("geluGrad", x, dy, dx, count, stream, GeluGrad());
}

template <typename T>
Status add(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream) {
  return launchBinary("add", a, b, out, count, stream, Add());
}

template <typename T>
Status mul(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream) {
  return launchBinary("mul", a, b, out, count, stream, Mul());
}

template <typename T>
Status siluMul(const T* a, const T* b, T* out, int64_t count, cudaStream_t stream) {
  return launchBinary("siluMul", a, b, out, count, stream, SiluMul());
}

template <typename T>
Status siluMulGrad(const T* a, const T* b, const T* dout, T* da, T* db, int64_t count,
                   cudaStream_t stream) {
  siluMulGradKernel<<<elementwiseBlocks(count), kElementwiseThreads, 0, stream>>>(a, b, dout, da,
                                                                                  db, count);
  return launched("siluMulGrad");
}

template <typename T>
Status biasAdd(const T* x, const T* bias, T* y, int64_t rows, int64_t out, cudaStream_t stream) {
  biasAddKernel<<<elementwiseBlocks(rows * out), kElementwiseThreads, 0, stream>>>(x, bias, y, rows,
                                                                                   out);
  return launched("biasAdd");
}

template <typename T>
Status rope(const T* x, T* y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
            float theta, bool inverse, const plan::RopeScaling& scaling, cudaStream_t stream) {
  if (head_dim % 2 != 0) {
    return Status::invalidArgument("rope: head_dim " + std::to_string(head_dim) +
                                   " is odd; rope rotates pairs (i, i + head_dim/2)");
  }
  const int64_t pairs = seq * (head_dim / 2);
  const auto blocks_x =
      static_cast<unsigned>((pairs + kElementwiseThreads - 1) / kElementwiseThreads);
  // Enough (batch, head) shares to fill the GPU when seq * D/2 is small.
  const auto blocks_y = static_cast<unsigned>(
      std::clamp<int64_t>(4096 / std::max<int64_t>(blocks_x, 1), 1, batch * heads));
  ropeKernel<<<dim3(blocks_x, std::min(blocks_y, 65535u)), kElementwiseThreads, 0, stream>>>(
      x, y, batch, seq, heads, head_dim, static_cast<double>(theta), inverse ? -1.0 : 1.0, scaling);
  return launched("rope");
}

#define LOOM_INSTANTIATE_ELEMENTWISE(T)                                                        \
  template Status silu<T>(const T*, T*, int64_t, cudaStream_t);                                \
  template Status siluGrad<T>(const T*, const T*, T*, int64_t, cudaStream_t);                  \
  template Status gelu<T>(const T*, T*, int64_t, cudaStream_t);                                \
  template Status geluGrad<T>(const T*, const T*, T*, int64_t, cudaStream_t);                  \
  template Status add<T>(const T*, const T*, T*, int64_t, cudaStream_t);                       \
  template Status mul<T>(const T*, const T*, T*, int64_t, cudaStream_t);                       \
  template Status siluMul<T>(const T*, const T*, T*, int64_t, cudaStream_t);                   \
  template Status siluMulGrad<T>(const T*, const T*, const T*, T*, T*, int64_t, cudaStream_t); \
  template Status biasAdd<T>(const T*, const T*, T*, int64_t, int64_t, cudaStream_t);          \
  template Status rope<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, float, bool,       \
                          const plan::RopeScaling&, cudaStream_t);

LOOM_INSTANTIATE_ELEMENTWISE(float)
LOOM_INSTANTIATE_ELEMENTWISE(bf16)

#undef LOOM_INSTANTIATE_ELEMENTWISE

}  // namespace loom::runtime::cuda
