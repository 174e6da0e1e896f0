// Times the GEMMs of a Llama-1B-sized layer through our cuBLASLt wrapper
// (CublasLtHandle, cached plans) against plain cublasGemmEx, and the fused
// causal attention forward and backward, on GPU 0. Prints one table row per
// case. Without a usable GPU it prints "skipped: <reason>" and exits 3, so
// scripts can tell a skip (3) from a pass (0) and a failure (1).
//
//   bazel run -c opt //runtime/kernels/cuda:gemm_bench [-- --quick]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime::cuda {
namespace {

// Dense peaks of the H200 SXM from NVIDIA's H200 datasheet: BF16 tensor
// core 989 TFLOP/s (1979 is the 2:4-sparse figure), FP32 67 TFLOP/s.
constexpr double kPeakBf16Tflops = 989.0;
constexpr double kPeakFp32Tflops = 67.0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "gemm_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(const Status& status) {
  if (!status.ok()) fail(status.message());
}

void checkCuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(error));
}

void checkCublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail(std::string(what) + ": " + cublasGetStatusString(status));
  }
}

template <typename T>
T* deviceAlloc(int64_t count) {
  T* device = nullptr;
  checkCuda(cudaMalloc(reinterpret_cast<void**>(&device), count * sizeof(T)), "cudaMalloc");
  return device;
}

// A device buffer of `count` T filled with small pseudo-random values.
template <typename T>
T* randomDevice(int64_t count, uint32_t seed) {
  std::vector<T> host(count);
  uint32_t state = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    const float value = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    if constexpr (std::is_same_v<T, float>) {
      host[i] = value;
    } else {
      // Truncation is fine for benchmark data.
      uint32_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      __nv_bfloat16_raw raw;
      raw.x = static_cast<uint16_t>(bits >> 16);
      host[i] = raw;
    }
  }
  T* device = deviceAlloc<T>(count);
  checkCuda(cudaMemcpy(device, host.data(), count * sizeof(T), cudaMemcpyHostToDevice),
            "cudaMemcpy");
  return device;
}

