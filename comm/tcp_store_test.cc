// TCPStore specifics beyond the shared behavioural suite: separate server and
// client processes, connecting before the server is up, faults (server
// killed, garbage, silence, a peer that never reads, wrong token), limits,
// the worker barrier, and many concurrent clients.
#include "comm/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/tcp_store_protocol.h"
#include "comm/testing/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

std::unique_ptr<TCPStore> startServer(TCPStoreOptions options = {}) {
  options.is_server = true;
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

absl::StatusOr<std::unique_ptr<TCPStore>> connectClient(uint16_t port,
                                                        TCPStoreOptions options = {}) {
  options.port = port;
  return TCPStore::create(options);
}

// A port that nothing listens on (bound once by the kernel's choice, then
// released), for tests that start a server later or never.
uint16_t unusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A plain blocking socket to the server, for speaking (or not speaking) the
// protocol by hand.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  }
  ~RawConnection() { ::close(fd_); }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  void handshake(const std::string& token = "") {
    send(
        wire::Writer(wire::Op::kHello).u32(wire::kMagic).u16(wire::kVersion).bytes(token).finish());
    std::string reply = readFrame(absl::Seconds(5));
    ASSERT_FALSE(reply.empty());
    EXPECT_EQ(reply[0], static_cast<char>(wire::ReplyStatus::kOk));
  }

  // The body of the next frame, or "" if none arrives in time.
  std::string readFrame(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      if (std::optional<uint32_t> length = wire::peekFrameLength(received_);
          length && received_.size() >= wire::kFrameHeaderSize + *length) {
        std::string body = received_.substr(wire::kFrameHeaderSize, *length);
        received_.erase(0, wire::kFrameHeaderSize + *length);
        return body;
      }
      if (!receive(deadline)) return "";
    }
  }

  // Whether the server closes the connection before `timeout` passes;
  // replies that arrive first are skipped.
  bool closedWithin(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (receive(deadline)) {
    }
    return closed_;
  }

 private:
  bool receive(absl::Time deadline) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    timeval tv = absl::ToTimeval(left);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char chunk[4096];
    const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (got > 0) {
      received_.append(chunk, static_cast<size_t>(got));
      return true;
    }
    if (got == 0 || errno == ECONNRESET) closed_ = true;
    return false;
  }

  int fd_ = -1;
  std::string received_;
  bool closed_ = false;
};

