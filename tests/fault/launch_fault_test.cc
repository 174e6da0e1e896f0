// Fault injection under //tools:launch: real gloo ranks (fault_rank over the
// env:// rendezvous) looping on all_reduce while one of them exits with an
// error or dies of a signal, or while the launcher itself is killed. The
// launcher must end the job naming the rank, with that rank's status, and
// leave no rank running.
#include <signal.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_process.h"

namespace loom::fault {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr absl::Duration kTimeout = absl::Seconds(3);
constexpr absl::Duration kMargin = absl::Seconds(5);
constexpr int kRanks = 3;

// Whether `pid` no longer runs (gone, or a zombie nobody reaped yet).
bool stopped(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

bool allStopped(const std::vector<pid_t>& pids, absl::Time deadline) {
  while (true) {
    bool all = true;
    for (pid_t pid : pids) all = all && stopped(pid);
    if (all) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// A launcher running kRanks looping ranks; `rank_flags` pick the fault.
class LaunchedJob {
 public:
  absl::Status start(const std::vector<std::string>& rank_flags) {
    std::vector<std::string> argv = {
        runfilePath("tools/launch/launch"),
        absl::StrCat("--nproc=", kRanks),
        "--grace_period=2s",
        "--",
        runfilePath("tests/fault/fault_rank"),
        "--store=env",
        "--scenario=loop",
        "--op=all_reduce",
        absl::StrCat("--timeout_ms=", absl::ToInt64Milliseconds(kTimeout))};
    argv.insert(argv.end(), rank_flags.begin(), rank_flags.end());
    absl::StatusOr<FaultProcess> process = FaultProcess::start(argv);
    if (!process.ok()) return process.status();
    launcher_.emplace(std::move(*process));
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    // "[rank R] ready pid=P rank=R size=N"
    const std::regex ready(R"(\[rank (\d+)\] ready pid=(\d+) .*)");
    for (int i = 0; i < kRanks; ++i) {
      absl::StatusOr<std::string> line = launcher_->awaitLine(
          [&](const std::string& l) { return std::regex_match(l, ready); }, deadline);
      if (!line.ok()) return line.status();
      std::smatch match;
      std::regex_match(*line, match, ready);
      int pid = 0;
      if (absl::SimpleAtoi(match[2].str(), &pid)) pids_.push_back(pid);
    }
    return absl::OkStatus();
  }

  FaultProcess& launcher() { return *launcher_; }
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::optional<FaultProcess> launcher_;
  std::vector<pid_t> pids_;
};

struct RankFaultCase {
  std::string fault;
  int exit_code;
  std::string message;  // a regular expression for the launcher's message
};

class LaunchRankFaultTest : public ::testing::TestWithParam<RankFaultCase> {};

TEST_P(LaunchRankFaultTest, TheLauncherNamesTheRankAndStopsTheOthers) {
  const RankFaultCase& c = GetParam();
  LaunchedJob job;
  ASSERT_TRUE(
      job.start({"--culprit=1", absl::StrCat("--fault=", c.fault), "--fault_after=20"}).ok());
  // The culprit announces an exit or signal it raises itself; a SIGKILL in
  // flight it cannot, so that one is timed from the survivors' "looping".
  absl::StatusOr<std::string> announced = job.launcher().awaitLine(
      [](const std::string& l) {
        return l.find("[rank 1] exiting") == 0 || l.find("[rank 1] raising") == 0 ||
               l.find("[rank 2] looping") == 0;
      },
      absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(announced.ok()) << announced.status();
  const absl::Time fault = absl::Now();
  absl::StatusOr<std::string> message =
      job.launcher().awaitPrefix("launch: rank ", fault + kTimeout + kMargin);
  ASSERT_TRUE(message.ok()) << message.status();
  absl::StatusOr<int> code = job.launcher().wait(fault + kTimeout + kMargin);
  ASSERT_TRUE(code.ok()) << code.status();
  const absl::Duration took = absl::Now() - fault;
  EXPECT_EQ(*code, c.exit_code);
  EXPECT_THAT(*message, MatchesRegex(c.message));
  EXPECT_LT(took, kTimeout + kMargin);
  EXPECT_TRUE(allStopped(job.pids(), absl::Now() + absl::Seconds(5)))
      << "a rank outlived the launcher";
  EXPECT_TRUE(job.launcher().groupGone());
  reportTiming(absl::StrCat("//tools:launch, 3 gloo ranks, rank 1 ", c.fault), kTimeout, took,
               *message);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, LaunchRankFaultTest,
    ::testing::Values(
        RankFaultCase{
            "exit:3", 3,
            R"(launch: rank 1 \(pid [0-9]+\) exited with status 3; stopped ranks 0,2 with SIGTERM.*)"},
        RankFaultCase{
            "signal:11", 128 + 11,
            R"(launch: rank 1 \(pid [0-9]+\) was killed by signal 11 \(SIGSEGV\); stopped ranks 0,2.*)"},
        RankFaultCase{
            "kill_inflight", 128 + 9,
            R"(launch: rank 1 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\); stopped ranks 0,2.*)"}),
    [](const ::testing::TestParamInfo<RankFaultCase>& info) {
      std::string name = info.param.fault;
      for (char& ch : name) {
        if (ch == ':') ch = '_';
      }
      return name;
    });

TEST(LaunchFaultTest, ALauncherKilledBySignalTakesItsRanksWithIt) {
  for (int sig : {SIGTERM, SIGKILL}) {
    LaunchedJob job;
    ASSERT_TRUE(job.start({}).ok());
    const absl::Time signalled = absl::Now();
    job.launcher().signal(sig);
    absl::StatusOr<int> code = job.launcher().wait(signalled + kMargin);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 128 + sig);
    EXPECT_TRUE(allStopped(job.pids(), signalled + kMargin)) << "signal " << sig;
    const absl::Duration took = absl::Now() - signalled;
    const std::string output = job.launcher().transcript();
    if (sig == SIGTERM) {
      EXPECT_THAT(output, HasSubstr("launch: launcher received SIGTERM; stopped ranks 0,1,2 "
                                    "with SIGTERM"));
    }
    reportTiming(absl::StrCat("//tools:launch itself gets ", sig == SIGTERM ? "SIGTERM" : "SIGKILL",
                              " while 3 gloo ranks loop"),
                 absl::ZeroDuration(), took,
                 sig == SIGTERM
                     ? "launch: launcher received SIGTERM; stopped ranks 0,1,2 with SIGTERM"
                     : "(no message: ranks die through PR_SET_PDEATHSIG)");
  }
}

}  // namespace
}  // namespace loom::fault
