// The commit protocol of a sharded save (docs/runtime_checkpoint.md): rank
// files first, then rank 0's manifest, then `latest`; a crash before the
// manifest's rename leaves the previous checkpoint the current one.
#include "runtime/checkpoint/checkpoint_writer.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/store.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {
namespace {

using nlohmann::json;

std::string rankKey(const std::string& prefix, int64_t rank) {
  return absl::StrCat(prefix, "rank/", rank);
}

json statusToJson(const absl::Status& status) {
  return json{{"code", static_cast<int>(status.code())},
              {"message", std::string(status.message())}};
}

absl::Status statusFromJson(const json& value) {
  return absl::Status(static_cast<absl::StatusCode>(value.at("code").get<int>()),
                      value.at("message").get<std::string>());
}

// What `latest` names now, for messages ("no earlier checkpoint" if none).
std::string describeLatest(const std::string& dir) {
  absl::StatusOr<std::string> latest = readSmallFile(dir + "/latest");
  if (!latest.ok()) return "no earlier checkpoint exists";
  while (!latest->empty() && latest->back() == '\n') latest->pop_back();
  return absl::StrCat("'latest' still names ", *latest);
}

// This rank's part: checks, then the durable rank file.
absl::Status writeLocal(const std::string& step_dir, int64_t step, int64_t rank, int64_t world_size,
                        const std::vector<ShardView>& shards, const ProgressFn& progress) {
  std::map<std::string, int> seen;
  for (const ShardView& shard : shards) {
    if (++seen[shard.name] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " passed tensor '", shard.name,
                                                     "' twice; pass one shard per tensor"));
    }
  }
  std::error_code error;
  std::filesystem::create_directories(step_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory ", step_dir, ": ", error.message()));
  }
  if (std::filesystem::exists(step_dir + "/manifest.json")) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", step_dir,
                                                      " is already committed; save under a new "
                                                      "step or delete that directory first"));
  }
  return writeRankFile(rankFileName(step_dir, rank), RankFileHeader{rank, world_size, step}, shards,
                       progress);
}

json describeShards(int64_t rank, const std::vector<ShardView>& shards) {
  json described = json::array();
  for (const ShardView& shard : shards) {
    described.push_back({{"name", shard.name},
                         {"dtype", dtypeName(shard.dtype)},
                         {"shape", shard.global_shape},
                         {"offsets", shard.box.offsets},
                         {"sizes", shard.box.sizes}});
  }
  return json{{"rank", rank}, {"shards", described}};
}

}  // namespace

std::string stepDirectory(const std::string& dir, int64_t step) {
  return absl::StrCat(dir, "/step_", step);
}

