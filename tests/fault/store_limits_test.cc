// The TCPStore server never allocates more than its message limit for one
// message: this binary replaces operator new to record the largest single
// allocation while a hand-driven client streams frames at the limit, lies
// about lengths, or appends a value up to the limit.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/raw_store_client.h"

namespace {

std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest{0};

void* allocate(size_t size) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (size > seen && !g_largest.compare_exchange_weak(seen, size)) {
    }
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t size) { return allocate(size); }
void* operator new[](size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace loom::fault {
namespace {

constexpr uint32_t kLimit = 1 << 20;
// A frame's header and a std::string's terminator come on top of the body.
constexpr size_t kSlack = 64;

std::string bytesField(const std::string& value) {
  return u32le(static_cast<uint32_t>(value.size())) + value;
}

class StoreLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm::TCPStoreOptions options;
    options.is_server = true;
    options.max_message_bytes = kLimit;
    options.timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<comm::TCPStore>> server = comm::TCPStore::create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<RawStoreClient>(server_->port());
    ASSERT_TRUE(client_->send(helloFrame("")));
    ASSERT_EQ(client_->readFrame(absl::Seconds(5)).substr(0, 1), std::string(1, kReplyOk));
  }

  // Records the largest allocation from now on (after the test has built
  // its own large strings).
  void track() {
    g_largest = 0;
    g_tracking = true;
  }

  void TearDown() override { g_tracking = false; }

  // Sends `bytes` in pieces small enough that the server reads (and grows
  // its buffer) many times.
  void trickle(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size(); at += 16 << 10) {
      ASSERT_TRUE(client_->send(std::string_view(bytes).substr(at, 16 << 10)));
      if ((at / (16 << 10)) % 8 == 0) absl::SleepFor(absl::Microseconds(200));
    }
  }

  // A numKeys round trip: every earlier request has been handled.
  void sync() {
    ASSERT_TRUE(client_->send(frame(std::string(1, '\x08'))));
    const std::string reply = client_->readFrame(absl::Seconds(10));
    ASSERT_FALSE(reply.empty());
    ASSERT_EQ(static_cast<uint8_t>(reply[0]), kReplyOk) << reply;
  }

  std::unique_ptr<comm::TCPStore> server_;
  std::unique_ptr<RawStoreClient> client_;
};

TEST_F(StoreLimitsTest, AFrameAtTheLimitIsBufferedInNoMoreThanTheLimit) {
  // set: op, key, value; the body is exactly the limit.
  const std::string key = "big";
  const size_t value_size = kLimit - 1 - 4 - key.size() - 4;
  const std::string body =
      std::string(1, '\x02') + bytesField(key) + bytesField(std::string(value_size, 'v'));
  ASSERT_EQ(body.size(), kLimit);
  const std::string bytes = frame(body);
  track();
  trickle(bytes);
  sync();
  std::printf("largest allocation while buffering a %u-byte frame: %zu bytes\n", kLimit,
              g_largest.load());
  EXPECT_LE(g_largest.load(), kLimit + kSlack)
      << "the server made a " << g_largest.load() << "-byte allocation for a " << kLimit
      << "-byte limit";
}

TEST_F(StoreLimitsTest, AppendsStopGrowingAValueAtTheLimit) {
  // Values grow by appends of 96 KiB up to the limit, then one more append
  // is refused (a store error, the connection stays usable).
  const std::string append =
      frame(std::string(1, '\x0a') + bytesField("log") + bytesField(std::string(96 << 10, 'a')));
  track();
  int refused = 0;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(client_->send(append));
    const std::string reply = client_->readFrame(absl::Seconds(10));
    ASSERT_FALSE(reply.empty());
    if (static_cast<uint8_t>(reply[0]) != kReplyOk) ++refused;
  }
  EXPECT_EQ(refused, 2);
  std::printf("largest allocation while appending up to the %u-byte limit: %zu bytes\n", kLimit,
              g_largest.load());
  EXPECT_LE(g_largest.load(), kLimit + kSlack)
      << "the server made a " << g_largest.load() << "-byte allocation for a " << kLimit
      << "-byte limit";
}

TEST_F(StoreLimitsTest, AClaimedLengthCostsNothingUntilTheBytesArrive) {
  const std::string claim = u32le(kLimit) + "\x02";
  track();
  ASSERT_TRUE(client_->send(claim));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_LT(g_largest.load(), size_t{64} << 10);
}

}  // namespace
}  // namespace loom::fault
