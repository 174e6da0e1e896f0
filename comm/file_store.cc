// Implements FileStore: an flock-guarded append-only record log, read
// incrementally into an in-memory cache, with a user count that lets the
// last user remove the file.
#include "comm/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

// "LOOMFS" plus a two-digit format version; a new incompatible record layout
// bumps the version so that mixed builds refuse each other's files.
constexpr char kMagic[] = "LOOMFS01";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
constexpr size_t kMagicPrefixSize = 6;

// Record: type (1 byte), key length (4), value length (4), key, value; the
// lengths are little-endian.
constexpr size_t kRecordHeaderSize = 9;
enum RecordType : uint8_t {
  kSet = 1,
  kDelete = 2,
  // The value is the decimal number of FileStore objects using the file.
  kUsers = 3,
};

constexpr absl::Duration kFirstPoll = absl::Milliseconds(1);
constexpr absl::Duration kMaxPoll = absl::Milliseconds(10);
// Lock contention is short (one record), so lock polling starts finer.
constexpr absl::Duration kFirstLockPoll = absl::Microseconds(50);
constexpr absl::Duration kMaxLockPoll = absl::Milliseconds(5);

void putU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint32_t getU32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  }
  return value;
}

void putRecord(std::string& out, RecordType type, std::string_view key, std::string_view value) {
  out.push_back(static_cast<char>(type));
  putU32(out, static_cast<uint32_t>(key.size()));
  putU32(out, static_cast<uint32_t>(value.size()));
  out.append(key);
  out.append(value);
}

std::string errnoText(int error) { return std::strerror(error); }

// Record lengths are 32-bit; a longer key or value cannot be stored.
absl::Status checkSizes(const std::string& key, size_t value_size) {
  constexpr size_t kMax = UINT32_MAX;
  if (key.size() <= kMax && value_size <= kMax) return absl::OkStatus();
  return invalidArgumentError(
      absl::StrFormat("file store cannot hold key %s: keys and values are limited to %d bytes",
                      describeKey(key), kMax));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::open(const std::string& path,
                                                           absl::Duration timeout) {
  if (path.empty()) {
    return invalidArgumentError("file store path is empty; pass a file that every rank can reach");
  }
  const Deadline deadline = Deadline::after(timeout);
  while (true) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int error = errno;
      return storeError(
          absl::StrFormat("cannot open file store %s: %s; check that the directory exists and "
                          "is writable",
                          path, errnoText(error)));
    }
    std::unique_ptr<FileStore> store(new FileStore(path, fd, timeout));
    // The last user of an earlier job may have removed the file between our
    // open() and our lock; then we hold a lock on a dead file and retry.
    absl::Status status = store->locked(LockMode::kExclusive, [&]() {
      struct stat opened;
      struct stat named;
      if (::fstat(fd, &opened) != 0 || ::stat(path.c_str(), &named) != 0 ||
          opened.st_ino != named.st_ino || opened.st_dev != named.st_dev) {
        return absl::Status(absl::StatusCode::kAborted, "file replaced");
      }
      std::string record;
      putRecord(record, kUsers, "", formatCounter(store->users_ + 1));
      absl::Status appended = store->appendLocked(record);
      store->joined_ = appended.ok();
      return appended;
    });
    if (status.ok()) return store;
    if (status.code() != absl::StatusCode::kAborted) return status;
    if (deadline.expired()) {
      return timeoutError(
          absl::StrFormat("could not join file store %s within %s: it kept being removed and "
                          "recreated; is another job using the same path?",
                          path, absl::FormatDuration(timeout)));
    }
  }
}

FileStore::FileStore(std::string path, int fd, absl::Duration timeout)
    : Store(timeout), path_(std::move(path)), fd_(fd) {}

FileStore::~FileStore() {
  if (joined_) {
    // A destructor cannot report failure; if the lock cannot be had, the
    // file stays behind, which the class comment tells users to clean up.
    locked(LockMode::kExclusive, [&]() {
      if (users_ <= 1) {
        ::unlink(path_.c_str());
        return absl::OkStatus();
      }
      std::string record;
      putRecord(record, kUsers, "", formatCounter(users_ - 1));
      return appendLocked(record);
    }).IgnoreError();
  }
  ::close(fd_);
}

