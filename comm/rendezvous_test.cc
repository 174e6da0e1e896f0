// Rendezvous through each init method (env:// as torchrun sets it, tcp://,
// file://), in threads and in separate processes, and every error it must
// name: missing or malformed fields, world size mismatch, duplicate rank,
// absent ranks, and a wrong token.
#include "comm/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/testing/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

uint16_t unusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid()))
      .string();
}

using Environment = std::map<std::string, std::string>;

RendezvousOptions withEnvironment(Environment environment, absl::Duration timeout = kTimeout) {
  RendezvousOptions options;
  options.timeout = timeout;
  options.getenv = [environment = std::move(environment)](
                       const std::string& name) -> std::optional<std::string> {
    auto it = environment.find(name);
    if (it == environment.end()) return std::nullopt;
    return it->second;
  };
  return options;
}

// Runs one rendezvous per entry of `urls` (with its options), each on its
// own thread as the ranks of one job, and returns their results in order.
std::vector<absl::StatusOr<RendezvousResult>> runRanks(
    const std::vector<std::pair<std::string, RendezvousOptions>>& ranks) {
  std::vector<absl::StatusOr<RendezvousResult>> results(ranks.size(),
                                                        absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = rendezvous(ranks[i].first, ranks[i].second); });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

RendezvousOptions timeoutOptions(absl::Duration timeout) {
  RendezvousOptions options;
  options.timeout = timeout;
  return options;
}

std::string tcpUrl(uint16_t port, int rank, int world_size) {
  return absl::StrCat("tcp://127.0.0.1:", port, "?rank=", rank, "&world_size=", world_size);
}

TEST(RendezvousTest, EnvInitMethodAcrossProcessesAsTorchrunSetsIt) {
  constexpr int kWorld = 4;
  const uint16_t port = unusedPort();
  std::vector<testing::Subprocess> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    absl::StatusOr<testing::Subprocess> process = testing::Subprocess::start(
        testing::runfilePath("comm/store_test_helper"), {"--mode=rendezvous", "--url=env://"},
        {"MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", port), absl::StrCat("RANK=", rank),
         absl::StrCat("WORLD_SIZE=", kWorld), absl::StrCat("LOCAL_RANK=", rank)});
    ASSERT_TRUE(process.ok()) << process.status();
    ranks.push_back(std::move(*process));
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    absl::StatusOr<std::string> line = ranks[rank].readLine(absl::Seconds(60));
    ASSERT_TRUE(line.ok()) << line.status();
    EXPECT_EQ(*line, absl::StrCat("rank ", rank, " world_size ", kWorld, " local_rank ", rank));
  }
  for (testing::Subprocess& process : ranks) {
    absl::StatusOr<int> code = process.wait(absl::Seconds(30));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
}

TEST(RendezvousTest, FileInitMethodAcrossProcesses) {
  constexpr int kWorld = 3;
  const std::string path = tempPath("rendezvous_file");
  std::vector<testing::Subprocess> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    absl::StatusOr<testing::Subprocess> process = testing::Subprocess::start(
        testing::runfilePath("comm/store_test_helper"),
        {"--mode=rendezvous",
         absl::StrCat("--url=file://", path, "?rank=", rank, "&world_size=", kWorld)});
    ASSERT_TRUE(process.ok()) << process.status();
    ranks.push_back(std::move(*process));
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    absl::StatusOr<std::string> line = ranks[rank].readLine(absl::Seconds(60));
    ASSERT_TRUE(line.ok()) << line.status();
    EXPECT_EQ(*line, absl::StrCat("rank ", rank, " world_size ", kWorld, " local_rank -1"));
  }
  for (testing::Subprocess& process : ranks) {
    absl::StatusOr<int> code = process.wait(absl::Seconds(30));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RendezvousTest, TcpInitMethodGivesEveryRankOneSharedStore) {
  constexpr int kWorld = 4;
  const uint16_t port = unusedPort();
  std::vector<std::pair<std::string, RendezvousOptions>> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back(tcpUrl(port, rank, kWorld), timeoutOptions(kTimeout));
  }
  std::vector<absl::StatusOr<RendezvousResult>> results = runRanks(ranks);
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    EXPECT_EQ(results[rank]->rank, rank);
    EXPECT_EQ(results[rank]->world_size, kWorld);
    EXPECT_FALSE(results[rank]->local_rank.has_value());
  }
  ASSERT_TRUE(results[3]->store->setString("from3", "hello").ok());
  absl::StatusOr<std::string> seen = results[0]->store->getString("from3");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(*seen, "hello");
}

