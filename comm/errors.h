// Typed errors of the communication layer: c10d's error kinds (timeout,
// network, store, backend, invalid argument) carried by absl::Status.
#ifndef LOOM_COMM_ERRORS_H_
#define LOOM_COMM_ERRORS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace loom::comm {

// The kind of a failure, as a caller decides what to do about it: retry
// later (timeout), check the peer or the network (network), fix the stored
// state or the job's configuration (store), fix the call (invalid argument).
enum class ErrorKind {
  kOk,
  kTimeout,
  kNetwork,
  kStore,
  kBackend,
  kInvalidArgument,
  kUnknown,
};

// A stable lowercase name ("timeout", "network", ...) for messages and logs;
// an absl::string_view so that it drops straight into absl::StrCat.
absl::string_view errorKindName(ErrorKind kind);

// The payload type URL under which a status records its ErrorKind, so the
// kind survives even where two kinds share one absl code.
inline constexpr char kErrorKindPayloadUrl[] = "type.loom.dev/comm.ErrorKind";

// Builds a status of `kind` with `code` and `message`; the helpers below pick
// the conventional code for each kind.
absl::Status makeError(ErrorKind kind, absl::StatusCode code, std::string_view message);

// kDeadlineExceeded: a blocking call ran out of time.
absl::Status timeoutError(std::string_view message);
// kUnavailable: a peer could not be reached or went away.
absl::Status networkError(std::string_view message);
// kFailedPrecondition by default: the stored state or the job's
// configuration does not allow the operation (kPermissionDenied for a
// rejected token, kInternal for a corrupt store).
absl::Status storeError(std::string_view message,
                        absl::StatusCode code = absl::StatusCode::kFailedPrecondition);
// kInternal: a communication backend failed.
absl::Status backendError(std::string_view message);
// kInvalidArgument: the caller passed something unusable.
absl::Status invalidArgumentError(std::string_view message);

// The kind of `status`: its payload if it has one, otherwise derived from its
// code (so statuses from other libraries classify sensibly too).
ErrorKind errorKind(const absl::Status& status);

}  // namespace loom::comm

#endif  // LOOM_COMM_ERRORS_H_
