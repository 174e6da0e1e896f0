// Tests of Future (values, errors, then-chains, waits with timeouts) and of
// the futures and results of Work handles.
#include "comm/future.h"

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/work.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

TEST(FutureTest, ValueAfterCompletionAndAnErrorBefore) {
  Future<int> future(absl::Seconds(5));
  EXPECT_FALSE(future.done());
  EXPECT_THAT(future.value().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has not completed")));
  EXPECT_TRUE(future.setValue(41));
  EXPECT_FALSE(future.setValue(7));
  EXPECT_TRUE(future.done());
  EXPECT_TRUE(future.wait().ok());
  EXPECT_EQ(*future.value(), 41);
}

TEST(FutureTest, ThenChainsRunInOrderOnTheCompletingThread) {
  auto first = std::make_shared<Future<int>>(absl::Seconds(5));
  std::vector<std::string> order;
  auto doubled = first->then([&](const Future<int>& f) -> absl::StatusOr<int> {
    order.push_back("double");
    return *f.value() * 2;
  });
  auto text = doubled->then([&](const Future<int>& f) -> absl::StatusOr<std::string> {
    order.push_back("text");
    return std::to_string(*f.value());
  });
  EXPECT_FALSE(text->done());
  std::thread completer([&] { first->setValue(21); });
  EXPECT_TRUE(text->wait().ok());
  completer.join();
  EXPECT_EQ(*text->value(), "42");
  EXPECT_THAT(order, ::testing::ElementsAre("double", "text"));
  // Chained on a completed future, the callback runs at once.
  auto late = first->then([](const Future<int>& f) -> absl::StatusOr<int> { return *f.value(); });
  EXPECT_TRUE(late->done());
}

TEST(FutureTest, ErrorsPassDownTheChain) {
  Future<int> future(absl::Seconds(5));
  auto next = future.then([](const Future<int>& f) -> absl::StatusOr<int> {
    absl::StatusOr<int> value = f.value();
    if (!value.ok()) return value.status();
    return *value + 1;
  });
  auto refused = future.then(
      [](const Future<int>&) -> absl::StatusOr<int> { return absl::DataLossError("no"); });
  future.setError(networkError("peer went away"));
  EXPECT_THAT(future.wait(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("went away")));
  EXPECT_THAT(next->value().status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("went away")));
  EXPECT_THAT(refused->wait(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("no")));
}

TEST(FutureTest, WaitTimesOutAndTheFutureStaysPending) {
  Future<int> future(absl::Milliseconds(50));
  EXPECT_EQ(errorKind(future.wait()), ErrorKind::kTimeout);
  EXPECT_THAT(future.wait(absl::Milliseconds(10)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("10ms")));
  EXPECT_FALSE(future.done());
  future.setValue(1);
  EXPECT_TRUE(future.wait().ok());
}

CollectiveInfo info() {
  return {.group = "default", .rank = 0, .group_size = 2, .seq = 3, .op = "all_reduce"};
}

TEST(WorkFutureTest, TheFutureCarriesTheOutputsAndResultNeedsCompletion) {
  std::vector<int64_t> values = {1, 2};
  Work work(info(), absl::Seconds(5));
  work.setOutputs({Tensor::of(values)});
  EXPECT_THAT(
      work.result().status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("all_reduce #3 in group default (rank 0 of 2) has not completed")));
  std::shared_ptr<Future<std::vector<Tensor>>> future = work.getFuture();
  EXPECT_EQ(work.getFuture(), future);
  auto sum = future->then([](const Future<std::vector<Tensor>>& f) -> absl::StatusOr<int64_t> {
    absl::StatusOr<std::vector<Tensor>> tensors = f.value();
    if (!tensors.ok()) return tensors.status();
    const Tensor& t = (*tensors)[0];
    return t.dataAs<int64_t>()[0] + t.dataAs<int64_t>()[1];
  });
  EXPECT_FALSE(future->done());
  work.complete(absl::OkStatus());
  EXPECT_EQ(*sum->value(), 3);
  ASSERT_TRUE(work.result().ok());
  EXPECT_EQ((*work.result())[0].data(), values.data());
}

TEST(WorkFutureTest, AFailedWorkFailsItsFutureAndResult) {
  Work work(info(), absl::Seconds(5));
  auto future = work.getFuture();
  work.abort();
  EXPECT_THAT(future->wait(), StatusIs(absl::StatusCode::kAborted, HasSubstr("was aborted")));
  EXPECT_THAT(work.result().status(), StatusIs(absl::StatusCode::kAborted, HasSubstr("aborted")));
  // Asked for after completion, the future is complete at once.
  Work done(info(), absl::Seconds(5));
  done.complete(absl::OkStatus());
  EXPECT_TRUE(done.getFuture()->done());
  EXPECT_TRUE(done.getFuture()->value()->empty());
}

}  // namespace
}  // namespace loom::comm
