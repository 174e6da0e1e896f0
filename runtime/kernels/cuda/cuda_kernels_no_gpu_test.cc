// What the CUDA kernels say without a usable GPU (the build machines): a
// launch returns CUDA's own error, naming the op, instead of crashing, and
// CublasLtHandle::create fails with a message. Arguments the kernels refuse
// are refused before any CUDA call, so those checks run everywhere.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kernels/cuda/cuda_kernels.h"

namespace loom::runtime::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CudaKernelsNoGpuTest, LaunchesReturnCudasReason) {
  const std::string reason = deviceUnavailableReason();
  if (reason.empty()) GTEST_SKIP() << "a GPU is usable here; cuda_kernels_test covers the kernels";
  int count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&count);
  if (probe == cudaSuccess) {
    GTEST_SKIP() << "the runtime works but the GPU cannot run these kernels: " << reason;
  }
  const Status status = silu<float>(nullptr, nullptr, 16, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.cudaError(), probe);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("launching silu"), HasSubstr(cudaGetErrorString(probe))));

  const Status attention_status =
      attention<bf16>(nullptr, nullptr, nullptr, nullptr, nullptr, {1, 8, 2, 1, 64}, nullptr);
  EXPECT_FALSE(attention_status.ok());
  EXPECT_THAT(attention_status.message(), HasSubstr("attention"));

  const Status convert_status = convert<float, bf16>(nullptr, nullptr, 16, nullptr);
  EXPECT_EQ(convert_status.cudaError(), probe);
  EXPECT_THAT(convert_status.message(), HasSubstr("launching convert"));

  std::unique_ptr<CublasLtHandle> handle;
  const Status create = CublasLtHandle::create(&handle);
  EXPECT_FALSE(create.ok());
  EXPECT_FALSE(create.message().empty());
  EXPECT_EQ(handle, nullptr);
}

TEST(CudaKernelsArgumentTest, RefusedBeforeAnyCudaCall) {
  const AttentionShape too_wide{1, 8, 2, 2, 160};
  EXPECT_THAT(
      attention<float>(nullptr, nullptr, nullptr, nullptr, nullptr, too_wide, nullptr).message(),
      AllOf(HasSubstr("attention: head_dim 160 is outside [1, 128]")));
  const AttentionShape bad_group{1, 8, 6, 4, 64};
  const Status group = attentionGrad<float>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr, bad_group, nullptr);
  EXPECT_EQ(group.cudaError(), cudaErrorInvalidValue);
  EXPECT_THAT(group.message(), HasSubstr("heads 6 is not a multiple of kv_heads 4"));

  EXPECT_THAT(rope<float>(nullptr, nullptr, 1, 4, 1, 7, 10000.0f, false, {}, nullptr).message(),
              HasSubstr("head_dim 7 is odd"));

  const std::vector<int64_t> shape(9, 2);
  const std::vector<int64_t> dims = {0};
  EXPECT_THAT(reduceSum<float>(nullptr, shape, dims, nullptr, nullptr).message(),
              HasSubstr("rank 9 is outside [1, 8]"));
  const std::vector<int64_t> shape3 = {2, 3, 4};
  const std::vector<int64_t> unordered = {2, 1};
  EXPECT_THAT(reduceSum<float>(nullptr, shape3, unordered, nullptr, nullptr).message(),
              HasSubstr("strictly increasing"));

  const size_t need = rmsNormGradWorkspaceBytes(300, 64);
  EXPECT_EQ(need, 256u * 64u * sizeof(float));
  const Status workspace = rmsNormGrad<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 300, 64,
                                              1e-6f, nullptr, need - 1, nullptr);
  EXPECT_EQ(workspace.cudaError(), cudaErrorInvalidValue);
  EXPECT_THAT(workspace.message(), HasSubstr("rmsNormGradWorkspaceBytes"));
  EXPECT_EQ(layerNormGradWorkspaceBytes(3, 10), 2u * 3u * 10u * sizeof(float));
  const Status loss =
      crossEntropy<float, int32_t>(nullptr, nullptr, nullptr, 10, 5, nullptr, 8, nullptr);
  EXPECT_THAT(loss.message(), HasSubstr("needs 80"));
  const Status bf16_loss =
      crossEntropy<bf16, int32_t>(nullptr, nullptr, nullptr, 10, 5, nullptr, 8, nullptr);
  EXPECT_THAT(bf16_loss.message(), HasSubstr("needs 80"));
  EXPECT_THAT(
      adamwStep<float>({}, 0, nullptr, nullptr, nullptr, nullptr, 1, nullptr, nullptr).message(),
      HasSubstr("step 0 < 1"));
  const Status master = adamwStepWithMaster<bf16, bf16>({}, 0, nullptr, nullptr, nullptr, nullptr,
                                                        nullptr, 1, nullptr, nullptr);
  EXPECT_EQ(master.cudaError(), cudaErrorInvalidValue);
  EXPECT_THAT(master.message(), HasSubstr("adamwStepWithMaster: step 0 < 1"));
  const Status chunks = sumChunks<bf16, float>(nullptr, 0, 8, false, nullptr, nullptr);
  EXPECT_EQ(chunks.cudaError(), cudaErrorInvalidValue);
  EXPECT_THAT(chunks.message(), HasSubstr("sumChunks: 0 chunks"));
  // Nothing to move is no launch, so it succeeds even without a GPU.
  EXPECT_TRUE((convert<bf16, float>(nullptr, nullptr, 0, nullptr).ok()));
}

}  // namespace
}  // namespace loom::runtime::cuda
