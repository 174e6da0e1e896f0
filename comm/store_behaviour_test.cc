// One behavioural suite for every Store type: the same contract (c10d's)
// checked against HashStore, FileStore, TCPStore and PrefixStore over each.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/file_store.h"
#include "comm/hash_store.h"
#include "comm/prefix_store.h"
#include "comm/store.h"
#include "comm/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

using ::testing::HasSubstr;

// Short enough that the timeout cases keep the suite fast, long enough for a
// loaded 2-core machine to answer the ordinary calls.
constexpr absl::Duration kShortTimeout = absl::Milliseconds(200);
constexpr absl::Duration kTestTimeout = absl::Seconds(20);

// One store under test: several handles onto the same keys, the way several
// ranks see one job's store.
class StoreHandles {
 public:
  virtual ~StoreHandles() = default;
  virtual std::shared_ptr<Store> first() = 0;
  // Another handle onto the same keys (a second client, a second opener).
  virtual std::shared_ptr<Store> another() = 0;
};

class HashHandles : public StoreHandles {
 public:
  std::shared_ptr<Store> first() override { return store_; }
  std::shared_ptr<Store> another() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = std::make_shared<HashStore>(kTestTimeout);
};

class FileHandles : public StoreHandles {
 public:
  FileHandles() {
    path_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("behaviour_", counter_++, "_", ::getpid());
    first_ = another();
  }
  std::shared_ptr<Store> first() override { return first_; }
  std::shared_ptr<Store> another() override {
    absl::StatusOr<std::unique_ptr<FileStore>> store =
        FileStore::open(path_.string(), kTestTimeout);
    EXPECT_TRUE(store.ok()) << store.status();
    return std::move(*store);
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
  std::shared_ptr<Store> first_;
};

class TcpHandles : public StoreHandles {
 public:
  TcpHandles() {
    TCPStoreOptions options;
    options.is_server = true;
    options.timeout = kTestTimeout;
    absl::StatusOr<std::unique_ptr<TCPStore>> server = TCPStore::create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    port_ = (*server)->port();
    first_ = std::move(*server);
  }
  std::shared_ptr<Store> first() override { return first_; }
  std::shared_ptr<Store> another() override {
    TCPStoreOptions options;
    options.port = port_;
    options.timeout = kTestTimeout;
    absl::StatusOr<std::unique_ptr<TCPStore>> client = TCPStore::create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  }

 private:
  uint16_t port_ = 0;
  std::shared_ptr<Store> first_;
};

// Prefixes every handle of `inner` alike, so they share one namespace, and
// puts a decoy key outside it to show that the namespace holds.
class PrefixHandles : public StoreHandles {
 public:
  explicit PrefixHandles(std::unique_ptr<StoreHandles> inner) : inner_(std::move(inner)) {
    EXPECT_TRUE(inner_->first()->setString("a", "outside").ok());
    first_ = std::make_shared<PrefixStore>("job", inner_->first());
  }
  std::shared_ptr<Store> first() override { return first_; }
  std::shared_ptr<Store> another() override {
    return std::make_shared<PrefixStore>("job", inner_->another());
  }
  // The decoy counts in numKeys(), which is the underlying store's.
  static constexpr int64_t kDecoyKeys = 1;

 private:
  std::unique_ptr<StoreHandles> inner_;
  std::shared_ptr<Store> first_;
};

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreHandles>()> make;
  int64_t extra_keys = 0;
};

std::vector<StoreKind> storeKinds() {
  return {
      {"Hash", [] { return std::make_unique<HashHandles>(); }},
      {"File", [] { return std::make_unique<FileHandles>(); }},
      {"Tcp", [] { return std::make_unique<TcpHandles>(); }},
      {"PrefixOverHash",
       [] { return std::make_unique<PrefixHandles>(std::make_unique<HashHandles>()); },
       PrefixHandles::kDecoyKeys},
      {"PrefixOverFile",
       [] { return std::make_unique<PrefixHandles>(std::make_unique<FileHandles>()); },
       PrefixHandles::kDecoyKeys},
      {"PrefixOverTcp",
       [] { return std::make_unique<PrefixHandles>(std::make_unique<TcpHandles>()); },
       PrefixHandles::kDecoyKeys},
  };
}

class StoreBehaviourTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    handles_ = GetParam().make();
    store_ = handles_->first();
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<StoreHandles> handles_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreBehaviourTest, SetThenGetReturnsTheBytes) {
  const Bytes value = {0, 1, 2, 255, 0, 7};
  ASSERT_TRUE(store_->set("k", value).ok());
  absl::StatusOr<Bytes> got = store_->get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
}

TEST_P(StoreBehaviourTest, SetOverwritesAndStringsRoundTrip) {
  ASSERT_TRUE(store_->setString("k", "one").ok());
  ASSERT_TRUE(store_->setString("k", "two").ok());
  absl::StatusOr<std::string> got = store_->getString("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "two");
}

TEST_P(StoreBehaviourTest, EmptyValueAndBinaryKeyAndLargeValue) {
  const std::string binary_key("k\0\xff/x", 5);
  const Bytes large(1 << 20, 0x5a);
  ASSERT_TRUE(store_->set("empty", {}).ok());
  ASSERT_TRUE(store_->set(binary_key, large).ok());
  absl::StatusOr<Bytes> empty = store_->get("empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  absl::StatusOr<Bytes> got = store_->get(binary_key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, large);
}

TEST_P(StoreBehaviourTest, GetOfAMissingKeyTimesOutNamingKeyAndTimeout) {
  store_->setTimeout(kShortTimeout);
  const absl::Time start = absl::Now();
  absl::StatusOr<Bytes> got = store_->get("never");
  EXPECT_GE(absl::Now() - start, kShortTimeout);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(errorKind(got.status()), ErrorKind::kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("never"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("200ms"));
}

TEST_P(StoreBehaviourTest, GetWaitsForAKeySetLater) {
  std::shared_ptr<Store> other = handles_->another();
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(other->setString("late", "here").ok());
  });
  absl::StatusOr<std::string> got = store_->getString("late");
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
}

TEST_P(StoreBehaviourTest, AddCountsFromZeroAndStoresDecimalText) {
  absl::StatusOr<int64_t> first = store_->add("n", 5);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 5);
  absl::StatusOr<int64_t> second = store_->add("n", -7);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, -2);
  absl::StatusOr<std::string> text = store_->getString("n");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "-2");
  ASSERT_TRUE(store_->setString("n", "40").ok());
  absl::StatusOr<int64_t> third = store_->add("n", 2);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(*third, 42);
}

TEST_P(StoreBehaviourTest, AddOnANonIntegerIsAStoreError) {
  ASSERT_TRUE(store_->setString("word", "hello").ok());
  absl::StatusOr<int64_t> sum = store_->add("word", 1);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(errorKind(sum.status()), ErrorKind::kStore);
  EXPECT_THAT(std::string(sum.status().message()), HasSubstr("word"));
  absl::StatusOr<std::string> unchanged = store_->getString("word");
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(*unchanged, "hello");
}

