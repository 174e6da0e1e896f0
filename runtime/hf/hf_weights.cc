// Matching a plan's parameters to Hugging Face tensors, and the export
// protocol: rank 0 lays the files out, every rank writes its shards, rank 0
// commits once every rank reported through the job's store.
#include "runtime/hf/hf_weights.h"

#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::runtime::hf {
namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
  return checkpoint::describeShape(shape);
}

struct Mapped {
  const plan::Buffer* param;
  HfSource source;
};

// Every parameter's source, and the extent of each sliced tensor's slice
// dim (the last slice's end).
absl::StatusOr<std::vector<Mapped>> mapParameters(const plan::Plan& plan,
                                                  std::map<std::string, int64_t>* extents) {
  std::vector<Mapped> mapped;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.role != plan::BufferRole::kParam) continue;
    absl::StatusOr<HfSource> source = hfSourceOf(b.name);
    if (!source.ok()) return source.status();
    if (source->transpose && b.global_shape.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", b.name, "' is ",
                                                     shapeText(b.global_shape),
                                                     "; a transposed weight must be 2-D"));
    }
    if (source->slice_dim >= 0) {
      if (source->slice_dim >= static_cast<int64_t>(b.global_shape.size()) ||
          source->slice_end - source->slice_begin != b.global_shape[source->slice_dim]) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", b.name, "' is ",
                                                       shapeText(b.global_shape),
                                                       ", which is not the slice its name gives"));
      }
      int64_t& extent = (*extents)[source->tensor];
      extent = std::max(extent, source->slice_end);
    }
    mapped.push_back({&b, *std::move(source)});
  }
  return mapped;
}

int64_t extentOf(const std::map<std::string, int64_t>& extents, const HfSource& source) {
  auto at = extents.find(source.tensor);
  return at == extents.end() ? 0 : at->second;
}

// The valid box of a shard, packed row-major over box.sizes.
std::vector<float> packedBox(const checkpoint::ShardView& view) {
  const std::vector<int64_t>& sizes = view.box.sizes;
  const std::vector<int64_t>& local = view.local_shape.empty() ? sizes : view.local_shape;
  const auto* data = static_cast<const float*>(view.data);
  std::vector<float> out(checkpoint::numElements(sizes));
  if (out.empty()) return out;
  const size_t rank = sizes.size();
  if (rank == 0) {
    out[0] = data[0];
    return out;
  }
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * local[d];
  std::vector<int64_t> index(rank - 1, 0);
  float* at = out.data();
  while (true) {
    int64_t start = 0;
    for (size_t d = 0; d + 1 < rank; ++d) start += index[d] * strides[d];
    std::copy(data + start, data + start + sizes[rank - 1], at);
    at += sizes[rank - 1];
    size_t d = rank - 1;
    while (d > 0 && ++index[d - 1] == sizes[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ParameterSource>> matchParameters(const plan::Plan& plan,
                                                             const SafetensorsSet& set) {
  std::map<std::string, int64_t> extents;
  absl::StatusOr<std::vector<Mapped>> mapped = mapParameters(plan, &extents);
  if (!mapped.ok()) return mapped.status();
  std::vector<ParameterSource> sources;
  for (const Mapped& m : *mapped) {
    std::string tensor = m.source.tensor;
    if (set.find(tensor) == nullptr && !m.source.tied_to.empty() &&
        set.find(m.source.tied_to) != nullptr) {
      tensor = m.source.tied_to;  // a head tied to the embedding
    }
    const TensorEntry* entry = set.find(tensor);
    if (entry == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          set.source(), " has no tensor '", m.source.tensor, "'",
          m.source.tied_to.empty() ? "" : absl::StrCat(" (nor '", m.source.tied_to, "')"),
          ", which the plan's parameter '", m.param->name,
          "' is read from; the weights are "
          "for another model or incomplete"));
    }
    const std::vector<int64_t> expected =
        hfShapeOf(m.source, m.param->global_shape, extentOf(extents, m.source));
    if (entry->shape != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(set.fileOf(tensor)->path(), ": tensor '", tensor, "' is ",
                       shapeText(entry->shape), " but the plan's parameter '", m.param->name, "' ",
                       shapeText(m.param->global_shape), " needs ", shapeText(expected),
                       "; plan the model the weights are for (e.g. "
                       "--model=its config.json)"));
    }
    sources.push_back({m.param->name, m.source, tensor});
  }
  return sources;
}

absl::Status readParameter(const SafetensorsSet& set, const std::vector<ParameterSource>& sources,
                           const std::string& param, const Box& box, std::span<float> out) {
  for (const ParameterSource& s : sources) {
    if (s.param == param) return readParameterBox(set, s.source, s.tensor, box, out);
  }
  return absl::NotFoundError(absl::StrCat("parameter '", param, "' was not matched"));
}

absl::StatusOr<std::vector<TensorSpec>> exportedTensors(const plan::Plan& plan) {
  std::map<std::string, int64_t> extents;
  absl::StatusOr<std::vector<Mapped>> mapped = mapParameters(plan, &extents);
  if (!mapped.ok()) return mapped.status();
  std::vector<TensorSpec> specs;
  std::map<std::string, bool> seen;
  for (const Mapped& m : *mapped) {
    if (seen[m.source.tensor]) continue;
    seen[m.source.tensor] = true;
    std::optional<StDType> dtype;
    if (m.param->dtype == comm::DType::kFloat32) dtype = StDType::kF32;
    if (m.param->dtype == comm::DType::kBFloat16) dtype = StDType::kBF16;
    if (!dtype) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", m.param->name, "' is ",
                                                     std::string(comm::dtypeName(m.param->dtype)),
                                                     "; export writes f32 or bf16"));
    }
    specs.push_back({m.source.tensor, *dtype,
                     hfShapeOf(m.source, m.param->global_shape, extentOf(extents, m.source))});
  }
  return specs;
}

