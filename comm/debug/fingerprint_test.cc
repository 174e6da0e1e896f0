// Tests of the fingerprint encoding and of the cross-rank checker, with the
// ranks as threads over ThreadBackend and a HashStore.
#include "comm/debug/fingerprint.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/debug/thread_backend.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::debug {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr char kTail[] =
    "; every rank of a group must issue the same collectives, in the same order, with matching "
    "arguments";

CollectiveFingerprint allReduce(uint64_t seq, int64_t numel) {
  CollectiveFingerprint fp;
  fp.seq = seq;
  fp.op = "all_reduce";
  fp.numel = numel;
  fp.reduce_op = ReduceOp::kSum;
  return fp;
}

CollectiveFingerprint reduce(uint64_t seq, int64_t numel, int root) {
  CollectiveFingerprint fp = allReduce(seq, numel);
  fp.op = "reduce";
  fp.root = root;
  return fp;
}

CollectiveFingerprint broadcast(uint64_t seq, int64_t numel, int root) {
  CollectiveFingerprint fp;
  fp.seq = seq;
  fp.op = "broadcast";
  fp.numel = numel;
  fp.root = root;
  return fp;
}

// A group of checkers, one per rank, over one ThreadGroup and one store.
class CheckedGroup {
 public:
  CheckedGroup(int size, absl::Duration timeout, bool with_store = true)
      : store_(with_store ? std::make_shared<HashStore>() : nullptr) {
    for (auto& backend : makeThreadBackends(size, "G/checks", timeout)) {
      checkers_.push_back(
          std::make_unique<FingerprintChecker>(std::move(backend), store_, "G", timeout));
    }
  }

  // Every rank with a fingerprint checks it on its own thread, after its
  // delay; ranks given nullopt skip the call. Returns each rank's status
  // (OK for those that skipped).
  std::vector<absl::Status> checkAll(const std::vector<std::optional<CollectiveFingerprint>>& fps,
                                     const std::vector<absl::Duration>& delays = {}) {
    std::vector<absl::Status> statuses(fps.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < fps.size(); ++r) {
      if (!fps[r]) continue;
      const absl::Duration delay = r < delays.size() ? delays[r] : absl::ZeroDuration();
      threads.emplace_back([&, r, delay] {
        absl::SleepFor(delay);
        statuses[r] = checkers_[r]->check(*fps[r]);
      });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }

  HashStore& store() { return *store_; }

 private:
  std::shared_ptr<HashStore> store_;
  std::vector<std::unique_ptr<FingerprintChecker>> checkers_;
};

// Every rank in `ranks` got `message` as an invalid-argument error.
void expectMismatch(const std::vector<absl::Status>& statuses, const std::string& message) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_EQ(statuses[r], invalidArgumentError(message)) << "rank " << r;
  }
}

TEST(CollectiveFingerprintTest, EncodeIsFixedSizeAndDecodeInvertsIt) {
  std::vector<CollectiveFingerprint> cases = {allReduce(7, 1024), reduce(3, 16, 2),
                                              broadcast(1, 0, 0)};
  CollectiveFingerprint barrier;
  barrier.op = "barrier";
  barrier.seq = UINT64_MAX;
  barrier.dtype = DType::kBool;
  cases.push_back(barrier);
  CollectiveFingerprint big = allReduce(1ULL << 40, int64_t{1} << 50);
  big.reduce_op = ReduceOp::kBxor;
  big.dtype = DType::kInt64;
  big.op = "reduce_scatter_tensor";
  cases.push_back(big);
  for (const CollectiveFingerprint& fp : cases) {
    const Bytes bytes = fp.encode();
    ASSERT_EQ(bytes.size(), CollectiveFingerprint::kEncodedSize);
    absl::StatusOr<CollectiveFingerprint> back = CollectiveFingerprint::decode(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, fp) << fp.describe();
  }
}

TEST(CollectiveFingerprintTest, ShapesTravelAsAHash) {
  CollectiveFingerprint a = allReduce(2, 8);
  a.shapes = {{2, 4}};
  CollectiveFingerprint b = a;
  b.shapes = {{4, 2}};
  EXPECT_EQ(a.encode().size(), CollectiveFingerprint::kEncodedSize);
  EXPECT_NE(a.encode(), b.encode());
  EXPECT_NE(a.encode(), allReduce(2, 8).encode());
  absl::StatusOr<CollectiveFingerprint> back = CollectiveFingerprint::decode(a.encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, allReduce(2, 8));
}

TEST(CollectiveFingerprintTest, LongOpNamesAreCut) {
  CollectiveFingerprint fp = allReduce(1, 1);
  fp.op = std::string(30, 'x');
  absl::StatusOr<CollectiveFingerprint> back = CollectiveFingerprint::decode(fp.encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->op, std::string(CollectiveFingerprint::kMaxOpLength, 'x'));
}

