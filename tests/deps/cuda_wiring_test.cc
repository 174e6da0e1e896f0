// Wiring test for CUDA, cuBLAS and NCCL. It always compiles and links (that is
// half its job); at run time it reports itself skipped where no GPU is usable
// and otherwise runs a kernel, a cuBLAS GEMM and a world-size-1 NCCL
// all-reduce and checks their numbers.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/deps/cuda_wiring_kernels.h"

namespace {

#define ASSERT_CUDA(expr)                                                   \
  do {                                                                      \
    const cudaError_t cuda_status = (expr);                                 \
    ASSERT_EQ(cuda_status, cudaSuccess) << cudaGetErrorString(cuda_status); \
  } while (0)

// Why no GPU can be used, or "" when one can.
std::string gpuUnavailableReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorString(error);
  if (count == 0) return "no usable GPU: the driver reports 0 devices";
  return "";
}

class CudaWiringTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = gpuUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
};

TEST_F(CudaWiringTest, SaxpyKernel) {
  constexpr int n = 1 << 16;
  std::vector<float> x(n, 2.0f), y(n, 1.0f);
  float *dx = nullptr, *dy = nullptr;
  ASSERT_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&dy, n * sizeof(float)));
  ASSERT_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA(loom::wiring::launchSaxpy(n, 3.0f, dx, dy, nullptr));
  ASSERT_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 7.0f) << "element " << i;
  cudaFree(dx);
  cudaFree(dy);
}

TEST_F(CudaWiringTest, KernelCarriesSm90BinaryAndPtx) {
  cudaDeviceProp properties{};
  ASSERT_CUDA(cudaGetDeviceProperties(&properties, 0));
  cudaFuncAttributes attributes{};
  ASSERT_CUDA(loom::wiring::saxpyAttributes(&attributes));
  EXPECT_EQ(attributes.ptxVersion, 90);
  // On Hopper the sm_90 SASS is used as is; newer GPUs JIT the PTX.
  if (properties.major == 9) {
    EXPECT_EQ(attributes.binaryVersion, 90);
  }
}

TEST_F(CudaWiringTest, CublasSgemm) {
  // Column-major 2x2: C = A * B with A = [[1,3],[2,4]], B = identity * 2.
  const std::vector<float> a = {1, 2, 3, 4}, b = {2, 0, 0, 2};
  std::vector<float> c(4, 0.0f);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  ASSERT_CUDA(cudaMalloc(&da, 4 * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&db, 4 * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&dc, 4 * sizeof(float)));
  ASSERT_CUDA(cudaMemcpy(da, a.data(), 4 * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(db, b.data(), 4 * sizeof(float), cudaMemcpyHostToDevice));
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(
      cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, da, 2, db, 2, &beta, dc, 2),
      CUBLAS_STATUS_SUCCESS);
  ASSERT_CUDA(cudaMemcpy(c.data(), dc, 4 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8}));
  cublasDestroy(handle);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST_F(CudaWiringTest, NcclAllReduceWorldSizeOne) {
  ncclComm_t comm = nullptr;
  int device = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &device), ncclSuccess);
  constexpr int n = 1024;
  std::vector<float> host(n, 1.5f);
  float* buffer = nullptr;
  ASSERT_CUDA(cudaMalloc(&buffer, n * sizeof(float)));
  ASSERT_CUDA(cudaMemcpy(buffer, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_EQ(ncclAllReduce(buffer, buffer, n, ncclFloat, ncclSum, comm, stream), ncclSuccess);
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  ASSERT_CUDA(cudaMemcpy(host.data(), buffer, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (float v : host) ASSERT_EQ(v, 1.5f);
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_GE(version, 22800);
  cudaStreamDestroy(stream);
  cudaFree(buffer);
  ncclCommDestroy(comm);
}

}  // namespace
