// FileStore: a Store kept in one file on a file system that every rank can
// see (a local disk for one host, NFS/Lustre for a cluster), as c10d's
// FileStore and the file:// init method.
#ifndef LOOM_COMM_FILE_STORE_H_
#define LOOM_COMM_FILE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/deadline.h"
#include "comm/store.h"

namespace loom::comm {

// The file is an append-only log of records (set, delete, user count) after
// a versioned header. Every call takes an flock on the file (shared to read,
// exclusive to write), first reads the records other processes appended
// since its last call, then appends its own. A writer that dies mid-record
// leaves a torn tail that readers ignore and the next writer cuts off.
//
// Every FileStore opened on a path counts itself in the file; the last one
// to close removes the file, so a path can be reused by the next job. A job
// that crashes leaves the file behind; delete it before reusing the path.
// Blocking calls poll the file (1 ms, backing off to 10 ms), which suits
// start-up traffic, not a hot loop.
class FileStore : public Store {
 public:
  // Opens (creating if needed) the store at `path` and joins it as a user.
  static absl::StatusOr<std::unique_ptr<FileStore>> open(
      const std::string& path, absl::Duration timeout = kDefaultStoreTimeout);

  // Leaves the store; the last user removes the file.
  ~FileStore() override;

  const std::string& path() const { return path_; }

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
  enum class LockMode { kShared, kExclusive };

  FileStore(std::string path, int fd, absl::Duration timeout);

  // Runs `body` holding mu_ and the file lock in `mode`, after bringing the
  // cache up to date; every public call does its work inside one of these.
  template <typename Body>
  auto locked(LockMode mode, Body&& body) -> decltype(body());

  // Waits (polling the file) until all `keys` exist, then calls `read` with
  // the cache still locked, so that what it reads is one consistent view.
  absl::Status waitForKeys(
      std::string_view operation, const std::vector<std::string>& keys, absl::Duration timeout,
      const std::function<void(const absl::flat_hash_map<std::string, Bytes>&)>& read);

  absl::Status lockFile(LockMode mode, const Deadline& deadline);
  void unlockFile();
  // Reads the records appended since the last call. With the exclusive lock
  // it also writes the header of a new file and cuts off a torn tail.
  absl::Status refreshLocked(LockMode mode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends `records` (already encoded) at the end of the file and applies
  // them to the cache; needs the exclusive lock.
  absl::Status appendLocked(const std::string& records) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the complete records in `data`; returns how many bytes they
  // span, or an error for a record no writer could have produced.
  absl::StatusOr<size_t> applyRecordsLocked(std::string_view data, int64_t file_offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int fd_;

  absl::Mutex mu_;
  // How far the file has been read into the cache.
  int64_t read_offset_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Bytes> cache_ ABSL_GUARDED_BY(mu_);
  // How many FileStore objects, in all processes, have the file open.
  int64_t users_ ABSL_GUARDED_BY(mu_) = 0;
  // Whether this object counted itself in users_, and so must leave.
  bool joined_ = false;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_FILE_STORE_H_
