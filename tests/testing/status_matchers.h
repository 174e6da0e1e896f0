// gMock matchers for absl::Status, so tests across the project can check an
// error's code and wording in one assertion and see the whole status when it
// fails.

#ifndef LOOM_TESTS_TESTING_STATUS_MATCHERS_H_
#define LOOM_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"

namespace loom::testutil {

// Matches an absl::Status whose code is `code` and whose message matches
// `message_matcher` (typically HasSubstr or AllOf of several).
MATCHER_P2(StatusIs, code, message_matcher, "") {
  *result_listener << "status is " << arg;
  return arg.code() == code && ::testing::Matches(message_matcher)(std::string(arg.message()));
}

}  // namespace loom::testutil

#endif  // LOOM_TESTS_TESTING_STATUS_MATCHERS_H_
