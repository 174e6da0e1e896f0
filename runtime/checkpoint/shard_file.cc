// Binary rank files and durable writes. Integers are little-endian and
// written byte by byte; tensor data is copied as the host's bytes, which the
// static_assert below pins to little-endian.
#include "runtime/checkpoint/shard_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "mesh/shard_math.h"
#include "runtime/checkpoint/crc32c.h"

namespace loom::runtime::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "rank files store raw little-endian tensor bytes");

namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormatVersion = 1;
constexpr int64_t kHeaderBytes = 8 + 4 + 4 + 4 + 4 + 8;
// Bounds that reject garbage before it sizes an allocation.
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxRank = 16;
constexpr size_t kChunkBytes = size_t{1} << 20;

absl::Status fileError(absl::string_view operation, const std::string& path, int error) {
  const std::string message =
      absl::StrCat("cannot ", operation, " ", path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(
          absl::StrCat(message, "; free space on the checkpoint volume"));
    default:
      return absl::InternalError(message);
  }
}

absl::Status writeAll(int fd, const std::string& path, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fileError("write", path, errno);
    }
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status fsyncDirectoryOf(const std::string& path) {
  // Not `dir = "."` on a std::string: GCC 12 at -O2 reports a bogus
  // -Wrestrict overlap in that assignment (GCC bug 105651).
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fileError("open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return fileError("fsync directory", dir, error);
  return absl::OkStatus();
}

// Closes the file, then renames `tmp` over `path` and fsyncs the directory,
// after fsyncing the data: the rename is the commit point.
absl::Status commitFile(int fd, const std::string& tmp, const std::string& path) {
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return fileError("fsync", tmp, error);
  }
  if (::close(fd) != 0) return fileError("close", tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fileError(absl::StrCat("rename to ", path, ":"), tmp, errno);
  }
  return fsyncDirectoryOf(path);
}

absl::StatusOr<int> createTemporary(const std::string& tmp) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fileError("create", tmp, errno);
  return fd;
}

// Buffers the rank file's bytes, keeps the running CRC of the current record
// and reports progress at every flush.
class Sink {
 public:
  Sink(int fd, const std::string& path, int64_t total, const ProgressFn& progress)
      : fd_(fd), path_(path), total_(total), progress_(progress) {
    buffer_.reserve(kChunkBytes);
  }

  void put(const void* data, size_t size) {
    crc_ = crc32cExtend(crc_, data, size);
    const auto* bytes = static_cast<const uint8_t*>(data);
    while (size > 0 && status_.ok()) {
      const size_t n = std::min(size, kChunkBytes - buffer_.size());
      buffer_.insert(buffer_.end(), bytes, bytes + n);
      bytes += n;
      size -= n;
      if (buffer_.size() == kChunkBytes) flush();
    }
  }
  void putU32(uint32_t value) {
    uint8_t bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
    put(bytes, 4);
  }
  void putU64(uint64_t value) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
    put(bytes, 8);
  }
  void putI64s(std::span<const int64_t> values) {
    for (int64_t value : values) putU64(static_cast<uint64_t>(value));
  }

  void beginRecord() { crc_ = 0; }
  // Appends the record's CRC, which covers every byte since beginRecord.
  void endRecord() { putU32(crc_); }

  absl::Status finish() {
    flush();
    return status_;
  }

 private:
  void flush() {
    if (!status_.ok() || buffer_.empty()) return;
    status_ = writeAll(fd_, path_, buffer_.data(), buffer_.size());
    written_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
    if (status_.ok() && progress_) progress_(written_, total_);
  }

  int fd_;
  const std::string& path_;
  int64_t total_;
  const ProgressFn& progress_;
  std::vector<uint8_t> buffer_;
  int64_t written_ = 0;
  uint32_t crc_ = 0;
  absl::Status status_;
};

const std::vector<int64_t>& localShapeOf(const ShardView& shard) {
  return shard.local_shape.empty() ? shard.box.sizes : shard.local_shape;
}

