// plan-memory-plan: records each function's peak bytes per rank and its
// breakdown, and refuses a peak over the memory budget (see passes.td).
#include <cmath>
#include <cstdint>
#include <string>

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

class PlanMemoryPlanPass : public impl::PlanMemoryPlanBase<PlanMemoryPlanPass> {
 public:
  using PlanMemoryPlanBase::PlanMemoryPlanBase;

  void runOnOperation() override {
    if (memoryBudgetGb < 0) {
      getOperation().emitError() << absl::StrFormat(
          "memory-budget-gb must be >= 0, got: %g; set the device memory in GiB (0: no check)",
          static_cast<double>(memoryBudgetGb));
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      const MemoryPlan plan = computeMemoryPlan(func);
      mlir::Builder builder(func.getContext());
      llvm::SmallVector<mlir::NamedAttribute> entries;
      for (int r = 0; r < kNumRoles; ++r) {
        entries.push_back(builder.getNamedAttr(plan::roleName(static_cast<BufferRole>(r)),
                                               builder.getI64IntegerAttr(plan.at_peak.bytes[r])));
      }
      entries.push_back(
          builder.getNamedAttr("peak_op", builder.getI64IntegerAttr(plan.peak_index)));
      func->setAttr(kPeakBytesAttrName, builder.getI64IntegerAttr(plan.peak_bytes));
      func->setAttr(kMemoryAttrName, builder.getDictionaryAttr(entries));
      if (memoryBudgetGb == 0) continue;
      const auto budget = static_cast<int64_t>(std::floor(memoryBudgetGb * kBytesPerGiB));
      if (plan.peak_bytes <= budget) continue;
      mlir::InFlightDiagnostic error =
          func.emitError() << absl::StrFormat(
              "plan needs %s per rank at its peak, over the %g GiB device memory (got: %d > %d "
              "bytes): %s; %s",
              formatBytes(plan.peak_bytes), static_cast<double>(memoryBudgetGb), plan.peak_bytes,
              budget, formatBreakdown(plan.at_peak), suggestFix(plan.at_peak));
      if (plan.peak_op) error.attachNote(plan.peak_op->getLoc()) << "the peak is reached here";
      return signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace loom::planner::memory
