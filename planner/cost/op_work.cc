// The nn ops' work formulas (see op_work.h; the table is in
// docs/planner_nn.md).
#include "planner/cost/op_work.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace loom::planner::cost {
namespace {

int64_t elements(const OpDesc& op, size_t operand) { return op.operands[operand].numElements(); }
int64_t resultElements(const OpDesc& op) { return op.results[0].numElements(); }

// Multiply-adds of causal attention's two matrix products (Q K^T and P V):
// only the S(S+1)/2 unmasked (query, key) pairs count, as flash kernels skip
// masked blocks; softmax and scaling are not counted. Query [B, S, H, D].
int64_t causalAttentionMacs(const OpDesc& op) {
  const std::span<const int64_t> q = op.operands[0].shape;
  return q[0] * q[2] * q[3] * (q[1] * (q[1] + 1) / 2);
}

int64_t linearFlops(const OpDesc& op) {
  const int64_t in = op.operands[1].shape[0];
  const int64_t biasAdds = op.operands.size() > 2 ? resultElements(op) : 0;
  return 2 * resultElements(op) * in + biasAdds;
}

int64_t matmulFlops(const OpDesc& op) {
  if (op.transpose_lhs) {
    // [T..., m] x [T..., n] -> [m, n]: T * m * n multiply-adds.
    return 2 * elements(op, 0) * op.operands[1].shape.back();
  }
  return 2 * resultElements(op) * op.operands[0].shape.back();
}

using Formula = int64_t (*)(const OpDesc&);

// FLOPs per element of an operand or the result: `per` times its count.
template <int64_t per>
int64_t perInput(const OpDesc& op) {
  return per * elements(op, 0);
}
template <int64_t per>
int64_t perResult(const OpDesc& op) {
  return per * resultElements(op);
}
int64_t none(const OpDesc&) { return 0; }

const std::unordered_map<std::string_view, Formula>& formulas() {
  static const auto* const kFormulas = new std::unordered_map<std::string_view, Formula>{
      {"nn.embedding", none},
      {"nn.linear", linearFlops},
      {"nn.bias_add", perResult<1>},
      {"nn.matmul", matmulFlops},
      {"nn.rms_norm", perInput<4>},
      {"nn.layer_norm", perInput<7>},
      {"nn.rope", perInput<3>},
      {"nn.attention", [](const OpDesc& op) { return 2 * 2 * causalAttentionMacs(op); }},
      {"nn.silu", perInput<4>},
      {"nn.gelu", perInput<9>},
      {"nn.add", perResult<1>},
      {"nn.mul", perResult<1>},
      {"nn.softmax", perInput<5>},
      {"nn.reshape", none},
      {"nn.transpose", none},
      {"nn.cross_entropy", perInput<4>},
      {"nn.embedding_grad", [](const OpDesc& op) { return elements(op, 1); }},
      {"nn.reduce_sum", perInput<1>},
      {"nn.rms_norm_grad", perInput<11>},
      {"nn.layer_norm_grad", perInput<17>},
      // Five matrix products: Q K^T recomputed, dV, dP, dQ and dK.
      {"nn.attention_grad", [](const OpDesc& op) { return 5 * 2 * causalAttentionMacs(op); }},
      {"nn.softmax_grad", perInput<4>},
      {"nn.silu_grad", perInput<10>},
      {"nn.gelu_grad", perInput<18>},
      {"nn.cross_entropy_grad", perInput<6>},
      // nn.cross_entropy's 4 per logit, split: the max, then the shift, exp
      // and sum; the loss adds a log and a subtraction per token.
      {"nn.vocab_max", perInput<1>},
      {"nn.vocab_stats", perInput<3>},
      {"nn.vocab_cross_entropy", perInput<1>},
      {"nn.vocab_cross_entropy_grad", perInput<6>},
  };
  return *kFormulas;
}

}  // namespace

std::string_view dtypeName(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32:
      return "f32";
    case Dtype::kBF16:
      return "bf16";
    case Dtype::kF16:
      return "f16";
  }
  return "f32";
}

int64_t dtypeBytes(Dtype dtype) { return dtype == Dtype::kF32 ? 4 : 2; }

int64_t TensorDesc::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<int64_t> opFlops(const OpDesc& op) {
  auto it = formulas().find(op.name);
  if (it == formulas().end()) return std::nullopt;
  return it->second(op);
}

int64_t opBytesMoved(const OpDesc& op) {
  if (op.name == "nn.embedding") {
    // Reads the ids and only the looked-up rows, writes the result.
    return op.operands[0].bytes() + 2 * op.results[0].bytes();
  }
  if (op.name == "nn.embedding_grad") {
    // Reads ids and result_grad, reads and writes the updated rows, and
    // zero-fills the table.
    return op.operands[0].bytes() + 3 * op.operands[1].bytes() + op.results[0].bytes();
  }
  int64_t bytes = 0;
  for (const TensorDesc& t : op.operands) bytes += t.bytes();
  for (const TensorDesc& t : op.results) bytes += t.bytes();
  return bytes;
}

std::optional<ComputeCost> computeCost(const OpDesc& op) {
  const std::optional<int64_t> flops = opFlops(op);
  if (!flops) return std::nullopt;
  ComputeCost cost;
  const TensorDesc& result = op.results[0];
  cost.dtype = result.dtype;
  cost.flops = static_cast<double>(*flops);
  cost.bytes = static_cast<double>(opBytesMoved(op));
  if (op.name == "nn.linear" || op.name == "nn.matmul") {
    cost.op_class = OpClass::kGemm;
    const int64_t n = result.shape.empty() ? 1 : result.shape.back();
    const int64_t m = n > 0 ? result.numElements() / n : 0;
    cost.m = m;
    cost.n = n;
    cost.k = m > 0 && n > 0 ? static_cast<int64_t>(cost.flops / (2.0 * m * n) + 0.5) : 0;
  } else if (op.name == "nn.attention" || op.name == "nn.attention_grad") {
    cost.op_class = OpClass::kAttention;
  } else if (op.name == "nn.reshape") {
    cost.op_class = OpClass::kFree;
  }
  return cost;
}

}  // namespace loom::planner::cost
