// Tests of the Backend defaults (every call unsupported until overridden)
// and the backend registry.
#include "comm/backend.h"

#include <memory>
#include <vector>

#include "comm/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

class BarrierOnlyBackend : public Backend {
 public:
  using Backend::Backend;
  std::string_view name() const override { return "barrier-only"; }
  WorkOr barrier(const BarrierOptions&, const CollectiveInfo& info) override {
    auto work = std::make_shared<Work>(info, absl::Seconds(1));
    work->complete(absl::OkStatus());
    return work;
  }
};

BackendContext context() {
  return {.store = std::make_shared<HashStore>(absl::Seconds(1)),
          .rank = 0,
          .size = 2,
          .group_name = "default",
          .global_ranks = {0, 1}};
}

TEST(BackendTest, CallsABackendLacksSayWhichBackendAndOp) {
  BarrierOnlyBackend backend(context());
  CollectiveInfo info{.group = "default", .rank = 0, .group_size = 2, .seq = 3, .op = "all_reduce"};
  std::vector<float> values(4);
  EXPECT_THAT(backend.allReduce(Tensor::of(values), {}, info).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("backend barrier-only does not support all_reduce"),
                             HasSubstr("#3"))));
  info.op = "barrier";
  absl::StatusOr<std::shared_ptr<Work>> work = backend.barrier({}, info);
  ASSERT_TRUE(work.ok());
  EXPECT_TRUE((*work)->isSuccess());
}

TEST(BackendTest, RegistryCreatesByNameAndDevice) {
  registerBackend("barrier-only", {Device::Type::kCpu}, [](const BackendContext& ctx) {
    return absl::StatusOr<std::unique_ptr<Backend>>(std::make_unique<BarrierOnlyBackend>(ctx));
  });
  EXPECT_THAT(registeredBackends(), Contains("barrier-only"));
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      createBackend("barrier-only", Device::Type::kCpu, context());
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->size(), 2);

  EXPECT_THAT(
      createBackend("barrier-only", Device::Type::kCuda, context()).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not serve cuda tensors")));
  EXPECT_THAT(createBackend("ucc", Device::Type::kCpu, context()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown backend 'ucc'"), HasSubstr("barrier-only"))));
  EXPECT_TRUE(checkBackend("barrier-only", Device::Type::kCpu).ok());
  EXPECT_THAT(checkBackend("ucc", Device::Type::kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown backend 'ucc'")));
  EXPECT_THAT(*backendDevices("barrier-only"), ::testing::ElementsAre(Device::Type::kCpu));
  EXPECT_THAT(backendDevices("ucc").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown backend 'ucc'")));
}

}  // namespace
}  // namespace loom::comm
