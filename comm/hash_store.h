// HashStore: an in-process Store over a hash map, for ranks that run as
// threads of one process (tests, single-host tools) and as a reference.
#ifndef LOOM_COMM_HASH_STORE_H_
#define LOOM_COMM_HASH_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/store.h"

namespace loom::comm {

class HashStore : public Store {
 public:
  explicit HashStore(absl::Duration timeout = kDefaultStoreTimeout) : Store(timeout) {}

  using Store::wait;

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
  // Blocks until all `keys` exist or `timeout` passes; returns with mu_ held
  // either way, and a timeout error naming the keys still missing.
  absl::Status waitLocked(std::string_view operation, const std::vector<std::string>& keys,
                          absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> missingLocked(const std::vector<std::string>& keys) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // Signalled whenever a key is created or changed.
  absl::CondVar changed_;
  absl::flat_hash_map<std::string, Bytes> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom::comm

#endif  // LOOM_COMM_HASH_STORE_H_
