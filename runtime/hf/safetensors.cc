// safetensors: an 8-byte little-endian header length N, N bytes of JSON,
// then the data buffer the JSON's offsets index. Tensor bytes are copied as
// the host's, which the static_assert pins to little-endian.
#include "runtime/hf/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/hf/element_codec.h"
#include "nlohmann/json.hpp"

namespace loom::runtime::hf {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and copied as the host's bytes");

namespace {

using nlohmann::json;

struct DTypeRow {
  StDType dtype;
  const char* name;
  int64_t bytes;
};
constexpr DTypeRow kDTypes[] = {
    {StDType::kF32, "F32", 4}, {StDType::kF16, "F16", 2}, {StDType::kBF16, "BF16", 2}};

// The format's other dtypes, named in the refusal so it says what it saw.
constexpr const char* kKnownUnsupported[] = {"F64", "I64", "I32", "I16",  "I8",      "U8",
                                             "U16", "U32", "U64", "BOOL", "F8_E4M3", "F8_E5M2"};

std::string shapeText(const std::vector<int64_t>& shape) {
  return checkpoint::describeShape(shape);
}

absl::Status sysError(absl::string_view what, const std::string& path, int error) {
  const std::string message = absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  if (error == ENOSPC || error == EDQUOT) {
    return absl::ResourceExhaustedError(absl::StrCat(message, "; free space on that volume"));
  }
  return absl::InternalError(message);
}

absl::Status preadAll(int fd, const std::string& path, void* data, size_t size, int64_t offset) {
  auto* bytes = static_cast<uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pread(fd, bytes, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("read", path, errno);
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(path, ": file ends at byte ", offset,
                                              ", inside a tensor's data; it was "
                                              "truncated after it was opened"));
    }
    bytes += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return absl::OkStatus();
}

absl::Status pwriteAll(int fd, const std::string& path, const void* data, size_t size,
                       int64_t offset) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, bytes, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("write", path, errno);
    }
    bytes += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return absl::OkStatus();
}

absl::Status fsyncDirectoryOf(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sysError("open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return sysError("fsync directory", dir, error);
  return absl::OkStatus();
}

// numel x bytes, or -1 when it overflows int64.
int64_t byteSize(const std::vector<int64_t>& shape, int64_t element_bytes) {
  int64_t n = element_bytes;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

absl::StatusOr<StDType> dtypeFromName(const std::string& name, absl::string_view file,
                                      absl::string_view tensor) {
  for (const DTypeRow& row : kDTypes) {
    if (name == row.name) return row.dtype;
  }
  const bool known = std::any_of(std::begin(kKnownUnsupported), std::end(kKnownUnsupported),
                                 [&](const char* n) { return name == n; });
  return absl::InvalidArgumentError(absl::StrCat(
      file, ": tensor '", tensor, "' has dtype ", name, known ? "" : " (not a safetensors dtype)",
      "; Loom reads F32, F16 and BF16 weights: convert the file (e.g. to BF16) and retry"));
}

absl::Status badTensor(absl::string_view file, absl::string_view tensor, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(file, ": tensor '", tensor, "': ", what));
}

absl::StatusOr<int64_t> nonNegative(const json& v, absl::string_view file, absl::string_view tensor,
                                    absl::string_view field) {
  // nlohmann parses every non-negative integer as unsigned.
  if (!v.is_number_unsigned()) {
    return badTensor(file, tensor,
                     absl::StrCat(field, " must hold non-negative integers, got ", v.dump()));
  }
  if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return badTensor(file, tensor, absl::StrCat(field, " value ", v.dump(), " is too large"));
  }
  return v.get<int64_t>();
}

