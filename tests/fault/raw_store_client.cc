// Implements RawStoreClient over a blocking IPv4 socket with receive
// timeouts.
#include "tests/fault/raw_store_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/time/clock.h"

namespace loom::fault {

std::string u32le(uint32_t value) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

std::string frame(const std::string& body) {
  return u32le(static_cast<uint32_t>(body.size())) + body;
}

std::string helloFrame(const std::string& token, uint16_t version) {
  std::string body(1, '\x01');
  body += u32le(0x4d4f4f4c);
  body += static_cast<char>(version & 0xff);
  body += static_cast<char>(version >> 8);
  body += u32le(static_cast<uint32_t>(token.size())) + token;
  return frame(body);
}

RawStoreClient::RawStoreClient(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ =
      fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
}

RawStoreClient::~RawStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawStoreClient::send(std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string RawStoreClient::readFrame(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (received_.size() >= 4) {
      uint32_t length = 0;
      for (int i = 0; i < 4; ++i) {
        length |= static_cast<uint32_t>(static_cast<uint8_t>(received_[i])) << (8 * i);
      }
      if (received_.size() >= 4 + static_cast<size_t>(length)) {
        std::string body = received_.substr(4, length);
        received_.erase(0, 4 + static_cast<size_t>(length));
        return body;
      }
    }
    if (!receive(deadline)) return "";
  }
}

bool RawStoreClient::closedWithin(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (receive(deadline)) {
  }
  return closed_;
}

bool RawStoreClient::receive(absl::Time deadline) {
  if (closed_) return false;
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

}  // namespace loom::fault