int64_t recordBytes(const ShardView& shard) {
  const int64_t ndim = static_cast<int64_t>(shard.global_shape.size());
  return 4 + static_cast<int64_t>(shard.name.size()) + 4 + 4 + 3 * 8 * ndim + 8 +
         numElements(shard.box.sizes) * dtypeBytes(shard.dtype) + 4;
}

// Streams the box out of the (possibly padded) local buffer, one run of the
// last dim at a time.
void putBoxData(Sink& sink, const ShardView& shard) {
  const std::vector<int64_t>& local = localShapeOf(shard);
  const std::vector<int64_t>& sizes = shard.box.sizes;
  const size_t ndim = sizes.size();
  const int64_t element = dtypeBytes(shard.dtype);
  std::vector<int64_t> strides(ndim, 1);
  for (size_t d = ndim - 1; d > 0; --d) strides[d - 1] = strides[d] * local[d];
  const auto* base = static_cast<const uint8_t*>(shard.data);
  const size_t run = static_cast<size_t>(sizes.back() * element);
  std::vector<int64_t> index(ndim, 0);
  while (true) {
    int64_t offset = 0;
    for (size_t d = 0; d + 1 < ndim; ++d) offset += index[d] * strides[d];
    sink.put(base + offset * element, run);
    size_t d = ndim - 1;
    while (d > 0) {
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (ndim == 1) return;
  }
}

// Reads a rank file front to back with pread, naming the file and what was
// being read when it ends early.
class Source {
 public:
  Source(int fd, const std::string& path, int64_t size) : fd_(fd), path_(path), size_(size) {}

  int64_t position() const { return position_; }
  int64_t remaining() const { return size_ - position_; }
  uint32_t crc() const { return crc_; }
  void beginRecord() { crc_ = 0; }

  // DataLoss when the file ends before `size` more bytes of `what`.
  absl::Status need(int64_t size, absl::string_view what) const {
    if (size > remaining()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", path_, " is truncated: ", what, " needs ", size,
                       " bytes at offset ", position_, " but the file has ", size_,
                       " bytes; the save that wrote it did not finish, use an earlier "
                       "checkpoint"));
    }
    return absl::OkStatus();
  }

  absl::Status read(void* out, size_t size, absl::string_view what) {
    if (absl::Status s = need(static_cast<int64_t>(size), what); !s.ok()) {
      return s;
    }
    auto* bytes = static_cast<uint8_t*>(out);
    size_t done = 0;
    while (done < size) {
      const ssize_t n =
          ::pread(fd_, bytes + done, size - done, static_cast<off_t>(position_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fileError("read", path_, n < 0 ? errno : EIO);
      done += static_cast<size_t>(n);
    }
    crc_ = crc32cExtend(crc_, out, size);
    position_ += static_cast<int64_t>(size);
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> u32(absl::string_view what) {
    uint8_t bytes[4];
    if (absl::Status s = read(bytes, 4, what); !s.ok()) return s;
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= uint32_t{bytes[i]} << (8 * i);
    return value;
  }
  absl::StatusOr<int64_t> i64(absl::string_view what) {
    uint8_t bytes[8];
    if (absl::Status s = read(bytes, 8, what); !s.ok()) return s;
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t{bytes[i]} << (8 * i);
    return static_cast<int64_t>(value);
  }
  absl::Status i64s(std::vector<int64_t>& out, size_t count, absl::string_view what) {
    out.resize(count);
    for (int64_t& value : out) {
      absl::StatusOr<int64_t> read_value = i64(what);
      if (!read_value.ok()) return read_value.status();
      value = *read_value;
    }
    return absl::OkStatus();
  }

 private:
  int fd_;
  const std::string& path_;
  int64_t size_;
  int64_t position_ = 0;
  uint32_t crc_ = 0;
};

absl::Status malformed(const std::string& path, absl::string_view detail) {
  return absl::DataLossError(absl::StrCat("checkpoint file ", path, " is malformed: ", detail,
                                          "; it is not a Loom rank file of format version ",
                                          kFormatVersion,
                                          " or it is corrupt, use another checkpoint"));
}

absl::StatusOr<ShardRecord> readRecord(Source& source, const std::string& path) {
  source.beginRecord();
  ShardRecord record;
  absl::StatusOr<uint32_t> name_bytes = source.u32("a tensor name length");
  if (!name_bytes.ok()) return name_bytes.status();
  if (*name_bytes == 0 || *name_bytes > kMaxNameBytes) {
    return malformed(path, absl::StrCat("tensor name length ", *name_bytes, " at offset ",
                                        source.position() - 4));
  }
  record.name.resize(*name_bytes);
  if (absl::Status s = source.read(record.name.data(), *name_bytes, "a tensor name"); !s.ok()) {
    return s;
  }
  const std::string what = absl::StrCat("tensor '", record.name, "'");
  absl::StatusOr<uint32_t> dtype = source.u32(what);
  if (!dtype.ok()) return dtype.status();
  if (*dtype != static_cast<uint32_t>(DType::kF32) &&
      *dtype != static_cast<uint32_t>(DType::kI32)) {
    return malformed(path, absl::StrCat(what, " has unknown dtype code ", *dtype));
  }
  record.dtype = static_cast<DType>(*dtype);
  absl::StatusOr<uint32_t> ndim = source.u32(what);
  if (!ndim.ok()) return ndim.status();
  if (*ndim == 0 || *ndim > kMaxRank) {
    return malformed(path, absl::StrCat(what, " has rank ", *ndim));
  }
  for (std::vector<int64_t>* dims :
       {&record.global_shape, &record.box.offsets, &record.box.sizes}) {
    if (absl::Status s = source.i64s(*dims, *ndim, what); !s.ok()) return s;
  }
  for (int64_t size : record.global_shape) {
    if (size < 0) return malformed(path, absl::StrCat(what, " has a negative dim"));
  }
  if (absl::Status s = checkBoxInside(record.box, record.global_shape, what); !s.ok()) {
    return malformed(path, s.message());
  }
  absl::StatusOr<int64_t> data_bytes = source.i64(what);
  if (!data_bytes.ok()) return data_bytes.status();
  const int64_t expected = numElements(record.box.sizes) * dtypeBytes(record.dtype);
  if (*data_bytes != expected) {
    return malformed(path, absl::StrCat(what, " box ", describeBox(record.box), " declares ",
                                        *data_bytes, " data bytes, not ", expected));
  }
  if (absl::Status s = source.need(*data_bytes + 4, absl::StrCat("the data of ", what)); !s.ok()) {
    return s;
  }
  record.data_offset = source.position();
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min<int64_t>(*data_bytes, kChunkBytes)));
  for (int64_t left = *data_bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, kChunkBytes));
    if (absl::Status s = source.read(chunk.data(), n, what); !s.ok()) return s;
    left -= static_cast<int64_t>(n);
  }
  const uint32_t actual = source.crc();
  absl::StatusOr<uint32_t> stored = source.u32(what);
  if (!stored.ok()) return stored.status();
  if (*stored != actual) {
    return absl::DataLossError(
        absl::StrCat("checksum mismatch in checkpoint file ", path, " for ", what, " box ",
                     describeBox(record.box), ": stored CRC-32C ", *stored, ", computed ", actual,
                     "; the file is corrupt, restore it or use another checkpoint"));
  }
  return record;
}

}  // namespace

