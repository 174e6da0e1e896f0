// Tests the TCPStore frame encoder and the bounds-checked decoder that the
// server relies on to reject malformed input.
#include "comm/tcp_store_protocol.h"

#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace loom::comm::wire {
namespace {

TEST(TcpStoreProtocolTest, FieldsRoundTripLittleEndian) {
  const std::string frame =
      Writer(Op::kAdd).bytes("key").i64(-5).u16(0x0102).u32(0xa0b0c0d0).u8(7).finish();
  ASSERT_EQ(peekFrameLength(frame), frame.size() - kFrameHeaderSize);
  EXPECT_EQ(frame.substr(kFrameHeaderSize, 1), std::string(1, 4));
  Reader reader(std::string_view(frame).substr(kFrameHeaderSize));
  EXPECT_EQ(reader.u8(), static_cast<uint8_t>(Op::kAdd));
  EXPECT_EQ(reader.bytes(), "key");
  EXPECT_EQ(reader.i64(), -5);
  EXPECT_EQ(reader.u16(), 0x0102);
  EXPECT_EQ(reader.u32(), 0xa0b0c0d0u);
  EXPECT_EQ(reader.u8(), 7);
  EXPECT_TRUE(reader.finished());
}

TEST(TcpStoreProtocolTest, ReadingPastTheEndFailsForGood) {
  // Reader keeps a view: the body must outlive it.
  const std::string body(
      "\x05\x00\x00\x00"
      "ab",
      6);
  Reader reader(body);
  EXPECT_EQ(reader.bytes(), "");
  EXPECT_FALSE(reader.ok());
  EXPECT_EQ(reader.u8(), 0);
  EXPECT_FALSE(reader.finished());
}

TEST(TcpStoreProtocolTest, TrailingBytesAreNotFinished) {
  const std::string body("\x01\x02", 2);
  Reader reader(body);
  EXPECT_EQ(reader.u8(), 1);
  EXPECT_TRUE(reader.ok());
  EXPECT_FALSE(reader.finished());
}

TEST(TcpStoreProtocolTest, ACountTooLargeForTheBodyIsRejected) {
  // Claims a billion keys in a 4-byte body: must fail without allocating.
  const std::string body("\x00\xca\x9a\x3b", 4);
  Reader reader(body);
  EXPECT_EQ(reader.count(4), 0u);
  EXPECT_FALSE(reader.ok());
}

TEST(TcpStoreProtocolTest, PeekNeedsAWholeHeader) {
  EXPECT_FALSE(peekFrameLength(std::string("\x01\x00\x00", 3)).has_value());
  EXPECT_EQ(peekFrameLength(std::string("\xff\xff\xff\xff", 4)), 0xffffffffu);
}

TEST(TcpStoreProtocolTest, TimeoutsRoundUpAndInfinityIsMinusOne) {
  EXPECT_EQ(encodeTimeout(absl::InfiniteDuration()), -1);
  EXPECT_EQ(encodeTimeout(absl::Microseconds(1)), 1);
  EXPECT_EQ(encodeTimeout(absl::Milliseconds(1500)), 1500);
  EXPECT_EQ(encodeTimeout(-absl::Seconds(1)), 0);
}

}  // namespace
}  // namespace loom::comm::wire
