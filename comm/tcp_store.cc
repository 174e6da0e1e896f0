// Implements the TCPStore client: connecting with backoff, the handshake,
// and one request/reply exchange per Store call, each bounded by a deadline.
#include "comm/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

using wire::Op;
using wire::ReplyStatus;

// Connecting backs off from a quick retry (the server is usually a moment
// from listening) to a slow one (it is still being scheduled).
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(10);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// The server answers a parked request at its deadline; the client waits
// this much longer before it declares the server unresponsive.
constexpr absl::Duration kReplyGrace = absl::Seconds(5);
// A request frame adds its length, its op and two length fields.
constexpr size_t kRequestOverhead = wire::kFrameHeaderSize + 1 + 8;

absl::string_view av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// Spreads the retries of many clients that started together, so that they
// do not hit a just-started server in lockstep.
absl::Duration jittered(absl::Duration backoff) {
  thread_local std::minstd_rand random(static_cast<unsigned>(
      ::getpid() ^ std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<double> factor(0.5, 1.0);
  return backoff * factor(random);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TCPStore>> TCPStore::create(const TCPStoreOptions& options) {
  if (!options.is_server && options.port == 0) {
    return invalidArgumentError(
        absl::StrFormat("TCPStore client for host '%s' has port 0; pass the server's port "
                        "(MASTER_PORT)",
                        options.host));
  }
  if (options.num_workers.has_value() && *options.num_workers < 1) {
    return invalidArgumentError(
        absl::StrFormat("TCPStore num_workers is %d; it counts every process of the job, the "
                        "server's included, so it must be at least 1",
                        *options.num_workers));
  }
  if (options.token.size() > wire::kMaxTokenBytes) {
    return invalidArgumentError(absl::StrFormat("TCPStore token has %d bytes; the limit is %d",
                                                options.token.size(), wire::kMaxTokenBytes));
  }
  if (options.max_message_bytes < wire::kMinMaxMessageBytes) {
    return invalidArgumentError(
        absl::StrFormat("TCPStore max_message_bytes %d is below the minimum of %d",
                        options.max_message_bytes, wire::kMinMaxMessageBytes));
  }
  std::unique_ptr<TCPStoreServer> server;
  uint16_t port = options.port;
  if (options.is_server) {
    TCPStoreServerOptions server_options;
    server_options.host = options.host;
    server_options.port = options.port;
    server_options.token = options.token;
    server_options.max_message_bytes = options.max_message_bytes;
    server_options.handshake_timeout = options.handshake_timeout;
    absl::StatusOr<std::unique_ptr<TCPStoreServer>> started = TCPStoreServer::start(server_options);
    if (!started.ok()) return started.status();
    server = std::move(*started);
    port = server->port();
  }
  std::unique_ptr<TCPStore> store(new TCPStore(options, std::move(server), port));
  {
    absl::MutexLock lock(&store->mu_);
    if (absl::Status status = store->connect(Deadline::after(options.timeout)); !status.ok()) {
      return status;
    }
  }
  if (options.num_workers.has_value()) {
    if (absl::Status status = store->join(*options.num_workers, options.wait_for_workers);
        !status.ok()) {
      return status;
    }
  }
  return store;
}

TCPStore::TCPStore(const TCPStoreOptions& options, std::unique_ptr<TCPStoreServer> server,
                   uint16_t port)
    : Store(options.timeout), options_(options), server_(std::move(server)), port_(port) {}

TCPStore::~TCPStore() = default;

std::string TCPStore::address() const { return formatHostPort(options_.host, port_); }

absl::Status TCPStore::connect(const Deadline& deadline) {
  absl::Duration backoff = kFirstBackoff;
  int attempts = 0;
  std::string last_problem = "no attempt finished";
  while (true) {
    ++attempts;
    absl::StatusOr<std::vector<SocketAddress>> addresses =
        resolveHost(options_.host, port_, /*passive=*/false);
    if (!addresses.ok()) {
      if (errorKind(addresses.status()) != ErrorKind::kNetwork) {
        return addresses.status();
      }
      last_problem = std::string(addresses.status().message());
    } else {
      for (const SocketAddress& address : *addresses) {
        ConnectAttempt attempt = connectTcp(address, deadline);
        if (!attempt.fd.valid()) {
          last_problem = errnoMessage(attempt.error);
          continue;
        }
        socket_ = std::move(attempt.fd);
        received_.clear();
        absl::Status status = handshake(deadline);
        if (status.ok()) return status;
        socket_.reset();
        if (status.code() != absl::StatusCode::kAborted) return status;
        last_problem = std::string(status.message());
      }
    }
    if (deadline.expired()) {
      return timeoutError(
          absl::StrFormat("could not connect to the store server at %s within %s (%d "
                          "attempts, last: %s); check that the server (rank 0) is running "
                          "and that host and port (MASTER_ADDR, MASTER_PORT) point at it",
                          address(), absl::FormatDuration(timeout()), attempts, last_problem));
    }
    absl::SleepFor(std::min(jittered(backoff), deadline.remaining()));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::Status TCPStore::handshake(const Deadline& deadline) {
  const std::string hello =
      wire::Writer(Op::kHello).u32(wire::kMagic).u16(wire::kVersion).bytes(options_.token).finish();
  if (absl::Status sent = sendAll(socket_.get(), hello, deadline); !sent.ok()) {
    return absl::AbortedError(sent.message());
  }
  absl::StatusOr<std::string> body = readFrameLocked(deadline);
  // Something that is not a loom store answered: retrying will not help.
  if (errorKind(body.status()) == ErrorKind::kStore) return body.status();
  if (!body.ok()) {
    // A server that is starting or overloaded may drop a fresh connection;
    // that is worth another attempt.
    return absl::AbortedError(absl::StrCat("handshake: ", body.status().message()));
  }
  wire::Reader reader(*body);
  const auto status = static_cast<ReplyStatus>(reader.u8());
  if (status == ReplyStatus::kOk) {
    reader.u16();
    if (reader.finished()) return absl::OkStatus();
  }
  const std::string message(reader.bytes());
  switch (status) {
    case ReplyStatus::kBadToken:
      return storeError(
          absl::StrFormat("the store server at %s rejected this client's token (%s); give "
                          "every rank the job's token (TCPStoreOptions::token, "
                          "LOOM_STORE_TOKEN)",
                          address(), message),
          absl::StatusCode::kPermissionDenied);
    case ReplyStatus::kBadVersion:
      return storeError(
          absl::StrFormat("the store server at %s speaks another protocol version (%s); run "
                          "every rank from the same build",
                          address(), message));
    default:
      return storeError(absl::StrFormat("the store server at %s refused the handshake (%s); "
                                        "is a loom store listening on that port?",
                                        address(), message),
                        absl::StatusCode::kInternal);
  }
}

absl::Status TCPStore::join(int workers, bool wait) {
  const std::string frame =
      wire::Writer(Op::kJoin).i64(wait ? workers : 0).i64(wire::encodeTimeout(timeout())).finish();
  absl::StatusOr<Reply> reply = call("joining", frame, parkedDeadline(timeout()));
  if (!reply.ok()) return reply.status();
  wire::Reader reader(reply->body);
  const int64_t joined = reader.i64();
  if (reply->status == ReplyStatus::kTimeout) {
    return timeoutError(
        absl::StrFormat("only %d of %d workers joined the store at %s within %s; start the "
                        "missing ranks or raise the timeout",
                        joined, workers, address(), absl::FormatDuration(timeout())));
  }
  if (reply->status != ReplyStatus::kOk) {
    return replyError("joining", *reply, timeout());
  }
  return absl::OkStatus();
}

Deadline TCPStore::quickDeadline() const { return Deadline::after(timeout()); }

Deadline TCPStore::parkedDeadline(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return Deadline::after(timeout);
  return Deadline::after(std::max(timeout, absl::ZeroDuration()) + kReplyGrace);
}

absl::Status TCPStore::checkFrame(std::string_view operation, const std::string& frame) const {
  if (frame.size() - wire::kFrameHeaderSize <= options_.max_message_bytes) {
    return absl::OkStatus();
  }
  return invalidArgumentError(absl::StrFormat(
      "%s needs a %d-byte message, over the %d-byte limit; keep keys and "
      "values smaller or raise max_message_bytes on every rank",
      av(operation), frame.size() - wire::kFrameHeaderSize, options_.max_message_bytes));
}

absl::StatusOr<TCPStore::Reply> TCPStore::call(std::string_view operation, const std::string& frame,
                                               const Deadline& reply_deadline) {
  if (absl::Status status = checkFrame(operation, frame); !status.ok()) {
    return status;
  }
  absl::MutexLock lock(&mu_);
  return exchangeLocked(operation, frame, reply_deadline);
}

absl::Status TCPStore::send(std::string_view operation, const std::string& frame) {
  if (absl::Status status = checkFrame(operation, frame); !status.ok()) {
    return status;
  }
  absl::MutexLock lock(&mu_);
  if (broken_.has_value()) return *broken_;
  absl::Status sent = sendAll(socket_.get(), frame, quickDeadline());
  if (sent.ok()) return sent;
  return failLocked(networkError(
      absl::StrFormat("lost the connection to the store server at %s during %s (%s); the "
                      "server process (rank 0) may have exited",
                      address(), av(operation), sent.message())));
}

absl::Status TCPStore::failLocked(absl::Status failure) {
  // After a failed exchange a late reply could still arrive and be taken
  // for the answer to the next request; the connection is done for.
  broken_ = failure;
  socket_.reset();
  return failure;
}

absl::StatusOr<TCPStore::Reply> TCPStore::exchangeLocked(std::string_view operation,
                                                         const std::string& frame,
                                                         const Deadline& reply_deadline) {
  if (broken_.has_value()) return *broken_;
  absl::Status failure;
  if (absl::Status sent = sendAll(socket_.get(), frame, reply_deadline); !sent.ok()) {
    failure = networkError(
        absl::StrFormat("lost the connection to the store server at %s during %s (%s); the "
                        "server process (rank 0) may have exited",
                        address(), av(operation), sent.message()));
  } else {
    absl::StatusOr<std::string> body = readFrameLocked(reply_deadline);
    if (body.ok()) {
      wire::Reader reader(*body);
      Reply reply{static_cast<ReplyStatus>(reader.u8()), ""};
      if (!reader.ok()) {
        failure = storeError(absl::StrFormat("empty reply from the store server at %s to %s",
                                             address(), av(operation)),
                             absl::StatusCode::kInternal);
      } else {
        reply.body = body->substr(1);
        // The server closes the connection after refusing a request.
        if (reply.status == ReplyStatus::kBadRequest) {
          broken_ = networkError(
              absl::StrFormat("the store server at %s closed the connection after refusing "
                              "a request",
                              address()));
          socket_.reset();
        }
        return reply;
      }
    } else if (body.status().code() == absl::StatusCode::kDeadlineExceeded) {
      failure = timeoutError(
          absl::StrFormat("no reply from the store server at %s to %s in time; the server "
                          "is stopped or overloaded",
                          address(), av(operation)));
    } else if (errorKind(body.status()) == ErrorKind::kNetwork) {
      failure = networkError(
          absl::StrFormat("the store server at %s went away during %s (%s); the server "
                          "process (rank 0) may have exited",
                          address(), av(operation), body.status().message()));
    } else {
      failure = body.status();
    }
  }
  return failLocked(failure);
}

absl::StatusOr<std::string> TCPStore::readFrameLocked(const Deadline& deadline) {
  while (true) {
    if (std::optional<uint32_t> length = wire::peekFrameLength(received_)) {
      if (*length > options_.max_message_bytes) {
        return storeError(absl::StrFormat("the store server at %s sent a %d-byte reply, "
                                          "over the %d-byte limit; is it a loom store?",
                                          address(), *length, options_.max_message_bytes),
                          absl::StatusCode::kInternal);
      }
      const size_t frame_size = wire::kFrameHeaderSize + *length;
      if (received_.size() >= frame_size) {
        std::string body = received_.substr(wire::kFrameHeaderSize, *length);
        received_.erase(0, frame_size);
        return body;
      }
    }
    if (absl::Status status = receiveSome(socket_.get(), received_, 64 << 10, deadline);
        !status.ok()) {
      return status;
    }
  }
}

absl::Status TCPStore::replyError(std::string_view operation, const Reply& reply,
                                  absl::Duration timeout) const {
  wire::Reader reader(reply.body);
  switch (reply.status) {
    case ReplyStatus::kTimeout: {
      const uint32_t count = reader.count(4);
      std::vector<std::string> missing;
      for (uint32_t i = 0; i < count && reader.ok(); ++i) {
        missing.emplace_back(reader.bytes());
      }
      return keysTimeoutError(operation, missing, timeout);
    }
    case ReplyStatus::kStoreError:
      return storeError(reader.bytes());
    case ReplyStatus::kBadRequest:
      return storeError(absl::StrFormat("the store server at %s refused %s (%s)", address(),
                                        av(operation), reader.bytes()),
                        absl::StatusCode::kInternal);
    default:
      return storeError(absl::StrFormat("unexpected reply %d from the store server at %s "
                                        "to %s; is a loom store listening on that port?",
                                        static_cast<int>(reply.status), address(), av(operation)),
                        absl::StatusCode::kInternal);
  }
}

absl::Status TCPStore::checkSize(const std::string& key, size_t value_size) const {
  if (key.size() + value_size + kRequestOverhead <= options_.max_message_bytes) {
    return absl::OkStatus();
  }
  return invalidArgumentError(
      absl::StrFormat("key %s with a %d-byte value exceeds the %d-byte message limit; keep "
                      "values smaller or raise max_message_bytes on every rank",
                      describeKey(key), value_size, options_.max_message_bytes));
}

absl::Status TCPStore::set(const std::string& key, const Bytes& value) {
  if (absl::Status status = checkSize(key, value.size()); !status.ok()) {
    return status;
  }
  return send(absl::StrCat("set of key ", describeKey(key)),
              wire::Writer(Op::kSet).bytes(key).bytes(asStringView(value)).finish());
}

absl::StatusOr<Bytes> TCPStore::get(const std::string& key) {
  const absl::Duration timeout = this->timeout();
  absl::StatusOr<Reply> reply =
      call(absl::StrCat("get of key ", describeKey(key)),
           wire::Writer(Op::kGet).bytes(key).i64(wire::encodeTimeout(timeout)).finish(),
           parkedDeadline(timeout));
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("get", *reply, timeout);
  }
  wire::Reader reader(reply->body);
  return toBytes(reader.bytes());
}

absl::StatusOr<int64_t> TCPStore::add(const std::string& key, int64_t delta) {
  absl::StatusOr<Reply> reply =
      call(absl::StrCat("add on key ", describeKey(key)),
           wire::Writer(Op::kAdd).bytes(key).i64(delta).finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("add", *reply, timeout());
  }
  wire::Reader reader(reply->body);
  return reader.i64();
}

absl::StatusOr<Bytes> TCPStore::compareSet(const std::string& key, const Bytes& expected,
                                           const Bytes& desired) {
  if (absl::Status status = checkSize(key, expected.size() + desired.size() + 4); !status.ok()) {
    return status;
  }
  absl::StatusOr<Reply> reply = call(absl::StrCat("compareSet of key ", describeKey(key)),
                                     wire::Writer(Op::kCompareSet)
                                         .bytes(key)
                                         .bytes(asStringView(expected))
                                         .bytes(asStringView(desired))
                                         .finish(),
                                     quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("compareSet", *reply, timeout());
  }
  wire::Reader reader(reply->body);
  return toBytes(reader.bytes());
}

absl::StatusOr<bool> TCPStore::deleteKey(const std::string& key) {
  absl::StatusOr<Reply> reply =
      call(absl::StrCat("deleteKey of key ", describeKey(key)),
           wire::Writer(Op::kDelete).bytes(key).finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("deleteKey", *reply, timeout());
  }
  wire::Reader reader(reply->body);
  return reader.u8() != 0;
}

absl::StatusOr<bool> TCPStore::check(const std::vector<std::string>& keys) {
  wire::Writer writer(Op::kCheck);
  writer.u32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) writer.bytes(key);
  absl::StatusOr<Reply> reply =
      call(absl::StrCat("check of keys ", describeKeys(keys)), writer.finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("check", *reply, timeout());
  }
  wire::Reader reader(reply->body);
  return reader.u8() != 0;
}

absl::StatusOr<int64_t> TCPStore::numKeys() {
  absl::StatusOr<Reply> reply =
      call("numKeys", wire::Writer(Op::kNumKeys).finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("numKeys", *reply, timeout());
  }
  wire::Reader reader(reply->body);
  return reader.i64();
}

absl::Status TCPStore::wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  wire::Writer writer(Op::kWait);
  writer.u32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) writer.bytes(key);
  writer.i64(wire::encodeTimeout(timeout));
  absl::StatusOr<Reply> reply = call(absl::StrCat("wait for keys ", describeKeys(keys)),
                                     writer.finish(), parkedDeadline(timeout));
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("wait", *reply, timeout);
  }
  return absl::OkStatus();
}

