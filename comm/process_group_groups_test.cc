// Tests of subgroups with their own options (backend, timeout, checks,
// local synchronization), conversions between global and group ranks, the
// uneven all_gather and receives from any source, with ranks as threads
// over gloo.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/process_group.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::comm::testing::runRanks;
using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ProcessGroupOptions quickOptions() {
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(20);
  return options;
}

TEST(GroupRanksTest, GlobalAndGroupRanksConvertBothWays) {
  runRanks(
      4,
      [&](ProcessGroup& world) {
        EXPECT_EQ(*world.globalRank(2), 2);
        EXPECT_EQ(*world.groupRank(3), 3);
        absl::StatusOr<std::shared_ptr<ProcessGroup>> group = world.newGroup({3, 1});
        ASSERT_TRUE(group.ok()) << group.status();
        if (*group == nullptr) return;
        ProcessGroup& g = **group;
        EXPECT_EQ(*g.globalRank(0), 3);
        EXPECT_EQ(*g.globalRank(1), 1);
        EXPECT_EQ(*g.groupRank(3), 0);
        EXPECT_EQ(*g.groupRank(1), 1);
        EXPECT_EQ(*g.globalRank(g.rank()), world.rank());
        EXPECT_THAT(g.groupRank(2).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("get_group_rank in group default/1"),
                                   HasSubstr("global rank 2 is not a member"),
                                   HasSubstr("members are [3, 1]"))));
        EXPECT_THAT(g.globalRank(2).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("group_rank is 2")));
        // A subgroup of a subgroup still answers in world ranks.
        absl::StatusOr<std::shared_ptr<ProcessGroup>> inner = g.newGroup({1});
        ASSERT_TRUE(inner.ok()) << inner.status();
        if (*inner != nullptr) {
          EXPECT_EQ(*(*inner)->globalRank(0), 1);
        }
      },
      quickOptions());
}

TEST(NewGroupOptionsTest, ASubgroupHasItsOwnBackendTimeoutAndChecks) {
  runRanks(
      3,
      [&](ProcessGroup& world) {
        absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
            world.newGroup({0, 1, 2}, NewGroupOptions{.name = "own",
                                                      .backend = "GLOO",
                                                      .timeout = absl::Seconds(7),
                                                      .checks = CollectiveChecks::kOff,
                                                      .use_local_synchronization = false});
        ASSERT_TRUE(group.ok()) << group.status();
        ProcessGroup& g = **group;
        EXPECT_EQ(g.name(), "own");
        EXPECT_EQ(g.timeout(), absl::Seconds(7));
        std::vector<int64_t> value = {world.rank()};
        ASSERT_TRUE(g.allReduceSync(Tensor::of(value)).ok());
        EXPECT_EQ(value[0], 3);
        // "gloo" names no CUDA backend for this group.
        std::vector<float> memory(1);
        EXPECT_THAT(g.allReduceSync(Tensor(memory.data(), DType::kFloat32, {1}, Device::cuda(0))),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no CUDA backend")));
        // The parent keeps its own.
        EXPECT_EQ(world.timeout(), absl::Seconds(20));
        EXPECT_THAT(
            world.newGroup({0, 1}, NewGroupOptions{.backend = "glo"}).status(),
            StatusIs(absl::StatusCode::kInvalidArgument,
                     AllOf(HasSubstr("new_group in group default"), HasSubstr("unknown backend"))));
      },
      quickOptions());
}

TEST(NewGroupOptionsTest, RanksWhoseOptionsDifferFailNamingBoth) {
  runRanks(
      2,
      [&](ProcessGroup& world) {
        const absl::Status status =
            world.newGroup({0, 1}, NewGroupOptions{.timeout = absl::Seconds(world.rank() + 1)})
                .status();
        EXPECT_FALSE(status.ok());
        if (status.code() == absl::StatusCode::kInvalidArgument) {
          EXPECT_THAT(std::string(status.message()),
                      AllOf(HasSubstr("another rank asked for"), HasSubstr("timeout=")));
        }
      },
      [] {
        ProcessGroupOptions options;
        options.timeout = absl::Milliseconds(500);
        return options;
      }());
}

TEST(NewGroupOptionsTest, LocalSynchronizationNeedsOnlyTheMembers) {
  runRanks(
      4,
      [&](ProcessGroup& world) {
        // Ranks 1 and 3 never call it; ranks 0 and 2 meet on their own.
        if (world.rank() % 2 == 0) {
          absl::StatusOr<std::shared_ptr<ProcessGroup>> evens =
              world.newGroup({0, 2}, NewGroupOptions{.use_local_synchronization = true});
          ASSERT_TRUE(evens.ok()) << evens.status();
          ASSERT_NE(*evens, nullptr);
          EXPECT_EQ((*evens)->name(), "default/[0,2]");
          std::vector<int64_t> value = {world.rank()};
          ASSERT_TRUE((*evens)->allReduceSync(Tensor::of(value)).ok());
          EXPECT_EQ(value[0], 2);
        } else {
          // A non-member may call it: nullptr at once, nothing waited for.
          absl::StatusOr<std::shared_ptr<ProcessGroup>> none =
              world.newGroup({0, 2}, NewGroupOptions{.use_local_synchronization = true});
          ASSERT_TRUE(none.ok());
          EXPECT_EQ(*none, nullptr);
        }
        // Local groups do not count among the parent's newGroup calls, so a
        // later group of all ranks still lines up.
        absl::StatusOr<std::shared_ptr<ProcessGroup>> all = world.newGroup({0, 1, 2, 3});
        ASSERT_TRUE(all.ok()) << all.status();
        EXPECT_EQ((*all)->name(), "default/1");
      },
      quickOptions());
}

TEST(UnevenAllGatherTest, OutputsOfEveryRanksOwnSize) {
  for (int size : {2, 3, 4}) {
    runRanks(
        size,
        [&](ProcessGroup& group) {
          // Rank r contributes r + 1 elements, all equal to 10 * r + i.
          std::vector<int32_t> input(group.rank() + 1);
          for (size_t i = 0; i < input.size(); ++i) {
            input[i] = static_cast<int32_t>(10 * group.rank() + i);
          }
          std::vector<std::vector<int32_t>> outputs(group.size());
          std::vector<Tensor> views;
          for (int r = 0; r < group.size(); ++r) {
            outputs[r].resize(r + 1, -1);
            views.push_back(Tensor::of(outputs[r]));
          }
          absl::StatusOr<std::shared_ptr<Work>> work = group.allGather(views, Tensor::of(input));
          ASSERT_TRUE(work.ok()) << work.status();
          ASSERT_TRUE((*work)->wait().ok());
          EXPECT_EQ((*work)->info().op, "all_gather");
          for (int r = 0; r < group.size(); ++r) {
            for (int i = 0; i <= r; ++i) EXPECT_EQ(outputs[r][i], 10 * r + i) << r << "," << i;
          }
          // This rank's own output must fit its input.
          std::vector<int32_t> wrong(group.rank() + 2);
          views[group.rank()] = Tensor::of(wrong);
          EXPECT_THAT(group.allGatherSync(views, Tensor::of(input)),
                      StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr(absl::StrCat("output ", group.rank()))));
        },
        quickOptions());
  }
}

