// CheckedIssuer and CheckedWork with ranks as threads over ThreadBackend:
// a call reaches its "backend" only after its check passed, in call order;
// a mismatch completes the Work with the verdict; a cancelled call is never
// issued; destroying the issuer fails what is still queued.
#include "comm/debug/checked_issuer.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "comm/debug/thread_backend.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm::debug {
namespace {

using ::testing::HasSubstr;

CollectiveFingerprint allReduce(uint64_t seq, int64_t numel) {
  CollectiveFingerprint fp;
  fp.seq = seq;
  fp.op = "all_reduce";
  fp.numel = numel;
  fp.reduce_op = ReduceOp::kSum;
  return fp;
}

CollectiveInfo infoOf(int rank, uint64_t seq) {
  return CollectiveInfo{
      .group = "G", .rank = rank, .group_size = 2, .seq = seq, .op = "all_reduce"};
}

// A Work the test completes by hand, standing for the backend's.
class ManualWork : public Work {
 public:
  using Work::Work;
  bool aborted = false;

 protected:
  void abortEngine() override { aborted = true; }
};

struct Rank {
  std::unique_ptr<FingerprintChecker> checker;
  std::unique_ptr<CheckedIssuer> issuer;
};

std::vector<Rank> makeRanks(absl::Duration timeout) {
  auto store = std::make_shared<HashStore>();
  std::vector<Rank> ranks;
  int r = 0;
  for (auto& backend : makeThreadBackends(2, "G/checks", timeout)) {
    Rank rank;
    rank.checker = std::make_unique<FingerprintChecker>(std::move(backend), store, "G", timeout);
    rank.issuer =
        std::make_unique<CheckedIssuer>(*rank.checker, "rank " + std::to_string(r++) + " of 2: ");
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

TEST(CheckedIssuerTest, IssuesInOrderAfterTheChecksAndCompletesWithTheBackend) {
  std::vector<Rank> ranks = makeRanks(absl::Seconds(10));
  absl::Mutex mu;
  std::vector<std::vector<uint64_t>> issued(2);
  std::vector<std::vector<std::shared_ptr<ManualWork>>> backend(2);
  std::vector<std::vector<std::shared_ptr<CheckedWork>>> works(2);
  for (int r = 0; r < 2; ++r) {
    for (uint64_t seq = 1; seq <= 5; ++seq) {
      auto work = std::make_shared<CheckedWork>(infoOf(r, seq), absl::Seconds(10));
      works[r].push_back(work);
      ranks[r].issuer->submit(allReduce(seq, 8), work, [&, r, seq] {
        auto inner = std::make_shared<ManualWork>(infoOf(r, seq), absl::Seconds(10));
        absl::MutexLock lock(&mu);
        issued[r].push_back(seq);
        backend[r].push_back(inner);
        return absl::StatusOr<std::shared_ptr<Work>>(inner);
      });
    }
  }
  // Every call reaches the backend, in order; none completes before it does.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    absl::MutexLock lock(&mu);
    if (issued[0].size() == 5 && issued[1].size() == 5) break;
    mu.AwaitWithTimeout(absl::Condition::kTrue, absl::Milliseconds(10));
  }
  absl::MutexLock lock(&mu);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(issued[r], (std::vector<uint64_t>{1, 2, 3, 4, 5})) << "rank " << r;
    ASSERT_EQ(backend[r].size(), 5u);
    EXPECT_FALSE(works[r][0]->isCompleted());
    backend[r][0]->complete(absl::OkStatus());
    backend[r][1]->complete(absl::InternalError("engine trouble"));
    EXPECT_TRUE(works[r][0]->wait(absl::Seconds(1)).ok());
    EXPECT_THAT(works[r][1]->wait(absl::Seconds(1)).message(), HasSubstr("engine trouble"));
    // Aborting the caller's handle aborts the backend's call.
    works[r][2]->abort();
    EXPECT_TRUE(backend[r][2]->aborted);
    for (size_t i = 3; i < 5; ++i) backend[r][i]->complete(absl::OkStatus());
  }
}

TEST(CheckedIssuerTest, AMismatchCompletesTheWorkWithTheVerdictAndNeverIssues) {
  std::vector<Rank> ranks = makeRanks(absl::Seconds(10));
  std::atomic<int> issued{0};
  std::vector<std::shared_ptr<CheckedWork>> works;
  for (int r = 0; r < 2; ++r) {
    auto work = std::make_shared<CheckedWork>(infoOf(r, 1), absl::Seconds(10));
    works.push_back(work);
    ranks[r].issuer->submit(allReduce(1, r == 0 ? 8 : 16), work, [&]() {
      ++issued;
      return absl::StatusOr<std::shared_ptr<Work>>(absl::InternalError("must not be issued"));
    });
  }
  for (int r = 0; r < 2; ++r) {
    const absl::Status status = works[r]->wait(absl::Seconds(10));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("rank " + std::to_string(r) + " of 2: collective mismatch"));
    EXPECT_THAT(std::string(status.message()), HasSubstr("element count"));
  }
  EXPECT_EQ(issued.load(), 0);
}