// Runs a few operations on a fresh client and checks that they succeed
// promptly: the server is still serving others.
void expectServerResponsive(uint16_t port) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<TCPStore>> client = connectClient(port);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*client)->setString("probe", absl::StrCat(i)).ok());
    absl::StatusOr<std::string> got = (*client)->getString("probe");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, absl::StrCat(i));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(TCPStoreTest, WorkersInSeparateProcessesShareTheServer) {
  constexpr int kWorkers = 4;
  constexpr int kAdds = 50;
  absl::StatusOr<testing::Subprocess> server = testing::Subprocess::start(
      testing::runfilePath("comm/store_test_helper"), {"--mode=server", "--token=job-secret"});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> line = server->readLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripPrefix(*line, "port "), &port)) << *line;

  std::vector<testing::Subprocess> workers;
  for (int rank = 0; rank < kWorkers; ++rank) {
    absl::StatusOr<testing::Subprocess> worker = testing::Subprocess::start(
        testing::runfilePath("comm/store_test_helper"),
        {"--mode=worker", "--store=tcp", absl::StrCat("--port=", port), "--token=job-secret",
         absl::StrCat("--rank=", rank), absl::StrCat("--workers=", kWorkers),
         absl::StrCat("--adds=", kAdds)});
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers.push_back(std::move(*worker));
  }
  for (testing::Subprocess& worker : workers) {
    absl::StatusOr<std::string> done = worker.readLine(absl::Seconds(60));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(*done, "done");
    absl::StatusOr<int> code = worker.wait(absl::Seconds(10));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
  TCPStoreOptions options;
  options.token = "job-secret";
  absl::StatusOr<std::unique_ptr<TCPStore>> client =
      connectClient(static_cast<uint16_t>(port), options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<int64_t> total = (*client)->add("counter", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, kWorkers * kAdds);
  server->closeStdin();
  absl::StatusOr<int> code = server->wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(TCPStoreTest, AClientStartedBeforeTheServerConnectsOnceItIsUp) {
  const uint16_t port = unusedPort();
  std::unique_ptr<TCPStore> server;
  std::thread late_server([&] {
    absl::SleepFor(absl::Milliseconds(300));
    TCPStoreOptions options;
    options.port = port;
    server = startServer(options);
  });
  const absl::Time start = absl::Now();
  TCPStoreOptions options;
  options.timeout = kTimeout;
  absl::StatusOr<std::unique_ptr<TCPStore>> client = connectClient(port, options);
  late_server.join();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  ASSERT_TRUE((*client)->setString("k", "v").ok());
  absl::StatusOr<std::string> got = server->getString("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
}

TEST(TCPStoreTest, ConnectingToNoServerTimesOutNamingTheAddress) {
  const uint16_t port = unusedPort();
  TCPStoreOptions options;
  options.timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<TCPStore>> client = connectClient(port, options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(errorKind(client.status()), ErrorKind::kTimeout);
  const std::string message(client.status().message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(message, HasSubstr("connection refused"));
  EXPECT_THAT(message, HasSubstr("300ms"));
}

TEST(TCPStoreTest, AnotherKindOfServerOnThePortFailsFastAndClearly) {
  // A listener that greets every connection like an SSH server.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::thread impostor([listener] {
    const int peer = ::accept(listener, nullptr, nullptr);
    const std::string banner = "SSH-2.0-OpenSSH_9.2\r\n";
    ::send(peer, banner.data(), banner.size(), MSG_NOSIGNAL);
    char sink[64];
    ::recv(peer, sink, sizeof(sink), 0);
    ::close(peer);
  });
  TCPStoreOptions options;
  options.timeout = kTimeout;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<TCPStore>> client =
      connectClient(ntohs(address.sin_port), options);
  impostor.join();
  ::close(listener);
  ASSERT_FALSE(client.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(errorKind(client.status()), ErrorKind::kStore);
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("is it a loom store?"));
}

TEST(TCPStoreTest, KillingTheServerFailsWaitingClientsWithANetworkError) {
  absl::StatusOr<testing::Subprocess> server =
      testing::Subprocess::start(testing::runfilePath("comm/store_test_helper"), {"--mode=server"});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> line = server->readLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripPrefix(*line, "port "), &port));

  constexpr int kClients = 3;
  std::vector<std::unique_ptr<TCPStore>> clients;
  for (int i = 0; i < kClients; ++i) {
    TCPStoreOptions options;
    options.timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<TCPStore>> client =
        connectClient(static_cast<uint16_t>(port), options);
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(std::move(*client));
  }
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kClients; ++i) {
    waiters.emplace_back([&, i] { results[i] = clients[i]->get("never-set").status(); });
  }
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time killed = absl::Now();
  server->kill();
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_LT(absl::Now() - killed, absl::Seconds(5));
  for (const absl::Status& status : results) {
    EXPECT_EQ(errorKind(status), ErrorKind::kNetwork) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("127.0.0.1:", port)));
    EXPECT_THAT(std::string(status.message()), HasSubstr("never-set"));
  }
  // The connection stays failed rather than hanging on later calls.
  absl::Status later = clients[0]->setString("k", "v");
  EXPECT_EQ(errorKind(later), ErrorKind::kNetwork) << later;
}

TEST(TCPStoreTest, GarbageBeforeTheHandshakeClosesOnlyThatConnection) {
  std::unique_ptr<TCPStore> server = startServer();
  std::mt19937 random(42);
  std::string garbage(4096, '\0');
  for (char& byte : garbage) byte = static_cast<char>(random());
  RawConnection stray(server->port());
  stray.send(garbage);
  EXPECT_TRUE(stray.closedWithin(absl::Seconds(5)));
  expectServerResponsive(server->port());
}

TEST(TCPStoreTest, AHandshakeFromAnotherProgramIsRefused) {
  std::unique_ptr<TCPStore> server = startServer();
  RawConnection stray(server->port());
  stray.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  const std::string reply = stray.readFrame(absl::Seconds(5));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], static_cast<char>(wire::ReplyStatus::kBadRequest));
  EXPECT_TRUE(stray.closedWithin(absl::Seconds(5)));
  expectServerResponsive(server->port());
}

