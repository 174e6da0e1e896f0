// Manifest bookkeeping and its JSON form (docs/runtime_checkpoint.md).
#include "runtime/checkpoint/manifest.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {
namespace {

using nlohmann::json;

constexpr char kFormatName[] = "loom-checkpoint";

bool overlaps(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string rankFileBaseName(int64_t rank) { return absl::StrCat("rank_", rank, ".bin"); }

std::string rankFileName(const std::string& step_dir, int64_t rank) {
  return absl::StrCat(step_dir, "/", rankFileBaseName(rank));
}

absl::Status Manifest::addShard(const std::string& name, DType dtype,
                                const std::vector<int64_t>& shape, int64_t rank, const Box& box) {
  const std::string what = absl::StrCat("tensor '", name, "'");
  for (int64_t size : shape) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has negative dim in shape ", describeShape(shape)));
    }
  }
  if (absl::Status s = checkBoxInside(box, shape, what); !s.ok()) return s;
  auto [it, inserted] = tensors.try_emplace(name);
  TensorEntry& entry = it->second;
  if (inserted) {
    entry.dtype = dtype;
    entry.shape = shape;
  } else if (entry.dtype != dtype || entry.shape != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", dtypeName(dtype), describeShape(shape), " on rank ", rank,
                     " but ", dtypeName(entry.dtype), describeShape(entry.shape),
                     " on another rank; every rank must describe a tensor alike"));
  }
  if (numElements(box.sizes) == 0) return absl::OkStatus();
  for (const StoredShard& other : entry.shards) {
    if (overlaps(other.box, box)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " box ", describeBox(box), " of rank ", rank, " overlaps box ",
                       describeBox(other.box), " of rank ", other.rank,
                       "; save every element once (only one replica of a replicated "
                       "tensor)"));
    }
  }
  entry.shards.push_back({rank, box});
  return absl::OkStatus();
}

absl::Status Manifest::checkComplete() const {
  for (const auto& [name, entry] : tensors) {
    int64_t covered = 0;
    for (const StoredShard& shard : entry.shards) {
      covered += numElements(shard.box.sizes);
    }
    const int64_t total = numElements(entry.shape);
    if (covered != total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the shards of tensor '", name, "' ", describeShape(entry.shape), " cover ", covered,
          " of its ", total, " elements; every element must be saved by one rank"));
    }
  }
  return absl::OkStatus();
}

json Manifest::toJson() const {
  json tensor_list = json::array();
  for (const auto& [name, entry] : tensors) {
    json shard_list = json::array();
    for (const StoredShard& shard : entry.shards) {
      shard_list.push_back({{"rank", shard.rank},
                            {"file", rankFileBaseName(shard.rank)},
                            {"offsets", shard.box.offsets},
                            {"sizes", shard.box.sizes}});
    }
    tensor_list.push_back({{"name", name},
                           {"dtype", dtypeName(entry.dtype)},
                           {"shape", entry.shape},
                           {"shards", shard_list}});
  }
  json files = json::array();
  for (int64_t r = 0; r < world_size; ++r) {
    files.push_back({{"rank", r}, {"file", rankFileBaseName(r)}});
  }
  return json{{"format", kFormatName},  {"version", kManifestVersion},
              {"step", step},           {"world_size", world_size},
              {"mesh", mesh},           {"files", files},
              {"tensors", tensor_list}, {"metadata", metadata}};
}

absl::StatusOr<Manifest> Manifest::parse(const std::string& text, const std::string& path) {
  auto bad = [&](absl::string_view detail) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest ", path, " is invalid: ", detail,
                                            "; the checkpoint is damaged, use another one"));
  };
  Manifest manifest;
  try {
    const json root = json::parse(text);
    if (root.at("format").get<std::string>() != kFormatName) {
      return bad("it is not a Loom checkpoint manifest");
    }
    const int64_t version = root.at("version").get<int64_t>();
    if (version != kManifestVersion) {
      return bad(absl::StrCat("format version ", version, ", this build reads ", kManifestVersion));
    }
    manifest.step = root.at("step").get<int64_t>();
    manifest.world_size = root.at("world_size").get<int64_t>();
    manifest.mesh = root.at("mesh").get<std::string>();
    manifest.metadata = root.at("metadata");
    if (manifest.world_size < 1) return bad("world size below 1");
    for (const json& tensor : root.at("tensors")) {
      const std::string name = tensor.at("name").get<std::string>();
      absl::StatusOr<DType> dtype = parseDType(tensor.at("dtype").get<std::string>());
      if (!dtype.ok()) return bad(dtype.status().message());
      const auto shape = tensor.at("shape").get<std::vector<int64_t>>();
      if (shape.empty()) return bad(absl::StrCat("tensor '", name, "' has rank 0"));
      if (numElements(shape) == 0) manifest.tensors[name] = {*dtype, shape, {}};
      for (const json& shard : tensor.at("shards")) {
        const int64_t rank = shard.at("rank").get<int64_t>();
        if (rank < 0 || rank >= manifest.world_size) {
          return bad(absl::StrCat("tensor '", name, "' names rank ", rank));
        }
        if (shard.at("file").get<std::string>() != rankFileBaseName(rank)) {
          return bad(absl::StrCat("tensor '", name, "' of rank ", rank, " names file ",
                                  shard.at("file").dump()));
        }
        const Box box{shard.at("offsets").get<std::vector<int64_t>>(),
                      shard.at("sizes").get<std::vector<int64_t>>()};
        if (numElements(box.sizes) == 0) {
          return bad(absl::StrCat("tensor '", name, "' lists an empty box"));
        }
        if (absl::Status s = manifest.addShard(name, *dtype, shape, rank, box); !s.ok()) {
          return bad(s.message());
        }
      }
      if (!manifest.tensors.contains(name)) {
        return bad(absl::StrCat("tensor '", name, "' has no shards"));
      }
    }
  } catch (const json::exception& e) {
    return bad(e.what());
  }
  if (absl::Status s = manifest.checkComplete(); !s.ok()) {
    return bad(s.message());
  }
  return manifest;
}

}  // namespace loom::runtime::checkpoint