absl::StatusOr<TensorEntry> parseEntry(const std::string& name, const json& v, int64_t data_bytes,
                                       absl::string_view file) {
  if (!v.is_object()) return badTensor(file, name, "its entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(key)) return badTensor(file, name, absl::StrCat("no '", key, "' field"));
  }
  for (const auto& [key, unused] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return badTensor(file, name, absl::StrCat("unknown field '", key, "'"));
    }
  }
  TensorEntry entry;
  entry.name = name;
  if (!v["dtype"].is_string()) return badTensor(file, name, "'dtype' is not a string");
  absl::StatusOr<StDType> dtype = dtypeFromName(v["dtype"].get<std::string>(), file, name);
  if (!dtype.ok()) return dtype.status();
  entry.dtype = *dtype;
  const json& shape = v["shape"];
  if (!shape.is_array() || shape.size() > 16) {
    return badTensor(file, name, "'shape' is not an array of at most 16 sizes");
  }
  for (const json& d : shape) {
    absl::StatusOr<int64_t> size = nonNegative(d, file, name, "'shape'");
    if (!size.ok()) return size.status();
    entry.shape.push_back(*size);
  }
  const json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return badTensor(file, name, "'data_offsets' is not [begin, end]");
  }
  absl::StatusOr<int64_t> begin = nonNegative(offsets[0], file, name, "'data_offsets'");
  if (!begin.ok()) return begin.status();
  absl::StatusOr<int64_t> end = nonNegative(offsets[1], file, name, "'data_offsets'");
  if (!end.ok()) return end.status();
  entry.begin = *begin;
  entry.end = *end;
  if (entry.begin > entry.end || entry.end > data_bytes) {
    return badTensor(
        file, name,
        absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] leave the data buffer of ",
                     data_bytes, " bytes; the file is truncated or its header is wrong"));
  }
  const int64_t expected = byteSize(entry.shape, stDTypeBytes(entry.dtype));
  if (expected != entry.end - entry.begin) {
    return badTensor(
        file, name,
        absl::StrCat("shape ", shapeText(entry.shape), " of ", stDTypeName(entry.dtype), " needs ",
                     expected, " bytes but data_offsets give ", entry.end - entry.begin));
  }
  return entry;
}

