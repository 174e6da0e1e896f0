// Implements the socket helpers of socket.h over poll(2), so that every
// wait is bounded by a Deadline and no call can block forever.
#include "comm/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/errors.h"

namespace loom::comm {
namespace {

// Waits for `events` on `fd` until the deadline; returns the poll result
// (> 0 ready, 0 timed out, < 0 error other than EINTR).
int pollFor(int fd, short events, const Deadline& deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    // Wake at least once a minute so that an infinite deadline still polls
    // in bounded steps.
    const int result = ::poll(&entry, 1, deadline.pollMillis(60'000));
    if (result < 0 && errno == EINTR) continue;
    if (result == 0 && !deadline.expired()) continue;
    return result;
  }
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errnoMessage(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = absl::ascii_tolower(text[0]);
  return text;
}

std::string formatHostPort(std::string_view host, uint16_t port) {
  const absl::string_view name(host.data(), host.size());
  if (name.find(':') != absl::string_view::npos) {
    return absl::StrCat("[", name, "]:", port);
  }
  return absl::StrCat(name, ":", port);
}

absl::StatusOr<std::vector<SocketAddress>> resolveHost(const std::string& host, uint16_t port,
                                                       bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* results = nullptr;
  const std::string service = absl::StrCat(port);
  const int error =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &results);
  if (error != 0) {
    const std::string reason = error == EAI_SYSTEM ? errnoMessage(errno) : ::gai_strerror(error);
    const std::string message = absl::StrFormat(
        "cannot resolve host '%s': %s; check the host name (MASTER_ADDR)", host, reason);
    // A resolver that is down may come back; a name that does not exist
    // will not.
    return error == EAI_AGAIN ? networkError(message) : invalidArgumentError(message);
  }
  std::vector<SocketAddress> addresses;
  for (const addrinfo* it = results; it != nullptr; it = it->ai_next) {
    SocketAddress address;
    std::memcpy(&address.storage, it->ai_addr, it->ai_addrlen);
    address.length = it->ai_addrlen;
    address.family = it->ai_family;
    addresses.push_back(address);
  }
  ::freeaddrinfo(results);
  if (addresses.empty()) {
    return invalidArgumentError(absl::StrFormat("host '%s' has no TCP address", host));
  }
  return addresses;
}

absl::StatusOr<std::pair<UniqueFd, uint16_t>> listenTcp(const std::string& host, uint16_t port) {
  absl::StatusOr<std::vector<SocketAddress>> addresses = resolveHost(host, port, /*passive=*/true);
  if (!addresses.ok()) return addresses.status();
  int last_error = 0;
  for (const SocketAddress& address : *addresses) {
    UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last_error = errno;
      continue;
    }
    // Lets a restarted job rebind the port while old connections sit in
    // TIME_WAIT; it does not let two live servers share the port.
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) !=
            0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
      last_error = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      last_error = errno;
      continue;
    }
    const uint16_t bound_port =
        bound.ss_family == AF_INET6
            ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
            : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return std::make_pair(std::move(fd), bound_port);
  }
  return networkError(
      absl::StrFormat("cannot listen on %s: %s; pick a free port (0 lets the system choose) "
                      "and an address of this host",
                      formatHostPort(host, port), errnoMessage(last_error)));
}

ConnectAttempt connectTcp(const SocketAddress& address, const Deadline& deadline) {
  ConnectAttempt attempt;
  UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    attempt.error = errno;
    return attempt;
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) !=
      0) {
    if (errno != EINPROGRESS) {
      attempt.error = errno;
      return attempt;
    }
    const int ready = pollFor(fd.get(), POLLOUT, deadline);
    if (ready <= 0) {
      attempt.error = ready == 0 ? ETIMEDOUT : errno;
      return attempt;
    }
    int error = 0;
    socklen_t length = sizeof(error);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
      error = errno;
    }
    if (error != 0) {
      attempt.error = error;
      return attempt;
    }
  }
  setNoDelay(fd.get());
  attempt.fd = std::move(fd);
  return attempt;
}

void setNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::Status sendAll(int fd, std::string_view data, const Deadline& deadline) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t sent =
        ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      done += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int ready = pollFor(fd, POLLOUT, deadline);
      if (ready == 0) {
        return timeoutError("the peer stopped reading before the deadline");
      }
      if (ready < 0) return networkError(errnoMessage(errno));
      continue;
    }
    return networkError(errnoMessage(sent < 0 ? errno : EPIPE));
  }
  return absl::OkStatus();
}

absl::Status receiveSome(int fd, std::string& buffer, size_t max_bytes, const Deadline& deadline) {
  char chunk[64 * 1024];
  while (true) {
    // Poll first: a caller receives when it expects a reply that is usually
    // still on its way, so a speculative recv() would mostly be wasted.
    const int ready = pollFor(fd, POLLIN, deadline);
    if (ready == 0) return timeoutError("no reply before the deadline");
    if (ready < 0) return networkError(errnoMessage(errno));
    const ssize_t got = ::recv(fd, chunk, std::min(sizeof(chunk), max_bytes), MSG_DONTWAIT);
    if (got > 0) {
      buffer.append(chunk, static_cast<size_t>(got));
      return absl::OkStatus();
    }
    if (got == 0) return networkError("connection closed by peer");
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return networkError(errnoMessage(errno));
  }
}

}  // namespace loom::comm
