// Tests runLocalJob with real processes (launch_test_rank): the environment
// each rank gets, prefixed output, and how a job ends when a rank fails, is
// killed, ignores SIGTERM, outlives the job timeout or the launcher itself is
// signalled. Every job here ends in well under a second or two.
#include "tools/launch/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::launch {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string testTmpdir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string rankProgram() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string relative = "tools/launch/launch_test_rank";
  if (srcdir == nullptr || workspace == nullptr) return relative;
  return absl::StrCat(srcdir, "/", workspace, "/", relative);
}

// Everything written to `fd` (a temporary file) so far.
std::string contents(int fd) {
  std::string text;
  char buffer[4096];
  ::lseek(fd, 0, SEEK_SET);
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, n);
  return text;
}

// "key=value" words of a line such as "env RANK=0 WORLD_SIZE=4 ...".
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> result;
  for (absl::string_view word : absl::StrSplit(line, ' ')) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
    result[kv.first] = kv.second;
  }
  return result;
}

// True once `pid` is gone or a zombie, i.e. it no longer runs.
bool isDead(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::tmpfile();
    err_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
    ASSERT_NE(err_, nullptr);
    std::string pattern = testTmpdir() + "/launch_sync_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    sync_dir_ = pattern;
  }

  void TearDown() override {
    std::fclose(out_);
    std::fclose(err_);
  }

  // `nproc` ranks of launch_test_rank doing `actions` ("WHO:WHAT"), output
  // captured, synchronised through a fresh directory.
  LaunchOptions options(int nproc, std::vector<std::string> actions) const {
    LaunchOptions options;
    options.binary = rankProgram();
    options.args = {"--sync_dir=" + sync_dir_};
    options.args.insert(options.args.end(), actions.begin(), actions.end());
    options.nproc = nproc;
    options.grace_period = absl::Seconds(10);
    options.stdout_fd = fileno(out_);
    options.stderr_fd = fileno(err_);
    return options;
  }

  std::string out() const { return contents(fileno(out_)); }
  std::string err() const { return contents(fileno(err_)); }

  std::FILE* out_ = nullptr;
  std::FILE* err_ = nullptr;
  std::string sync_dir_;
};

TEST_F(LauncherTest, AllRanksSucceedWithTheirOwnRankAndWholePrefixedLines) {
  constexpr int kLines = 50;
  absl::StatusOr<LaunchResult> result = runLocalJob(options(4, {absl::StrCat("*:lines=", kLines)}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->end, JobEnd::kSucceeded);
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(result->message, "");
  EXPECT_NE(result->master_port, 0);
  ASSERT_EQ(result->ranks.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const RankOutcome& rank = result->ranks[i];
    EXPECT_EQ(rank.rank, i);
    EXPECT_EQ(rank.local_rank, i);
    EXPECT_EQ(rank.exit_code, 0);
    EXPECT_FALSE(rank.term_signal.has_value());
    EXPECT_FALSE(rank.stopped);
  }

  const std::regex prefixed(R"(\[rank (\d+)\] (.*))");
  const std::regex numbered(R"(line (\d+)/(\d+) from rank (\d+) (x+) end)");
  std::set<std::string> ranks_seen;
  std::set<std::string> ports;
  std::set<std::string> tokens;
  std::map<std::string, int> lines_per_rank;
  std::istringstream stream(out());
  std::string line;
  while (std::getline(stream, line)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, prefixed)) << line;
    const std::string rank = match[1];
    const std::string text = match[2];
    std::smatch numbered_match;
    if (std::regex_match(text, numbered_match, numbered)) {
      EXPECT_EQ(numbered_match[3], rank) << line;
      EXPECT_EQ(numbered_match[4].length(), 100) << line;
      ++lines_per_rank[rank];
    } else if (text.rfind("env ", 0) == 0) {
      std::map<std::string, std::string> env = fields(text);
      EXPECT_EQ(env["RANK"], rank);
      EXPECT_EQ(env["LOCAL_RANK"], rank);
      EXPECT_EQ(env["WORLD_SIZE"], "4");
      EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
      EXPECT_EQ(env["GROUP_RANK"], "0");
      EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
      EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
      EXPECT_EQ(env["LOOM_STORE_TOKEN"].size(), 32u);
      ranks_seen.insert(env["RANK"]);
      ports.insert(env["MASTER_PORT"]);
      tokens.insert(env["LOOM_STORE_TOKEN"]);
    } else {
      EXPECT_EQ(text.rfind("rank_env source=torchrun rank=" + rank + " ", 0), 0u) << line;
    }
  }
  EXPECT_THAT(ranks_seen, ElementsAre("0", "1", "2", "3"));
  EXPECT_THAT(ports, ElementsAre(std::to_string(result->master_port)));
  EXPECT_EQ(tokens.size(), 1u);
  for (const std::string rank : {"0", "1", "2", "3"}) {
    EXPECT_EQ(lines_per_rank[rank], kLines) << "rank " << rank;
    EXPECT_THAT(err(), HasSubstr("[rank " + rank + "] stderr of rank " + rank + "\n"));
  }
}