TEST(RecvAnySourceTest, ReportsTheSenderOfEachMessage) {
  runRanks(
      4,
      [&](ProcessGroup& group) {
        if (group.rank() == 0) {
          std::vector<int> senders;
          for (int i = 0; i < 3; ++i) {
            std::vector<int64_t> got(2, -1);
            absl::StatusOr<int> sender = group.recvAnySourceSync(Tensor::of(got));
            ASSERT_TRUE(sender.ok()) << sender.status();
            EXPECT_EQ(got[0], 100 + *sender);
            EXPECT_EQ(got[1], *sender);
            senders.push_back(*sender);
          }
          EXPECT_THAT(senders, ::testing::UnorderedElementsAre(1, 2, 3));
          ASSERT_TRUE(group.barrierSync().ok());
          // The async form: the Work names the sender once it completed.
          std::vector<int64_t> got(2);
          absl::StatusOr<std::shared_ptr<Work>> work =
              group.recvAnySource(Tensor::of(got), {.tag = 5, .timeout = std::nullopt});
          ASSERT_TRUE(work.ok()) << work.status();
          EXPECT_EQ((*work)->info().op, "recv_any_source");
          EXPECT_EQ((*work)->info().seq, 4u);
          ASSERT_TRUE((*work)->wait().ok());
          EXPECT_EQ(*(*work)->sourceRank(), 2);
          EXPECT_EQ(got[0], 102);
          // A receive from a named peer reports that peer, as c10d's gloo
          // RecvWork does; calls that receive nothing have no source rank.
          absl::StatusOr<std::shared_ptr<Work>> named = group.recv(Tensor::of(got), 3);
          ASSERT_TRUE(named.ok());
          ASSERT_TRUE((*named)->wait().ok());
          EXPECT_EQ(*(*named)->sourceRank(), 3);
          absl::StatusOr<std::shared_ptr<Work>> barrier = group.barrier();
          ASSERT_TRUE(barrier.ok());
          ASSERT_TRUE((*barrier)->wait().ok());
          EXPECT_THAT(
              (*barrier)->sourceRank().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has no source rank")));
        } else {
          const std::vector<int64_t> message = {100 + group.rank(), group.rank()};
          ASSERT_TRUE(group.sendSync(Tensor::of(message), 0).ok());
          // The second round starts once rank 0 took the first.
          ASSERT_TRUE(group.barrierSync().ok());
          if (group.rank() == 2) {
            ASSERT_TRUE(group.sendSync(Tensor::of(message), 0, {.tag = 5}).ok());
          }
          if (group.rank() == 3) {
            ASSERT_TRUE(group.sendSync(Tensor::of(message), 0).ok());
          }
          ASSERT_TRUE(group.barrierSync().ok());
        }
        EXPECT_TRUE(group.barrierSync().ok());
      },
      quickOptions());
}

}  // namespace
}  // namespace loom::comm