TEST_P(StoreBehaviourTest, ConcurrentAddsFromSeveralHandlesAreAtomic) {
  constexpr int kThreads = 4;
  constexpr int kAddsPerThread = 50;
  std::vector<std::shared_ptr<Store>> handles;
  for (int i = 0; i < kThreads; ++i) handles.push_back(handles_->another());
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kAddsPerThread; ++j) {
        EXPECT_TRUE(handles[i]->add("total", 1).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  absl::StatusOr<int64_t> total = store_->add("total", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kThreads * kAddsPerThread);
}

TEST_P(StoreBehaviourTest, CompareSetFollowsTheC10dContract) {
  // Missing key, empty expectation: the swap happens.
  absl::StatusOr<Bytes> created = store_->compareSet("cas", {}, toBytes("first"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(toString(*created), "first");
  // Existing key, wrong expectation: the current value comes back.
  absl::StatusOr<Bytes> refused = store_->compareSet("cas", toBytes("nope"), toBytes("second"));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(toString(*refused), "first");
  // Existing key, right expectation: the swap happens.
  absl::StatusOr<Bytes> swapped = store_->compareSet("cas", toBytes("first"), toBytes("second"));
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(toString(*swapped), "second");
  // Missing key, non-empty expectation: the expectation comes back, no key.
  absl::StatusOr<Bytes> absent = store_->compareSet("absent", toBytes("x"), toBytes("y"));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(toString(*absent), "x");
  absl::StatusOr<bool> exists = store_->check({"absent"});
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE(*exists);
}

TEST_P(StoreBehaviourTest, DeleteKeyReportsWhetherTheKeyExisted) {
  ASSERT_TRUE(store_->setString("gone", "soon").ok());
  absl::StatusOr<bool> deleted = store_->deleteKey("gone");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  absl::StatusOr<bool> again = store_->deleteKey("gone");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  absl::StatusOr<bool> exists = store_->check({"gone"});
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE(*exists);
}

TEST_P(StoreBehaviourTest, CheckAndNumKeys) {
  const int64_t extra = GetParam().extra_keys;
  absl::StatusOr<int64_t> none = store_->numKeys();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, extra);
  ASSERT_TRUE(store_->setString("a", "1").ok());
  ASSERT_TRUE(store_->setString("b", "2").ok());
  ASSERT_TRUE(store_->add("c", 1).ok());
  absl::StatusOr<bool> all = store_->check({"a", "b", "c"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
  absl::StatusOr<bool> some = store_->check({"a", "z"});
  ASSERT_TRUE(some.ok());
  EXPECT_FALSE(*some);
  absl::StatusOr<int64_t> three = store_->numKeys();
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, extra + 3);
  ASSERT_TRUE(store_->deleteKey("b").ok());
  absl::StatusOr<int64_t> two = store_->numKeys();
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, extra + 2);
}

TEST_P(StoreBehaviourTest, WaitReturnsOnceEveryKeyExists) {
  std::shared_ptr<Store> other = handles_->another();
  ASSERT_TRUE(store_->setString("w1", "x").ok());
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(other->setString("w2", "y").ok());
  });
  absl::Status status = store_->wait({"w1", "w2"}, absl::Seconds(10));
  setter.join();
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(StoreBehaviourTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  ASSERT_TRUE(store_->setString("present", "x").ok());
  absl::Status status = store_->wait({"present", "missing1", "missing2"}, kShortTimeout);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(errorKind(status), ErrorKind::kTimeout);
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("missing1"));
  EXPECT_THAT(message, HasSubstr("missing2"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("'present'")));
  EXPECT_THAT(message, HasSubstr("200ms"));
}

TEST_P(StoreBehaviourTest, AppendCreatesThenExtends) {
  ASSERT_TRUE(store_->append("log", toBytes("ab")).ok());
  ASSERT_TRUE(store_->append("log", toBytes("cd")).ok());
  absl::StatusOr<std::string> got = store_->getString("log");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "abcd");
}

TEST_P(StoreBehaviourTest, MultiSetThenMultiGetKeepsTheOrder) {
  ASSERT_TRUE(
      store_->multiSet({"m1", "m2", "m3"}, {toBytes("one"), toBytes(""), toBytes("three")}).ok());
  absl::StatusOr<std::vector<Bytes>> got = store_->multiGet({"m3", "m1", "m2"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ(toString((*got)[0]), "three");
  EXPECT_EQ(toString((*got)[1]), "one");
  EXPECT_EQ(toString((*got)[2]), "");
}

TEST_P(StoreBehaviourTest, MultiGetTimesOutNamingTheMissingKey) {
  ASSERT_TRUE(store_->setString("here", "x").ok());
  store_->setTimeout(kShortTimeout);
  absl::StatusOr<std::vector<Bytes>> got = store_->multiGet({"here", "nope"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(errorKind(got.status()), ErrorKind::kTimeout);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("nope"));
}

TEST_P(StoreBehaviourTest, MultiSetWithMismatchedSizesIsAnInvalidArgument) {
  absl::Status status = store_->multiSet({"a", "b"}, {toBytes("1")});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(errorKind(status), ErrorKind::kInvalidArgument);
  absl::StatusOr<bool> exists = store_->check({"a"});
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE(*exists);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreBehaviourTest, ::testing::ValuesIn(storeKinds()),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace loom::comm
