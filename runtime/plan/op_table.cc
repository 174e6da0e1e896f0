// The op table (op_table.h). Arity ranges follow the ops' definitions in
// planner/dialect/{nn,dist}/ir/*.td and what the exporter writes (operands
// and results that are plan buffers).
#include "runtime/plan/op_table.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_join.h"

namespace loom::runtime {
namespace {

using F = OpFamily;

std::vector<OpInfo> makeTable() {
  return {
      // Forward compute.
      {"nn.embedding", F::kCompute, 2, 2, 1, 1},
      {"nn.linear", F::kCompute, 2, 3, 1, 1},
      {"nn.bias_add", F::kCompute, 2, 2, 1, 1},
      {"nn.matmul", F::kCompute, 2, 2, 1, 1},
      {"nn.rms_norm", F::kCompute, 2, 2, 1, 1},
      {"nn.layer_norm", F::kCompute, 3, 3, 1, 1},
      {"nn.rope", F::kCompute, 1, 1, 1, 1},
      {"nn.attention", F::kCompute, 3, 3, 1, 1},
      {"nn.silu", F::kCompute, 1, 1, 1, 1},
      {"nn.gelu", F::kCompute, 1, 1, 1, 1},
      {"nn.add", F::kCompute, 2, 2, 1, 1},
      {"nn.mul", F::kCompute, 2, 2, 1, 1},
      {"nn.softmax", F::kCompute, 1, 1, 1, 1},
      {"nn.reshape", F::kCompute, 1, 1, 1, 1},
      {"nn.cross_entropy", F::kCompute, 2, 2, 1, 1},
      {"nn.vocab_max", F::kCompute, 1, 1, 1, 1},
      {"nn.vocab_stats", F::kCompute, 3, 3, 1, 1},
      {"nn.vocab_cross_entropy", F::kCompute, 1, 1, 1, 1},
      // Backward compute.
      {"nn.embedding_grad", F::kCompute, 2, 2, 1, 1},
      {"nn.reduce_sum", F::kCompute, 1, 1, 1, 1},
      {"nn.rms_norm_grad", F::kCompute, 3, 3, 2, 2},
      {"nn.layer_norm_grad", F::kCompute, 3, 3, 3, 3},
      {"nn.attention_grad", F::kCompute, 4, 4, 3, 3},
      {"nn.softmax_grad", F::kCompute, 2, 2, 1, 1},
      {"nn.silu_grad", F::kCompute, 2, 2, 1, 1},
      {"nn.gelu_grad", F::kCompute, 2, 2, 1, 1},
      {"nn.cross_entropy_grad", F::kCompute, 3, 3, 1, 1},
      {"nn.vocab_cross_entropy_grad", F::kCompute, 5, 5, 1, 1},
      // Collectives, blocking and async.
      {"dist.all_gather", F::kCollective, 1, 1, 1, 1},
      {"dist.all_gather_start", F::kCollective, 1, 1, 1, 1, /*async_start=*/true},
      {"dist.reduce_scatter", F::kCollective, 1, 1, 1, 1},
      {"dist.reduce_scatter_start", F::kCollective, 1, 1, 1, 1, /*async_start=*/true},
      {"dist.all_reduce", F::kCollective, 1, 1, 1, 1},
      {"dist.all_reduce_start", F::kCollective, 1, 1, 1, 1, /*async_start=*/true},
      {"dist.wait", F::kWait, 1, 1, 1, 1},
      // Buffers.
      {"dist.bucket", F::kBuffer, 1, -1, 1, 1},
      {"dist.unbucket", F::kBuffer, 1, 1, 1, -1},
      {"dist.slice", F::kBuffer, 1, 1, 1, 1},
      {"dist.free", F::kBuffer, 1, 1, 0, 0},
      // The optimizer: param, grad, exp_avg, exp_avg_sq and, for a non-f32
      // param, its f32 master copy, all updated in place.
      {"dist.optimizer_step", F::kOptimizer, 4, 5, 3, 4, false, /*in_place=*/true},
  };
}

}  // namespace

const std::vector<OpInfo>& opTable() {
  static const std::vector<OpInfo>* const kTable = new std::vector<OpInfo>(makeTable());
  return *kTable;
}

const OpInfo* findOp(std::string_view name) {
  for (const OpInfo& info : opTable()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string_view opNames() {
  static const std::string* const kNames = [] {
    std::vector<std::string> names;
    for (const OpInfo& info : opTable()) names.emplace_back(info.name);
    std::sort(names.begin(), names.end());
    return new std::string(absl::StrJoin(names, ", "));
  }();
  return *kNames;
}

}  // namespace loom::runtime
