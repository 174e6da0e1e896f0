// Implements the TCPStore server: a single-threaded epoll loop over
// non-blocking sockets, per-connection bounded buffers, parked blocking
// requests with deadlines, and a handshake that checks version and token.
#include "comm/tcp_store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "comm/errors.h"
#include "comm/socket.h"
#include "comm/store.h"

namespace loom::comm {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::ReplyStatus;

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr uint64_t kFirstConnectionId = 2;

// One event may read at most this much from one connection before the loop
// moves on, so a client streaming a large value cannot starve the others.
constexpr size_t kReadBudget = 256 << 10;
constexpr size_t kReadChunk = 64 << 10;
// A connection whose unsent replies exceed this is not read from until they
// drain: a client that sends requests but never reads replies stalls only
// itself and costs at most this (plus one reply) in memory.
constexpr size_t kOutputHighWater = 1 << 20;
// Consumed input is compacted away once this much has accumulated.
constexpr size_t kCompactThreshold = 64 << 10;
// Buffers that grew for one large message are released afterwards.
constexpr size_t kShrinkThreshold = 1 << 20;
// A reply frame adds its length, its status and a value length to a value.
constexpr size_t kReplyOverhead = wire::kFrameHeaderSize + 1 + 4;
// When the process runs out of file descriptors, accepting pauses this long
// instead of spinning on a listener that stays readable.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr int kMaxEvents = 256;
// The longest request timeout taken literally (about 35 years).
constexpr int64_t kMaxTimeoutMs = int64_t{1} << 40;
// Refused and dropped clients are logged, at most this many lines per
// window, so that a port scanner cannot flood the job's log; the first
// refusal after a window says how many were left out.
constexpr int kLogBurst = 20;
constexpr auto kLogWindow = std::chrono::seconds(60);

absl::string_view av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// Compares tokens in time independent of where they differ, so that the
// reply time does not leak the token's prefix.
bool tokensEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// Gives `text` room for `capacity` bytes, allocating exactly that:
// libstdc++'s reserve() rounds a growing string up to twice its capacity,
// which would let one message take twice the message limit.
void reserveExactly(std::string& text, size_t capacity) {
  if (capacity <= text.capacity()) return;
  std::string grown;
  grown.reserve(capacity);
  grown.append(text);
  text.swap(grown);
}

// "host:port" of a connected socket's peer, for the log.
std::string peerName(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return formatHostPort(text, ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return formatHostPort(text, ntohs(v4->sin_port));
}

struct Connection {
  uint64_t id = 0;
  UniqueFd fd;
  // The peer's address, for the log.
  std::string peer;
  bool authenticated = false;
  bool closed = false;
  std::string in;
  size_t in_start = 0;
  std::string out;
  size_t out_start = 0;
  // The waiter of the blocking request this connection is parked on; while
  // parked, its later requests stay unread so that replies keep their order.
  uint64_t parked = 0;
  // The epoll events currently registered.
  uint32_t events = 0;
  Clock::time_point handshake_deadline;

  size_t pendingOut() const { return out.size() - out_start; }
};

struct Waiter {
  uint64_t connection = 0;
  Op op = Op::kGet;
  std::vector<std::string> keys;
  int64_t join_target = 0;
  Clock::time_point deadline = Clock::time_point::max();
};

}  // namespace

class TCPStoreServer::Loop {
 public:
  Loop(const TCPStoreServerOptions& options, std::string address, UniqueFd listener, UniqueFd epoll,
       UniqueFd wake)
      : options_(options),
        address_(std::move(address)),
        listener_(std::move(listener)),
        epoll_(std::move(epoll)),
        wake_(std::move(wake)) {}

  void run();
  // One round of the loop: waits for events (at most `max_wait_ms`, -1:
  // until the next deadline), handles them and the deadlines that are due.
  // False if epoll failed.
  bool runOnce(int max_wait_ms);
  // Serves a connected socket as a new, not yet authenticated client.
  void addConnection(UniqueFd fd, std::string peer);
  size_t connectionCount() const { return connections_.size(); }

  // Asks run() to return; safe from any thread.
  void stop() {
    stopping_.store(true);
    const uint64_t one = 1;
    // The eventfd counter cannot overflow from one write; a failed write
    // would only mean the loop is already awake.
    [[maybe_unused]] const ssize_t written = ::write(wake_.get(), &one, sizeof(one));
  }

