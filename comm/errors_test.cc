// Tests that every error kind maps to its absl code, survives as a payload,
// and that foreign statuses are classified by their code.
#include "comm/errors.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

TEST(ErrorsTest, HelpersPickTheConventionalCodeAndKeepTheKind) {
  EXPECT_EQ(timeoutError("t").code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(errorKind(timeoutError("t")), ErrorKind::kTimeout);
  EXPECT_EQ(networkError("n").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(errorKind(networkError("n")), ErrorKind::kNetwork);
  EXPECT_EQ(storeError("s").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(errorKind(storeError("s")), ErrorKind::kStore);
  EXPECT_EQ(backendError("b").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(errorKind(backendError("b")), ErrorKind::kBackend);
  EXPECT_EQ(invalidArgumentError("i").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errorKind(invalidArgumentError("i")), ErrorKind::kInvalidArgument);
}

TEST(ErrorsTest, ThePayloadDistinguishesKindsThatShareACode) {
  const absl::Status corrupt = storeError("corrupt", absl::StatusCode::kInternal);
  EXPECT_EQ(corrupt.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(errorKind(corrupt), ErrorKind::kStore);
  EXPECT_EQ(errorKind(backendError("x")), ErrorKind::kBackend);
  EXPECT_EQ(corrupt.message(), "corrupt");
}

TEST(ErrorsTest, ForeignStatusesAreClassifiedByCode) {
  EXPECT_EQ(errorKind(absl::OkStatus()), ErrorKind::kOk);
  EXPECT_EQ(errorKind(absl::DeadlineExceededError("x")), ErrorKind::kTimeout);
  EXPECT_EQ(errorKind(absl::UnavailableError("x")), ErrorKind::kNetwork);
  EXPECT_EQ(errorKind(absl::InvalidArgumentError("x")), ErrorKind::kInvalidArgument);
  EXPECT_EQ(errorKind(absl::PermissionDeniedError("x")), ErrorKind::kStore);
  EXPECT_EQ(errorKind(absl::UnknownError("x")), ErrorKind::kUnknown);
}

TEST(ErrorsTest, KindNamesAreStable) {
  EXPECT_EQ(errorKindName(ErrorKind::kTimeout), "timeout");
  EXPECT_EQ(errorKindName(ErrorKind::kNetwork), "network");
  EXPECT_EQ(errorKindName(ErrorKind::kStore), "store");
  EXPECT_EQ(errorKindName(ErrorKind::kInvalidArgument), "invalid argument");
}

}  // namespace
}  // namespace loom::comm
