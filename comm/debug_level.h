// The process-wide debug level and log level of the communication layer,
// as torch.distributed's set_debug_level / get_debug_level /
// set_debug_level_from_env (TORCH_DISTRIBUTED_DEBUG) and c10d's log level
// (TORCH_CPP_LOG_LEVEL). Both can be set from the environment and changed
// while the program runs.
#ifndef LOOM_COMM_DEBUG_LEVEL_H_
#define LOOM_COMM_DEBUG_LEVEL_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace loom::comm {

// How much each collective is checked across ranks before it runs (the
// debug level).
enum class CollectiveChecks : uint8_t {
  // None: a mismatch shows up as a timeout or wrong data (PyTorch's OFF).
  kOff,
  // Op, sequence number, dtype, element count and root compared across the
  // group on every call (cheap enough to leave on; comm-bench measures it).
  // PyTorch's INFO.
  kCheap,
  // kCheap plus every tensor's shape, as TORCH_DISTRIBUTED_DEBUG=DETAIL.
  kDetail,
};

// "off", "cheap", "detail".
std::string_view checksName(CollectiveChecks checks);

// Sets the checks of every group created from now on, over its options
// and the environment (c10d's set_debug_level). Groups that exist keep
// theirs.
void setDebugLevel(CollectiveChecks level);
// Reads the environment again, dropping what setDebugLevel set (c10d's
// set_debug_level_from_env); an error, changing nothing, for a bad value.
absl::Status setDebugLevelFromEnv();
// The level new groups get: setDebugLevel's, else LOOM_COMM_CHECKS
// (off|cheap|detail), else TORCH_DISTRIBUTED_DEBUG (OFF|INFO|DETAIL), else
// none (each group's options decide). An error for a value neither knows.
absl::StatusOr<std::optional<CollectiveChecks>> debugLevel();

enum class LogLevel : uint8_t { kInfo, kWarning, kError, kOff };

// What is logged from now on (messages at or above it).
void setLogLevel(LogLevel level);
// setLogLevel's, else LOOM_COMM_LOG_LEVEL, else TORCH_CPP_LOG_LEVEL (INFO,
// WARNING, ERROR, OFF, any case; FATAL counts as OFF), else WARNING, as
// c10d's default. An unknown value counts as WARNING.
LogLevel logLevel();
// Writes "[loom comm W] <message>" to stderr if `level` is logged.
void logMessage(LogLevel level, std::string_view message);

}  // namespace loom::comm

#endif  // LOOM_COMM_DEBUG_LEVEL_H_