 private:
  void dispatch(const epoll_event& event);
  void acceptAll();
  void readFrom(Connection& conn);
  // Makes room for `extra` more input bytes: geometric growth, capped at
  // the end of the frame being received, so that buffering a frame at the
  // message limit takes the limit and not twice it.
  static void reserveInput(Connection& conn, size_t extra);
  void processFrames(Connection& conn);
  void handleMessage(Connection& conn, std::string_view body);
  void handleHello(Connection& conn, uint8_t type, wire::Reader& reader);
  void handleRequest(Connection& conn, Op op, wire::Reader& reader);

  void reply(Connection& conn, std::string frame);
  void replyStoreError(Connection& conn, const absl::Status& status);
  // Sends a final reply, logs the refusal and drops the connection.
  void rejectAndClose(Connection& conn, ReplyStatus status, std::string_view message);
  // Writes one line about a refused or dropped client to stderr, within
  // the log's rate limit.
  void logClient(std::string_view what);
  void flush(Connection& conn);
  void updateInterest(Connection& conn);
  void close(Connection& conn);

  void storeValue(std::string_view key, std::string_view value);
  bool allPresent(const std::vector<std::string>& keys) const;
  std::string readyReply(const Waiter& waiter) const;
  std::string timeoutReply(const Waiter& waiter) const;
  void park(Connection& conn, Waiter waiter, int64_t timeout_ms);
  void keyChanged(std::string_view key);
  void finishWaiter(uint64_t id, bool timed_out);
  void removeWaiter(uint64_t id);

  void fireTimers();
  int nextTimeoutMillis() const;
  void drainReady();

  Connection* find(uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() || it->second->closed ? nullptr : it->second.get();
  }

  const TCPStoreServerOptions options_;
  // "host:port" the server listens on, for the log.
  const std::string address_;
  const UniqueFd listener_;
  const UniqueFd epoll_;
  const UniqueFd wake_;
  std::atomic<bool> stopping_{false};

  absl::flat_hash_map<std::string, std::string> keys_;
  int64_t joined_ = 0;

  uint64_t next_connection_id_ = kFirstConnectionId;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> connections_;
  // Closed connections are freed only between events, so that no reference
  // into one dangles while a message is being handled.
  std::vector<std::unique_ptr<Connection>> closed_;
  // Connections with complete requests still buffered, to process once the
  // current event is done (they were parked or had replies piled up).
  std::vector<uint64_t> ready_;

  uint64_t next_waiter_id_ = 1;
  absl::flat_hash_map<uint64_t, Waiter> waiters_;
  absl::flat_hash_map<std::string, std::vector<uint64_t>> key_waiters_;
  std::vector<uint64_t> join_waiters_;
  std::set<std::pair<Clock::time_point, uint64_t>> waiter_timers_;
  std::set<std::pair<Clock::time_point, uint64_t>> handshake_timers_;
  std::optional<Clock::time_point> accept_resume_;

