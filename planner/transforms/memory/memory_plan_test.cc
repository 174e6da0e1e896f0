// Tests of the memory plan against hand-counted bytes: a small fsdp=2 step
// (a gathered weight, activations, a reduce-scattered gradient, f32 and bf16
// parameters with their AdamW states), its async form, and the pass's
// attributes and budget refusal.
#include "planner/transforms/memory/memory_plan.h"

#include <string>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/memory/passes.h"

namespace loom::planner::memory {
namespace {

// Op indices: 0 gather, 1 linear, 2 free, 3 silu, 4 matmul, 5
// reduce_scatter, 6 return.
constexpr char kStep[] = R"mlir(
dist.mesh @mesh shape = [2] axes = ["fsdp"]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<4x16xf32> {nn.param},
                %b: tensor<8x16xbf16> {nn.param},
                %mw: tensor<4x16xf32> {dist.optimizer_state = "exp_avg"},
                %vw: tensor<4x16xf32> {dist.optimizer_state = "exp_avg_sq"},
                %mb: tensor<8x16xf32> {dist.optimizer_state = "exp_avg"},
                %vb: tensor<8x16xf32> {dist.optimizer_state = "exp_avg_sq"},
                %pb: tensor<8x16xf32> {dist.optimizer_state = "master"})
    -> (tensor<4x16xf32>, tensor<4x16xf32> {nn.grad_of = 1 : i64}) {
  %g = dist.all_gather %w on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<8x16xf32>
  %y = nn.linear %x, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  dist.free %g : tensor<8x16xf32>
  %s = nn.silu %y : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = nn.matmul %x, %s transpose_lhs : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %r = dist.reduce_scatter %p on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %y, %r : tensor<4x16xf32>, tensor<4x16xf32>
}
)mlir";

class MemoryPlanTest : public ::testing::Test {
 protected:
  MemoryPlanTest() {
    context_.loadDialect<mlir::func::FuncDialect, nn::NnDialect, dist::DistDialect>();
  }

  mlir::OwningOpRef<mlir::ModuleOp> parse(const char* source) {
    return mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
  }

  mlir::MLIRContext context_;
};

TEST_F(MemoryPlanTest, StepPeakMatchesHandCount) {
  auto module = parse(kStep);
  ASSERT_TRUE(module);
  const MemoryPlan plan = computeMemoryPlan(*module->getOps<mlir::func::FuncOp>().begin());

  // Per value: x 4*8*4 = 128, w 4*16*4 = 256, b 8*16*2 = 256, the five
  // AdamW states, g 512, y 256, s 256, p 512, r 256 bytes.
  ASSERT_EQ(plan.values.size(), 13u);
  const ValueLifetime& x = plan.values[0];
  EXPECT_EQ(x.role, BufferRole::kActivation);
  EXPECT_EQ(x.bytes, 128);
  EXPECT_EQ(x.first, -1);
  EXPECT_EQ(x.last, 4);
  EXPECT_EQ(plan.values[1].role, BufferRole::kParam);
  EXPECT_EQ(plan.values[1].last, 6);
  EXPECT_EQ(plan.values[2].bytes, 256);
  const ValueLifetime& g = plan.values[8];
  EXPECT_EQ(g.role, BufferRole::kGathered);
  EXPECT_EQ(g.bytes, 512);
  EXPECT_EQ(g.first, 0);
  EXPECT_EQ(g.last, 2);               // the free ends it
  EXPECT_EQ(plan.values[9].last, 6);  // y is returned
  EXPECT_EQ(plan.values[11].role, BufferRole::kActivation);
  EXPECT_EQ(plan.values[12].role, BufferRole::kGrad);

  // AdamW states are resident: w (f32, 64 elements) 2 * 256 = 512 of
  // moments; b (bf16, 128 elements) 2 * 512 of moments + a 512-byte f32
  // master copy.
  for (int i = 3; i < 8; ++i) {
    EXPECT_EQ(plan.values[i].role, BufferRole::kOptimizerState);
    EXPECT_EQ(plan.values[i].first, -1);
    EXPECT_EQ(plan.values[i].last, 6);
  }
  EXPECT_EQ(plan.values[7].bytes, 512);

  // Resident: params 512 + optimizer states 2048 = 2560. Live at op 4
  // (matmul): x 128 + y 256 + s 256 + p 512 = 1152, the most of any op
  // (op 1: 128 + 512 + 256 = 896; op 5: 256 + 512 + 256 = 1024).
  EXPECT_EQ(plan.peak_bytes, 2560 + 1152);
  EXPECT_EQ(plan.peak_index, 4);
  ASSERT_NE(plan.peak_op, nullptr);
  EXPECT_EQ(plan.peak_op->getName().getStringRef(), "nn.matmul");
  EXPECT_EQ(plan.at_peak[BufferRole::kParam], 512);
  EXPECT_EQ(plan.at_peak[BufferRole::kOptimizerState], 2048);
  EXPECT_EQ(plan.at_peak[BufferRole::kActivation], 1152);
  EXPECT_EQ(plan.at_peak[BufferRole::kGathered], 0);
  EXPECT_EQ(plan.at_peak[BufferRole::kGrad], 0);
}