absl::string_view dtypeName(DType dtype) { return dtype == DType::kF32 ? "f32" : "i32"; }

absl::StatusOr<DType> parseDType(absl::string_view name) {
  if (name == "f32") return DType::kF32;
  if (name == "i32") return DType::kI32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown checkpoint dtype '", name, "'; expected f32 or i32"));
}

int64_t dtypeBytes(DType) { return 4; }

std::string describeShape(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string describeBox(const Box& box) {
  std::vector<std::string> ranges;
  for (size_t d = 0; d < box.offsets.size() && d < box.sizes.size(); ++d) {
    ranges.push_back(absl::StrCat(box.offsets[d], ":", box.offsets[d] + box.sizes[d]));
  }
  return absl::StrCat("[", absl::StrJoin(ranges, ", "), "]");
}

int64_t numElements(std::span<const int64_t> sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) count *= size;
  return count;
}

absl::Status checkBoxInside(const Box& box, std::span<const int64_t> shape,
                            absl::string_view what) {
  if (box.offsets.size() != shape.size() || box.sizes.size() != shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("box ", describeBox(box), " of ", what, " has ", box.offsets.size(),
                     " offsets and ", box.sizes.size(), " sizes but the tensor ",
                     describeShape(shape), " has rank ", shape.size()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (box.offsets[d] < 0 || box.sizes[d] < 0 || box.offsets[d] + box.sizes[d] > shape[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("box ", describeBox(box), " of ", what, " leaves the tensor of shape ",
                       describeShape(shape), " along dim ", d, "; request a box inside the shape"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PaddedShard> padShard(std::span<const int64_t> global_shape,
                                     std::span<const DimSplit> splits) {
  PaddedShard shard;
  shard.box.offsets.assign(global_shape.size(), 0);
  shard.box.sizes.assign(global_shape.begin(), global_shape.end());
  shard.local_shape.assign(global_shape.begin(), global_shape.end());
  std::vector<bool> split(global_shape.size(), false);
  for (const DimSplit& s : splits) {
    if (s.dim < 0 || s.dim >= static_cast<int64_t>(global_shape.size()) || split[s.dim]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot split dim ", s.dim, " of a tensor of shape ", describeShape(global_shape),
          ": it is out of range or already split; split each dim once"));
    }
    split[s.dim] = true;
    absl::StatusOr<mesh::ShardExtent> extent =
        mesh::shardExtent(global_shape[s.dim], s.ways, s.index);
    if (!extent.ok()) return extent.status();
    shard.box.offsets[s.dim] = extent->begin;
    shard.box.sizes[s.dim] = extent->valid;
    shard.local_shape[s.dim] = mesh::shardSize(global_shape[s.dim], s.ways);
  }
  return shard;
}

absl::Status checkShardView(const ShardView& shard) {
  if (shard.name.empty() || shard.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a checkpoint shard needs a tensor name of 1 to ", kMaxNameBytes,
                     " bytes, got ", shard.name.size()));
  }
  const std::string what = absl::StrCat("tensor '", shard.name, "'");
  if (shard.global_shape.empty() || shard.global_shape.size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has rank ", shard.global_shape.size(),
                                                   "; checkpoints store "
                                                   "ranks 1 to ",
                                                   kMaxRank, " (save a scalar as shape [1])"));
  }
  if (absl::Status s = checkBoxInside(shard.box, shard.global_shape, what); !s.ok()) {
    return s;
  }
  const std::vector<int64_t>& local = localShapeOf(shard);
  if (local.size() != shard.global_shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has local shape ", describeShape(local),
                                                   " of another rank "
                                                   "than its global shape ",
                                                   describeShape(shard.global_shape)));
  }
  for (size_t d = 0; d < local.size(); ++d) {
    if (local[d] < shard.box.sizes[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " local shape ", describeShape(local), " is smaller than its box ",
          describeBox(shard.box), " along dim ", d, "; the buffer must hold the whole box"));
    }
  }
  if (shard.data == nullptr && numElements(shard.box.sizes) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " box ", describeBox(shard.box), " has no data"));
  }
  return absl::OkStatus();
}

