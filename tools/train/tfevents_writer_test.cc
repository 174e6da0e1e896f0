// The event file read back by an independent decoder: record framing and
// both masked CRCs, then the Event and Summary protobuf fields.
#include "tools/train/tfevents_writer.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom::train {
namespace {

// A field of a protobuf message: its number, wire type and raw value.
struct Field {
  int number = 0;
  int wire = 0;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited payload, or the fixed32/64 bytes
};

uint64_t readVarint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < s.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(s[at++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

std::vector<Field> parse(const std::string& s) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < s.size()) {
    const uint64_t key = readVarint(s, at);
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.varint = readVarint(s, at);
    } else if (f.wire == 1 || f.wire == 5) {
      const size_t n = f.wire == 1 ? 8 : 4;
      f.bytes = s.substr(at, n);
      at += n;
    } else if (f.wire == 2) {
      const uint64_t n = readVarint(s, at);
      f.bytes = s.substr(at, n);
      at += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire;
      return fields;
    }
    fields.push_back(f);
  }
  return fields;
}

// Splits a file into record payloads, checking lengths and CRCs.
std::vector<std::string> records(const std::string& file) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_GE(file.size() - at, 12u) << "truncated header at " << at;
    if (file.size() - at < 12) break;
    uint64_t length;
    uint32_t lengthCrc, dataCrc;
    std::memcpy(&length, file.data() + at, 8);
    std::memcpy(&lengthCrc, file.data() + at + 8, 4);
    EXPECT_EQ(lengthCrc, maskedCrc32c(file.substr(at, 8)));
    const std::string payload = file.substr(at + 12, length);
    std::memcpy(&dataCrc, file.data() + at + 12 + length, 4);
    EXPECT_EQ(dataCrc, maskedCrc32c(payload));
    out.push_back(payload);
    at += 12 + length + 4;
  }
  return out;
}

TEST(TfEvents, MaskedCrcFollowsTensorFlowsDefinition) {
  // crc32c("123456789") is 0xe3069283 (the standard check value); masked:
  // rotated right by 15 plus 0xa282ead8.
  EXPECT_EQ(maskedCrc32c("123456789"), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
  EXPECT_EQ(maskedCrc32c(""), 0xa282ead8u);
}

TEST(TfEvents, WritesAVersionEventThenScalarsPerStep) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/tb";
  absl::StatusOr<std::unique_ptr<TfEventsWriter>> writer = TfEventsWriter::create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->write(1, {{"loss", 5.5}, {"lr", 0.001}}).ok());
  ASSERT_TRUE((*writer)->write(300, {{"eval/loss", 4.25}}).ok());
  const std::string path = (*writer)->path();
  writer->reset();
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> payloads = records(file);
  ASSERT_EQ(payloads.size(), 3u);

  const std::vector<Field> version = parse(payloads[0]);
  ASSERT_EQ(version.size(), 2u);
  EXPECT_EQ(version[0].number, 1);  // wall_time, a double
  EXPECT_EQ(version[0].wire, 1);
  EXPECT_EQ(version[1].number, 3);
  EXPECT_EQ(version[1].bytes, "brain.Event:2");

  // step -> tag -> value
  std::map<int64_t, std::map<std::string, float>> scalars;
  for (size_t r = 1; r < payloads.size(); ++r) {
    int64_t step = 0;
    for (const Field& f : parse(payloads[r])) {
      if (f.number == 2) step = static_cast<int64_t>(f.varint);
      if (f.number != 5) continue;
      for (const Field& value : parse(f.bytes)) {
        ASSERT_EQ(value.number, 1);
        std::string tag;
        float v = 0;
        for (const Field& g : parse(value.bytes)) {
          if (g.number == 1) tag = g.bytes;
          if (g.number == 2) {
            ASSERT_EQ(g.wire, 5);
            std::memcpy(&v, g.bytes.data(), 4);
          }
        }
        scalars[step][tag] = v;
      }
    }
  }
  EXPECT_EQ(scalars[1]["loss"], 5.5f);
  EXPECT_EQ(scalars[1]["lr"], 0.001f);
  EXPECT_EQ(scalars[300]["eval/loss"], 4.25f);
}

TEST(TfEvents, RefusesADirectoryItCannotCreate) {
  absl::StatusOr<std::unique_ptr<TfEventsWriter>> writer =
      TfEventsWriter::create("/proc/no/such/dir");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("/proc/no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace loom::train
