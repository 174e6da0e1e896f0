// Fault injection into gloo process groups of real processes: a rank
// SIGKILLed during an all-gather or a reduce-scatter, and a rank that skips
// a collective or calls a different op, element count, dtype or shape, with
// the cross-rank checks on and off. Each case requires every affected rank
// to fail with an error that names the call (and, where the checks can, the
// culprit) within the group's timeout plus 5 s, and no process left behind.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_job.h"

namespace loom::fault {
namespace {

using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(3);
// The bound every failure must meet: the configured timeout plus a margin.
constexpr absl::Duration kMargin = absl::Seconds(5);

std::vector<std::string> groupFlags(const std::string& checks) {
  return {absl::StrCat("--timeout_ms=", absl::ToInt64Milliseconds(kTimeout)),
          absl::StrCat("--checks=", checks), "--hold"};
}

void expectNothingLeft(FaultJob& job) {
  job.finish(absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(job.nothingLeft()) << "a process of the job outlived it";
}

// --- A rank SIGKILLed mid-collective -------------------------------------

struct KillCase {
  std::string op;
  std::string checks;
  int victim;
};

class KillTest : public ::testing::TestWithParam<KillCase> {};

TEST_P(KillTest, SurvivorsFailNamingTheCallWithinTheTimeout) {
  const KillCase& c = GetParam();
  constexpr int kSize = 4;
  FaultJob job;
  ASSERT_TRUE(job.ok());
  std::vector<std::string> flags = groupFlags(c.checks);
  flags.insert(flags.end(), {"--scenario=loop", absl::StrCat("--op=", c.op)});
  ASSERT_TRUE(job.start(kSize, flags).ok());
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(job.rank(r).awaitPrefix("looping", absl::Now() + absl::Seconds(30)).ok());
  }
  // Let the loop run into the middle of a call.
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time killed = absl::Now();
  job.rank(c.victim).signal(SIGKILL);
  absl::Duration slowest;
  std::string excerpt;
  int lost_connection = 0;
  int named_victim = 0;
  for (int r = 0; r < kSize; ++r) {
    if (r == c.victim) continue;
    absl::StatusOr<RankError> error = job.awaitError(r, killed + kTimeout + kMargin);
    ASSERT_TRUE(error.ok()) << error.status();
    EXPECT_LT(error->seen - killed, kTimeout + kMargin) << "rank " << r;
    // The call itself or the check before it fails, either way naming the
    // call, the group and this rank.
    EXPECT_THAT(error->message, HasSubstr(absl::StrCat(
                                    c.op == "all_gather" ? "all_gather_into" : c.op, "_tensor #")));
    EXPECT_THAT(error->message, HasSubstr("in group default"));
    EXPECT_THAT(error->message, HasSubstr(absl::StrCat("rank ", r, " of 4")));
    EXPECT_THAT(error->kind, AnyOf("network", "timeout")) << error->message;
    // A lost connection names the peer by rank, not just by Gloo's socket
    // address: the victim, or a survivor that gave up on it first and
    // closed its connections.
    if (error->kind == "network" && absl::StrContains(error->message, "lost its connection")) {
      ++lost_connection;
      EXPECT_THAT(error->message, ContainsRegex("lost its connection to peer rank [0-9]"));
      if (absl::StrContains(error->message, absl::StrCat("peer rank ", c.victim, ":"))) {
        ++named_victim;
      }
    }
    if (error->seen - killed >= slowest) {
      slowest = error->seen - killed;
      excerpt = error->message;
    }
  }
  if (lost_connection > 0) {
    EXPECT_GT(named_victim, 0) << "no survivor named rank " << c.victim;
  }
  reportTiming(
      absl::StrCat("gloo: rank ", c.victim, " of 4 SIGKILLed in ", c.op, ", checks ", c.checks),
      kTimeout, slowest, excerpt);
  expectNothingLeft(job);
}

INSTANTIATE_TEST_SUITE_P(Gloo, KillTest,
                         ::testing::Values(KillCase{"all_gather", "cheap", 2},
                                           KillCase{"reduce_scatter", "cheap", 2},
                                           KillCase{"all_gather", "off", 1},
                                           KillCase{"reduce_scatter", "off", 1},
                                           KillCase{"all_gather", "off", 0}),
                         [](const ::testing::TestParamInfo<KillCase>& info) {
                           return absl::StrCat(info.param.op, "_checks_", info.param.checks,
                                               "_victim", info.param.victim);
                         });

// --- A rank that makes a different call ----------------------------------

struct MismatchCase {
  std::string fault;
  std::string checks;
  // What every failing rank's message must contain ({rank} is its rank).
  std::vector<std::string> expected;
  // Without checks Gloo cannot tell a mismatch: the culprit's own call may
  // complete, and a rank that receives more bytes than it posted dies in
  // Gloo's transport thread (an uncaught gloo::EnforceNotMet, SIGABRT).
  bool may_complete_or_crash = false;
};

class MismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(MismatchTest, FailsWithinTheTimeoutNamingTheCall) {
  const MismatchCase& c = GetParam();
  constexpr int kSize = 3;
  constexpr int kCulprit = 1;
  FaultJob job;
  ASSERT_TRUE(job.ok());
  std::vector<std::string> flags = groupFlags(c.checks);
  flags.insert(flags.end(),
               {"--scenario=once", "--op=all_reduce", absl::StrCat("--culprit=", kCulprit),
                absl::StrCat("--fault=", c.fault)});
  ASSERT_TRUE(job.start(kSize, flags).ok());
  const absl::Time ready = absl::Now();
  absl::Duration slowest;
  std::string excerpt;
  int failed = 0;
  for (int r = 0; r < kSize; ++r) {
    if (r == kCulprit && c.fault == "skip") continue;
    absl::StatusOr<RankError> error = job.awaitError(r, ready + kTimeout + kMargin);
    if (!error.ok() && c.may_complete_or_crash) {
      // Completed ("done") or died: either way within the bound.
      EXPECT_LT(absl::Now() - ready, kTimeout + kMargin) << "rank " << r;
      if (error.status().code() == absl::StatusCode::kUnavailable) {
        EXPECT_THAT(std::string(error.status().message()), HasSubstr("gloo::EnforceNotMet"));
        EXPECT_EQ(job.rank(r).wait(absl::Now() + absl::Seconds(10)).value_or(-1), 128 + SIGABRT);
        std::printf("rank %d aborted in Gloo's transport thread\n", r);
      } else {
        std::printf("rank %d: %s\n", r, std::string(error.status().message()).c_str());
      }
      continue;
    }
    ASSERT_TRUE(error.ok()) << error.status();
    ++failed;
    EXPECT_LT(error->after, kTimeout + kMargin) << "rank " << r << ": " << error->message;
    for (std::string expected : c.expected) {
      const size_t at = expected.find("{rank}");
      if (at != std::string::npos) expected.replace(at, 6, absl::StrCat(r));
      EXPECT_THAT(error->message, HasSubstr(expected)) << "rank " << r;
    }
    if (error->after >= slowest) {
      slowest = error->after;
      excerpt = error->message;
    }
  }
  EXPECT_GE(failed, c.may_complete_or_crash ? 1 : kSize - 1);
  reportTiming(absl::StrCat("gloo: rank 1 of 3 ", c.fault, " in all_reduce, checks ", c.checks),
               kTimeout, slowest, excerpt);
  expectNothingLeft(job);
}

// The calls fail on every rank at once with the checks (the message names
// rank 1); without them the engine's timeout or the lost connection still
// names group, rank, op and sequence number.
INSTANTIATE_TEST_SUITE_P(
    Gloo, MismatchTest,
    ::testing::Values(
        MismatchCase{
            "skip", "cheap", {"all_reduce #1 in group default", "rank 1 did not reach it"}},
        MismatchCase{"skip", "off", {"all_reduce #1 in group default (rank {rank} of 3)"}},
        MismatchCase{"wrong_op", "cheap", {"rank 1 called reduce", "ranks 0,2 called all_reduce"}},
        MismatchCase{"wrong_op", "off", {"#1 in group default (rank {rank} of 3)"}, true},
        MismatchCase{"wrong_count", "cheap", {"element count: rank 1 has 2048"}},
        MismatchCase{"wrong_count", "off", {"#1 in group default (rank {rank} of 3)"}, true},
        MismatchCase{"wrong_dtype", "cheap", {"dtype: rank 1 has f64"}},
        MismatchCase{"wrong_dtype", "off", {"#1 in group default (rank {rank} of 3)"}, true},
        MismatchCase{"reshape", "detail", {"shapes: rank 1 has [[32, 32]]"}}),
    [](const ::testing::TestParamInfo<MismatchCase>& info) {
      return absl::StrCat(info.param.fault, "_checks_", info.param.checks);
    });

}  // namespace
}  // namespace loom::fault
