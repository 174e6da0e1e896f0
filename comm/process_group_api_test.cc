// Tests of the parts of the ProcessGroup API a torch.distributed user meets
// first: read-only views accepted as inputs and refused as outputs, and the
// synchronous forms of the collectives, whose one Status carries argument
// errors and engine failures alike. Ranks are threads over gloo.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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

ProcessGroupOptions quickOptions(absl::Duration timeout = absl::Seconds(20)) {
  ProcessGroupOptions options;
  options.timeout = timeout;
  return options;
}

void expectReadOnlyRefused(const absl::Status& status, const std::string& op,
                           const std::string& what) {
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               AllOf(HasSubstr(absl::StrCat(op, " in group default")),
                                     HasSubstr(absl::StrCat(what, " i64[")),
                                     HasSubstr("is a read-only view"))))
      << op;
}

TEST(ReadOnlyViewTest, RefusedWhereACallWritesAcceptedWhereItReads) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        const int peer = 1 - group.rank();
        const std::vector<int64_t> fixed = {10 + group.rank(), 20 + group.rank()};
        const Tensor in = Tensor::of(fixed);
        std::vector<int64_t> a(2), b(2), four(4);
        // Refused before anything runs, so both ranks may try them all.
        expectReadOnlyRefused(group.allReduceSync(in), "all_reduce", "tensor");
        expectReadOnlyRefused(group.reduceSync(in), "reduce", "tensor");
        expectReadOnlyRefused(group.allGatherSync({Tensor::of(a), in}, Tensor::of(b)), "all_gather",
                              "output 1");
        expectReadOnlyRefused(group.allGatherIntoTensorSync(Tensor::of(std::as_const(four)), in),
                              "all_gather_into_tensor", "output");
        expectReadOnlyRefused(group.reduceScatterTensorSync(in, Tensor::of(four)),
                              "reduce_scatter_tensor", "output");
        expectReadOnlyRefused(group.allToAllSingleSync(in, Tensor::of(a)), "all_to_all_single",
                              "output");
        expectReadOnlyRefused(group.recvSync(in, peer), "recv", "tensor");
        expectReadOnlyRefused(group.scatterSync(in, {}, {.root = peer}), "scatter", "output");
        if (group.rank() == 1) {
          expectReadOnlyRefused(group.broadcastSync(in, {.root = 0}), "broadcast", "tensor");
        }

        // Inputs may be read-only: all_gather, all_to_all_single, send, and
        // the root's tensor of a broadcast.
        ASSERT_TRUE(group.allGatherSync({Tensor::of(a), Tensor::of(b)}, in).ok());
        EXPECT_THAT(a, ElementsAre(10, 20));
        EXPECT_THAT(b, ElementsAre(11, 21));
        ASSERT_TRUE(group.allToAllSingleSync(Tensor::of(a), in).ok());
        // Rank r receives row r of every rank: [10, 11] on rank 0.
        EXPECT_THAT(a, ElementsAre(10 * (group.rank() + 1), 10 * (group.rank() + 1) + 1));
        std::vector<int64_t> got(2);
        if (group.rank() == 0) {
          ASSERT_TRUE(group.sendSync(in, 1).ok());
          ASSERT_TRUE(group.broadcastSync(in, {.root = 0}).ok());
        } else {
          ASSERT_TRUE(group.recvSync(Tensor::of(got), 0).ok());
          EXPECT_THAT(got, ElementsAre(10, 20));
          ASSERT_TRUE(group.broadcastSync(Tensor::of(got), {.root = 0}).ok());
          EXPECT_THAT(got, ElementsAre(10, 20));
        }
      },
      quickOptions());
}