  Clock::time_point log_window_start_;
  int log_lines_ = 0;
  int64_t log_suppressed_ = 0;
};

absl::StatusOr<std::unique_ptr<TCPStoreServer>> TCPStoreServer::start(
    const TCPStoreServerOptions& options) {
  if (options.token.size() > wire::kMaxTokenBytes) {
    return invalidArgumentError(absl::StrFormat("store token has %d bytes; the limit is %d",
                                                options.token.size(), wire::kMaxTokenBytes));
  }
  if (options.max_message_bytes < wire::kMinMaxMessageBytes) {
    return invalidArgumentError(absl::StrFormat("max_message_bytes %d is below the minimum of %d",
                                                options.max_message_bytes,
                                                wire::kMinMaxMessageBytes));
  }
  absl::StatusOr<std::pair<UniqueFd, uint16_t>> listener = listenTcp(options.host, options.port);
  if (!listener.ok()) return listener.status();
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll.valid() || !wake.valid()) {
    return networkError(absl::StrFormat("cannot start the store server: %s", errnoMessage(errno)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kListenerId;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listener->first.get(), &event);
  event.data.u64 = kWakeId;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &event);
  auto loop = std::make_unique<Loop>(options, formatHostPort(options.host, listener->second),
                                     std::move(listener->first), std::move(epoll), std::move(wake));
  return std::unique_ptr<TCPStoreServer>(new TCPStoreServer(std::move(loop), listener->second));
}

TCPStoreServer::TCPStoreServer(std::unique_ptr<Loop> loop, uint16_t port)
    : loop_(std::move(loop)), port_(port) {
  thread_ = std::thread([this] { loop_->run(); });
}

TCPStoreServer::~TCPStoreServer() {
  loop_->stop();
  thread_.join();
}

void TCPStoreServer::Loop::run() {
  while (!stopping_.load() && runOnce(-1)) {
  }
  // Dropping the connections closes their sockets: every client sees the
  // server go away instead of waiting on it.
  connections_.clear();
  closed_.clear();
}

bool TCPStoreServer::Loop::runOnce(int max_wait_ms) {
  int wait_ms = nextTimeoutMillis();
  if (max_wait_ms >= 0 && (wait_ms < 0 || wait_ms > max_wait_ms)) {
    wait_ms = max_wait_ms;
  }
  epoll_event events[kMaxEvents];
  const int count = ::epoll_wait(epoll_.get(), events, kMaxEvents, wait_ms);
  if (count < 0 && errno != EINTR) return false;
  for (int i = 0; i < count; ++i) dispatch(events[i]);
  drainReady();
  fireTimers();
  drainReady();
  closed_.clear();
  return true;
}

void TCPStoreServer::Loop::dispatch(const epoll_event& event) {
  if (event.data.u64 == kWakeId) {
    uint64_t value = 0;
    [[maybe_unused]] const ssize_t got = ::read(wake_.get(), &value, sizeof(value));
    return;
  }
  if (event.data.u64 == kListenerId) {
    acceptAll();
    return;
  }
  Connection* conn = find(event.data.u64);
  if (conn == nullptr) return;
  if (event.events & EPOLLOUT) flush(*conn);
  if (conn->closed) return;
  if (event.events & EPOLLIN) {
    readFrom(*conn);
  } else if (event.events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    // The peer went away while this connection was not being read (parked
    // or backed up): nobody is left to take its replies.
    close(*conn);
  }
}

void TCPStoreServer::Loop::acceptAll() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    const int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &peer_length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
        accept_resume_ = Clock::now() + kAcceptPause;
      }
      return;
    }
    setNoDelay(fd);
    addConnection(UniqueFd(fd), peerName(peer));
  }
}

void TCPStoreServer::Loop::addConnection(UniqueFd fd, std::string peer) {
  auto conn = std::make_unique<Connection>();
  conn->id = next_connection_id_++;
  conn->fd = std::move(fd);
  conn->peer = std::move(peer);
  conn->events = EPOLLIN | EPOLLRDHUP;
  conn->handshake_deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         absl::ToChronoNanoseconds(options_.handshake_timeout));
  epoll_event event{};
  event.events = conn->events;
  event.data.u64 = conn->id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn->fd.get(), &event) != 0) {
    return;
  }
  handshake_timers_.emplace(conn->handshake_deadline, conn->id);
  connections_.emplace(conn->id, std::move(conn));
}

