// Tests of initDeviceMesh and MeshGroups' c10d additions (fromGroup,
// allGroups, per-axis backends), ranks as threads over a shared store.
#include "comm/init_device_mesh.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/hash_store.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::comm::testing::runRanksShared;
using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(InitDeviceMeshTest, OneCallFromNothingToTheAxisGroups) {
  auto store = std::make_shared<HashStore>(absl::Seconds(20));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      InitDeviceMeshOptions options;
      options.init.backend = "gloo";
      options.init.store = store;
      options.init.rank = rank;
      options.init.world_size = 4;
      options.init.timeout = absl::Seconds(20);
      options.backend_override = {{"dp", "cpu:gloo"}};
      absl::StatusOr<MeshGroups> mesh = initDeviceMesh("dp=2,tp=2", options);
      ASSERT_TRUE(mesh.ok()) << mesh.status();
      EXPECT_EQ(mesh->world()->size(), 4);
      std::vector<std::shared_ptr<ProcessGroup>> groups = mesh->allGroups();
      ASSERT_EQ(groups.size(), 2u);
      EXPECT_EQ(groups[0]->name(), absl::StrCat("mesh/dp/", rank % 2));
      EXPECT_EQ(groups[1]->name(), absl::StrCat("mesh/tp/", rank / 2));
      // Sum over tp of the ranks, then over dp: every rank ends with 6.
      std::vector<int64_t> value = {rank};
      ASSERT_TRUE(groups[1]->allReduceSync(Tensor::of(value)).ok());
      EXPECT_EQ(value[0], rank / 2 == 0 ? 1 : 5);
      ASSERT_TRUE(groups[0]->allReduceSync(Tensor::of(value)).ok());
      EXPECT_EQ(value[0], 6);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST(InitDeviceMeshTest, OverAGivenWorldWithErrors) {
  runRanksShared(
      4,
      [&](std::shared_ptr<ProcessGroup> world) {
        InitDeviceMeshOptions options;
        options.world = world;
        EXPECT_THAT(initDeviceMesh("dp=3", options).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("init_device_mesh in group default")));
        options.backend_override = {{"pp", "gloo"}};
        EXPECT_THAT(initDeviceMesh("dp=4", options).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("backend_override names axis 'pp'")));
        options.backend_override = {};
        options.prefix = "flat";
        absl::StatusOr<MeshGroups> mesh = initDeviceMesh("4", options);
        ASSERT_TRUE(mesh.ok()) << mesh.status();
        ASSERT_EQ(mesh->allGroups().size(), 1u);
        EXPECT_EQ(mesh->allGroups()[0]->name(), "flat/d0/0");
      },
      [] {
        ProcessGroupOptions options;
        options.timeout = absl::Seconds(20);
        return options;
      }());
}

TEST(MeshGroupsFromGroupTest, AnExistingGroupBecomesAOneAxisMesh) {
  runRanksShared(
      3,
      [&](std::shared_ptr<ProcessGroup> world) {
        absl::StatusOr<MeshGroups> mesh = MeshGroups::fromGroup(world, "dp");
        ASSERT_TRUE(mesh.ok()) << mesh.status();
        EXPECT_EQ(mesh->mesh().toString(), "mesh<dp=3>");
        EXPECT_EQ(*mesh->groupFor("dp"), world);
        EXPECT_THAT(mesh->allGroups(), ElementsAre(world));
        EXPECT_FALSE(MeshGroups::fromGroup(nullptr).ok());
        EXPECT_THAT(MeshGroups::fromGroup(world, "2bad").status(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fromGroup")));
      },
      [] {
        ProcessGroupOptions options;
        options.timeout = absl::Seconds(20);
        return options;
      }());
}

}  // namespace
}  // namespace loom::comm
