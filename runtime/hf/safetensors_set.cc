// A model's safetensors files: one file, or the shards of an index
// (model.safetensors.index.json, transformers' layout for large models).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/hf/safetensors.h"

namespace loom::runtime::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The files an index names, in order of first appearance, and each
// tensor's file.
struct Index {
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;
};

absl::StatusOr<Index> readIndex(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open index ", path));
  std::stringstream text;
  text << in.rdbuf();
  const json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object() || !root.contains("weight_map") ||
      !root["weight_map"].is_object()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a safetensors index (a JSON object with a \"weight_map\" object)"));
  }
  Index index;
  for (const auto& [name, file] : root["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() ||
        absl::StrContains(file.get<std::string>(), "/")) {
      return absl::DataLossError(absl::StrCat(path, ": weight_map entry '", name,
                                              "' is not a file name next to the index"));
    }
    const std::string f = file.get<std::string>();
    if (std::find(index.files.begin(), index.files.end(), f) == index.files.end()) {
      index.files.push_back(f);
    }
    index.weight_map[name] = f;
  }
  return index;
}

}  // namespace

absl::StatusOr<SafetensorsSet> SafetensorsSet::open(const std::string& path) {
  std::error_code error;
  std::string file = path;
  if (fs::is_directory(path, error)) {
    const fs::path index = fs::path(path) / kIndexFileName;
    const fs::path single = fs::path(path) / kSingleFileName;
    if (fs::exists(index, error)) {
      file = index.string();
    } else if (fs::exists(single, error)) {
      file = single.string();
    } else {
      return absl::NotFoundError(
          absl::StrCat(path, " holds neither ", kIndexFileName, " nor ", kSingleFileName));
    }
  }
  SafetensorsSet set;
  set.source_ = file;
  if (!absl::EndsWith(file, ".json")) {
    absl::StatusOr<SafetensorsFile> one = SafetensorsFile::open(file);
    if (!one.ok()) return one.status();
    for (const TensorEntry& t : one->header().tensors) set.where_[t.name] = 0;
    set.files_.push_back(*std::move(one));
    return set;
  }
  absl::StatusOr<Index> index = readIndex(file);
  if (!index.ok()) return index.status();
  const fs::path dir = fs::path(file).parent_path();
  for (const std::string& name : index->files) {
    absl::StatusOr<SafetensorsFile> shard = SafetensorsFile::open((dir / name).string());
    if (!shard.ok()) {
      return absl::Status(shard.status().code(),
                          absl::StrCat(shard.status().message(), " (listed by ", file, ")"));
    }
    for (const TensorEntry& t : shard->header().tensors) {
      auto [at, inserted] = set.where_.emplace(t.name, set.files_.size());
      if (!inserted) {
        return absl::DataLossError(absl::StrCat("tensor '", t.name, "' is in both ",
                                                set.files_[at->second].path(), " and ",
                                                shard->path()));
      }
    }
    set.files_.push_back(*std::move(shard));
  }
  for (const auto& [name, shard] : index->weight_map) {
    const SafetensorsFile* holder = set.fileOf(name);
    if (holder == nullptr || fs::path(holder->path()).filename() != shard) {
      return absl::DataLossError(absl::StrCat(file, " puts tensor '", name, "' in ", shard,
                                              " but that file does not hold it"));
    }
  }
  return set;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : where_) names.push_back(name);
  return names;
}

const SafetensorsFile* SafetensorsSet::fileOf(absl::string_view name) const {
  auto at = where_.find(std::string(name));
  return at == where_.end() ? nullptr : &files_[at->second];
}

const TensorEntry* SafetensorsSet::find(absl::string_view name) const {
  const SafetensorsFile* file = fileOf(name);
  return file == nullptr ? nullptr : file->header().find(name);
}

absl::Status SafetensorsSet::readBox(absl::string_view name, const Box& box,
                                     std::span<float> out) const {
  const SafetensorsFile* file = fileOf(name);
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(source_, ": no tensor '", name, "'"));
  }
  return file->readBox(name, box, out);
}

int64_t SafetensorsSet::bytesRead() const {
  int64_t n = 0;
  for (const SafetensorsFile& f : files_) n += f.bytesRead();
  return n;
}

}  // namespace loom::runtime::hf
