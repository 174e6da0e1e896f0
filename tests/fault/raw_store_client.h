// A hand-driven TCPStore client for the fault and security tests: a plain
// blocking socket that sends exactly the bytes a test gives it (whole
// frames, partial frames, lies about lengths) and reads the server's reply
// frames. The frame layout follows docs/comm_store.md ("Wire protocol").
#ifndef LOOM_TESTS_FAULT_RAW_STORE_CLIENT_H_
#define LOOM_TESTS_FAULT_RAW_STORE_CLIENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace loom::fault {

// Encoders for the few frames the tests need.
std::string u32le(uint32_t value);
// A frame: u32 length, then `body`.
std::string frame(const std::string& body);
// The handshake frame: Hello, magic, version, token.
std::string helloFrame(const std::string& token, uint16_t version = 1);

// Reply statuses (docs/comm_store.md).
inline constexpr uint8_t kReplyOk = 0;
inline constexpr uint8_t kReplyBadRequest = 3;
inline constexpr uint8_t kReplyBadToken = 4;

class RawStoreClient {
 public:
  // Connects to 127.0.0.1:port (check connected()).
  explicit RawStoreClient(uint16_t port);
  ~RawStoreClient();
  RawStoreClient(const RawStoreClient&) = delete;
  RawStoreClient& operator=(const RawStoreClient&) = delete;

  bool connected() const { return connected_; }
  // Sends all of `bytes`; false if the connection refused them.
  bool send(std::string_view bytes);
  // The body of the next reply frame, or "" if none arrives in time.
  std::string readFrame(absl::Duration timeout);
  // Whether the server closes the connection within `timeout` (replies that
  // arrive first are skipped).
  bool closedWithin(absl::Duration timeout);

 private:
  bool receive(absl::Time deadline);

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

}  // namespace loom::fault

#endif  // LOOM_TESTS_FAULT_RAW_STORE_CLIENT_H_
