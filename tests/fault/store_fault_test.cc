// Fault injection into the job's TCPStore: the server process SIGKILLed
// while ranks use it, store clients that stall mid-frame, clients without
// the job's token, and frames that claim huge lengths. The server runs as
// its own process (fault_rank --scenario=serve) so that it can be killed
// and its log and memory watched.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_job.h"
#include "tests/fault/raw_store_client.h"

namespace loom::fault {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(3);
constexpr absl::Duration kMargin = absl::Seconds(5);

std::vector<std::string> loopFlags() {
  return {absl::StrCat("--timeout_ms=", absl::ToInt64Milliseconds(kTimeout)), "--hold",
          "--scenario=store_loop", "--op=all_reduce"};
}

// The resident memory of process `pid` in KiB (0 if unreadable).
int64_t residentKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits += c;
      }
      return absl::SimpleAtoi(digits, &kib) ? kib : 0;
    }
  }
  return 0;
}

TEST(StoreFaultTest, KillingTheStoreServerFailsEveryRankNamingTheServer) {
  FaultJob job(FaultJob::StoreHost::kChild);
  ASSERT_TRUE(job.ok());
  constexpr int kSize = 3;
  ASSERT_TRUE(job.start(kSize, loopFlags()).ok());
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(job.rank(r).awaitPrefix("looping", absl::Now() + absl::Seconds(30)).ok());
  }
  const absl::Time killed = absl::Now();
  job.storeProcess()->signal(SIGKILL);
  EXPECT_EQ(job.storeProcess()->wait(absl::Now() + absl::Seconds(10)).value_or(-1), 128 + SIGKILL);
  absl::Duration slowest;
  std::string excerpt;
  for (int r = 0; r < kSize; ++r) {
    absl::StatusOr<RankError> error = job.awaitError(r, killed + kTimeout + kMargin);
    ASSERT_TRUE(error.ok()) << error.status();
    EXPECT_LT(error->seen - killed, kTimeout + kMargin) << "rank " << r;
    // The monitored barrier is the first call to touch the store: it names
    // itself, this rank, and the server that went away.
    EXPECT_EQ(error->kind, "network") << error->message;
    EXPECT_THAT(error->message, HasSubstr(absl::StrCat("127.0.0.1:", job.port())));
    EXPECT_THAT(error->message, HasSubstr("monitored_barrier #"));
    EXPECT_THAT(error->message, HasSubstr(absl::StrCat("rank ", r, " of 3")));
    if (error->seen - killed >= slowest) {
      slowest = error->seen - killed;
      excerpt = error->message;
    }
  }
  reportTiming("store server SIGKILLed while 3 gloo ranks loop (all_reduce + monitored barrier)",
               kTimeout, slowest, excerpt);
  job.finish(absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(job.nothingLeft());
}

