// CRC-32C against the published check value and RFC 3720's test vectors,
// and the streaming property the shard writer relies on.
#include "runtime/checkpoint/crc32c.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom::runtime::checkpoint {
namespace {

TEST(Crc32cTest, MatchesTheCheckValue) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32c(text.data(), text.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

// RFC 3720, B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0x00);
  std::vector<uint8_t> ones(32, 0xFF);
  std::vector<uint8_t> ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
}

TEST(Crc32cTest, ExtendingEqualsOneShot) {
  const std::string text = "sharded checkpoints stream their records";
  const uint32_t head = crc32c(text.data(), 10);
  EXPECT_EQ(crc32cExtend(head, text.data() + 10, text.size() - 10),
            crc32c(text.data(), text.size()));
}

}  // namespace
}  // namespace loom::runtime::checkpoint