// The box's elements as runs contiguous in the file: each run starts at
// element `start` of the tensor and is `length` long. Trailing dims the box
// covers whole merge into one run.
template <typename Fn>
void forEachRun(const std::vector<int64_t>& shape, const Box& box, Fn fn) {
  const size_t rank = shape.size();
  if (checkpoint::numElements(box.sizes) == 0) return;
  if (rank == 0) {
    fn(int64_t{0}, int64_t{1});
    return;
  }
  size_t inner = rank - 1;  // dims [inner, rank) form one run
  int64_t length = box.sizes[inner];
  while (inner > 0 && box.sizes[inner] == shape[inner]) {
    --inner;
    length *= box.sizes[inner];
  }
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  std::vector<int64_t> index(inner, 0);  // over dims [0, inner)
  while (true) {
    int64_t start = box.offsets[inner] * strides[inner];
    for (size_t d = 0; d < inner; ++d) start += (box.offsets[d] + index[d]) * strides[d];
    fn(start, length);
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < box.sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

absl::Status checkBoxFor(const TensorEntry& entry, const Box& box, size_t values,
                         absl::string_view file) {
  if (absl::Status s = checkpoint::checkBoxInside(
          box, entry.shape, absl::StrCat(file, ": tensor '", entry.name, "'"));
      !s.ok()) {
    return s;
  }
  const int64_t n = checkpoint::numElements(box.sizes);
  if (static_cast<int64_t>(values) != n) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", entry.name, "': box ",
                                                   checkpoint::describeBox(box), " has ", n,
                                                   " elements but the buffer holds ", values));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view stDTypeName(StDType dtype) {
  for (const DTypeRow& row : kDTypes) {
    if (row.dtype == dtype) return row.name;
  }
  return "?";
}

int64_t stDTypeBytes(StDType dtype) {
  for (const DTypeRow& row : kDTypes) {
    if (row.dtype == dtype) return row.bytes;
  }
  return 0;
}

const TensorEntry* Header::find(absl::string_view name) const {
  for (const TensorEntry& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<Header> parseHeader(absl::string_view text, int64_t data_bytes,
                                   absl::string_view file) {
  // JSON lets a key repeat and a parser keep either value; a header whose
  // tensor (or field) appears twice is refused instead of read one way.
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  int repeatedDepth = 0;
  const json::parser_callback_t noteKeys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && repeated.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
      repeatedDepth = depth;
    }
    return true;
  };
  json root = json::parse(text.begin(), text.end(), noteKeys, /*allow_exceptions=*/false);
  if (!repeated.empty()) {
    return absl::DataLossError(
        repeatedDepth <= 1
            ? absl::StrCat(file, ": tensor '", repeated,
                           "' appears twice in the header; the file is corrupt")
            : absl::StrCat(file, ": field '", repeated,
                           "' appears twice in one entry of the header; the file is corrupt"));
  }
  if (root.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat(file,
                     ": the header is not valid JSON; the file is not safetensors or is "
                     "corrupt"));
  }
  if (!root.is_object()) {
    return absl::DataLossError(absl::StrCat(file, ": the header is not a JSON object"));
  }
  Header header;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        return absl::DataLossError(absl::StrCat(file, ": '__metadata__' is not an object"));
      }
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
          return absl::DataLossError(
              absl::StrCat(file, ": '__metadata__' entry '", key, "' is not a string"));
        }
        header.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) return absl::DataLossError(absl::StrCat(file, ": a tensor has no name"));
    absl::StatusOr<TensorEntry> entry = parseEntry(name, value, data_bytes, file);
    if (!entry.ok()) return entry.status();
    header.tensors.push_back(*std::move(entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  for (size_t i = 1; i < header.tensors.size(); ++i) {
    const TensorEntry& a = header.tensors[i - 1];
    const TensorEntry& b = header.tensors[i];
    if (b.begin < a.end) {
      return absl::DataLossError(absl::StrCat(file, ": tensors '", a.name, "' [", a.begin, ", ",
                                              a.end, ") and '", b.name, "' [", b.begin, ", ", b.end,
                                              ") overlap in the data buffer"));
    }
  }
  return header;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sysError("open", path, errno);
  SafetensorsFile file(path, fd, 0, {});  // closes fd on every return below
  struct stat st;
  if (::fstat(fd, &st) != 0) return sysError("stat", path, errno);
  const int64_t size = st.st_size;
  if (size < 8) {
    return absl::DataLossError(absl::StrCat(path, ": ", size,
                                            " bytes, too short for the 8-byte header length; "
                                            "the file is truncated or not safetensors"));
  }
  uint64_t length = 0;
  if (absl::Status s = preadAll(fd, path, &length, 8, 0); !s.ok()) return s;
  if (length > static_cast<uint64_t>(kMaxHeaderBytes) || static_cast<int64_t>(length) > size - 8) {
    return absl::DataLossError(absl::StrFormat(
        "%s: header length %u is past the file's %d bytes (or over the %d-byte bound); the "
        "file is truncated or not safetensors",
        path, length, size, kMaxHeaderBytes));
  }
  std::string text(length, '\0');
  if (absl::Status s = preadAll(fd, path, text.data(), length, 8); !s.ok()) return s;
  const int64_t data_start = 8 + static_cast<int64_t>(length);
  absl::StatusOr<Header> header = parseHeader(text, size - data_start, path);
  if (!header.ok()) return header.status();
  file.data_start_ = data_start;
  file.header_ = *std::move(header);
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      header_(std::move(other.header_)),
      bytes_read_(other.bytes_read_) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    header_ = std::move(other.header_);
    bytes_read_ = other.bytes_read_;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status SafetensorsFile::readBox(absl::string_view name, const Box& box,
                                      std::span<float> out) const {
  const TensorEntry* entry = header_.find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor '", name, "'"));
  }
  if (absl::Status s = checkBoxFor(*entry, box, out.size(), path_); !s.ok()) return s;
  const int64_t element = stDTypeBytes(entry->dtype);
  std::vector<uint8_t> bytes;
  float* at = out.data();
  absl::Status status;
  forEachRun(entry->shape, box, [&](int64_t start, int64_t length) {
    if (!status.ok()) return;
    bytes.resize(length * element);
    status = preadAll(fd_, path_, bytes.data(), bytes.size(),
                      data_start_ + entry->begin + start * element);
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat("tensor '", name, "': ", status.message()));
      return;
    }
    bytes_read_ += static_cast<int64_t>(bytes.size());
    decodeElements(entry->dtype, bytes.data(), length, at);
    at += length;
  });
  return status;
}

int64_t FileLayout::fileBytes() const {
  const int64_t data = entries.tensors.empty() ? 0 : entries.tensors.back().end;
  return static_cast<int64_t>(header.size()) + data;
}

