// Tests of ProcessGroup with each rank a separate process (the
// process_group_test_helper binary) meeting through a TCPStore served by the
// test: collectives across processes, a rank killed mid-collective, and a
// rank that never makes a call.
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/tcp_store.h"
#include "comm/testing/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class Job {
 public:
  // Serves a store on a free port of 127.0.0.1 for the ranks.
  Job() {
    TCPStoreOptions options;
    options.is_server = true;
    options.timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<TCPStore>> server = TCPStore::create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = std::move(*server);
  }

  // Starts `size` ranks running `scenario`; extra flags go to every rank.
  void start(int size, const std::string& scenario, const std::vector<std::string>& flags = {},
             const std::vector<std::string>& env = {}) {
    ASSERT_NE(server_, nullptr);
    for (int rank = 0; rank < size; ++rank) {
      std::vector<std::string> args = {absl::StrCat("--port=", server_->port()),
                                       absl::StrCat("--rank=", rank), absl::StrCat("--size=", size),
                                       absl::StrCat("--scenario=", scenario)};
      args.insert(args.end(), flags.begin(), flags.end());
      absl::StatusOr<testing::Subprocess> process = testing::Subprocess::start(
          testing::runfilePath("comm/process_group_test_helper"), args, env);
      ASSERT_TRUE(process.ok()) << process.status();
      ranks_.push_back(std::move(*process));
    }
  }

  testing::Subprocess& rank(int r) { return ranks_[r]; }

  std::string readLine(int r, absl::Duration timeout = absl::Seconds(60)) {
    absl::StatusOr<std::string> line = ranks_[r].readLine(timeout);
    EXPECT_TRUE(line.ok()) << "rank " << r << ": " << line.status();
    return line.ok() ? *line : "";
  }

  int exitCode(int r) {
    absl::StatusOr<int> code = ranks_[r].wait(absl::Seconds(30));
    EXPECT_TRUE(code.ok()) << "rank " << r << ": " << code.status();
    return code.ok() ? *code : -1;
  }

 private:
  std::unique_ptr<TCPStore> server_;
  std::vector<testing::Subprocess> ranks_;
};

TEST(ProcessGroupMultiprocessTest, CollectivesAcrossProcesses) {
  for (int size : {2, 3, 4}) {
    Job job;
    job.start(size, "collectives");
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(job.readLine(r), "ok") << size << " ranks, rank " << r;
    }
    for (int r = 0; r < size; ++r) EXPECT_EQ(job.exitCode(r), 0);
  }
}

TEST(ProcessGroupMultiprocessTest, RankKilledMidCollectiveFailsTheOthersWithinTheTimeout) {
  constexpr int kSize = 4;
  constexpr int kVictim = 2;
  constexpr absl::Duration kTimeout = absl::Seconds(15);
  Job job;
  // The survivors normally fail within milliseconds, as the victim's
  // connections die and each failing rank closes its own; the timeout is
  // the bound.
  job.start(kSize, "loop", {absl::StrCat("--timeout_ms=", absl::ToInt64Milliseconds(kTimeout))});
  for (int r = 0; r < kSize; ++r) ASSERT_EQ(job.readLine(r), "looping") << "rank " << r;
  const absl::Time killed = absl::Now();
  job.rank(kVictim).kill();
  EXPECT_EQ(job.exitCode(kVictim), 128 + 9);
  for (int r = 0; r < kSize; ++r) {
    if (r == kVictim) continue;
    EXPECT_THAT(job.readLine(r, kTimeout + absl::Seconds(10)), StartsWith("failed after"))
        << "rank " << r;
    const std::string error = job.readLine(r, absl::Seconds(5));
    EXPECT_THAT(error, StartsWith("error ")) << "rank " << r;
    // The call itself or the check before it fails, either way naming the
    // call and this rank.
    EXPECT_THAT(error, HasSubstr("all_reduce #"));
    EXPECT_THAT(error, HasSubstr("in group default"));
    EXPECT_THAT(error, HasSubstr(absl::StrCat("rank ", r, " of 4")));
    EXPECT_EQ(job.exitCode(r), 2);
  }
  EXPECT_LT(absl::Now() - killed, kTimeout + absl::Seconds(5));
}

// Without checks the engine times out; each rank that timed out dumps its
// flight recorder.
TEST(ProcessGroupMultiprocessTest, ACallOneRankSkipsTimesOutAndDumpsTheRecorder) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/skip_unchecked");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  Job job;
  job.start(3, "skip_rank1", {"--timeout_ms=1000", "--checks=false"},
            {absl::StrCat("LOOM_FLIGHT_RECORDER_DIR=", dir)});
  EXPECT_EQ(job.readLine(1), "skipping");
  for (int r : {0, 2}) {
    const std::string error = job.readLine(r, absl::Seconds(20));
    EXPECT_THAT(error, StartsWith("error timeout")) << "rank " << r;
    EXPECT_THAT(error,
                HasSubstr(absl::StrCat("all_reduce #2 in group default (rank ", r, " of 3)")));
    EXPECT_EQ(job.exitCode(r), 2);
    std::ifstream dump(absl::StrCat(dir, "/default_rank", r, ".json"));
    ASSERT_TRUE(dump.good()) << "rank " << r << " left no dump in " << dir;
    const std::string text((std::istreambuf_iterator<char>(dump)),
                           std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr("all_reduce"));
  }
  job.rank(1).closeStdin();
  EXPECT_EQ(job.exitCode(1), 0);
}

// With checks (the default) the check before the call fails first, naming
// the rank that never came.
TEST(ProcessGroupMultiprocessTest, ChecksNameTheRankThatSkippedACall) {
  Job job;
  job.start(3, "skip_rank1", {"--timeout_ms=1000"});
  EXPECT_EQ(job.readLine(1), "skipping");
  for (int r : {0, 2}) {
    const std::string error = job.readLine(r, absl::Seconds(20));
    EXPECT_THAT(error, StartsWith("error timeout")) << "rank " << r;
    EXPECT_THAT(error, HasSubstr(absl::StrCat("rank ", r,
                                              " of 3: all_reduce #2 in group "
                                              "default")));
    EXPECT_THAT(error, HasSubstr("rank 1 did not reach it"));
    EXPECT_EQ(job.exitCode(r), 2);
  }
  job.rank(1).closeStdin();
  EXPECT_EQ(job.exitCode(1), 0);
}

}  // namespace
}  // namespace loom::comm
