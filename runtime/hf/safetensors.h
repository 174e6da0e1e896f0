// The safetensors format (Hugging Face's weight files): one reader that
// preads only the bytes of the boxes asked for, and one writer whose ranks
// can each fill their own boxes of one file. Layout in docs/runtime_hf.md.
#ifndef LOOM_RUNTIME_HF_SAFETENSORS_H_
#define LOOM_RUNTIME_HF_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/checkpoint/shard_file.h"
#include "runtime/hf/element_codec.h"

namespace loom::runtime::hf {

using checkpoint::Box;

// StDType (element_codec.h) holds the element types Loom reads and writes;
// other safetensors dtypes (F64, I64, F8_E4M3, ...) are refused by name.
absl::string_view stDTypeName(StDType dtype);  // "F32", "F16", "BF16"
int64_t stDTypeBytes(StDType dtype);

// One tensor of a file: its bytes are [begin, end) of the data buffer that
// follows the header.
struct TensorEntry {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

struct Header {
  std::vector<TensorEntry> tensors;  // in data order
  std::map<std::string, std::string> metadata;
  const TensorEntry* find(absl::string_view name) const;
};

// The largest header the reader accepts (the Rust reference's bound).
inline constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;

// Parses and checks a header's JSON against a data buffer of `data_bytes`:
// well-formed, an object of tensors and an optional "__metadata__" of
// strings; each tensor a supported dtype, a shape of non-negative sizes and
// data_offsets inside the buffer whose length is numel x dtype size; no two
// tensors' bytes overlapping. Errors are DataLoss (InvalidArgument for an
// unsupported dtype) and name `file` and the tensor.
absl::StatusOr<Header> parseHeader(absl::string_view json, int64_t data_bytes,
                                   absl::string_view file);

// An open safetensors file. Opening reads the header only; readBox reads
// the bytes of one box.
class SafetensorsFile {
 public:
  // NotFound for a missing file; DataLoss naming the file for a header
  // length past the file's end, and whatever parseHeader finds.
  static absl::StatusOr<SafetensorsFile> open(const std::string& path);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }

  // Fills `out` (row-major over box.sizes, exactly its size) with `box` of
  // tensor `name` converted to float. Reads only the box's bytes: one pread
  // per contiguous run, a box strided in the file included. NotFound for
  // an unknown tensor, InvalidArgument for a box outside it or an `out` of
  // the wrong size, DataLoss for a file cut short since it was opened.
  absl::Status readBox(absl::string_view name, const Box& box, std::span<float> out) const;
  // Bytes read by readBox so far (tests check that a rank reads its part).
  int64_t bytesRead() const { return bytes_read_; }

 private:
  SafetensorsFile(std::string path, int fd, int64_t data_start, Header header)
      : path_(std::move(path)), fd_(fd), data_start_(data_start), header_(std::move(header)) {}

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // file offset of the data buffer
  Header header_;
  mutable int64_t bytes_read_ = 0;
};

// What a file to write holds, before any data.
struct TensorSpec {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
};

// Where everything goes in a file: the header's bytes (length prefix and
// JSON padded with spaces to 8 bytes) and each tensor's place, in order.
struct FileLayout {
  std::string header;
  Header entries;
  int64_t fileBytes() const;
};
// InvalidArgument for an empty or repeated name, "__metadata__" as a name
// or a negative size.
absl::StatusOr<FileLayout> layoutFile(const std::vector<TensorSpec>& tensors,
                                      const std::map<std::string, std::string>& metadata);

// Writes one safetensors file, possibly from several processes: one
// create()s `path` + ".tmp" (header written, data zeroed to its size),
// the others join() it, each writes its boxes and finish()es, then the
// creator commit()s (fsync, rename over `path`, fsync of the directory).
class SafetensorsWriter {
 public:
  static absl::StatusOr<SafetensorsWriter> create(const std::string& path, FileLayout layout);
  static absl::StatusOr<SafetensorsWriter> join(const std::string& path, FileLayout layout);
  SafetensorsWriter(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  // Writes `values` (row-major over box.sizes) as `box` of tensor `name`,
  // converted to its dtype (round to nearest even).
  absl::Status writeBox(absl::string_view name, const Box& box, std::span<const float> values);
  absl::Status finish();  // fsync of this process's writes
  absl::Status commit();  // the creator, once every writer finished

 private:
  SafetensorsWriter(std::string path, int fd, FileLayout layout)
      : path_(std::move(path)), fd_(fd), layout_(std::move(layout)) {}
  std::string path_;
  int fd_ = -1;
  FileLayout layout_;
};

// A whole tensor in memory, for the one-process writer.
struct TensorData {
  TensorSpec spec;
  std::vector<float> values;  // row-major, numel(spec.shape) of them
};
// Writes `tensors` to one file.
absl::Status writeSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Splits `tensors` into files of at most `max_file_bytes` of data each (a
// tensor larger than that gets a file of its own), in order.
std::vector<std::vector<TensorSpec>> splitIntoFiles(const std::vector<TensorSpec>& tensors,
                                                    int64_t max_file_bytes);
// "model-00002-of-00005.safetensors" (index from 1), as transformers names
// shards.
std::string shardFileName(int64_t index, int64_t count);
inline constexpr char kIndexFileName[] = "model.safetensors.index.json";
inline constexpr char kSingleFileName[] = "model.safetensors";
// The index's JSON: {"metadata": {"total_size": N}, "weight_map": {name: file}}.
std::string indexJson(const std::vector<std::vector<TensorSpec>>& files);

// A model's weights: one file, or the shards an index lists.
class SafetensorsSet {
 public:
  // `path`: a .safetensors file, an index .json, or a directory holding
  // model.safetensors.index.json or model.safetensors. Opens every file
  // (headers only) and checks that each tensor the index lists is in the
  // file it names, and that no tensor is in two files.
  static absl::StatusOr<SafetensorsSet> open(const std::string& path);

  const std::string& source() const { return source_; }
  std::vector<std::string> names() const;
  // The file holding `name`, or null.
  const SafetensorsFile* fileOf(absl::string_view name) const;
  const TensorEntry* find(absl::string_view name) const;
  absl::Status readBox(absl::string_view name, const Box& box, std::span<float> out) const;
  int64_t bytesRead() const;

 private:
  std::string source_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor -> files_ index
};

}  // namespace loom::runtime::hf

#endif  // LOOM_RUNTIME_HF_SAFETENSORS_H_
