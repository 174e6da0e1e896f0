// TensorBoard's event file (events.out.tfevents.*), written without
// TensorFlow or protobuf: each record is a little-endian u64 length, its
// masked CRC-32C, the payload (a serialized tensorflow.Event) and the
// payload's masked CRC-32C. The writer emits the version event TensorBoard
// expects first, then one Event per step with scalar summaries.
#ifndef LOOM_TOOLS_TRAIN_TFEVENTS_WRITER_H_
#define LOOM_TOOLS_TRAIN_TFEVENTS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom::train {

// The record checksum: CRC-32C rotated right by 15 plus a constant, as
// TensorFlow's record format (tensorflow/core/lib/hash/crc32c.h) masks it.
uint32_t maskedCrc32c(std::string_view bytes);

// One scalar of a step: a tag ("loss", "eval/loss") and its value.
using Scalar = std::pair<std::string, double>;

// A tensorflow.Event with a Summary of simple_value scalars, in protobuf's
// wire format (Event: wall_time=1 double, step=2 int64, file_version=3,
// summary=5; Summary.value=1; Value: tag=1, simple_value=2 float).
std::string encodeScalarEvent(double wall_time, int64_t step, const std::vector<Scalar>& scalars);
std::string encodeVersionEvent(double wall_time);

// The record around a payload.
std::string frameRecord(std::string_view payload);

class TfEventsWriter {
 public:
  // Creates DIR (one level) and DIR/events.out.tfevents.<seconds>.<host>,
  // and writes the version record.
  static absl::StatusOr<std::unique_ptr<TfEventsWriter>> create(const std::string& dir);
  ~TfEventsWriter();

  const std::string& path() const { return path_; }
  // Appends one step's scalars and flushes, so TensorBoard sees it live.
  absl::Status write(int64_t step, const std::vector<Scalar>& scalars);

 private:
  TfEventsWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status append(const std::string& payload);

  std::string path_;
  std::FILE* file_;
};

}  // namespace loom::train

#endif  // LOOM_TOOLS_TRAIN_TFEVENTS_WRITER_H_
