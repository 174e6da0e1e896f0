#include "runtime/hf/hf_executor.h"

namespace loom::runtime::hf {

absl::StatusOr<LoadReport> loadHfWeights(Executor& executor, const std::string& path) {
  absl::StatusOr<SafetensorsSet> set = SafetensorsSet::open(path);
  if (!set.ok()) return set.status();
  absl::StatusOr<std::vector<ParameterSource>> sources = matchParameters(executor.plan(), *set);
  if (!sources.ok()) return sources.status();
  if (absl::Status s = executor.loadParameters(
          [&](const plan::Buffer& param, const Box& box, std::span<float> out) {
            return readParameter(*set, *sources, param.name, box, out);
          });
      !s.ok()) {
    return s;
  }
  return LoadReport{set->source(), static_cast<int64_t>(sources->size()), set->bytesRead()};
}

absl::Status exportHfWeights(const Executor& executor, comm::Store& store, int64_t world_size,
                             const ExportOptions& options) {
  absl::StatusOr<std::vector<checkpoint::ShardView>> shards = executor.checkpointShards();
  if (!shards.ok()) return shards.status();
  return exportParameters(executor.plan(), *shards, store, executor.rank(), world_size, options);
}

}  // namespace loom::runtime::hf