template <typename Body>
auto FileStore::locked(LockMode mode, Body&& body) -> decltype(body()) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = lockFile(mode, Deadline::after(timeout())); !status.ok()) {
    return status;
  }
  if (absl::Status status = refreshLocked(mode); !status.ok()) {
    unlockFile();
    return status;
  }
  auto result = body();
  unlockFile();
  return result;
}

absl::Status FileStore::lockFile(LockMode mode, const Deadline& deadline) {
  const int operation = (mode == LockMode::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  absl::Duration pause = kFirstLockPoll;
  while (::flock(fd_, operation) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    if (error != EWOULDBLOCK) {
      return storeError(absl::StrFormat("cannot lock file store %s: %s", path_, errnoText(error)));
    }
    if (deadline.expired()) {
      return timeoutError(
          absl::StrFormat("could not lock file store %s within %s: another process holds the "
                          "lock; is one of the ranks stuck?",
                          path_, absl::FormatDuration(timeout())));
    }
    absl::SleepFor(std::min(pause, deadline.remaining()));
    pause = std::min(pause * 2, kMaxLockPoll);
  }
  return absl::OkStatus();
}

void FileStore::unlockFile() { ::flock(fd_, LOCK_UN); }

absl::Status FileStore::refreshLocked(LockMode mode) {
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    return storeError(absl::StrFormat("cannot stat file store %s: %s", path_, errnoText(error)));
  }
  const int64_t size = info.st_size;
  if (size <= read_offset_) return absl::OkStatus();
  std::string data(static_cast<size_t>(size - read_offset_), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t got = ::pread(fd_, data.data() + done, data.size() - done,
                                read_offset_ + static_cast<int64_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int error = got < 0 ? errno : EIO;
      return storeError(absl::StrFormat("cannot read file store %s: %s", path_, errnoText(error)));
    }
    done += static_cast<size_t>(got);
  }
  std::string_view rest(data);
  if (read_offset_ == 0) {
    const std::string_view magic(kMagic, kMagicSize);
    if (rest.size() < kMagicSize && magic.substr(0, rest.size()) == rest) {
      // A creator died while writing the header: the file is as good as new.
      if (mode == LockMode::kExclusive && ::ftruncate(fd_, 0) != 0) {
        const int error = errno;
        return storeError(
            absl::StrFormat("cannot repair file store %s: %s", path_, errnoText(error)));
      }
      return absl::OkStatus();
    }
    if (rest.substr(0, kMagicSize) != magic) {
      if (rest.substr(0, kMagicPrefixSize) == magic.substr(0, kMagicPrefixSize)) {
        return storeError(absl::StrFormat(
            "file store %s has format %s but this build reads %s; run every "
            "rank from the same build, or remove the file",
            path_, absl::CHexEscape(std::string(rest.substr(0, kMagicSize))), kMagic));
      }
      return storeError(
          absl::StrFormat("%s is not a loom file store (it does not start with %s); pick a "
                          "path that no other program uses, or remove the file",
                          path_, kMagic));
    }
    read_offset_ = kMagicSize;
    rest.remove_prefix(kMagicSize);
  }
  const int64_t start = read_offset_;
  absl::StatusOr<size_t> used = applyRecordsLocked(rest, start);
  if (!used.ok()) return used.status();
  read_offset_ = start + static_cast<int64_t>(*used);
  if (read_offset_ < size && mode == LockMode::kExclusive) {
    // A writer died mid-record; cut the torn tail so that new records do not
    // land behind it.
    if (::ftruncate(fd_, read_offset_) != 0) {
      const int error = errno;
      return storeError(
          absl::StrFormat("cannot repair file store %s: %s", path_, errnoText(error)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> FileStore::applyRecordsLocked(std::string_view data, int64_t file_offset) {
  size_t at = 0;
  while (data.size() - at >= kRecordHeaderSize) {
    const uint8_t type = static_cast<uint8_t>(data[at]);
    const size_t key_size = getU32(data.data() + at + 1);
    const size_t value_size = getU32(data.data() + at + 5);
    if (type != kSet && type != kDelete && type != kUsers) {
      return storeError(
          absl::StrFormat("file store %s is corrupt at byte %d (record type %d); remove "
                          "the file and restart the job",
                          path_, file_offset + static_cast<int64_t>(at), type),
          absl::StatusCode::kDataLoss);
    }
    const size_t end = at + kRecordHeaderSize + key_size + value_size;
    if (end > data.size()) break;
    const std::string_view key = data.substr(at + kRecordHeaderSize, key_size);
    const std::string_view value = data.substr(at + kRecordHeaderSize + key_size, value_size);
    switch (type) {
      case kSet:
        cache_[std::string(key)] = Bytes(value.begin(), value.end());
        break;
      case kDelete:
        cache_.erase(std::string(key));
        break;
      case kUsers:
        if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &users_)) {
          return storeError(absl::StrFormat("file store %s is corrupt at byte %d (bad user "
                                            "count); remove the file and restart the job",
                                            path_, file_offset + static_cast<int64_t>(at)),
                            absl::StatusCode::kDataLoss);
        }
        break;
    }
    at = end;
  }
  return at;
}

absl::Status FileStore::appendLocked(const std::string& records) {
  std::string data;
  if (read_offset_ == 0) data.append(kMagic, kMagicSize);
  data.append(records);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t wrote = ::pwrite(fd_, data.data() + done, data.size() - done,
                                   read_offset_ + static_cast<int64_t>(done));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const int error = wrote < 0 ? errno : EIO;
      // Leave no torn record behind; failing that, the next writer cuts it.
      const bool cut = ::ftruncate(fd_, read_offset_) == 0;
      return storeError(
          absl::StrFormat("cannot write file store %s: %s%s; free space or fix the file "
                          "system, then restart the job",
                          path_, errnoText(error),
                          cut ? "" : " (a partial record is left for the next writer to cut)"));
    }
    done += static_cast<size_t>(wrote);
  }
  std::string_view written(data);
  if (read_offset_ == 0) {
    written.remove_prefix(kMagicSize);
    read_offset_ = kMagicSize;
  }
  absl::StatusOr<size_t> used = applyRecordsLocked(written, read_offset_);
  if (!used.ok()) return used.status();
  read_offset_ += static_cast<int64_t>(*used);
  return absl::OkStatus();
}

absl::Status FileStore::set(const std::string& key, const Bytes& value) {
  if (absl::Status status = checkSizes(key, value.size()); !status.ok()) {
    return status;
  }
  std::string record;
  putRecord(record, kSet, key, asStringView(value));
  return locked(LockMode::kExclusive, [&]() { return appendLocked(record); });
}

absl::StatusOr<Bytes> FileStore::get(const std::string& key) {
  Bytes value;
  absl::Status status = waitForKeys(
      "get", {key}, timeout(),
      [&](const absl::flat_hash_map<std::string, Bytes>& cache) { value = cache.at(key); });
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<int64_t> FileStore::add(const std::string& key, int64_t delta) {
  return locked(LockMode::kExclusive, [&]() -> absl::StatusOr<int64_t> {
    std::optional<std::string_view> current;
    if (auto it = cache_.find(key); it != cache_.end()) {
      current = asStringView(it->second);
    }
    absl::StatusOr<int64_t> sum = addToCounter(key, current, delta);
    if (!sum.ok()) return sum.status();
    std::string record;
    putRecord(record, kSet, key, formatCounter(*sum));
    if (absl::Status status = appendLocked(record); !status.ok()) {
      return status;
    }
    return *sum;
  });
}

absl::StatusOr<Bytes> FileStore::compareSet(const std::string& key, const Bytes& expected,
                                            const Bytes& desired) {
  if (absl::Status status = checkSizes(key, desired.size()); !status.ok()) {
    return status;
  }
  return locked(LockMode::kExclusive, [&]() -> absl::StatusOr<Bytes> {
    auto it = cache_.find(key);
    if (it == cache_.end() && !expected.empty()) return expected;
    if (it != cache_.end() && it->second != expected) return it->second;
    std::string record;
    putRecord(record, kSet, key, asStringView(desired));
    if (absl::Status status = appendLocked(record); !status.ok()) {
      return status;
    }
    return desired;
  });
}

absl::StatusOr<bool> FileStore::deleteKey(const std::string& key) {
  return locked(LockMode::kExclusive, [&]() -> absl::StatusOr<bool> {
    if (!cache_.contains(key)) return false;
    std::string record;
    putRecord(record, kDelete, key, "");
    if (absl::Status status = appendLocked(record); !status.ok()) {
      return status;
    }
    return true;
  });
}

absl::StatusOr<bool> FileStore::check(const std::vector<std::string>& keys) {
  return locked(LockMode::kShared, [&]() -> absl::StatusOr<bool> {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& key) { return cache_.contains(key); });
  });
}