namespace {

struct ExportFiles {
  std::vector<std::string> paths;
  std::vector<FileLayout> layouts;
  std::map<std::string, size_t> file_of;  // tensor -> index
  std::string index;                      // JSON, when there are several files
};

absl::StatusOr<ExportFiles> layOut(const plan::Plan& plan, const ExportOptions& options) {
  absl::StatusOr<std::vector<TensorSpec>> specs = exportedTensors(plan);
  if (!specs.ok()) return specs.status();
  const std::vector<std::vector<TensorSpec>> files = splitIntoFiles(*specs, options.max_file_bytes);
  ExportFiles out;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string name =
        files.size() == 1 ? std::string(kSingleFileName) : shardFileName(f + 1, files.size());
    out.paths.push_back((std::filesystem::path(options.dir) / name).string());
    absl::StatusOr<FileLayout> layout = layoutFile(files[f], {{"format", "pt"}});
    if (!layout.ok()) return layout.status();
    out.layouts.push_back(*std::move(layout));
    for (const TensorSpec& t : files[f]) out.file_of[t.name] = f;
  }
  if (files.size() > 1) out.index = indexJson(files);
  return out;
}

absl::Status writeOwnShards(const plan::Plan& plan,
                            const std::vector<checkpoint::ShardView>& shards,
                            const ExportFiles& files, std::vector<SafetensorsWriter>& writers) {
  std::map<std::string, bool> params;
  for (const plan::Buffer& b : plan.buffers) params[b.name] = b.role == plan::BufferRole::kParam;
  for (const checkpoint::ShardView& view : shards) {
    if (!params[view.name]) continue;
    if (view.dtype != checkpoint::DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("shard of '", view.name, "' is not f32"));
    }
    absl::StatusOr<HfSource> source = hfSourceOf(view.name);
    if (!source.ok()) return source.status();
    const std::vector<float> values = packedBox(view);
    if (absl::Status s =
            writeParameterBox(writers[files.file_of.at(source->tensor)], *source, view.box, values);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("exporting '", view.name, "': ", s.message()));
    }
  }
  for (SafetensorsWriter& w : writers) {
    if (absl::Status s = w.finish(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status publish(comm::Store& store, const std::string& key, const absl::Status& status) {
  return store.setString(key, status.ok() ? std::string("ok") : std::string(status.message()));
}

// The value another rank published under `key`, as a status.
absl::Status awaitVerdict(comm::Store& store, const std::string& key, absl::Duration timeout,
                          const std::string& who) {
  if (absl::Status s = store.wait({key}, timeout); !s.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        who, " did not report within ", absl::FormatDuration(timeout), ": ", s.message()));
  }
  absl::StatusOr<std::string> verdict = store.getString(key);
  if (!verdict.ok()) return verdict.status();
  if (*verdict == "ok") return absl::OkStatus();
  return absl::InternalError(absl::StrCat(who, " reports: ", *verdict));
}

}  // namespace