void TCPStoreServer::Loop::readFrom(Connection& conn) {
  char chunk[kReadChunk];
  size_t budget = kReadBudget;
  bool peer_closed = false;
  while (budget > 0) {
    const size_t want = std::min(kReadChunk, budget);
    const ssize_t got = ::recv(conn.fd.get(), chunk, want, MSG_DONTWAIT);
    if (got > 0) {
      reserveInput(conn, static_cast<size_t>(got));
      conn.in.append(chunk, static_cast<size_t>(got));
      budget -= static_cast<size_t>(got);
      if (static_cast<size_t>(got) < want) break;
      continue;
    }
    if (got == 0) {
      peer_closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    close(conn);
    return;
  }
  processFrames(conn);
  if (peer_closed && !conn.closed) close(conn);
}

void TCPStoreServer::Loop::reserveInput(Connection& conn, size_t extra) {
  if (conn.in.size() + extra <= conn.in.capacity()) return;
  if (conn.in_start > 0) {
    conn.in.erase(0, conn.in_start);
    conn.in_start = 0;
  }
  const size_t needed = conn.in.size() + extra;
  if (needed <= conn.in.capacity()) return;
  size_t target = std::max(needed, 2 * conn.in.capacity());
  if (std::optional<uint32_t> length = wire::peekFrameLength(conn.in)) {
    target =
        std::min(target, std::max(needed, wire::kFrameHeaderSize + static_cast<size_t>(*length)));
  }
  reserveExactly(conn.in, target);
}

void TCPStoreServer::Loop::processFrames(Connection& conn) {
  while (!conn.closed && conn.parked == 0 && conn.pendingOut() < kOutputHighWater) {
    const std::string_view available = std::string_view(conn.in).substr(conn.in_start);
    const std::optional<uint32_t> length = wire::peekFrameLength(available);
    if (!length.has_value()) break;
    const uint32_t limit =
        conn.authenticated ? options_.max_message_bytes : wire::kMaxHandshakeBytes;
    if (*length > limit) {
      rejectAndClose(
          conn, ReplyStatus::kBadRequest,
          absl::StrFormat("message of %d bytes exceeds the limit of %d bytes%s", *length, limit,
                          conn.authenticated
                              ? "; split the value or raise max_message_bytes on every rank"
                              : " for a handshake; is this a loom store client?"));
      return;
    }
    if (available.size() < wire::kFrameHeaderSize + *length) break;
    conn.in_start += wire::kFrameHeaderSize + *length;
    handleMessage(conn, available.substr(wire::kFrameHeaderSize, *length));
  }
  if (conn.closed) return;
  if (conn.in_start == conn.in.size()) {
    conn.in.clear();
    conn.in_start = 0;
    if (conn.in.capacity() > kShrinkThreshold) conn.in.shrink_to_fit();
  } else if (conn.in_start >= kCompactThreshold) {
    conn.in.erase(0, conn.in_start);
    conn.in_start = 0;
  }
  updateInterest(conn);
}

void TCPStoreServer::Loop::handleMessage(Connection& conn, std::string_view body) {
  wire::Reader reader(body);
  const uint8_t type = reader.u8();
  if (!conn.authenticated) {
    handleHello(conn, type, reader);
    return;
  }
  handleRequest(conn, static_cast<Op>(type), reader);
}

void TCPStoreServer::Loop::handleHello(Connection& conn, uint8_t type, wire::Reader& reader) {
  const uint32_t magic = reader.u32();
  const uint16_t version = reader.u16();
  const std::string_view token = reader.bytes();
  if (type != static_cast<uint8_t>(Op::kHello) || magic != wire::kMagic || !reader.finished()) {
    rejectAndClose(conn, ReplyStatus::kBadRequest,
                   "expected a loom store handshake as the first message; is "
                   "this a loom TCPStore client?");
    return;
  }
  if (version != wire::kVersion) {
    rejectAndClose(conn, ReplyStatus::kBadVersion,
                   absl::StrFormat("client speaks store protocol version %d but the "
                                   "server speaks version %d",
                                   version, wire::kVersion));
    return;
  }
  if (!tokensEqual(token, options_.token)) {
    rejectAndClose(conn, ReplyStatus::kBadToken,
                   options_.token.empty() ? "the server expects no token but the client sent one"
                                          : "the client's token does not match the server's");
    return;
  }
  conn.authenticated = true;
  handshake_timers_.erase({conn.handshake_deadline, conn.id});
  reply(conn, wire::Writer(ReplyStatus::kOk).u16(wire::kVersion).finish());
}

void TCPStoreServer::Loop::handleRequest(Connection& conn, Op op, wire::Reader& reader) {
  const auto malformed = [&](std::string_view what) {
    rejectAndClose(conn, ReplyStatus::kBadRequest,
                   absl::StrFormat("malformed %s request; do client and "
                                   "server come from the same build?",
                                   av(what)));
  };
  const auto ok = [] { return wire::Writer(ReplyStatus::kOk); };
  switch (op) {
    case Op::kSet: {
      const std::string_view key = reader.bytes();
      const std::string_view value = reader.bytes();
      if (!reader.finished()) return malformed("set");
      storeValue(key, value);
      keyChanged(key);
      return;
    }
    case Op::kGet: {
      const std::string_view key = reader.bytes();
      const int64_t timeout_ms = reader.i64();
      if (!reader.finished()) return malformed("get");
      if (auto it = keys_.find(av(key)); it != keys_.end()) {
        reply(conn, ok().bytes(it->second).finish());
        return;
      }
      Waiter waiter;
      waiter.op = op;
      waiter.keys.emplace_back(key);
      park(conn, std::move(waiter), timeout_ms);
      return;
    }
    case Op::kAdd: {
      const std::string_view key = reader.bytes();
      const int64_t delta = reader.i64();
      if (!reader.finished()) return malformed("add");
      auto it = keys_.find(av(key));
      std::optional<std::string_view> current;
      if (it != keys_.end()) current = it->second;
      absl::StatusOr<int64_t> sum = addToCounter(std::string(key), current, delta);
      if (!sum.ok()) return replyStoreError(conn, sum.status());
      storeValue(key, formatCounter(*sum));
      keyChanged(key);
      reply(conn, ok().i64(*sum).finish());
      return;
    }
    case Op::kCompareSet: {
      const std::string_view key = reader.bytes();
      const std::string_view expected = reader.bytes();
      const std::string_view desired = reader.bytes();
      if (!reader.finished()) return malformed("compareSet");
      auto it = keys_.find(av(key));
      if (it == keys_.end() && !expected.empty()) {
        reply(conn, ok().bytes(expected).finish());
        return;
      }
      if (it != keys_.end() && it->second != expected) {
        reply(conn, ok().bytes(it->second).finish());
        return;
      }
      storeValue(key, desired);
      keyChanged(key);
      reply(conn, ok().bytes(desired).finish());
      return;
    }
    case Op::kDelete: {
      const std::string_view key = reader.bytes();
      if (!reader.finished()) return malformed("deleteKey");
      const bool existed = keys_.erase(av(key)) > 0;
      reply(conn, ok().u8(existed ? 1 : 0).finish());
      return;
    }
    case Op::kCheck: {
      const uint32_t count = reader.count(4);
      std::vector<std::string> keys;
      for (uint32_t i = 0; i < count && reader.ok(); ++i) {
        keys.emplace_back(reader.bytes());
      }
      if (!reader.finished()) return malformed("check");
      reply(conn, ok().u8(allPresent(keys) ? 1 : 0).finish());
      return;
    }
    case Op::kNumKeys: {
      if (!reader.finished()) return malformed("numKeys");
      reply(conn, ok().i64(static_cast<int64_t>(keys_.size())).finish());
      return;
    }
    case Op::kWait:
    case Op::kMultiGet: {
      const uint32_t count = reader.count(4);
      std::vector<std::string> keys;
      for (uint32_t i = 0; i < count && reader.ok(); ++i) {
        keys.emplace_back(reader.bytes());
      }
      const int64_t timeout_ms = reader.i64();
      if (!reader.finished()) {
        return malformed(op == Op::kWait ? "wait" : "multiGet");
      }
      Waiter waiter;
      waiter.op = op;
      waiter.keys = std::move(keys);
      if (allPresent(waiter.keys)) {
        reply(conn, readyReply(waiter));
        return;
      }
      park(conn, std::move(waiter), timeout_ms);
      return;
    }
    case Op::kAppend: {
      const std::string_view key = reader.bytes();
      const std::string_view value = reader.bytes();
      if (!reader.finished()) return malformed("append");
      auto it = keys_.find(av(key));
      const size_t size = (it == keys_.end() ? 0 : it->second.size()) + value.size();
      if (size + kReplyOverhead > options_.max_message_bytes) {
        return replyStoreError(
            conn,
            storeError(absl::StrFormat("append to key %s would make it %d bytes, over the %d-byte "
                                       "message limit; keep values smaller or raise "
                                       "max_message_bytes on every rank",
                                       describeKey(key), size, options_.max_message_bytes)));
      }
      if (it == keys_.end()) {
        keys_.emplace(std::string(key), std::string(value));
      } else {
        // Grown geometrically, but never past the largest value an append
        // may produce, so that a value near the limit does not double it.
        std::string& stored = it->second;
        if (size > stored.capacity()) {
          reserveExactly(stored, std::min(std::max(size, 2 * stored.capacity()),
                                          options_.max_message_bytes - kReplyOverhead));
        }
        stored.append(value);
      }
      keyChanged(key);
      reply(conn, ok().finish());
      return;
    }
    case Op::kMultiSet: {
      const uint32_t count = reader.count(8);
      std::vector<std::pair<std::string_view, std::string_view>> entries;
      for (uint32_t i = 0; i < count && reader.ok(); ++i) {
        const std::string_view key = reader.bytes();
        const std::string_view value = reader.bytes();
        entries.emplace_back(key, value);
      }
      if (!reader.finished()) return malformed("multiSet");
      for (const auto& [key, value] : entries) storeValue(key, value);
      for (const auto& entry : entries) keyChanged(entry.first);
      reply(conn, ok().finish());
      return;
    }
    case Op::kJoin: {
      const int64_t target = reader.i64();
      const int64_t timeout_ms = reader.i64();
      if (!reader.finished()) return malformed("join");
      ++joined_;
      // Wake the earlier joiners first, then answer or park this one.
      std::vector<uint64_t> waiting = join_waiters_;
      for (uint64_t id : waiting) {
        auto it = waiters_.find(id);
        if (it != waiters_.end() && it->second.join_target <= joined_) {
          finishWaiter(id, /*timed_out=*/false);
        }
      }
      if (target <= joined_) {
        reply(conn, ok().i64(joined_).finish());
        return;
      }
      Waiter waiter;
      waiter.op = op;
      waiter.join_target = target;
      park(conn, std::move(waiter), timeout_ms);
      return;
    }
    case Op::kHello:
      break;
  }
  rejectAndClose(conn, ReplyStatus::kBadRequest,
                 absl::StrFormat("unknown request type %d; do client and "
                                 "server come from the same build?",
                                 static_cast<int>(op)));
}

void TCPStoreServer::Loop::reply(Connection& conn, std::string frame) {
  if (conn.closed) return;
  if (conn.pendingOut() == 0) {
    conn.out = std::move(frame);
    conn.out_start = 0;
  } else {
    conn.out.append(frame);
  }
  flush(conn);
}

void TCPStoreServer::Loop::replyStoreError(Connection& conn, const absl::Status& status) {
  reply(conn, wire::Writer(ReplyStatus::kStoreError)
                  .bytes(std::string_view(status.message().data(), status.message().size()))
                  .finish());
}

void TCPStoreServer::Loop::rejectAndClose(Connection& conn, ReplyStatus status,
                                          std::string_view message) {
  // One best-effort send: a peer that is not reading does not get to keep
  // the connection open.
  reply(conn, wire::Writer(status).bytes(message).finish());
  logClient(
      absl::StrCat(conn.authenticated ? "closed the connection of client " : "refused client ",
                   conn.peer, ": ", av(message)));
  close(conn);
}

void TCPStoreServer::Loop::logClient(std::string_view what) {
  const Clock::time_point now = Clock::now();
  if (now - log_window_start_ >= kLogWindow) {
    if (log_suppressed_ > 0) {
      std::fprintf(stderr,
                   "loom store server %s: %lld more refused or dropped "
                   "clients were not logged\n",
                   address_.c_str(), static_cast<long long>(log_suppressed_));
    }
    log_window_start_ = now;
    log_lines_ = 0;
    log_suppressed_ = 0;
  }
  if (log_lines_ >= kLogBurst) {
    ++log_suppressed_;
    return;
  }
  ++log_lines_;
  std::fprintf(stderr, "loom store server %s: %.*s\n", address_.c_str(),
               static_cast<int>(what.size()), what.data());
}

void TCPStoreServer::Loop::flush(Connection& conn) {
  const bool was_backed_up = conn.pendingOut() >= kOutputHighWater;
  while (conn.pendingOut() > 0) {
    const ssize_t sent = ::send(conn.fd.get(), conn.out.data() + conn.out_start, conn.pendingOut(),
                                MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      conn.out_start += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close(conn);
    return;
  }
  if (conn.pendingOut() == 0) {
    conn.out.clear();
    conn.out_start = 0;
    if (conn.out.capacity() > kShrinkThreshold) conn.out.shrink_to_fit();
  } else if (conn.out_start >= kCompactThreshold) {
    conn.out.erase(0, conn.out_start);
    conn.out_start = 0;
  }
  if (was_backed_up && conn.pendingOut() < kOutputHighWater) {
    ready_.push_back(conn.id);
  }
  updateInterest(conn);
}

void TCPStoreServer::Loop::updateInterest(Connection& conn) {
  if (conn.closed) return;
  uint32_t want = EPOLLRDHUP;
  if (conn.parked == 0 && conn.pendingOut() < kOutputHighWater) {
    want |= EPOLLIN;
  }
  if (conn.pendingOut() > 0) want |= EPOLLOUT;
  if (want == conn.events) return;
  epoll_event event{};
  event.events = want;
  event.data.u64 = conn.id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn.fd.get(), &event) != 0) {
    close(conn);
    return;
  }
  conn.events = want;
}