TEST(TCPStoreTest, MalformedRequestsAfterTheHandshakeCloseTheConnection) {
  std::unique_ptr<TCPStore> server = startServer();
  {
    RawConnection unknown_op(server->port());
    unknown_op.handshake();
    unknown_op.send(wire::Writer(static_cast<uint8_t>(200)).finish());
    const std::string reply = unknown_op.readFrame(absl::Seconds(5));
    ASSERT_FALSE(reply.empty());
    EXPECT_EQ(reply[0], static_cast<char>(wire::ReplyStatus::kBadRequest));
    EXPECT_TRUE(unknown_op.closedWithin(absl::Seconds(5)));
  }
  {
    RawConnection truncated(server->port());
    truncated.handshake();
    // A set whose value length points past the end of the frame.
    truncated.send(wire::Writer(wire::Op::kSet).bytes("k").u32(1000).finish());
    EXPECT_TRUE(truncated.closedWithin(absl::Seconds(5)));
  }
  {
    RawConnection oversized(server->port());
    oversized.handshake();
    // Declares a frame far beyond the limit; the server must not wait for
    // (or allocate) it.
    oversized.send(std::string("\xff\xff\xff\x7f", 4));
    EXPECT_TRUE(oversized.closedWithin(absl::Seconds(5)));
  }
  expectServerResponsive(server->port());
}

TEST(TCPStoreTest, AClientThatNeverSpeaksIsDroppedAndStallsNobody) {
  TCPStoreOptions options;
  options.handshake_timeout = absl::Milliseconds(300);
  std::unique_ptr<TCPStore> server = startServer(options);
  RawConnection silent(server->port());
  expectServerResponsive(server->port());
  EXPECT_TRUE(silent.closedWithin(absl::Seconds(5)));
}

TEST(TCPStoreTest, AClientThatNeverReadsStallsOnlyItself) {
  std::unique_ptr<TCPStore> server = startServer();
  ASSERT_TRUE(server->set("big", Bytes(512 << 10, 7)).ok());
  RawConnection hog(server->port());
  hog.handshake();
  std::string requests;
  for (int i = 0; i < 64; ++i) {
    requests += wire::Writer(wire::Op::kGet).bytes("big").i64(1000).finish();
  }
  hog.send(requests);
  // 32 MiB of replies are owed to a peer that reads none of them.
  expectServerResponsive(server->port());
}

TEST(TCPStoreTest, TheTokenKeepsOutClientsThatDoNotKnowIt) {
  TCPStoreOptions server_options;
  server_options.token = "s3cret";
  std::unique_ptr<TCPStore> server = startServer(server_options);
  ASSERT_TRUE(server->setString("key", "private").ok());
  for (const std::string& token : {std::string("wrong"), std::string()}) {
    TCPStoreOptions options;
    options.token = token;
    options.timeout = kTimeout;
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<TCPStore>> intruder = connectClient(server->port(), options);
    ASSERT_FALSE(intruder.ok());
    // Refused at once, not retried until the timeout.
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_EQ(errorKind(intruder.status()), ErrorKind::kStore);
    EXPECT_EQ(intruder.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(intruder.status().message()), HasSubstr("token"));
  }
  // A raw peer with the wrong token gets no further than the handshake.
  RawConnection raw(server->port());
  raw.send(
      wire::Writer(wire::Op::kHello).u32(wire::kMagic).u16(wire::kVersion).bytes("guess").finish());
  const std::string reply = raw.readFrame(absl::Seconds(5));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], static_cast<char>(wire::ReplyStatus::kBadToken));
  EXPECT_TRUE(raw.closedWithin(absl::Seconds(5)));

  TCPStoreOptions options;
  options.token = "s3cret";
  absl::StatusOr<std::unique_ptr<TCPStore>> member = connectClient(server->port(), options);
  ASSERT_TRUE(member.ok()) << member.status();
  absl::StatusOr<std::string> got = (*member)->getString("key");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "private");
}

