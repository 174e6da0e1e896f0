// Tests of the process-wide debug and log levels: the environment (loom's
// and PyTorch's variables), runtime settings over it, and what gets logged.
#include "comm/debug_level.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

std::optional<CollectiveChecks> level() {
  absl::StatusOr<std::optional<CollectiveChecks>> got = debugLevel();
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? *got : std::nullopt;
}

// Runs first: nothing has called setLogLevel yet, so the environment counts.
TEST(LogLevelTest, TheEnvironmentSetsItWarningByDefault) {
  unsetenv("LOOM_COMM_LOG_LEVEL");
  unsetenv("TORCH_CPP_LOG_LEVEL");
  EXPECT_EQ(logLevel(), LogLevel::kWarning);
  setenv("TORCH_CPP_LOG_LEVEL", "info", 1);
  EXPECT_EQ(logLevel(), LogLevel::kInfo);
  setenv("LOOM_COMM_LOG_LEVEL", "ERROR", 1);
  EXPECT_EQ(logLevel(), LogLevel::kError);
  setenv("LOOM_COMM_LOG_LEVEL", "off", 1);
  EXPECT_EQ(logLevel(), LogLevel::kOff);
  setenv("LOOM_COMM_LOG_LEVEL", "loud", 1);
  EXPECT_EQ(logLevel(), LogLevel::kWarning);
  unsetenv("LOOM_COMM_LOG_LEVEL");
  unsetenv("TORCH_CPP_LOG_LEVEL");
}

TEST(LogLevelTest, MessagesBelowTheLevelAreDropped) {
  setLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  logMessage(LogLevel::kInfo, "group made");
  logMessage(LogLevel::kWarning, "slow peer");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "[loom comm I] group made\n[loom comm W] slow peer\n");
  setLogLevel(LogLevel::kError);
  ::testing::internal::CaptureStderr();
  logMessage(LogLevel::kWarning, "slow peer");
  logMessage(LogLevel::kError, "gone");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "[loom comm E] gone\n");
  setLogLevel(LogLevel::kOff);
  ::testing::internal::CaptureStderr();
  logMessage(LogLevel::kError, "gone");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  setLogLevel(LogLevel::kWarning);
}

TEST(DebugLevelTest, LoomsVariableThenPyTorchsThenNone) {
  unsetenv("LOOM_COMM_CHECKS");
  unsetenv("TORCH_DISTRIBUTED_DEBUG");
  ASSERT_TRUE(setDebugLevelFromEnv().ok());
  EXPECT_EQ(level(), std::nullopt);
  setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
  EXPECT_EQ(level(), CollectiveChecks::kDetail);
  setenv("TORCH_DISTRIBUTED_DEBUG", "info", 1);
  EXPECT_EQ(level(), CollectiveChecks::kCheap);
  setenv("LOOM_COMM_CHECKS", "off", 1);
  EXPECT_EQ(level(), CollectiveChecks::kOff);
  setenv("LOOM_COMM_CHECKS", "verbose", 1);
  EXPECT_THAT(debugLevel().status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("LOOM_COMM_CHECKS is 'verbose'; set it to off, cheap or detail")));
  unsetenv("LOOM_COMM_CHECKS");
  setenv("TORCH_DISTRIBUTED_DEBUG", "ALL", 1);
  EXPECT_THAT(debugLevel().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("OFF, INFO or DETAIL")));
  unsetenv("TORCH_DISTRIBUTED_DEBUG");
}

TEST(DebugLevelTest, SetAtRuntimeOverTheEnvironmentUntilReadAgain) {
  setenv("LOOM_COMM_CHECKS", "cheap", 1);
  setDebugLevel(CollectiveChecks::kDetail);
  EXPECT_EQ(level(), CollectiveChecks::kDetail);
  setDebugLevel(CollectiveChecks::kOff);
  EXPECT_EQ(level(), CollectiveChecks::kOff);
  // A bad environment is refused and the runtime setting stays.
  setenv("LOOM_COMM_CHECKS", "loud", 1);
  EXPECT_FALSE(setDebugLevelFromEnv().ok());
  EXPECT_EQ(level(), CollectiveChecks::kOff);
  setenv("LOOM_COMM_CHECKS", "cheap", 1);
  ASSERT_TRUE(setDebugLevelFromEnv().ok());
  EXPECT_EQ(level(), CollectiveChecks::kCheap);
  unsetenv("LOOM_COMM_CHECKS");
  EXPECT_EQ(level(), std::nullopt);
  EXPECT_EQ(checksName(CollectiveChecks::kDetail), "detail");
}

}  // namespace
}  // namespace loom::comm
