// Tests of MeshGroups: the rank lists, numbering and names of the groups of
// each mesh axis and axis set, collectives over them, and the errors.
#include "comm/mesh_groups.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/device_mesh.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::comm::testing::Buffer;
using ::loom::comm::testing::runRanksShared;
using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ProcessGroupOptions quickOptions() {
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(20);
  return options;
}

TEST(MeshGroupsTest, OneGroupPerAxisAndAxisSetNumberedByCoordinate) {
  // mesh<dp=2, tp=2>: tp groups [0,1] [2,3]; dp groups [0,2] [1,3].
  const mesh::DeviceMesh mesh = *mesh::DeviceMesh::parse("dp=2,tp=2", 4);
  runRanksShared(
      4,
      [&](std::shared_ptr<ProcessGroup> world) {
        const int me = world->rank();
        absl::StatusOr<MeshGroups> groups =
            MeshGroups::create(world, mesh, {{"dp", "tp"}, {"tp", "dp"}});
        ASSERT_TRUE(groups.ok()) << groups.status();
        EXPECT_TRUE(groups->inMesh());

        std::shared_ptr<ProcessGroup> tp = *groups->groupFor("tp");
        EXPECT_EQ(tp->name(), absl::StrCat("mesh/tp/", me / 2));
        EXPECT_EQ(tp->rank(), me % 2);
        EXPECT_EQ(tp->globalRanks(), (std::vector<int>{me / 2 * 2, me / 2 * 2 + 1}));
        std::shared_ptr<ProcessGroup> dp = *groups->groupFor("dp");
        EXPECT_EQ(dp->name(), absl::StrCat("mesh/dp/", me % 2));
        EXPECT_EQ(dp->rank(), me / 2);
        EXPECT_EQ(dp->globalRanks(), (std::vector<int>{me % 2, me % 2 + 2}));
        std::shared_ptr<ProcessGroup> both = *groups->groupFor({"dp", "tp"});
        EXPECT_EQ(both->name(), "mesh/dp+tp/0");
        EXPECT_EQ(both->globalRanks(), (std::vector<int>{0, 1, 2, 3}));
        std::shared_ptr<ProcessGroup> swapped = *groups->groupFor({"tp", "dp"});
        EXPECT_EQ(swapped->globalRanks(), (std::vector<int>{0, 2, 1, 3}));

        // A sum over tp adds the two ranks of this row; over dp, of this column.
        Buffer row = Buffer::of(DType::kInt32, {static_cast<double>(me)});
        ASSERT_TRUE((*tp->allReduce(row.tensor()))->wait().ok());
        EXPECT_EQ(row.at(0), me / 2 * 4 + 1);
        Buffer column = Buffer::of(DType::kInt32, {static_cast<double>(me)});
        ASSERT_TRUE((*dp->allReduce(column.tensor()))->wait().ok());
        EXPECT_EQ(column.at(0), 2 * (me % 2) + 2);
        // Gathering over (tp, dp) collects in that group's order.
        Buffer gathered(DType::kInt32, {4});
        Buffer mine = Buffer::of(DType::kInt32, {static_cast<double>(me)});
        ASSERT_TRUE((*swapped->allGatherIntoTensor(gathered.tensor(), mine.tensor()))->wait().ok());
        EXPECT_THAT(gathered.values(), ElementsAre(0, 2, 1, 3));

        EXPECT_THAT(groups->groupFor({"tp", "tp"}).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("no group over axes [tp, tp]"),
                                   HasSubstr("[dp], [tp], [dp, tp], [tp, dp]"))));
      },
      quickOptions());
}

TEST(MeshGroupsTest, RanksOutsideAMeshOverPartOfTheWorldGetNoGroups) {
  // A 2-rank mesh over world ranks 3 and 1, in that order.
  const mesh::DeviceMesh mesh = *mesh::DeviceMesh::createWithRanks({2}, {"x"}, {3, 1});
  runRanksShared(
      4,
      [&](std::shared_ptr<ProcessGroup> world) {
        absl::StatusOr<MeshGroups> groups = MeshGroups::create(world, mesh, {}, "sub");
        ASSERT_TRUE(groups.ok()) << groups.status();
        const int me = world->rank();
        if (me == 0 || me == 2) {
          EXPECT_FALSE(groups->inMesh());
          EXPECT_THAT(
              groups->groupFor("x").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("rank ", me, " of group default is not in"))));
          return;
        }
        std::shared_ptr<ProcessGroup> x = *groups->groupFor("x");
        EXPECT_EQ(x->name(), "sub/x/0");
        EXPECT_EQ(x->rank(), me == 3 ? 0 : 1);
        EXPECT_EQ(x->globalRanks(), (std::vector<int>{3, 1}));
      },
      quickOptions());
}

TEST(MeshGroupsTest, AMeshLargerThanTheWorldIsRefused) {
  const mesh::DeviceMesh mesh = *mesh::DeviceMesh::parse("dp=2,tp=2", 4);
  runRanksShared(
      2,
      [&](std::shared_ptr<ProcessGroup> world) {
        EXPECT_THAT(MeshGroups::create(world, mesh).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("mesh rank 2 is outside the group's 2 ranks")));
        EXPECT_THAT(
            MeshGroups::create(world, *mesh::DeviceMesh::parse("x=2", 2), {{"y"}}).status(),
            StatusIs(absl::StatusCode::kInvalidArgument,
                     AllOf(HasSubstr("mesh groups of mesh<x=2>"), HasSubstr("no axis 'y'"))));
      },
      quickOptions());
}

}  // namespace
}  // namespace loom::comm
