// Store adapter for Gloo's rendezvous.
#include "comm/gloo/gloo_store.h"

#include <utility>

namespace loom::comm::gloo {

GlooStore::GlooStore(std::shared_ptr<comm::Store> store, absl::Duration timeout)
    : store_(std::move(store)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  if (absl::Status status = store_->set(key, Bytes(data.begin(), data.end())); !status.ok()) {
    throw StoreFailure(std::move(status));
  }
}

std::vector<char> GlooStore::get(const std::string& key) {
  // Wait with our timeout first: Store::get would use the store's default.
  wait({key});
  absl::StatusOr<Bytes> value = store_->get(key);
  if (!value.ok()) throw StoreFailure(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  if (absl::Status status = store_->wait(keys, timeout_); !status.ok()) {
    throw StoreFailure(std::move(status));
  }
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  if (absl::Status status = store_->wait(keys, absl::FromChrono(timeout)); !status.ok()) {
    throw StoreFailure(std::move(status));
  }
}

}  // namespace loom::comm::gloo