TEST_F(LauncherTest, MultiNodeNumberingTokenAndPortArePassedThrough) {
  LaunchOptions opts = options(2, {});
  // The other machines' ranks never arrive, so no ready-file barrier.
  opts.args.clear();
  opts.nnodes = 3;
  opts.node_rank = 1;
  opts.master_addr = "head-node";
  opts.master_port = 29999;
  opts.token = "shared-token";
  absl::StatusOr<LaunchResult> result = runLocalJob(opts);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0) << result->message;
  EXPECT_EQ(result->master_port, 29999);
  ASSERT_EQ(result->ranks.size(), 2u);
  EXPECT_EQ(result->ranks[0].rank, 2);
  EXPECT_EQ(result->ranks[1].rank, 3);
  const std::string text = out();
  for (const std::string local : {"0", "1"}) {
    const std::string rank = local == "0" ? "2" : "3";
    EXPECT_THAT(text,
                HasSubstr(absl::StrCat("[rank ", rank, "] env RANK=", rank, " LOCAL_RANK=", local,
                                       " WORLD_SIZE=6 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 "
                                       "GROUP_WORLD_SIZE=3 MASTER_ADDR=head-node MASTER_PORT=29999 "
                                       "LOOM_STORE_TOKEN=shared-token ")));
  }
}

TEST_F(LauncherTest, FailingRankStopsTheOthersAndNamesItsExitStatus) {
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result = runLocalJob(options(4, {"2:exit=3", "*:sleep"}));
  ASSERT_TRUE(result.ok()) << result.status();
  // The sleepers die on SIGTERM; nobody waits out the 10 s grace period.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(result->end, JobEnd::kRankFailed);
  EXPECT_EQ(result->failed_rank, 2);
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->message, absl::StrCat("rank 2 (pid ", result->ranks[2].pid,
                                          ") exited with status 3; stopped ranks 0,1,3 with "
                                          "SIGTERM"));
  for (int i : {0, 1, 3}) {
    EXPECT_TRUE(result->ranks[i].stopped) << i;
    EXPECT_EQ(result->ranks[i].term_signal, SIGTERM) << i;
    EXPECT_FALSE(result->ranks[i].killed) << i;
  }
  EXPECT_FALSE(result->ranks[2].stopped);
  EXPECT_EQ(result->ranks[2].exit_code, 3);
}

TEST_F(LauncherTest, RankKilledBySignalIsNamedWithTheSignal) {
  absl::StatusOr<LaunchResult> result = runLocalJob(options(3, {"1:signal=9", "*:sleep"}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->end, JobEnd::kRankFailed);
  EXPECT_EQ(result->failed_rank, 1);
  EXPECT_EQ(result->exit_code, 128 + SIGKILL);
  EXPECT_EQ(result->ranks[1].term_signal, SIGKILL);
  EXPECT_EQ(result->message, absl::StrCat("rank 1 (pid ", result->ranks[1].pid,
                                          ") was killed by signal 9 (SIGKILL); stopped ranks "
                                          "0,2 with SIGTERM"));
}

TEST_F(LauncherTest, RankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  LaunchOptions opts = options(3, {"0:exit=1", "1:ignore_term", "*:sleep"});
  opts.grace_period = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result = runLocalJob(opts);
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(300));
  EXPECT_LT(elapsed, absl::Seconds(5));
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_TRUE(result->ranks[1].killed);
  EXPECT_EQ(result->ranks[1].term_signal, SIGKILL);
  EXPECT_FALSE(result->ranks[2].killed);
  EXPECT_EQ(result->ranks[2].term_signal, SIGTERM);
  EXPECT_THAT(result->message, HasSubstr("exited with status 1; stopped ranks 1,2 with "
                                         "SIGTERM; rank 1 was still running and got SIGKILL "
                                         "after the 300ms grace period"));
}

TEST_F(LauncherTest, JobTimeoutStopsTheRanksStillRunning) {
  // Rank 0 finishes long before the timeout; only rank 1 is stopped.
  LaunchOptions opts = options(2, {"0:exit=0", "*:sleep"});
  opts.timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result = runLocalJob(opts);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(result->end, JobEnd::kTimedOut);
  EXPECT_EQ(result->exit_code, kTimeoutExitCode);
  EXPECT_EQ(result->message, "job timeout of 1s expired; stopped rank 1 with SIGTERM");
  EXPECT_FALSE(result->ranks[0].stopped);
  EXPECT_TRUE(result->ranks[1].stopped);
}