absl::StatusOr<int64_t> FileStore::numKeys() {
  return locked(LockMode::kShared,
                [&]() -> absl::StatusOr<int64_t> { return static_cast<int64_t>(cache_.size()); });
}

absl::Status FileStore::wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  return waitForKeys("wait", keys, timeout, [](const absl::flat_hash_map<std::string, Bytes>&) {});
}

absl::Status FileStore::append(const std::string& key, const Bytes& value) {
  return locked(LockMode::kExclusive, [&]() {
    std::string combined;
    if (auto it = cache_.find(key); it != cache_.end()) {
      combined.append(asStringView(it->second));
    }
    combined.append(asStringView(value));
    if (absl::Status status = checkSizes(key, combined.size()); !status.ok()) {
      return status;
    }
    std::string record;
    putRecord(record, kSet, key, combined);
    return appendLocked(record);
  });
}

absl::StatusOr<std::vector<Bytes>> FileStore::multiGet(const std::vector<std::string>& keys) {
  std::vector<Bytes> values;
  absl::Status status = waitForKeys("multiGet", keys, timeout(),
                                    [&](const absl::flat_hash_map<std::string, Bytes>& cache) {
                                      values.reserve(keys.size());
                                      for (const std::string& key : keys)
                                        values.push_back(cache.at(key));
                                    });
  if (!status.ok()) return status;
  return values;
}