// Median milliseconds per call of `launch` over 5 samples of `calls` calls,
// after two warm-up calls (which also build our plan cache).
template <typename Launch>
double medianMs(cudaStream_t stream, int calls, Launch&& launch) {
  cudaEvent_t start = nullptr, stop = nullptr;
  checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  launch();
  launch();
  std::vector<double> samples;
  for (int sample = 0; sample < 5; ++sample) {
    checkCuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < calls; ++i) launch();
    checkCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    samples.push_back(ms / calls);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

enum class Layout { kForward, kGradInput, kGradWeight };

const char* layoutName(Layout layout) {
  switch (layout) {
    case Layout::kForward:
      return "y=xW";
    case Layout::kGradInput:
      return "dx=dyW^T";
    case Layout::kGradWeight:
      return "dW=x^Tdy";
  }
  return "?";
}

// One GEMM of a linear layer [tokens, in] x [in, out] in one layout, ours
// and cublasGemmEx's, with T in and out.
template <typename T>
void benchGemm(CublasLtHandle& ours, cublasHandle_t cublas, cudaStream_t stream, Layout layout,
               int64_t tokens, int64_t in, int64_t out) {
  const bool is_bf16 = std::is_same_v<T, bf16>;
  const cudaDataType_t type = is_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // Only the operands this layout reads (filling 16384 x 32000 takes seconds).
  T* x = layout != Layout::kGradInput ? randomDevice<T>(tokens * in, 1) : nullptr;
  T* w = layout != Layout::kGradWeight ? randomDevice<T>(in * out, 2) : nullptr;
  T* dy = layout != Layout::kForward ? randomDevice<T>(tokens * out, 3) : nullptr;
  T* result = deviceAlloc<T>(layout == Layout::kForward     ? tokens * out
                             : layout == Layout::kGradInput ? tokens * in
                                                            : in * out);
  const float alpha = 1.0f, beta = 0.0f;
  const double flops = 2.0 * static_cast<double>(tokens) * in * out;
  const int calls = std::clamp(static_cast<int>(2e13 / flops), 3, 200);

  auto run_ours = [&] {
    switch (layout) {
      case Layout::kForward:
        check(linear<T, T>(ours, x, w, nullptr, result, tokens, in, out, stream));
        break;
      case Layout::kGradInput:
        check(matmulTransposeRhs<T, T>(ours, dy, w, result, tokens, out, in, stream));
        break;
      case Layout::kGradWeight:
        check(matmulTransposeLhs<T, T>(ours, x, dy, result, tokens, in, out, stream));
        break;
    }
  };
  // The same column-major products as gemm.cu issues (row-major transposed).
  auto run_cublas = [&] {
    const auto n_tokens = static_cast<int>(tokens);
    const auto n_in = static_cast<int>(in);
    const auto n_out = static_cast<int>(out);
    switch (layout) {
      case Layout::kForward:
        checkCublas(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, n_out, n_tokens, n_in, &alpha, w,
                                 type, n_out, x, type, n_in, &beta, result, type, n_out,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
        break;
      case Layout::kGradInput:
        checkCublas(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n_in, n_tokens, n_out, &alpha, w,
                                 type, n_out, dy, type, n_out, &beta, result, type, n_in,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
        break;
      case Layout::kGradWeight:
        checkCublas(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, n_out, n_in, n_tokens, &alpha,
                                 dy, type, n_out, x, type, n_in, &beta, result, type, n_out,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
        break;
    }
  };
  const double ours_ms = medianMs(stream, calls, run_ours);
  const double cublas_ms = medianMs(stream, calls, run_cublas);
  const double ours_tflops = flops / (ours_ms * 1e-3) / 1e12;
  const double cublas_tflops = flops / (cublas_ms * 1e-3) / 1e12;
  const double peak = is_bf16 ? kPeakBf16Tflops : kPeakFp32Tflops;
  std::printf("| %-9s | %6ld | %5ld | %6ld | %-4s | %9.3f | %11.1f | %13.1f | %5.2f | %6.1f%% |\n",
              layoutName(layout), static_cast<long>(tokens), static_cast<long>(in),
              static_cast<long>(out), is_bf16 ? "bf16" : "f32", ours_ms, ours_tflops, cublas_tflops,
              ours_tflops / cublas_tflops, 100.0 * ours_tflops / peak);
  std::fflush(stdout);
  cudaFree(x);
  cudaFree(w);
  cudaFree(dy);
  cudaFree(result);
}

// Causal attention, forward and backward. FLOPs as FlashAttention counts
// them: forward 4 B H S^2 D / 2 (QK^T and PV, half under the causal mask),
// backward 2.5 times the forward.
template <typename T>
void benchAttention(cudaStream_t stream, const AttentionShape& shape) {
  const int64_t q_count = shape.batch * shape.seq * shape.heads * shape.head_dim;
  const int64_t kv_count = shape.batch * shape.seq * shape.kv_heads * shape.head_dim;
  T* q = randomDevice<T>(q_count, 11);
  T* k = randomDevice<T>(kv_count, 12);
  T* v = randomDevice<T>(kv_count, 13);
  T* dout = randomDevice<T>(q_count, 14);
  T* out = deviceAlloc<T>(q_count);
  T* dq = deviceAlloc<T>(q_count);
  T* dk = deviceAlloc<T>(kv_count);
  T* dv = deviceAlloc<T>(kv_count);
  float* lse = deviceAlloc<float>(shape.batch * shape.heads * shape.seq);
  const double forward_flops = 2.0 * static_cast<double>(shape.batch) * shape.heads *
                               static_cast<double>(shape.seq) * shape.seq * shape.head_dim;
  const double backward_flops = 2.5 * forward_flops;
  const double forward_ms =
      medianMs(stream, 3, [&] { check(attention<T>(q, k, v, out, lse, shape, stream)); });
  const double backward_ms = medianMs(stream, 3, [&] {
    check(attentionGrad<T>(q, k, v, out, dout, lse, dq, dk, dv, shape, stream));
  });
  auto tflops = [](double flops, double ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf("| %-4s | %2ld | %5ld | %2ld/%ld | %3ld | %8.3f | %7.1f | %8.3f | %7.1f | %7.1f |\n",
              std::is_same_v<T, bf16> ? "bf16" : "f32", static_cast<long>(shape.batch),
              static_cast<long>(shape.seq), static_cast<long>(shape.heads),
              static_cast<long>(shape.kv_heads), static_cast<long>(shape.head_dim), forward_ms,
              tflops(forward_flops, forward_ms), backward_ms, tflops(backward_flops, backward_ms),
              tflops(forward_flops + backward_flops, forward_ms + backward_ms));
  std::fflush(stdout);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v),
                  static_cast<void*>(dout), static_cast<void*>(out), static_cast<void*>(dq),
                  static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(lse)}) {
    cudaFree(p);
  }
}

int run(bool quick) {
  const std::string reason = deviceUnavailableReason();
  if (!reason.empty()) {
    std::printf("skipped: %s\n", reason.c_str());
    return 3;
  }
  cudaDeviceProp properties{};
  checkCuda(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("# gemm_bench on %s (%d SMs); peaks used: bf16 %.0f, fp32 %.0f TFLOP/s\n\n",
              properties.name, properties.multiProcessorCount, kPeakBf16Tflops, kPeakFp32Tflops);
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::unique_ptr<CublasLtHandle> ours;
  check(CublasLtHandle::create(&ours));
  cublasHandle_t cublas = nullptr;
  checkCublas(cublasCreate(&cublas), "cublasCreate");
  checkCublas(cublasSetStream(cublas, stream), "cublasSetStream");

  std::printf(
      "| layout    | tokens |    in |    out | type |  ours ms | ours TFLOP/s "
      "| cuBLAS TFLOP/s | ratio | %% peak |\n");
  std::printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  const std::vector<int64_t> token_counts =
      quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 16384};
  const int64_t hidden = 2048;
  for (const int64_t tokens : token_counts) {
    for (const int64_t out : {int64_t{2048}, int64_t{5632}, int64_t{32000}}) {
      for (const Layout layout : {Layout::kForward, Layout::kGradInput, Layout::kGradWeight}) {
        benchGemm<bf16>(*ours, cublas, stream, layout, tokens, hidden, out);
        benchGemm<float>(*ours, cublas, stream, layout, tokens, hidden, out);
      }
    }
  }

  std::printf(
      "\n| type |  B |     S |  H/Hkv |   D |   fwd ms | fwd TF/s |   bwd ms "
      "| bwd TF/s | fwd+bwd TF/s |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  // Llama 3.2 1B attention: 32 query heads, 8 kv heads, head_dim 64.
  const std::vector<AttentionShape> shapes =
      quick ? std::vector<AttentionShape>{{2, 2048, 32, 8, 64}}
            : std::vector<AttentionShape>{
                  {2, 2048, 32, 8, 64}, {1, 4096, 32, 8, 64}, {1, 4096, 16, 16, 128}};
  for (const AttentionShape& shape : shapes) {
    benchAttention<bf16>(stream, shape);
    benchAttention<float>(stream, shape);
  }
  cublasDestroy(cublas);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace loom::runtime::cuda

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: gemm_bench [--quick]\n");
      return 1;
    }
  }
  return loom::runtime::cuda::run(quick);
}