TEST(RendezvousTest, RankAndWorldSizeMayComeFromTheOptions) {
  const std::string path = tempPath("rendezvous_options");
  std::vector<std::pair<std::string, RendezvousOptions>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    RendezvousOptions options = timeoutOptions(kTimeout);
    options.rank = rank;
    options.world_size = 2;
    ranks.emplace_back(absl::StrCat("file://", path), options);
  }
  for (const absl::StatusOr<RendezvousResult>& result : runRanks(ranks)) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->world_size, 2);
  }
}

TEST(RendezvousTest, EnvInitMethodNamesEachMissingOrMalformedVariable) {
  const Environment complete = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}};
  const std::vector<std::pair<Environment, std::string>> cases = {
      {{{"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}, "MASTER_ADDR"},
      {{{"MASTER_ADDR", "127.0.0.1"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}, "MASTER_PORT"},
      {{{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}}, "WORLD_SIZE"},
      {{{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "1"}}, "RANK"},
  };
  for (const auto& [environment, missing] : cases) {
    absl::StatusOr<RendezvousResult> result = rendezvous("env://", withEnvironment(environment));
    ASSERT_FALSE(result.ok()) << missing;
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(missing));
  }
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"MASTER_PORT", "abc"}, {"MASTER_PORT", "70000"}, {"MASTER_PORT", "0"},
      {"RANK", "one"},        {"WORLD_SIZE", "2.5"},    {"LOCAL_RANK", "x"},
  };
  for (const auto& [name, value] : malformed) {
    Environment environment = complete;
    environment[name] = value;
    absl::StatusOr<RendezvousResult> result = rendezvous("env://", withEnvironment(environment));
    ASSERT_FALSE(result.ok()) << name << "=" << value;
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(value));
  }
  // The hint says what the field is, not a number the check would refuse.
  Environment environment = complete;
  environment["WORLD_SIZE"] = "two";
  absl::Status status = rendezvous("env://", withEnvironment(environment)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("WORLD_SIZE=two in the environment is not an integer"),
                    HasSubstr("the number of processes in the job"), HasSubstr("such as 2")));
  environment = complete;
  environment["RANK"] = "first";
  status = rendezvous("env://", withEnvironment(environment)).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("from 0 to the world size - 1"));
}

TEST(RendezvousTest, MalformedUrlsAndValuesAreInvalidArguments) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"127.0.0.1:29500", "no scheme"},
      {"udp://127.0.0.1:29500?rank=0&world_size=1", "udp://"},
      {"tcp://127.0.0.1?rank=0&world_size=1", "no port"},
      {"tcp://:29500?rank=0&world_size=1", "no host"},
      {"tcp://127.0.0.1:http?rank=0&world_size=1", "http"},
      {"tcp://127.0.0.1:29500?rank=0", "world size"},
      {"tcp://127.0.0.1:29500?world_size=2", "rank"},
      {"tcp://127.0.0.1:29500?rank=0&world_size=2&group=x", "group"},
      {"tcp://127.0.0.1:29500?rank=2&world_size=2", "rank 2 is outside"},
      {"tcp://127.0.0.1:29500?rank=0&world_size=0", "world_size is 0"},
      {"file://?rank=0&world_size=1", "no path"},
      {"env://somehost:1234", "MASTER_ADDR"},
  };
  for (const auto& [url, expected] : cases) {
    absl::StatusOr<RendezvousResult> result = rendezvous(url, timeoutOptions(absl::Seconds(1)));
    ASSERT_FALSE(result.ok()) << url;
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kInvalidArgument) << url;
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(expected)) << url;
  }
  RendezvousOptions options = timeoutOptions(absl::Seconds(1));
  options.rank = 1;
  absl::StatusOr<RendezvousResult> conflict =
      rendezvous("tcp://127.0.0.1:29500?rank=0&world_size=2", options);
  ASSERT_FALSE(conflict.ok());
  EXPECT_THAT(std::string(conflict.status().message()),
              HasSubstr("rank is 0 in the url but 1 in the options"));
}