absl::Status TCPStore::append(const std::string& key, const Bytes& value) {
  if (absl::Status status = checkSize(key, value.size()); !status.ok()) {
    return status;
  }
  absl::StatusOr<Reply> reply = call(
      absl::StrCat("append to key ", describeKey(key)),
      wire::Writer(Op::kAppend).bytes(key).bytes(asStringView(value)).finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("append", *reply, timeout());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Bytes>> TCPStore::multiGet(const std::vector<std::string>& keys) {
  const absl::Duration timeout = this->timeout();
  wire::Writer writer(Op::kMultiGet);
  writer.u32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) writer.bytes(key);
  writer.i64(wire::encodeTimeout(timeout));
  absl::StatusOr<Reply> reply = call(absl::StrCat("multiGet of keys ", describeKeys(keys)),
                                     writer.finish(), parkedDeadline(timeout));
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("multiGet", *reply, timeout);
  }
  wire::Reader reader(reply->body);
  const uint32_t count = reader.count(4);
  std::vector<Bytes> values;
  values.reserve(count);
  for (uint32_t i = 0; i < count; ++i) values.push_back(toBytes(reader.bytes()));
  if (!reader.finished() || values.size() != keys.size()) {
    return storeError(
        absl::StrFormat("malformed multiGet reply from the store server at %s", address()),
        absl::StatusCode::kInternal);
  }
  return values;
}

absl::Status TCPStore::multiSet(const std::vector<std::string>& keys,
                                const std::vector<Bytes>& values) {
  if (absl::Status status = checkMultiSetArgs(keys, values); !status.ok()) {
    return status;
  }
  wire::Writer writer(Op::kMultiSet);
  writer.u32(static_cast<uint32_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    writer.bytes(keys[i]).bytes(asStringView(values[i]));
  }
  absl::StatusOr<Reply> reply =
      call(absl::StrCat("multiSet of keys ", describeKeys(keys)), writer.finish(), quickDeadline());
  if (!reply.ok()) return reply.status();
  if (reply->status != ReplyStatus::kOk) {
    return replyError("multiSet", *reply, timeout());
  }
  return absl::OkStatus();
}

}  // namespace loom::comm
