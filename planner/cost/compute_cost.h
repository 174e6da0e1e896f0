// What one compute op costs, as plain data: its class, element type, FLOPs,
// bytes moved and, for GEMMs, its m x k x n. The nn ops' formulas
// (op_work.h) produce it and the cost model (cost_model.h) prices it.
#ifndef LOOM_PLANNER_COST_COMPUTE_COST_H_
#define LOOM_PLANNER_COST_COMPUTE_COST_H_

#include <cstdint>
#include <string_view>

namespace loom::planner::cost {

enum class Dtype { kF32, kBF16, kF16 };

// "f32", "bf16", "f16".
std::string_view dtypeName(Dtype dtype);
// Bytes per element.
int64_t dtypeBytes(Dtype dtype);

// How an op uses the device.
enum class OpClass {
  kGemm,         // linear, matmul: tensor cores, shape-dependent efficiency
  kAttention,    // fused (flash) attention forward and backward
  kMemoryBound,  // elementwise, norms, softmax, losses, embeddings
  kFree,         // views (reshape): no kernel
};

struct ComputeCost {
  OpClass op_class = OpClass::kMemoryBound;
  Dtype dtype = Dtype::kF32;
  double flops = 0;
  // Bytes read and written.
  double bytes = 0;
  // GEMMs: the product's m x k times k x n (batch dims folded into m).
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_COMPUTE_COST_H_
