// Implements the typed error helpers of errors.h: the kind travels as a
// status payload next to the conventional absl code.
#include "comm/errors.h"

#include <optional>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "absl/strings/string_view.h"

namespace loom::comm {
namespace {

absl::string_view toAbsl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

std::optional<ErrorKind> kindFromName(absl::string_view name) {
  for (ErrorKind kind : {ErrorKind::kTimeout, ErrorKind::kNetwork, ErrorKind::kStore,
                         ErrorKind::kBackend, ErrorKind::kInvalidArgument}) {
    if (errorKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace

absl::string_view errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOk:
      return "ok";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kNetwork:
      return "network";
    case ErrorKind::kStore:
      return "store";
    case ErrorKind::kBackend:
      return "backend";
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

absl::Status makeError(ErrorKind kind, absl::StatusCode code, std::string_view message) {
  absl::Status status(code, toAbsl(message));
  status.SetPayload(kErrorKindPayloadUrl, absl::Cord(errorKindName(kind)));
  return status;
}

absl::Status timeoutError(std::string_view message) {
  return makeError(ErrorKind::kTimeout, absl::StatusCode::kDeadlineExceeded, message);
}

absl::Status networkError(std::string_view message) {
  return makeError(ErrorKind::kNetwork, absl::StatusCode::kUnavailable, message);
}

absl::Status storeError(std::string_view message, absl::StatusCode code) {
  return makeError(ErrorKind::kStore, code, message);
}

absl::Status backendError(std::string_view message) {
  return makeError(ErrorKind::kBackend, absl::StatusCode::kInternal, message);
}

absl::Status invalidArgumentError(std::string_view message) {
  return makeError(ErrorKind::kInvalidArgument, absl::StatusCode::kInvalidArgument, message);
}

ErrorKind errorKind(const absl::Status& status) {
  if (status.ok()) return ErrorKind::kOk;
  if (absl::optional<absl::Cord> payload = status.GetPayload(kErrorKindPayloadUrl)) {
    if (std::optional<ErrorKind> kind = kindFromName(std::string(*payload))) {
      return *kind;
    }
  }
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return ErrorKind::kTimeout;
    case absl::StatusCode::kUnavailable:
      return ErrorKind::kNetwork;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return ErrorKind::kInvalidArgument;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kDataLoss:
      return ErrorKind::kStore;
    default:
      return ErrorKind::kUnknown;
  }
}

}  // namespace loom::comm