TEST(CheckedIssuerTest, ACallCancelledDuringItsCheckIsNeverIssued) {
  std::vector<Rank> ranks = makeRanks(absl::Seconds(10));
  std::atomic<int> issued{0};
  auto first = std::make_shared<CheckedWork>(infoOf(0, 1), absl::Seconds(10));
  ranks[0].issuer->submit(allReduce(1, 8), first, [&]() {
    ++issued;
    return absl::StatusOr<std::shared_ptr<Work>>(absl::InternalError("must not be issued"));
  });
  first->abort();  // rank 1 has not even submitted: the check is still open
  EXPECT_EQ(first->wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
  // Rank 1 arrives later; rank 0's check still runs and pairs with it.
  auto peer = std::make_shared<CheckedWork>(infoOf(1, 1), absl::Seconds(10));
  std::shared_ptr<ManualWork> peer_backend;
  ranks[1].issuer->submit(allReduce(1, 8), peer, [&]() {
    peer_backend = std::make_shared<ManualWork>(infoOf(1, 1), absl::Seconds(10));
    return absl::StatusOr<std::shared_ptr<Work>>(peer_backend);
  });
  // Both ranks' next calls check and issue normally.
  std::vector<std::shared_ptr<CheckedWork>> next;
  for (int r = 0; r < 2; ++r) {
    next.push_back(std::make_shared<CheckedWork>(infoOf(r, 2), absl::Seconds(10)));
    ranks[r].issuer->submit(allReduce(2, 8), next[r], [r] {
      auto inner = std::make_shared<ManualWork>(infoOf(r, 2), absl::Seconds(10));
      inner->complete(absl::OkStatus());
      return absl::StatusOr<std::shared_ptr<Work>>(inner);
    });
  }
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(next[r]->wait(absl::Seconds(10)).ok()) << r;
  EXPECT_EQ(issued.load(), 0);
  ASSERT_NE(peer_backend, nullptr);
  peer_backend->complete(absl::OkStatus());
}

TEST(CheckedIssuerTest, DestroyingTheIssuerFailsTheQueuedCalls) {
  std::vector<Rank> ranks = makeRanks(absl::Milliseconds(300));
  std::vector<std::shared_ptr<CheckedWork>> works;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    works.push_back(std::make_shared<CheckedWork>(infoOf(0, seq), absl::Seconds(10)));
    ranks[0].issuer->submit(allReduce(seq, 8), works.back(), [] {
      return absl::StatusOr<std::shared_ptr<Work>>(absl::InternalError("must not be issued"));
    });
  }
  absl::SleepFor(absl::Milliseconds(50));  // the first call is in its check
  ranks[0].issuer.reset();                 // rank 1 never comes
  // The check in progress ends at its timeout, naming the absent rank.
  EXPECT_THAT(std::string(works[0]->exception().message()), HasSubstr("rank 1 did not reach it"));
  for (size_t i = 1; i < works.size(); ++i) {
    EXPECT_EQ(works[i]->exception().code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(
        std::string(works[i]->exception().message()),
        HasSubstr("its group was destroyed while the call waited for its cross-rank check"));
  }
}

}  // namespace
}  // namespace loom::comm::debug
