// Opening a checkpoint (manifest against rank files, checksums) and
// assembling boxes from the intersecting stored shards.
#include "runtime/checkpoint/checkpoint_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/checkpoint/checkpoint_writer.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {
namespace {

// Reads `size` bytes at `offset` of `path`.
absl::Status readAt(const std::string& path, int64_t offset, size_t size, uint8_t* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::DataLossError(
        absl::StrCat("cannot open checkpoint file ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return absl::DataLossError(absl::StrCat(
          "cannot read ", size, " bytes at offset ", offset, " of checkpoint file ", path, ": ",
          n < 0 ? std::strerror(error) : "the file shrank after it was opened"));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> latestStep(const std::string& dir) {
  const std::string path = dir + "/latest";
  absl::StatusOr<std::string> latest = readSmallFile(path);
  if (!latest.ok()) {
    if (absl::IsNotFound(latest.status())) {
      return absl::NotFoundError(
          absl::StrCat("no committed checkpoint in ", dir, " (", path,
                       " does not exist); start without --resume or point at another "
                       "directory"));
    }
    return latest.status();
  }
  std::string_view text = *latest;
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  int64_t step = -1;
  const std::string_view prefix = "step_";
  if (text.starts_with(prefix)) {
    text.remove_prefix(prefix.size());
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), step);
    if (error != std::errc() || end != text.data() + text.size()) step = -1;
  }
  if (step < 0) {
    return absl::DataLossError(absl::StrCat(path, " holds '", *latest,
                                            "', not step_<N>; rewrite it to name a "
                                            "complete checkpoint or open a step explicitly"));
  }
  return step;
}

absl::StatusOr<CheckpointReader> CheckpointReader::open(const std::string& dir) {
  absl::StatusOr<int64_t> step = latestStep(dir);
  if (!step.ok()) return step.status();
  return open(dir, *step);
}

absl::StatusOr<CheckpointReader> CheckpointReader::open(const std::string& dir, int64_t step) {
  const std::string step_dir = stepDirectory(dir, step);
  const std::string manifest_path = step_dir + "/manifest.json";
  absl::StatusOr<std::string> text = readSmallFile(manifest_path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", step_dir,
                                              " has no manifest.json: it does not exist "
                                              "or its save never committed; open another step"));
    }
    return text.status();
  }
  absl::StatusOr<Manifest> manifest = Manifest::parse(*text, manifest_path);
  if (!manifest.ok()) return manifest.status();
  if (manifest->step != step) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, " describes step ", manifest->step, ", not ", step,
                     "; the directory was renamed or mixed up, use another checkpoint"));
  }
  // What the manifest says each rank file holds: (tensor, rank) -> entry.
  std::map<std::pair<std::string, int64_t>, std::pair<const TensorEntry*, Box>> expected;
  for (const auto& [name, entry] : manifest->tensors) {
    for (const StoredShard& shard : entry.shards) {
      expected[{name, shard.rank}] = {&entry, shard.box};
    }
  }
  std::map<std::pair<std::string, int64_t>, int64_t> offsets;
  for (int64_t r = 0; r < manifest->world_size; ++r) {
    const std::string path = rankFileName(step_dir, r);
    RankFileHeader header;
    absl::StatusOr<std::vector<ShardRecord>> records = readRankFile(path, &header);
    if (!records.ok()) {
      if (absl::IsNotFound(records.status())) {
        return absl::DataLossError(
            absl::StrCat(records.status().message(), "; the manifest of ", step_dir,
                         " lists it, so the checkpoint is damaged: restore the file or "
                         "use another checkpoint"));
      }
      return records.status();
    }
    if (header.rank != r || header.world_size != manifest->world_size || header.step != step) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", path, " belongs to rank ", header.rank, " of ",
                       header.world_size, " at step ", header.step,
                       ", but the manifest "
                       "expects rank ",
                       r, " of ", manifest->world_size, " at step ", step,
                       "; files were mixed between checkpoints, use another checkpoint"));
    }
    for (const ShardRecord& record : *records) {
      auto it = expected.find({record.name, r});
      if (it == expected.end() || it->second.first->dtype != record.dtype ||
          it->second.first->shape != record.global_shape || it->second.second != record.box) {
        return absl::DataLossError(
            absl::StrCat("checkpoint file ", path, " holds tensor '", record.name, "' box ",
                         describeBox(record.box), " which the manifest of ", step_dir,
                         " does not list; files were mixed between checkpoints, use "
                         "another checkpoint"));
      }
      offsets[{record.name, r}] = record.data_offset;
    }
  }
  for (const auto& [key, value] : expected) {
    if (!offsets.contains(key)) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", rankFileName(step_dir, key.second), " lacks tensor '",
                       key.first, "' box ", describeBox(value.second),
                       " that the manifest lists; the checkpoint is damaged, use another "
                       "checkpoint"));
    }
  }
  return CheckpointReader(step_dir, *std::move(manifest), std::move(offsets));
}