void TCPStoreServer::Loop::close(Connection& conn) {
  if (conn.closed) return;
  conn.closed = true;
  if (conn.parked != 0) removeWaiter(conn.parked);
  conn.parked = 0;
  if (!conn.authenticated) {
    handshake_timers_.erase({conn.handshake_deadline, conn.id});
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
  conn.fd.reset();
  auto it = connections_.find(conn.id);
  closed_.push_back(std::move(it->second));
  connections_.erase(it);
}

void TCPStoreServer::Loop::storeValue(std::string_view key, std::string_view value) {
  // Look up before inserting: overwriting a key (counters, status flags) is
  // the common case and then needs no new key string.
  if (auto it = keys_.find(av(key)); it != keys_.end()) {
    it->second.assign(value);
    return;
  }
  keys_.emplace(std::string(key), std::string(value));
}

bool TCPStoreServer::Loop::allPresent(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& key) { return keys_.contains(key); });
}

std::string TCPStoreServer::Loop::readyReply(const Waiter& waiter) const {
  wire::Writer writer(ReplyStatus::kOk);
  switch (waiter.op) {
    case Op::kGet:
      writer.bytes(keys_.at(waiter.keys[0]));
      break;
    case Op::kMultiGet: {
      size_t total = kReplyOverhead;
      for (const std::string& key : waiter.keys) {
        total += 4 + keys_.at(key).size();
      }
      if (total > options_.max_message_bytes) {
        return wire::Writer(ReplyStatus::kStoreError)
            .bytes(absl::StrFormat("multiGet of %d keys would return %d bytes, over the %d-byte "
                                   "message limit; fetch fewer keys at once",
                                   waiter.keys.size(), total, options_.max_message_bytes))
            .finish();
      }
      writer.u32(static_cast<uint32_t>(waiter.keys.size()));
      for (const std::string& key : waiter.keys) writer.bytes(keys_.at(key));
      break;
    }
    case Op::kJoin:
      writer.i64(joined_);
      break;
    default:
      break;
  }
  return writer.finish();
}