// A peer that stalls mid-frame costs only its own connection: the ranks
// meet and run while it holds, and one that never finishes its handshake is
// dropped at the handshake deadline (and logged).
TEST(StoreFaultTest, StalledClientsStallNobodyAndUnauthenticatedOnesAreDropped) {
  constexpr absl::Duration kHandshake = absl::Seconds(2);
  FaultJob job(FaultJob::StoreHost::kChild, "",
               {absl::StrCat("--handshake_timeout_ms=", absl::ToInt64Milliseconds(kHandshake))});
  ASSERT_TRUE(job.ok());
  // Two bytes of a frame header, then nothing.
  RawStoreClient half_header(job.port());
  ASSERT_TRUE(half_header.connected());
  ASSERT_TRUE(half_header.send(std::string("\x10\x00", 2)));
  const absl::Time stalled = absl::Now();
  // A complete handshake, then a request frame cut short.
  RawStoreClient half_request(job.port());
  ASSERT_TRUE(half_request.send(helloFrame("")));
  ASSERT_EQ(half_request.readFrame(absl::Seconds(5)).substr(0, 1), std::string(1, kReplyOk));
  ASSERT_TRUE(half_request.send(u32le(100) + std::string("\x03", 1) + u32le(50) + "stall"));

  constexpr int kSize = 3;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(job.start(kSize, loopFlags()).ok());
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(job.rank(r).awaitPrefix("looping", absl::Now() + absl::Seconds(30)).ok());
  }
  // Rendezvous, group creation and a first call with monitored barrier, all
  // through the store, while both peers hold their connections.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  EXPECT_TRUE(half_header.closedWithin(kHandshake + kMargin));
  const absl::Duration dropped_after = absl::Now() - stalled;
  EXPECT_GE(dropped_after, kHandshake - absl::Milliseconds(100));
  // Authenticated connections have no idle deadline (a rank may sit in a
  // long blocking get); the stalled request holds only its own buffer.
  EXPECT_FALSE(half_request.closedWithin(absl::Milliseconds(500)));
  job.finish(absl::Now() + absl::Seconds(30));
  const std::string log = job.storeProcess()->transcript();
  EXPECT_THAT(log, HasSubstr("dropped client 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("no handshake within 2s"));
  reportTiming("store client stalls mid-handshake (2 of 4 header bytes); server drops it",
               kHandshake, dropped_after,
               "loom store server 127.0.0.1:PORT: dropped client ...: no handshake within 2s");
  EXPECT_TRUE(job.nothingLeft());
}

TEST(StoreFaultTest, ClientsWithoutTheTokenAreRefusedAndLogged) {
  FaultJob job(FaultJob::StoreHost::kChild, "job-secret");
  ASSERT_TRUE(job.ok());
  for (const std::string& token : {std::string("wrong"), std::string()}) {
    comm::TCPStoreOptions options;
    options.port = job.port();
    options.token = token;
    options.timeout = absl::Seconds(30);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<comm::TCPStore>> intruder = comm::TCPStore::create(options);
    ASSERT_FALSE(intruder.ok());
    // Refused at once, not retried until the timeout.
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_EQ(intruder.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(intruder.status().message()), HasSubstr("token"));
    reportTiming(absl::StrCat("store client with ", token.empty() ? "no" : "a wrong", " token"),
                 options.timeout, absl::Now() - start, std::string(intruder.status().message()));
  }
  // The job's own ranks get in.
  constexpr int kSize = 2;
  std::vector<std::string> flags = loopFlags();
  flags.push_back("--token=job-secret");
  ASSERT_TRUE(job.start(kSize, flags).ok());
  for (int r = 0; r < kSize; ++r) {
    ASSERT_TRUE(job.rank(r).awaitPrefix("looping", absl::Now() + absl::Seconds(30)).ok());
  }
  job.finish(absl::Now() + absl::Seconds(30));
  const std::string log = job.storeProcess()->transcript();
  EXPECT_THAT(log, HasSubstr("refused client 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("the client's token does not match the server's"));
  EXPECT_TRUE(job.nothingLeft());
}

// A frame header that claims more than the limit is answered and the
// connection closed at once: the server neither waits for nor allocates the
// claimed size, before or after the handshake. One that claims just under
// the limit but sends nothing costs nothing either.
TEST(StoreFaultTest, HugeClaimedLengthsAreRefusedWithoutAllocating) {
  FaultJob job(FaultJob::StoreHost::kChild);
  ASSERT_TRUE(job.ok());
  const pid_t server = job.storeProcess()->pid();
  const int64_t before = residentKib(server);
  ASSERT_GT(before, 0);
  {
    RawStoreClient stranger(job.port());
    ASSERT_TRUE(stranger.send(u32le(0xffffffffu)));
    const std::string reply = stranger.readFrame(absl::Seconds(5));
    ASSERT_FALSE(reply.empty());
    EXPECT_EQ(static_cast<uint8_t>(reply[0]), kReplyBadRequest);
    EXPECT_THAT(reply, HasSubstr("for a handshake"));
    EXPECT_TRUE(stranger.closedWithin(absl::Seconds(1)));
  }
  const absl::Time start = absl::Now();
  RawStoreClient member(job.port());
  ASSERT_TRUE(member.send(helloFrame("")));
  ASSERT_EQ(member.readFrame(absl::Seconds(5)).substr(0, 1), std::string(1, kReplyOk));
  ASSERT_TRUE(member.send(u32le(0xfffffff0u)));
  const std::string reply = member.readFrame(absl::Seconds(5));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(static_cast<uint8_t>(reply[0]), kReplyBadRequest);
  EXPECT_THAT(reply, HasSubstr("exceeds the limit of 67108864 bytes"));
  EXPECT_TRUE(member.closedWithin(absl::Seconds(1)));
  reportTiming("store frame claiming 4 GiB after the handshake", absl::ZeroDuration(),
               absl::Now() - start, reply.substr(5));
  // Claims of just under the 64 MiB limit from 16 clients, with no body.
  std::vector<std::unique_ptr<RawStoreClient>> claimers;
  for (int i = 0; i < 16; ++i) {
    claimers.push_back(std::make_unique<RawStoreClient>(job.port()));
    ASSERT_TRUE(claimers.back()->send(helloFrame("")));
    ASSERT_FALSE(claimers.back()->readFrame(absl::Seconds(5)).empty());
    ASSERT_TRUE(claimers.back()->send(u32le((64u << 20) - 1) + "\x02"));
  }
  absl::SleepFor(absl::Milliseconds(300));
  const int64_t after = residentKib(server);
  EXPECT_LT(after - before, 16 * 1024)
      << "server RSS grew from " << before << " to " << after << " KiB";
  std::printf("server RSS: %lld KiB before, %lld KiB with 16 pending 64 MiB claims\n",
              static_cast<long long>(before), static_cast<long long>(after));
  claimers.clear();
  job.finish(absl::Now() + absl::Seconds(30));
  EXPECT_THAT(job.storeProcess()->transcript(), HasSubstr("exceeds the limit"));
}

}  // namespace
}  // namespace loom::fault
