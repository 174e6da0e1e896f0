// Implements PrefixStore by rewriting keys and forwarding every call; the
// underlying store's own timeout governs the blocking calls.
#include "comm/prefix_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace loom::comm {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store->timeout()), prefix_(std::move(prefix)), store_(std::move(store)) {}

std::string PrefixStore::full(const std::string& key) const {
  return absl::StrCat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> result;
  result.reserve(keys.size());
  for (const std::string& key : keys) result.push_back(full(key));
  return result;
}

absl::Status PrefixStore::set(const std::string& key, const Bytes& value) {
  return store_->set(full(key), value);
}

absl::StatusOr<Bytes> PrefixStore::get(const std::string& key) { return store_->get(full(key)); }

absl::StatusOr<int64_t> PrefixStore::add(const std::string& key, int64_t delta) {
  return store_->add(full(key), delta);
}

absl::StatusOr<Bytes> PrefixStore::compareSet(const std::string& key, const Bytes& expected,
                                              const Bytes& desired) {
  return store_->compareSet(full(key), expected, desired);
}

absl::StatusOr<bool> PrefixStore::deleteKey(const std::string& key) {
  return store_->deleteKey(full(key));
}

absl::StatusOr<bool> PrefixStore::check(const std::vector<std::string>& keys) {
  return store_->check(full(keys));
}

absl::StatusOr<int64_t> PrefixStore::numKeys() { return store_->numKeys(); }

absl::Status PrefixStore::wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  return store_->wait(full(keys), timeout);
}

absl::Status PrefixStore::append(const std::string& key, const Bytes& value) {
  return store_->append(full(key), value);
}

absl::StatusOr<std::vector<Bytes>> PrefixStore::multiGet(const std::vector<std::string>& keys) {
  return store_->multiGet(full(keys));
}

absl::Status PrefixStore::multiSet(const std::vector<std::string>& keys,
                                   const std::vector<Bytes>& values) {
  return store_->multiSet(full(keys), values);
}

}  // namespace loom::comm