std::string TCPStoreServer::Loop::timeoutReply(const Waiter& waiter) const {
  wire::Writer writer(ReplyStatus::kTimeout);
  if (waiter.op == Op::kJoin) {
    writer.i64(joined_);
    return writer.finish();
  }
  std::vector<const std::string*> missing;
  for (const std::string& key : waiter.keys) {
    if (!keys_.contains(key)) missing.push_back(&key);
  }
  writer.u32(static_cast<uint32_t>(missing.size()));
  for (const std::string* key : missing) writer.bytes(*key);
  return writer.finish();
}

void TCPStoreServer::Loop::park(Connection& conn, Waiter waiter, int64_t timeout_ms) {
  const uint64_t id = next_waiter_id_++;
  waiter.connection = conn.id;
  // A peer may send any i64: a timeout beyond kMaxTimeoutMs is as good as
  // none, and taking it as none keeps the deadline from overflowing.
  if (timeout_ms >= 0 && timeout_ms <= kMaxTimeoutMs) {
    waiter.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    waiter_timers_.emplace(waiter.deadline, id);
  }
  if (waiter.op == Op::kJoin) {
    join_waiters_.push_back(id);
  } else {
    // Registered under every key, not only the missing ones: a key present
    // now may be deleted before the others arrive.
    for (const std::string& key : waiter.keys) {
      key_waiters_[key].push_back(id);
    }
  }
  waiters_.emplace(id, std::move(waiter));
  conn.parked = id;
  updateInterest(conn);
}

