// FileStore specifics beyond the shared behavioural suite: several processes
// on one file, clean-up by the last user, torn and foreign files, and the
// lock timeout.
#include "comm/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/testing/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(20);

std::string tempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid()))
      .string();
}

std::unique_ptr<FileStore> openOrDie(const std::string& path, absl::Duration timeout = kTimeout) {
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::open(path, timeout);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

void appendRaw(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::app);
  file << bytes;
}

TEST(FileStoreTest, ProcessesShareOneFileAndCountersStayExact) {
  constexpr int kWorkers = 4;
  constexpr int kAdds = 50;
  const std::string path = tempPath("multiprocess");
  std::unique_ptr<FileStore> store = openOrDie(path);
  ASSERT_NE(store, nullptr);
  std::vector<testing::Subprocess> workers;
  for (int rank = 0; rank < kWorkers; ++rank) {
    absl::StatusOr<testing::Subprocess> worker = testing::Subprocess::start(
        testing::runfilePath("comm/store_test_helper"),
        {"--mode=worker", "--store=file", absl::StrCat("--path=", path),
         absl::StrCat("--rank=", rank), absl::StrCat("--workers=", kWorkers),
         absl::StrCat("--adds=", kAdds)});
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers.push_back(std::move(*worker));
  }
  for (testing::Subprocess& worker : workers) {
    absl::StatusOr<std::string> line = worker.readLine(absl::Seconds(60));
    ASSERT_TRUE(line.ok()) << line.status();
    EXPECT_EQ(*line, "done");
    absl::StatusOr<int> code = worker.wait(absl::Seconds(10));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
  absl::StatusOr<int64_t> total = store->add("counter", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kWorkers * kAdds);
  // The workers have left; this store is the last user and removes the file.
  EXPECT_TRUE(std::filesystem::exists(path));
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStoreTest, TheLastUserRemovesTheFileAndThePathIsReusable) {
  const std::string path = tempPath("cleanup");
  std::unique_ptr<FileStore> first = openOrDie(path);
  std::unique_ptr<FileStore> second = openOrDie(path);
  ASSERT_TRUE(first->setString("job", "one").ok());
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path));
  absl::StatusOr<std::string> seen = second->getString("job");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(*seen, "one");
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(path));

  std::unique_ptr<FileStore> next_job = openOrDie(path);
  absl::StatusOr<bool> stale = next_job->check({"job"});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
}

TEST(FileStoreTest, ATornTailIsIgnoredByReadersAndCutByTheNextWriter) {
  const std::string path = tempPath("torn");
  std::unique_ptr<FileStore> writer = openOrDie(path);
  ASSERT_TRUE(writer->setString("before", "ok").ok());
  // A set record cut off inside its key, as a writer killed mid-write leaves.
  // "\x00" "ab", not "\x00ab": a hex escape takes every hex digit after it,
  // so the latter is one byte 0xab (AddressSanitizer caught the overread).
  appendRaw(path, std::string("\x01\x05\x00\x00\x00\x02\x00\x00\x00"
                              "ab",
                              11));
  std::unique_ptr<FileStore> reader = openOrDie(path);
  absl::StatusOr<std::string> before = reader->getString("before");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, "ok");
  ASSERT_TRUE(writer->setString("after", "fine").ok());
  absl::StatusOr<std::string> after = reader->getString("after");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, "fine");
  absl::StatusOr<int64_t> keys = reader->numKeys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, 2);
}

TEST(FileStoreTest, ACorruptRecordIsAStoreErrorNamingTheFile) {
  const std::string path = tempPath("corrupt");
  std::unique_ptr<FileStore> store = openOrDie(path);
  appendRaw(path, std::string("\x7f\x00\x00\x00\x00\x00\x00\x00\x00", 9));
  absl::StatusOr<bool> exists = store->check({"x"});
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(errorKind(exists.status()), ErrorKind::kStore);
  EXPECT_THAT(std::string(exists.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(exists.status().message()), HasSubstr("corrupt"));
}

TEST(FileStoreTest, AForeignFileIsRefused) {
  const std::string path = tempPath("foreign");
  appendRaw(path, "#!/bin/sh\necho hello\n");
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(errorKind(store.status()), ErrorKind::kStore);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("not a loom file store"));
  std::filesystem::remove(path);
}

TEST(FileStoreTest, AnotherFormatVersionIsRefusedByName) {
  const std::string path = tempPath("version");
  appendRaw(path, "LOOMFS99");
  absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("LOOMFS99"));
  std::filesystem::remove(path);
}

TEST(FileStoreTest, AHeldLockTimesOutNamingTheFile) {
  const std::string path = tempPath("locked");
  std::unique_ptr<FileStore> store = openOrDie(path, absl::Milliseconds(200));
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  absl::Status status = store->setString("k", "v");
  ::flock(fd, LOCK_UN);
  ::close(fd);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(errorKind(status), ErrorKind::kTimeout);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("200ms"));
}

TEST(FileStoreTest, BadPathsAreReportedClearly) {
  absl::StatusOr<std::unique_ptr<FileStore>> empty = FileStore::open("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(errorKind(empty.status()), ErrorKind::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<FileStore>> missing_dir =
      FileStore::open(tempPath("no_such_dir") + "/store");
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(errorKind(missing_dir.status()), ErrorKind::kStore);
  EXPECT_THAT(std::string(missing_dir.status().message()), HasSubstr("no_such_dir"));
}

}  // namespace
}  // namespace loom::comm