absl::Status exportParameters(const plan::Plan& plan,
                              const std::vector<checkpoint::ShardView>& shards, comm::Store& store,
                              int64_t rank, int64_t world_size, const ExportOptions& options) {
  absl::StatusOr<ExportFiles> files = layOut(plan, options);
  if (!files.ok()) return files.status();
  const std::string created = options.key + "/created";
  std::vector<SafetensorsWriter> writers;
  if (rank == 0) {
    absl::Status made;
    std::error_code error;
    std::filesystem::create_directories(options.dir, error);
    if (error) {
      made =
          absl::InternalError(absl::StrCat("cannot create ", options.dir, ": ", error.message()));
    }
    for (size_t f = 0; made.ok() && f < files->paths.size(); ++f) {
      absl::StatusOr<SafetensorsWriter> w =
          SafetensorsWriter::create(files->paths[f], files->layouts[f]);
      if (!w.ok())
        made = w.status();
      else
        writers.push_back(*std::move(w));
    }
    if (absl::Status s = publish(store, created, made); !s.ok()) return s;
    if (!made.ok()) return made;
  } else {
    if (absl::Status s = awaitVerdict(store, created, options.timeout, "rank 0"); !s.ok()) {
      return s;
    }
    for (size_t f = 0; f < files->paths.size(); ++f) {
      absl::StatusOr<SafetensorsWriter> w =
          SafetensorsWriter::join(files->paths[f], files->layouts[f]);
      if (!w.ok()) return w.status();
      writers.push_back(*std::move(w));
    }
  }
  const absl::Status written = writeOwnShards(plan, shards, *files, writers);
  const std::string done = options.key + "/done";
  if (rank != 0) {
    if (absl::Status s = publish(store, absl::StrCat(options.key, "/rank/", rank), written);
        !s.ok()) {
      return s;
    }
    if (!written.ok()) return written;
    return awaitVerdict(store, done, 2 * options.timeout, "rank 0");
  }
  absl::Status verdict = written;
  for (int64_t r = 1; verdict.ok() && r < world_size; ++r) {
    verdict = awaitVerdict(store, absl::StrCat(options.key, "/rank/", r), options.timeout,
                           absl::StrCat("rank ", r));
  }
  for (size_t f = 0; verdict.ok() && f < writers.size(); ++f) verdict = writers[f].commit();
  const std::string index = (std::filesystem::path(options.dir) / kIndexFileName).string();
  if (verdict.ok() && !files->index.empty()) {
    verdict = checkpoint::writeFileAtomically(index, files->index);
  } else if (verdict.ok()) {
    std::error_code ignored;  // a stale index would shadow the single file
    std::filesystem::remove(index, ignored);
  }
  if (absl::Status s = publish(store, done, verdict); !s.ok()) return s;
  return verdict;
}

}  // namespace loom::runtime::hf
