// Tests of Work: completion, waiting with timeouts, abort and callbacks.
#include "comm/work.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "comm/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

CollectiveInfo info() {
  return {.group = "tp", .rank = 1, .group_size = 4, .seq = 7, .op = "all_reduce"};
}

class CountingWork : public Work {
 public:
  using Work::Work;
  int engine_aborts = 0;

 protected:
  void abortEngine() override { ++engine_aborts; }
};

TEST(WorkTest, DescribeNamesGroupRankOpAndSequence) {
  EXPECT_EQ(info().describe(), "all_reduce #7 in group tp (rank 1 of 4)");
  CollectiveInfo p2p = info();
  p2p.op = "send";
  p2p.peer = 3;
  EXPECT_EQ(p2p.describe(), "send #7 in group tp (rank 1 of 4), peer rank 3");
}

TEST(WorkTest, CompletesOnceFromAnotherThread) {
  Work work(info(), absl::Seconds(10));
  EXPECT_FALSE(work.isCompleted());
  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_TRUE(work.complete(absl::OkStatus()));
  });
  EXPECT_TRUE(work.wait().ok());
  finisher.join();
  EXPECT_TRUE(work.isSuccess());
  EXPECT_FALSE(work.complete(backendError("late")));
  EXPECT_TRUE(work.exception().ok());
}

TEST(WorkTest, WaitTimeoutFailsAndAbortsTheEngine) {
  CountingWork work(info(), absl::Seconds(10));
  const absl::Status status = work.wait(absl::Milliseconds(30));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                               AllOf(HasSubstr("all_reduce #7 in group tp (rank 1 of 4)"),
                                     HasSubstr("30ms"))));
  EXPECT_EQ(errorKind(status), ErrorKind::kTimeout);
  EXPECT_TRUE(work.isCompleted());
  EXPECT_FALSE(work.isSuccess());
  EXPECT_EQ(work.engine_aborts, 1);
  // The engine finishing afterwards changes nothing.
  EXPECT_FALSE(work.complete(absl::OkStatus()));
  EXPECT_EQ(work.exception(), status);
}

TEST(WorkTest, AbortOnlyBeforeCompletion) {
  CountingWork done(info(), absl::Seconds(1));
  done.complete(absl::OkStatus());
  done.abort();
  EXPECT_TRUE(done.isSuccess());
  EXPECT_EQ(done.engine_aborts, 0);

  CountingWork running(info(), absl::Seconds(1));
  running.abort();
  EXPECT_THAT(running.exception(), StatusIs(absl::StatusCode::kAborted, HasSubstr("was aborted")));
  EXPECT_EQ(running.engine_aborts, 1);
}

TEST(WorkTest, CallbacksRunOnceWithTheFinalStatus) {
  Work work(info(), absl::Seconds(1));
  std::atomic<int> calls = 0;
  work.onCompletion([&](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    ++calls;
  });
  work.complete(networkError("peer went away"));
  work.onCompletion([&](const absl::Status& status) {
    EXPECT_FALSE(status.ok());
    ++calls;
  });
  EXPECT_EQ(calls.load(), 2);
}

}  // namespace
}  // namespace loom::comm
