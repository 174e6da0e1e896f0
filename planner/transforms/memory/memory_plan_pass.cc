// plan-memory-plan: records each function's peak bytes per rank and its
// breakdown, and refuses a peak over the memory budget (see passes.td).
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "absl/strings/str_format.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/memory/passes.h"

namespace loom::planner::memory {

#define GEN_PASS_DEF_PLANMEMORYPLAN
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/memory/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// The attribute of a peak's breakdown: bytes per role and the peak op.
mlir::DictionaryAttr breakdownAttr(mlir::Builder& builder, const MemoryBreakdown& at_peak,
                                   int64_t peak_index) {
  llvm::SmallVector<mlir::NamedAttribute> entries;
  for (int r = 0; r < kNumRoles; ++r) {
    entries.push_back(builder.getNamedAttr(plan::roleName(static_cast<BufferRole>(r)),
                                           builder.getI64IntegerAttr(at_peak.bytes[r])));
  }
  entries.push_back(builder.getNamedAttr("peak_op", builder.getI64IntegerAttr(peak_index)));
  return builder.getDictionaryAttr(entries);
}

class PlanMemoryPlanPass : public impl::PlanMemoryPlanBase<PlanMemoryPlanPass> {
 public:
  using PlanMemoryPlanBase::PlanMemoryPlanBase;

  void runOnOperation() override {
    for (auto [name, value, what] :
         {std::tuple{"memory-budget-gb", static_cast<double>(memoryBudgetGb), "device"},
          std::tuple{"host-memory-budget-gb", static_cast<double>(hostMemoryBudgetGb), "host"}}) {
      if (value >= 0) continue;
      getOperation().emitError() << absl::StrFormat(
          "%s must be >= 0, got: %g; set the %s memory in GiB (0: no check)", name, value, what);
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      const MemoryPlan plan = computeMemoryPlan(func);
      mlir::Builder builder(func.getContext());
      func->setAttr(kPeakBytesAttrName, builder.getI64IntegerAttr(plan.peak_bytes));
      func->setAttr(kMemoryAttrName, breakdownAttr(builder, plan.at_peak, plan.peak_index));
      if (plan.host.peak_bytes > 0) {
        func->setAttr(kHostPeakBytesAttrName, builder.getI64IntegerAttr(plan.host.peak_bytes));
        func->setAttr(kHostMemoryAttrName,
                      breakdownAttr(builder, plan.host.at_peak, plan.host.peak_index));
      }
      if (failed(checkBudget(func, plan.peak_bytes, plan.at_peak, plan.peak_op, memoryBudgetGb,
                             "device memory", suggestFix(plan.at_peak))) ||
          failed(checkBudget(func, plan.host.peak_bytes, plan.host.at_peak, plan.host.peak_op,
                             hostMemoryBudgetGb, "host memory for offloaded buffers",
                             "offload less (--offload=none keeps the states on the device), "
                             "shard over more ranks, or raise --host-memory-gb to what the host "
                             "can pin per rank"))) {
        return signalPassFailure();
      }
    }
  }

 private:
  // Refuses a peak over `budget_gb` (0: no budget) at `func`, with the
  // breakdown and `fix`, and a note at the peak op.
  static mlir::LogicalResult checkBudget(mlir::func::FuncOp func, int64_t peak,
                                         const MemoryBreakdown& at_peak, mlir::Operation* peak_op,
                                         double budget_gb, const char* memory,
                                         const std::string& fix) {
    if (budget_gb == 0) return mlir::success();
    const auto budget = static_cast<int64_t>(std::floor(budget_gb * kBytesPerGiB));
    if (peak <= budget) return mlir::success();
    mlir::InFlightDiagnostic error =
        func.emitError() << absl::StrFormat(
            "plan needs %s per rank at its peak, over the %g GiB %s (got: %d > %d bytes): %s; %s",
            formatBytes(peak), budget_gb, memory, peak, budget, formatBreakdown(at_peak), fix);
    if (peak_op) error.attachNote(peak_op->getLoc()) << "the peak is reached here";
    return error;
  }
};

}  // namespace
}  // namespace loom::planner::memory
