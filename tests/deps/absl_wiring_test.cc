// Wiring test for Abseil: the pieces the project builds on (Status/StatusOr,
// string formatting, Mutex, flat_hash_map, flags) link and behave.
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, wiring_ranks, 1, "a flag the test parses");

namespace {

absl::StatusOr<int> halve(int value) {
  if (value % 2 != 0) return absl::InvalidArgumentError(absl::StrFormat("%d is odd", value));
  return value / 2;
}

TEST(AbslWiringTest, StatusOrCarriesValueOrError) {
  EXPECT_EQ(*halve(8), 4);
  absl::StatusOr<int> odd = halve(3);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.status().message(), "3 is odd");
}

TEST(AbslWiringTest, MutexAndHashMapAcrossThreads) {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, int> counts;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const absl::string_view word : absl::StrSplit("a,b,a", ',')) {
        absl::MutexLock lock(&mu);
        ++counts[std::string(word)];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counts["a"], 8);
  EXPECT_EQ(counts["b"], 4);
  // A condition that never holds must give up at its deadline.
  const bool never = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(mu.AwaitWithTimeout(absl::Condition(&never), absl::Milliseconds(1)));
}

TEST(AbslWiringTest, FlagsParse) {
  std::vector<char*> argv = {const_cast<char*>("test"), const_cast<char*>("--wiring_ranks=4")};
  absl::ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(absl::GetFlag(FLAGS_wiring_ranks), 4);
}

}  // namespace
