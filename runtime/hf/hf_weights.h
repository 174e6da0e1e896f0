// A plan's parameters from and to Hugging Face safetensors files. Loading:
// every rank matches the plan's parameters to the file's tensors (names,
// shapes, dtypes checked up front) and reads only its own shards' bytes.
// Export: every rank writes its own shards into the shared files, which
// rank 0 laid out and commits (protocol in docs/runtime_hf.md).
#ifndef LOOM_RUNTIME_HF_HF_WEIGHTS_H_
#define LOOM_RUNTIME_HF_HF_WEIGHTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store.h"
#include "plan/plan.h"
#include "runtime/checkpoint/shard_file.h"
#include "runtime/hf/hf_names.h"
#include "runtime/hf/safetensors.h"

namespace loom::runtime::hf {

// One parameter and the Hugging Face tensor it is read from.
struct ParameterSource {
  std::string param;
  HfSource source;
  std::string tensor;  // source.tensor, or source.tied_to for a tied head
};

// Matches every parameter of `plan` to a tensor of `set`. NotFound naming
// the tensor, the parameter and the file set when one is missing;
// InvalidArgument naming the tensor and its file when its shape is not the
// one the parameter needs.
absl::StatusOr<std::vector<ParameterSource>> matchParameters(const plan::Plan& plan,
                                                             const SafetensorsSet& set);

// Reads `box` of parameter `param` (one of `sources`) into `out`: the
// Executor::loadParameters fill.
absl::Status readParameter(const SafetensorsSet& set, const std::vector<ParameterSource>& sources,
                           const std::string& param, const Box& box, std::span<float> out);

// The Hugging Face tensors the plan's parameters export to, in plan order:
// a fused tensor once, in the parameters' dtype (F32 or BF16).
absl::StatusOr<std::vector<TensorSpec>> exportedTensors(const plan::Plan& plan);

struct ExportOptions {
  std::string dir;
  // Files of at most this much data; more than one file gets
  // model-0000k-of-0000n.safetensors and model.safetensors.index.json.
  int64_t max_file_bytes = int64_t{5} << 30;
  absl::Duration timeout = absl::Minutes(5);
  std::string key = "loom/hf_export";  // store prefix; one export per key
};

// Writes the parameters among `shards` (Executor::checkpointShards: each
// element on exactly one rank) into DIR's safetensors files. Every rank of
// the job calls it; the files are complete when it returns OK on rank 0.
absl::Status exportParameters(const plan::Plan& plan,
                              const std::vector<checkpoint::ShardView>& shards, comm::Store& store,
                              int64_t rank, int64_t world_size, const ExportOptions& options);

}  // namespace loom::runtime::hf

#endif  // LOOM_RUNTIME_HF_HF_WEIGHTS_H_