void TCPStoreServer::Loop::keyChanged(std::string_view key) {
  auto it = key_waiters_.find(av(key));
  if (it == key_waiters_.end()) return;
  const std::vector<uint64_t> ids = it->second;
  for (uint64_t id : ids) {
    auto waiter = waiters_.find(id);
    if (waiter != waiters_.end() && allPresent(waiter->second.keys)) {
      finishWaiter(id, /*timed_out=*/false);
    }
  }
}

void TCPStoreServer::Loop::finishWaiter(uint64_t id, bool timed_out) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  const uint64_t connection = it->second.connection;
  std::string frame = timed_out ? timeoutReply(it->second) : readyReply(it->second);
  removeWaiter(id);
  Connection* conn = find(connection);
  if (conn == nullptr) return;
  conn->parked = 0;
  reply(*conn, std::move(frame));
  ready_.push_back(conn->id);
}

void TCPStoreServer::Loop::removeWaiter(uint64_t id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  Waiter& waiter = it->second;
  if (waiter.deadline != Clock::time_point::max()) {
    waiter_timers_.erase({waiter.deadline, id});
  }
  if (waiter.op == Op::kJoin) {
    join_waiters_.erase(std::remove(join_waiters_.begin(), join_waiters_.end(), id),
                        join_waiters_.end());
  }
  for (const std::string& key : waiter.keys) {
    auto list = key_waiters_.find(key);
    if (list == key_waiters_.end()) continue;
    std::vector<uint64_t>& ids = list->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) key_waiters_.erase(list);
  }
  waiters_.erase(it);
}

