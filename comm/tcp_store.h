// TCPStore: a Store served over TCP by one process of the job (usually rank
// 0) to all the others, after c10d's TCPStore; the store behind the env://
// and tcp:// init methods.
#ifndef LOOM_COMM_TCP_STORE_H_
#define LOOM_COMM_TCP_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/deadline.h"
#include "comm/socket.h"
#include "comm/store.h"
#include "comm/tcp_store_protocol.h"
#include "comm/tcp_store_server.h"

namespace loom::comm {

struct TCPStoreOptions {
  // The server's address. Clients connect to it; a server listens on it
  // (so "127.0.0.1" serves only this host, "0.0.0.0" every interface).
  std::string host = "127.0.0.1";
  // The server's port; a server may pass 0 to get a free one (see port()).
  uint16_t port = 0;
  // Whether this process runs the server (and also a client of it).
  bool is_server = false;
  // The number of processes that create a TCPStore for this job, server
  // included; when set, each one counts itself in on connecting.
  std::optional<int> num_workers;
  // With num_workers set: whether create() returns only once all of them
  // have connected (a start-up barrier).
  bool wait_for_workers = true;
  // The default timeout of blocking calls; also bounds connecting.
  absl::Duration timeout = kDefaultStoreTimeout;
  // A shared secret: when not empty, the server refuses clients that do not
  // present the same token. Every process of the job must use the same one.
  std::string token;
  // The largest message (key plus value) client and server accept.
  uint32_t max_message_bytes = wire::kDefaultMaxMessageBytes;
  // Server side: how long a new connection may stay silent before the
  // server drops it.
  absl::Duration handshake_timeout = absl::Seconds(10);
};

// A client of the store, and with is_server also its server. Connecting
// retries with exponential backoff until the timeout, so clients may start
// before the server. If the server goes away mid-job, every call fails with
// a network error (kUnavailable) naming the server; calls never hang past
// their timeout. Calls from several threads are serialised on the one
// connection, as in c10d. As in c10d, set() does not wait for the server: it
// returns once the request is sent, and later calls on this store see its
// effect (a lost connection surfaces at the next call).
class TCPStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<TCPStore>> create(const TCPStoreOptions& options);

  ~TCPStore() override;

  // The server's port (the one the kernel picked, for a server given 0).
  uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  bool isServer() const { return server_ != nullptr; }

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
  TCPStore(const TCPStoreOptions& options, std::unique_ptr<TCPStoreServer> server, uint16_t port);

  // The reply of a call: its status byte and the body after it.
  struct Reply {
    wire::ReplyStatus status;
    std::string body;
  };

  std::string address() const;
  absl::Status connect(const Deadline& deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One handshake on a fresh connection; kAborted means "retry".
  absl::Status handshake(const Deadline& deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status join(int workers, bool wait);

  // Sends `frame` and waits for the reply until `reply_deadline`. A
  // transport failure breaks the connection for good: every later call
  // reports it instead of guessing which reply belongs to which request.
  absl::StatusOr<Reply> call(std::string_view operation, const std::string& frame,
                             const Deadline& reply_deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends a request that gets no reply (set); a transport failure breaks
  // the connection as in call().
  absl::Status send(std::string_view operation, const std::string& frame) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status failLocked(absl::Status failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Reply> exchangeLocked(std::string_view operation, const std::string& frame,
                                       const Deadline& reply_deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> readFrameLocked(const Deadline& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Deadline for the reply of a request the server answers at once.
  Deadline quickDeadline() const;
  // Deadline for the reply of a request the server parks for `timeout`.
  static Deadline parkedDeadline(absl::Duration timeout);

  // Turns a non-ok reply into the error of `operation`.
  absl::Status replyError(std::string_view operation, const Reply& reply,
                          absl::Duration timeout) const;
  absl::Status checkSize(const std::string& key, size_t value_size) const;
  // Refuses a request frame over the message limit before it is sent.
  absl::Status checkFrame(std::string_view operation, const std::string& frame) const;

  const TCPStoreOptions options_;
  std::unique_ptr<TCPStoreServer> server_;
  const uint16_t port_;

  absl::Mutex mu_;
  UniqueFd socket_ ABSL_GUARDED_BY(mu_);
  // Bytes received past the last reply (a reply can arrive in pieces).
  std::string received_ ABSL_GUARDED_BY(mu_);
  // Why the connection is unusable, once it is.
  std::optional<absl::Status> broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom::comm

#endif  // LOOM_COMM_TCP_STORE_H_
