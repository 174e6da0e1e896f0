// Hugging Face weights in and out of a running Executor: the two calls
// //tools:train makes for --init_from_hf and --export_hf.
#ifndef LOOM_RUNTIME_HF_HF_EXECUTOR_H_
#define LOOM_RUNTIME_HF_HF_EXECUTOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "comm/store.h"
#include "runtime/executor/executor.h"
#include "runtime/hf/hf_weights.h"

namespace loom::runtime::hf {

struct LoadReport {
  std::string source;      // the file or index read
  int64_t tensors = 0;     // parameters set
  int64_t bytes_read = 0;  // by this rank
};

// Opens `path` (file, index or directory), checks every parameter against
// it and sets this rank's shards of the parameters and master copies.
absl::StatusOr<LoadReport> loadHfWeights(Executor& executor, const std::string& path);

// Every rank calls it: the parameters as Hugging Face safetensors in
// options.dir (exportParameters).
absl::Status exportHfWeights(const Executor& executor, comm::Store& store, int64_t world_size,
                             const ExportOptions& options);

}  // namespace loom::runtime::hf

#endif  // LOOM_RUNTIME_HF_HF_EXECUTOR_H_