TEST_F(LauncherTest, SignalToTheLauncherIsForwardedToEveryRank) {
  // Rank 0's parent is this test process, which runLocalJob makes act as
  // the launcher.
  absl::StatusOr<LaunchResult> result = runLocalJob(options(3, {"0:signal_parent=15", "*:sleep"}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->end, JobEnd::kInterrupted);
  EXPECT_EQ(result->exit_code, 128 + SIGTERM);
  EXPECT_EQ(result->message, "launcher received SIGTERM; stopped ranks 0,1,2 with SIGTERM");
  for (const RankOutcome& rank : result->ranks) {
    EXPECT_TRUE(rank.stopped);
    EXPECT_EQ(rank.term_signal, SIGTERM);
  }
}

TEST_F(LauncherTest, SecondSignalKillsAtOnceInsteadOfWaitingOutTheGrace) {
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchResult> result =
      runLocalJob(options(2, {"0:term_parent_twice", "1:ignore_term"}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(result->exit_code, 128 + SIGTERM);
  EXPECT_EQ(result->message,
            "launcher received SIGTERM; stopped ranks 0,1 with SIGTERM; ranks "
            "0,1 were still running and got SIGKILL after a second SIGTERM");
  for (const RankOutcome& rank : result->ranks) {
    EXPECT_TRUE(rank.killed);
    EXPECT_EQ(rank.term_signal, SIGKILL);
  }
}

TEST_F(LauncherTest, PartialLastLineIsFlushedWithItsPrefix) {
  absl::StatusOr<LaunchResult> result = runLocalJob(options(1, {"0:partial"}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0) << result->message;
  EXPECT_THAT(out(), HasSubstr("\n[rank 0] partial line of rank 0\n"));
}

TEST_F(LauncherTest, WithoutPrefixRanksWriteStraightToTheOutput) {
  LaunchOptions opts = options(1, {});
  opts.prefix_output = false;
  absl::StatusOr<LaunchResult> result = runLocalJob(opts);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0) << result->message;
  EXPECT_EQ(out().rfind("env RANK=0 ", 0), 0u) << out();
  EXPECT_EQ(err(), "stderr of rank 0\n");
}

TEST_F(LauncherTest, ChildrenLeftBehindByARankAreKilled) {
  absl::StatusOr<LaunchResult> result = runLocalJob(options(1, {"0:orphan"}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0);
  std::smatch match;
  const std::string text = out();
  ASSERT_TRUE(std::regex_search(text, match, std::regex(R"(grandchild pid=(\d+))"))) << text;
  const pid_t grandchild = std::stoi(match[1]);
  // SIGKILL is delivered at once, but the reparented process may take a
  // moment to be marked dead.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!isDead(grandchild) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(isDead(grandchild));
  if (!isDead(grandchild)) ::kill(grandchild, SIGKILL);
}

TEST_F(LauncherTest, FindsTheBinaryOnPath) {
  LaunchOptions opts = options(2, {});
  opts.binary = "true";
  opts.args.clear();
  absl::StatusOr<LaunchResult> result = runLocalJob(opts);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0);
}

TEST_F(LauncherTest, BadOptionsAreRejectedBeforeAnythingStarts) {
  LaunchOptions opts = options(0, {});
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("nproc is 0; it must be at least 1")));

  opts = options(2, {});
  opts.nnodes = 2;
  opts.node_rank = 2;
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("node_rank is 2 but nnodes is 2")));

  opts.node_rank = 1;
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("needs an explicit master_port")));

  opts.master_port = 29500;
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("export the same LOOM_STORE_TOKEN")));

  opts = options(2, {});
  opts.master_port = 70000;
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("master_port is 70000")));

  opts = options(2, {});
  opts.grace_period = absl::Seconds(-1);
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("grace_period is -1s")));

  opts = options(2, {});
  opts.timeout = absl::ZeroDuration();
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("timeout is 0; it must be positive")));
}

TEST_F(LauncherTest, MissingOrUnusableBinariesAreReportedByPath) {
  LaunchOptions opts = options(2, {});
  opts.binary = "";
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no rank binary given")));

  opts.binary = "/nonexistent/dir/trainer";
  EXPECT_THAT(
      runLocalJob(opts).status(),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("rank binary '/nonexistent/dir/trainer' does "
                                                      "not exist")));

  opts.binary = "no-such-program-anywhere";
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("'no-such-program-anywhere' is not on PATH")));

  opts.binary = sync_dir_;
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is a directory")));

  const std::string plain = sync_dir_ + "/plain.txt";
  std::ofstream(plain) << "not a program\n";
  opts.binary = plain;
  EXPECT_THAT(runLocalJob(opts).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("is not executable")));

  // Executable but not a program: exec itself fails, and that is reported
  // as a start failure, not as a rank that exited.
  ASSERT_EQ(::chmod(plain.c_str(), 0755), 0);
  EXPECT_THAT(runLocalJob(opts).status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                   HasSubstr("cannot start rank 0: exec of")));
}

TEST_F(LauncherTest, OnlyOneJobRunsPerProcess) {
  LaunchOptions opts = options(1, {"*:sleep"});
  opts.timeout = absl::Milliseconds(1500);
  absl::StatusOr<LaunchResult> first = absl::UnknownError("not run");
  std::thread job([&] { first = runLocalJob(opts); });
  // The first job is running once its rank is ready.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  struct stat info;
  while (::stat((sync_dir_ + "/ready.0").c_str(), &info) != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(
      runLocalJob(options(1, {})).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("another runLocalJob is running")));
  job.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->end, JobEnd::kTimedOut);
}

}  // namespace
}  // namespace loom::launch