absl::Status FileStore::multiSet(const std::vector<std::string>& keys,
                                 const std::vector<Bytes>& values) {
  if (absl::Status status = checkMultiSetArgs(keys, values); !status.ok()) {
    return status;
  }
  std::string records;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (absl::Status status = checkSizes(keys[i], values[i].size()); !status.ok()) {
      return status;
    }
    putRecord(records, kSet, keys[i], asStringView(values[i]));
  }
  return locked(LockMode::kExclusive, [&]() { return appendLocked(records); });
}

absl::Status FileStore::waitForKeys(
    std::string_view operation, const std::vector<std::string>& keys, absl::Duration timeout,
    const std::function<void(const absl::flat_hash_map<std::string, Bytes>&)>& read) {
  const Deadline deadline = Deadline::after(timeout);
  absl::Duration pause = kFirstPoll;
  while (true) {
    std::vector<std::string> missing;
    absl::Status status = locked(LockMode::kShared, [&]() {
      for (const std::string& key : keys) {
        if (!cache_.contains(key)) missing.push_back(key);
      }
      if (missing.empty()) read(cache_);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    if (missing.empty()) return absl::OkStatus();
    if (deadline.expired()) {
      return keysTimeoutError(operation, missing, timeout);
    }
    absl::SleepFor(std::min(pause, deadline.remaining()));
    pause = std::min(pause * 2, kMaxPoll);
  }
}

}  // namespace loom::comm
