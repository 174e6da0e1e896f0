// The checker over the real side backend: Gloo over TCP on 127.0.0.1, its
// ranks as threads of this process meeting through a HashStore.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/debug/fingerprint.h"
#include "comm/gloo/gloo_backend.h"
#include "comm/hash_store.h"
#include "comm/prefix_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::debug {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

CollectiveFingerprint allReduce(uint64_t seq, int64_t numel) {
  CollectiveFingerprint fp;
  fp.seq = seq;
  fp.op = "all_reduce";
  fp.numel = numel;
  fp.reduce_op = ReduceOp::kSum;
  return fp;
}

// Creates a Gloo side backend and a checker per rank (connecting needs every
// rank at once, so on threads), then lets each rank with a fingerprint
// check it on its own thread.
class GlooGroup {
 public:
  GlooGroup(int size, absl::Duration timeout) : checkers_(size) {
    auto store = std::make_shared<HashStore>(absl::Seconds(30));
    std::vector<std::thread> threads;
    std::vector<absl::Status> statuses(size);
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        BackendContext context;
        context.store = std::make_shared<PrefixStore>("G/checks/gloo", store);
        context.rank = r;
        context.size = size;
        context.group_name = "G/checks";
        for (int g = 0; g < size; ++g) context.global_ranks.push_back(g);
        context.timeout = timeout;
        absl::StatusOr<std::unique_ptr<Backend>> backend =
            gloo::createGlooBackend(context, gloo::GlooBackendOptions{});
        statuses[r] = backend.status();
        if (backend.ok()) {
          checkers_[r] =
              std::make_unique<FingerprintChecker>(*std::move(backend), store, "G", timeout);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  }

  std::vector<absl::Status> checkAll(const std::vector<std::optional<CollectiveFingerprint>>& fps) {
    std::vector<absl::Status> statuses(fps.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < fps.size(); ++r) {
      if (fps[r]) threads.emplace_back([&, r] { statuses[r] = checkers_[r]->check(*fps[r]); });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }

 private:
  std::vector<std::unique_ptr<FingerprintChecker>> checkers_;
};

TEST(FingerprintGlooTest, AgreementThenMismatchThenMissingRank) {
  GlooGroup group(3, absl::Seconds(2));
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    for (const absl::Status& status :
         group.checkAll(std::vector(3, std::optional(allReduce(seq, 64))))) {
      EXPECT_TRUE(status.ok()) << status;
    }
  }

  CollectiveFingerprint detail = allReduce(4, 64);
  detail.shapes = {{8, 8}};
  CollectiveFingerprint other = detail;
  other.shapes = {{64}};
  const std::string mismatch =
      "collective mismatch in group G at call #4 (all_reduce): ranks disagree on shapes: rank 2 "
      "has [[64]], ranks 0,1 have [[8, 8]]";
  for (const absl::Status& status : group.checkAll({detail, detail, other})) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(mismatch)));
  }

  const auto statuses = group.checkAll({allReduce(5, 64), allReduce(5, 64), std::nullopt});
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(statuses[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                      HasSubstr("rank 2 did not reach it (ranks 0,1 did)")))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace loom::comm::debug