absl::StatusOr<FileLayout> layoutFile(const std::vector<TensorSpec>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  FileLayout layout;
  json root = json::object();
  if (!metadata.empty()) root["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || root.contains(t.name)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write a tensor named '", t.name,
                                                     "': names must be non-empty, ",
                                                     "unique and not __metadata__"));
    }
    const int64_t bytes = byteSize(t.shape, stDTypeBytes(t.dtype));
    if (bytes < 0 || std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' has a bad shape ", shapeText(t.shape)));
    }
    root[t.name] = {{"dtype", stDTypeName(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    layout.entries.tensors.push_back({t.name, t.dtype, t.shape, offset, offset + bytes});
    offset += bytes;
  }
  layout.entries.metadata = metadata;
  std::string text = root.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned, as the Rust
  // writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  layout.header.assign(reinterpret_cast<const char*>(&length), 8);
  layout.header += text;
  return layout;
}

absl::StatusOr<SafetensorsWriter> SafetensorsWriter::create(const std::string& path,
                                                            FileLayout layout) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return sysError("create", tmp, errno);
  SafetensorsWriter writer(path, fd, std::move(layout));
  if (::ftruncate(fd, writer.layout_.fileBytes()) != 0) return sysError("size", tmp, errno);
  if (absl::Status s =
          pwriteAll(fd, tmp, writer.layout_.header.data(), writer.layout_.header.size(), 0);
      !s.ok()) {
    return s;
  }
  return writer;
}

absl::StatusOr<SafetensorsWriter> SafetensorsWriter::join(const std::string& path,
                                                          FileLayout layout) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return sysError("open", tmp, errno);
  return SafetensorsWriter(path, fd, std::move(layout));
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      layout_(std::move(other.layout_)) {}

SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    layout_ = std::move(other.layout_);
  }
  return *this;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status SafetensorsWriter::writeBox(absl::string_view name, const Box& box,
                                         std::span<const float> values) {
  const std::string tmp = path_ + ".tmp";
  const TensorEntry* entry = layout_.entries.find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": the layout has no tensor '", name, "'"));
  }
  if (absl::Status s = checkBoxFor(*entry, box, values.size(), path_); !s.ok()) return s;
  const int64_t element = stDTypeBytes(entry->dtype);
  const int64_t data_start = static_cast<int64_t>(layout_.header.size());
  std::vector<uint8_t> bytes;
  const float* at = values.data();
  absl::Status status;
  forEachRun(entry->shape, box, [&](int64_t start, int64_t length) {
    if (!status.ok()) return;
    bytes.resize(length * element);
    encodeElements(entry->dtype, at, length, bytes.data());
    at += length;
    status = pwriteAll(fd_, tmp, bytes.data(), bytes.size(),
                       data_start + entry->begin + start * element);
  });
  return status;
}

absl::Status SafetensorsWriter::finish() {
  if (::fsync(fd_) != 0) return sysError("fsync", path_ + ".tmp", errno);
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::commit() {
  if (absl::Status s = finish(); !s.ok()) return s;
  const std::string tmp = path_ + ".tmp";
  if (::rename(tmp.c_str(), path_.c_str()) != 0)
    return sysError("rename " + tmp + " to", path_, errno);
  return fsyncDirectoryOf(path_);
}

absl::Status writeSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const TensorData& t : tensors) specs.push_back(t.spec);
  absl::StatusOr<FileLayout> layout = layoutFile(specs, metadata);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<SafetensorsWriter> writer = SafetensorsWriter::create(path, *std::move(layout));
  if (!writer.ok()) return writer.status();
  for (const TensorData& t : tensors) {
    const Box whole{std::vector<int64_t>(t.spec.shape.size(), 0), t.spec.shape};
    if (absl::Status s = writer->writeBox(t.spec.name, whole, t.values); !s.ok()) return s;
  }
  return writer->commit();
}

std::vector<std::vector<TensorSpec>> splitIntoFiles(const std::vector<TensorSpec>& tensors,
                                                    int64_t max_file_bytes) {
  std::vector<std::vector<TensorSpec>> files;
  int64_t used = 0;
  for (const TensorSpec& t : tensors) {
    const int64_t bytes = byteSize(t.shape, stDTypeBytes(t.dtype));
    if (files.empty() || (used > 0 && used + bytes > max_file_bytes)) {
      files.emplace_back();
      used = 0;
    }
    files.back().push_back(t);
    used += bytes;
  }
  return files;
}

std::string shardFileName(int64_t index, int64_t count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index, count);
}

std::string indexJson(const std::vector<std::vector<TensorSpec>>& files) {
  json map = json::object();
  int64_t total = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const TensorSpec& t : files[f]) {
      map[t.name] = shardFileName(static_cast<int64_t>(f) + 1, files.size());
      total += byteSize(t.shape, stDTypeBytes(t.dtype));
    }
  }
  return json{{"metadata", {{"total_size", total}}}, {"weight_map", map}}.dump(2) + "\n";
}

}  // namespace loom::runtime::hf
