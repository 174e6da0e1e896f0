// The TCPStore server: one event-driven thread (epoll) that holds the keys
// and serves every client connection of a job.
#ifndef LOOM_COMM_TCP_STORE_SERVER_H_
#define LOOM_COMM_TCP_STORE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/tcp_store_protocol.h"

namespace loom::comm {

struct TCPStoreServerOptions {
  // The address to listen on ("" for every interface) and the port (0: the
  // kernel picks a free one; read it back with port()).
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // When not empty, a client must present this token in its handshake.
  std::string token;
  // The largest frame accepted after the handshake; also caps the values
  // that append and multiGet may produce.
  uint32_t max_message_bytes = wire::kDefaultMaxMessageBytes;
  // How long a new connection may take to complete its handshake before the
  // server drops it.
  absl::Duration handshake_timeout = absl::Seconds(10);
};

// Serves the store on its own thread until destroyed. One thread multiplexes
// all connections with epoll; sockets are non-blocking and every connection
// has bounded buffers, so a slow, silent or hostile peer only ever costs its
// own connection. Blocking requests (get, wait, multiGet, join) are parked
// and answered when their keys appear or their deadline passes.
class TCPStoreServer {
 public:
  static absl::StatusOr<std::unique_ptr<TCPStoreServer>> start(
      const TCPStoreServerOptions& options);

  // Stops serving and closes every connection; clients see the connection
  // drop and report a network error.
  ~TCPStoreServer();

  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  friend class SteppedTCPStoreServer;
  class Loop;

  TCPStoreServer(std::unique_ptr<Loop> loop, uint16_t port);

  std::unique_ptr<Loop> loop_;
  uint16_t port_;
  std::thread thread_;
};

// The same server loop without a thread or a listening socket: the caller
// hands it connected sockets (e.g. one end of a socketpair) and runs the
// loop one round at a time on its own thread. For the wire-protocol fuzzer
// (fuzz/tcp_store_server_fuzz.cc), which must drive the real frame parser
// and dispatcher deterministically; jobs use TCPStoreServer.
class SteppedTCPStoreServer {
 public:
  static absl::StatusOr<std::unique_ptr<SteppedTCPStoreServer>> create(
      const TCPStoreServerOptions& options);
  ~SteppedTCPStoreServer();

  SteppedTCPStoreServer(const SteppedTCPStoreServer&) = delete;
  SteppedTCPStoreServer& operator=(const SteppedTCPStoreServer&) = delete;

  // Serves `fd`, a connected stream socket whose ownership passes here, as
  // a newly accepted client.
  void adopt(int fd);
  // Waits up to `max_wait` for events, then handles them and every
  // deadline that is due.
  void step(absl::Duration max_wait);
  // The connections still open.
  size_t connections() const;

 private:
  explicit SteppedTCPStoreServer(std::unique_ptr<TCPStoreServer::Loop> loop);

  std::unique_ptr<TCPStoreServer::Loop> loop_;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_TCP_STORE_SERVER_H_
