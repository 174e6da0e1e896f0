// What the nccl backend says where no GPU is usable (the build machines):
// creation fails with the reason instead of crashing. Skipped on a GPU, where
// nccl_backend_test covers creation.
#include <string>

#include "absl/status/status.h"
#include "comm/backend.h"
#include "comm/nccl/cuda_util.h"
#include "comm/nccl/nccl_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::nccl {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(NcclBackendNoGpuTest, CreationSaysWhyNoGpuIsUsable) {
  const std::string reason = cudaUnavailableReason();
  if (reason.empty()) GTEST_SKIP() << "a GPU is usable here; nccl_backend_test covers creation";
  registerNcclBackend();
  BackendContext context;
  context.size = 2;
  context.rank = 1;
  context.group_name = "tp";
  EXPECT_THAT(createBackend("nccl", Device::Type::kCuda, context).status(),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("backend nccl of group tp (rank 1 of 2) cannot start"),
                             HasSubstr(reason))));
  EXPECT_THAT(createBackend("nccl", Device::Type::kCpu, context).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("backend nccl does not serve cpu tensors")));
}

}  // namespace
}  // namespace loom::comm::nccl