TEST(CollectiveFingerprintTest, DecodeRejectsGarbage) {
  const Bytes good = reduce(3, 16, 2).encode();
  auto corrupt = [&good](size_t offset, Bytes values) {
    Bytes bytes = good;
    std::copy(values.begin(), values.end(), bytes.begin() + offset);
    return CollectiveFingerprint::decode(bytes).status();
  };
  EXPECT_THAT(CollectiveFingerprint::decode(Bytes(63, 0)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a collective fingerprint: 63 bytes, expected 64")));
  EXPECT_THAT(CollectiveFingerprint::decode({}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 bytes")));
  EXPECT_THAT(corrupt(0, {'X'}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
  EXPECT_THAT(corrupt(2, {9}), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("version 9, this build reads version 1")));
  EXPECT_THAT(corrupt(3, {200}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype code 200")));
  EXPECT_THAT(corrupt(4, {77}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reduce op code 77")));
  EXPECT_THAT(corrupt(5, {25}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op name of 25 bytes")));
  EXPECT_THAT(corrupt(6, {1}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("padding")));
  EXPECT_THAT(corrupt(63, {'z'}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("after the op name")));
  EXPECT_THAT(corrupt(23, {0x80}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element count -")));
  EXPECT_THAT(corrupt(24, {0xfe, 0xff, 0xff, 0xff}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root -2")));
}

TEST(CollectiveFingerprintTest, Describe) {
  EXPECT_EQ(allReduce(7, 1024).describe(), "all_reduce #7 f32 x 1024 (sum)");
  CollectiveFingerprint fp = reduce(3, 16, 0);
  fp.dtype = DType::kBFloat16;
  fp.reduce_op = ReduceOp::kMax;
  EXPECT_EQ(fp.describe(), "reduce #3 bf16 x 16 (root 0, max)");
  CollectiveFingerprint gather;
  gather.op = "all_gather";
  gather.seq = 2;
  gather.numel = 8;
  gather.shapes = {{2, 4}, {}};
  EXPECT_EQ(gather.describe(), "all_gather #2 f32 x 8 shapes [[2, 4], []]");
}

TEST(FingerprintCheckerTest, AgreeingRanksPass) {
  for (int size : {2, 3, 4}) {
    CheckedGroup group(size, absl::Seconds(10));
    for (uint64_t seq = 1; seq <= 5; ++seq) {
      CollectiveFingerprint fp = seq % 2 ? allReduce(seq, 1024) : broadcast(seq, 64, 1);
      fp.shapes = {{static_cast<int64_t>(seq), 3}};
      for (const absl::Status& status : group.checkAll(std::vector(size, std::optional(fp)))) {
        EXPECT_TRUE(status.ok()) << "size " << size << ": " << status;
      }
    }
  }
}

TEST(FingerprintCheckerTest, OpMismatchNamesWhoCalledWhat) {
  CheckedGroup group(4, absl::Seconds(10));
  const auto statuses = group.checkAll(
      {allReduce(7, 1024), reduce(7, 1024, 0), allReduce(7, 1024), allReduce(7, 1024)});
  expectMismatch(statuses, absl::StrCat("collective mismatch in group G at call #7: rank 1 called "
                                        "reduce(f32 x 1024, root 0, sum), ranks 0,2,3 called "
                                        "all_reduce(f32 x 1024, sum)",
                                        kTail));
}

TEST(FingerprintCheckerTest, ThreeDifferentCallsComeSmallestGroupFirst) {
  CheckedGroup group(4, absl::Seconds(10));
  const auto statuses =
      group.checkAll({allReduce(5, 8), allReduce(5, 8), broadcast(5, 8, 0), reduce(6, 8, 1)});
  expectMismatch(statuses,
                 absl::StrCat("collective mismatch in group G at call #5: rank 2 called "
                              "broadcast(f32 x 8, root 0), rank 3 called reduce(f32 x 8, root 1, "
                              "sum) as call #6, ranks 0,1 called all_reduce(f32 x 8, sum)",
                              kTail));
}

TEST(FingerprintCheckerTest, ElementCountMismatchNamesTheField) {
  CheckedGroup group(4, absl::Seconds(10));
  const auto statuses = group.checkAll(
      {allReduce(7, 1024), allReduce(7, 1024), allReduce(7, 512), allReduce(7, 1024)});
  expectMismatch(statuses,
                 absl::StrCat("collective mismatch in group G at call #7 (all_reduce): ranks "
                              "disagree on element count: rank 2 has 512, ranks 0,1,3 have 1024",
                              kTail));
}

TEST(FingerprintCheckerTest, DtypeMismatchBetweenTwoRanks) {
  CheckedGroup group(2, absl::Seconds(10));
  CollectiveFingerprint bf16 = allReduce(1, 4);
  bf16.dtype = DType::kBFloat16;
  expectMismatch(group.checkAll({allReduce(1, 4), bf16}),
                 absl::StrCat("collective mismatch in group G at call #1 (all_reduce): ranks "
                              "disagree on dtype: rank 0 has f32, rank 1 has bf16",
                              kTail));
}

TEST(FingerprintCheckerTest, RootMismatch) {
  CheckedGroup group(3, absl::Seconds(10));
  expectMismatch(group.checkAll({broadcast(4, 16, 0), broadcast(4, 16, 0), broadcast(4, 16, 1)}),
                 absl::StrCat("collective mismatch in group G at call #4 (broadcast): ranks "
                              "disagree on root: rank 2 has 1, ranks 0,1 have 0",
                              kTail));
}

TEST(FingerprintCheckerTest, ReduceOpMismatch) {
  CheckedGroup group(3, absl::Seconds(10));
  CollectiveFingerprint max = allReduce(2, 16);
  max.reduce_op = ReduceOp::kMax;
  expectMismatch(group.checkAll({max, allReduce(2, 16), allReduce(2, 16)}),
                 absl::StrCat("collective mismatch in group G at call #2 (all_reduce): ranks "
                              "disagree on reduce op: rank 0 has max, ranks 1,2 have sum",
                              kTail));
}

TEST(FingerprintCheckerTest, SequenceNumberMismatch) {
  CheckedGroup group(3, absl::Seconds(10));
  expectMismatch(group.checkAll({allReduce(7, 16), allReduce(8, 16), allReduce(7, 16)}),
                 absl::StrCat("collective mismatch in group G at call #7 (all_reduce): ranks "
                              "disagree on sequence number: rank 1 has 8, ranks 0,2 have 7",
                              kTail));
}

TEST(FingerprintCheckerTest, DetailModeShapeMismatchShowsTheShapes) {
  CheckedGroup group(3, absl::Seconds(10));
  CollectiveFingerprint a = allReduce(3, 8);
  a.shapes = {{2, 4}};
  CollectiveFingerprint b = a;
  b.shapes = {{4, 2}, {1}};
  expectMismatch(group.checkAll({a, b, a}),
                 absl::StrCat("collective mismatch in group G at call #3 (all_reduce): ranks "
                              "disagree on shapes: rank 1 has [[4, 2], [1]], ranks 0,2 have "
                              "[[2, 4]]",
                              kTail));
}

TEST(FingerprintCheckerTest, ShapesAppearInCallsWhenOtherFieldsDifferToo) {
  CheckedGroup group(2, absl::Seconds(10));
  CollectiveFingerprint a = allReduce(3, 8);
  a.shapes = {{8}};
  CollectiveFingerprint b = reduce(3, 8, 0);
  expectMismatch(group.checkAll({a, b}),
                 absl::StrCat("collective mismatch in group G at call #3: rank 0 called "
                              "all_reduce(f32 x 8, sum, shapes [[8]]), rank 1 called "
                              "reduce(f32 x 8, root 0, sum)",
                              kTail));
}

TEST(FingerprintCheckerTest, ChecksKeepWorkingAfterAMismatch) {
  CheckedGroup group(2, absl::Seconds(10));
  group.checkAll({allReduce(1, 4), allReduce(1, 8)});
  for (const absl::Status& status : group.checkAll({allReduce(2, 4), allReduce(2, 4)})) {
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(FingerprintCheckerTest, RankThatNeverCallsIsNamed) {
  CheckedGroup group(4, absl::Milliseconds(300));
  const auto statuses =
      group.checkAll({allReduce(7, 16), allReduce(7, 16), allReduce(7, 16), std::nullopt});
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(statuses[r],
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("all_reduce #7 in group G: the cross-rank check #1 failed "
                                   "after waiting up to 300ms: rank 3 did not reach it (ranks "
                                   "0,1,2 did); look at that rank")))
        << "rank " << r;
    EXPECT_EQ(errorKind(statuses[r]), ErrorKind::kTimeout);
  }
}

TEST(FingerprintCheckerTest, LateRankThatArrivesInTimeIsNotNamed) {
  // Rank 1 comes 0.5 s late, well within the 2 s timeout, and rank 2 never
  // comes: only rank 2 may be blamed.
  CheckedGroup group(3, absl::Seconds(2));
  const auto statuses = group.checkAll({allReduce(1, 16), allReduce(1, 16), std::nullopt},
                                       {absl::ZeroDuration(), absl::Milliseconds(500)});
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(statuses[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                      HasSubstr("rank 2 did not reach it (ranks 0,1 did)")))
        << "rank " << r;
  }
}

TEST(FingerprintCheckerTest, SlowButCompleteCheckPassesAndCleansUp) {
  // Rank 0 waits longer than the arrival-report delay (half the timeout
  // here), so it leaves a key; the check passes and removes it.
  CheckedGroup group(2, absl::Milliseconds(800));
  const auto statuses = group.checkAll({allReduce(1, 16), allReduce(1, 16)},
                                       {absl::ZeroDuration(), absl::Milliseconds(550)});
  for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  absl::StatusOr<int64_t> keys = group.store().numKeys();
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, 0);
}

TEST(FingerprintCheckerTest, WithoutAStoreATimeoutSaysSo) {
  CheckedGroup group(2, absl::Milliseconds(200), /*with_store=*/false);
  const auto statuses = group.checkAll({allReduce(1, 16), std::nullopt});
  EXPECT_THAT(statuses[0],
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("no store was given to tell which ranks did not arrive")));
}

}  // namespace
}  // namespace loom::comm::debug