CheckpointWriter::CheckpointWriter(std::string dir, WriterOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {}

absl::Status CheckpointWriter::save(int64_t step, const std::vector<ShardView>& shards,
                                    const json& metadata, comm::Store& store, int64_t rank,
                                    int64_t world_size, absl::Duration timeout) {
  if (world_size < 1 || rank < 0 || rank >= world_size || step < 0) {
    return comm::invalidArgumentError(
        absl::StrCat("checkpoint save needs 0 <= rank < world_size and step >= 0, got rank ", rank,
                     ", world size ", world_size, ", step ", step));
  }
  const std::string prefix = absl::StrCat("loom/checkpoint/", saves_++, "/");
  const std::string step_dir = stepDirectory(dir_, step);
  absl::Status local =
      (rank == 0 && !metadata.is_object() && !metadata.is_null())
          ? comm::invalidArgumentError("checkpoint metadata must be a JSON object (or null)")
          : writeLocal(step_dir, step, rank, world_size, shards, options_.progress);
  json entry = local.ok() ? describeShards(rank, shards)
                          : json{{"rank", rank}, {"error", statusToJson(local)}};
  if (absl::Status s = store.setString(rankKey(prefix, rank), entry.dump()); !s.ok()) {
    return s;
  }
  const std::string done_key = prefix + "done";
  if (rank == 0) {
    absl::Status verdict =
        local.ok() ? commit(step, step_dir, metadata, store, prefix, world_size, timeout) : local;
    if (absl::Status s = store.setString(done_key, statusToJson(verdict).dump());
        !s.ok() && verdict.ok()) {
      return s;
    }
    return verdict;
  }
  if (!local.ok()) return local;
  const absl::Duration verdict_timeout = 2 * timeout;
  if (absl::Status s = store.wait({done_key}, verdict_timeout); !s.ok()) {
    if (comm::errorKind(s) != comm::ErrorKind::kTimeout) return s;
    return comm::timeoutError(absl::StrCat("checkpoint ", step_dir,
                                           " was not committed: rank 0 gave no verdict "
                                           "within ",
                                           absl::FormatDuration(verdict_timeout),
                                           " (rank 0 died or hangs); ", describeLatest(dir_)));
  }
  absl::StatusOr<std::string> done = store.getString(done_key);
  if (!done.ok()) return done.status();
  absl::Status verdict;
  try {
    verdict = statusFromJson(json::parse(*done));
  } catch (const json::exception& e) {
    return comm::storeError(
        absl::StrCat("rank 0's verdict on checkpoint ", step_dir, " is unreadable: ", e.what()));
  }
  if (verdict.ok()) return verdict;
  return absl::Status(verdict.code(), absl::StrCat("rank 0 reports: ", verdict.message()));
}

absl::Status CheckpointWriter::commit(int64_t step, const std::string& step_dir,
                                      const json& metadata, comm::Store& store,
                                      const std::string& prefix, int64_t world_size,
                                      absl::Duration timeout) {
  std::vector<std::string> keys;
  for (int64_t r = 0; r < world_size; ++r) keys.push_back(rankKey(prefix, r));
  if (absl::Status s = store.wait(keys, timeout); !s.ok()) {
    if (comm::errorKind(s) != comm::ErrorKind::kTimeout) return s;
    std::vector<int64_t> missing;
    for (int64_t r = 0; r < world_size; ++r) {
      absl::StatusOr<bool> present = store.check({keys[r]});
      if (!present.ok()) return present.status();
      if (!*present) missing.push_back(r);
    }
    return comm::timeoutError(absl::StrCat(
        "checkpoint ", step_dir, " was not committed: rank", missing.size() == 1 ? " " : "s ",
        absl::StrJoin(missing, ", "), " did not finish writing within ",
        absl::FormatDuration(timeout), " (died, hangs, or its file system is stuck); ",
        describeLatest(dir_), ", which stays loadable"));
  }
  absl::StatusOr<std::vector<comm::Bytes>> values = store.multiGet(keys);
  if (!values.ok()) return values.status();
  // The shard lists are read; a leftover key would only cost store memory,
  // so a failed delete does not fail the save.
  for (const std::string& key : keys) {
    store.deleteKey(key).status().IgnoreError();
  }
  Manifest manifest;
  manifest.step = step;
  manifest.world_size = world_size;
  manifest.mesh = options_.mesh;
  manifest.metadata = metadata.is_null() ? json::object() : metadata;
  for (int64_t r = 0; r < world_size; ++r) {
    json entry;
    try {
      entry = json::parse(comm::asStringView((*values)[r]));
      if (entry.contains("error")) {
        absl::Status failed = statusFromJson(entry.at("error"));
        return absl::Status(
            failed.code(), absl::StrCat("checkpoint ", step_dir, " was not committed: rank ", r,
                                        " failed: ", failed.message(), "; ", describeLatest(dir_)));
      }
      for (const json& shard : entry.at("shards")) {
        absl::StatusOr<DType> dtype = parseDType(shard.at("dtype").get<std::string>());
        if (!dtype.ok()) return dtype.status();
        if (absl::Status s = manifest.addShard(shard.at("name").get<std::string>(), *dtype,
                                               shard.at("shape").get<std::vector<int64_t>>(), r,
                                               Box{shard.at("offsets").get<std::vector<int64_t>>(),
                                                   shard.at("sizes").get<std::vector<int64_t>>()});
            !s.ok()) {
          return absl::Status(
              s.code(), absl::StrCat("checkpoint ", step_dir, " was not committed: ", s.message()));
        }
      }
    } catch (const json::exception& e) {
      return comm::storeError(absl::StrCat("rank ", r, "'s shard list for checkpoint ", step_dir,
                                           " is unreadable: ", e.what()));
    }
  }
  if (absl::Status s = manifest.checkComplete(); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("checkpoint ", step_dir, " was not committed: ", s.message()));
  }
  if (absl::Status s = writeFileAtomically(step_dir + "/manifest.json", manifest.toJson().dump(1));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = writeFileAtomically(dir_ + "/latest", absl::StrCat("step_", step, "\n"));
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime::checkpoint
