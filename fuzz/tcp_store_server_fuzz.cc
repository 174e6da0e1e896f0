// libFuzzer target for the TCPStore wire protocol, server side: feeds
// arbitrary bytes, as the traffic of up to four clients, through
// socketpairs into the real server loop (frame parser, handshake, request
// dispatcher, parked requests), stepped on this thread by
// SteppedTCPStoreServer so that every run is deterministic.
//
// Input: a sequence of commands, each starting with a byte C.
//   C & 0x80 == 0   u16 length (little-endian), then that many bytes, sent
//                   by client C % 4; then the server handles what it can
//   C & 0x80 != 0   client C % 4 hangs up (shuts down its sending side)
// Afterwards every client hangs up and the server drains. The server
// requires the token "fuzz"; fuzz/corpus/tcp_store_server holds seeds with
// valid handshakes and requests.
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/tcp_store_server.h"

namespace {

constexpr int kClients = 4;

// Reads and discards whatever the server has sent a client, so that replies
// never back up into the server's output limits unless the input says so.
void drain(int fd) {
  char buffer[4096];
  while (::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::comm::TCPStoreServerOptions options;
  options.token = "fuzz";
  // Small enough that inputs reach the limit paths.
  options.max_message_bytes = 1 << 16;
  absl::StatusOr<std::unique_ptr<loom::comm::SteppedTCPStoreServer>> server =
      loom::comm::SteppedTCPStoreServer::create(options);
  if (!server.ok()) std::abort();
  std::array<int, kClients> clients;
  for (int& client : clients) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
      std::abort();
    }
    client = pair[0];
    (*server)->adopt(pair[1]);
  }
  size_t at = 0;
  while (at < size) {
    const uint8_t command = data[at++];
    const int client = clients[command % kClients];
    if (command & 0x80) {
      ::shutdown(client, SHUT_WR);
    } else {
      if (at + 2 > size) break;
      size_t length = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
      at += 2;
      if (length > size - at) length = size - at;
      // A full socket buffer only drops the rest of this chunk.
      [[maybe_unused]] const ssize_t sent =
          ::send(client, data + at, length, MSG_DONTWAIT | MSG_NOSIGNAL);
      at += length;
    }
    (*server)->step(absl::ZeroDuration());
    for (int fd : clients) drain(fd);
  }
  for (int fd : clients) ::shutdown(fd, SHUT_WR);
  for (int round = 0; round < 8 && (*server)->connections() > 0; ++round) {
    (*server)->step(absl::ZeroDuration());
    for (int fd : clients) drain(fd);
  }
  for (int fd : clients) ::close(fd);
  return 0;
}