absl::Status writeRankFile(const std::string& path, const RankFileHeader& header,
                           std::span<const ShardView> shards, const ProgressFn& progress) {
  std::vector<const ShardView*> stored;
  int64_t total = kHeaderBytes;
  for (const ShardView& shard : shards) {
    if (absl::Status s = checkShardView(shard); !s.ok()) return s;
    if (numElements(shard.box.sizes) == 0) continue;
    stored.push_back(&shard);
    total += recordBytes(shard);
  }
  const std::string tmp = path + ".tmp";
  absl::StatusOr<int> fd = createTemporary(tmp);
  if (!fd.ok()) return fd.status();
  Sink sink(*fd, tmp, total, progress);
  sink.put(kMagic, sizeof(kMagic));
  sink.putU32(kFormatVersion);
  sink.putU32(static_cast<uint32_t>(header.rank));
  sink.putU32(static_cast<uint32_t>(header.world_size));
  sink.putU32(static_cast<uint32_t>(stored.size()));
  sink.putU64(static_cast<uint64_t>(header.step));
  for (const ShardView* shard : stored) {
    sink.beginRecord();
    sink.putU32(static_cast<uint32_t>(shard->name.size()));
    sink.put(shard->name.data(), shard->name.size());
    sink.putU32(static_cast<uint32_t>(shard->dtype));
    sink.putU32(static_cast<uint32_t>(shard->global_shape.size()));
    sink.putI64s(shard->global_shape);
    sink.putI64s(shard->box.offsets);
    sink.putI64s(shard->box.sizes);
    sink.putU64(static_cast<uint64_t>(numElements(shard->box.sizes) * dtypeBytes(shard->dtype)));
    putBoxData(sink, *shard);
    sink.endRecord();
  }
  if (absl::Status s = sink.finish(); !s.ok()) {
    ::close(*fd);
    return s;
  }
  return commitFile(*fd, tmp, path);
}

