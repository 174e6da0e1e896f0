// Small POSIX socket helpers shared by the TCPStore client and server: an
// owning file descriptor, name resolution, listening, and deadline-bounded
// sends and receives.
#ifndef LOOM_COMM_SOCKET_H_
#define LOOM_COMM_SOCKET_H_

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/deadline.h"

namespace loom::comm {

// Owns a file descriptor and closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// One resolved address of a host name.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = 0;
};

// "host:port", with IPv6 literals bracketed, for messages.
std::string formatHostPort(std::string_view host, uint16_t port);

// The addresses of `host` for TCP (IPv4 and IPv6), in resolver order. An
// empty host means every local interface (passive) or loopback.
absl::StatusOr<std::vector<SocketAddress>> resolveHost(const std::string& host, uint16_t port,
                                                       bool passive);

// A non-blocking listening socket on `host`:`port` (0: the kernel picks a
// free port); returns the socket and the port it got.
absl::StatusOr<std::pair<UniqueFd, uint16_t>> listenTcp(const std::string& host, uint16_t port);

// The result of one non-blocking connect attempt: a connected socket, or the
// errno that refused it (ECONNREFUSED while the server is not up yet, ...),
// or ETIMEDOUT when the deadline passed first.
struct ConnectAttempt {
  UniqueFd fd;
  int error = 0;
};
ConnectAttempt connectTcp(const SocketAddress& address, const Deadline& deadline);

// Disables Nagle's algorithm: every store message is a small request that
// waits for its reply, so batching would only add latency.
void setNoDelay(int fd);

// Sends all of `data` on non-blocking `fd`, polling as needed. Errors:
// kDeadlineExceeded when the deadline passes, kUnavailable when the peer
// closed or reset the connection (message: what happened, lowercase).
absl::Status sendAll(int fd, std::string_view data, const Deadline& deadline);

// Receives at least one byte into the end of `buffer` (up to `max_bytes`).
// Errors as sendAll; a clean close by the peer is kUnavailable "connection
// closed by peer".
absl::Status receiveSome(int fd, std::string& buffer, size_t max_bytes, const Deadline& deadline);

// The text of errno value `error`, e.g. "connection refused".
std::string errnoMessage(int error);

}  // namespace loom::comm

#endif  // LOOM_COMM_SOCKET_H_
