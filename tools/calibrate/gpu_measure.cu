// cuBLAS GEMM and device-memory triad measurements (gpu_measure.h).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tools/calibrate/gpu_measure.h"

namespace loom::calibrate::gpu {
namespace {

std::string cudaText(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorString(error);
}

std::string cublasText(const char* what, cublasStatus_t status) {
  return std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status));
}

double medianOf(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

template <typename T>
__global__ void fillKernel(T* data, int64_t count, float base) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = static_cast<T>(base + static_cast<float>(i % 7) * 0.01f);
  }
}

__global__ void triadKernel(float* a, const float* b, const float* c, float scalar, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    a[i] = b[i] + scalar * c[i];
  }
}

constexpr int kThreads = 256;
constexpr int kBlocks = 4096;

// Device buffers freed on every path.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : pointers_) cudaFree(p);
  }
  cudaError_t allocate(void** out, size_t bytes) {
    cudaError_t error = cudaMalloc(out, bytes);
    if (error == cudaSuccess) pointers_.push_back(*out);
    return error;
  }

 private:
  std::vector<void*> pointers_;
};

// Times `launch` (which enqueues one call on the default stream) in
// samples of at least min_time_s; returns calls per second (median).
template <typename Launch>
GpuRate medianCallRate(int repeats, double min_time_s, Launch&& launch) {
  cudaEvent_t start = nullptr, stop = nullptr;
  GpuRate rate;
  if (cudaError_t e = cudaEventCreate(&start); e != cudaSuccess) {
    rate.error = cudaText("cudaEventCreate", e);
    return rate;
  }
  if (cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    rate.error = cudaText("cudaEventCreate", e);
    return rate;
  }
  std::vector<double> samples;
  // One call, timed, estimates how many calls fill min_time_s.
  std::string error = launch();
  int calls = 1;
  if (error.empty()) {
    cudaEventRecord(start);
    error = launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double one = std::max(1e-7, ms / 1e3);
    calls = static_cast<int>(std::clamp(min_time_s / one, 1.0, 100000.0));
  }
  for (int r = 0; r < repeats && error.empty(); ++r) {
    cudaEventRecord(start);
    for (int i = 0; i < calls && error.empty(); ++i) error = launch();
    cudaEventRecord(stop);
    if (cudaError_t e = cudaEventSynchronize(stop); e != cudaSuccess) {
      error = cudaText("cudaEventSynchronize", e);
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    samples.push_back(calls / std::max(1e-9, ms / 1e3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (error.empty()) {
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) error = cudaText("kernel", e);
  }
  rate.error = error;
  if (error.empty()) rate.per_s = medianOf(samples);
  return rate;
}

}  // namespace

GpuDevice probeGpu() {
  GpuDevice device;
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    device.unavailable_reason = std::string("no usable GPU: ") + cudaGetErrorString(e);
    return device;
  }
  if (count == 0) {
    device.unavailable_reason = "no usable GPU: the driver reports 0 devices";
    return device;
  }
  cudaDeviceProp properties{};
  if (cudaError_t e = cudaGetDeviceProperties(&properties, 0); e != cudaSuccess) {
    device.unavailable_reason = cudaText("no usable GPU: cudaGetDeviceProperties", e);
    return device;
  }
  device.name = properties.name;
  device.memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
  device.compute_capability = properties.major * 10 + properties.minor;
  return device;
}

GpuRate measureGpuGemm(const std::string& dtype, int64_t m, int64_t n, int64_t k, int repeats,
                       double min_time_s) {
  GpuRate rate;
  cudaDataType_t type = CUDA_R_32F;
  size_t element = sizeof(float);
  if (dtype == "bf16") {
    type = CUDA_R_16BF;
    element = sizeof(__nv_bfloat16);
  } else if (dtype == "f16") {
    type = CUDA_R_16F;
    element = sizeof(__half);
  } else if (dtype != "f32") {
    rate.error = "GPU GEMM dtype '" + dtype + "' is not f32, bf16 or f16";
    return rate;
  }
  if (m <= 0 || n <= 0 || k <= 0 || m > (1 << 30) || n > (1 << 30) || k > (1 << 30)) {
    rate.error = "GPU GEMM shape must have dims in [1, 2^30]";
    return rate;
  }
  DeviceBuffers buffers;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  for (auto [ptr, count] : {std::pair{&a, m * k}, std::pair{&b, k * n}, std::pair{&c, m * n}}) {
    if (cudaError_t e = buffers.allocate(ptr, count * element); e != cudaSuccess) {
      rate.error = cudaText("cudaMalloc", e);
      return rate;
    }
  }
  auto fill = [&](void* p, int64_t count, float base) {
    if (type == CUDA_R_16BF) {
      fillKernel<<<kBlocks, kThreads>>>(static_cast<__nv_bfloat16*>(p), count, base);
    } else if (type == CUDA_R_16F) {
      fillKernel<<<kBlocks, kThreads>>>(static_cast<__half*>(p), count, base);
    } else {
      fillKernel<<<kBlocks, kThreads>>>(static_cast<float*>(p), count, base);
    }
  };
  fill(a, m * k, 0.5f);
  fill(b, k * n, 0.25f);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    rate.error = cudaText("fill kernel", e);
    return rate;
  }
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t s = cublasCreate(&handle); s != CUBLAS_STATUS_SUCCESS) {
    rate.error = cublasText("cublasCreate", s);
    return rate;
  }
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major C^T = B^T A^T is the row-major C = A B.
  auto launch = [&]() -> std::string {
    const cublasStatus_t s = cublasGemmEx(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &alpha, b, type, static_cast<int>(n), a, type, static_cast<int>(k),
        &beta, c, type, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? std::string() : cublasText("cublasGemmEx", s);
  };
  rate = medianCallRate(repeats, min_time_s, launch);
  cublasDestroy(handle);
  if (rate.error.empty()) {
    rate.per_s *= 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  return rate;
}

GpuRate measureGpuTriad(int64_t bytes_per_array, int repeats, double min_time_s) {
  GpuRate rate;
  const int64_t count = bytes_per_array / static_cast<int64_t>(sizeof(float));
  if (count < 1) {
    rate.error = "GPU triad needs at least one float per array; raise --stream_bytes";
    return rate;
  }
  DeviceBuffers buffers;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  for (void** p : {&a, &b, &c}) {
    if (cudaError_t e = buffers.allocate(p, count * sizeof(float)); e != cudaSuccess) {
      rate.error = cudaText("cudaMalloc", e);
      return rate;
    }
  }
  fillKernel<<<kBlocks, kThreads>>>(static_cast<float*>(b), count, 2.0f);
  fillKernel<<<kBlocks, kThreads>>>(static_cast<float*>(c), count, 0.5f);
  auto launch = [&]() -> std::string {
    triadKernel<<<kBlocks, kThreads>>>(static_cast<float*>(a), static_cast<const float*>(b),
                                       static_cast<const float*>(c), 3.0f, count);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? std::string() : cudaText("triad kernel", e);
  };
  rate = medianCallRate(repeats, min_time_s, launch);
  if (rate.error.empty()) rate.per_s *= 3.0 * static_cast<double>(count) * sizeof(float);
  return rate;
}

}  // namespace loom::calibrate::gpu
