// Implements HashStore: one mutex over a flat hash map, and a condition
// variable that wakes blocked readers when keys appear.
#include "comm/hash_store.h"

#include <optional>
#include <string_view>

#include "comm/deadline.h"

namespace loom::comm {
absl::Status HashStore::set(const std::string& key, const Bytes& value) {
  absl::MutexLock lock(&mu_);
  map_[key] = value;
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<Bytes> HashStore::get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = waitLocked("get", {key}, timeout()); !status.ok()) {
    return status;
  }
  return map_.at(key);
}

absl::StatusOr<int64_t> HashStore::add(const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  auto it = map_.find(key);
  std::optional<std::string_view> current;
  if (it != map_.end()) current = asStringView(it->second);
  absl::StatusOr<int64_t> sum = addToCounter(key, current, delta);
  if (!sum.ok()) return sum.status();
  map_[key] = toBytes(formatCounter(*sum));
  changed_.SignalAll();
  return *sum;
}

absl::StatusOr<Bytes> HashStore::compareSet(const std::string& key, const Bytes& expected,
                                            const Bytes& desired) {
  absl::MutexLock lock(&mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;
    map_.emplace(key, desired);
    changed_.SignalAll();
    return desired;
  }
  if (it->second != expected) return it->second;
  it->second = desired;
  changed_.SignalAll();
  return desired;
}

absl::StatusOr<bool> HashStore::deleteKey(const std::string& key) {
  absl::MutexLock lock(&mu_);
  return map_.erase(key) > 0;
}

absl::StatusOr<bool> HashStore::check(const std::vector<std::string>& keys) {
  absl::MutexLock lock(&mu_);
  return missingLocked(keys).empty();
}

absl::StatusOr<int64_t> HashStore::numKeys() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(map_.size());
}

absl::Status HashStore::wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return waitLocked("wait", keys, timeout);
}

absl::Status HashStore::append(const std::string& key, const Bytes& value) {
  absl::MutexLock lock(&mu_);
  Bytes& current = map_[key];
  current.insert(current.end(), value.begin(), value.end());
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Bytes>> HashStore::multiGet(const std::vector<std::string>& keys) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = waitLocked("multiGet", keys, timeout()); !status.ok()) {
    return status;
  }
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(map_.at(key));
  return values;
}

absl::Status HashStore::multiSet(const std::vector<std::string>& keys,
                                 const std::vector<Bytes>& values) {
  if (absl::Status status = checkMultiSetArgs(keys, values); !status.ok()) {
    return status;
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) map_[keys[i]] = values[i];
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status HashStore::waitLocked(std::string_view operation, const std::vector<std::string>& keys,
                                   absl::Duration timeout) {
  const Deadline deadline = Deadline::after(timeout);
  while (true) {
    std::vector<std::string> missing = missingLocked(keys);
    if (missing.empty()) return absl::OkStatus();
    if (deadline.expired()) {
      return keysTimeoutError(operation, missing, timeout);
    }
    changed_.WaitWithTimeout(&mu_, deadline.remaining());
  }
}

std::vector<std::string> HashStore::missingLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!map_.contains(key)) missing.push_back(key);
  }
  return missing;
}

}  // namespace loom::comm