void TCPStoreServer::Loop::fireTimers() {
  const Clock::time_point now = Clock::now();
  while (!waiter_timers_.empty() && waiter_timers_.begin()->first <= now) {
    finishWaiter(waiter_timers_.begin()->second, /*timed_out=*/true);
  }
  while (!handshake_timers_.empty() && handshake_timers_.begin()->first <= now) {
    const uint64_t id = handshake_timers_.begin()->second;
    handshake_timers_.erase(handshake_timers_.begin());
    // A peer that never completes its handshake holds a socket and nothing
    // else; dropping it frees the descriptor for real clients.
    if (Connection* conn = find(id)) {
      logClient(absl::StrCat("dropped client ", conn->peer, ": no handshake within ",
                             absl::FormatDuration(options_.handshake_timeout)));
      close(*conn);
    }
  }
  if (accept_resume_.has_value() && *accept_resume_ <= now) {
    accept_resume_.reset();
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kListenerId;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &event);
  }
}

int TCPStoreServer::Loop::nextTimeoutMillis() const {
  std::optional<Clock::time_point> next;
  const auto consider = [&](Clock::time_point when) {
    if (!next.has_value() || when < *next) next = when;
  };
  if (!waiter_timers_.empty()) consider(waiter_timers_.begin()->first);
  if (!handshake_timers_.empty()) consider(handshake_timers_.begin()->first);
  if (accept_resume_.has_value()) consider(*accept_resume_);
  if (!next.has_value()) return -1;
  const auto left = *next - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up so the loop does not wake just before a deadline and spin.
  const int64_t millis = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(millis, 60'000));
}

void TCPStoreServer::Loop::drainReady() {
  while (!ready_.empty()) {
    std::vector<uint64_t> batch;
    batch.swap(ready_);
    for (uint64_t id : batch) {
      if (Connection* conn = find(id)) processFrames(*conn);
    }
  }
}

absl::StatusOr<std::unique_ptr<SteppedTCPStoreServer>> SteppedTCPStoreServer::create(
    const TCPStoreServerOptions& options) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll.valid() || !wake.valid()) {
    return networkError(absl::StrFormat("cannot start the store server: %s", errnoMessage(errno)));
  }
  auto loop = std::make_unique<TCPStoreServer::Loop>(options, "(stepped)", UniqueFd(),
                                                     std::move(epoll), std::move(wake));
  return std::unique_ptr<SteppedTCPStoreServer>(new SteppedTCPStoreServer(std::move(loop)));
}

SteppedTCPStoreServer::SteppedTCPStoreServer(std::unique_ptr<TCPStoreServer::Loop> loop)
    : loop_(std::move(loop)) {}

SteppedTCPStoreServer::~SteppedTCPStoreServer() = default;

void SteppedTCPStoreServer::adopt(int fd) { loop_->addConnection(UniqueFd(fd), "(adopted)"); }

void SteppedTCPStoreServer::step(absl::Duration max_wait) {
  loop_->runOnce(static_cast<int>(absl::ToInt64Milliseconds(max_wait)));
}

size_t SteppedTCPStoreServer::connections() const { return loop_->connectionCount(); }

}  // namespace loom::comm
