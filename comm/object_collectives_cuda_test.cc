// The object collectives through CUDA device memory and NCCL, as PyTorch
// runs them on a group whose backend is NCCL. NCCL cannot put two ranks on
// one GPU, so the groups have one rank, on GPU 0 (tests/gpu/run_all.sh runs
// this on a GPU machine). A group whose only backend is nccl has no CPU
// path, so a call that succeeds there went through the device. Where no GPU
// is usable every case reports itself skipped with the reason
// (object_collectives_test checks the error there).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm/hash_store.h"
#include "comm/nccl/cuda_util.h"
#include "comm/object_collectives.h"
#include "comm/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Point {
  int x;
  double y;
  bool operator==(const Point&) const = default;
};

class ObjectCollectivesCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string reason = nccl::cudaUnavailableReason(); !reason.empty()) {
      GTEST_SKIP() << reason;
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }

  // A one-rank group over its own store; `cpu_backend` "" makes it
  // NCCL-only.
  static std::shared_ptr<ProcessGroup> group(const std::string& cpu_backend) {
    ProcessGroupOptions options;
    options.cpu_backend = cpu_backend;
    options.cuda_backend = "nccl";
    options.timeout = absl::Seconds(60);
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made =
        ProcessGroup::create(std::make_shared<HashStore>(absl::Seconds(60)), 0, 1, options);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : nullptr;
  }
};

TEST_F(ObjectCollectivesCudaTest, EveryCollectiveOnAnNcclOnlyGroup) {
  std::shared_ptr<ProcessGroup> nccl = group("");
  ASSERT_NE(nccl, nullptr);
  ASSERT_EQ(objectDevice(*nccl), Device::Type::kCuda);
  std::vector<std::string> objects = {"", "one", std::string(1000, 'x'), "caf\xc3\xa9"};
  ASSERT_TRUE(broadcastObjectList(*nccl, objects, 0).ok());
  EXPECT_THAT(objects, ElementsAre("", "one", std::string(1000, 'x'), "caf\xc3\xa9"));

  std::vector<std::string> all;
  ASSERT_TRUE(allGatherObject(*nccl, all, std::string("mine")).ok());
  EXPECT_THAT(all, ElementsAre("mine"));

  std::vector<Point> gathered;
  ASSERT_TRUE(gatherObject(*nccl, Point{3, 0.25}, gathered, 0).ok());
  EXPECT_THAT(gathered, ElementsAre(Point{3, 0.25}));

  std::string scattered;
  ASSERT_TRUE(scatterObjectList(*nccl, scattered, std::vector<std::string>{"for 0"}, 0).ok());
  EXPECT_EQ(scattered, "for 0");
  // The CPU would need a CPU backend: the front end refuses it.
  EXPECT_THAT(allGatherObject(*nccl, all, std::string("x"),
                              {.timeout = std::nullopt, .device = Device::Type::kCpu}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no CPU backend")));
}

TEST_F(ObjectCollectivesCudaTest, CudaOnRequestOnAGroupWithBothBackends) {
  std::shared_ptr<ProcessGroup> both = group("gloo");
  ASSERT_NE(both, nullptr);
  ASSERT_EQ(objectDevice(*both), Device::Type::kCpu);
  const ObjectOptions on_gpu = {.timeout = std::nullopt, .device = Device::Type::kCuda};
  std::vector<std::string> objects = {"a", "bc"};
  ASSERT_TRUE(broadcastObjectList(*both, objects, 0, on_gpu).ok());
  EXPECT_THAT(objects, ElementsAre("a", "bc"));
  std::vector<int> all;
  ASSERT_TRUE(allGatherObject(*both, all, 42, on_gpu).ok());
  EXPECT_THAT(all, ElementsAre(42));
}

}  // namespace
}  // namespace loom::comm