TEST(RendezvousTest, AWorldSizeMismatchFailsEveryRank) {
  const uint16_t port = unusedPort();
  const std::vector<absl::StatusOr<RendezvousResult>> results = runRanks({
      {tcpUrl(port, 0, 3), timeoutOptions(kTimeout)},
      {tcpUrl(port, 1, 3), timeoutOptions(kTimeout)},
      {tcpUrl(port, 2, 4), timeoutOptions(kTimeout)},
  });
  for (const absl::StatusOr<RendezvousResult>& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kStore) << result.status();
    EXPECT_THAT(std::string(result.status().message()), HasSubstr("world size mismatch"));
  }
}

TEST(RendezvousTest, ADuplicateRankIsNamed) {
  const std::string path = tempPath("rendezvous_duplicate");
  const std::string url = absl::StrCat("file://", path, "?rank=1&world_size=3");
  const std::vector<absl::StatusOr<RendezvousResult>> results = runRanks({
      {absl::StrCat("file://", path, "?rank=0&world_size=3"), timeoutOptions(kTimeout)},
      {url, timeoutOptions(kTimeout)},
      {url, timeoutOptions(kTimeout)},
  });
  int named = 0;
  for (const absl::StatusOr<RendezvousResult>& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kStore) << result.status();
    if (absl::StrContains(result.status().message(), "duplicate rank at file://")) {
      EXPECT_THAT(std::string(result.status().message()), HasSubstr("rank 1 is claimed by pid"));
      ++named;
    }
  }
  EXPECT_EQ(named, 3);
}

TEST(RendezvousTest, ATimeoutNamesTheRanksThatNeverArrived) {
  const uint16_t port = unusedPort();
  const absl::Duration timeout = absl::Milliseconds(500);
  const std::vector<absl::StatusOr<RendezvousResult>> results = runRanks({
      {tcpUrl(port, 0, 4), timeoutOptions(timeout)},
      {tcpUrl(port, 2, 4), timeoutOptions(timeout)},
  });
  for (const absl::StatusOr<RendezvousResult>& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(errorKind(result.status()), ErrorKind::kTimeout) << result.status();
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr("rank(s) [1, 3] of world_size 4 never arrived"));
    EXPECT_THAT(std::string(result.status().message()), HasSubstr("500ms"));
  }
}

TEST(RendezvousTest, AnAbsentRankZeroIsATimeoutNamingTheServer) {
  const uint16_t port = unusedPort();
  absl::StatusOr<RendezvousResult> result =
      rendezvous(tcpUrl(port, 1, 2), timeoutOptions(absl::Milliseconds(300)));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(errorKind(result.status()), ErrorKind::kTimeout);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("rank 0"));
}

TEST(RendezvousTest, RanksWithoutTheJobsTokenAreKeptOut) {
  const uint16_t port = unusedPort();
  RendezvousOptions server = timeoutOptions(absl::Seconds(1));
  server.token = "job-token";
  RendezvousOptions stranger = timeoutOptions(absl::Seconds(1));
  stranger.token = "other-token";
  const std::vector<absl::StatusOr<RendezvousResult>> results = runRanks({
      {tcpUrl(port, 0, 2), server},
      {tcpUrl(port, 1, 2), stranger},
  });
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(results[1].status().message()), HasSubstr("token"));
  // Rank 0 never sees rank 1 arrive.
  ASSERT_FALSE(results[0].ok());
  EXPECT_THAT(std::string(results[0].status().message()), HasSubstr("[1]"));
}

TEST(RendezvousTest, TheTokenMayComeFromTheEnvironment) {
  const uint16_t port = unusedPort();
  std::vector<std::pair<std::string, RendezvousOptions>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back("env://", withEnvironment({{"MASTER_ADDR", "127.0.0.1"},
                                                  {"MASTER_PORT", absl::StrCat(port)},
                                                  {"RANK", absl::StrCat(rank)},
                                                  {"WORLD_SIZE", "2"},
                                                  {"LOCAL_RANK", absl::StrCat(rank)},
                                                  {"LOOM_STORE_TOKEN", "from-env"}}));
  }
  for (const absl::StatusOr<RendezvousResult>& result : runRanks(ranks)) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->local_rank.has_value());
    EXPECT_EQ(*result->local_rank, result->rank);
  }
}

}  // namespace
}  // namespace loom::comm
