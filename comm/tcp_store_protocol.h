// The TCPStore wire protocol (version 1): framing, message types and the
// encoder/decoder that client and server share. docs/comm_store.md has the
// full specification.
#ifndef LOOM_COMM_TCP_STORE_PROTOCOL_H_
#define LOOM_COMM_TCP_STORE_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace loom::comm::wire {

// Every message is a frame: a little-endian u32 body length, then the body.
// A request body starts with its Op, a reply body with its ReplyStatus;
// integers are little-endian, byte strings are a u32 length then the bytes.
inline constexpr size_t kFrameHeaderSize = 4;

// The first frame on a connection is a kHello carrying this magic ("LOOM" on
// the wire), the protocol version and the job's token.
inline constexpr uint32_t kMagic = 0x4d4f4f4c;
inline constexpr uint16_t kVersion = 1;

// Before the handshake succeeds a peer is a stranger: its frames may be at
// most this long, so a stray connection cannot make the server allocate.
inline constexpr uint32_t kMaxHandshakeBytes = 2048;
inline constexpr size_t kMaxTokenBytes = 1024;

// The default bound on any frame after the handshake (requests and replies);
// keys and values must fit in one frame.
inline constexpr uint32_t kDefaultMaxMessageBytes = 64u << 20;
// The smallest limit a store accepts: room for ordinary keys and values.
inline constexpr uint32_t kMinMaxMessageBytes = 4096;

enum class Op : uint8_t {
  kHello = 1,       // u32 magic, u16 version, bytes token
  kSet = 2,         // bytes key, bytes value; no reply (see below)
  kGet = 3,         // bytes key, i64 timeout_ms
  kAdd = 4,         // bytes key, i64 delta
  kCompareSet = 5,  // bytes key, bytes expected, bytes desired
  kDelete = 6,      // bytes key
  kCheck = 7,       // u32 n, n x bytes key
  kNumKeys = 8,     // (nothing)
  kWait = 9,        // u32 n, n x bytes key, i64 timeout_ms
  kAppend = 10,     // bytes key, bytes value
  kMultiGet = 11,   // u32 n, n x bytes key, i64 timeout_ms
  kMultiSet = 12,   // u32 n, n x (bytes key, bytes value)
  kJoin = 13,       // i64 target_workers (0: do not wait), i64 timeout_ms
};

// Every request gets exactly one reply, in order, except kSet, which gets
// none: as in c10d, a rank publishes keys without paying a round trip each.
// Ordering still holds, since the server handles a connection's requests in
// sequence, so any later reply on that connection implies the set is done.
enum class ReplyStatus : uint8_t {
  // Then the op's result: kHello u16 version; kGet/kCompareSet bytes value;
  // kAdd/kNumKeys i64; kDelete/kCheck u8 bool; kMultiGet u32 n, n x bytes;
  // kJoin i64 workers joined; the rest nothing.
  kOk = 0,
  // A blocking op ran out of time. kGet/kWait/kMultiGet: u32 n, n x bytes
  // (the keys still missing); kJoin: i64 workers joined so far.
  kTimeout = 1,
  // The op is not possible on the stored data (add on a non-integer, a value
  // over the size limit); bytes message. The connection stays usable.
  kStoreError = 2,
  // The request was malformed or too large; bytes message. The server then
  // closes the connection.
  kBadRequest = 3,
  // Handshake refusals, each with a bytes message; the server then closes.
  kBadToken = 4,
  kBadVersion = 5,
};

// A timeout as sent on the wire: milliseconds, rounded up; -1 means "no
// timeout".
int64_t encodeTimeout(absl::Duration timeout);

// Builds one frame. Usage: Writer w(Op::kSet); w.bytes(k); w.bytes(v);
// then send w.finish().
class Writer {
 public:
  explicit Writer(uint8_t type);
  explicit Writer(Op op) : Writer(static_cast<uint8_t>(op)) {}
  explicit Writer(ReplyStatus status) : Writer(static_cast<uint8_t>(status)) {}

  Writer& u8(uint8_t value);
  Writer& u16(uint16_t value);
  Writer& u32(uint32_t value);
  Writer& i64(int64_t value);
  Writer& bytes(std::string_view value);

  // Patches the length into the header and hands over the frame.
  std::string finish();

 private:
  std::string frame_;
};

// Reads a frame body. Reading past the end sets a sticky failure and yields
// zeros/empty strings, so a decoder reads every field and checks ok() once.
class Reader {
 public:
  explicit Reader(std::string_view body) : rest_(body) {}
  // The reader keeps a view of the body, so a temporary string would
  // dangle (AddressSanitizer caught a test doing this).
  explicit Reader(std::string&& body) = delete;

  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  int64_t i64();
  std::string_view bytes();
  // A u32 count of items that each take at least `min_item_bytes`; fails if
  // the body is too short to hold that many.
  uint32_t count(size_t min_item_bytes);

  bool ok() const { return ok_; }
  // Whether every field was present and nothing trails them.
  bool finished() const { return ok_ && rest_.empty(); }

 private:
  bool take(size_t size, std::string_view* out);

  std::string_view rest_;
  bool ok_ = true;
};

// The body length of the frame at the start of `data`, if the header is
// there yet.
std::optional<uint32_t> peekFrameLength(std::string_view data);

}  // namespace loom::comm::wire

#endif  // LOOM_COMM_TCP_STORE_PROTOCOL_H_