absl::StatusOr<std::vector<ShardRecord>> readRankFile(const std::string& path,
                                                      RankFileHeader* header) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fileError("open checkpoint file", path, errno);
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return fileError("stat", path, error);
  }
  Source source(fd, path, static_cast<int64_t>(info.st_size));
  auto parse = [&]() -> absl::StatusOr<std::vector<ShardRecord>> {
    char magic[sizeof(kMagic)];
    if (absl::Status s = source.read(magic, sizeof(magic), "the header"); !s.ok()) {
      return s;
    }
    if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
      return malformed(path, "wrong magic");
    }
    absl::StatusOr<uint32_t> version = source.u32("the header");
    if (!version.ok()) return version.status();
    if (*version != kFormatVersion) {
      return malformed(path, absl::StrCat("format version ", *version));
    }
    absl::StatusOr<uint32_t> rank = source.u32("the header");
    absl::StatusOr<uint32_t> world = source.u32("the header");
    absl::StatusOr<uint32_t> count = source.u32("the header");
    absl::StatusOr<int64_t> step = source.i64("the header");
    for (const absl::Status& s : {rank.status(), world.status(), count.status(), step.status()}) {
      if (!s.ok()) return s;
    }
    header->rank = *rank;
    header->world_size = *world;
    header->step = *step;
    std::vector<ShardRecord> records;
    for (uint32_t i = 0; i < *count; ++i) {
      absl::StatusOr<ShardRecord> record = readRecord(source, path);
      if (!record.ok()) return record.status();
      records.push_back(*std::move(record));
    }
    if (source.remaining() != 0) {
      return malformed(path, absl::StrCat(source.remaining(), " bytes follow the last record"));
    }
    return records;
  };
  absl::StatusOr<std::vector<ShardRecord>> records = parse();
  ::close(fd);
  return records;
}

absl::Status writeFileAtomically(const std::string& path, absl::string_view content) {
  const std::string tmp = path + ".tmp";
  absl::StatusOr<int> fd = createTemporary(tmp);
  if (!fd.ok()) return fd.status();
  if (absl::Status s = writeAll(*fd, tmp, content.data(), content.size()); !s.ok()) {
    ::close(*fd);
    return s;
  }
  return commitFile(*fd, tmp, path);
}

absl::StatusOr<std::string> readSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fileError("open", path, errno);
  std::string content;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return fileError("read", path, error);
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

}  // namespace loom::runtime::checkpoint