TEST(SyncFormsTest, EveryCollectiveReturnsWithItsResult) {
  runRanks(
      3,
      [&](ProcessGroup& group) {
        const int64_t r = group.rank();
        std::vector<int64_t> value = {r + 1};
        ASSERT_TRUE(group.allReduceSync(Tensor::of(value), {.op = ReduceOp::kMax}).ok());
        EXPECT_EQ(value[0], 3);
        value = {r + 1};
        ASSERT_TRUE(group.reduceSync(Tensor::of(value), {.root = 2}).ok());
        if (r == 2) {
          EXPECT_EQ(value[0], 6);
        }
        value = {r == 1 ? 7 : 0};
        ASSERT_TRUE(group.broadcastSync(Tensor::of(value), {.root = 1}).ok());
        EXPECT_EQ(value[0], 7);

        const std::vector<int64_t> mine = {r * 10};
        std::vector<int64_t> all(3);
        ASSERT_TRUE(group.allGatherIntoTensorSync(Tensor::of(all), Tensor::of(mine)).ok());
        EXPECT_THAT(all, ElementsAre(0, 10, 20));
        std::vector<int64_t> g0(1), g1(1), g2(1);
        std::vector<Tensor> gathered;
        if (r == 0) gathered = {Tensor::of(g0), Tensor::of(g1), Tensor::of(g2)};
        ASSERT_TRUE(group.gatherSync(gathered, Tensor::of(mine)).ok());
        if (r == 0) {
          EXPECT_EQ(g0[0] + g1[0] + g2[0], 30);
        }
        std::vector<int64_t> piece(1);
        const std::vector<int64_t> s0 = {5}, s1 = {6}, s2 = {7};
        std::vector<Tensor> pieces;
        if (r == 0) pieces = {Tensor::of(s0), Tensor::of(s1), Tensor::of(s2)};
        ASSERT_TRUE(group.scatterSync(Tensor::of(piece), pieces).ok());
        EXPECT_EQ(piece[0], 5 + r);

        const std::vector<int64_t> contributions = {r, r, r};
        std::vector<int64_t> reduced(1);
        ASSERT_TRUE(
            group.reduceScatterTensorSync(Tensor::of(reduced), Tensor::of(contributions)).ok());
        EXPECT_EQ(reduced[0], 3);
        const std::vector<int64_t> c0 = {r}, c1 = {2 * r}, c2 = {3 * r};
        ASSERT_TRUE(group
                        .reduceScatterSync(Tensor::of(reduced),
                                           {Tensor::of(c0), Tensor::of(c1), Tensor::of(c2)})
                        .ok());
        EXPECT_EQ(reduced[0], 3 * (r + 1));
        std::vector<int64_t> o0(1), o1(1), o2(1);
        const std::vector<int64_t> i0 = {r * 3}, i1 = {r * 3 + 1}, i2 = {r * 3 + 2};
        ASSERT_TRUE(group
                        .allToAllSync({Tensor::of(o0), Tensor::of(o1), Tensor::of(o2)},
                                      {Tensor::of(i0), Tensor::of(i1), Tensor::of(i2)})
                        .ok());
        EXPECT_EQ(o0[0], r);
        EXPECT_EQ(o2[0], 6 + r);
        ASSERT_TRUE(group.barrierSync().ok());
        std::vector<int64_t> ring(1);
        const std::vector<int64_t> out = {100 + r};
        const int next = static_cast<int>((r + 1) % 3);
        const int prev = static_cast<int>((r + 2) % 3);
        if (r % 2 == 0) {
          ASSERT_TRUE(group.sendSync(Tensor::of(out), next).ok());
          ASSERT_TRUE(group.recvSync(Tensor::of(ring), prev).ok());
        } else {
          ASSERT_TRUE(group.recvSync(Tensor::of(ring), prev).ok());
          ASSERT_TRUE(group.sendSync(Tensor::of(out), next).ok());
        }
        EXPECT_EQ(ring[0], 100 + prev);
      },
      quickOptions());
}

