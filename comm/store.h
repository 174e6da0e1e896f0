// The key-value Store interface that ranks use to find each other and to
// exchange small facts during start-up, after c10d's torch.distributed.Store.
#ifndef LOOM_COMM_STORE_H_
#define LOOM_COMM_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom::comm {

// Store values are raw bytes, as in c10d; strings are a convenience on top.
using Bytes = std::vector<uint8_t>;

// c10d's default: long enough for a slow cluster start, short enough that a
// missing rank is reported within minutes rather than never.
inline constexpr absl::Duration kDefaultStoreTimeout = absl::Seconds(300);

Bytes toBytes(std::string_view text);
std::string toString(const Bytes& bytes);
// The bytes seen as characters, without a copy.
inline std::string_view asStringView(const Bytes& bytes) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// A key-value store shared by the ranks of one job. All methods are safe to
// call from several threads. Keys are byte strings; values are bytes.
//
// Blocking calls (`get`, `wait`, `multiGet`) wait for keys that do not exist
// yet, up to the store's timeout (or the one passed in), and then fail with a
// timeout error that names the missing keys and the timeout.
class Store {
 public:
  explicit Store(absl::Duration timeout) : timeout_(timeout) {}
  virtual ~Store() = default;

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets `key` to `value`, replacing any earlier value.
  virtual absl::Status set(const std::string& key, const Bytes& value) = 0;

  // Returns the value of `key`, waiting up to timeout() for it to be set.
  virtual absl::StatusOr<Bytes> get(const std::string& key) = 0;

  // Atomically adds `delta` to the integer stored at `key` (decimal text; a
  // missing key counts as 0) and returns the new value.
  virtual absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) = 0;

  // Atomically sets `key` to `desired` if its value equals `expected`, or if
  // the key is missing and `expected` is empty. Returns the value now stored
  // when the swap happened or the key exists, and `expected` when the key is
  // missing and `expected` is not empty (c10d's contract).
  virtual absl::StatusOr<Bytes> compareSet(const std::string& key, const Bytes& expected,
                                           const Bytes& desired) = 0;

  // Removes `key`; returns whether it existed.
  virtual absl::StatusOr<bool> deleteKey(const std::string& key) = 0;

  // Returns whether every one of `keys` exists, without waiting.
  virtual absl::StatusOr<bool> check(const std::vector<std::string>& keys) = 0;

  // The number of keys in the store.
  virtual absl::StatusOr<int64_t> numKeys() = 0;

  // Waits until every one of `keys` exists, up to `timeout`.
  virtual absl::Status wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
  absl::Status wait(const std::vector<std::string>& keys) { return wait(keys, timeout()); }

  // Appends `value` to the value of `key`, creating the key if missing.
  virtual absl::Status append(const std::string& key, const Bytes& value) = 0;

  // Returns the values of `keys` in order, waiting up to timeout() for all.
  virtual absl::StatusOr<std::vector<Bytes>> multiGet(const std::vector<std::string>& keys) = 0;

  // Sets `keys[i]` to `values[i]` for every i, atomically where the store
  // allows (HashStore, FileStore and TCPStore all do).
  virtual absl::Status multiSet(const std::vector<std::string>& keys,
                                const std::vector<Bytes>& values) = 0;

  // String conveniences over set/get.
  absl::Status setString(const std::string& key, std::string_view value) {
    return set(key, toBytes(value));
  }
  absl::StatusOr<std::string> getString(const std::string& key);

  // The default timeout of the blocking calls. Change it only while no other
  // thread is inside a call on this store. Virtual so that a wrapper such as
  // PrefixStore can hand both to the store it wraps.
  virtual absl::Duration timeout() const { return timeout_; }
  virtual void setTimeout(absl::Duration timeout) { timeout_ = timeout; }

 private:
  absl::Duration timeout_;
};

// A key quoted for messages: printable, escaped, and shortened when long.
std::string describeKey(std::string_view key);
// Keys quoted for messages, e.g. ['a', 'b'], shortened after a few.
std::string describeKeys(const std::vector<std::string>& keys);

// The timeout error of a blocking call: names the operation, the keys still
// missing and the timeout, and says what usually causes it.
absl::Status keysTimeoutError(std::string_view operation, const std::vector<std::string>& missing,
                              absl::Duration timeout);

// Checks that multiSet was given as many values as keys.
absl::Status checkMultiSetArgs(const std::vector<std::string>& keys,
                               const std::vector<Bytes>& values);

// Parses the decimal counter that `add` keeps at `key` (`current` is its
// value, nullopt when missing), adds `delta` and returns the new value; a
// store error when the value is not an integer or the sum overflows. Shared
// so that every store keeps counters alike.
absl::StatusOr<int64_t> addToCounter(const std::string& key,
                                     std::optional<std::string_view> current, int64_t delta);
std::string formatCounter(int64_t value);

}  // namespace loom::comm

#endif  // LOOM_COMM_STORE_H_
