// Shared pieces of every Store: byte/string conversion, the wording of store
// errors, and the decimal counters behind `add`.
#include "comm/store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

// Messages stay readable even when a key is a large binary blob.
constexpr size_t kMaxDescribedKeyBytes = 96;
constexpr size_t kMaxDescribedKeys = 8;

}  // namespace

Bytes toBytes(std::string_view text) { return Bytes(text.begin(), text.end()); }

std::string toString(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

absl::StatusOr<std::string> Store::getString(const std::string& key) {
  absl::StatusOr<Bytes> value = get(key);
  if (!value.ok()) return value.status();
  return toString(*value);
}

std::string describeKey(std::string_view key) {
  const size_t shown = std::min(key.size(), kMaxDescribedKeyBytes);
  std::string text = absl::StrCat("'", absl::CHexEscape(absl::string_view(key.data(), shown)), "'");
  if (shown < key.size()) {
    absl::StrAppend(&text, "... (", key.size(), " bytes)");
  }
  return text;
}

std::string describeKeys(const std::vector<std::string>& keys) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < keys.size() && i < kMaxDescribedKeys; ++i) {
    shown.push_back(describeKey(keys[i]));
  }
  std::string text = absl::StrCat("[", absl::StrJoin(shown, ", "));
  if (keys.size() > kMaxDescribedKeys) {
    absl::StrAppend(&text, ", and ", keys.size() - kMaxDescribedKeys, " more");
  }
  return absl::StrCat(text, "]");
}

absl::Status keysTimeoutError(std::string_view operation, const std::vector<std::string>& missing,
                              absl::Duration timeout) {
  return timeoutError(
      absl::StrFormat("%s timed out after %s waiting for %s %s; the rank that sets %s has not "
                      "done so (is it running, and using the same store?), or raise the "
                      "timeout",
                      absl::string_view(operation.data(), operation.size()),
                      absl::FormatDuration(timeout), missing.size() == 1 ? "key" : "keys",
                      missing.size() == 1 ? describeKey(missing[0]) : describeKeys(missing),
                      missing.size() == 1 ? "it" : "them"));
}

absl::Status checkMultiSetArgs(const std::vector<std::string>& keys,
                               const std::vector<Bytes>& values) {
  if (keys.size() == values.size()) return absl::OkStatus();
  return invalidArgumentError(absl::StrFormat(
      "multiSet got %d keys but %d values; pass one value per key", keys.size(), values.size()));
}

absl::StatusOr<int64_t> addToCounter(const std::string& key,
                                     std::optional<std::string_view> current, int64_t delta) {
  int64_t value = 0;
  if (current.has_value() &&
      !absl::SimpleAtoi(absl::string_view(current->data(), current->size()), &value)) {
    return storeError(
        absl::StrFormat("add on key %s: its value %s is not a decimal integer; use a "
                        "separate key for counters",
                        describeKey(key), describeKey(*current)));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return storeError(absl::StrFormat("add on key %s: %d + %d overflows a 64-bit counter",
                                      describeKey(key), value, delta));
  }
  return sum;
}

std::string formatCounter(int64_t value) { return absl::StrCat(value); }

}  // namespace loom::comm
