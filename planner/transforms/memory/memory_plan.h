// Buffer lifetimes and peak bytes per rank of a per-rank (dist) function:
// what plan-memory-plan records, the exporter sizes and the report prints.
// The rules are in docs/planner_memory.md.
#ifndef LOOM_PLANNER_TRANSFORMS_MEMORY_MEMORY_PLAN_H_
#define LOOM_PLANNER_TRANSFORMS_MEMORY_MEMORY_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "plan/plan.h"

namespace loom::planner::memory {

// A buffer's role is the plan format's (plan/plan.h): one enum, one set of
// names, for the memory plan, the cost model and plan.json.
using BufferRole = plan::BufferRole;
inline constexpr int kNumRoles = plan::kNumRoles;

// Bytes per role, indexed by BufferRole.
struct MemoryBreakdown {
  std::array<int64_t, kNumRoles> bytes{};
  int64_t& operator[](BufferRole role) { return bytes[static_cast<int>(role)]; }
  int64_t operator[](BufferRole role) const { return bytes[static_cast<int>(role)]; }
  int64_t total() const;
};

// One SSA buffer: a function argument or an op result.
struct ValueLifetime {
  mlir::Value value;
  BufferRole role = BufferRole::kActivation;
  int64_t bytes = 0;
  // Indices of ops in the body; -1 is the function's entry. The buffer is
  // live at every op in [first, last], both ends included: at an op its
  // operands and results are held at once.
  int64_t first = -1;
  int64_t last = -1;
  // In host memory (dist::onHost): counted in the host peak, apart from
  // the device's.
  bool host = false;
};

// The most bytes live at once in one memory, where, and by role.
struct MemoryPeak {
  int64_t peak_bytes = 0;
  // The op index in the body (-1: on entry), null op on entry.
  int64_t peak_index = -1;
  mlir::Operation* peak_op = nullptr;
  MemoryBreakdown at_peak;
};

struct MemoryPlan {
  // Arguments in order, then op results in body order; values of types
  // without storage (no tensor, no future) and the results of
  // dist.optimizer_step and of dist.copy_into_device_start and its wait
  // (their operands' buffers, updated in place) are left out.
  std::vector<ValueLifetime> values;
  // Live device bytes at the peak, by role, and where:
  // the op index in the body (-1: on entry), null op on entry.
  int64_t peak_bytes = 0;
  int64_t peak_index = -1;
  mlir::Operation* peak_op = nullptr;
  MemoryBreakdown at_peak;
  // The same for host memory (offloaded states and gradients; zero bytes
  // without offload).
  MemoryPeak host;
};

// Bytes of a tensor or of the tensor a !dist.future carries (element bits
// rounded up to bytes); 0 for other types.
int64_t storageBytes(mlir::Type type);

// Computes lifetimes, roles and the peak of `func`'s body (one block).
MemoryPlan computeMemoryPlan(mlir::func::FuncOp func);

// "params 1.5 GiB, grads ..., optimizer states ..., activations ...,
// gathered ...": a breakdown for messages and the report.
std::string formatBreakdown(const MemoryBreakdown& breakdown);

// 1536 -> "1.5 KiB"; below 1 KiB, "N B".
std::string formatBytes(int64_t bytes);

// How to fit a plan whose peak has `breakdown`: more fsdp and tp when
// parameter state dominates, a smaller batch or tp when activations do.
std::string suggestFix(const MemoryBreakdown& breakdown);

}  // namespace loom::planner::memory

#endif  // LOOM_PLANNER_TRANSFORMS_MEMORY_MEMORY_PLAN_H_