TEST(TCPStoreTest, AnotherProtocolVersionIsRefusedByName) {
  std::unique_ptr<TCPStore> server = startServer();
  RawConnection future(server->port());
  future.send(
      wire::Writer(wire::Op::kHello).u32(wire::kMagic).u16(wire::kVersion + 1).bytes("").finish());
  const std::string reply = future.readFrame(absl::Seconds(5));
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], static_cast<char>(wire::ReplyStatus::kBadVersion));
  EXPECT_THAT(reply, HasSubstr("version 2"));
}

TEST(TCPStoreTest, ValuesOverTheMessageLimitAreRefusedBeforeSending) {
  TCPStoreOptions options;
  options.max_message_bytes = 4096;
  std::unique_ptr<TCPStore> server = startServer(options);
  absl::Status status = server->set("big", Bytes(8192, 1));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(errorKind(status), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("4096"));
  // Appends that would grow a value past the limit are refused by the
  // server, and the connection stays usable.
  ASSERT_TRUE(server->append("grow", Bytes(3000, 1)).ok());
  absl::Status grown = server->append("grow", Bytes(3000, 1));
  EXPECT_EQ(errorKind(grown), ErrorKind::kStore) << grown;
  EXPECT_TRUE(server->setString("small", "fine").ok());
}

TEST(TCPStoreTest, WaitForWorkersIsABarrierWithATimeout) {
  TCPStoreOptions server_options;
  server_options.num_workers = 3;
  server_options.timeout = kTimeout;
  server_options.port = unusedPort();
  absl::StatusOr<std::unique_ptr<TCPStore>> server;
  std::thread server_thread([&] {
    server_options.is_server = true;
    server = TCPStore::create(server_options);
  });
  std::vector<std::unique_ptr<TCPStore>> clients(2);
  std::vector<std::thread> client_threads;
  for (int i = 0; i < 2; ++i) {
    client_threads.emplace_back([&, i] {
      TCPStoreOptions options;
      options.num_workers = 3;
      options.timeout = kTimeout;
      absl::StatusOr<std::unique_ptr<TCPStore>> client =
          connectClient(server_options.port, options);
      ASSERT_TRUE(client.ok()) << client.status();
      clients[i] = std::move(*client);
    });
  }
  server_thread.join();
  for (std::thread& thread : client_threads) thread.join();
  ASSERT_TRUE(server.ok()) << server.status();

  TCPStoreOptions lonely;
  lonely.num_workers = 2;
  lonely.timeout = absl::Milliseconds(300);
  lonely.is_server = true;
  absl::StatusOr<std::unique_ptr<TCPStore>> alone = TCPStore::create(lonely);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(errorKind(alone.status()), ErrorKind::kTimeout);
  EXPECT_THAT(std::string(alone.status().message()), HasSubstr("1 of 2 workers"));
}

TEST(TCPStoreTest, HundredsOfConcurrentClients) {
  constexpr int kClients = 200;
  std::unique_ptr<TCPStore> server = startServer();
  std::atomic<int> failures{0};
  std::atomic<int> released{0};
  // One thread per client, all connecting at once; then every client parks
  // on "go", so the server holds 200 connections with 200 parked requests
  // while it keeps answering the main thread.
  std::vector<std::thread> clients;
  std::vector<std::string> everyone;
  for (int i = 0; i < kClients; ++i) {
    everyone.push_back(absl::StrCat("client/", i));
    clients.emplace_back([&, i] {
      TCPStoreOptions options;
      options.timeout = kTimeout;
      absl::StatusOr<std::unique_ptr<TCPStore>> client = connectClient(server->port(), options);
      if (!client.ok() || !(*client)->setString(absl::StrCat("client/", i), "x").ok() ||
          !(*client)->add("arrived", 1).ok()) {
        ++failures;
        return;
      }
      if ((*client)->wait({"go"}).ok()) ++released;
    });
  }
  absl::Status arrived = server->wait(everyone);
  EXPECT_TRUE(arrived.ok()) << arrived;
  ASSERT_TRUE(server->setString("go", "1").ok());
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(released.load(), kClients);
  absl::StatusOr<int64_t> total = server->add("arrived", 0);
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, kClients);
  absl::StatusOr<int64_t> keys = server->numKeys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, kClients + 2);
}

}  // namespace
}  // namespace loom::comm