TEST_F(MemoryPlanTest, AsyncGatherHoldsItsFutureUntilTheWait) {
  auto module = parse(R"mlir(
dist.mesh @mesh shape = [2] axes = ["fsdp"]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<4x16xf32> {nn.param}) -> tensor<4x16xf32> {
  %f = dist.all_gather_start %w on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> !dist.future<tensor<8x16xf32>>
  %s = nn.silu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = dist.wait %f : !dist.future<tensor<8x16xf32>>
  %y = nn.linear %s, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  dist.free %g : tensor<8x16xf32>
  return %y : tensor<4x16xf32>
}
)mlir");
  ASSERT_TRUE(module);
  const MemoryPlan plan = computeMemoryPlan(*module->getOps<mlir::func::FuncOp>().begin());
  ASSERT_EQ(plan.values.size(), 6u);
  const ValueLifetime& future = plan.values[2];
  EXPECT_EQ(future.role, BufferRole::kGathered);
  EXPECT_EQ(future.bytes, 512);
  EXPECT_EQ(future.first, 0);
  EXPECT_EQ(future.last, 2);
  const ValueLifetime& gathered = plan.values[4];
  EXPECT_EQ(gathered.role, BufferRole::kGathered);
  EXPECT_EQ(gathered.last, 4);
  // At the wait (op 2) the future and its tensor are both held: s 128 +
  // 512 + 512 over params 256 (x died at the silu; no optimizer states in
  // this IR).
  EXPECT_EQ(plan.peak_index, 2);
  EXPECT_EQ(plan.peak_bytes, 256 + 128 + 1024);
}

TEST_F(MemoryPlanTest, PassRecordsThePeakAndRefusesOverBudget) {
  auto module = parse(kStep);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&context_);
  pm.addPass(createPlanMemoryPlan());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto func = *module->getOps<mlir::func::FuncOp>().begin();
  auto peak = func->getAttrOfType<mlir::IntegerAttr>(kPeakBytesAttrName);
  ASSERT_TRUE(peak);
  EXPECT_EQ(peak.getInt(), 3712);
  auto memory = func->getAttrOfType<mlir::DictionaryAttr>(kMemoryAttrName);
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory.getAs<mlir::IntegerAttr>("activation").getInt(), 1152);
  EXPECT_EQ(memory.getAs<mlir::IntegerAttr>("peak_op").getInt(), 4);

  auto tight = parse(kStep);
  ASSERT_TRUE(tight);
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) message = diag.str();
  });
  mlir::PassManager refusing(&context_);
  // 3 KiB = 3072 bytes < 3712.
  refusing.addPass(createPlanMemoryPlan(PlanMemoryPlanOptions{3.0 / (1024 * 1024)}));
  EXPECT_TRUE(failed(refusing.run(*tight)));
  EXPECT_NE(message.find("plan needs 3.6 KiB per rank at its peak"), std::string::npos) << message;
  EXPECT_NE(message.find("got: 3712 > 3072 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("activations 1.1 KiB"), std::string::npos) << message;
  // Parameter state (2560) outweighs activations and gathers (1152).
  EXPECT_NE(message.find("a larger fsdp axis"), std::string::npos) << message;
}

}  // namespace
}  // namespace loom::planner::memory
