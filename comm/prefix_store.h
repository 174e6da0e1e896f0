// PrefixStore: a namespace inside another Store, so that independent users of
// one job's store (process groups, rendezvous rounds) cannot collide.
#ifndef LOOM_COMM_PREFIX_STORE_H_
#define LOOM_COMM_PREFIX_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store.h"

namespace loom::comm {

// Maps every key k to "<prefix>/k" in the underlying store. The timeout and
// numKeys() are the underlying store's: setTimeout() changes it for every
// user of that store, and numKeys() counts every key there (c10d does both
// the same way; a store cannot count by prefix cheaply).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  using Store::wait;

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& underlying() const { return store_; }

  absl::Duration timeout() const override { return store_->timeout(); }
  void setTimeout(absl::Duration timeout) override { store_->setTimeout(timeout); }

  absl::Status set(const std::string& key, const Bytes& value) override;
  absl::StatusOr<Bytes> get(const std::string& key) override;
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  absl::StatusOr<Bytes> compareSet(const std::string& key, const Bytes& expected,
                                   const Bytes& desired) override;
  absl::StatusOr<bool> deleteKey(const std::string& key) override;
  absl::StatusOr<bool> check(const std::vector<std::string>& keys) override;
  absl::StatusOr<int64_t> numKeys() override;
  absl::Status wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::Status append(const std::string& key, const Bytes& value) override;
  absl::StatusOr<std::vector<Bytes>> multiGet(const std::vector<std::string>& keys) override;
  absl::Status multiSet(const std::vector<std::string>& keys,
                        const std::vector<Bytes>& values) override;

 private:
  std::string full(const std::string& key) const;
  std::vector<std::string> full(const std::vector<std::string>& keys) const;

  const std::string prefix_;
  const std::shared_ptr<Store> store_;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_PREFIX_STORE_H_
