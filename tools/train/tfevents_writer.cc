#include "tools/train/tfevents_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/checkpoint/crc32c.h"

namespace loom::train {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putTag(std::string& out, int field, int wire) {
  putVarint(out, static_cast<uint64_t>(field) << 3 | wire);
}

template <typename T>
void putLittleEndian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the hosts we build for are little-endian
  out.append(bytes, sizeof(T));
}

void putBytes(std::string& out, int field, std::string_view bytes) {
  putTag(out, field, kBytes);
  putVarint(out, bytes.size());
  out.append(bytes);
}

std::string eventHeader(double wall_time, int64_t step) {
  std::string event;
  putTag(event, 1, kFixed64);
  putLittleEndian(event, wall_time);
  if (step != 0) {
    putTag(event, 2, kVarint);
    putVarint(event, static_cast<uint64_t>(step));
  }
  return event;
}

}  // namespace

uint32_t maskedCrc32c(std::string_view bytes) {
  const uint32_t crc = runtime::checkpoint::crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string encodeScalarEvent(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    putBytes(v, 1, tag);
    putTag(v, 2, kFixed32);
    putLittleEndian(v, static_cast<float>(value));
    putBytes(summary, 1, v);
  }
  std::string event = eventHeader(wall_time, step);
  putBytes(event, 5, summary);
  return event;
}

std::string encodeVersionEvent(double wall_time) {
  std::string event = eventHeader(wall_time, 0);
  putBytes(event, 3, "brain.Event:2");
  return event;
}

std::string frameRecord(std::string_view payload) {
  std::string record;
  const uint64_t length = payload.size();
  putLittleEndian(record, length);
  putLittleEndian(record, maskedCrc32c(record));
  record.append(payload);
  putLittleEndian(record, maskedCrc32c(payload));
  return record;
}

absl::StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::create(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create the TensorBoard directory '",
                                                   dir, "': ", std::strerror(errno)));
  }
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(absl::Now()), ".", host);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<TfEventsWriter> writer(new TfEventsWriter(path, file));
  if (absl::Status s = writer->append(encodeVersionEvent(absl::ToUnixMicros(absl::Now()) / 1e6));
      !s.ok()) {
    return s;
  }
  return writer;
}

TfEventsWriter::~TfEventsWriter() { std::fclose(file_); }

absl::Status TfEventsWriter::write(int64_t step, const std::vector<Scalar>& scalars) {
  return append(encodeScalarEvent(absl::ToUnixMicros(absl::Now()) / 1e6, step, scalars));
}

absl::Status TfEventsWriter::append(const std::string& payload) {
  const std::string record = frameRecord(payload);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace loom::train
