// Table-driven CRC-32C: reflected polynomial 0x82F63B78, initial value and
// final xor 0xFFFFFFFF (RFC 3720, appendix B.4).
#include "runtime/checkpoint/crc32c.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace loom::runtime::checkpoint {
namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78;

constexpr std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kReflectedPolynomial : crc >> 1;
    }
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = makeTable();

}  // namespace

uint32_t crc32cExtend(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint32_t state = ~crc;
  for (size_t i = 0; i < size; ++i) {
    state = kTable[(state ^ bytes[i]) & 0xFF] ^ (state >> 8);
  }
  return ~state;
}

}  // namespace loom::runtime::checkpoint
