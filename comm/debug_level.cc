// Process-wide debug and log levels: an explicit setting wins, then the
// environment, read on every query so that tests and launchers can change
// it without a restart.
#include "comm/debug_level.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

struct Levels {
  absl::Mutex mu;
  std::optional<CollectiveChecks> checks ABSL_GUARDED_BY(mu);
  std::optional<LogLevel> log ABSL_GUARDED_BY(mu);
};

Levels& levels() {
  static Levels* const kLevels = new Levels();
  return *kLevels;
}

std::string upper(const char* text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || *value == '\0' ? nullptr : value;
}

// The environment's debug level, or none when neither variable is set.
absl::StatusOr<std::optional<CollectiveChecks>> checksFromEnv() {
  if (const char* value = env("LOOM_COMM_CHECKS")) {
    for (CollectiveChecks checks :
         {CollectiveChecks::kOff, CollectiveChecks::kCheap, CollectiveChecks::kDetail}) {
      if (checksName(checks) == value) return checks;
    }
    return invalidArgumentError(absl::StrCat("LOOM_COMM_CHECKS is '", value,
                                             "'; set it to off, cheap or detail, or unset it"));
  }
  if (const char* value = env("TORCH_DISTRIBUTED_DEBUG")) {
    const std::string name = upper(value);
    if (name == "OFF") return CollectiveChecks::kOff;
    if (name == "INFO") return CollectiveChecks::kCheap;
    if (name == "DETAIL") return CollectiveChecks::kDetail;
    return invalidArgumentError(absl::StrCat("TORCH_DISTRIBUTED_DEBUG is '", value,
                                             "'; set it to OFF, INFO or DETAIL, or unset it"));
  }
  return std::optional<CollectiveChecks>();
}

LogLevel logLevelFromEnv() {
  const char* value = env("LOOM_COMM_LOG_LEVEL");
  if (value == nullptr) value = env("TORCH_CPP_LOG_LEVEL");
  if (value == nullptr) return LogLevel::kWarning;
  const std::string name = upper(value);
  if (name == "INFO") return LogLevel::kInfo;
  if (name == "ERROR") return LogLevel::kError;
  if (name == "OFF" || name == "FATAL") return LogLevel::kOff;
  return LogLevel::kWarning;
}

char letter(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
    case LogLevel::kOff:
      break;
  }
  return '?';
}

}  // namespace

std::string_view checksName(CollectiveChecks checks) {
  switch (checks) {
    case CollectiveChecks::kOff:
      return "off";
    case CollectiveChecks::kCheap:
      return "cheap";
    case CollectiveChecks::kDetail:
      return "detail";
  }
  return "?";
}

void setDebugLevel(CollectiveChecks level) {
  Levels& l = levels();
  absl::MutexLock lock(&l.mu);
  l.checks = level;
}

absl::Status setDebugLevelFromEnv() {
  absl::StatusOr<std::optional<CollectiveChecks>> from_env = checksFromEnv();
  if (!from_env.ok()) return from_env.status();
  Levels& l = levels();
  absl::MutexLock lock(&l.mu);
  l.checks.reset();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CollectiveChecks>> debugLevel() {
  {
    Levels& l = levels();
    absl::MutexLock lock(&l.mu);
    if (l.checks.has_value()) return l.checks;
  }
  return checksFromEnv();
}

void setLogLevel(LogLevel level) {
  Levels& l = levels();
  absl::MutexLock lock(&l.mu);
  l.log = level;
}

LogLevel logLevel() {
  {
    Levels& l = levels();
    absl::MutexLock lock(&l.mu);
    if (l.log.has_value()) return *l.log;
  }
  return logLevelFromEnv();
}

void logMessage(LogLevel level, std::string_view message) {
  if (level == LogLevel::kOff || level < logLevel()) return;
  std::fprintf(stderr, "[loom comm %c] %.*s\n", letter(level), static_cast<int>(message.size()),
               message.data());
}

}  // namespace loom::comm