TEST(SyncFormsTest, ArgumentErrorsAndEngineFailuresComeBackTheSameWay) {
  // Rank 1 stays connected until rank 0's call has failed, so that the
  // failure is the timeout and not a vanished peer.
  absl::Notification rank0_done;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        std::vector<float> values(4);
        EXPECT_THAT(group.allReduceSync(Tensor::of(values), {.op = ReduceOp::kBand}),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("band")));
        // Rank 1 never takes part: rank 0's call fails at its timeout, with
        // the call named, from the same function.
        if (group.rank() == 0) {
          const absl::Status status =
              group.allReduceSync(Tensor::of(values), {.timeout = absl::Milliseconds(300)});
          EXPECT_EQ(errorKind(status), ErrorKind::kTimeout) << status;
          EXPECT_THAT(std::string(status.message()),
                      HasSubstr("all_reduce #1 in group default (rank 0 of 2)"));
          rank0_done.Notify();
        } else {
          rank0_done.WaitForNotificationWithTimeout(absl::Seconds(20));
        }
      },
      [] {
        ProcessGroupOptions options = quickOptions(absl::Seconds(5));
        options.checks = CollectiveChecks::kOff;
        return options;
      }());
}

TEST(WorkFutureTest, AnAllReducesFutureChainsOnItsOutput) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        std::vector<int64_t> value = {group.rank() + 1, 10};
        absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(Tensor::of(value));
        ASSERT_TRUE(work.ok()) << work.status();
        // As PyTorch's example: fut.then(lambda fut: fut.value()[0] * 2).
        auto doubled = (*work)->getFuture()->then(
            [](const Future<std::vector<Tensor>>& future) -> absl::StatusOr<int64_t> {
              absl::StatusOr<std::vector<Tensor>> outputs = future.value();
              if (!outputs.ok()) return outputs.status();
              return (*outputs)[0].dataAs<int64_t>()[0] * 2;
            });
        ASSERT_TRUE(doubled->wait().ok());
        EXPECT_EQ(*doubled->value(), 6);
        absl::StatusOr<std::vector<Tensor>> result = (*work)->result();
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(result->size(), 1u);
        EXPECT_EQ((*result)[0].data(), value.data());
        EXPECT_THAT(value, ElementsAre(3, 20));

        std::vector<int64_t> a(1), b(1);
        const std::vector<int64_t> mine = {group.rank()};
        absl::StatusOr<std::shared_ptr<Work>> gathered =
            group.allGather({Tensor::of(a), Tensor::of(b)}, Tensor::of(mine));
        ASSERT_TRUE(gathered.ok());
        ASSERT_TRUE((*gathered)->wait().ok());
        EXPECT_EQ((*gathered)->result()->size(), 2u);
        absl::StatusOr<std::shared_ptr<Work>> barrier = group.barrier();
        ASSERT_TRUE(barrier.ok());
        EXPECT_TRUE((*barrier)->getFuture()->wait().ok());
        EXPECT_TRUE((*barrier)->result()->empty());
      },
      quickOptions());
}

TEST(DebugLevelTest, SetAtRuntimeItReachesGroupsCreatedAfterwards) {
  // The groups' options say off; the process-wide level says detail, which
  // compares shapes across ranks.
  setDebugLevel(CollectiveChecks::kDetail);
  runRanks(
      2,
      [&](ProcessGroup& group) {
        std::vector<int8_t> values(4);
        const std::vector<int64_t> shape =
            group.rank() == 0 ? std::vector<int64_t>{4, 1} : std::vector<int64_t>{1, 4};
        absl::StatusOr<Tensor> tensor = Tensor::view(values, shape);
        ASSERT_TRUE(tensor.ok());
        EXPECT_THAT(group.allReduceSync(*tensor),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[4, 1]")));
      },
      [] {
        ProcessGroupOptions options = quickOptions();
        options.checks = CollectiveChecks::kOff;
        return options;
      }());
  ASSERT_TRUE(setDebugLevelFromEnv().ok());
}

}  // namespace
}  // namespace loom::comm
