// Encodes and decodes TCPStore frames; byte order is explicit so that the
// format does not depend on the host.
#include "comm/tcp_store_protocol.h"

#include <utility>

namespace loom::comm::wire {

int64_t encodeTimeout(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return -1;
  if (timeout <= absl::ZeroDuration()) return 0;
  // Round up so that a sub-millisecond timeout still waits a little.
  return absl::ToInt64Milliseconds(timeout + absl::Microseconds(999));
}

Writer::Writer(uint8_t type) {
  frame_.resize(kFrameHeaderSize);
  frame_.push_back(static_cast<char>(type));
}

Writer& Writer::u8(uint8_t value) {
  frame_.push_back(static_cast<char>(value));
  return *this;
}

Writer& Writer::u16(uint16_t value) {
  for (int i = 0; i < 2; ++i) frame_.push_back(static_cast<char>(value >> (8 * i)));
  return *this;
}

Writer& Writer::u32(uint32_t value) {
  for (int i = 0; i < 4; ++i) frame_.push_back(static_cast<char>(value >> (8 * i)));
  return *this;
}

Writer& Writer::i64(int64_t value) {
  const uint64_t bits = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) frame_.push_back(static_cast<char>(bits >> (8 * i)));
  return *this;
}

Writer& Writer::bytes(std::string_view value) {
  u32(static_cast<uint32_t>(value.size()));
  frame_.append(value);
  return *this;
}

std::string Writer::finish() {
  const uint32_t length = static_cast<uint32_t>(frame_.size() - kFrameHeaderSize);
  for (int i = 0; i < 4; ++i) frame_[i] = static_cast<char>(length >> (8 * i));
  return std::move(frame_);
}

bool Reader::take(size_t size, std::string_view* out) {
  if (!ok_ || rest_.size() < size) {
    ok_ = false;
    *out = {};
    return false;
  }
  *out = rest_.substr(0, size);
  rest_.remove_prefix(size);
  return true;
}

namespace {

uint64_t littleEndian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return value;
}

}  // namespace

uint8_t Reader::u8() {
  std::string_view field;
  return take(1, &field) ? static_cast<uint8_t>(field[0]) : 0;
}

uint16_t Reader::u16() {
  std::string_view field;
  return take(2, &field) ? static_cast<uint16_t>(littleEndian(field)) : 0;
}

uint32_t Reader::u32() {
  std::string_view field;
  return take(4, &field) ? static_cast<uint32_t>(littleEndian(field)) : 0;
}

int64_t Reader::i64() {
  std::string_view field;
  return take(8, &field) ? static_cast<int64_t>(littleEndian(field)) : 0;
}

std::string_view Reader::bytes() {
  const uint32_t size = u32();
  std::string_view field;
  take(size, &field);
  return field;
}

uint32_t Reader::count(size_t min_item_bytes) {
  const uint32_t n = u32();
  if (ok_ && min_item_bytes > 0 && n > rest_.size() / min_item_bytes) {
    ok_ = false;
    return 0;
  }
  return n;
}

std::optional<uint32_t> peekFrameLength(std::string_view data) {
  if (data.size() < kFrameHeaderSize) return std::nullopt;
  return static_cast<uint32_t>(littleEndian(data.substr(0, kFrameHeaderSize)));
}

}  // namespace loom::comm::wire