std::vector<std::string> CheckpointReader::tensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : manifest_.tensors) names.push_back(name);
  return names;
}

absl::StatusOr<TensorInfo> CheckpointReader::tensor(const std::string& name) const {
  auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) {
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' is not in checkpoint ", step_dir_,
                                            "; it holds: ", absl::StrJoin(tensorNames(), ", "),
                                            " (check the parameter names of the plan)"));
  }
  return TensorInfo{it->second.dtype, it->second.shape};
}

absl::Status CheckpointReader::readInto(const std::string& name, const Box& box, float* out) const {
  return readBox(name, box, DType::kF32, out);
}

absl::Status CheckpointReader::readInto(const std::string& name, const Box& box,
                                        int32_t* out) const {
  return readBox(name, box, DType::kI32, out);
}

absl::Status CheckpointReader::readBox(const std::string& name, const Box& box, DType dtype,
                                       void* out) const {
  absl::StatusOr<TensorInfo> info = tensor(name);
  if (!info.ok()) return info.status();
  if (info->dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' of checkpoint ", step_dir_, " is ", dtypeName(info->dtype), ", not ",
        dtypeName(dtype), "; read it into a ", dtypeName(info->dtype), " buffer"));
  }
  if (absl::Status s = checkBoxInside(
          box, info->shape, absl::StrCat("tensor '", name, "' of checkpoint ", step_dir_));
      !s.ok()) {
    return s;
  }
  const size_t ndim = box.sizes.size();
  const int64_t element = dtypeBytes(dtype);
  auto* destination = static_cast<uint8_t*>(out);
  std::vector<int64_t> out_strides(ndim, 1);
  for (size_t d = ndim - 1; d > 0; --d) {
    out_strides[d - 1] = out_strides[d] * box.sizes[d];
  }
  std::vector<uint8_t> rows;
  for (const StoredShard& shard : manifest_.tensors.at(name).shards) {
    Box overlap{std::vector<int64_t>(ndim), std::vector<int64_t>(ndim)};
    bool empty = false;
    for (size_t d = 0; d < ndim; ++d) {
      const int64_t begin = std::max(box.offsets[d], shard.box.offsets[d]);
      const int64_t end =
          std::min(box.offsets[d] + box.sizes[d], shard.box.offsets[d] + shard.box.sizes[d]);
      overlap.offsets[d] = begin;
      overlap.sizes[d] = end - begin;
      empty = empty || end <= begin;
    }
    if (empty) continue;
    // A shard is row-major, so the overlapping dim-0 rows are one contiguous
    // byte range: read only those.
    std::vector<int64_t> shard_strides(ndim, 1);
    for (size_t d = ndim - 1; d > 0; --d) {
      shard_strides[d - 1] = shard_strides[d] * shard.box.sizes[d];
    }
    const int64_t first_row = overlap.offsets[0] - shard.box.offsets[0];
    rows.resize(static_cast<size_t>(overlap.sizes[0] * shard_strides[0] * element));
    if (absl::Status s =
            readAt(rankFileName(step_dir_, shard.rank),
                   data_offsets_.at({name, shard.rank}) + first_row * shard_strides[0] * element,
                   rows.size(), rows.data());
        !s.ok()) {
      return s;
    }
    const size_t run = static_cast<size_t>(overlap.sizes[ndim - 1] * element);
    std::vector<int64_t> index(ndim, 0);
    while (true) {
      int64_t source = 0;
      int64_t target = 0;
      for (size_t d = 0; d < ndim; ++d) {
        const int64_t global = overlap.offsets[d] + index[d];
        source += (d == 0 ? index[d] : global - shard.box.offsets[d]) * shard_strides[d];
        target += (global - box.offsets[d]) * out_strides[d];
      }
      std::memcpy(destination + target * element, rows.data() + source * element, run);
      size_t d = ndim - 1;
      bool done = true;
      while (d > 0) {
        --d;
        if (++index[d] < overlap.sizes[d]) {
          done = false;
          break;
        }
        index[d] = 0;
      }
      if (done) break;
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime::checkpoint
